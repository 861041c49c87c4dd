// Command illumos-sim simulates the illumos zone-provisioning commands on
// Linux. It is a multi-call binary: it acts as the command its argv[0]
// names (zoneadm, zonecfg, dladm, zfs, ...), or as the command given as its
// first argument. See internal/sim/README.md.
package main

import (
	"os"

	"github.com/zonewright/zonewright/internal/sim"
)

func main() {
	os.Exit(sim.Main(os.Args))
}
