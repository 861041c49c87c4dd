package supervisor

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/zonewright/zonewright/internal/model"
)

// A restarted agent numbers its reports above every number it issued
// before, even when the clock was stepped back meanwhile: otherwise the
// lifecycles ignore its reports until the clock catches up.
func TestReportNumbersSurviveARestartWithTheClockSteppedBack(t *testing.T) {
	path := filepath.Join(t.TempDir(), SequenceFile)
	clock := time.Date(2026, 11, 28, 6, 0, 0, 0, time.UTC)
	var last uint64
	for i, step := range []time.Duration{0, -time.Hour, -24 * time.Hour} {
		q, err := OpenSequence(path, clock.Add(step))
		if err != nil {
			t.Fatal(err)
		}
		q.block = 3 // several reservations in one run
		for range 10 {
			n, err := q.Next()
			if err != nil {
				t.Fatal(err)
			}
			if n <= last {
				t.Fatalf("run %d (clock %s): number %d after %d", i, step, n, last)
			}
			last = n
		}
	}
}

// The first start after numbers came from the clock alone continues above
// them.
func TestReportNumbersStartAboveTheClock(t *testing.T) {
	now := time.Now()
	q, err := OpenSequence(filepath.Join(t.TempDir(), "state", SequenceFile), now)
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := q.Next(); n <= uint64(now.UnixNano()) {
		t.Fatalf("first number %d not above the clock's %d", n, now.UnixNano())
	}
}

func TestAnUnreadableSequenceFileIsAnError(t *testing.T) {
	path := filepath.Join(t.TempDir(), SequenceFile)
	if err := os.WriteFile(path, []byte("twelve\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenSequence(path, time.Now()); err == nil {
		t.Fatal("a sequence file holding no number was taken")
	}
}

// Through the supervisor: the numbers its watches and reports carry grow
// across a restart with the clock stepped back.
func TestASupervisorRestartedWithTheClockBackNumbersAboveItsPast(t *testing.T) {
	path := filepath.Join(t.TempDir(), SequenceFile)
	h := onlineHost()
	run := func(now time.Time) (watched uint64, reported uint64) {
		q, err := OpenSequence(path, now)
		if err != nil {
			t.Fatal(err)
		}
		r := &recorder{}
		s := New(Config{Node: "n1", Host: h, Reporter: r, ObserveEvery: 50 * time.Millisecond, Sequence: q})
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		go s.Run(ctx)
		watched = s.Watch(appPod(), nil)
		rep := r.wait(t, "a report", func(model.PodReport, int) bool { return true })
		return watched, rep.Seq
	}
	now := time.Now()
	w1, r1 := run(now)
	w2, r2 := run(now.Add(-time.Hour))
	if w2 <= max(w1, r1) || r2 <= w2 {
		t.Fatalf("before the restart: watch %d, report %d; after: watch %d, report %d", w1, r1, w2, r2)
	}
}
