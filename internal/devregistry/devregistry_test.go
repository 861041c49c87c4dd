package devregistry_test

import (
	"testing"

	"github.com/zonewright/zonewright/internal/devregistry"
	"github.com/zonewright/zonewright/internal/oci"
)

// The registry serves the demo image as zonewright resolves it: one
// layer, and a command that prints the greeting.
func TestTheDemoImageResolves(t *testing.T) {
	r, err := devregistry.Start(t.Context(), "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	ref, err := oci.ParseReference(r.Addr + "/" + devregistry.DemoImage)
	if err != nil {
		t.Fatal(err)
	}
	c := &oci.Client{Insecure: func(string) bool { return true }}
	img, err := c.Resolve(t.Context(), ref, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(img.Layers) != 1 || len(img.Config.Cmd) != 1 || img.Config.Entrypoint[0] != "/bin/sh" {
		t.Fatalf("demo image: %+v", img)
	}
	if _, err := devregistry.Start(t.Context(), r.Addr); err == nil {
		t.Fatal("a second registry on a taken address started")
	}
}
