package illumos

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// scriptDir makes a BinDir holding one shell script named name.
func scriptDir(t *testing.T, name, body string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, name), []byte("#!/bin/sh\n"+body), 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestRunnerResolvesIntoBinDir(t *testing.T) {
	r := &Runner{}
	if got := r.Resolve("/usr/sbin/zoneadm"); got != "/usr/sbin/zoneadm" {
		t.Errorf("default resolve = %s", got)
	}
	r.BinDir = "/tmp/node1/bin"
	if got := r.Resolve("/usr/sbin/zoneadm"); got != "/tmp/node1/bin/zoneadm" {
		t.Errorf("BinDir resolve = %s", got)
	}
}

func TestRunnerPassesArgvStdinAndEnvAndCapturesOutput(t *testing.T) {
	dir := scriptDir(t, "zonecfg", `printf '%s|' "$@"; echo; cat; echo "env=$ZW_TEST lang=$LC_ALL" >&2`)
	r := &Runner{BinDir: dir, Env: []string{"ZW_TEST=yes"}}
	res, err := r.Run(context.Background(), Cmd{Path: zonecfgPath, Args: []string{"-z", "a b", "-f", "-"}, Stdin: []byte("create -b\n")})
	if err != nil {
		t.Fatal(err)
	}
	if got := string(res.Stdout); got != "-z|a b|-f|-|\ncreate -b\n" {
		t.Errorf("stdout = %q", got)
	}
	if got := string(res.Stderr); got != "env=yes lang=C\n" {
		t.Errorf("stderr = %q", got)
	}
	if res.ExitCode != 0 {
		t.Errorf("exit = %d", res.ExitCode)
	}
}

func TestRunnerReportsExitStatusAndOutput(t *testing.T) {
	dir := scriptDir(t, "zoneadm", `echo out; echo "zoneadm: zone 'web01': must be installed before boot." >&2; exit 1`)
	r := &Runner{BinDir: dir}
	res, err := r.Run(context.Background(), Cmd{Path: zoneadmPath, Args: []string{"-z", "web01", "boot"}})
	var ee *ExecError
	if !errors.As(err, &ee) {
		t.Fatalf("err = %v, want *ExecError", err)
	}
	if ee.ExitCode != 1 || res.ExitCode != 1 || ee.Stdout != "out\n" || !strings.Contains(ee.Stderr, "must be installed") || ee.TimedOut {
		t.Errorf("ExecError = %+v", ee)
	}
	if want := []string{filepath.Join(dir, "zoneadm"), "-z", "web01", "boot"}; strings.Join(ee.Argv, " ") != strings.Join(want, " ") {
		t.Errorf("argv = %q", ee.Argv)
	}
	if Classify(ee) != KindWrongState {
		t.Errorf("Classify = %v", Classify(ee))
	}
}

func TestRunnerMissingBinaryIsAnExecError(t *testing.T) {
	r := &Runner{BinDir: t.TempDir()}
	_, err := r.Run(context.Background(), Cmd{Path: zfsPath, Args: []string{"list"}})
	var ee *ExecError
	if !errors.As(err, &ee) || ee.Err == nil || ee.ExitCode != -1 {
		t.Fatalf("err = %#v", err)
	}
	if KindOf(err) != KindInvalid {
		t.Errorf("KindOf = %v, want invalid", KindOf(err))
	}
}

// alive reports whether a process exists (and is not a zombie).
func alive(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	f := strings.Fields(string(b))
	return len(f) > 2 && f[2] != "Z"
}

func TestRunnerKillsTheWholeProcessGroupAtTheDeadline(t *testing.T) {
	pidFile := filepath.Join(t.TempDir(), "pid")
	// A "hung brand hook": a grandchild that would outlive its parent's
	// death and holds the output pipe open.
	dir := scriptDir(t, "zoneadm", "sleep 300 &\necho $! > "+pidFile+"\nwait\n")
	r := &Runner{BinDir: dir, WaitDelay: 500 * time.Millisecond}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := r.Run(ctx, Cmd{Path: zoneadmPath, Args: []string{"-z", "web01", "install"}})
	took := time.Since(start)

	var ee *ExecError
	if !errors.As(err, &ee) || !ee.TimedOut {
		t.Fatalf("err = %v, want a timed-out *ExecError", err)
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Error("the context error is not in the chain")
	}
	if KindOf(err) != KindTransient || !errors.Is(opError("zoneadm install", "web01", err), ErrTransient) {
		t.Errorf("a timeout must be transient, got %v", KindOf(err))
	}
	if took > 3*time.Second {
		t.Errorf("Run returned after %v; the deadline was 300ms", took)
	}
	b, rerr := os.ReadFile(pidFile)
	if rerr != nil {
		t.Fatal(rerr)
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	deadline := time.Now().Add(2 * time.Second)
	for alive(pid) && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if alive(pid) {
		_ = syscall.Kill(pid, syscall.SIGKILL)
		t.Fatalf("grandchild %d survived the deadline", pid)
	}
}

func TestRunnerDefaultTimeoutAppliesWithoutContextDeadline(t *testing.T) {
	dir := scriptDir(t, "zfs", "exec sleep 300\n")
	r := &Runner{BinDir: dir, Timeout: 200 * time.Millisecond}
	start := time.Now()
	_, err := r.Run(context.Background(), Cmd{Path: zfsPath})
	if KindOf(err) != KindTransient || time.Since(start) > 3*time.Second {
		t.Fatalf("err = %v after %v", err, time.Since(start))
	}
	// A per-command Timeout wins over the runner's.
	start = time.Now()
	_, err = r.Run(context.Background(), Cmd{Path: zfsPath, Timeout: 50 * time.Millisecond})
	if KindOf(err) != KindTransient || time.Since(start) > 150*time.Millisecond+2*time.Second {
		t.Fatalf("err = %v", err)
	}
}

func TestRunnerSignalIsTransient(t *testing.T) {
	dir := scriptDir(t, "zfs", "kill -TERM $$\n")
	r := &Runner{BinDir: dir}
	_, err := r.Run(context.Background(), Cmd{Path: zfsPath})
	var ee *ExecError
	if !errors.As(err, &ee) || !ee.Signaled || ee.TimedOut {
		t.Fatalf("err = %#v", err)
	}
	if KindOf(err) != KindTransient {
		t.Errorf("KindOf = %v", KindOf(err))
	}
}

func TestRunnerSucceedsWhenABackgroundChildKeepsTheOutputOpen(t *testing.T) {
	pidFile := filepath.Join(t.TempDir(), "pid")
	// A command that starts a daemon which inherits stdout (as a careless
	// zone supervisor would) and exits 0 at once.
	dir := scriptDir(t, "zoneadm", "sleep 30 &\necho $! > "+pidFile+"\necho booted\n")
	r := &Runner{BinDir: dir, WaitDelay: 200 * time.Millisecond}
	res, err := r.Run(context.Background(), Cmd{Path: zoneadmPath})
	b, _ := os.ReadFile(pidFile)
	if pid, _ := strconv.Atoi(strings.TrimSpace(string(b))); pid > 0 {
		t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })
	}
	if err != nil || !strings.Contains(string(res.Stdout), "booted") {
		t.Fatalf("res %q, err %v", res.Stdout, err)
	}
}
