// Package cgroups finds this process's own cgroups, as the kernel lists
// them: the simulator makes its zones' cgroups under them, the benchmark
// its CPU split.
package cgroups

import (
	"errors"
	"os"
	"path/filepath"
	"strings"

	"github.com/zonewright/zonewright/internal/mountinfo"
)

// ErrNoHierarchy: no hierarchy with both the memory and the cpu
// controller is mounted.
var ErrNoHierarchy = errors.New("no cgroup hierarchy with the memory and cpu controllers is mounted")

// Layout is where this process's own cgroups are.
type Layout struct {
	// Unified: cgroup v2, one hierarchy; Memory and CPU are both its
	// directory.
	Unified     bool
	Memory, CPU string
}

// Own reads this process's layout from /proc/self.
func Own() (Layout, error) {
	mounts, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return Layout{}, err
	}
	own, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return Layout{}, err
	}
	return Find(string(mounts), string(own))
}

// Find finds the process's memory and cpu cgroups from its
// /proc/self/mountinfo and /proc/self/cgroup: the v1 hierarchies where
// both controllers are mounted there (beside an empty unified hierarchy,
// as on hybrid systems), else cgroup v2.
func Find(mountinfoFile, cgroupFile string) (Layout, error) {
	paths := map[string]string{} // controller ("" for v2) -> the process's cgroup in it
	for _, line := range strings.Split(cgroupFile, "\n") {
		f := strings.SplitN(line, ":", 3)
		if len(f) != 3 {
			continue
		}
		if f[0] == "0" && f[1] == "" {
			paths[""] = f[2]
			continue
		}
		for _, ctl := range strings.Split(f[1], ",") {
			paths[ctl] = f[2]
		}
	}
	mounts := map[string][2]string{} // controller ("" for v2) -> mount point, its root in the hierarchy
	for _, line := range strings.Split(mountinfoFile, "\n") {
		pre, post, ok := strings.Cut(line, " - ")
		f, g := strings.Fields(pre), strings.Fields(post)
		if !ok || len(f) < 5 || len(g) < 3 {
			continue
		}
		m := [2]string{mountinfo.Unescape(f[4]), f[3]}
		switch g[0] {
		case "cgroup2":
			if _, seen := mounts[""]; !seen {
				mounts[""] = m
			}
		case "cgroup":
			for _, opt := range strings.Split(g[2], ",") {
				if opt == "memory" || opt == "cpu" {
					if _, seen := mounts[opt]; !seen {
						mounts[opt] = m
					}
				}
			}
		}
	}
	dir := func(ctl string) (string, bool) {
		m, mounted := mounts[ctl]
		p, in := paths[ctl]
		if !mounted || !in {
			return "", false
		}
		rel, ok := strings.CutPrefix(p, m[1])
		if m[1] == "/" {
			rel, ok = p, true
		}
		if !ok { // the process's cgroup is outside what is mounted
			return "", false
		}
		return filepath.Join(m[0], rel), true
	}
	mem, okMem := dir("memory")
	cpu, okCPU := dir("cpu")
	if okMem && okCPU {
		return Layout{Memory: mem, CPU: cpu}, nil
	}
	if unified, ok := dir(""); ok {
		return Layout{Unified: true, Memory: unified, CPU: unified}, nil
	}
	return Layout{}, ErrNoHierarchy
}
