package sim

import (
	"reflect"
	"testing"

	"github.com/zonewright/zonewright/internal/cgroups"
)

// A zone's cgroup is made under the process's own cgroup of each
// controller (cgroups.Find says where they are): one per v1 hierarchy,
// one in v2; and its caps go to each version's own files.
func TestZoneCgroupsAreMadeUnderTheProcesssOwnCgroups(t *testing.T) {
	caps := zoneCaps{physical: 256 << 20, swap: 512 << 20, cpuCap: 150}
	for _, tc := range []struct {
		name   string
		own    cgroups.Layout
		dirs   []string
		writes []cgroupWrite
	}{{
		name: "v1",
		own:  cgroups.Layout{Memory: "/sys/fs/cgroup/memory/process_api/6bb6", CPU: "/sys/fs/cgroup/cpu"},
		dirs: []string{"/sys/fs/cgroup/memory/process_api/6bb6/z", "/sys/fs/cgroup/cpu/z"},
		writes: []cgroupWrite{
			{"/sys/fs/cgroup/memory/process_api/6bb6/z/memory.memsw.limit_in_bytes", "-1", true},
			{"/sys/fs/cgroup/memory/process_api/6bb6/z/memory.limit_in_bytes", "268435456", false},
			{"/sys/fs/cgroup/memory/process_api/6bb6/z/memory.memsw.limit_in_bytes", "536870912", true},
			{"/sys/fs/cgroup/cpu/z/cpu.cfs_period_us", "100000", false},
			{"/sys/fs/cgroup/cpu/z/cpu.cfs_quota_us", "150000", false},
		},
	}, {
		name: "v2",
		own:  cgroups.Layout{Unified: true, Memory: "/sys/fs/cgroup/user.slice/sim.scope", CPU: "/sys/fs/cgroup/user.slice/sim.scope"},
		dirs: []string{"/sys/fs/cgroup/user.slice/sim.scope/z"},
		writes: []cgroupWrite{
			{"/sys/fs/cgroup/user.slice/sim.scope/z/memory.max", "268435456", false},
			{"/sys/fs/cgroup/user.slice/sim.scope/z/memory.swap.max", "268435456", true},
			{"/sys/fs/cgroup/user.slice/sim.scope/z/cpu.max", "150000 100000", false},
		},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			if got := zoneCgroupDirs(tc.own, "z"); !reflect.DeepEqual(got, tc.dirs) {
				t.Errorf("dirs %q, want %q", got, tc.dirs)
			}
			if got := capWrites(tc.own, "z", caps); !reflect.DeepEqual(got, tc.writes) {
				t.Errorf("writes\n%v\nwant\n%v", got, tc.writes)
			}
		})
	}
}

// A cap the configuration leaves out is lifted, and the RAM limit is the
// lower of physical and swap (zone.max-swap counts RAM too).
func TestZoneCapsWithoutAPhysicalCapOrSwap(t *testing.T) {
	got := capWrites(cgroups.Layout{Memory: "/m", CPU: "/c"}, "z", zoneCaps{swap: 64 << 20})
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
	got = capWrites(cgroups.Layout{Unified: true, Memory: "/u", CPU: "/u"}, "z", zoneCaps{physical: 64 << 20})
	want = []cgroupWrite{
		{"/u/z/memory.max", "67108864", false},
		{"/u/z/memory.swap.max", "max", true},
		{"/u/z/cpu.max", "max 100000", false},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("physical alone, v2:\n%v\nwant\n%v", got, want)
	}
}
