package sim_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

func TestZoneadmListParsableEscapesOnlyZonepath(t *testing.T) {
	h := newHost(t)
	h.must("zonecfg", "-z", "web01", "create -b; set zonepath=/zones/a:b; set brand=sparse; set ip-type=exclusive")
	h.must("zonecfg", "-z", "db01", "create", "-b", ";", "set", "zonepath=/zones/db01", ";", "", "set", "ip-type=shared")
	expect(t, h.run("zoneadm", "list", "-cp"), 0,
		"0:global:running:/::ipkg:shared\n"+
			`-:web01:configured:/zones/a\:b::sparse:excl`+"\n"+
			"-:db01:configured:/zones/db01::ipkg:shared\n", "")
	// Default lists running zones only; -i adds installed ones.
	expect(t, h.run("zoneadm", "list"), 0, "global\n", "")
	h.must("zoneadm", "-z", "db01", "install")
	expect(t, h.run("zoneadm", "list", "-i"), 0, "global\ndb01\n", "")
	out := h.must("zoneadm", "-z", "db01", "list", "-p")
	if !regexp.MustCompile(`^-:db01:installed:/zones/db01:[0-9a-f-]{36}:ipkg:shared\n$`).MatchString(out) {
		t.Errorf("list -p after install = %q, want a uuid", out)
	}
	expect(t, h.run("zoneadm", "list", "-pv"), 1, "", "zoneadm: list -p and -v are mutually exclusive.\n")
	expect(t, h.run("zoneadm", "-z", "nosuch", "halt"), 1, "", "zoneadm: nosuch: No such zone configured\n")
	r := h.run("zoneadm", "-z", "db01", "list", "-c")
	if r.code != 2 {
		t.Errorf("list -c with -z: exit %d, want 2", r.code)
	}
}

func TestDladmShowVnicParsable(t *testing.T) {
	h := newHost(t)
	h.must("dladm", "create-vnic", "-t", "-l", "net0", "-m", "02:08:20:0a:1b:03", "-v", "12", "vnic0")
	expect(t, h.run("dladm", "show-vnic", "-p", "-o", "LINK,OVER,MACADDRESS,VID,ZONE", "vnic0"), 0,
		`vnic0:net0:2\:8\:20\:a\:1b\:3:12:--`+"\n", "")
	// One field: nothing is escaped; field names are case-insensitive.
	expect(t, h.run("dladm", "show-vnic", "-p", "-o", "macaddress"), 0, "2:8:20:a:1b:3\n", "")
	expect(t, h.run("dladm", "show-vnic", "-p"), 1, "", "dladm: -p requires -o\n")
	expect(t, h.run("dladm", "show-vnic", "-p", "-o", "all"), 1, "", "dladm: \"-o all\" is invalid with -p\n")
	expect(t, h.run("dladm", "show-vnic", "nope0"), 1, "", "dladm: invalid vnic name 'nope0': object not found\n")
	expect(t, h.run("dladm", "show-vnic"), 0,
		"LINK         OVER       SPEED MACADDRESS        MACADDRTYPE VID  ZONE\n"+
			"vnic0        net0       10000 2:8:20:a:1b:3     fixed       12   --\n", "")
	// The ZONE column names the running zone that holds the VNIC, and the
	// VNIC is busy while it does.
	h.zoneSetup("web01", "running", "add net; set physical=vnic0; end")
	expect(t, h.run("dladm", "show-vnic", "-p", "-o", "link,zone"), 0, "vnic0:web01\n", "")
	expect(t, h.run("dladm", "delete-vnic", "vnic0"), 1, "", "dladm: vnic deletion failed: link busy\n")
	h.must("zoneadm", "-z", "web01", "halt")
	h.must("dladm", "delete-vnic", "vnic0")
	expect(t, h.run("dladm", "show-vnic", "-p", "-o", "link"), 0, "", "")
}

