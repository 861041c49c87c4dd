package servicenat_test

import (
	"context"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/zonewright/zonewright/internal/illumos"
	"github.com/zonewright/zonewright/internal/servicenat"
	"github.com/zonewright/zonewright/internal/servicenet"
	"github.com/zonewright/zonewright/internal/simtest"
)

// These tests converge a real simulated host's ipnat (the illumos-sim
// binary, through the illumos wrapper).

func TestMain(m *testing.M) { os.Exit(simtest.Main(m.Run)) }

func newNAT(t *testing.T) (illumos.Ipnat, *simtest.Node) {
	t.Helper()
	n := simtest.NewNode(t, "node1")
	host := illumos.Host{Runner: &illumos.Runner{BinDir: n.Bin, Timeout: time.Minute}}
	return host.Ipnat(), n
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func web(endpoints ...string) *servicenet.Snapshot {
	s := servicenet.Service{Namespace: "default", Name: "web", ClusterIP: "10.96.0.20",
		Ports: []servicenet.Port{{Protocol: "TCP", Port: 80}}}
	for _, ip := range endpoints {
		s.Endpoints = append(s.Endpoints, servicenet.Endpoint{IP: ip, TargetPorts: []int32{8080}})
	}
	return &servicenet.Snapshot{Services: []servicenet.Service{s}}
}

func ruleLines(t *testing.T, nat illumos.Ipnat) []string {
	t.Helper()
	rules, err := nat.List(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	out := []string{}
	for _, r := range rules {
		s, _ := r.Rule()
		out = append(out, s)
	}
	return out
}

// nw is the simulated node's pod network (the gateway link's name is
// not checked by the simulator).
var nw = servicenat.Network{Interface: "zwgw0", PodCIDR: netip.MustParsePrefix("10.88.1.0/24")}

const hairpin = "map zwgw0 10.88.1.0/24 -> 10.88.1.1/32 portmap tcp/udp auto tag zonewright-svc"

const operatorRule = "rdr net0 10.96.9.9/32 port 22 -> 10.88.9.9 port 22 tcp"

// Converge adds the new backend's rule, then removes the old one's, and
// leaves the operator's rule alone; a second run does nothing.
func TestConvergeAddsThenRemovesAndKeepsOperatorRules(t *testing.T) {
	ctx := ctxT(t)
	nat, _ := newNAT(t)
	if err := nat.Load(ctx, []illumos.NATRule{illumos.RawRule(operatorRule)}); err != nil {
		t.Fatal(err)
	}
	res, err := servicenat.Converge(ctx, nat, servicenat.Rules(web("10.88.1.5", "10.88.1.6"), nw))
	if err != nil || res.Added != 3 || res.Removed != 0 || !res.Converged() {
		t.Fatalf("first converge: %+v, %v", res, err)
	}
	res, err = servicenat.Converge(ctx, nat, servicenat.Rules(web("10.88.1.6", "10.88.1.7"), nw))
	if err != nil || res.Added != 1 || res.Removed != 1 || !res.Converged() {
		t.Fatalf("second converge: %+v, %v", res, err)
	}
	want := []string{
		operatorRule,
		hairpin,
		"rdr zwgw0 10.96.0.20/32 port 80 -> 10.88.1.6 port 8080 tcp round-robin tag zonewright-svc",
		// Added before the obsolete 10.88.1.5 rule was removed: last.
		"rdr zwgw0 10.96.0.20/32 port 80 -> 10.88.1.7 port 8080 tcp round-robin tag zonewright-svc",
	}
	if got := ruleLines(t, nat); !reflect.DeepEqual(got, want) {
		t.Errorf("rules = %q\nwant %q", got, want)
	}
	if res, err := servicenat.Converge(ctx, nat, servicenat.Rules(web("10.88.1.6", "10.88.1.7"), nw)); err != nil || res.Changed() {
		t.Errorf("converging a converged host changed it: %+v, %v", res, err)
	}
	// No endpoints: no rule, and the operator's stays.
	if res, err := servicenat.Converge(ctx, nat, servicenat.Rules(web(), nw)); err != nil || res.Removed != 3 || !res.Converged() {
		t.Errorf("converge to no endpoints: %+v, %v", res, err)
	}
	if got := ruleLines(t, nat); !reflect.DeepEqual(got, []string{operatorRule}) {
		t.Errorf("rules = %q, want the operator's alone", got)
	}
}

// The ipfilter refresh runs `ipnat -CF`: the next converge restores every
// rule.
func TestConvergeRepairsAWipe(t *testing.T) {
	ctx := ctxT(t)
	nat, node := newNAT(t)
	want := servicenat.Rules(web("10.88.1.5", "10.88.1.6"), nw)
	if _, err := servicenat.Converge(ctx, nat, want); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(filepath.Join(node.Bin, "ipnat"), "-CF").CombinedOutput()
	if err != nil {
		t.Fatalf("ipnat -CF: %v\n%s", err, out)
	}
	if got := ruleLines(t, nat); len(got) != 0 {
		t.Fatalf("after -CF: %q", got)
	}
	res, err := servicenat.Converge(ctx, nat, want)
	if err != nil || res.Added != 3 || !res.Converged() {
		t.Fatalf("repair: %+v, %v", res, err)
	}
	if got := ruleLines(t, nat); len(got) != 3 {
		t.Errorf("after repair: %q", got)
	}
}

// ipnat exits 0 when the kernel refuses a rule (spec 10.5); the read-back
// reports it missing while the others are applied.
func TestConvergeReportsARefusedRule(t *testing.T) {
	ctx := ctxT(t)
	nat, _ := newNAT(t)
	refused := illumos.RawRule("rdr zwgw0 10.96.0.21/32 port 21 -> 10.88.1.8 port 21 tcp proxy nosuch tag " + servicenat.Tag)
	want := append(servicenat.Rules(web("10.88.1.5"), nw), refused)
	res, err := servicenat.Converge(ctx, nat, want)
	if err != nil {
		t.Fatal(err)
	}
	if res.Added != 3 || !reflect.DeepEqual(res.Missing, []illumos.NATRule{refused}) || len(res.Leftover) != 0 {
		t.Errorf("result = %+v, want the proxy rule missing", res)
	}
	if got := ruleLines(t, nat); len(got) != 2 {
		t.Errorf("rules = %q, want the hairpin and web rules", got)
	}
}
