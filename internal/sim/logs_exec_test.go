package sim_test

import (
	"bytes"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/creack/pty"
)

// A service's log holds its output and svc.startd's lines in their form
// (spec 15.7), a restart and a disable included: "[ Mon  d hh:mm:ss MSG ]".
func TestServiceLogRecordsRunsAndStops(t *testing.T) {
	h := newHost(t)
	fmri := "svc:/site/talk:default"
	bootWithService(t, h, "web01", "talk", "echo hello from $$; exec sleep 1000", "")
	_, pid1, _ := h.service("web01", fmri)
	h.must("zlogin", "web01", "svcadm", "restart", "site/talk")
	waitFor(t, 10*time.Second, "restart", func() bool {
		st, pid, _ := h.service("web01", fmri)
		return st == "online" && pid > 0 && pid != pid1
	})
	expect(t, h.run("zlogin", "web01", "svcadm", "disable", "-s", fmri), 0, "", "")
	logPath := filepath.Join(h.root, "fs", "zones", "web01", "root", "var/svc/log/site-talk:default.log")
	b, err := os.ReadFile(logPath)
	if err != nil {
		t.Fatal(err)
	}
	startd := regexp.MustCompile(`^\[ [A-Z][a-z]{2} [ 1-3][0-9] [0-2][0-9]:[0-5][0-9]:[0-5][0-9] (.*) \]$`)
	var got []string
	for _, line := range strings.Split(strings.TrimSuffix(string(b), "\n"), "\n") {
		if m := startd.FindStringSubmatch(line); m != nil {
			got = append(got, m[1])
		} else if strings.HasPrefix(line, "hello from ") {
			got = append(got, "(output)")
		} else {
			t.Fatalf("unexpected line %q in\n%s", line, b)
		}
	}
	want := []string{`Executing start method ("echo hello from $$; exec sleep 1000").`, "(output)",
		"Stopping because service restarting.", "Executing stop method (:kill).",
		`Executing start method ("echo hello from $$; exec sleep 1000").`, "(output)",
		"Stopping because service disabled.", "Executing stop method (:kill)."}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("log lines:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// zlogin -i with a terminal on stdin gives the command a terminal of its
// own, of zlogin's terminal's size, and returns its exit status; with -n
// its stdin is no terminal.
func TestZloginInteractiveGivesATerminal(t *testing.T) {
	h := newHost(t)
	h.zoneSetup("web01", "running")
	run := func(args ...string) (string, int) {
		t.Helper()
		c := exec.Command(filepath.Join(h.bin, "zlogin"), args...)
		ptmx, err := pty.StartWithSize(c, &pty.Winsize{Rows: 33, Cols: 111})
		if err != nil {
			t.Fatal(err)
		}
		defer ptmx.Close()
		var out bytes.Buffer
		copied := make(chan struct{})
		go func() { io.Copy(&out, ptmx); close(copied) }()
		err = c.Wait()
		select {
		case <-copied:
		case <-time.After(2 * time.Second):
		}
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		}
		return strings.ReplaceAll(out.String(), "\r\n", "\n"), code
	}
	if out, code := run("-i", "web01", "stty size; test -t 0 && echo tty; exit 4"); code != 4 || out != "33 111\ntty\n" {
		t.Fatalf("zlogin -i: %q, exit %d", out, code)
	}
	if out, code := run("-i", "-n", "web01", "test -t 0 || echo no tty"); code != 0 || out != "no tty\n" {
		t.Fatalf("zlogin -i -n: %q, exit %d", out, code)
	}
}

// A terminal resized while zlogin -i is starting reaches the command: a
// size change between zlogin reading its terminal's size and listening
// for changes used to be lost. Each run resizes a little later than the
// last, so some land in that window. (Move signal.Notify in
// runOnTerminal back after pty.StartWithAttrs to see this fail.)
func TestZloginKeepsAResizeMadeWhileItStarts(t *testing.T) {
	h := newHost(t)
	h.zoneSetup("web01", "running")
	waitSize := `i=0; while [ $i -lt 25 ] && [ "$(stty size)" != "40 100" ]; do sleep 0.1; i=$((i+1)); done; stty size`
	var lost []time.Duration
	for i := 0; i < 40; i++ {
		delay := time.Duration(i) * 400 * time.Microsecond
		c := exec.Command(filepath.Join(h.bin, "zlogin"), "-i", "web01", waitSize)
		ptmx, err := pty.StartWithSize(c, &pty.Winsize{Rows: 24, Cols: 80})
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(delay)
		if err := pty.Setsize(ptmx, &pty.Winsize{Rows: 40, Cols: 100}); err != nil {
			t.Fatal(err)
		}
		var out bytes.Buffer
		copied := make(chan struct{})
		go func() { io.Copy(&out, ptmx); close(copied) }()
		c.Wait()
		select {
		case <-copied:
		case <-time.After(2 * time.Second):
		}
		ptmx.Close()
		if got := strings.TrimSpace(out.String()); got != "40 100" {
			lost = append(lost, delay)
		}
	}
	if len(lost) > 0 {
		t.Fatalf("the command kept the old size when the terminal was resized %v after zlogin started", lost)
	}
}
