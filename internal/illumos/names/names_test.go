package names

import (
	"strings"
	"testing"
)

func TestZoneName(t *testing.T) {
	got := ZoneName("default", "web", "3f2a")
	if !strings.HasPrefix(got, "default-web-") || len(got) != len("default-web-")+zoneHashLen {
		t.Errorf("ZoneName = %q, want default-web-<12 hex>", got)
	}
	if got != ZoneName("default", "web", "3f2a") {
		t.Error("ZoneName is not deterministic")
	}
	if got == ZoneName("default", "web", "3f2b") {
		t.Error("a new uid must give a new zone name")
	}
	if ZoneName("a-b", "c", "u") == ZoneName("a", "b-c", "u") {
		t.Error("namespace/pod boundary is ambiguous")
	}
	long := ZoneName(strings.Repeat("n", 100), strings.Repeat("p", 100), "u")
	if len(long) != MaxZoneNameLen || !ValidZoneName(long) {
		t.Errorf("long ZoneName = %q (%d chars)", long, len(long))
	}
	for _, in := range [][3]string{{"", "", ""}, {"SUNW", "x", ""}, {"global", "", ""}, {"..", "--", "x"}, {"Ünï", "cødé", "x"}} {
		if n := ZoneName(in[0], in[1], in[2]); !ValidZoneName(n) {
			t.Errorf("ZoneName(%q) = %q is invalid", in, n)
		}
	}
}

func TestValidZoneName(t *testing.T) {
	for _, ok := range []string{"web01", "a", "a.b-c_d", "0zone", strings.Repeat("z", 63)} {
		if !ValidZoneName(ok) {
			t.Errorf("ValidZoneName(%q) = false", ok)
		}
	}
	for _, bad := range []string{"", "global", "SUNWdefault", "-web", "_web", ".web", "we b", "web/1", "web:1", strings.Repeat("z", 64)} {
		if ValidZoneName(bad) {
			t.Errorf("ValidZoneName(%q) = true", bad)
		}
	}
}

func TestLinkName(t *testing.T) {
	got := LinkName("zw", "default/web/net0")
	if !ValidLinkName(got) {
		t.Fatalf("LinkName = %q is invalid", got)
	}
	if !strings.HasPrefix(got, "zwdefault_web_net0_") {
		t.Errorf("LinkName = %q, want the readable part first", got)
	}
	last := got[strings.LastIndexByte(got, '_')+1:]
	if len(last) != linkHashLen || last[0] == '0' {
		t.Errorf("hash suffix %q: want %d digits, no leading zero", last, linkHashLen)
	}
	if len(LinkName("zw", strings.Repeat("k", 80))) != MaxLinkNameLen {
		t.Error("a long key does not use the whole 31 characters")
	}
	for _, in := range [][2]string{{"", ""}, {"0", "1"}, {"_", "_"}, {"9net", "0"}, {"ÿ", "ÿ"}} {
		if n := LinkName(in[0], in[1]); !ValidLinkName(n) || !isLetter(n[0]) {
			t.Errorf("LinkName(%q) = %q: invalid or not starting with a letter", in, n)
		}
	}
}

func TestValidLinkName(t *testing.T) {
	for _, ok := range []string{"web0", "net0", "a_b1", "e1000g0", "zw_12", strings.Repeat("a", 30) + "1"} {
		if !ValidLinkName(ok) {
			t.Errorf("ValidLinkName(%q) = false", ok)
		}
	}
	for _, bad := range []string{"", "web", "0web1", "we-b0", "we.b0", "we b0", strings.Repeat("a", 31) + "1", "net0:1"} {
		if ValidLinkName(bad) {
			t.Errorf("ValidLinkName(%q) = true", bad)
		}
	}
}

func TestValidDatasetName(t *testing.T) {
	for _, ok := range []string{"tank", "rpool/zones/web01", "tank/a:b/c-d_e.f", "p1/x"} {
		if !ValidDatasetName(ok) {
			t.Errorf("ValidDatasetName(%q) = false", ok)
		}
	}
	for _, bad := range []string{"", "/tank", "tank/", "tank//x", "tank/x y", "tank/x@s", "tank/.", "tank/..",
		"1pool/x", "mirror/x", "raidz2/x", "c0t0d0/x", "log", "spare/x", "tank/" + strings.Repeat("x", 251),
		strings.TrimSuffix(strings.Repeat("a/", 51), "/")} {
		if ValidDatasetName(bad) {
			t.Errorf("ValidDatasetName(%q) = true", bad)
		}
	}
	if !ValidSnapshotName("tank/x@s1") || ValidSnapshotName("tank/x") || ValidSnapshotName("tank/x@") || ValidSnapshotName("tank/x@a@b") {
		t.Error("ValidSnapshotName disagrees")
	}
}

