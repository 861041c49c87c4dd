package containerlog

import (
	"bytes"
	"context"
	"errors"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/zonewright/zonewright/internal/syncbuf"
)

// now is the tests' clock: the log's lines are of the day before.
var now = time.Date(2026, time.January, 5, 12, 0, 0, 0, time.UTC)

// A service log with two runs, as svc.startd and the container wrote it.
const twoRuns = `[ Jan  5 10:00:00 Enabled. ]
[ Jan  5 10:00:00 Executing start method ("exec /bin/sh -c ..."). ]
first 1
first 2
[ Jan  5 10:30:00 Stopping because service restarting. ]
[ Jan  5 11:00:00 Executing start method ("exec /bin/sh -c ..."). ]
second 1
[ not a startd line ]
second 2
`

func writeLog(t *testing.T, content string) *os.File {
	t.Helper()
	p := filepath.Join(t.TempDir(), "svc.log")
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	mtime := time.Date(2026, time.January, 5, 11, 30, 0, 0, time.UTC)
	if err := os.Chtimes(p, mtime, mtime); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

func read(t *testing.T, content string, opts Options) (string, error) {
	t.Helper()
	opts.Location, opts.Now = time.UTC, func() time.Time { return now }
	var b bytes.Buffer
	err := Write(context.Background(), &b, writeLog(t, content), opts)
	return b.String(), err
}

func TestSelectsTheRunAndFiltersStartdLines(t *testing.T) {
	all := Options{TailLines: -1}
	tests := []struct {
		name string
		opts Options
		want string
	}{
		{"the current run without startd lines", all, "second 1\n[ not a startd line ]\nsecond 2\n"},
		{"the previous run", Options{TailLines: -1, Previous: true}, "first 1\nfirst 2\n"},
		{"the previous run with startd lines", Options{TailLines: -1, Previous: true, SMFLines: true},
			"[ Jan  5 10:00:00 Executing start method (\"exec /bin/sh -c ...\"). ]\nfirst 1\nfirst 2\n[ Jan  5 10:30:00 Stopping because service restarting. ]\n"},
		{"the last line", Options{TailLines: 1}, "second 2\n"},
		{"no lines", Options{TailLines: 0}, ""},
		{"more lines than there are", Options{TailLines: 50}, "second 1\n[ not a startd line ]\nsecond 2\n"},
		{"tail counts only the lines shown", Options{TailLines: 2, Previous: true, SMFLines: false}, "first 1\nfirst 2\n"},
		// The previous run's lines were written by 10:30 at the latest
		// (the next startd line), the current run's by 11:30 (mtime).
		{"since a time after the previous run", Options{TailLines: -1, Previous: true, SinceTime: now.Add(-time.Hour - 29*time.Minute)}, ""},
		{"since a time before its end", Options{TailLines: -1, Previous: true, SinceTime: now.Add(-time.Hour - 31*time.Minute)}, "first 1\nfirst 2\n"},
		{"timestamps", Options{TailLines: 1, Timestamps: true}, "2026-01-05T11:30:00Z second 2\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := read(t, twoRuns, tt.opts)
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Fatalf("got\n%q\nwant\n%q", got, tt.want)
			}
		})
	}
}

func TestNoPreviousRun(t *testing.T) {
	_, err := read(t, "[ Jan  5 10:00:00 Executing start method (\"x\"). ]\nonly\n", Options{TailLines: -1, Previous: true})
	if !errors.Is(err, ErrNoPrevious) {
		t.Fatalf("err = %v, want ErrNoPrevious", err)
	}
	got, err := read(t, "before any start\n", Options{TailLines: -1})
	if err != nil || got != "before any start\n" {
		t.Fatalf("a log without startd lines: %q %v", got, err)
	}
}

