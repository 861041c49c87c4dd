package illumos_test

import (
	"net/netip"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"

	"github.com/zonewright/zonewright/internal/illumos"
)

// A global-zone network route is added once, read back from the routing
// table, restored by a second add after an operator deleted it from the
// kernel's table only, and removed idempotently.
func TestGlobalZoneNetRoutes(t *testing.T) {
	ctx := ctxT(t)
	n := newNode(t, "node1")
	gz := n.host.GlobalZone()
	must(t, "create the underlay VNIC", n.host.Dladm().CreateVNIC(ctx, illumos.VNICSpec{Name: "under0", Over: "net0"}))
	must(t, "create the underlay interface", gz.CreateIf(ctx, "under0"))
	must(t, "address the underlay", gz.CreateStaticAddr(ctx, "under0/v4", "192.168.7.11/24"))
	dest, gw := netip.MustParsePrefix("10.88.2.0/24"), netip.MustParseAddr("192.168.7.12")
	has := func() bool {
		t.Helper()
		routes, err := n.host.RoutingTable(ctx)
		must(t, "routing table", err)
		return slices.ContainsFunc(routes, func(r illumos.NetRoute) bool {
			return r.Dest == dest && r.Gateway == gw && r.ThroughGateway() && r.Device == "under0"
		})
	}
	must(t, "add", gz.AddNetRoute(ctx, dest, gw))
	must(t, "add again", gz.AddNetRoute(ctx, dest, gw))
	if !has() {
		t.Fatal("the route is not in the table")
	}
	// The operator's route(8), as the command directory has it.
	if out, err := exec.Command(filepath.Join(n.sim.Bin, "route"), "delete", "-net", dest.String(), gw.String()).CombinedOutput(); err != nil {
		t.Fatalf("route delete: %v\n%s", err, out)
	}
	if has() {
		t.Fatal("the operator's delete left the route")
	}
	must(t, "add after the operator's delete", gz.AddNetRoute(ctx, dest, gw))
	if !has() {
		t.Fatal("the route did not come back")
	}
	must(t, "delete", gz.DeleteNetRoute(ctx, dest, gw))
	must(t, "delete again", gz.DeleteNetRoute(ctx, dest, gw))
	if has() {
		t.Fatal("the deleted route is in the table")
	}
	if err := gz.AddNetRoute(ctx, dest, netip.MustParseAddr("10.9.9.9")); err == nil {
		t.Error("a route through an unreachable gateway was added")
	}

	if v, err := gz.IfProp(ctx, "under0", "ipv4", "forwarding"); err != nil || v != "off" {
		t.Fatalf("forwarding before: %q, %v", v, err)
	}
	must(t, "forwarding on", gz.SetIfProp(ctx, "under0", "ipv4", "forwarding", "on"))
	if v, err := gz.IfProp(ctx, "under0", "ipv4", "forwarding"); err != nil || v != "on" {
		t.Fatalf("forwarding after: %q, %v", v, err)
	}
	wantKind(t, "forwarding of a missing interface", func() error { _, err := gz.IfProp(ctx, "nope0", "ipv4", "forwarding"); return err }(), illumos.ErrNotFound)
}
