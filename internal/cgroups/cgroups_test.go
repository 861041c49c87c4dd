package cgroups

import (
	"errors"
	"testing"
)

// The process's cgroups are found under each hierarchy's mount, as
// /proc/self/cgroup names them: the v1 memory and cpu controllers where
// both are mounted (beside an empty unified hierarchy, as on hybrid
// systems, or joined with cpuacct and mounted from a sub-tree), else
// cgroup v2; a mount point's escapes are undone.
func TestFind(t *testing.T) {
	for _, tc := range []struct {
		name, mountinfo, self string
		want                  Layout
	}{{
		name: "v1 with an empty unified hierarchy",
		mountinfo: `32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
33 31 0:30 / /sys/fs/cgroup/cpuacct rw,relatime - cgroup cgroup rw,cpuacct
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw`,
		self: "4:memory:/process_api/6bb6\n2:cpuacct:/\n1:cpu:/\n0::/\n",
		want: Layout{Memory: "/sys/fs/cgroup/memory/process_api/6bb6", CPU: "/sys/fs/cgroup/cpu"},
	}, {
		name: "v1 with cpu and cpuacct together, mounted from a sub-tree",
		mountinfo: `40 31 0:35 /lxc/c1 /sys/fs/cgroup/cpu,cpuacct rw - cgroup cgroup rw,cpu,cpuacct
41 31 0:36 /lxc/c1 /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory`,
		self: "5:memory:/lxc/c1/app\n3:cpu,cpuacct:/lxc/c1\n",
		want: Layout{Memory: "/sys/fs/cgroup/memory/app", CPU: "/sys/fs/cgroup/cpu,cpuacct"},
	}, {
		name:      "v2",
		mountinfo: `29 23 0:26 / /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw,nsdelegate`,
		self:      "0::/user.slice/sim.scope\n",
		want:      Layout{Unified: true, Memory: "/sys/fs/cgroup/user.slice/sim.scope", CPU: "/sys/fs/cgroup/user.slice/sim.scope"},
	}, {
		name:      "v2 at a path with a space",
		mountinfo: `29 23 0:26 / /mnt/cg\040two rw - cgroup2 cgroup2 rw`,
		self:      "0::/a\n",
		want:      Layout{Unified: true, Memory: "/mnt/cg two/a", CPU: "/mnt/cg two/a"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Find(tc.mountinfo, tc.self)
			if err != nil || got != tc.want {
				t.Errorf("Find = %+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
	if _, err := Find("", "0::/\n"); !errors.Is(err, ErrNoHierarchy) {
		t.Errorf("no cgroup mounted: %v, want ErrNoHierarchy", err)
	}
}
