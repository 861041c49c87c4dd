package hostops

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/zonewright/zonewright/internal/hostapi"
)

func TestResolvConf(t *testing.T) {
	got := string(ZoneDNS{Nameserver: "10.88.1.1", Domain: "Cluster.Local."}.ResolvConf("web"))
	want := "# Written by zonewright before the zone booted: the cluster DNS on this node.\n" +
		"nameserver 10.88.1.1\nsearch web.svc.cluster.local svc.cluster.local cluster.local\noptions ndots:5\n"
	if got != want {
		t.Fatalf("resolv.conf:\n%s\nwant:\n%s", got, want)
	}
}

func TestHostsFromDNS(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"passwd: files\nhosts: files\nipnodes:   files\n", "passwd: files\nhosts: files dns\nipnodes: files dns\n"},
		{"hosts: files [NOTFOUND=return] mdns", "hosts: files dns [NOTFOUND=return] mdns"},
		{"hosts: nis\n", "hosts: nis dns\n"},
		{"# hosts: files\nhosts:\tfiles dns\n", "# hosts: files\nhosts:\tfiles dns\n"},
	} {
		got, changed := hostsFromDNS([]byte(tc.in))
		if string(got) != tc.want || changed != (tc.in != tc.want) {
			t.Errorf("hostsFromDNS(%q) = %q, %v; want %q", tc.in, got, changed, tc.want)
		}
	}
}

func TestWriteZoneFiles(t *testing.T) {
	zones := t.TempDir()
	h := &Host{ZonesPath: "/zonewright/zones", ZonesDir: zones, ZoneDNS: &ZoneDNS{Nameserver: "10.88.1.1", Domain: "cluster.local"}}
	s := hostapi.PodSandbox{Namespace: "shop", Name: "web", UID: "0b6f4e0e-1c5a-4d8e-9f10-3a2b4c5d6e7f", Brand: "sparse"}
	root := filepath.Join(zones, s.ZoneName(), "root")
	if err := os.MkdirAll(filepath.Join(root, "etc"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "etc/nsswitch.conf"), []byte("hosts: files\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := h.writeZoneFiles(s); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(root, "etc/resolv.conf")); string(b) != string(h.ZoneDNS.ResolvConf("shop")) {
		t.Errorf("resolv.conf = %q", b)
	}
	if b, _ := os.ReadFile(filepath.Join(root, "etc/nsswitch.conf")); string(b) != "hosts: files dns\n" {
		t.Errorf("nsswitch.conf = %q", b)
	}
	if b, _ := os.ReadFile(filepath.Join(root, "etc/nodename")); string(b) != "web\n" {
		t.Errorf("nodename = %q; want the pod's name", b)
	}
	named := s
	named.Hostname, named.Brand = "web-0", "lx"
	if err := (&Host{ZonesDir: zones}).writeZoneFiles(named); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(root, "etc/hostname")); string(b) != "web-0\n" {
		t.Errorf("an lx zone's hostname = %q; want the pod's hostname, without cluster DNS too", b)
	}

	// A zone that ran before may have made etc a link out of its root:
	// the write must not follow it.
	outside := t.TempDir()
	if err := os.RemoveAll(filepath.Join(root, "etc")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(root, "etc")); err != nil {
		t.Fatal(err)
	}
	if err := h.writeZoneFiles(s); err == nil {
		t.Error("writing through a link out of the zone root succeeded")
	}
	if entries, _ := os.ReadDir(outside); len(entries) != 0 {
		t.Errorf("written outside the zone root: %v", entries)
	}

	// bhyve zones get nothing: their guest configures itself.
	bhyve := s
	bhyve.Brand = "bhyve"
	if err := h.writeZoneFiles(bhyve); err != nil {
		t.Error(err)
	}
}
