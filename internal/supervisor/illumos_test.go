package supervisor

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// SMF stops a service by sending SIGTERM to all of its processes, and may
// do so as soon as the service has started. The wrapper must stop with its
// command whenever the signal comes: before its trap is set, just after
// it (the moment a trap set before the fork lost the signal: the child had
// not yet reached its command), or later.
func TestTheExitStatusWrapperStopsWhateverMomentSIGTERMComes(t *testing.T) {
	argv := ExitStatusWrapper("c", "", []string{"sleep", "1000"})
	if argv[0] != "exec" {
		t.Fatalf("wrapper %q does not exec its shell", argv)
	}
	for i := range 300 {
		trapped := i%3 != 0 // every third attempt signals at once
		dir := t.TempDir()
		cmd := exec.Command(argv[1], argv[2:]...)
		cmd.Dir = dir
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		pgid := cmd.Process.Pid
		t.Cleanup(func() { syscall.Kill(-pgid, syscall.SIGKILL) })
		for deadline := time.Now().Add(10 * time.Second); trapped && !catchesTERM(pgid); {
			if time.Now().After(deadline) {
				t.Fatalf("attempt %d: the wrapper never trapped SIGTERM", i)
			}
		}
		syscall.Kill(-pgid, syscall.SIGTERM)
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		var err error
		select {
		case err = <-done:
		case <-time.After(10 * time.Second):
			t.Fatalf("attempt %d (trap set: %t): the wrapper outlived SIGTERM", i, trapped)
		}
		for deadline := time.Now().Add(10 * time.Second); len(groupMembers(pgid)) > 0; time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("attempt %d (trap set: %t): the command outlived SIGTERM", i, trapped)
			}
		}
		if !trapped {
			continue // the shell may have ended before its trap, with no record
		}
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 96 {
			t.Fatalf("attempt %d: the wrapper ended with %v, want exit status 96", i, err)
		}
		rec, err := os.ReadFile(filepath.Join(dir, exitRecordDir, "c"))
		if err != nil || strings.TrimSpace(string(rec)) != "143" {
			t.Fatalf("attempt %d: exit record %q, %v; want 143 (SIGTERM)", i, rec, err)
		}
	}
}

// catchesTERM reports whether process pid has a handler for SIGTERM.
func catchesTERM(pid int) bool {
	for _, line := range strings.Split(procFile(pid, "status"), "\n") {
		if mask, ok := strings.CutPrefix(line, "SigCgt:"); ok {
			var bits uint64
			fmt.Sscanf(strings.TrimSpace(mask), "%x", &bits)
			return bits&(1<<(uint(syscall.SIGTERM)-1)) != 0
		}
	}
	return false
}

// groupMembers lists the live (not zombie) processes of a process group.
func groupMembers(pgid int) []int {
	entries, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range entries {
		var pid int
		if _, err := fmt.Sscan(e.Name(), &pid); err != nil {
			continue
		}
		stat := procFile(pid, "stat")
		i := strings.LastIndexByte(stat, ')')
		if i < 0 {
			continue
		}
		var state byte
		var ppid, pg int
		if _, err := fmt.Sscanf(stat[i+2:], "%c %d %d", &state, &ppid, &pg); err == nil && pg == pgid && state != 'Z' {
			out = append(out, pid)
		}
	}
	return out
}

func procFile(pid int, name string) string {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/%s", pid, name))
	return string(b)
}

