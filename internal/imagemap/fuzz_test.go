package imagemap_test

import (
	"testing"

	"github.com/zonewright/zonewright/deploy"
	"github.com/zonewright/zonewright/internal/imagemap"
)

// An image map file is parsed or refused, never a panic; the built-in one
// is a seed.
func FuzzParse(f *testing.F) {
	f.Add(deploy.ImageMap)
	f.Add([]byte("images: {}\n"))
	f.Add([]byte("default: base\n"))
	f.Add([]byte("- a\n- b\n"))
	f.Fuzz(func(t *testing.T, raw []byte) {
		_, _ = imagemap.Parse(raw)
	})
}
