package illumos_test

import (
	"net/netip"
	"reflect"
	"slices"
	"testing"

	"github.com/zonewright/zonewright/internal/illumos"
	"github.com/zonewright/zonewright/internal/illumos/names"
	"github.com/zonewright/zonewright/internal/simtest"
)

func TestDladm(t *testing.T) {
	ctx := ctxT(t)
	n := newNode(t, "node1")
	dl := n.host.Dladm()

	stub := names.LinkName("zw", "stub")
	must(t, "create etherstub", dl.CreateEtherstub(ctx, stub))
	wantKind(t, "create etherstub again", dl.CreateEtherstub(ctx, stub), illumos.ErrAlreadyExists)
	if ok, err := dl.EtherstubExists(ctx, stub); err != nil || !ok {
		t.Errorf("EtherstubExists = %v, %v", ok, err)
	}
	if ok, err := dl.EtherstubExists(ctx, "nosuch0"); err != nil || ok {
		t.Errorf("EtherstubExists(nosuch0) = %v, %v", ok, err)
	}
	if ok, err := dl.EtherstubExists(ctx, "net0"); err != nil || ok {
		t.Errorf("a physical link is no etherstub: %v, %v", ok, err)
	}
	stubs, err := dl.Etherstubs(ctx)
	must(t, "etherstubs", err)
	if !reflect.DeepEqual(stubs, []string{stub}) {
		t.Errorf("etherstubs = %q", stubs)
	}

	vnic := names.LinkName("zw", "default/web/0")
	spec := illumos.VNICSpec{Name: vnic, Over: stub, MAC: "2:8:20:a:1b:c3", VID: 12}
	must(t, "create vnic", dl.CreateVNIC(ctx, spec))
	wantKind(t, "create vnic again", dl.CreateVNIC(ctx, spec), illumos.ErrAlreadyExists)
	must(t, "create a second vnic over net0", dl.CreateVNIC(ctx, illumos.VNICSpec{Name: "other0", Over: "net0"}))

	v, err := dl.VNIC(ctx, vnic)
	must(t, "show vnic", err)
	if want := (illumos.VNIC{Name: vnic, Over: stub, MAC: "02:08:20:0a:1b:c3", VID: 12}); v != want {
		t.Errorf("vnic = %+v, want %+v", v, want)
	}
	all, err := dl.VNICs(ctx)
	must(t, "show all vnics", err)
	if len(all) != 2 || all[1].Name != "other0" && all[0].Name != "other0" {
		t.Errorf("vnics = %+v", all)
	}
	for _, v := range all {
		if v.MAC == "" {
			t.Errorf("vnic %s has no MAC", v.Name)
		}
	}

	wantKind(t, "delete the etherstub under a vnic", dl.DeleteEtherstub(ctx, stub), illumos.ErrBusy)
	wantKind(t, "create over a missing link", dl.CreateVNIC(ctx, illumos.VNICSpec{Name: "x0", Over: "nosuch0"}), illumos.ErrNotFound)
	wantKind(t, "delete an etherstub as a vnic", dl.DeleteVNIC(ctx, stub), illumos.ErrInvalid)

	must(t, "delete vnic", dl.DeleteVNIC(ctx, vnic))
	wantKind(t, "delete vnic again", dl.DeleteVNIC(ctx, vnic), illumos.ErrNotFound)
	_, err = dl.VNIC(ctx, vnic)
	wantKind(t, "show a deleted vnic", err, illumos.ErrNotFound)
	must(t, "delete etherstub", dl.DeleteEtherstub(ctx, stub))
	wantKind(t, "delete etherstub again", dl.DeleteEtherstub(ctx, stub), illumos.ErrNotFound)

	st := n.sim.State(t)
	for _, l := range st.Links {
		if l.Name == vnic || l.Name == stub {
			t.Errorf("link %s still in the host state", l.Name)
		}
	}
}