func TestDatasetName(t *testing.T) {
	got, err := DatasetName("rpool/zw/zones", "default-web-0123456789ab")
	if err != nil || got != "rpool/zw/zones/default-web-0123456789ab" {
		t.Errorf("a valid component must be used as it is: %q, %v", got, err)
	}
	a, _ := DatasetName("tank", "a/b")
	b, _ := DatasetName("tank", "a_b")
	if a == b || !ValidDatasetName(a) || strings.Count(a, "/") != 1 {
		t.Errorf("sanitised %q must not collide with %q and must stay one level", a, b)
	}
	long, err := DatasetName("tank", strings.Repeat("x", 300))
	if err != nil || len(long) > MaxDatasetNameLen || !ValidDatasetName(long) {
		t.Errorf("long: %q (%d), %v", long, len(long), err)
	}
	if _, err := DatasetName("/bad", "x"); err == nil {
		t.Error("an invalid parent must be refused")
	}
	if _, err := DatasetName("tank/"+strings.Repeat("y", 250), "x"); err == nil {
		t.Error("a parent with no room left must be refused")
	}
}

func FuzzZoneName(f *testing.F) {
	f.Add("default", "web", "uid-1", "x")
	f.Add("", "", "", "")
	f.Add(strings.Repeat("a", 70), "b", "c", "d")
	f.Add("SUNW", "global", "", "1")
	f.Fuzz(func(t *testing.T, ns, pod, uid, tail string) {
		n := ZoneName(ns, pod, uid)
		if !ValidZoneName(n) {
			t.Fatalf("ZoneName(%q, %q, %q) = %q is invalid", ns, pod, uid, n)
		}
		if n != ZoneName(ns, pod, uid) {
			t.Fatal("not deterministic")
		}
		// Inputs that differ only after any truncation point still differ.
		if tail != "" {
			if ZoneName(ns, pod+tail, uid) == n {
				t.Fatalf("pod %q and %q collide as %q", pod, pod+tail, n)
			}
			if ZoneName(ns, pod, uid+tail) == n {
				t.Fatalf("uid %q and %q collide", uid, uid+tail)
			}
			if ZoneName(ns+tail, pod, uid) == n {
				t.Fatalf("namespace %q and %q collide", ns, ns+tail)
			}
		}
	})
}

func FuzzLinkName(f *testing.F) {
	f.Add("zw", "default/web/net0", "1")
	f.Add("", "", "x")
	f.Add("9", strings.Repeat("k", 40), "k")
	f.Fuzz(func(t *testing.T, prefix, key, tail string) {
		n := LinkName(prefix, key)
		if !ValidLinkName(n) || !isLetter(n[0]) || !isDigit(n[len(n)-1]) {
			t.Fatalf("LinkName(%q, %q) = %q is invalid", prefix, key, n)
		}
		if n != LinkName(prefix, key) {
			t.Fatal("not deterministic")
		}
		if tail != "" && LinkName(prefix, key+tail) == n {
			t.Fatalf("keys %q and %q collide as %q", key, key+tail, n)
		}
	})
}

func FuzzDatasetName(f *testing.F) {
	f.Add("rpool/zw", "web", "data", "x")
	f.Add("tank", "..", ".", "")
	f.Add("tank", strings.Repeat("z", 300), "", "q")
	f.Fuzz(func(t *testing.T, parent, a, b, tail string) {
		n, err := DatasetName(parent, a, b)
		if err != nil {
			if ValidDatasetName(parent) && len(parent) < 150 && len(a) < 60 {
				t.Fatalf("DatasetName(%q, %q, %q): %v", parent, a, b, err)
			}
			return
		}
		if !ValidDatasetName(n) || !strings.HasPrefix(n, parent+"/") || strings.Count(n, "/") != strings.Count(parent, "/")+2 {
			t.Fatalf("DatasetName(%q, %q, %q) = %q", parent, a, b, n)
		}
		if m, _ := DatasetName(parent, a, b); m != n {
			t.Fatal("not deterministic")
		}
		if tail != "" {
			if m, err := DatasetName(parent, a, b+tail); err == nil && m == n {
				t.Fatalf("%q and %q collide as %q", b, b+tail, n)
			}
		}
	})
}