// An incarnation that ends without writing its exit status (its wrapper
// SIGKILLed) must leave no record, not the previous incarnation's: the
// supervisor would report that code as this one's (a clean 0 ends a
// container for good under OnFailure).
func TestANewIncarnationClearsThePreviousExitRecord(t *testing.T) {
	dir := t.TempDir()
	run := func(argv []string) *exec.Cmd {
		w := ExitStatusWrapper("c", "", argv)
		cmd := exec.Command(w[1], w[2:]...)
		cmd.Dir = dir
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		pgid := cmd.Process.Pid
		t.Cleanup(func() { syscall.Kill(-pgid, syscall.SIGKILL) })
		return cmd
	}
	record := filepath.Join(dir, exitRecordDir, "c")
	first := run([]string{"sh", "-c", "exit 3"})
	_ = first.Wait()
	if rec, err := os.ReadFile(record); err != nil || strings.TrimSpace(string(rec)) != "3" {
		t.Fatalf("the first incarnation's record: %q, %v; want 3", rec, err)
	}
	second := run([]string{"sleep", "1000"})
	pgid := second.Process.Pid
	for deadline := time.Now().Add(10 * time.Second); !catchesTERM(pgid); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the second incarnation's wrapper never started its command")
		}
	}
	syscall.Kill(-pgid, syscall.SIGKILL)
	_ = second.Wait()
	if rec, err := os.ReadFile(record); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("after a second incarnation killed before it could record anything, the record reads %q (%v); want none", rec, err)
	}
}

// An exec probe's command and everything it started die at the probe's
// timeout, whatever signals they ignore: run as zlogin runs it in the
// zone (in a process group of its own), the wrapped command must leave no
// process behind once its time is up, and must cost nothing more when it
// ends in time.
func TestAnExecProbeCommandDiesInItsGroupAtTheTimeout(t *testing.T) {
	dir := t.TempDir()
	// The shell ignores SIGINT (as zlogin's interrupt would find it) and
	// leaves a child that outlives it.
	stubborn := []string{"sh", "-c", "trap '' INT; sleep 60 & echo $! > child; wait"}
	cmd := exec.Command(probeCommand(stubborn, time.Second)[0], probeCommand(stubborn, time.Second)[1:]...)
	cmd.Dir = dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pgid := cmd.Process.Pid
	t.Cleanup(func() { syscall.Kill(-pgid, syscall.SIGKILL) })
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the probe's command outlived its timeout by 9s")
	}
	if took := time.Since(start); took < time.Second {
		t.Errorf("the command ended after %s, before its timeout", took)
	}
	for deadline := time.Now().Add(5 * time.Second); len(groupMembers(pgid)) > 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("processes %v of the probe are left after its timeout", groupMembers(pgid))
		}
	}

	// A command that ends at once, many times: its sleep must go with it
	// every time, however the wrapper's steps interleave.
	for i := range 50 {
		wrapped := probeCommand([]string{"sh", "-c", "exit 3"}, 30*time.Second)
		quick := exec.Command(wrapped[0], wrapped[1:]...)
		quick.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		start = time.Now()
		err := quick.Run()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 3 || time.Since(start) > 5*time.Second {
			t.Fatalf("attempt %d, a command that ends in time: %v after %s, want its exit status 3 at once", i, err, time.Since(start))
		}
		for deadline := time.Now().Add(5 * time.Second); len(groupMembers(quick.Process.Pid)) > 0; time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("attempt %d: the wrapper of a command that ended in time left %v", i, groupMembers(quick.Process.Pid))
			}
		}
	}
}

// A command with a working directory of its own runs there, and its
// exit record is still kept where ExitCode reads it, under the directory
// the wrapper started in (the zone's root). Drop the cd of the wrapper's
// command to see the pwd check fail; start the wrapper itself there to
// see the record go missing.
func TestTheWrapperKeepsTheRecordWhereverTheCommandRuns(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "srv", "it's"), 0o755); err != nil {
		t.Fatal(err)
	}
	w := ExitStatusWrapper("c", "/srv/it's", []string{"sh", "-c", "pwd > here; exit 7"})
	cmd := exec.Command(w[1], w[2:]...)
	cmd.Dir = dir
	_ = cmd.Run()
	if rec, err := os.ReadFile(filepath.Join(dir, exitRecordDir, "c")); err != nil || strings.TrimSpace(string(rec)) != "7" {
		t.Errorf("the record: %q, %v; want 7 under the wrapper's directory", rec, err)
	}
	if here, err := os.ReadFile(filepath.Join(dir, "srv", "it's", "here")); err != nil || strings.TrimSpace(string(here)) != filepath.Join(dir, "srv", "it's") {
		t.Errorf("the command ran in %q (%v), want its working directory", here, err)
	}
}
