package main

import "testing"

// The cpu controller's cgroup is found in a v1 hierarchy, alone or
// joined with cpuacct; a v2 line (0::) is not it.
func TestCPUCgroupV1(t *testing.T) {
	for _, tc := range []struct {
		self, want string
		ok         bool
	}{
		{"2:cpuacct:/\n1:cpu:/a/b\n0::/\n", "/a/b", true},
		{"4:cpu,cpuacct:/user.slice\n", "/user.slice", true},
		{"3:cpuset:/\n0::/init.scope\n", "", false},
	} {
		got, ok := cpuCgroupV1(tc.self)
		if got != tc.want || ok != tc.ok {
			t.Errorf("cpuCgroupV1(%q) = %q, %v; want %q, %v", tc.self, got, ok, tc.want, tc.ok)
		}
	}
}
