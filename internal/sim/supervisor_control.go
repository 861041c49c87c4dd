package sim

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// The supervisor from outside: its runtime directory, starting it at boot,
// recognising it among the host's processes, and stopping it (zoneadm halt
// and shutdown, stop-all).

// runDir is the per-zone runtime directory: supervisor log and bin links.
func (h *host) runDir(zone string) string { return filepath.Join(h.root, "run", zone) }

// zoneBinDir holds links to the inside-zone commands; zlogin and services
// put it first on PATH.
func (h *host) zoneBinDir(zone string) string { return filepath.Join(h.runDir(zone), "bin") }

// ensureZoneBin (re)creates the zone's command links and root marker.
func ensureZoneBin(h *host, zone string) error {
	exe, err := selfExe()
	if err != nil {
		return err
	}
	dir := h.zoneBinDir(zone)
	if err := linkCommands(dir, exe, zoneCommands); err != nil {
		return err
	}
	marker, want := filepath.Join(dir, rootMarker), []byte(h.root+"\n")
	if b, err := os.ReadFile(marker); err == nil && bytes.Equal(b, want) {
		return nil // every zlogin checks; only the first writes
	}
	return writeFileAtomic(marker, want)
}

// procInfo is what the simulator reads from /proc/PID/stat.
type procInfo struct {
	state byte
	ppid  int
	pgid  int
}

