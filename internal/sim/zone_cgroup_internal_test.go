package sim

import (
	"errors"
	"reflect"
	"testing"
)

// A zone's cgroup is made under the process's own cgroup of each
// controller, as /proc/self/cgroup names it under the hierarchy's mount:
// the v1 memory and cpu controllers where both are mounted (beside an
// empty unified hierarchy, as on hybrid systems), else cgroup v2; and
// its caps go to each version's own files.
func TestZoneCgroupsAreMadeUnderTheProcesssOwnCgroups(t *testing.T) {
	caps := zoneCaps{physical: 256 << 20, swap: 512 << 20, cpuCap: 150}
	for _, tc := range []struct {
		name, mountinfo, self string
		dirs                  []string
		writes                []cgroupWrite
	}{{
		name: "v1 with an empty unified hierarchy",
		mountinfo: `32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
33 31 0:30 / /sys/fs/cgroup/cpuacct rw,relatime - cgroup cgroup rw,cpuacct
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw`,
		self: "4:memory:/process_api/6bb6\n2:cpuacct:/\n1:cpu:/\n0::/\n",
		dirs: []string{"/sys/fs/cgroup/memory/process_api/6bb6/z", "/sys/fs/cgroup/cpu/z"},
		writes: []cgroupWrite{
			{"/sys/fs/cgroup/memory/process_api/6bb6/z/memory.memsw.limit_in_bytes", "-1", true},
			{"/sys/fs/cgroup/memory/process_api/6bb6/z/memory.limit_in_bytes", "268435456", false},
			{"/sys/fs/cgroup/memory/process_api/6bb6/z/memory.memsw.limit_in_bytes", "536870912", true},
			{"/sys/fs/cgroup/cpu/z/cpu.cfs_period_us", "100000", false},
			{"/sys/fs/cgroup/cpu/z/cpu.cfs_quota_us", "150000", false},
		},
	}, {
		name: "v1 with cpu and cpuacct together, mounted from a sub-tree",
		mountinfo: `40 31 0:35 /lxc/c1 /sys/fs/cgroup/cpu,cpuacct rw - cgroup cgroup rw,cpu,cpuacct
41 31 0:36 /lxc/c1 /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory`,
		self: "5:memory:/lxc/c1/app\n3:cpu,cpuacct:/lxc/c1\n",
		dirs: []string{"/sys/fs/cgroup/memory/app/z", "/sys/fs/cgroup/cpu,cpuacct/z"},
	}, {
		name:      "v2",
		mountinfo: `29 23 0:26 / /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw,nsdelegate`,
		self:      "0::/user.slice/sim.scope\n",
		dirs:      []string{"/sys/fs/cgroup/user.slice/sim.scope/z"},
		writes: []cgroupWrite{
			{"/sys/fs/cgroup/user.slice/sim.scope/z/memory.max", "268435456", false},
			{"/sys/fs/cgroup/user.slice/sim.scope/z/memory.swap.max", "268435456", true},
			{"/sys/fs/cgroup/user.slice/sim.scope/z/cpu.max", "150000 100000", false},
		},
	}, {
		name:      "v2 at a path with a space",
		mountinfo: `29 23 0:26 / /mnt/cg\040two rw - cgroup2 cgroup2 rw`,
		self:      "0::/a\n",
		dirs:      []string{"/mnt/cg two/a/z"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			l, err := findCgroupLayout(tc.mountinfo, tc.self)
			if err != nil {
				t.Fatal(err)
			}
			if got := l.dirs("z"); !reflect.DeepEqual(got, tc.dirs) {
				t.Errorf("dirs %q, want %q", got, tc.dirs)
			}
			if got := l.capWrites("z", caps); tc.writes != nil && !reflect.DeepEqual(got, tc.writes) {
				t.Errorf("writes\n%v\nwant\n%v", got, tc.writes)
			}
		})
	}
	if _, err := findCgroupLayout("", "0::/\n"); !errors.Is(err, errCgroupsUnavailable) {
		t.Errorf("no cgroup mounted: %v, want it unavailable", err)
	}
}

// A cap the configuration leaves out is lifted, and the RAM limit is the
// lower of physical and swap (zone.max-swap counts RAM too).
func TestZoneCapsWithoutAPhysicalCapOrSwap(t *testing.T) {
	l := cgroupLayout{memory: "/m", cpu: "/c"}
	got := l.capWrites("z", zoneCaps{swap: 64 << 20})
	want := []cgroupWrite{
		{"/m/z/memory.memsw.limit_in_bytes", "-1", true},
		{"/m/z/memory.limit_in_bytes", "67108864", false},
		{"/m/z/memory.memsw.limit_in_bytes", "67108864", true},
		{"/c/z/cpu.cfs_period_us", "100000", false},
		{"/c/z/cpu.cfs_quota_us", "-1", false},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("swap alone:\n%v\nwant\n%v", got, want)
	}
	u := cgroupLayout{unified: true, memory: "/u", cpu: "/u"}
	got = u.capWrites("z", zoneCaps{physical: 64 << 20})
	want = []cgroupWrite{
		{"/u/z/memory.max", "67108864", false},
		{"/u/z/memory.swap.max", "max", true},
		{"/u/z/cpu.max", "max 100000", false},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("physical alone, v2:\n%v\nwant\n%v", got, want)
	}
}