func TestLinkNameRules(t *testing.T) {
	h := newHost(t)
	for _, tc := range []struct {
		name, stderr string
	}{
		{"web", "dladm: invalid link name 'web'\n"},
		{"0web1", "dladm: invalid link name '0web1'\n"},
		{"we-b1", "dladm: invalid link name 'we-b1'\n"},
		{strings.Repeat("a", 31) + "1", "dladm: link name too long '" + strings.Repeat("a", 31) + "1'\n"},
	} {
		expect(t, h.run("dladm", "create-vnic", "-t", "-l", "net0", tc.name), 1, "", tc.stderr)
	}
	for _, ok := range []string{"web0", "a_b9", strings.Repeat("a", 30) + "1"} {
		h.must("dladm", "create-vnic", "-t", "-l", "net0", ok)
	}
	expect(t, h.run("dladm", "create-vnic", "-t", "-l", "net0", "web0"), 1, "",
		"dladm: vnic creation over net0 failed: object already exists\n")
	expect(t, h.run("dladm", "create-vnic", "-t", "-l", "nosuch0", "x0"), 1, "", "dladm: invalid link name 'nosuch0'\n")
	expect(t, h.run("dladm", "create-vnic", "-l", "net0", "-v", "4095", "v1"), 1, "", "dladm: invalid VLAN identifier '4095'\n")
	h.must("dladm", "create-etherstub", "stub0")
	expect(t, h.run("dladm", "create-etherstub", "stub0"), 1, "", "dladm: etherstub creation failed: object already exists\n")
	h.must("dladm", "create-vnic", "-l", "stub0", "in0")
	expect(t, h.run("dladm", "delete-etherstub", "stub0"), 1, "", "dladm: etherstub deletion failed: link busy\n")
	expect(t, h.run("dladm", "delete-vnic", "stub0"), 1, "", "dladm: 'stub0' is not a vnic\n")
	// dladm's usage errors exit 1, not 2.
	if r := h.run("dladm", "create-vnic", "novnic0"); r.code != 1 {
		t.Errorf("usage error exit %d, want 1", r.code)
	}
}

func TestZoneNameRules(t *testing.T) {
	h := newHost(t)
	for _, bad := range []string{"-web", "we b", "SUNWfoo", strings.Repeat("a", 64)} {
		r := h.run("zonecfg", "-z", bad, "create")
		if r.code != 2 || !strings.HasPrefix(r.stderr, bad+": Bogus zone name\n") {
			t.Errorf("zonecfg -z %q: %v", bad, r)
		}
	}
	h.must("zonecfg", "-z", strings.Repeat("a", 63), "create; set zonepath=/z/a")
	h.must("zonecfg", "-z", "a.b_c-1", "create; set zonepath=/z/b")
}