func procStat(pid int) (procInfo, bool) {
	b, err := fs.ReadFile(hostProc, fmt.Sprintf("%d/stat", pid))
	if err != nil {
		return procInfo{}, false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 || i+2 >= len(s) {
		return procInfo{}, false
	}
	var st procInfo
	if _, err := fmt.Sscanf(s[i+2:], "%c %d %d", &st.state, &st.ppid, &st.pgid); err != nil {
		return procInfo{}, false
	}
	return st, true
}

// processAlive treats a zombie as dead: on hosts whose init does not reap
// orphans, a finished process can linger as a zombie forever.
func processAlive(pid int) bool {
	if pid <= 0 {
		return false
	}
	if err := syscall.Kill(pid, 0); err != nil && !errors.Is(err, syscall.EPERM) {
		return false
	}
	st, ok := procStat(pid)
	return ok && st.state != 'Z'
}

// groupAlive reports a process group with a live (non-zombie) member.
func groupAlive(pgid int) bool {
	if pgid <= 0 || syscall.Kill(-pgid, 0) != nil {
		return false
	}
	return len(groupMembers(pgid)) > 0
}

// isSupervisorOf checks, before signalling a recorded pid, that it is still
// the supervisor of that zone and not a recycled pid.
func isSupervisorOf(pid int, root, zone string) bool {
	b, err := fs.ReadFile(hostProc, fmt.Sprintf("%d/cmdline", pid))
	if err != nil {
		return false
	}
	args := strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
	return len(args) >= 4 && args[1] == "zoneadmd" && args[2] == root && args[3] == zone
}

// startSupervisor launches the zone's supervisor and waits until it has
// taken the zone to running.
func startSupervisor(h *host, zone, bootID string) error {
	exe, err := selfExe()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(h.runDir(zone), 0o755); err != nil {
		return fmt.Errorf("create run dir: %w", err)
	}
	// The supervisor's log names every service and pid of the zone:
	// the host's to read, not the zones'.
	logf, err := os.OpenFile(filepath.Join(h.runDir(zone), "zoneadmd.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("open zoneadmd log: %w", err)
	}
	defer logf.Close()
	if err := logf.Chmod(0o600); err != nil {
		return fmt.Errorf("open zoneadmd log: %w", err)
	}
	r, w, err := os.Pipe()
	if err != nil {
		return fmt.Errorf("pipe: %w", err)
	}
	defer r.Close()
	cmd := exec.Command(exe, "zoneadmd", h.root, zone, bootID)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.ExtraFiles = []*os.File{w}
	cmd.Env = supervisorEnv(os.Environ())
	// Its own session: the supervisor must outlive this zoneadm and must
	// not get the terminal's signals.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if h.nodeNetns() != "" {
		// The zone's network, mount and UTS namespaces, which end with
		// the zone.
		cmd.SysProcAttr.Cloneflags = zoneCloneflags
	}
	if err := cmd.Start(); err != nil {
		w.Close()
		return fmt.Errorf("could not start zoneadmd: %w", err)
	}
	w.Close()
	cmd.Process.Release()
	r.SetReadDeadline(time.Now().Add(30 * time.Second))
	line, err := bufio.NewReader(r).ReadString('\n')
	line = strings.TrimSpace(line)
	switch {
	case line == "ok":
		return nil
	case line != "":
		return errors.New(strings.TrimPrefix(line, "error: "))
	}
	return fmt.Errorf("zoneadmd exited during boot (%v); see %s", err, filepath.Join(h.runDir(zone), "zoneadmd.log"))
}

// supervisorEnv is the environment a supervisor starts with: the caller's,
// without one-off faults, and GOMAXPROCS=1 (one thread fewer, less memory
// per zone). Its services do not inherit it (methodEnv).
func supervisorEnv(env []string) []string {
	return append(envWithout(env, EnvFaults, "GOMAXPROCS"), "GOMAXPROCS=1")
}

func envWithout(env []string, keys ...string) []string {
	var out []string
	for _, kv := range env {
		skip := false
		for _, k := range keys {
			if strings.HasPrefix(kv, k+"=") {
				skip = true
			}
		}
		if !skip {
			out = append(out, kv)
		}
	}
	return out
}

// stopSupervisor asks a supervisor to shut its zone down (gracefully or at
// once) and waits for it to exit, killing it if it does not.
func stopSupervisor(h *host, zone string, pid int, graceful bool) {
	if pid <= 0 || !isSupervisorOf(pid, h.root, zone) {
		return
	}
	sig, wait := sigHalt, 5*time.Second
	if graceful {
		sig, wait = sigShutdown, 10*time.Minute
	}
	syscall.Kill(pid, sig)
	deadline := time.Now().Add(wait)
	for processAlive(pid) && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if processAlive(pid) {
		syscall.Kill(pid, syscall.SIGKILL)
	}
}

// killServiceGroups is the last resort when a supervisor died without
// cleaning up: kill the recorded process groups of the zone's services.
// The groups are signalled without first looking for a live member
// (groupAlive reads the whole process table): a group of zombies alone
// takes SIGKILL harmlessly, and every zone halted at once scanning the
// table for each service made a stop of 1,500 zones take minutes.
func killServiceGroups(z *Zone) {
	for _, s := range z.Services {
		if s.PID > 0 {
			syscall.Kill(-s.PID, syscall.SIGKILL)
		}
	}
}

// stopAllAtOnce bounds the zones stop-all halts at once unless told
// otherwise (--at-once): every node of a machine stops at the same time,
// and thousands of zones exiting together would only queue for the CPU.
// A machine of many nodes bounds it further: at 16 a node, 50 nodes' 800
// halts at once starved each zone's supervisor past its 5 s (1,500 zones
// took 124–165 s to stop).
const stopAllAtOnce = 16

// stopAll halts every zone of the host, atOnce at a time, and kills what
// is left.
func stopAll(h *host, atOnce int) error {
	stopNatd(h)
	h.clearKernelNAT()
	all, err := h.listZones()
	if err != nil {
		return err
	}
	var zones []*Zone
	for _, z := range all {
		if z.Name != "global" && inKernel(z.State) {
			zones = append(zones, z)
		}
	}
	var wg sync.WaitGroup
	slots := make(chan struct{}, max(atOnce, 1))
	for _, z := range zones {
		slots <- struct{}{}
		wg.Go(func() {
			defer func() { <-slots }()
			stopSupervisor(h, z.Name, z.SupervisorPID, false)
			killServiceGroups(z)
		})
	}
	wg.Wait()
	err = h.update(func(st *State) bool {
		for _, z := range st.zones() {
			if z.Name == "global" || !inKernel(z.State) {
				continue
			}
			if z = st.zone(z.Name); z != nil && inKernel(z.State) {
				leaveKernel(st, z)
			}
		}
		return true
	})
	if err != nil {
		return err
	}
	// A zone's link may vanish with its namespace meanwhile: what could
	// not be removed is logged, not fatal.
	if err := h.clearNodeNet(); err != nil {
		h.netLog("stop-all: %v", err)
	}
	// The zones are gone: nothing of the host stays mounted (the
	// filesystems' images keep their files for the next command).
	if h.enforcesStorage() {
		return h.update(func(*State) bool { h.unmountStorage(); return false })
	}
	return nil
}
