package imagemap_test

import (
	"strings"
	"testing"

	"github.com/zonewright/zonewright/deploy"
	"github.com/zonewright/zonewright/internal/imagemap"
)

func TestAMalformedMapIsRefusedWithTheFieldPath(t *testing.T) {
	for _, tc := range []struct{ name, body, want string }{
		{"unknown key", "imagez: {}", "imagez"},
		{"bad image", "images: {x: {kind: zfs-stream}}", "images.x.spec.source"},
		{"alias of an alias", "aliases: {a: b, b: c}", "aliases.a"},
		{"bad size", "sizes: {small: {cpu: lots}}", "sizes.small.cpu"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := imagemap.Parse([]byte(tc.body)); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("want an error naming %s, got %v", tc.want, err)
			}
		})
	}
}

func TestTheShippedMapParsesAndResolves(t *testing.T) {
	m, err := imagemap.Parse(deploy.ImageMap)
	if err != nil {
		t.Fatal(err)
	}
	if m.Resolve("") != "base" || m.Resolve("illumos-latest") != "omnios-r151054" || m.Resolve("other") != "other" {
		t.Fatalf("resolve: default %q, alias %q", m.Resolve(""), m.Resolve("illumos-latest"))
	}
	if s, ok := m.Size("small"); !ok || s["cpu"] == "" {
		t.Fatalf("size small: %v", s)
	}
}