func TestParseStartdLine(t *testing.T) {
	msg, ts, ok := ParseStartdLine([]byte("[ Dec 31 23:59:59 Method \"start\" exited with status 96. ]"), now, time.UTC)
	if !ok || msg != `Method "start" exited with status 96.` || !ts.Equal(time.Date(2025, time.December, 31, 23, 59, 59, 0, time.UTC)) {
		t.Fatalf("got %q %v %v (a December line read in January is last year's)", msg, ts, ok)
	}
	for _, line := range []string{"[ Jan  5 10:00:00 ]x", "[ hello world ]", "Jan  5 10:00:00 Enabled.", "[ Jan 35 10:00:00 Enabled. ]", ""} {
		if _, _, ok := ParseStartdLine([]byte(line), now, time.UTC); ok {
			t.Errorf("%q taken for a startd line", line)
		}
	}
	if !IsRunEnd(`Method "start" exited with status 96.`) || !IsRunEnd("Stopping because service disabled.") || IsRunEnd("Enabled.") {
		t.Error("IsRunEnd")
	}
}

// Following writes the lines appended afterwards, with the time they were
// read, and ends with the run.
func TestFollowEndsWithTheRun(t *testing.T) {
	p := filepath.Join(t.TempDir(), "svc.log")
	if err := os.WriteFile(p, []byte("[ Jan  5 10:00:00 Executing start method (\"x\"). ]\nbefore\npart"), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := &syncbuf.Buffer{}
	done := make(chan error, 1)
	go func() {
		done <- Write(context.Background(), out, f, Options{TailLines: -1, Follow: true, Location: time.UTC})
	}()
	waitFor(t, out, "before\n")
	if strings.Contains(out.String(), "part") {
		t.Fatal("a line still being written was shown")
	}
	appendTo(t, p, "ial\nafter\n[ Jan  5 10:00:09 Method \"start\" exited with status 96. ]\nnext run\n")
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("following did not end with the run")
	}
	if got := out.String(); got != "before\npartial\nafter\n" {
		t.Fatalf("got %q", got)
	}
}

// A run that has ended is not followed.
func TestFollowOfAnEndedRunReturns(t *testing.T) {
	got, err := read(t, "[ Jan  5 10:00:00 Executing start method (\"x\"). ]\nout\n[ Jan  5 10:00:01 Method \"start\" exited with status 96. ]\n",
		Options{TailLines: -1, Follow: true})
	if err != nil || got != "out\n" {
		t.Fatalf("%q %v", got, err)
	}
}

func TestFollowStopsWhenTheContextEnds(t *testing.T) {
	f := writeLog(t, "[ Jan  5 10:00:00 Executing start method (\"x\"). ]\nout\n")
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if err := Write(ctx, &bytes.Buffer{}, f, Options{TailLines: -1, Follow: true}); err != nil {
		t.Fatal(err)
	}
	if ctx.Err() == nil {
		t.Fatal("returned before the context ended")
	}
}

func TestParseQuery(t *testing.T) {
	q, err := ParseQuery(url.Values{"container": {"app"}, "follow": {"true"}, "tailLines": {"10"}, "sinceSeconds": {"60"}, "smfLines": {"1"}})
	if err != nil {
		t.Fatal(err)
	}
	back, err := ParseQuery(q.Values())
	if err != nil || back != q {
		t.Fatalf("round trip: %+v %v, want %+v", back, err, q)
	}
	if o := q.Options(now); !o.SinceTime.Equal(now.Add(-time.Minute)) || o.TailLines != 10 || !o.Follow || !o.SMFLines {
		t.Fatalf("options %+v", o)
	}
	for _, bad := range []url.Values{
		{"tailLines": {"-1"}}, {"tailLines": {"x"}}, {"tailLines": {"99999999999"}},
		{"sinceSeconds": {"0"}}, {"sinceSeconds": {"9223372036854775807"}},
		{"follow": {"maybe"}}, {"sinceTime": {"yesterday"}},
		{"sinceSeconds": {"5"}, "sinceTime": {"2026-01-01T00:00:00Z"}},
	} {
		var qe *QueryError
		if _, err := ParseQuery(bad); !errors.As(err, &qe) {
			t.Errorf("%v: err %v, want a QueryError", bad, err)
		}
	}
}

func appendTo(t *testing.T, p, s string) {
	t.Helper()
	f, err := os.OpenFile(p, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(s); err != nil {
		t.Fatal(err)
	}
}

func waitFor(t *testing.T, b *syncbuf.Buffer, want string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for b.String() != want {
		if time.Now().After(deadline) {
			t.Fatalf("got %q, want %q", b.String(), want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