func TestZfsListGetFormats(t *testing.T) {
	h := newHost(t)
	h.must("zfs", "create", "-p", "-o", "quota=10G", "-o", "com.example:owner=alice", "tank/zones/web01")
	expect(t, h.run("zfs", "list", "-H", "-p", "-o", "name,used,refer,quota,mountpoint,origin", "tank/zones/web01"), 0,
		"tank/zones/web01\t24576\t24576\t10737418240\t/tank/zones/web01\t-\n", "")
	expect(t, h.run("zfs", "get", "-H", "-p", "-o", "value", "quota,com.example:owner,com.example:unset,reservation", "tank/zones/web01"), 0,
		"10737418240\nalice\n-\n0\n", "")
	expect(t, h.run("zfs", "get", "-H", "-o", "name,property,value,source", "quota,reservation,com.example:owner,compression", "tank/zones/web01"), 0,
		"tank/zones/web01\tquota\t10G\tlocal\n"+
			"tank/zones/web01\treservation\tnone\tdefault\n"+
			"tank/zones/web01\tcom.example:owner\talice\tlocal\n"+
			"tank/zones/web01\tcompression\toff\tdefault\n", "")
	// avail under a quota is the quota less what is used.
	out := h.must("zfs", "list", "-Hpo", "avail", "tank/zones/web01")
	if n, _ := strconv.ParseUint(strings.TrimSpace(out), 10, 64); n != 10737418240-24576 {
		t.Errorf("avail = %s", out)
	}
	expect(t, h.run("zfs", "list", "-H", "-o", "name", "-r", "-d", "1", "tank/zones"), 0, "tank/zones\ntank/zones/web01\n", "")
	h.must("zfs", "snapshot", "tank/zones/web01@s1")
	expect(t, h.run("zfs", "list", "-H", "-o", "name", "-t", "snapshot"), 0, "tank/zones/web01@s1\n", "")
	expect(t, h.run("zfs", "list", "-H", "-o", "name,type", "-t", "all", "-r", "tank/zones"), 0,
		"tank/zones\tfilesystem\ntank/zones/web01\tfilesystem\ntank/zones/web01@s1\tsnapshot\n", "")
	expect(t, h.run("zfs", "list", "-H", "tank/nope"), 1, "", "cannot open 'tank/nope': dataset does not exist\n")
	r := h.run("zfs", "list", "-o", "bogus")
	if r.code != 2 || !strings.HasPrefix(r.stderr, "bad property list: invalid property 'bogus'\n") {
		t.Errorf("bad -o: %v", r)
	}
	expect(t, h.run("zfs", "set", "quota=1K", "tank/zones/web01"), 1, "",
		"cannot set property for 'tank/zones/web01': size is less than current used or reserved space\n")
	expect(t, h.run("zfs", "set", "reservation=5T", "tank/zones/web01"), 1, "",
		"cannot set property for 'tank/zones/web01': size is greater than available space\n")
	h.must("zfs", "set", "reservation=1G", "quota=none", "tank/zones/web01")
	expect(t, h.run("zfs", "get", "-Hpo", "value", "reservation,quota", "tank/zones/web01"), 0, "1073741824\n0\n", "")
	// Human units with a header.
	out = h.must("zfs", "list", "-o", "name,used,quota", "tank/zones")
	if out != "NAME         USED  QUOTA\ntank/zones  1.00G   none\n" {
		t.Errorf("human list:\n%q", out)
	}
}

func TestZfsParentChildAndBusyRules(t *testing.T) {
	h := newHost(t)
	expect(t, h.run("zfs", "create", "tank/a/b"), 1, "", "cannot create 'tank/a/b': parent does not exist\n")
	expect(t, h.run("zfs", "create", "nopool/x"), 1, "", "cannot create 'nopool/x': no such pool 'nopool'\n")
	expect(t, h.run("zfs", "create", "tank/a b"), 1, "", "cannot create 'tank/a b': invalid character ' ' in name\n")
	expect(t, h.run("zfs", "create", "tank//a"), 1, "", "cannot create 'tank//a': empty component in name\n")
	h.must("zfs", "create", "-p", "tank/a/b/c")
	expect(t, h.run("zfs", "create", "tank/a"), 1, "", "cannot create 'tank/a': dataset already exists\n")
	h.must("zfs", "snapshot", "tank/a@snap")
	expect(t, h.run("zfs", "destroy", "tank/a"), 1, "",
		"cannot destroy 'tank/a': filesystem has children\nuse '-r' to destroy the following datasets:\ntank/a@snap\ntank/a/b\ntank/a/b/c\n")
	h.must("zfs", "clone", "tank/a@snap", "tank/clone")
	expect(t, h.run("zfs", "destroy", "tank/a@snap"), 1, "",
		"cannot destroy 'tank/a@snap': snapshot has dependent clones\nuse '-R' to destroy the following datasets:\ntank/clone\n")
	expect(t, h.run("zfs", "get", "-H", "-o", "value", "origin", "tank/clone"), 0, "tank/a@snap\n", "")
	expect(t, h.run("zfs", "destroy", "tank"), 1, "",
		"cannot destroy 'tank': operation does not apply to pools\nuse 'zfs destroy -r tank' to destroy all datasets in the pool\nuse 'zpool destroy tank' to destroy the pool itself\n")
	// A running zone holds its zonepath dataset and delegated datasets.
	h.withZonesDataset()
	h.must("zfs", "create", "tank/deleg")
	h.zoneSetup("web01", "running", "add dataset; set name=tank/deleg; end")
	expect(t, h.run("zfs", "destroy", "-r", "tank/zones"), 1, "", "cannot destroy 'tank/zones/web01': dataset is busy\n")
	expect(t, h.run("zfs", "destroy", "tank/deleg"), 1, "", "cannot destroy 'tank/deleg': dataset is busy\n")
	h.must("zoneadm", "-z", "web01", "halt")
	h.must("zfs", "destroy", "tank/deleg")
	h.must("zfs", "destroy", "-R", "tank/a")
	expect(t, h.run("zfs", "list", "-H", "-o", "name", "-r", "tank"), 0, "tank\ntank/zones\ntank/zones/web01\n", "")
	// Datasets are directories under the root's fs tree.
	if _, err := os.Stat(filepath.Join(h.root, "fs", "zones", "web01", "root")); err != nil {
		t.Errorf("zone root missing: %v", err)
	}
	// Uninstall destroys the dataset install created.
	h.must("zoneadm", "-z", "web01", "uninstall", "-F")
	expect(t, h.run("zfs", "list", "-H", "-o", "name", "-r", "tank"), 0, "tank\ntank/zones\n", "")
}

