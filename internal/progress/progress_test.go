package progress_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/zonewright/zonewright/internal/progress"
)

func TestReportsReachTheCallbackOnlyWhenThereIsOne(t *testing.T) {
	progress.Report(context.Background(), "nobody listens") // must not panic
	if progress.From(context.Background()) != nil {
		t.Fatal("a bare context has a progress callback")
	}
	var got []any
	ctx := progress.With(context.Background(), func(d any) { got = append(got, d) })
	progress.Report(ctx, "half")
	progress.Report(context.WithoutCancel(ctx), [2]int64{1, 2}) // derived contexts keep it
	if len(got) != 2 || got[0] != "half" || got[1] != [2]int64{1, 2} {
		t.Fatalf("reports %v", got)
	}
}

// Every calls its function on each tick, and never once stop returned.
func TestEveryStopsWithItsStop(t *testing.T) {
	var mu sync.Mutex
	calls := 0
	stop := progress.Every(context.Background(), time.Millisecond, func() {
		mu.Lock()
		calls++
		mu.Unlock()
	})
	for {
		mu.Lock()
		n := calls
		mu.Unlock()
		if n >= 3 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	stop()
	mu.Lock()
	after := calls
	mu.Unlock()
	time.Sleep(20 * time.Millisecond)
	mu.Lock()
	defer mu.Unlock()
	if calls != after {
		t.Fatalf("%d calls after stop returned", calls-after)
	}
}
