package illumos_test

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/zonewright/zonewright/internal/illumos"
)

// runningZone configures, installs and boots a zone with a VNIC for each
// net (the first one web0 with 10.0.0.5/24 via 10.0.0.1 when none given).
func runningZone(t *testing.T, ctx context.Context, n *simNode, name string, nets ...illumos.Net) illumos.InZone {
	t.Helper()
	if len(nets) == 0 {
		nets = []illumos.Net{{Physical: "web0", AllowedAddress: "10.0.0.5/24", Defrouter: "10.0.0.1"}}
	}
	for _, nt := range nets {
		must(t, "create vnic", n.host.Dladm().CreateVNIC(ctx, illumos.VNICSpec{Name: nt.Physical, Over: "net0"}))
	}
	must(t, "zonecfg", n.host.Zonecfg().Create(ctx, illumos.ZoneConfig{
		Name: name, Brand: "sparse", Zonepath: "/zones/" + name, Nets: nets,
	}))
	must(t, "install", n.host.Zoneadm().Install(ctx, name, illumos.InstallOptions{}))
	must(t, "boot", n.host.Zoneadm().Boot(ctx, name))
	t.Cleanup(func() { _ = n.host.Zoneadm().Halt(context.Background(), name) })
	return n.host.Zone(name)
}

