package hostops_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/zonewright/zonewright/internal/hostapi"
	"github.com/zonewright/zonewright/internal/hostops"
	"github.com/zonewright/zonewright/internal/simtest"
)

type hostStep func(*hostops.Host) func(context.Context, hostapi.PodSandbox) error

// provisionStep is each of hostops.ProvisionSteps by name, with its undo
// as the pod's lifecycle compensates (workflows.provisionSteps); a nil
// undo: nothing to undo.
var provisionStep = map[string]struct{ do, undo hostStep }{
	"CreateDatasets": {func(h *hostops.Host) func(context.Context, hostapi.PodSandbox) error { return h.CreateDatasets },
		func(h *hostops.Host) func(context.Context, hostapi.PodSandbox) error { return h.DestroyDatasets }},
	"CreateVNIC": {func(h *hostops.Host) func(context.Context, hostapi.PodSandbox) error { return h.CreateVNIC },
		func(h *hostops.Host) func(context.Context, hostapi.PodSandbox) error { return h.DeleteVNIC }},
	"ConfigureZone": {func(h *hostops.Host) func(context.Context, hostapi.PodSandbox) error { return h.ConfigureZone },
		func(h *hostops.Host) func(context.Context, hostapi.PodSandbox) error { return h.DeleteZoneConfig }},
	"InstallZone": {func(h *hostops.Host) func(context.Context, hostapi.PodSandbox) error { return h.InstallZone },
		func(h *hostops.Host) func(context.Context, hostapi.PodSandbox) error { return h.UninstallZone }},
	"BootZone": {func(h *hostops.Host) func(context.Context, hostapi.PodSandbox) error { return h.BootZone },
		func(h *hostops.Host) func(context.Context, hostapi.PodSandbox) error { return h.HaltZone }},
	"ConfigureNetwork": {func(h *hostops.Host) func(context.Context, hostapi.PodSandbox) error { return h.ConfigureNetwork }, nil},
	"StartContainers": {func(h *hostops.Host) func(context.Context, hostapi.PodSandbox) error { return h.StartContainers },
		func(h *hostops.Host) func(context.Context, hostapi.PodSandbox) error { return h.StopContainers }},
	"WaitContainersOnline": {func(h *hostops.Host) func(context.Context, hostapi.PodSandbox) error { return h.WaitContainersOnline }, nil},
}

// stepMakes is how what a step makes shows in traces.
var stepMakes = map[string]string{"CreateDatasets": "dataset ", "CreateVNIC": "vnic ", "ConfigureZone": "zone ",
	"ConfigureNetwork": "address 127.10.9.2/24", "StartContainers": "service "}

// traces lists what of the pod the node holds, each thing once per time
// it appears, so a duplicate shows.
func traces(st simtest.State, s hostapi.PodSandbox) []string {
	var out []string
	for _, z := range st.Zones {
		if z.Name != s.ZoneName() {
			continue
		}
		out = append(out, "zone "+z.State)
		for _, a := range z.Addresses {
			out = append(out, "address "+a.Addr)
		}
		for _, svc := range z.Services {
			if strings.Contains(svc.FMRI, "zonewright") {
				out = append(out, "service "+svc.FMRI)
			}
		}
	}
	for _, l := range st.Links {
		if l.Name == s.VNICName() {
			out = append(out, "vnic "+l.Name)
		}
	}
	for _, d := range st.Datasets {
		if strings.Contains(d.Name, s.ZoneName()) {
			out = append(out, "dataset "+d.Name)
		}
	}
	for stack, tbl := range st.NAT {
		for _, r := range tbl.Rules {
			if strings.Contains(r.Text, s.IP+"/") || strings.Contains(r.Text, s.IP+" ") {
				out = append(out, fmt.Sprintf("nat rule %q in %s", r.Text, stack))
			}
		}
	}
	slices.Sort(out)
	return out
}

func duplicates(items []string) []string {
	var dup []string
	for i := 1; i < len(items); i++ {
		if items[i] == items[i-1] {
			dup = append(dup, items[i])
		}
	}
	return dup
}

// The pod's lifecycle may run any provision step again (a retry after a
// lost answer, an agent killed mid-step) and undoes every step begun, in
// reverse, possibly twice, from wherever the provision stopped. Against
// the simulator: provisioning up to each step with every step run twice
// creates each thing once, and undoing from there with every undo run
// twice (including the undo of the step that was begun last) succeeds and
// leaves nothing of the pod on the node.
func TestProvisionStepsAndTheirUndoRunTwice(t *testing.T) {
	for _, st := range hostops.ProvisionSteps {
		if _, ok := provisionStep[st.Name]; !ok {
			t.Fatalf("provision step %s is not in this test's table", st.Name)
		}
	}
	for k := 1; k <= len(hostops.ProvisionSteps); k++ {
		begun := hostops.ProvisionSteps[:k]
		t.Run("begun up to "+begun[k-1].Name, func(t *testing.T) {
			h, node := newHostOn(t)
			s := hostapi.PodSandbox{Namespace: "default", Name: "twice", UID: "uid-twice", Brand: "sparse",
				IP: "127.10.9.2", PrefixLen: 24, Gateway: "127.10.9.1",
				Containers: []hostapi.ContainerSpec{{Name: "app", Argv: []string{"sleep", "1000"}}}}
			ctx := t.Context()
			for _, st := range begun {
				for try := 1; try <= 2; try++ {
					if err := provisionStep[st.Name].do(h)(ctx, s); err != nil {
						t.Fatalf("%s (run %d): %v", st.Name, try, err)
					}
				}
			}
			made := traces(node.State(t), s)
			if dup := duplicates(made); len(dup) > 0 {
				t.Errorf("provisioning with every step run twice made duplicates: %v", dup)
			}
			// What each step makes is seen, so a leak would be.
			for _, st := range begun {
				want, ok := stepMakes[st.Name]
				if ok && !slices.ContainsFunc(made, func(m string) bool { return strings.HasPrefix(m, want) }) {
					t.Errorf("after %s the node shows no %q: %v", st.Name, want, made)
				}
			}
			for i := k - 1; i >= 0; i-- {
				undo := provisionStep[begun[i].Name].undo
				if undo == nil {
					continue
				}
				for try := 1; try <= 2; try++ {
					if err := undo(h)(ctx, s); err != nil {
						t.Fatalf("undo of %s (run %d): %v", begun[i].Name, try, err)
					}
				}
			}
			if left := traces(node.State(t), s); len(left) > 0 {
				t.Errorf("undoing every step begun, each twice, left %v", left)
			}
		})
	}
}
