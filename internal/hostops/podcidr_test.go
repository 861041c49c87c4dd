package hostops

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/zonewright/zonewright/internal/hostapi"
)

// A node gives its zones addresses of the pod CIDR the control plane
// assigned it only.
func TestZoneAddressesOutsideTheNodesPodCIDRAreRefused(t *testing.T) {
	h := &Host{ZonesPath: "/zonewright/zones", PodCIDR: netip.MustParsePrefix("10.88.1.0/24")}
	base := hostapi.PodSandbox{Namespace: "shop", Name: "web", UID: "0b6f4e0e-1c5a-4d8e-9f10-3a2b4c5d6e7f", Brand: "sparse",
		IP: "10.88.1.5", PrefixLen: 24, Gateway: "10.88.1.1"}
	if _, err := h.zoneConfig(base); err != nil {
		t.Fatalf("an address of the node's pod CIDR: %v", err)
	}
	for name, change := range map[string]func(*hostapi.PodSandbox){
		"another node's address": func(s *hostapi.PodSandbox) { s.IP, s.Gateway = "10.88.2.5", "10.88.2.1" },
		"another prefix length":  func(s *hostapi.PodSandbox) { s.PrefixLen = 16 },
		"a gateway outside":      func(s *hostapi.PodSandbox) { s.Gateway = "10.88.2.1" },
	} {
		s := base
		change(&s)
		if _, err := h.zoneConfig(s); err == nil || !strings.Contains(err.Error(), "pod CIDR 10.88.1.0/24") {
			t.Errorf("%s: %v", name, err)
		}
	}
}
