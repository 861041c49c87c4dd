package illumos

import (
	"net/netip"
	"reflect"
	"strings"
	"testing"
)

func TestParseZoneadmList(t *testing.T) {
	out := "0:global:running:/::ipkg:shared\n" +
		"3:web01:running:/zones/web01:5a6f0c1e-1111-2222-3333-444455556666:sparse:excl\n" +
		"-:db01:installed:/zones/db01::lx:excl\n" +
		"-:new01:configured:/zones/a\\:b\\\\c::sparse:excl\n"
	got, err := ParseZoneadmList(out)
	if err != nil {
		t.Fatal(err)
	}
	want := []Zone{
		{ID: 0, Name: "global", State: ZoneRunning, Path: "/", Brand: "ipkg", IPType: IPShared},
		{ID: 3, Name: "web01", State: ZoneRunning, Path: "/zones/web01", UUID: "5a6f0c1e-1111-2222-3333-444455556666", Brand: "sparse", IPType: IPExclusive},
		{ID: -1, Name: "db01", State: ZoneInstalled, Path: "/zones/db01", Brand: "lx", IPType: IPExclusive},
		{ID: -1, Name: "new01", State: ZoneConfigured, Path: `/zones/a:b\c`, Brand: "sparse", IPType: IPExclusive},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got  %+v\nwant %+v", got, want)
	}
	if zs, err := ParseZoneadmList(""); err != nil || len(zs) != 0 {
		t.Errorf("empty listing: %v, %v", zs, err)
	}
	for _, bad := range []string{
		"0:global:running:/::ipkg\n:x", "x:web:running:/z::b:excl", "-:web:flying:/z::b:excl",
		"-:web:running:/z::b:tcp", "-::running:/z::b:excl", "-:web:running:/z::b:excl:extra", "-:web:running:/z\\",
	} {
		if _, err := ParseZoneadmList(bad); err == nil {
			t.Errorf("ParseZoneadmList(%q) succeeded", bad)
		}
	}
}

func FuzzParseZoneadmList(f *testing.F) {
	f.Add("0:global:running:/::ipkg:shared\n-:db01:installed:/zones/db01::lx:excl\n")
	f.Add("-:a:configured:/x\\:y::b:excl")
	f.Fuzz(func(t *testing.T, out string) {
		zones, err := ParseZoneadmList(out)
		if err != nil {
			return
		}
		for _, z := range zones {
			if z.Name == "" || !zoneStates[z.State] || z.ID < -1 {
				t.Fatalf("accepted a bad zone %+v", z)
			}
		}
	})
}

