package devcluster_test

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/zonewright/zonewright/internal/controlplane"
	"github.com/zonewright/zonewright/internal/devcluster"
	"github.com/zonewright/zonewright/internal/devstack"
)

// A build that fails half way (the control plane's address is taken)
// stops what it had started: the private PostgreSQL and the Temporal
// server. (Drop the deferred c.Stop in Build to see both outlive the
// failure.)
func TestAFailedBuildLeavesNothingRunning(t *testing.T) {
	held, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	temporalAddr, err := devstack.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c, err := devcluster.Build(ctx, devcluster.Options{Dir: dir, TemporalAddress: temporalAddr,
		ControlPlane: controlplane.Config{Listen: held.Addr().String()}})
	if err == nil {
		c.Stop()
		t.Fatal("the build succeeded on a taken API address")
	}
	if !strings.Contains(err.Error(), "API address") {
		t.Fatalf("the build failed for another reason: %v", err)
	}
	if err := devstack.CheckPortFree(temporalAddr); err != nil {
		t.Errorf("the Temporal server still holds its address: %v", err)
	}
	if pids := devcluster.ProcessesNaming(dir); len(pids) > 0 {
		t.Errorf("processes of the cluster's directory still run: %v", pids)
	}
}
