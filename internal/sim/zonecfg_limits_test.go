package sim_test

import (
	"strings"
	"testing"
)

// max-lwps and max-processes take libzonecfg's floor of 100; set, they
// print among the global properties and as their rctls.
func TestZonecfgProcessLimitsHaveAFloor(t *testing.T) {
	h := newHost(t)
	h.must("zonecfg", "-z", "z1", "create -b; set zonepath=/zones/z1; set max-processes=500; set max-lwps=2000; add capped-memory; set physical=64M; set swap=64M; end")
	info := h.must("zonecfg", "-z", "z1", "info")
	for _, want := range []string{"[max-lwps: 2000]\n", "[max-processes: 500]\n", "\tphysical: 64M\n\t[swap: 64M]\n",
		"rctl:\n\tname: zone.max-processes\n\tvalue: (priv=privileged,limit=500,action=deny)\n"} {
		if !strings.Contains(info, want) {
			t.Errorf("info lacks %q:\n%s", want, info)
		}
	}
	for _, prop := range []string{"max-processes", "max-lwps"} {
		r := h.run("zonecfg", "-z", "z1", "set "+prop+"=99")
		if r.code == 0 || !strings.Contains(r.stderr, prop+" property is out of range.") {
			t.Errorf("set %s=99: %v", prop, r)
		}
	}
	if info := h.must("zonecfg", "-z", "z1", "info", "max-processes"); info != "[max-processes: 500]\n" {
		t.Errorf("a refused value replaced the limit: %q", info)
	}
}