func TestParseShowVNIC(t *testing.T) {
	out := "web0:net0:2\\:8\\:20\\:a\\:1b\\:c3:0:--\n" +
		"db0:stub0:2\\:8\\:20\\:d\\:b\\:3b:12:db01\n"
	got, err := ParseShowVNIC(out)
	if err != nil {
		t.Fatal(err)
	}
	want := []VNIC{
		{Name: "web0", Over: "net0", MAC: "02:08:20:0a:1b:c3"},
		{Name: "db0", Over: "stub0", MAC: "02:08:20:0d:0b:3b", VID: 12, Zone: "db01"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got  %+v\nwant %+v", got, want)
	}
	for _, bad := range []string{"web0:net0:2:8:20:a:1b:c3:0:--", "web0:net0:zz\\:1:0:", ":net0::0:", "web0:net0::x:", "a:b"} {
		if _, err := ParseShowVNIC(bad); err == nil {
			t.Errorf("ParseShowVNIC(%q) succeeded", bad)
		}
	}
}

func TestSplitParsable(t *testing.T) {
	if f, err := splitParsable(`fe80::1%vnic0/10`, 1); err != nil || f[0] != `fe80::1%vnic0/10` {
		t.Errorf("a single field is never unescaped: %q, %v", f, err)
	}
	if f, err := splitParsable(`a\\b:c\:d`, 2); err != nil || f[0] != `a\b` || f[1] != "c:d" {
		t.Errorf("got %q, %v", f, err)
	}
}

func TestNormalizeMAC(t *testing.T) {
	for in, want := range map[string]string{"2:8:20:a:1b:c3": "02:08:20:0a:1b:c3", "02:08:20:0A:1B:C3": "02:08:20:0a:1b:c3"} {
		if got, err := NormalizeMAC(in); err != nil || got != want {
			t.Errorf("NormalizeMAC(%s) = %s, %v", in, got, err)
		}
	}
	for _, bad := range []string{"", "2:8:20:a:1b", "2:8:20:a:1b:c3:4", "2:8:20:a:1b:xyz", "2:8:20::1b:c3", "-1:8:20:a:1b:c3"} {
		if _, err := NormalizeMAC(bad); err == nil {
			t.Errorf("NormalizeMAC(%q) succeeded", bad)
		}
	}
}

func TestParseShowEtherstub(t *testing.T) {
	if got := ParseShowEtherstub("LINK\nstub0\nzw_stub1\n"); !reflect.DeepEqual(got, []string{"stub0", "zw_stub1"}) {
		t.Errorf("got %q", got)
	}
	if got := ParseShowEtherstub(""); len(got) != 0 {
		t.Errorf("got %q", got)
	}
}

func FuzzParseShowVNIC(f *testing.F) {
	f.Add("web0:net0:2\\:8\\:20\\:a\\:1b\\:c3:0:--\n")
	f.Add("a:b::0:")
	f.Fuzz(func(t *testing.T, out string) {
		vnics, err := ParseShowVNIC(out)
		if err != nil {
			return
		}
		for _, v := range vnics {
			if v.Name == "" || v.VID < 0 || v.VID > 4094 || v.Zone == "--" {
				t.Fatalf("accepted %+v", v)
			}
			if v.MAC != "" {
				if m, err := NormalizeMAC(v.MAC); err != nil || m != v.MAC {
					t.Fatalf("MAC %q not normalised", v.MAC)
				}
			}
		}
	})
}

func TestParseZFSList(t *testing.T) {
	out := "tank/zones/web01\tfilesystem\t24576\t1063004405760\t24576\t/zones/web01\t0\t0\n" +
		"tank/vm0\tvolume\t32212254720\t1000\t8192\t-\t-\t32212254720\n" +
		"tank/zones/web01@s1\tsnapshot\t0\t-\t24576\t-\t-\t-\n"
	got, err := ParseZFSList(out)
	if err != nil {
		t.Fatal(err)
	}
	want := []Dataset{
		{Name: "tank/zones/web01", Type: "filesystem", Used: 24576, Avail: 1063004405760, Refer: 24576, Mountpoint: "/zones/web01"},
		{Name: "tank/vm0", Type: "volume", Used: 32212254720, Avail: 1000, Refer: 8192, Reservation: 32212254720},
		{Name: "tank/zones/web01@s1", Type: "snapshot", Refer: 24576},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got  %+v\nwant %+v", got, want)
	}
	for _, bad := range []string{"tank\tfilesystem\t1\t2\t3\t/t\t0", "tank filesystem 1 2 3 /t 0 0", "tank\tfilesystem\t1.5G\t2\t3\t/t\t0\t0", "\tfilesystem\t1\t2\t3\t/t\t0\t0"} {
		if _, err := ParseZFSList(bad); err == nil {
			t.Errorf("ParseZFSList(%q) succeeded", bad)
		}
	}
}

func TestParseZFSGetValues(t *testing.T) {
	if v, err := ParseZFSGetValues("1024\n-\nhas a\ttab\n", 3); err != nil || !reflect.DeepEqual(v, []string{"1024", "-", "has a\ttab"}) {
		t.Errorf("got %q, %v", v, err)
	}
	if v, err := ParseZFSGetValues("\n", 1); err != nil || v[0] != "" {
		t.Errorf("an empty value: %q, %v", v, err)
	}
	if _, err := ParseZFSGetValues("1\n", 2); err == nil {
		t.Error("too few values accepted")
	}
}

func TestParseZFSGetRows(t *testing.T) {
	out := "tank\tused\t1024\ntank\tavailable\t2048\ntank/a\tzonewright:note\thas a\ttab\n"
	want := map[string]map[string]string{"tank": {"used": "1024", "available": "2048"}, "tank/a": {"zonewright:note": "has a\ttab"}}
	if v, err := ParseZFSGetRows(out); err != nil || !reflect.DeepEqual(v, want) {
		t.Errorf("got %q, %v", v, err)
	}
	if _, err := ParseZFSGetRows("tank\t1024\n"); err == nil {
		t.Error("a line of two fields accepted")
	}
}

func FuzzParseZFSList(f *testing.F) {
	f.Add("tank/zones/web01\tfilesystem\t24576\t1063004405760\t24576\t/zones/web01\t0\t0\n")
	f.Add("a\tb\t-\t-\t-\t-\t-\t-")
	f.Fuzz(func(t *testing.T, out string) {
		ds, err := ParseZFSList(out)
		if err != nil {
			return
		}
		for _, d := range ds {
			if d.Name == "" || d.Mountpoint == "-" || strings.Contains(d.Name, "\t") {
				t.Fatalf("accepted %+v", d)
			}
		}
	})
}

func FuzzParseZFSGetValues(f *testing.F) {
	f.Add("1\n2\n", 2)
	f.Add("", 1)
	f.Fuzz(func(t *testing.T, out string, n int) {
		vals, err := ParseZFSGetValues(out, n)
		if err == nil && len(vals) != n {
			t.Fatalf("%d values for %d", len(vals), n)
		}
	})
}

func TestParseShowAddr(t *testing.T) {
	out := "lo0/v4:static:ok:127.0.0.1/8\n" +
		"web0/v4:static:ok:10.0.0.5/24\n" +
		"web0/v6:addrconf:ok:fe80\\:\\:8\\:20ff\\:fe1\\:2%web0/10\n" +
		"web0/dhcp:dhcp:down:?\n"
	got, err := ParseShowAddr(out)
	if err != nil {
		t.Fatal(err)
	}
	want := []Addr{
		{Obj: "lo0/v4", Type: "static", State: "ok", Addr: "127.0.0.1/8"},
		{Obj: "web0/v4", Type: "static", State: "ok", Addr: "10.0.0.5/24"},
		{Obj: "web0/v6", Type: "addrconf", State: "ok", Addr: "fe80::8:20ff:fe1:2%web0/10"},
		{Obj: "web0/dhcp", Type: "dhcp", State: "down", Addr: "?"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got  %+v\nwant %+v", got, want)
	}
	for _, bad := range []string{"web0/v4:static:ok", "web0:static:ok:1.2.3.4/8", "web0/v4:static:ok:fe80::1/10"} {
		if _, err := ParseShowAddr(bad); err == nil {
			t.Errorf("ParseShowAddr(%q) succeeded", bad)
		}
	}
}

func FuzzParseShowAddr(f *testing.F) {
	f.Add("web0/v4:static:ok:10.0.0.5/24\n")
	f.Add("a/b:c:d:e\\:f")
	f.Fuzz(func(t *testing.T, out string) {
		addrs, err := ParseShowAddr(out)
		if err != nil {
			return
		}
		for _, a := range addrs {
			if !strings.Contains(a.Obj, "/") {
				t.Fatalf("accepted %+v", a)
			}
		}
	})
}

func TestParseSvcs(t *testing.T) {
	out := "online         svc:/zonewright/pod/web:default\n" +
		"offline*       svc:/network/ssh:default\n" +
		"maintenance    svc:/site/x:default\n" +
		"legacy_run     lrc:/etc/rc2_d/S20sysetup\n"
	got, err := ParseSvcs(out)
	if err != nil {
		t.Fatal(err)
	}
	want := []ServiceStatus{
		{FMRI: "svc:/zonewright/pod/web:default", State: "online"},
		{FMRI: "svc:/network/ssh:default", State: "offline", Transitioning: true},
		{FMRI: "svc:/site/x:default", State: "maintenance"},
		{FMRI: "lrc:/etc/rc2_d/S20sysetup", State: "legacy_run"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got  %+v\nwant %+v", got, want)
	}
	for _, bad := range []string{"online", "online svc:/x:default extra", "* svc:/x:default", "** svc:/x:default", "on-line svc:/x:default", "online nofmri"} {
		if _, err := ParseSvcs(bad); err == nil {
			t.Errorf("ParseSvcs(%q) succeeded", bad)
		}
	}
}

func FuzzParseSvcs(f *testing.F) {
	f.Add("online         svc:/zonewright/pod/web:default\n")
	f.Add("offline* svc:/a:b")
	f.Fuzz(func(t *testing.T, out string) {
		sts, err := ParseSvcs(out)
		if err != nil {
			return
		}
		for _, s := range sts {
			if s.State == "" || strings.HasSuffix(s.State, "*") || strings.ContainsAny(s.FMRI, " \t") {
				t.Fatalf("accepted %+v", s)
			}
		}
	})
}

func TestParseAllZoneServices(t *testing.T) {
	tests := []struct {
		name string
		out  string
		want []ZoneServiceStatus
	}{
		{
			name: "columns split on blank runs of any width",
			out: "web01            online         svc:/zonewright/pod/web:default\n" +
				"a-very-long-zone-name-over-sixteen online svc:/site/x:default\n",
			want: []ZoneServiceStatus{
				{Zone: "web01", ServiceStatus: ServiceStatus{FMRI: "svc:/zonewright/pod/web:default", State: "online"}},
				{Zone: "a-very-long-zone-name-over-sixteen", ServiceStatus: ServiceStatus{FMRI: "svc:/site/x:default", State: "online"}},
			},
		},
		{
			name: "a trailing star becomes Transitioning",
			out:  "web01            offline*       svc:/zonewright/pod/web:default\n",
			want: []ZoneServiceStatus{
				{Zone: "web01", ServiceStatus: ServiceStatus{FMRI: "svc:/zonewright/pod/web:default", State: "offline", Transitioning: true}},
			},
		},
		{
			name: "the global zone and legacy rc scripts are kept",
			out: "global           legacy_run     lrc:/etc/rc2_d/S20sysetup\n" +
				"global           online         svc:/system/zones:default\n",
			want: []ZoneServiceStatus{
				{Zone: "global", ServiceStatus: ServiceStatus{FMRI: "lrc:/etc/rc2_d/S20sysetup", State: "legacy_run"}},
				{Zone: "global", ServiceStatus: ServiceStatus{FMRI: "svc:/system/zones:default", State: "online"}},
			},
		},
		{
			name: "blank lines and a CR are ignored",
			out:  "\nweb02 maintenance svc:/site/x:default\r\n\n",
			want: []ZoneServiceStatus{
				{Zone: "web02", ServiceStatus: ServiceStatus{FMRI: "svc:/site/x:default", State: "maintenance"}},
			},
		},
		{name: "no output is no services", out: "", want: nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseAllZoneServices(tt.out)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got  %+v\nwant %+v", got, tt.want)
			}
		})
	}
	for _, bad := range []string{
		"online svc:/x:default",                // the zone column is missing
		"web01 online svc:/x:default extra",    // a fourth column
		"web01 * svc:/x:default",               // a marker without a state
		"web01 online nofmri",                  // not an FMRI
		"-bad online svc:/x:default",           // not a zone name
		"ZONE             STATE          FMRI", // a header (svcs without -H)
	} {
		if _, err := ParseAllZoneServices(bad); err == nil {
			t.Errorf("ParseAllZoneServices(%q) succeeded", bad)
		}
	}
}

func FuzzParseAllZoneServices(f *testing.F) {
	f.Add("web01            online         svc:/zonewright/pod/web:default\n")
	f.Add("global offline* svc:/a:b")
	f.Fuzz(func(t *testing.T, out string) {
		sts, err := ParseAllZoneServices(out)
		if err != nil {
			return
		}
		for _, s := range sts {
			if s.Zone == "" || s.State == "" || strings.HasSuffix(s.State, "*") || strings.ContainsAny(s.Zone+s.FMRI, " \t") {
				t.Fatalf("accepted %+v", s)
			}
		}
	})
}

func TestValidFMRI(t *testing.T) {
	for _, ok := range []string{"svc:/zonewright/pod/web:default", "zonewright/pod/web", "network/ssh", "svc:/a-b/c_d.e,f:inst-1"} {
		if !ValidFMRI(ok) {
			t.Errorf("ValidFMRI(%q) = false", ok)
		}
	}
	for _, bad := range []string{"", "svc:/", "svc:/a b", "a//b", "a/b:", "1a", "svc:/a;reboot", "a/b:c:d"} {
		if ValidFMRI(bad) {
			t.Errorf("ValidFMRI(%q) = true", bad)
		}
	}
}

func TestParseIpnatList(t *testing.T) {
	out := "List of active MAP/Redirect filters:\n" +
		"rdr net0 10.0.0.5/32 port 80 -> 192.168.1.10 port 8080 tcp\n" +
		"rdr net0 10.0.0.6/32 port 53-54 -> 192.168.1.11,192.168.1.12 port 53 udp round-robin\n" +
		"map net0 192.168.1.0/24 -> 10.0.0.5/32 portmap tcp/udp auto\n" +
		"map net0 192.168.2.0/255.255.255.0 -> 10.0.0.7/32\n" +
		"bimap net0 192.168.1.1/32 -> 10.0.0.8/32\n" +
		"map zwgw0 10.88.1.0/24 -> 10.88.1.1/32 portmap tcp/udp auto tag zonewright-svc\n" +
		"map net0 192.168.3.0/24 -> 10.0.0.9/32 tag t1\n" +
		"\n" +
		"List of active sessions:\n" +
		"RDR 192.168.1.10    8080  <- -> 10.0.0.5        80    [1.2.3.4 5555]\n"
	got, err := ParseIpnatList(out)
	if err != nil {
		t.Fatal(err)
	}
	want := []NATRule{
		&RdrRule{Interface: "net0", ExtAddr: netip.MustParsePrefix("10.0.0.5/32"), ExtPort: 80, IntAddrs: []netip.Addr{netip.MustParseAddr("192.168.1.10")}, IntPort: 8080, Proto: "tcp"},
		&RdrRule{Interface: "net0", ExtAddr: netip.MustParsePrefix("10.0.0.6/32"), ExtPort: 53, ExtPortEnd: 54, IntAddrs: []netip.Addr{netip.MustParseAddr("192.168.1.11"), netip.MustParseAddr("192.168.1.12")}, IntPort: 53, Proto: "udp", RoundRobin: true},
		&MapRule{Interface: "net0", Src: netip.MustParsePrefix("192.168.1.0/24"), Dst: netip.MustParsePrefix("10.0.0.5/32"), Portmap: "auto", PortmapProto: "tcp/udp"},
		&MapRule{Interface: "net0", Src: netip.MustParsePrefix("192.168.2.0/24"), Dst: netip.MustParsePrefix("10.0.0.7/32")},
		RawRule("bimap net0 192.168.1.1/32 -> 10.0.0.8/32"),
		&MapRule{Interface: "zwgw0", Src: netip.MustParsePrefix("10.88.1.0/24"), Dst: netip.MustParsePrefix("10.88.1.1/32"), Portmap: "auto", PortmapProto: "tcp/udp", Tag: "zonewright-svc"},
		&MapRule{Interface: "net0", Src: netip.MustParsePrefix("192.168.3.0/24"), Dst: netip.MustParsePrefix("10.0.0.9/32"), Tag: "t1"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got  %#v\nwant %#v", got, want)
	}
	if rules, err := ParseIpnatList("List of active MAP/Redirect filters:\n\nList of active sessions:\n"); err != nil || len(rules) != 0 {
		t.Errorf("empty listing: %v, %v", rules, err)
	}
	if _, err := ParseIpnatList("something else\n"); err == nil {
		t.Error("output without a rule section accepted")
	}
}

func TestRenderNATRules(t *testing.T) {
	rules := []NATRule{
		&RdrRule{Interface: "net0", ExtAddr: netip.MustParsePrefix("10.0.0.5/32"), ExtPort: 80, IntAddrs: []netip.Addr{netip.MustParseAddr("192.168.1.10")}, IntPort: 8080, Proto: "tcp"},
		&MapRule{Interface: "net0", Src: netip.MustParsePrefix("192.168.1.0/24"), Dst: netip.MustParsePrefix("10.0.0.5/32"), Portmap: "1024:65535", PortmapProto: "tcp"},
		&MapRule{Interface: "net0", Src: netip.MustParsePrefix("192.168.1.0/24"), Dst: netip.MustParsePrefix("10.0.0.5/32"), Portmap: "auto", PortmapProto: "tcp/udp", Tag: "t1"},
	}
	got, err := RenderNATRules(rules)
	if err != nil {
		t.Fatal(err)
	}
	want := "rdr net0 10.0.0.5/32 port 80 -> 192.168.1.10 port 8080 tcp\nmap net0 192.168.1.0/24 -> 10.0.0.5/32 portmap tcp 1024:65535\n" +
		"map net0 192.168.1.0/24 -> 10.0.0.5/32 portmap tcp/udp auto tag t1\n"
	if got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
	bad := []NATRule{
		&RdrRule{Interface: "net", ExtAddr: netip.MustParsePrefix("10.0.0.5/32"), ExtPort: 80, IntAddrs: []netip.Addr{netip.MustParseAddr("192.168.1.10")}, IntPort: 80, Proto: "tcp"},
		&RdrRule{Interface: "net0", ExtAddr: netip.MustParsePrefix("10.0.0.5/32"), ExtPort: 0, IntAddrs: []netip.Addr{netip.MustParseAddr("192.168.1.10")}, IntPort: 80, Proto: "tcp"},
		&RdrRule{Interface: "net0", ExtAddr: netip.MustParsePrefix("10.0.0.5/32"), ExtPort: 80, IntAddrs: []netip.Addr{netip.MustParseAddr("::1")}, IntPort: 80, Proto: "tcp"},
		&RdrRule{Interface: "net0", ExtAddr: netip.MustParsePrefix("10.0.0.5/32"), ExtPort: 80, IntAddrs: []netip.Addr{netip.MustParseAddr("192.168.1.10")}, IntPort: 80, Proto: "icmp"},
		&MapRule{Interface: "net0", Src: netip.MustParsePrefix("192.168.1.0/24"), Dst: netip.MustParsePrefix("10.0.0.5/32"), Portmap: "9:1", PortmapProto: "tcp"},
		RawRule("map net0 1.2.3.4/32 -> 5.6.7.8/32\nrdr x"),
		nil,
	}
	for i, r := range bad {
		if out, err := RenderNATRules([]NATRule{r}); err == nil {
			t.Errorf("bad rule %d rendered: %q", i, out)
		}
	}
}

// FuzzParseIpnatList: whatever parses, renders as one line per rule that
// parses back to the same rule.
func FuzzParseIpnatList(f *testing.F) {
	f.Add("List of active MAP/Redirect filters:\nrdr net0 10.0.0.5/32 port 80 -> 192.168.1.10 port 8080 tcp\nmap net0 192.168.1.0/24 -> 10.0.0.5/32 portmap tcp/udp auto\n\nList of active sessions:\n")
	f.Add("List of active MAP/Redirect filters:\nrdr e0 1.2.3.4 port 1-2 -> 5.6.7.8,9.9.9.9 port 3 udp round-robin\n")
	f.Fuzz(func(t *testing.T, out string) {
		rules, err := ParseIpnatList(out)
		if err != nil {
			return
		}
		for _, r := range rules {
			line, err := r.Rule()
			if err != nil {
				continue // parsed but not loadable (e.g. port 0): List reports what is there
			}
			if strings.ContainsAny(line, "\n\r") {
				t.Fatalf("rule renders over several lines: %q", line)
			}
			back, err := ParseNATRule(line)
			if err != nil || !reflect.DeepEqual(back, r) {
				t.Fatalf("%q parsed back as %#v, want %#v (%v)", line, back, r, err)
			}
		}
	})
}

func TestFactsParsers(t *testing.T) {
	if n, err := ParsePsrinfo("0\ton-line   since 01/15/2024 10:00:00\n1\toff-line  since 01/15/2024 10:00:00\n2\tno-intr   since 01/15/2024 10:00:00\n"); err != nil || n != 2 {
		t.Errorf("ParsePsrinfo = %d, %v; want 2 usable", n, err)
	}
	if _, err := ParsePsrinfo(""); err == nil {
		t.Error("no processors accepted")
	}
	if _, err := ParsePsrinfo("cpu0 on-line"); err == nil {
		t.Error("a non-processor line accepted")
	}
	mem, err := ParsePrtconfMemory("System Configuration:  Oracle Corporation  i86pc\nMemory size: 16384 Megabytes\nSystem Peripherals (Software Nodes):\n")
	if err != nil || mem != 16384<<20 {
		t.Errorf("ParsePrtconfMemory = %d, %v", mem, err)
	}
	for _, bad := range []string{"", "Memory size: lots Megabytes", "Memory size: 1 Parsecs", "Memory size: 99999999999999999 Terabytes"} {
		if _, err := ParsePrtconfMemory(bad); err == nil {
			t.Errorf("ParsePrtconfMemory(%q) succeeded", bad)
		}
	}
	pools, err := ParseZpoolList("rpool\t1073741824\t536870912\ntank\t2\t1\n")
	if err != nil || !reflect.DeepEqual(pools, []Pool{{"rpool", 1 << 30, 1 << 29}, {"tank", 2, 1}}) {
		t.Errorf("ParseZpoolList = %+v, %v", pools, err)
	}
	if _, err := ParseZpoolList("rpool 1 2"); err == nil {
		t.Error("space-separated zpool line accepted")
	}
	u := ParseUname("SunOS node1 5.11 omnios-r151050-1b2a i86pc i386 i86pc\n")
	if u.Sysname != "SunOS" || u.Nodename != "node1" || u.Release != "5.11" || u.Version != "omnios-r151050-1b2a" || u.Machine != "i86pc" {
		t.Errorf("ParseUname = %+v", u)
	}
}

func FuzzFactsParsers(f *testing.F) {
	f.Add("0\ton-line   since 01/15/2024 10:00:00\n", "Memory size: 16384 Megabytes\n", "rpool\t1\t2\n")
	f.Fuzz(func(t *testing.T, psr, prt, zp string) {
		if n, err := ParsePsrinfo(psr); err == nil && n < 0 {
			t.Fatal("negative CPU count")
		}
		_, _ = ParsePrtconfMemory(prt)
		if pools, err := ParseZpoolList(zp); err == nil {
			for _, p := range pools {
				if p.Name == "" {
					t.Fatal("empty pool name")
				}
			}
		}
		_ = ParseUname(psr)
		for _, name := range ParseShowEtherstub(zp) {
			if name == "" || strings.ContainsAny(name, " \t\n") {
				t.Fatalf("etherstub name %q", name)
			}
		}
	})
}

func TestParseIpnatListing(t *testing.T) {
	out := "List of active MAP/Redirect filters:\n" +
		"rdr net1 10.96.0.20/32 port 80 -> 10.88.0.5,10.88.0.6 port 8080 tcp round-robin sticky tag svc-web\n" +
		"rdr net1 10.96.0.21/32 port 80-90 -> 10.88.0.7 port = 8080 tcp\n" +
		"rdr net1 10.96.0.22/32 port 80 -> 10.88.0.7 port 8080 tcp age 30/30\n" +
		"\n" +
		"List of active sessions:\n" +
		"RDR 10.88.0.5       8080  <- -> 10.96.0.20      80    [10.88.0.9 51234]\n" +
		"MAP 10.88.0.9       <- -> 10.0.0.1        [10.0.0.2]\n"
	got, err := ParseIpnatListing(out)
	if err != nil {
		t.Fatal(err)
	}
	want := NATListing{
		Rules: []NATRule{
			&RdrRule{Interface: "net1", ExtAddr: netip.MustParsePrefix("10.96.0.20/32"), ExtPort: 80,
				IntAddrs: []netip.Addr{netip.MustParseAddr("10.88.0.5"), netip.MustParseAddr("10.88.0.6")}, IntPort: 8080,
				Proto: "tcp", RoundRobin: true, Sticky: true, Tag: "svc-web"},
			&RdrRule{Interface: "net1", ExtAddr: netip.MustParsePrefix("10.96.0.21/32"), ExtPort: 80, ExtPortEnd: 90,
				IntAddrs: []netip.Addr{netip.MustParseAddr("10.88.0.7")}, IntPort: 8080, Proto: "tcp", FixedPort: true},
			RawRule("rdr net1 10.96.0.22/32 port 80 -> 10.88.0.7 port 8080 tcp age 30/30"),
		},
		Sessions: []NATSession{
			{Type: "RDR", In: netip.MustParseAddrPort("10.88.0.5:8080"), Out: netip.MustParseAddrPort("10.96.0.20:80"), Remote: netip.MustParseAddrPort("10.88.0.9:51234")},
			{Type: "MAP", In: netip.MustParseAddrPort("10.88.0.9:0"), Out: netip.MustParseAddrPort("10.0.0.1:0"), Remote: netip.MustParseAddrPort("10.0.0.2:0")},
		},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got  %#v\nwant %#v", got, want)
	}
	for _, r := range want.Rules[:2] {
		line, err := r.Rule()
		if back, err2 := ParseNATRule(line); err != nil || err2 != nil || !reflect.DeepEqual(back, r) {
			t.Errorf("%q does not round-trip: %#v %v %v", line, back, err, err2)
		}
	}
	if _, err := ParseIpnatListing("List of active MAP/Redirect filters:\n\nList of active sessions:\nRDR garbage\n"); err == nil {
		t.Error("a bad session line was accepted")
	}
}