func TestZFS(t *testing.T) {
	ctx := ctxT(t)
	n := newNode(t, "node1")
	z := n.host.ZFS()

	ds := "tank/zw/zones/web01"
	must(t, "create with parents", z.Create(ctx, ds, map[string]string{"quota": "1073741824", "zonewright:pod": "default/web"}))
	must(t, "create again with -p (success)", z.Create(ctx, ds, nil))
	if ok, err := z.Exists(ctx, ds); err != nil || !ok {
		t.Errorf("Exists = %v, %v", ok, err)
	}
	if ok, err := z.Exists(ctx, "tank/nosuch"); err != nil || ok {
		t.Errorf("Exists(nosuch) = %v, %v", ok, err)
	}
	rows, err := z.List(ctx, illumos.ListOptions{Names: []string{"tank/zw"}, Recursive: true})
	must(t, "list", err)
	var names []string
	for _, r := range rows {
		names = append(names, r.Name)
	}
	if !reflect.DeepEqual(names, []string{"tank/zw", "tank/zw/zones", ds}) {
		t.Errorf("list -r = %q", names)
	}
	web := rows[2]
	if web.Type != "filesystem" || web.Quota != 1<<30 || web.Avail == 0 || web.Avail > 1<<30 || web.Mountpoint == "" {
		t.Errorf("dataset row = %+v", web)
	}
	if v, err := z.Get(ctx, ds, "zonewright:pod"); err != nil || v != "default/web" {
		t.Errorf("get user prop = %q, %v", v, err)
	}
	if v, err := z.Get(ctx, ds, "zonewright:unset"); err != nil || v != "-" {
		t.Errorf("get an unset user prop = %q, %v", v, err)
	}
	must(t, "set quota", z.SetQuota(ctx, ds, 2<<30))
	must(t, "set reservation", z.SetReservation(ctx, ds, 1<<20))
	props, err := z.GetProps(ctx, ds, "quota", "reservation")
	must(t, "get props", err)
	if props["quota"] != "2147483648" || props["reservation"] != "1048576" {
		t.Errorf("props = %q", props)
	}
	must(t, "clear quota", z.SetQuota(ctx, ds, 0))
	if v, _ := z.Get(ctx, ds, "quota"); v != "0" {
		t.Errorf("cleared quota reads %q, want 0", v)
	}

	must(t, "snapshot", z.Snapshot(ctx, ds, "s1"))
	wantKind(t, "snapshot again", z.Snapshot(ctx, ds, "s1"), illumos.ErrAlreadyExists)
	must(t, "clone", z.Clone(ctx, ds+"@s1", "tank/zw/zones/web02", map[string]string{"zonewright:pod": "default/web2"}))
	snaps, err := z.List(ctx, illumos.ListOptions{Names: []string{"tank/zw"}, Recursive: true, Types: []string{"snapshot"}})
	must(t, "list snapshots", err)
	if len(snaps) != 1 || snaps[0].Name != ds+"@s1" || snaps[0].Type != "snapshot" {
		t.Errorf("snapshots = %+v", snaps)
	}
	wantKind(t, "destroy an origin with a clone", z.Destroy(ctx, ds), illumos.ErrWrongState)
	must(t, "destroy the clone", z.Destroy(ctx, "tank/zw/zones/web02"))
	must(t, "destroy -r", z.Destroy(ctx, ds))
	wantKind(t, "destroy again", z.Destroy(ctx, ds), illumos.ErrNotFound)
	_, err = z.List(ctx, illumos.ListOptions{Names: []string{ds}})
	wantKind(t, "list a destroyed dataset", err, illumos.ErrNotFound)
	_, err = z.Get(ctx, ds, "quota")
	wantKind(t, "get on a destroyed dataset", err, illumos.ErrNotFound)
	wantKind(t, "create in a missing pool", z.Create(ctx, "nopool/x", nil), illumos.ErrNotFound)

	must(t, "create volume", z.CreateVolume(ctx, "tank/vm0", 1<<30, nil))
	vols, err := z.List(ctx, illumos.ListOptions{Names: []string{"tank/vm0"}})
	must(t, "list volume", err)
	if len(vols) != 1 || vols[0].Type != "volume" || vols[0].Mountpoint != "" {
		t.Errorf("volume = %+v", vols)
	}
}

