package servicenat

import (
	"net/netip"
	"reflect"
	"strings"
	"testing"

	"github.com/zonewright/zonewright/internal/illumos"
	"github.com/zonewright/zonewright/internal/servicenet"
)

// lines renders rules as ipnat.conf lines, for readable comparisons.
func lines(t *testing.T, rules []illumos.NATRule) []string {
	t.Helper()
	out := []string{}
	for _, r := range rules {
		s, err := r.Rule()
		if err != nil {
			t.Fatalf("rule %#v: %v", r, err)
		}
		out = append(out, s)
	}
	return out
}

func TestRulesOnePerServicePortAndEndpoint(t *testing.T) {
	snap := &servicenet.Snapshot{Generation: 7, Services: []servicenet.Service{
		{Namespace: "default", Name: "web", ClusterIP: "10.96.0.20",
			Ports: []servicenet.Port{{Name: "http", Protocol: "TCP", Port: 80}, {Name: "dns", Protocol: "UDP", Port: 53}},
			Endpoints: []servicenet.Endpoint{
				// Out of order: the rules come sorted by address.
				{IP: "10.88.2.9", TargetPorts: []int32{8080, 5353}},
				{IP: "10.88.1.5", TargetPorts: []int32{8000, 0}}, // lacks the UDP port
			}},
		{Namespace: "default", Name: "db", ClusterIP: "", // headless: no rule
			Ports:     []servicenet.Port{{Protocol: "TCP", Port: 5432}},
			Endpoints: []servicenet.Endpoint{{IP: "10.88.1.7", TargetPorts: []int32{5432}}}},
		{Namespace: "a", Name: "empty", ClusterIP: "10.96.0.30", // no endpoints: no rule
			Ports: []servicenet.Port{{Protocol: "TCP", Port: 80}}},
		{Namespace: "a", Name: "sctp", ClusterIP: "10.96.0.31",
			Ports:     []servicenet.Port{{Protocol: "SCTP", Port: 9}},
			Endpoints: []servicenet.Endpoint{{IP: "10.88.1.8", TargetPorts: []int32{9}}}},
		{Namespace: "a", Name: "first", ClusterIP: "10.96.0.3",
			Ports:     []servicenet.Port{{Protocol: "TCP", Port: 443}},
			Endpoints: []servicenet.Endpoint{{IP: "10.88.1.9", TargetPorts: []int32{8443}}}},
	}}
	nw := Network{Interface: "zwgw0", PodCIDR: netip.MustParsePrefix("10.88.1.0/24")}
	got := lines(t, Rules(snap, nw))
	want := []string{
		"map zwgw0 10.88.1.0/24 -> 10.88.1.1/32 portmap tcp/udp auto tag zonewright-svc",
		"rdr zwgw0 10.96.0.3/32 port 443 -> 10.88.1.9 port 8443 tcp round-robin tag zonewright-svc",
		"rdr zwgw0 10.96.0.20/32 port 53 -> 10.88.2.9 port 5353 udp round-robin tag zonewright-svc",
		"rdr zwgw0 10.96.0.20/32 port 80 -> 10.88.1.5 port 8000 tcp round-robin tag zonewright-svc",
		"rdr zwgw0 10.96.0.20/32 port 80 -> 10.88.2.9 port 8080 tcp round-robin tag zonewright-svc",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("rules:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if again := lines(t, Rules(snap, nw)); !reflect.DeepEqual(again, got) {
		t.Errorf("rules differ between two plans of one snapshot")
	}
	// Without a pod network: no hairpin rule. Without rdr rules: none.
	if got := lines(t, Rules(snap, Network{Interface: "zwgw0"})); !reflect.DeepEqual(got, want[1:]) {
		t.Errorf("rules without a pod network: %q", got)
	}
	if got := Rules(&servicenet.Snapshot{Services: snap.Services[1:3]}, nw); len(got) != 0 {
		t.Errorf("rules for headless and endpoint-less services: %q", lines(t, got))
	}
	if len(Tag) > 16 {
		t.Errorf("tag %q is longer than IPFilter's 16 bytes", Tag)
	}
	if Rules(nil, nw) != nil {
		t.Errorf("a nil snapshot has rules")
	}
}

func TestDiffAddsMissingAndRemovesOnlyOwnedRules(t *testing.T) {
	parse := func(s string) illumos.NATRule {
		r, err := illumos.ParseNATRule(s)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	keep := "rdr zwgw0 10.96.0.20/32 port 80 -> 10.88.1.5 port 8000 tcp round-robin tag zonewright-svc"
	gone := "rdr zwgw0 10.96.0.20/32 port 80 -> 10.88.1.6 port 8000 tcp round-robin tag zonewright-svc"
	goneRaw := "rdr zwgw0 10.96.0.21/32 port 80 -> 10.88.1.6 port 8000 tcp round-robin age 30/30 tag zonewright-svc"
	operator := "rdr net0 10.96.0.20/32 port 80 -> 10.88.1.6 port 8000 tcp round-robin tag svc-web"
	operatorUntagged := "map net0 10.88.0.0/16 -> 0.0.0.0/32 portmap tcp/udp auto"
	goneMap := "map zwgw0 10.88.2.0/24 -> 10.88.2.1/32 portmap tcp/udp auto tag zonewright-svc"
	newRule := "rdr zwgw0 10.96.0.20/32 port 80 -> 10.88.2.9 port 8080 tcp round-robin tag zonewright-svc"

	want := []illumos.NATRule{parse(keep), parse(newRule)}
	current := []illumos.NATRule{parse(operatorUntagged), parse(keep), parse(gone), parse(goneRaw), parse(operator), parse(goneMap)}
	add, remove := Diff(want, current)
	if got := lines(t, add); !reflect.DeepEqual(got, []string{newRule}) {
		t.Errorf("add = %q", got)
	}
	if got := lines(t, remove); !reflect.DeepEqual(got, []string{gone, goneRaw, goneMap}) {
		t.Errorf("remove = %q, want only zonewright's obsolete rules", got)
	}
	if add, remove := Diff(want, append(current, parse(newRule))); len(add) != 0 || len(remove) != 3 {
		t.Errorf("with the new rule loaded: add %d, remove %d", len(add), len(remove))
	}
	if add, remove := Diff(nil, []illumos.NATRule{parse(operator), parse(operatorUntagged)}); len(add)+len(remove) != 0 {
		t.Errorf("wanting nothing touches an operator's rules: add %q, remove %q", lines(t, add), lines(t, remove))
	}
}
