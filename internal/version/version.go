// Package version is what a zonewright binary says of its own build.
package version

import (
	"runtime"
	"runtime/debug"
)

// Info is a build's version, in the shape of Kubernetes' /version.
type Info struct {
	GitVersion string `json:"gitVersion"`
	GoVersion  string `json:"goVersion"`
	Platform   string `json:"platform"`
}

// Get is this binary's version.
func Get() Info {
	return Info{GitVersion: String(), GoVersion: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
}

// String is the binary's module version from its build information, with
// the commit it was built from: "(devel)+0123456789ab" for a build from a
// checkout.
func String() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	v := bi.Main.Version
	if v == "" {
		v = "(devel)"
	}
	for _, s := range bi.Settings {
		if s.Key == "vcs.revision" && len(s.Value) >= 12 {
			v += "+" + s.Value[:12]
		}
	}
	return v
}
