package main

import (
	"context"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/zonewright/zonewright/internal/fabric"
	"github.com/zonewright/zonewright/internal/simtest"
)

// A short run on a stack of the test's own: every kind of process is
// killed at least once (the first events visit every kind), the
// invariants are computed, and every one meets its target.
func TestChaosShortRun(t *testing.T) {
	bin := t.TempDir()
	if err := simtest.BuildBinaries(bin, "zonewright", "illumos-sim"); err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	// Isolated where the machine allows it, as make chaos runs. (Once a
	// pod stayed Provisioning past its minute here: a node's answer was
	// denied while PostgreSQL restarted, internal/devstack/auth.go.)
	isolated := fabric.DirectIsolationSupported() == nil
	res, err := run(context.Background(), options{bin: bin, duration: 25 * time.Second, convergeTimeout: time.Minute, seed: 3,
		minGap: 2 * time.Second, maxGap: 3 * time.Second, isolated: isolated}, log)
	if err != nil {
		t.Fatal(err)
	}
	res.print(os.Stdout)
	for _, kind := range []string{kindAgent, kindServe, kindTemporal, kindPostgres, faultFailures, faultLatency} {
		if res.Kills[kind] == 0 {
			t.Errorf("no %s event in the run: %v", kind, res.Kills)
		}
	}
	if len(res.Invariants) < 10 {
		t.Errorf("%d invariants computed, want every one", len(res.Invariants))
	}
	ops := 0
	for _, c := range res.Operations {
		ops += c.OK
	}
	if ops < 10 {
		t.Errorf("only %d operations succeeded", ops)
	}
	if !res.Passed {
		t.Errorf("invariants missed their targets; reproduce with %s", res.Reproduce)
	}
}
