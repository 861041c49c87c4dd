package noderoutes

import (
	"context"
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"

	"github.com/zonewright/zonewright/internal/illumos"
	"github.com/zonewright/zonewright/internal/model"
)

func node(name, cidr, ip string) model.Node {
	n := model.Node{Metadata: model.ObjectMeta{Name: name}, Spec: model.NodeSpec{PodCIDR: cidr}}
	if ip != "" {
		n.Status.Addresses = []model.NodeAddress{{Type: model.NodeHostName, Address: name}, {Type: model.NodeInternalIP, Address: ip}}
	}
	return n
}

func rt(dest, gw, node string) Route {
	return Route{Dest: netip.MustParsePrefix(dest), Gateway: netip.MustParseAddr(gw), Node: node}
}

func gwRoute(dest, gw string) illumos.NetRoute {
	return illumos.NetRoute{Dest: netip.MustParsePrefix(dest), Gateway: netip.MustParseAddr(gw), Device: "net0", Flags: "UG"}
}

func TestWantRoutesEveryOtherNodesPodCIDRToItsAddress(t *testing.T) {
	nodes := []model.Node{
		node("n3", "10.88.3.0/24", "192.168.7.13"),
		node("n1", "10.88.1.0/24", "192.168.7.11"),
		node("n2", "10.88.2.0/24", "192.168.7.12"),
		node("new", "", ""),                            // not registered yet
		node("quiet", "10.88.4.0/24", ""),              // no address reported
		node("v6", "10.88.5.0/24", "fd00::5"),          // no IPv4 underlay
		node("clash", "10.88.1.128/25", "192.168.7.9"), // inside n1's
	}
	got, skipped := Want("n1", nodes)
	want := []Route{rt("10.88.2.0/24", "192.168.7.12", "n2"), rt("10.88.3.0/24", "192.168.7.13", "n3")}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("routes %v, want %v", got, want)
	}
	var names []string
	for _, s := range skipped {
		names = append(names, s.Node)
	}
	if !reflect.DeepEqual(names, []string{"new", "quiet", "v6", "clash"}) {
		t.Errorf("skipped %v", skipped)
	}
}

func TestDiffAddsMissingDeletesStaleKeepsCorrect(t *testing.T) {
	own := netip.MustParsePrefix("10.88.1.0/24")
	want := []Route{rt("10.88.2.0/24", "192.168.7.12", "n2"), rt("10.88.3.0/24", "192.168.7.13", "n3")}
	for _, tc := range []struct {
		name           string
		table          []illumos.NetRoute
		owned          []Route
		add, del, keep []Route
	}{
		{
			name: "an empty table gets every route",
			add:  want,
		},
		{
			name:  "correct routes are left alone",
			table: []illumos.NetRoute{gwRoute("10.88.2.0/24", "192.168.7.12"), gwRoute("10.88.3.0/24", "192.168.7.13")},
			owned: want,
			keep:  want,
		},
		{
			name:  "a route an operator deleted comes back",
			table: []illumos.NetRoute{gwRoute("10.88.3.0/24", "192.168.7.13")},
			owned: want,
			add:   want[:1],
			keep:  want[1:],
		},
		{
			name: "a departed node's route goes, in the table or not",
			table: []illumos.NetRoute{gwRoute("10.88.2.0/24", "192.168.7.12"), gwRoute("10.88.3.0/24", "192.168.7.13"),
				gwRoute("10.88.9.0/24", "192.168.7.19")},
			owned: append(slices.Clone(want), rt("10.88.9.0/24", "192.168.7.19", "gone"), rt("10.88.8.0/24", "192.168.7.18", "gone-too")),
			del:   []Route{rt("10.88.8.0/24", "192.168.7.18", "gone-too"), rt("10.88.9.0/24", "192.168.7.19", "gone")},
			keep:  want,
		},
		{
			name: "a node that moved: the old gateway goes, the new one comes",
			table: []illumos.NetRoute{gwRoute("10.88.2.0/24", "192.168.7.99"), gwRoute("10.88.3.0/24", "192.168.7.13"),
				gwRoute("10.88.1.0/24", "192.168.7.50")},
			add:  want[:1],
			del:  []Route{{Dest: own, Gateway: netip.MustParseAddr("192.168.7.50")}, {Dest: want[0].Dest, Gateway: netip.MustParseAddr("192.168.7.99")}},
			keep: want[1:],
		},
		{
			name: "an operator's other routes, connected networks and the default stay",
			table: []illumos.NetRoute{gwRoute("0.0.0.0/0", "192.168.7.1"), gwRoute("172.16.0.0/12", "192.168.7.2"),
				{Dest: netip.MustParsePrefix("10.88.1.0/24"), Gateway: netip.MustParseAddr("10.88.1.1"), Device: "zwgw0", Flags: "U"},
				gwRoute("10.88.2.0/24", "192.168.7.12"), gwRoute("10.88.3.0/24", "192.168.7.13")},
			owned: want,
			keep:  want,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := Diff(want, tc.table, tc.owned, own)
			if !reflect.DeepEqual(p.Add, tc.add) || !reflect.DeepEqual(p.Delete, tc.del) || !reflect.DeepEqual(p.Keep, tc.keep) {
				t.Errorf("add %v\ndelete %v\nkeep %v\nwant add %v\ndelete %v\nkeep %v", p.Add, p.Delete, p.Keep, tc.add, tc.del, tc.keep)
			}
		})
	}
}