func TestIpadmAndRouteInsideZone(t *testing.T) {
	h := newHost(t)
	h.must("dladm", "create-vnic", "-t", "-l", "net0", "web0")
	h.zoneSetup("web01", "running", "add net; set physical=web0; end")
	expect(t, h.run("zlogin", "web01", "ipadm", "create-if", "-t", "web0"), 0, "", "")
	expect(t, h.run("zlogin", "web01", "ipadm", "create-if", "-t", "web0"), 1, "\n",
		"ipadm: Could not create web0 : Interface already exists\n")
	expect(t, h.run("zlogin", "web01", "ipadm", "create-if", "-t", "other0"), 1, "\n",
		"ipadm: Could not create other0 : Datalink does not exist\n")
	h.must("zlogin", "web01", "ipadm", "create-addr", "-t", "-T", "static", "-a", "10.0.0.5/24", "web0/v4")
	expect(t, h.run("zlogin", "web01", "ipadm", "create-addr", "-t", "-T", "static", "-a", "10.0.0.6/24", "web0/v4"), 1, "\n",
		"ipadm: Could not create address: Address object already exists\n")
	r := h.run("zlogin", "web01", "ipadm", "create-addr", "-T", "static", "-a", "10.0.0.7/24", "web0")
	if r.code != 1 || !strings.HasPrefix(r.stderr, "ipadm: invalid address object name: web0\n") {
		t.Errorf("bad addrobj: %v", r)
	}
	expect(t, h.run("zlogin", "web01", "ipadm", "show-addr", "-p", "-o", "addrobj,addr", "web0/v4"), 0, "web0/v4:10.0.0.5/24\n", "")
	expect(t, h.run("zlogin", "web01", "ipadm", "show-addr", "-p", "-o", "ADDR", "lo0/v6"), 0, "::1/128\n", "")
	expect(t, h.run("zlogin", "web01", "ipadm", "show-addr", "-p", "-o", "addrobj,addr", "lo0/v6"), 0, `lo0/v6:\:\:1/128`+"\n", "")
	expect(t, h.run("zlogin", "web01", "ipadm", "show-addr", "web0/nope"), 1, "\n", "ipadm: Could not get address: Object not found\n")
	// route: kernel results on stdout, errno as the exit status.
	expect(t, h.run("zlogin", "web01", "route", "add", "default", "10.9.9.1"), 128, "add net default: gateway 10.9.9.1: Network is unreachable\n", "")
	expect(t, h.run("zlogin", "web01", "route", "add", "default", "10.0.0.1"), 0, "add net default: gateway 10.0.0.1\n", "")
	expect(t, h.run("zlogin", "web01", "route", "add", "default", "10.0.0.1"), 17, "add net default: gateway 10.0.0.1: entry exists\n", "")
	expect(t, h.run("zlogin", "web01", "route", "delete", "default", "10.0.0.9"), 3, "delete net default: gateway 10.0.0.9: not in table\n", "")
	expect(t, h.run("zlogin", "web01", "route", "-p", "add", "default", "10.0.0.1"), 0,
		"add net default: gateway 10.0.0.1: entry exists\nadd persistent net default: gateway 10.0.0.1\n", "")
	expect(t, h.run("zlogin", "web01", "route", "-p", "add", "default", "10.0.0.1"), 1,
		"add net default: gateway 10.0.0.1: entry exists\n", "add persistent net default: gateway 10.0.0.1: entry exists\n")
	expect(t, h.run("zlogin", "web01", "route", "add", "default"), 1, "", "route: gateway required for add or delete command\n")
	expect(t, h.run("zlogin", "web01", "route", "-n", "get", "10.8.0.0/16"), 0,
		"   route to: 10.8.0.0/16\ndestination: default\n       mask: default\n    gateway: 10.0.0.1\n  interface: web0\n"+
			"      flags: <UP,GATEWAY,DONE,STATIC>\n recvpipe  sendpipe  ssthresh    rtt,ms rttvar,ms  hopcount      mtu     expire\n"+
			"       0         0         0         0         0         0      1500         0\n", "")
	// Temporary IP configuration goes with a halt; the persistent route
	// comes back at boot.
	h.must("zoneadm", "-z", "web01", "reboot")
	st := h.state()
	for _, z := range st.Zones {
		if z.Name != "web01" {
			continue
		}
		if len(z.Addresses) != 0 || len(z.Routes) != 1 || z.Routes[0].Gateway != "10.0.0.1" {
			t.Errorf("after reboot: addresses %v routes %v", z.Addresses, z.Routes)
		}
	}
	// ipadm refuses a shared-IP zone and a zone that is not running.
	h.zoneSetup("shared1", "running", "set ip-type=shared")
	r = h.run("zlogin", "shared1", "ipadm", "create-if", "net0")
	if r.code != 1 || !strings.Contains(r.stderr, "Operation not supported") {
		t.Errorf("ipadm in shared zone: %v", r)
	}
}

