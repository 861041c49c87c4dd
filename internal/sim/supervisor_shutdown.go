package sim

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"syscall"
	"time"
)

// Ending a zone: a graceful shutdown through the stop methods, and a halt
// that kills everything the zone left.

// shutdown stops every service with its stop method and waits for all of
// them (killing those past their stop timeout), then exits.
func (sv *supervisor) shutdown(sigs chan os.Signal) {
	for _, p := range sv.procs {
		p.restartNext = false
		p.restartAt = time.Time{}
		if p.pid != 0 && !p.stopping {
			sv.stop(p)
		}
	}
	for {
		running := false
		for _, p := range sv.procs {
			if p.pid == 0 {
				continue
			}
			if p.groupOnly && !p.groupAlive() {
				p.pid = 0
				continue
			}
			running = true
			if time.Now().After(p.stopUntil) {
				syscall.Kill(-p.pid, syscall.SIGKILL)
			}
		}
		if !running {
			break
		}
		select {
		case s := <-sigs:
			if s == sigHalt || s == syscall.SIGINT {
				sv.halt()
				return
			}
		case <-time.After(20 * time.Millisecond):
		}
		sv.reapQuiet()
	}
	sv.killEverything()
}

// reapQuiet reaps children and clears the pids of services that ended.
func (sv *supervisor) reapQuiet() {
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
		if pid <= 0 || err != nil {
			return
		}
		for _, p := range sv.procs {
			if p.pid == pid && !p.groupOnly {
				if groupAlive(pid) {
					syscall.Kill(-pid, syscall.SIGKILL)
				}
				p.pid = 0
			}
			if p.stopHelper == pid {
				p.stopHelper = 0
				if p.pid != 0 {
					syscall.Kill(-p.pid, syscall.SIGKILL)
				}
			}
		}
	}
}

// halt kills every process of the zone at once.
func (sv *supervisor) halt() {
	for _, p := range sv.procs {
		if p.pid != 0 {
			syscall.Kill(-p.pid, syscall.SIGKILL)
		}
		if p.stopHelper != 0 {
			syscall.Kill(-p.stopHelper, syscall.SIGKILL)
		}
	}
	sv.killEverything()
}

// killEverything kills any child left (a daemon that left its process
// group is still our child, being reparented to us; in isolation mode the
// zone's init, whose death kills every process of the zone) and reaps
// them all, so no process and no zombie of the zone survives the
// supervisor.
func (sv *supervisor) killEverything() {
	deadline := time.Now().Add(3 * time.Second)
	self := os.Getpid()
	for time.Now().Before(deadline) {
		for _, pid := range childrenOf(self) {
			syscall.Kill(pid, syscall.SIGKILL)
		}
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
		if errors.Is(err, syscall.ECHILD) {
			return
		}
		if pid <= 0 {
			time.Sleep(5 * time.Millisecond)
		}
	}
	sv.logger.Printf("some processes did not exit")
}

// childrenOf lists the live processes whose parent is pid, from the
// kernel's list of each of its threads' children. Scanning every process
// of the machine instead made a stop of n zones cost n times the whole
// process table: 2,600 zones took minutes to halt.
func childrenOf(pid int) []int {
	tasks, err := fs.ReadDir(hostProc, fmt.Sprintf("%d/task", pid))
	if err != nil {
		return scanChildrenOf(pid)
	}
	var out []int
	for _, t := range tasks {
		b, err := fs.ReadFile(hostProc, fmt.Sprintf("%d/task/%s/children", pid, t.Name()))
		if err != nil {
			return scanChildrenOf(pid) // a kernel without the lists
		}
		for _, f := range strings.Fields(string(b)) {
			var p int
			if _, err := fmt.Sscan(f, &p); err != nil {
				continue
			}
			if st, ok := procStat(p); ok && st.ppid == pid && st.state != 'Z' {
				out = append(out, p)
			}
		}
	}
	return out
}

// scanChildrenOf is childrenOf by a scan of every process.
func scanChildrenOf(pid int) []int {
	entries, err := fs.ReadDir(hostProc, ".")
	if err != nil {
		return nil
	}
	var out []int
	for _, e := range entries {
		var p int
		if _, err := fmt.Sscan(e.Name(), &p); err != nil {
			continue
		}
		if st, ok := procStat(p); ok && st.ppid == pid && st.state != 'Z' {
			out = append(out, p)
		}
	}
	return out
}
