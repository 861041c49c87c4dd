package sim_test

import (
	"strings"
	"testing"
)

// The global zone routes a network to a gateway on a connected subnet
// only, netstat -rnv shows each route with its mask, and an operator's
// `route delete` removes the kernel's route but not the persistent one.
func TestGlobalZoneNetRoutesAndNetstat(t *testing.T) {
	h := newHost(t)
	h.must("dladm", "create-vnic", "-l", "net0", "under0")
	h.must("ipadm", "create-addr", "-T", "static", "-a", "192.168.7.11/24", "under0/v4")

	expect(t, h.run("route", "-p", "add", "-net", "10.88.2.0/24", "10.9.9.9"), 128,
		"add net 10.88.2.0/24: gateway 10.9.9.9: Network is unreachable\n", "")
	expect(t, h.run("route", "-p", "add", "-net", "10.88.2.0/24", "192.168.7.12"), 0,
		"add net 10.88.2.0/24: gateway 192.168.7.12\nadd persistent net 10.88.2.0/24: gateway 192.168.7.12\n", "")

	out := h.must("netstat", "-rnv", "-f", "inet")
	want := "10.88.2.0            255.255.255.0   192.168.7.12         under0  1500     0   0 UG       0      0 \n"
	if !strings.Contains(out, want) || !strings.HasPrefix(out, "\nIRE Table: IPv4\n") || strings.Contains(out, "IPv6") {
		t.Errorf("netstat -rnv -f inet:\n%s\nwant the line\n%s", out, want)
	}
	if out := h.must("netstat", "-rn"); !strings.Contains(out, "10.88.2.0            192.168.7.12         UG        0          0 under0    \n") ||
		!strings.Contains(out, "Routing Table: IPv6") {
		t.Errorf("netstat -rn:\n%s", out)
	}

	expect(t, h.run("route", "delete", "-net", "10.88.2.0/24", "192.168.7.12"), 0, "delete net 10.88.2.0/24: gateway 192.168.7.12\n", "")
	if out := h.must("netstat", "-rn", "-f", "inet"); strings.Contains(out, "10.88.2.0") {
		t.Errorf("the deleted route is still listed:\n%s", out)
	}
	expect(t, h.run("route", "-p", "show"), 0, "Persistent routes:\nadd -net 10.88.2.0/24 192.168.7.12\n", "")
	expect(t, h.run("netstat", "-i"), 1, "", "netstat: the simulator answers only -r [-anv] [-f inet|inet6]\n")
}

// set-ifprop records forwarding per interface and protocol; show-ifprop
// reads it back.
func TestIpadmForwardingProperty(t *testing.T) {
	h := newHost(t)
	h.must("dladm", "create-vnic", "-l", "net0", "under0")
	h.must("ipadm", "create-if", "under0")
	expect(t, h.run("ipadm", "show-ifprop", "-c", "-o", "current", "-p", "forwarding", "-m", "ipv4", "under0"), 0, "off\n", "")
	h.must("ipadm", "set-ifprop", "-p", "forwarding=on", "-m", "ipv4", "under0")
	expect(t, h.run("ipadm", "show-ifprop", "-c", "-o", "current,persistent", "-p", "forwarding", "under0"), 0, "on:on\noff:--\n", "")
	expect(t, h.run("ipadm", "set-ifprop", "-p", "forwarding=maybe", "-m", "ipv4", "under0"), 1, "\n",
		"ipadm: set-ifprop: forwarding: Invalid argument provided\n")
	expect(t, h.run("ipadm", "set-ifprop", "-p", "forwarding=on", "-m", "ipv4", "nope0"), 1, "\n",
		"ipadm: set-ifprop: nope0: Interface does not exist\n")
}
