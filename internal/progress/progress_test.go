package progress_test

import (
	"context"
	"testing"

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
