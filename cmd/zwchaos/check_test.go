package main

import (
	"strings"
	"testing"
	"time"

	"github.com/zonewright/zonewright/internal/illumos/names"
	"github.com/zonewright/zonewright/internal/model"
	"github.com/zonewright/zonewright/internal/sim"
	"github.com/zonewright/zonewright/workflows/podcontract"
)

// The checks find what a crash could leave behind, and nothing on a host
// that holds exactly its pods' resources.
func TestChecksFindWhatIsLeftBehind(t *testing.T) {
	const uid, goneUID = "0b6f2e4c-6c1e-4d7a-9f1e-2a3b4c5d6e7f", "9c1d2e3f-4a5b-4c6d-8e7f-0a1b2c3d4e5f"
	const clusterCIDR = "127.200.0.0/16"
	pod := model.Pod{Metadata: model.ObjectMeta{Name: "web", Namespace: "default", UID: uid}, Spec: model.PodSpec{NodeName: "node-1"},
		Status: model.PodStatus{Phase: model.PodRunning, PodIP: "127.200.1.5", Conditions: []model.PodCondition{{Type: model.PodReady, Status: model.ConditionTrue}}}}
	zone := names.ZoneName("default", "web", uid)
	goneZone := names.ZoneName("default", "gone", goneUID)
	clean := func() *observation {
		return &observation{
			pods:     []model.Pod{pod},
			services: []model.Service{{Metadata: model.ObjectMeta{Name: "svc"}, Spec: model.ServiceSpec{ClusterIP: "127.93.0.20"}}},
			hosts: map[string]*sim.State{"node-1": {
				Zones:    []*sim.Zone{{Name: "global"}, {Name: zone, State: "running", Addresses: []*sim.IPAddress{{Addr: "127.200.1.5/24"}}}},
				Links:    []*sim.Link{{Name: "zwgw0", Class: "vnic"}, {Name: names.LinkName("zw", uid), Class: "vnic"}},
				Datasets: []*sim.Dataset{{Name: "tank/zonewright/zones"}, {Name: "tank/zonewright/zones/" + zone}},
				NAT: map[string]*sim.NATTable{"global": {Rules: []*sim.NATRuleEntry{
					{Text: "rdr zwgw0 127.93.0.20/32 port 80 -> 127.200.1.5 port 8080 tcp"},
					{Text: "map zwgw0 127.200.1.0/24 -> 127.200.1.1/32 portmap tcp/udp auto"}}}},
			}},
			ipAllocs:     map[string]string{uid: "127.200.1.5"},
			podWorkflows: map[string]bool{podcontract.WorkflowID("default", "web"): true},
		}
	}
	o := clean()
	if z, v, d, what := o.leaks(); z+v+d != 0 {
		t.Fatalf("a clean host has leaks: %v", what)
	}
	if f := o.podHostFaults(); len(f) != 0 {
		t.Fatalf("a pod with its resources is reported: %v", f)
	}
	if len(o.ipamLeaks())+len(o.natLeaks(loopbackServiceCIDR, clusterCIDR))+len(o.lifecycleFaults()) != 0 {
		t.Fatalf("a clean cluster has leaks: %v %v %v", o.ipamLeaks(), o.natLeaks(loopbackServiceCIDR, clusterCIDR), o.lifecycleFaults())
	}

	// What a deleted pod and service could leave behind.
	o = clean()
	st := o.hosts["node-1"]
	st.Zones = append(st.Zones, &sim.Zone{Name: goneZone, State: "installed"})
	st.Links = append(st.Links, &sim.Link{Name: names.LinkName("zw", goneUID), Class: "vnic"})
	st.Datasets = append(st.Datasets, &sim.Dataset{Name: "tank/zonewright/zones/" + goneZone})
	st.NAT["global"].Rules = append(st.NAT["global"].Rules, &sim.NATRuleEntry{Text: "rdr zwgw0 127.93.0.21/32 port 80 -> 127.200.1.5 port 8080 tcp"},
		&sim.NATRuleEntry{Text: "rdr zwgw0 127.93.0.20/32 port 80 -> 127.200.1.9 port 8080 tcp"})
	o.ipAllocs[goneUID] = "127.200.1.9"
	o.podWorkflows[podcontract.WorkflowID("default", "gone")] = true
	if z, v, d, what := o.leaks(); z != 1 || v != 1 || d != 1 {
		t.Errorf("leaks: %d zones, %d VNICs, %d datasets, want one each: %v", z, v, d, what)
	}
	if l := o.ipamLeaks(); len(l) != 1 || !strings.Contains(l[0], "127.200.1.9") {
		t.Errorf("IPAM leaks: %v", l)
	}
	if l := o.natLeaks(loopbackServiceCIDR, clusterCIDR); len(l) != 2 {
		t.Errorf("NAT leaks: %v, want the two rules naming addresses gone", l)
	}
	// Off loopback (isolation mode) a rule naming a service gone is found
	// as well.
	iso := &observation{hosts: map[string]*sim.State{"node-1": {NAT: map[string]*sim.NATTable{"global": {Rules: []*sim.NATRuleEntry{
		{Text: "rdr zwgw0 10.96.0.20/32 port 80 -> 10.20.1.5 port 8080 tcp"}}}}}}}
	if l := iso.natLeaks("10.96.0.0/16", "10.20.0.0/17"); len(l) != 1 {
		t.Errorf("NAT leaks off loopback: %v, want the rule", l)
	}
	if l := o.lifecycleFaults(); len(l) != 1 || !strings.Contains(l[0], "pod/default/gone") {
		t.Errorf("lifecycle faults: %v", l)
	}

	// A pod whose zone lost its address and VNIC, and whose lifecycle ended.
	o = clean()
	st = o.hosts["node-1"]
	st.Zones[1].Addresses = nil
	st.Links = st.Links[:1]
	o.podWorkflows = map[string]bool{}
	if f := o.podHostFaults(); len(f) != 1 || !strings.Contains(f[0], "0 VNICs") {
		t.Errorf("host faults: %v", f)
	}
	if l := o.lifecycleFaults(); len(l) != 1 || !strings.Contains(l[0], "no running lifecycle") {
		t.Errorf("lifecycle faults: %v", l)
	}

	// The deployment at rest: as it was, then a pod replaced, a failed
	// rollout's condition and event.
	o = clean()
	yes := true
	o.pods[0].Metadata.OwnerReferences = []model.OwnerReference{{Kind: model.KindDeployment, Name: atRestName, UID: "d", Controller: &yes}}
	o.deployments = []model.Deployment{{Metadata: model.ObjectMeta{Name: atRestName}, Status: model.DeploymentStatus{Conditions: []model.DeploymentCondition{
		{Type: model.DeploymentAvailable, Status: model.ConditionTrue}, {Type: model.DeploymentProgressing, Status: model.ConditionTrue, Reason: model.ReasonNewReplicaSetAvailable}}}}}
	atRest := map[string]string{uid: "web"}
	if f := o.atRestFaults(atRest, time.Time{}); len(f) != 0 {
		t.Fatalf("a deployment at rest with its pod is reported: %v", f)
	}
	o.pods[0].Metadata.UID = goneUID
	o.deployments[0].Status.Conditions[1] = model.DeploymentCondition{Type: model.DeploymentProgressing, Status: model.ConditionFalse, Reason: model.ReasonProgressDeadlineExceeded}
	o.atRestEvents = []model.Event{{EventData: model.EventData{InvolvedObject: model.ObjectReference{Kind: model.KindDeployment, Name: atRestName},
		Type: model.EventWarning, Reason: "RolloutFailed", Message: "2 new pods of revision 1 missed their healthy deadline"}}}
	f := o.atRestFaults(atRest, time.Time{})
	if len(f) != 4 || !strings.Contains(f[0], "is new") || !strings.Contains(f[1], "was replaced") ||
		!strings.Contains(f[2], model.ReasonProgressDeadlineExceeded) || !strings.Contains(f[3], "RolloutFailed") {
		t.Errorf("faults of the deployment at rest: %v; want the new pod, the one replaced, the condition and the event", f)
	}
	// An event of its rollout, before it was at rest, is not a fault.
	before := time.Now()
	o.atRestEvents[0].LastTimestamp = &before
	if f := o.atRestFaults(atRest, before.Add(time.Second)); len(f) != 3 {
		t.Errorf("faults with the event from before it was at rest: %v; want the other three", f)
	}
	o.deployments = nil
	if f := o.atRestFaults(atRest, time.Time{}); len(f) != 1 || !strings.Contains(f[0], "gone") {
		t.Errorf("faults of a deployment at rest deleted: %v", f)
	}
}
