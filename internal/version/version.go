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

// String is the binary's module version from its build information, a
// semantic version as Kubernetes clients expect (kubectl version parses
// it): the module's (Go stamps one from the checkout), else
// "v0.0.0-devel+<commit>" for a build that has none.
func String() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "v0.0.0-unknown"
	}
	if v := bi.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	v := "v0.0.0-devel"
	for _, s := range bi.Settings {
		if s.Key == "vcs.revision" && len(s.Value) >= 12 {
			v += "+" + s.Value[:12]
		}
	}
	return v
}