func TestIpnat(t *testing.T) {
	ctx := ctxT(t)
	n := newNode(t, "node1")
	nat := n.host.Ipnat()

	rules, err := nat.List(ctx)
	must(t, "list empty", err)
	if len(rules) != 0 {
		t.Errorf("a new host has rules: %v", rules)
	}
	rdr := &illumos.RdrRule{Interface: "net0", ExtAddr: netip.MustParsePrefix("10.0.0.5/32"), ExtPort: 80,
		IntAddrs: []netip.Addr{netip.MustParseAddr("192.168.1.10")}, IntPort: 8080, Proto: "tcp"}
	rr := &illumos.RdrRule{Interface: "net0", ExtAddr: netip.MustParsePrefix("10.0.0.6/32"), ExtPort: 53,
		IntAddrs: []netip.Addr{netip.MustParseAddr("192.168.1.11"), netip.MustParseAddr("192.168.1.12")}, IntPort: 53, Proto: "udp", RoundRobin: true}
	mp := &illumos.MapRule{Interface: "net0", Src: netip.MustParsePrefix("192.168.1.0/24"), Dst: netip.MustParsePrefix("10.0.0.5/32"), Portmap: "auto", PortmapProto: "tcp/udp"}

	must(t, "load", nat.Load(ctx, []illumos.NATRule{rdr, mp}))
	rules, err = nat.List(ctx)
	must(t, "list", err)
	if !reflect.DeepEqual(rules, []illumos.NATRule{rdr, mp}) {
		t.Errorf("rules = %#v", rules)
	}
	wantKind(t, "load a duplicate", nat.Load(ctx, []illumos.NATRule{rdr}), illumos.ErrAlreadyExists)

	must(t, "replace", nat.Replace(ctx, []illumos.NATRule{rr}))
	rules, err = nat.List(ctx)
	must(t, "list after replace", err)
	if !reflect.DeepEqual(rules, []illumos.NATRule{rr}) {
		t.Errorf("after replace = %#v", rules)
	}
	must(t, "remove", nat.Remove(ctx, []illumos.NATRule{rr}))
	must(t, "load again", nat.Load(ctx, []illumos.NATRule{mp}))
	must(t, "flush", nat.Flush(ctx))
	if rules, err := nat.List(ctx); err != nil || len(rules) != 0 {
		t.Errorf("after flush: %v, %v", rules, err)
	}
}

func TestFacts(t *testing.T) {
	ctx := ctxT(t)
	n := newNode(t, "node7")
	f, err := n.host.Facts(ctx, "tank")
	must(t, "facts", err)
	if f.Hostname != "node7" || f.CPUs != 8 || f.MemoryBytes != 32768<<20 {
		t.Errorf("facts = %+v", f)
	}
	if len(f.Pools) != 1 || f.Pools[0].Name != "tank" || f.Pools[0].Size != 1<<40 || f.Pools[0].Free == 0 || f.Pools[0].Free > f.Pools[0].Size {
		t.Errorf("pools = %+v", f.Pools)
	}
	if f.DatasetAvail == 0 || f.DatasetAvail > 1<<40 {
		t.Errorf("dataset avail = %d", f.DatasetAvail)
	}
	if f.Uname.Sysname != "SunOS" || f.Uname.Nodename != "node7" || f.Uname.Release != "5.11" {
		t.Errorf("uname = %+v", f.Uname)
	}
	_, err = n.host.Facts(ctx, "tank/nosuch")
	wantKind(t, "facts of a missing dataset", err, illumos.ErrNotFound)
	if !slices.ContainsFunc(n.sim.State(t).Datasets, func(d simtest.Dataset) bool { return d.Name == "tank" }) {
		t.Error("the pool's root dataset is not in the host state")
	}
}