func TestAllowedAddressConfiguresZoneAtBoot(t *testing.T) {
	h := newHost(t)
	h.must("dladm", "create-vnic", "-t", "-l", "net0", "web0")
	h.zoneSetup("web01", "running", "add net; set physical=web0; set allowed-address=192.168.5.10/24; set defrouter=192.168.5.1; end")
	expect(t, h.run("zlogin", "web01", "ipadm", "show-addr", "-p", "-o", "addrobj,type,addr", "web0/"), 0,
		"web0/v4:from-gz:192.168.5.10/24\n", "")
	out := h.must("zlogin", "web01", "route", "-n", "get", "default")
	if !strings.Contains(out, "    gateway: 192.168.5.1\n") {
		t.Errorf("route get default:\n%s", out)
	}
	// A second zone cannot boot on the same VNIC.
	h.zoneSetup("web02", "installed", "add net; set physical=web0; end")
	expect(t, h.run("zoneadm", "-z", "web02", "boot"), 1, "",
		"zoneadm: zone 'web02': failed to add network device web0: link busy\nzoneadm: zone 'web02': call to zoneadmd failed\n")
}

func TestIpnatLoadListFlush(t *testing.T) {
	h := newHost(t)
	rules := "# web\nrdr net0 10.0.0.5/255.255.255.255 port 80 -> 192.168.1.10 port 8080\n" +
		"map net0 192.168.1.0/24 -> 10.0.0.5/32 portmap tcp/udp auto\n\n" +
		"bimap net0 192.168.1.11/32 -> 10.0.0.6/32\n"
	expect(t, h.runIn(rules, "ipnat", "-f", "-"), 0, "", "")
	listing := "List of active MAP/Redirect filters:\n" +
		"rdr net0 10.0.0.5/32 port 80 -> 192.168.1.10 port 8080 tcp\n" +
		"map net0 192.168.1.0/24 -> 10.0.0.5/32 portmap tcp/udp auto\n" +
		"bimap net0 192.168.1.11/32 -> 10.0.0.6/32\n\n" +
		"List of active sessions:\n"
	expect(t, h.run("ipnat", "-l"), 0, listing, "")
	// A duplicate is reported and the exit status stays 0; a syntax error
	// exits 1 (spec §10.5).
	expect(t, h.runIn("rdr net0 10.0.0.5/32 port 80 -> 192.168.1.10 port 8080 tcp\n", "ipnat", "-f", "-"), 0, "",
		"1:ioctl(add/insert nat rule): File exists\n")
	expect(t, h.runIn("rdr net0 10.0.0.5 port eighty -> 1.2.3.4 port 80\n", "ipnat", "-f", "-"), 1, "",
		"invalid port number error at \"eighty\", line 1\n")
	// -F flushes the sessions, -C the rules (the kernel always counts 4);
	// with -f - the file then replaces the set.
	expect(t, h.runIn("rdr net0 10.0.0.7/32 port 443 -> 192.168.1.12 port 8443 tcp\n", "ipnat", "-C", "-F", "-f", "-"), 0,
		"0 entries flushed from NAT table\n4 entries flushed from NAT list\n", "")
	expect(t, h.run("ipnat", "-l"), 0, "List of active MAP/Redirect filters:\n"+
		"rdr net0 10.0.0.7/32 port 443 -> 192.168.1.12 port 8443 tcp\n\nList of active sessions:\n", "")
	expect(t, h.run("ipnat", "-C"), 0, "4 entries flushed from NAT list\n", "")
	expect(t, h.run("ipnat", "-l"), 0, "List of active MAP/Redirect filters:\n\nList of active sessions:\n", "")
}

