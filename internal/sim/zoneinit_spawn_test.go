package sim_test

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"
)

// In isolation mode zlogin's commands are born of the zone's init: they
// run as the zone's user with zlogin's stdin, stdout and stderr, give
// back their exit status (128+n when signal n ends them), get the signals
// zlogin gets, get a terminal of their own with -i, and die when zlogin
// dies, as they did when zlogin forked them itself. No process of the
// zone can ask the init for a command.
//
// Drop the s.signal call on the connection's end in initSpawner.session
// (internal/sim/zoneinit_spawn.go) to see it fail: the command outlives
// the zlogin that was killed.
func TestIsolatedZloginCommandsAreTheZones(t *testing.T) {
	const network = 205
	fab := isolatedFabric(t, network)
	h, _ := isolatedNode(t, fab, network, 1, "exec sleep 1004")
	var uid uint32
	for _, z := range h.state().Zones {
		if z.Name == "pod" {
			uid = z.UID
		}
	}

	r := h.runIn("from stdin\n", "zlogin", "pod", "id -u; cat; echo to stderr >&2; exit 3")
	if r.code != 3 || r.stdout != fmt.Sprintf("%d\nfrom stdin\n", uid) || r.stderr != "to stderr\n" {
		t.Fatalf("zlogin pod: exit %d, stdout %q, stderr %q; want 3, the zone's uid %d and stdin, and stderr", r.code, r.stdout, r.stderr, uid)
	}
	if r := h.run("zlogin", "pod", "kill -TERM $$"); r.code != 128+int(syscall.SIGTERM) {
		t.Fatalf("a command ended by SIGTERM: exit %d, want %d (%v)", r.code, 128+int(syscall.SIGTERM), r)
	}

	// A signal zlogin gets reaches the command.
	c := exec.Command(filepath.Join(h.bin, "zlogin"), "pod", "trap 'echo got TERM; exit 7' TERM; echo ready; while :; do sleep 0.1; done")
	var out bytes.Buffer
	stdout, _ := c.StdoutPipe()
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	line := make([]byte, 6)
	if _, err := io.ReadFull(stdout, line); err != nil || string(line) != "ready\n" {
		t.Fatalf("the trapping command did not start: %q %v", line, err)
	}
	c.Process.Signal(syscall.SIGTERM)
	io.Copy(&out, stdout)
	if err := c.Wait(); c.ProcessState.ExitCode() != 7 || out.String() != "got TERM\n" {
		t.Fatalf("SIGTERM relayed: exit %d (%v), %q; want 7 and the trap's line", c.ProcessState.ExitCode(), err, out.String())
	}

	// With -i on a terminal, the command gets one of its own.
	tc := exec.Command(filepath.Join(h.bin, "zlogin"), "-i", "pod", "stty size; test -t 0 && echo tty; exit 4")
	ptmx, err := pty.StartWithSize(tc, &pty.Winsize{Rows: 33, Cols: 111})
	if err != nil {
		t.Fatal(err)
	}
	var tout bytes.Buffer
	copied := make(chan struct{})
	go func() { io.Copy(&tout, ptmx); close(copied) }()
	tc.Wait()
	select {
	case <-copied:
	case <-time.After(2 * time.Second):
	}
	ptmx.Close()
	if got := strings.ReplaceAll(tout.String(), "\r\n", "\n"); tc.ProcessState.ExitCode() != 4 || got != "33 111\ntty\n" {
		t.Fatalf("zlogin -i: exit %d, %q; want 4 and a 33x111 terminal", tc.ProcessState.ExitCode(), got)
	}

	// A killed zlogin takes its command with it.
	marker := strconv.Itoa(2000000 + os.Getpid())
	k := exec.Command(filepath.Join(h.bin, "zlogin"), "pod", "sleep "+marker)
	if err := k.Start(); err != nil {
		t.Fatal(err)
	}
	running := func() bool { return commandRunning("sleep " + marker) }
	waitFor(t, 10*time.Second, "the command running", running)
	k.Process.Kill()
	k.Wait()
	waitFor(t, 10*time.Second, "the command gone with its zlogin", func() bool { return !running() })

	// The zone cannot ask its init for a command (as root, say): the
	// socket's directory is root's alone, whatever the socket's own mode
	// (a umask of 0 makes it anyone's). Make listenForZlogin's directory
	// 0o755 to see this part fail: the zone connects.
	dir := filepath.Join(h.root, "run", "pod", "init")
	if err := os.Chmod(filepath.Join(dir, "zlogin.sock"), 0o777); err != nil {
		t.Fatal(err)
	}
	ask := fmt.Sprintf(`python3 -c "import os, socket
s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
s.connect('/proc/self/fd/%%d/zlogin.sock' %% os.open('%s', os.O_PATH))"`, dir)
	if r := h.run("zlogin", "pod", ask); r.code == 0 || !strings.Contains(r.stderr, "PermissionError") {
		t.Fatalf("a zone's process reached its init's socket: %v", r)
	}
}

// commandRunning says whether a process of the machine has cmdline.
func commandRunning(cmdline string) bool {
	procs, _ := os.ReadDir("/proc")
	for _, p := range procs {
		b, err := os.ReadFile(filepath.Join("/proc", p.Name(), "cmdline"))
		if err == nil && strings.TrimRight(strings.ReplaceAll(string(b), "\x00", " "), " ") == cmdline {
			if st, err := os.ReadFile(filepath.Join("/proc", p.Name(), "stat")); err == nil && !strings.Contains(string(st), ") Z ") {
				return true
			}
		}
	}
	return false
}
