package illumos_test

import (
	"context"
	"errors"
	"reflect"
	"testing"

	"github.com/zonewright/zonewright/internal/illumos"
	"github.com/zonewright/zonewright/internal/illumos/fakes"
)

// These tests pin the argv each operation builds (the contract with the
// real commands) and that bad requests never reach a command.

func TestOperationsBuildTheDocumentedArgv(t *testing.T) {
	ctx := context.Background()
	ex := &fakes.Executor{}
	h := illumos.Host{Runner: ex}
	z := h.Zone("web01")
	steps := []struct {
		run  func() error
		want string
	}{
		{func() error { _, err := h.Zoneadm().List(ctx); return err }, "/usr/sbin/zoneadm list -cp"},
		{func() error {
			return h.Zoneadm().Install(ctx, "web01", illumos.InstallOptions{NoDataset: true, Source: "/images/u.zfs"})
		}, "/usr/sbin/zoneadm -z web01 install -x nodataset -s /images/u.zfs"},
		{func() error { return h.Zoneadm().Clone(ctx, "web02", "web01") }, "/usr/sbin/zoneadm -z web02 clone web01"},
		{func() error { return h.Zoneadm().Uninstall(ctx, "web01") }, "/usr/sbin/zoneadm -z web01 uninstall -F"},
		{func() error { return h.Zonecfg().Delete(ctx, "web01") }, "/usr/sbin/zonecfg -z web01 delete -F"},
		{func() error {
			return h.Dladm().CreateVNIC(ctx, illumos.VNICSpec{Name: "web0", Over: "stub0", MAC: "2:8:20:a:1b:c3", VID: 12})
		}, "/usr/sbin/dladm create-vnic -l stub0 -m 02:08:20:0a:1b:c3 -v 12 web0"},
		{func() error {
			return h.Dladm().CreateVNIC(ctx, illumos.VNICSpec{Name: "web0", Over: "net0", Temporary: true})
		}, "/usr/sbin/dladm create-vnic -t -l net0 web0"},
		{func() error { return h.Dladm().DeleteVNIC(ctx, "web0") }, "/usr/sbin/dladm delete-vnic web0"},
		{func() error {
			return h.ZFS().Create(ctx, "tank/zw/web01", map[string]string{"quota": "10G", "mountpoint": "/zones/web01"})
		}, "/usr/sbin/zfs create -p -o mountpoint=/zones/web01 -o quota=10G tank/zw/web01"},
		{func() error { return h.ZFS().Destroy(ctx, "tank/zw/web01") }, "/usr/sbin/zfs destroy -r tank/zw/web01"},
		{func() error {
			return h.ZFS().Receive(ctx, "tank/zw/images/u", nil, illumos.ReceiveOptions{Force: true, NoMount: true, Props: map[string]string{"zonewright:sha256": "ab"}})
		}, "/usr/sbin/zfs receive -F -u -o zonewright:sha256=ab tank/zw/images/u"},
		{func() error { return h.ZFS().Send(ctx, "tank/zw/images/u@base", nil) }, "/usr/sbin/zfs send -c -p tank/zw/images/u@base"},
		{func() error { return h.ZFS().SendIncremental(ctx, "@move-1", "tank/zw/volumes/u@move-2", nil) },
			"/usr/sbin/zfs send -c -i @move-1 tank/zw/volumes/u@move-2"},
		{func() error { return h.ZFS().SetQuota(ctx, "tank/zw/web01", 0) }, "/usr/sbin/zfs set quota=none tank/zw/web01"},
		{func() error { return z.CreateStaticAddr(ctx, "web0/v4", "10.0.0.5/24") },
			"/usr/sbin/zlogin web01 ipadm create-addr -T static -a 10.0.0.5/24 web0/v4"},
		{func() error { return z.AddDefaultRoute(ctx, "10.0.0.1") }, "/usr/sbin/zlogin web01 route -p add default 10.0.0.1"},
		{func() error { _, err := z.Exec(ctx, []string{"echo", "a b", "it's", "$(reboot)"}, nil); return err },
			`/usr/sbin/zlogin web01 echo 'a b' 'it'\''s' '$(reboot)'`},
		{func() error { return h.Ipnat().Flush(ctx) }, "/usr/sbin/ipnat -C -F"},
		{func() error { _, err := h.AllZoneServices(ctx); return err }, "/usr/bin/svcs -Z -H -o zone,state,fmri"},
	}
	for _, s := range steps {
		if err := s.run(); err != nil {
			t.Fatalf("%s: %v", s.want, err)
		}
	}
	got := ex.Argvs()
	var want []string
	for _, s := range steps {
		want = append(want, s.want)
	}
	if !reflect.DeepEqual(got, want) {
		for i := range want {
			if i >= len(got) || got[i] != want[i] {
				t.Errorf("call %d:\n got %q\nwant %q", i, at(got, i), want[i])
			}
		}
	}
}

func at(s []string, i int) string {
	if i < len(s) {
		return s[i]
	}
	return "<none>"
}

