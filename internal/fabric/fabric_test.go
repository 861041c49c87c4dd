package fabric_test

import (
	"testing"

	"github.com/zonewright/zonewright/internal/fabric"
)

// Without a fabric (the shared loopback) a command runs as any program
// does: no nsenter in front of it.
func TestNoFabricRunsCommandsPlainly(t *testing.T) {
	var f *fabric.Fabric
	cmd := f.Command("true", "x")
	if len(cmd.Args) != 2 || cmd.Args[0] != "true" {
		t.Fatalf("argv %q", cmd.Args)
	}
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
}