// fakeStack is a global zone: a routing table and forwarding flags.
type fakeStack struct {
	table      []illumos.NetRoute
	forwarding map[string]string
	refuse     netip.Prefix // adds and deletes of this destination fail
	calls      []string
}

func (s *fakeStack) AddNetRoute(_ context.Context, dest netip.Prefix, gw netip.Addr) error {
	s.calls = append(s.calls, "add "+dest.String()+" "+gw.String())
	if dest == s.refuse {
		return errors.New("refused")
	}
	s.table = append(s.table, illumos.NetRoute{Dest: dest, Gateway: gw, Flags: "UG"})
	return nil
}

func (s *fakeStack) DeleteNetRoute(_ context.Context, dest netip.Prefix, gw netip.Addr) error {
	s.calls = append(s.calls, "delete "+dest.String()+" "+gw.String())
	if dest == s.refuse {
		return errors.New("refused")
	}
	s.table = slices.DeleteFunc(s.table, func(r illumos.NetRoute) bool { return r.Dest == dest && r.Gateway == gw })
	return nil
}

func (s *fakeStack) IfProp(_ context.Context, ifname, _, _ string) (string, error) {
	v, ok := s.forwarding[ifname]
	if !ok {
		return "", illumos.ErrNotFound
	}
	return v, nil
}

func (s *fakeStack) SetIfProp(_ context.Context, ifname, _, _, value string) error {
	s.calls = append(s.calls, "forwarding "+ifname+" "+value)
	s.forwarding[ifname] = value
	return nil
}

func (s *fakeStack) tableFunc(context.Context) ([]illumos.NetRoute, error) {
	return slices.Clone(s.table), nil
}

// The ledger outlives the agent: a route to a node deleted while the
// agent was down is still removed by the next one, and a route the host
// refused to delete stays owned until it goes.
func TestReconcilerRemembersItsRoutesAcrossRestarts(t *testing.T) {
	ctx := context.Background()
	own := netip.MustParsePrefix("10.88.1.0/24")
	ledger := filepath.Join(t.TempDir(), "noderoutes.json")
	s := &fakeStack{forwarding: map[string]string{}}
	r := &Reconciler{Stack: s, Table: s.tableFunc, LedgerFile: ledger}
	two := []Route{rt("10.88.2.0/24", "192.168.7.12", "n2"), rt("10.88.3.0/24", "192.168.7.13", "n3")}
	res, err := r.Reconcile(ctx, two, own)
	if err != nil || len(res.Add) != 2 || len(res.Failed) != 0 || !res.Changed() {
		t.Fatalf("first: %+v, %v", res, err)
	}
	if res, err := r.Reconcile(ctx, two, own); err != nil || res.Changed() || len(res.Keep) != 2 {
		t.Fatalf("second: %+v, %v", res, err)
	}

	// A new agent, and n3 gone meanwhile; the host refuses to delete n3's
	// route at first.
	s.refuse = two[1].Dest
	r = &Reconciler{Stack: s, Table: s.tableFunc, LedgerFile: ledger}
	res, err = r.Reconcile(ctx, two[:1], own)
	if err != nil || len(res.Delete) != 1 || len(res.Failed) != 1 {
		t.Fatalf("after the restart: %+v, %v", res, err)
	}
	if !slices.ContainsFunc(r.Owned(), two[1].same) {
		t.Fatal("a route the host refused to delete is no longer owned")
	}
	s.refuse = netip.Prefix{}
	r = &Reconciler{Stack: s, Table: s.tableFunc, LedgerFile: ledger}
	if res, err := r.Reconcile(ctx, two[:1], own); err != nil || len(res.Delete) != 1 || len(res.Failed) != 0 {
		t.Fatalf("retry: %+v, %v", res, err)
	}
	if len(s.table) != 1 || s.table[0].Dest != two[0].Dest {
		t.Errorf("table %v, want n2's route alone", s.table)
	}
	if got := r.Owned(); !reflect.DeepEqual(got, two[:1]) {
		t.Errorf("owned %v", got)
	}
}

// A ledger that cannot be written holds back no route, and is written
// once it can be.
func TestReconcilerAppliesRoutesWhenTheLedgerCannotBeWritten(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "not-yet")
	s := &fakeStack{forwarding: map[string]string{}}
	r := &Reconciler{Stack: s, Table: s.tableFunc, LedgerFile: filepath.Join(dir, "noderoutes.json")}
	want := []Route{rt("10.88.2.0/24", "192.168.7.12", "n2")}
	res, err := r.Reconcile(ctx, want, netip.Prefix{})
	if err == nil || len(res.Add) != 1 || len(res.Failed) != 0 || len(s.table) != 1 {
		t.Fatalf("%+v, %v, table %v", res, err, s.table)
	}
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Reconcile(ctx, want, netip.Prefix{}); err != nil {
		t.Fatal(err)
	}
	if owned, err := readLedger(r.LedgerFile); err != nil || !reflect.DeepEqual(owned, want) {
		t.Errorf("ledger %v, %v", owned, err)
	}
}

func TestForwardingTurnsOnWhatIsOff(t *testing.T) {
	s := &fakeStack{forwarding: map[string]string{"zwgw0": "on", "net0": "off"}}
	turned, err := Forwarding(context.Background(), s, "zwgw0", "net0", "nope0")
	if !reflect.DeepEqual(turned, []string{"net0"}) || s.forwarding["net0"] != "on" {
		t.Errorf("turned %v, forwarding %v", turned, s.forwarding)
	}
	if !errors.Is(err, illumos.ErrNotFound) {
		t.Errorf("a missing interface: %v", err)
	}
}