func TestExecInZone(t *testing.T) {
	ctx := ctxT(t)
	n := newNode(t, "node1")
	z := runningZone(t, ctx, n, "web01")

	res, err := z.Exec(ctx, []string{"sh", "-c", "exit 7"}, nil)
	if err != nil || res.ExitCode != 7 {
		t.Errorf("exit 7 is a result: %+v, %v", res, err)
	}
	// Arguments reach the command intact, however the zone's shell would
	// have read them unquoted.
	args := []string{"a b", "it's", "$(echo pwned)", "x;y", "*", "", "%s", `\`, "\n"}
	res, err = z.Exec(ctx, append([]string{"printf", `[%s]`}, args...), nil)
	must(t, "printf", err)
	want := ""
	for _, a := range args {
		want += "[" + a + "]"
	}
	if string(res.Stdout) != want {
		t.Errorf("stdout = %q, want %q", res.Stdout, want)
	}
	res, err = z.Exec(ctx, []string{"cat"}, []byte("from stdin"))
	if err != nil || string(res.Stdout) != "from stdin" {
		t.Errorf("stdin: %q, %v", res.Stdout, err)
	}
	res, err = z.Exec(ctx, []string{"sh", "-c", "echo oops >&2; exit 1"}, nil)
	if err != nil || res.ExitCode != 1 || string(res.Stderr) != "oops\n" {
		t.Errorf("a failing command: %+v, %v", res, err)
	}

	_, err = n.host.Zone("nosuch").Exec(ctx, []string{"true"}, nil)
	wantKind(t, "exec in a missing zone", err, illumos.ErrNotFound)
	must(t, "halt", n.host.Zoneadm().Halt(ctx, "web01"))
	_, err = z.Exec(ctx, []string{"true"}, nil)
	wantKind(t, "exec in a halted zone", err, illumos.ErrWrongState)
}

func TestInZoneNetworking(t *testing.T) {
	ctx := ctxT(t)
	n := newNode(t, "node1")
	// web0 gets its address from the zone's allowed-address at boot; web1
	// is configured by hand.
	z := runningZone(t, ctx, n, "web01",
		illumos.Net{Physical: "web0", AllowedAddress: "10.0.0.5/24"},
		illumos.Net{Physical: "web1"})

	addrs, err := z.Addrs(ctx, "web0/v4")
	must(t, "show-addr of the boot-time address", err)
	if len(addrs) != 1 || addrs[0].Addr != "10.0.0.5/24" || addrs[0].State != "ok" {
		t.Errorf("boot-time address = %+v", addrs)
	}
	wantKind(t, "create-if over a configured interface", z.CreateIf(ctx, "web0"), illumos.ErrAlreadyExists)

	must(t, "create-if", z.CreateIf(ctx, "web1"))
	wantKind(t, "create-if again", z.CreateIf(ctx, "web1"), illumos.ErrAlreadyExists)
	must(t, "create-addr", z.CreateStaticAddr(ctx, "web1/v4", "10.1.0.5/24"))
	wantKind(t, "create-addr again", z.CreateStaticAddr(ctx, "web1/v4", "10.1.0.5/24"), illumos.ErrAlreadyExists)

	addrs, err = z.Addrs(ctx, "web1/v4")
	must(t, "show-addr", err)
	if want := []illumos.Addr{{Obj: "web1/v4", Type: "static", State: "ok", Addr: "10.1.0.5/24"}}; !reflect.DeepEqual(addrs, want) {
		t.Errorf("show-addr = %+v, want %+v", addrs, want)
	}
	all, err := z.Addrs(ctx, "")
	must(t, "show-addr all", err)
	var objs []string
	for _, a := range all {
		objs = append(objs, a.Obj)
	}
	if !slices.Contains(objs, "web0/v4") || !slices.Contains(objs, "web1/v4") {
		t.Errorf("all addresses = %+v", all)
	}

	must(t, "add default route", z.AddDefaultRoute(ctx, "10.0.0.1"))
	must(t, "add default route again (idempotent)", z.AddDefaultRoute(ctx, "10.0.0.1"))
	hasRoute := func() bool {
		for _, zs := range n.sim.State(t).Zones {
			if zs.Name != "web01" {
				continue
			}
			for _, r := range zs.Routes {
				if r.Dest == "default" && r.Gateway == "10.0.0.1" {
					return true
				}
			}
		}
		return false
	}
	if !hasRoute() {
		t.Error("the default route is not in the zone's routing table")
	}
	must(t, "delete default route", z.DeleteDefaultRoute(ctx, "10.0.0.1"))
	must(t, "delete default route again (idempotent)", z.DeleteDefaultRoute(ctx, "10.0.0.1"))
	if hasRoute() {
		t.Error("the default route is still there")
	}

	must(t, "delete-addr", z.DeleteAddr(ctx, "web1/v4"))
	wantKind(t, "delete-addr again", z.DeleteAddr(ctx, "web1/v4"), illumos.ErrNotFound)
	_, err = z.Addrs(ctx, "web1/v4")
	wantKind(t, "show a deleted address", err, illumos.ErrNotFound)
}

func TestServicesInZone(t *testing.T) {
	ctx := ctxT(t)
	n := newNode(t, "node1")
	z := runningZone(t, ctx, n, "web01")
	// The zone's processes run as an unprivileged user when the test runs
	// as root: the file it writes sits in a directory anyone may write.
	dir := t.TempDir()
	must(t, "chmod", os.Chmod(dir, 0o777))
	out := filepath.Join(dir, "started")

	svc := illumos.Service{
		Name:  "zonewright/pod/web",
		Start: []string{"/bin/sh", "-c", `echo "$GREETING" > "$1"; exec sleep 300`, "sh", out},
		Env:   []illumos.EnvVar{{Name: "GREETING", Value: `hi & <there> 100%`}},
	}
	manifest, err := illumos.RenderManifest(svc)
	must(t, "render", err)
	must(t, "import", z.ImportManifest(ctx, manifest))
	must(t, "import again (update in place)", z.ImportManifest(ctx, manifest))

	states, err := z.Services(ctx, svc.FMRI())
	must(t, "svcs", err)
	if len(states) != 1 || states[0].FMRI != svc.FMRI() {
		t.Errorf("after import: %+v", states)
	}
	// Until the restarter has seen it, a new service is uninitialized.
	waitState(t, ctx, z, svc.FMRI(), "disabled")
	must(t, "enable", z.EnableService(ctx, svc.FMRI()))
	waitState(t, ctx, z, svc.FMRI(), "online")
	// The start method ran with its argv and environment intact (SMF says
	// online once the method is started, not once it has written).
	var b []byte
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if b, err = os.ReadFile(out); err == nil && len(b) > 0 {
			break
		}
	}
	if string(b) != "hi & <there> 100%\n" {
		t.Errorf("the service wrote %q, %v", b, err)
	}
	must(t, "restart", z.RestartService(ctx, svc.FMRI()))
	waitState(t, ctx, z, svc.FMRI(), "online")
	must(t, "clear (no-op when not in maintenance)", z.ClearService(ctx, svc.FMRI()))
	must(t, "disable", z.DisableService(ctx, svc.FMRI()))
	waitState(t, ctx, z, svc.FMRI(), "disabled")

	wantKind(t, "enable a missing service", z.EnableService(ctx, "svc:/nosuch/svc:default"), illumos.ErrNotFound)
	_, err = z.Services(ctx, "svc:/nosuch/svc:default")
	wantKind(t, "svcs of a missing service", err, illumos.ErrNotFound)
	wantKind(t, "import garbage", z.ImportManifest(ctx, []byte("<not a manifest")), illumos.ErrInvalid)
}

func TestAllZoneServicesFromTheGlobalZone(t *testing.T) {
	ctx := ctxT(t)
	n := newNode(t, "node1")
	web := illumos.Service{Name: "zonewright/pod/web", Start: []string{"sleep", "300"}, Enabled: true}
	bad := illumos.Service{Name: "zonewright/pod/bad", Start: []string{"sh", "-c", "exit 96"}, Enabled: true}
	for _, zs := range []struct {
		zone string
		nets illumos.Net
		svc  illumos.Service
	}{
		{"web01", illumos.Net{Physical: "web0", AllowedAddress: "10.0.0.5/24"}, web},
		{"web02", illumos.Net{Physical: "web1", AllowedAddress: "10.0.0.6/24"}, bad},
	} {
		z := runningZone(t, ctx, n, zs.zone, zs.nets)
		manifest, err := illumos.RenderManifest(zs.svc)
		must(t, "render", err)
		must(t, "import", z.ImportManifest(ctx, manifest))
	}

	want := map[string]string{"web01 " + web.FMRI(): "online", "web02 " + bad.FMRI(): "maintenance"}
	deadline := time.Now().Add(20 * time.Second)
	for {
		all, err := n.host.AllZoneServices(ctx)
		must(t, "svcs -Z", err)
		got := map[string]string{}
		zones := map[string]bool{}
		for _, s := range all {
			zones[s.Zone] = true
			if want[s.Zone+" "+s.FMRI] != "" && !s.Transitioning {
				got[s.Zone+" "+s.FMRI] = s.State
			}
		}
		if reflect.DeepEqual(got, want) && zones["global"] && zones["web01"] && zones["web02"] {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("svcs -Z: %+v", all)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func waitState(t *testing.T, ctx context.Context, z illumos.InZone, fmri, want string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	var last []illumos.ServiceStatus
	for time.Now().Before(deadline) {
		st, err := z.Services(ctx, fmri)
		must(t, "svcs", err)
		if len(st) == 1 && st[0].State == want && !st[0].Transitioning {
			return
		}
		last = st
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("%s never became %s: %+v", fmri, want, last)
}
