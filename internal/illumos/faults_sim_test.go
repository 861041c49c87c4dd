package illumos_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/zonewright/zonewright/internal/illumos"
)

// withFaults is a host on the same node whose commands run with the
// simulator's one-call fault injection (ILLUMOS_SIM_FAULTS) set to faults.
func (n *simNode) withFaults(faults string) illumos.Host {
	r := *n.runner
	r.Env = append(append([]string(nil), r.Env...), "ILLUMOS_SIM_FAULTS="+faults)
	return illumos.Host{Runner: &r}
}

// processesWithArgv returns the pids of live processes whose argv is
// exactly argv.
func processesWithArgv(t *testing.T, argv ...string) []string {
	t.Helper()
	want := []byte(filepath.Join(argv...))
	want = bytes.Join(func() [][]byte {
		var parts [][]byte
		for _, a := range argv {
			parts = append(parts, []byte(a))
		}
		return parts
	}(), []byte{0})
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var pids []string
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		if bytes.Equal(bytes.TrimSuffix(b, []byte{0}), want) {
			pids = append(pids, e.Name())
		}
	}
	return pids
}

// waitGone fails unless no process has argv within a few seconds.
func waitGone(t *testing.T, argv ...string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		if len(processesWithArgv(t, argv...)) == 0 {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("%q still running: pids %v", argv, processesWithArgv(t, argv...))
}

func TestHungCommandIsKilledAtTheDeadlineAndIsTransient(t *testing.T) {
	n := newNode(t, "node1")
	ctx := ctxT(t)
	must(t, "zonecfg", n.host.Zonecfg().Create(ctx, illumos.ZoneConfig{Name: "web01", Zonepath: "/zones/web01"}))
	must(t, "install", n.host.Zoneadm().Install(ctx, "web01", illumos.InstallOptions{}))

	hung := n.withFaults(`{"hang":["zoneadm boot"]}`)
	short, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	defer cancel()
	start := time.Now()
	err := hung.Zoneadm().Boot(short, "web01")
	if !errors.Is(err, illumos.ErrTransient) {
		t.Fatalf("boot of a hung zoneadm: %v, want ErrTransient", err)
	}
	var ee *illumos.ExecError
	if !errors.As(err, &ee) || !ee.TimedOut {
		t.Fatalf("no timed-out ExecError in %v", err)
	}
	if took := time.Since(start); took > 4*time.Second {
		t.Errorf("returned after %v, deadline was 500ms", took)
	}
	waitGone(t, ee.Argv...)

	// The hung call changed nothing; the next one works.
	z, err := n.host.Zoneadm().Get(ctx, "web01")
	must(t, "get", err)
	if z.State != illumos.ZoneInstalled {
		t.Errorf("state after the killed boot: %s", z.State)
	}
	must(t, "boot", n.host.Zoneadm().Boot(ctx, "web01"))
	t.Cleanup(func() { _ = n.host.Zoneadm().Halt(context.Background(), "web01") })

	// A probe that never ends inside the zone: zlogin, the zone's shell
	// and the command all go at the deadline.
	short2, cancel2 := context.WithTimeout(ctx, 500*time.Millisecond)
	defer cancel2()
	_, err = n.host.Zone("web01").Exec(short2, []string{"sleep", "299.125"}, nil)
	if !errors.Is(err, illumos.ErrTransient) {
		t.Fatalf("hung probe: %v, want ErrTransient", err)
	}
	waitGone(t, "sleep", "299.125")
}

func TestInjectedFailuresAreClassified(t *testing.T) {
	n := newNode(t, "node1")
	ctx := ctxT(t)
	flaky := n.withFaults(`{"fail_next":{"zfs create":{"count":1},"dladm create-vnic":{"count":1},"zoneadm list":{"count":1}}}`)

	wantKind(t, "zfs create with EAGAIN", flaky.ZFS().Create(ctx, "tank/x", nil), illumos.ErrTransient)
	wantKind(t, "create-vnic with EAGAIN", flaky.Dladm().CreateVNIC(ctx, illumos.VNICSpec{Name: "web0", Over: "net0"}), illumos.ErrTransient)
	_, err := flaky.Zoneadm().List(ctx)
	wantKind(t, "zoneadm list with EAGAIN", err, illumos.ErrTransient)
	if !illumos.IsRetryable(err) {
		t.Error("a transient failure must be retryable")
	}

	// Retried without the fault, each succeeds.
	must(t, "zfs create", n.host.ZFS().Create(ctx, "tank/x", nil))
	must(t, "create-vnic", n.host.Dladm().CreateVNIC(ctx, illumos.VNICSpec{Name: "web0", Over: "net0"}))

	custom := n.withFaults(`{"fail_next":{"zfs destroy":{"count":1,"stderr":"cannot destroy 'tank/x': dataset is busy","exit":1}}}`)
	wantKind(t, "destroy of a busy dataset", custom.ZFS().Destroy(ctx, "tank/x"), illumos.ErrBusy)
}