func TestZonecfgInfoExportAndFiles(t *testing.T) {
	h := newHost(t)
	dir := t.TempDir()
	cfg := filepath.Join(dir, "web01.cfg")
	os.WriteFile(cfg, []byte(`create -b
set zonepath=/zones/web01
set brand=sparse
set ip-type=exclusive
set limitpriv=default,sys_dl_config
set max-lwps=2000
add fs; set dir=/data; set special=/tank/data; set type=lofs; add options [ro,nodevices]; end
add net
set physical=vnic0
set allowed-address=10.0.0.5/24
set defrouter=10.0.0.1
end
add capped-cpu; set ncpus=1.5; end
add capped-memory; set physical=1G; set swap=2G; end
add attr; set name=foo; set type=string; set value="bar baz"; end
add dataset; set name=tank/delegated; end
`), 0o644)
	expect(t, h.run("zonecfg", "-z", "web01", "-f", cfg), 0, "", "")
	expect(t, h.run("zonecfg", "-z", "web01", "info"), 0, `zonename: web01
zonepath: /zones/web01
brand: sparse
autoboot: false
bootargs: 
pool: 
limitpriv: default,sys_dl_config
scheduling-class: 
ip-type: exclusive
hostid: 
fs-allowed: 
[max-lwps: 2000]
[max-swap: 2147483648]
fs:
	dir: /data
	special: /tank/data
	raw not specified
	type: lofs
	options: [ro,nodevices]
net:
	address not specified
	allowed-address: 10.0.0.5/24
	physical: vnic0
	defrouter: 10.0.0.1
capped-cpu:
	[ncpus: 1.50]
capped-memory:
	physical: 1G
	[swap: 2G]
attr:
	name: foo
	type: string
	value: "bar baz"
dataset:
	name: tank/delegated
rctl:
	name: zone.max-lwps
	value: (priv=privileged,limit=2000,action=deny)
rctl:
	name: zone.cpu-cap
	value: (priv=privileged,limit=150,action=deny)
rctl:
	name: zone.max-swap
	value: (priv=privileged,limit=2147483648,action=deny)
`, "")
	expect(t, h.run("zonecfg", "-z", "web01", "info", "zonepath"), 0, "zonepath: /zones/web01\n", "")
	// export recreates the same configuration.
	exported := h.must("zonecfg", "-z", "web01", "export")
	expect(t, h.runIn(exported, "zonecfg", "-z", "copy1", "-f", "-"), 0, "", "")
	a := h.must("zonecfg", "-z", "web01", "info")
	b := strings.Replace(h.must("zonecfg", "-z", "copy1", "info"), "zonename: copy1", "zonename: web01", 1)
	if a != b {
		t.Errorf("export round trip differs:\n%s\nvs\n%s", a, b)
	}
	// The first error stops the file, with the line named, exit 1;
	// changes before it are committed (zonecfg's cleanup does).
	bad := filepath.Join(dir, "bad.cfg")
	os.WriteFile(bad, []byte("create -b\nset zonepath=/zones/bad\nset brand=nosuch\nset autoboot=true\n"), 0o644)
	expect(t, h.run("zonecfg", "-z", "bad", "-f", bad), 1, "", "On line 3 of "+bad+":\nnosuch: unknown brand.\n")
	expect(t, h.run("zonecfg", "-z", "bad", "info", "autoboot"), 0, "autoboot: false\n", "")
	expect(t, h.runIn("set autoboot=maybe\n", "zonecfg", "-z", "bad", "-f", "-"), 1, "",
		"On line 1:\nautoboot value must be 'true' or 'false'.\n")
	expect(t, h.run("zonecfg", "-z", "bad", "set", "zonepath", "/x", "oops"), 1, "", "syntax error on line 1 at '/x'\n")
	expect(t, h.run("zonecfg", "-z", "nosuch", "info"), 1, "", "nosuch: No such zone configured\n")
	expect(t, h.run("zonecfg", "-z", "web01", "add net; set physical=vnic0; end"), 1, "",
		"A net resource with the physical 'vnic0' already exists.\n")
	expect(t, h.run("zonecfg", "-z", "web01", "end"), 1, "", "The end command only makes sense in the resource scope.\n")
	expect(t, h.run("zonecfg", "-z", "web01", "add fs; set dir=/x"), 1, "", "Resource incomplete.\n")
	expect(t, h.run("zonecfg", "-z", "web01", "create"), 1, "",
		"Zone exists, input not from terminal and -F not specified:\ncreate command ignored, exiting.\n")
	expect(t, h.run("zonecfg", "-z", "web01", "create -F; set zonepath=/zones/w"), 0, "Zone web01 already exists; overwriting.\n", "")
	expect(t, h.run("zonecfg", "-z", "web01", "select net physical=vnic0; end"), 1, "", "net: No such resource with that id\n")
	// Quoted values keep their spaces and ';'.
	h.must("zonecfg", "-z", "web01", `set bootargs="-m verbose; -s"`)
	expect(t, h.run("zonecfg", "-z", "web01", "info", "bootargs"), 0, "bootargs: \"-m verbose; -s\"\n", "")
	// SmartOS-style piped input with no -f prints the interactive hint.
	expect(t, h.runIn("create -b\nset zonepath=/zones/piped\n", "zonecfg", "-z", "piped"), 0, "",
		"piped: No such zone configured\nUse 'create' to begin configuring a new zone.\n")
	if h.zoneState("piped") != "configured" {
		t.Errorf("piped zone not created")
	}
}