func TestAllZoneServicesRunsOneSvcsForEveryZone(t *testing.T) {
	ex := &fakes.Executor{}
	ex.On("svcs", func(illumos.Cmd) fakes.Reply {
		return fakes.Reply{
			Stdout: "global           online         svc:/system/zones:default\n" +
				"web01            online*        svc:/zonewright/pod/web:default\n" +
				"web02            maintenance    svc:/zonewright/pod/api:default\n",
			// A zone on its way up has no repository yet: a warning, not a failure.
			Stderr: "svcs: Could not bind to repository server for zone web03: repository server unavailable\n",
		}
	})
	got, err := illumos.Host{Runner: ex}.AllZoneServices(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	want := []illumos.ZoneServiceStatus{
		{Zone: "global", ServiceStatus: illumos.ServiceStatus{FMRI: "svc:/system/zones:default", State: "online"}},
		{Zone: "web01", ServiceStatus: illumos.ServiceStatus{FMRI: "svc:/zonewright/pod/web:default", State: "online", Transitioning: true}},
		{Zone: "web02", ServiceStatus: illumos.ServiceStatus{FMRI: "svc:/zonewright/pod/api:default", State: "maintenance"}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got  %+v\nwant %+v", got, want)
	}
	if argvs := ex.Argvs(); len(argvs) != 1 || argvs[0] != "/usr/bin/svcs -Z -H -o zone,state,fmri" {
		t.Errorf("ran %q", argvs)
	}

	ex.On("svcs", func(illumos.Cmd) fakes.Reply {
		return fakes.Reply{ExitCode: 1, Stderr: "svcs: Could not bind to repository server: repository server unavailable.  Exiting.\n"}
	})
	_, err = illumos.Host{Runner: ex}.AllZoneServices(context.Background())
	if !errors.Is(err, illumos.ErrTransient) {
		t.Errorf("repository down: %v, want ErrTransient", err)
	}
}

func TestBadRequestsAreInvalidAndRunNothing(t *testing.T) {
	ctx := context.Background()
	ex := &fakes.Executor{}
	h := illumos.Host{Runner: ex}
	calls := map[string]func() error{
		"zone name with a space":    func() error { return h.Zoneadm().Boot(ctx, "web 01") },
		"the global zone":           func() error { return h.Zoneadm().Halt(ctx, "global") },
		"link name without a digit": func() error { return h.Dladm().CreateVNIC(ctx, illumos.VNICSpec{Name: "web", Over: "net0"}) },
		"link name too long":        func() error { return h.Dladm().DeleteVNIC(ctx, "abcdefghijabcdefghijabcdefghija1") },
		"VLAN out of range": func() error {
			return h.Dladm().CreateVNIC(ctx, illumos.VNICSpec{Name: "web0", Over: "net0", VID: 4095})
		},
		"bad MAC":                     func() error { return h.Dladm().CreateVNIC(ctx, illumos.VNICSpec{Name: "web0", Over: "net0", MAC: "x"}) },
		"dataset with a space":        func() error { return h.ZFS().Create(ctx, "tank/a b", nil) },
		"property with '='":           func() error { return h.ZFS().Create(ctx, "tank/a", map[string]string{"a=b": "c"}) },
		"property value with newline": func() error { return h.ZFS().Set(ctx, "tank/a", map[string]string{"x:y": "a\nb"}) },
		"address object without name": func() error { return h.Zone("web01").DeleteAddr(ctx, "web0") },
		"address without prefix":      func() error { return h.Zone("web01").CreateStaticAddr(ctx, "web0/v4", "10.0.0.5") },
		"gateway that is no address":  func() error { return h.Zone("web01").AddDefaultRoute(ctx, "10.0.0.1; reboot") },
		"FMRI with a space":           func() error { return h.Zone("web01").EnableService(ctx, "svc:/a b") },
		"NUL in an exec argument": func() error {
			_, err := h.Zone("web01").Exec(ctx, []string{"echo", "a\x00b"}, nil)
			return err
		},
		"zonecfg value with a quote": func() error {
			return h.Zonecfg().Create(ctx, illumos.ZoneConfig{Name: "z1", Zonepath: "/zones/z1", Attrs: []illumos.Attr{{Name: "a", Type: "string", Value: `"`}}})
		},
	}
	for name, call := range calls {
		t.Run(name, func(t *testing.T) {
			err := call()
			if !errors.Is(err, illumos.ErrInvalid) {
				t.Errorf("err = %v, want ErrInvalid", err)
			}
		})
	}
	if n := len(ex.Calls()); n != 0 {
		t.Errorf("%d commands ran: %q", n, ex.Argvs())
	}
}

func TestExecResultVersusZloginFailure(t *testing.T) {
	ctx := context.Background()
	ex := &fakes.Executor{}
	ex.On("zlogin", func(cmd illumos.Cmd) fakes.Reply {
		switch cmd.Args[0] {
		case "stopped":
			return fakes.Reply{ExitCode: 1, Stderr: "zlogin: login allowed only to running zones (stopped is 'installed').\n"}
		case "nosuch":
			return fakes.Reply{ExitCode: 1, Stderr: "zlogin: zone 'nosuch' unknown\n"}
		}
		return fakes.Reply{ExitCode: 1, Stdout: "probe output\n", Stderr: "not ready\n"}
	})
	h := illumos.Host{Runner: ex}
	res, err := h.Zone("web01").Exec(ctx, []string{"/bin/probe"}, nil)
	if err != nil || res.ExitCode != 1 || string(res.Stdout) != "probe output\n" || string(res.Stderr) != "not ready\n" {
		t.Errorf("a failing probe is a result: %+v, %v", res, err)
	}
	if _, err := h.Zone("stopped").Exec(ctx, []string{"/bin/probe"}, nil); !errors.Is(err, illumos.ErrWrongState) {
		t.Errorf("zlogin to a halted zone: %v, want ErrWrongState", err)
	}
	if _, err := h.Zone("nosuch").Exec(ctx, []string{"/bin/probe"}, nil); !errors.Is(err, illumos.ErrNotFound) {
		t.Errorf("zlogin to a missing zone: %v, want ErrNotFound", err)
	}
}
