package main

import (
	"flag"
	"testing"

	"github.com/zonewright/zonewright/internal/clusterip"
)

// In isolation mode the dev stack's loopback service range, which pods
// cannot reach from their zones, becomes serve's; a loopback range given
// by hand is refused, another kept. Delete the `*cidr =
// clusterip.DefaultCIDR` line of isolatedServiceCIDR to see it fail.
func TestIsolationModeKeepsServicesOffLoopback(t *testing.T) {
	t.Setenv("ZW_SERVICE_CIDR", "")
	parse := func(args ...string) (string, error) {
		fs := flag.NewFlagSet("dev", flag.ContinueOnError)
		cidr := fs.String("service-cidr", clusterip.DevCIDR, "")
		if err := fs.Parse(args); err != nil {
			t.Fatal(err)
		}
		err := isolatedServiceCIDR(fs, cidr)
		return *cidr, err
	}
	if got, err := parse(); err != nil || got != clusterip.DefaultCIDR {
		t.Errorf("default: %q, %v; want %s", got, err, clusterip.DefaultCIDR)
	}
	if _, err := parse("--service-cidr", "127.97.0.0/16"); err == nil {
		t.Error("a loopback service range accepted in isolation mode")
	}
	if got, err := parse("--service-cidr", "10.77.0.0/16"); err != nil || got != "10.77.0.0/16" {
		t.Errorf("given: %q, %v", got, err)
	}
}