func TestHostFacts(t *testing.T) {
	h := newHost(t)
	expect(t, h.run("uname", "-a"), 0, "SunOS node1 5.11 omnios-r151054 i86pc i386 i86pc\n", "")
	expect(t, h.run("uname", "-s", "-r"), 0, "SunOS 5.11\n", "")
	expect(t, h.run("hostname"), 0, "node1\n", "")
	if out := h.must("prtconf"); !strings.Contains(out, "\nMemory size: 32768 Megabytes\n") {
		t.Errorf("prtconf:\n%s", out)
	}
	if n := strings.Count(h.must("psrinfo"), "on-line"); n != 8 {
		t.Errorf("psrinfo lists %d CPUs, want 8", n)
	}
	expect(t, h.run("zpool", "list", "-Hpo", "name,size", "tank"), 0, "tank\t1099511627776\n", "")
	// host.json overrides facts.
	os.WriteFile(filepath.Join(h.root, "host.json"), []byte(`{"hostname":"big","ncpus":2,"memory_mb":1024}`), 0o644)
	expect(t, h.run("hostname"), 0, "big\n", "")
	expect(t, h.run("prtconf", "-m"), 0, "1024\n", "")
	if n := strings.Count(h.must("psrinfo"), "on-line"); n != 2 {
		t.Errorf("psrinfo lists %d CPUs, want 2", n)
	}
}

