package simtest_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/zonewright/zonewright/internal/simtest"
)

func TestMain(m *testing.M) { os.Exit(simtest.Main(m.Run)) }

func TestNode(t *testing.T) {
	n := simtest.NewNode(t, "node7")
	if n.Name != "node7" || filepath.Base(n.Root) != "node7" {
		t.Errorf("node = %+v", n)
	}
	out, err := exec.Command(filepath.Join(n.Bin, "hostname")).Output()
	if err != nil || string(out) != "node7\n" {
		t.Errorf("hostname through the command dir: %q %v", out, err)
	}

	st := n.State(t)
	if !slices.ContainsFunc(st.Zones, func(z simtest.Zone) bool { return z.Name == "global" && z.State == "running" }) {
		t.Errorf("no running global zone: %+v", st.Zones)
	}
	if !slices.ContainsFunc(st.Links, func(l simtest.Link) bool { return l.Name == "net0" && l.Class == "phys" }) {
		t.Errorf("no net0: %+v", st.Links)
	}
	if !slices.ContainsFunc(st.Datasets, func(d simtest.Dataset) bool { return d.Name == "tank" }) {
		t.Errorf("no tank: %+v", st.Datasets)
	}

	// An admin command: a one-shot fault on zfs create.
	n.Run(t, "fault", "fail-next", "zfs create", "1", "--stderr", "injected", "--exit", "1")
	if out, err := exec.Command(filepath.Join(n.Bin, "zfs"), "create", "tank/x").CombinedOutput(); err == nil || !strings.Contains(string(out), "injected") {
		t.Errorf("zfs create with a fault: %q %v", out, err)
	}
	if out, err := exec.Command(filepath.Join(n.Bin, "zfs"), "create", "tank/x").CombinedOutput(); err != nil {
		t.Errorf("zfs create after the fault: %v\n%s", err, out)
	}
	if !slices.ContainsFunc(n.State(t).Datasets, func(d simtest.Dataset) bool { return d.Name == "tank/x" }) {
		t.Error("tank/x missing from the state")
	}
}

func TestBuildBinaries(t *testing.T) {
	dir := t.TempDir()
	if err := simtest.BuildBinaries(dir, "illumos-sim"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "illumos-sim")); err != nil {
		t.Fatal(err)
	}
	if err := simtest.BuildBinaries(dir, "no-such-command"); err == nil {
		t.Error("building a missing command succeeded")
	}
}
