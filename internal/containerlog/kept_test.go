package containerlog

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// readKept reads the container's kept log as the node's endpoint does.
func readKept(t *testing.T, k *Kept, uid, container string, opts Options) (string, error) {
	t.Helper()
	f, err := k.Open(uid, container)
	if err != nil {
		t.Fatalf("open the kept log: %v", err)
	}
	defer f.Close()
	opts.Location, opts.Now = time.UTC, func() time.Time { return now }
	var b bytes.Buffer
	err = Write(context.Background(), &b, f, opts)
	return b.String(), err
}

func startLine(at string) string {
	return fmt.Sprintf("[ Jan  5 %s Executing start method (\"exec /bin/sh -c ...\"). ]\n", at)
}

func TestKeptLogHoldsTheLastTwoRunsEachBounded(t *testing.T) {
	const lineLen = len("run 1 line 00\n")
	stopLen := len("[ Jan  5 09:30:00 Stopping because service restarting. ]\n")
	// Room for a run's last two lines and its stop line, not three lines.
	limit := int64(stopLen + 3*lineLen - 1)
	k := &Kept{Dir: t.TempDir(), MaxRunBytes: limit}
	var log strings.Builder
	log.WriteString("[ Jan  5 09:00:00 Enabled. ]\n")
	for run, at := range []string{"09:00:00", "10:00:00", "11:00:00"} {
		log.WriteString(startLine(at))
		for i := range 20 {
			fmt.Fprintf(&log, "run %d line %02d\n", run+1, i)
		}
		log.WriteString("[ Jan  5 " + at[:3] + "30:00 Stopping because service restarting. ]\n")
	}
	if err := k.Keep("uid-1", "app", writeLog(t, log.String())); err != nil {
		t.Fatal(err)
	}
	f, err := k.Open("uid-1", "app")
	if err != nil {
		t.Fatal(err)
	}
	fi, _ := f.Stat()
	f.Close()
	// Two runs, each its start line and at most the bound more.
	if max := 2 * (int64(len(startLine("00:00:00"))) + limit); fi.Size() > max {
		t.Errorf("kept log is %d bytes, more than the bound's %d", fi.Size(), max)
	}
	got, err := readKept(t, k, "uid-1", "app", Options{TailLines: -1})
	if want := "run 3 line 18\nrun 3 line 19\n"; err != nil || got != want {
		t.Errorf("current run: %q, %v; want its last lines %q", got, err, want)
	}
	got, err = readKept(t, k, "uid-1", "app", Options{TailLines: -1, Previous: true})
	if want := "run 2 line 18\nrun 2 line 19\n"; err != nil || got != want {
		t.Errorf("previous run: %q, %v; want its last lines %q", got, err, want)
	}
}

func TestKeepingANewerRunRotatesTheLastToPrevious(t *testing.T) {
	k := &Kept{Dir: t.TempDir()}
	first := startLine("10:00:00") + "first zone\n"
	if err := k.Keep("uid-1", "app", writeLog(t, first)); err != nil {
		t.Fatal(err)
	}
	if _, err := readKept(t, k, "uid-1", "app", Options{TailLines: -1, Previous: true}); !errors.Is(err, ErrNoPrevious) {
		t.Fatalf("previous of a container that ran once: %v, want ErrNoPrevious", err)
	}
	// The same log kept again (a halt, then an uninstall) is one run.
	if err := k.Keep("uid-1", "app", writeLog(t, first+"more\n")); err != nil {
		t.Fatal(err)
	}
	if got, err := readKept(t, k, "uid-1", "app", Options{TailLines: -1}); err != nil || got != "first zone\nmore\n" {
		t.Fatalf("current after keeping the same run again: %q, %v", got, err)
	}
	if _, err := readKept(t, k, "uid-1", "app", Options{TailLines: -1, Previous: true}); !errors.Is(err, ErrNoPrevious) {
		t.Fatalf("previous after keeping the same run again: %v, want ErrNoPrevious", err)
	}
	// A new zone's log with a run of its own: the kept one becomes
	// previous.
	if err := k.Keep("uid-1", "app", writeLog(t, startLine("11:00:00")+"second zone\n")); err != nil {
		t.Fatal(err)
	}
	if got, err := readKept(t, k, "uid-1", "app", Options{TailLines: -1}); err != nil || got != "second zone\n" {
		t.Errorf("current: %q, %v", got, err)
	}
	if got, err := readKept(t, k, "uid-1", "app", Options{TailLines: -1, Previous: true}); err != nil || got != "first zone\nmore\n" {
		t.Errorf("previous: %q, %v", got, err)
	}
	// And the next one drops the oldest.
	if err := k.Keep("uid-1", "app", writeLog(t, startLine("11:30:00")+"third zone\n")); err != nil {
		t.Fatal(err)
	}
	if got, err := readKept(t, k, "uid-1", "app", Options{TailLines: -1, Previous: true}); err != nil || got != "second zone\n" {
		t.Errorf("previous after a third run: %q, %v", got, err)
	}
}

func TestRemovingAPodsKeptLogs(t *testing.T) {
	k := &Kept{Dir: filepath.Join(t.TempDir(), "logs")}
	if uids, err := k.Pods(); err != nil || len(uids) != 0 {
		t.Fatalf("pods before any log: %v, %v", uids, err)
	}
	for _, uid := range []string{"uid-1", "uid-2"} {
		if err := k.Keep(uid, "app", writeLog(t, twoRuns)); err != nil {
			t.Fatal(err)
		}
	}
	if uids, err := k.Pods(); err != nil || strings.Join(uids, ",") != "uid-1,uid-2" {
		t.Fatalf("pods: %v, %v", uids, err)
	}
	if err := k.Remove("uid-1"); err != nil {
		t.Fatal(err)
	}
	if _, err := k.Open("uid-1", "app"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("open a removed pod's log: %v", err)
	}
	if uids, _ := k.Pods(); strings.Join(uids, ",") != "uid-2" {
		t.Errorf("pods after removing uid-1: %v", uids)
	}
	for _, bad := range []string{"", "..", "a/b"} {
		if err := k.Keep(bad, "app", writeLog(t, twoRuns)); err == nil {
			t.Errorf("kept a log for pod %q", bad)
		}
		if err := k.Remove(bad); err == nil {
			t.Errorf("removed the logs of pod %q", bad)
		}
	}
	if ents, _ := os.ReadDir(k.Dir); len(ents) != 1 {
		t.Errorf("%d entries left in the kept logs' directory, want uid-2's", len(ents))
	}
}