func TestRootResolution(t *testing.T) {
	base := t.TempDir()
	n1 := newNamedHost(t, base, "node1")
	n2 := newNamedHost(t, base, "node2")
	// Two nodes in one process, told apart only by their command dirs.
	n1.must("dladm", "create-vnic", "-l", "net0", "only1")
	expect(t, n1.run("hostname"), 0, "node1\n", "")
	expect(t, n2.run("hostname"), 0, "node2\n", "")
	expect(t, n2.run("dladm", "show-vnic", "-p", "-o", "link"), 0, "", "")
	// The environment variable wins over the marker file.
	expect(t, n2.runEnv("", []string{"ILLUMOS_SIM_ROOT=" + n1.root}, "dladm", "show-vnic", "-p", "-o", "link"), 0, "only1\n", "")
	// Called as "illumos-sim CMD" with no root anywhere: a clear error.
	// A relative argv[0] resolves against the working directory.
	c := exec.Command("./node1-bin/hostname")
	c.Dir, c.Env = base, cleanEnv()
	if out, err := c.Output(); err != nil || string(out) != "node1\n" {
		t.Errorf("relative argv[0]: %q %v", out, err)
	}
	out, err := runBare(t, "zoneadm", "list")
	if err == nil || !strings.Contains(out, "no state root") {
		t.Errorf("no root: err=%v out=%q", err, out)
	}
}

func TestBrandInstallOptions(t *testing.T) {
	h := newHost(t)
	h.zoneSetup("lx1", "configured", "set brand=lx")
	expect(t, h.run("zoneadm", "-z", "lx1", "install", "-s", "/nonexistent/image.tar.gz"), 1, "",
		"ERROR: the source /nonexistent/image.tar.gz does not exist\n")
	if got := h.zoneState("lx1"); got != "configured" {
		t.Errorf("failed lx install left the zone %s", got)
	}
	img := writeTarball(t, map[string]string{"etc/os-release": "NAME=test\n"})
	h.must("zoneadm", "-z", "lx1", "install", "-x", "nodataset", "-t", img)
	if got := h.zoneState("lx1"); got != "installed" {
		t.Errorf("lx install: %s", got)
	}
	h.zoneSetup("vm1", "configured", "set brand=bhyve")
	r := h.run("zoneadm", "-z", "vm1", "install", "-s", img)
	if r.code != 2 || !strings.HasPrefix(r.stderr, "Usage: zoneadm -z vm1 install") || h.zoneState("vm1") != "configured" {
		t.Errorf("bhyve install with an image: %v (state %s)", r, h.zoneState("vm1"))
	}
	h.must("zoneadm", "-z", "vm1", "install")
	// lx and bhyve zones must be exclusive-IP.
	expect(t, h.run("zonecfg", "-z", "lx2", "create -b; set zonepath=/zones/lx2; set brand=lx"), 1, "",
		"ip-type: brand lx requires an exclusive IP type\nZone lx2 failed to verify\nConfiguration not saved.\n")
}

// A zone's node name is the first word of its /etc/nodename, read at
// boot (spec §6.4): its zone name without one, unchanged by an edit until
// the zone boots again.
func TestZoneNodenameIsReadAtBoot(t *testing.T) {
	h := newHost(t)
	h.zoneSetup("web01", "running")
	expect(t, h.run("zlogin", "web01", "hostname"), 0, "web01\n", "")
	nodename := filepath.Join(h.root, "fs", "zones", "web01", "root", "etc", "nodename")
	if err := os.MkdirAll(filepath.Dir(nodename), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(nodename, []byte("web-0 \n"), 0o644); err != nil {
		t.Fatal(err)
	}
	expect(t, h.run("zlogin", "web01", "hostname"), 0, "web01\n", "")
	h.must("zoneadm", "-z", "web01", "reboot")
	expect(t, h.run("zlogin", "web01", "hostname"), 0, "web-0\n", "")
	expect(t, h.run("zlogin", "web01", "uname", "-n"), 0, "web-0\n", "")
	expect(t, h.run("hostname"), 0, "node1\n", "")
}
