package sim_test

import (
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Cost of the simulator on a crowded node. Run with
//
//	go test -run '^$' -bench . ./internal/sim/
//
// BenchmarkCommands times the commands a node runs all day (probes,
// service checks, the agent's listings) with 1 and with 100 running zones,
// each with one service and one dataset, and reports the CPU they take (user+sys of the
// command and what it ran, per call). A per-zone command must cost the
// same with 1 or 100 zones; the listings read every zone and grow.
//
// BenchmarkIdleSupervisor boots 20 zones with one idle service each and
// reports what their supervisors burn over 20 s (-args -idle-window=D to
// change it): percent of a core per zone from utime+stime, and CPU
// microseconds per second per zone from schedstat; and their memory:
// resident, proportional (the binary's pages shared between the
// supervisors split among them) and private.

// crowdedHost boots n zones z000..z(n-1), each running one service and
// with a dataset of its own under tank/zones, as the agent makes them.
func crowdedHost(b *testing.B, n int) *simHost {
	b.Helper()
	h := newHost(b)
	for i := 0; i < n; i++ {
		zone := fmt.Sprintf("z%03d", i)
		h.must("zfs", "create", "-p", "tank/zones/"+zone)
		h.zoneSetup(zone, "running")
		r := h.runIn(manifest("app", "exec sleep 100000", "", true), "zlogin", zone, "svccfg", "import", "/dev/stdin")
		if r.code != 0 {
			b.Fatalf("import: %v", r)
		}
	}
	for i := 0; i < n; i++ {
		zone := fmt.Sprintf("z%03d", i)
		waitFor(b, 30*time.Second, zone+" service online", func() bool {
			st, pid, _ := h.service(zone, "svc:/site/app:default")
			return st == "online" && pid > 0
		})
	}
	return h
}

// childCPU is the user+sys time of every child this process has reaped.
func childCPU() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_CHILDREN, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func BenchmarkCommands(b *testing.B) {
	inZone := []string{"ILLUMOS_SIM_ZONE=z000"}
	cmds := []struct {
		name string
		env  []string
		argv []string
	}{
		{"zlogin-true", nil, []string{"zlogin", "z000", "true"}},
		{"svcs-z", nil, []string{"svcs", "-z", "z000", "-H"}},
		{"svcs-in-zone", inZone, []string{"svcs", "-H", "app"}},
		{"svcadm-enable", inZone, []string{"svcadm", "enable", "app"}},
		{"zoneadm-list-z", nil, []string{"zoneadm", "-z", "z000", "list", "-p"}},
		{"zoneadm-list-cp", nil, []string{"zoneadm", "list", "-cp"}},
		{"svcs-Z", nil, []string{"svcs", "-Z", "-H"}},
		// The agent's heartbeat (every 10 s) and inventory (every 30 s).
		{"zfs-get-space", nil, []string{"zfs", "get", "-H", "-p", "-o", "name,property,value", "used,available", "tank", "tank/zones"}},
		{"zfs-list-zones", nil, []string{"zfs", "list", "-H", "-p", "-o", "name,type,used,avail,refer,mountpoint,quota,reservation", "-d", "1", "-t", "filesystem", "tank/zones"}},
	}
	for _, n := range []int{1, 100} {
		b.Run(fmt.Sprintf("zones=%d", n), func(b *testing.B) {
			h := crowdedHost(b, n)
			for _, c := range cmds {
				b.Run(c.name, func(b *testing.B) {
					h.t = b
					cpu := childCPU()
					b.ResetTimer()
					for i := 0; i < b.N; i++ {
						if r := h.runEnv("", c.env, c.argv[0], c.argv[1:]...); r.code != 0 {
							b.Fatalf("%v: %v", c.argv, r)
						}
					}
					b.StopTimer()
					b.ReportMetric(float64(childCPU()-cpu)/float64(b.N)/1e3, "cpu-µs/op")
				})
			}
		})
	}
}

// procCPU is a process's user+sys time in clock ticks.
func procCPU(pid int) (int64, bool) {
	return statTicks(pid, 11, 12) // utime stime
}

// statTicks sums the fields of /proc/PID/stat at the given indexes
// counted after the command (state is 0, utime 11).
func statTicks(pid int, fields ...int) (int64, bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, false
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	var ticks int64
	for _, i := range fields {
		n, _ := strconv.ParseInt(f[i], 10, 64)
		ticks += n
	}
	return ticks, true
}

// procRunNS is the time a process's threads have run on a CPU, in
// nanoseconds (schedstat: finer than the clock ticks of stat).
func procRunNS(pid int) int64 {
	tasks, _ := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	var total int64
	for _, t := range tasks {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/schedstat", pid, t.Name()))
		if err != nil {
			continue
		}
		if f := strings.Fields(string(b)); len(f) > 0 {
			n, _ := strconv.ParseInt(f[0], 10, 64)
			total += n
		}
	}
	return total
}

// procMem reads fields of /proc/PID/smaps_rollup, in KiB.
func procMem(pid int, fields ...string) []int64 {
	out := make([]int64, len(fields))
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/smaps_rollup", pid))
	if err != nil {
		return out
	}
	for _, l := range strings.Split(string(b), "\n") {
		for i, f := range fields {
			if v, ok := strings.CutPrefix(l, f+":"); ok {
				out[i], _ = strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			}
		}
	}
	return out
}

var idleWindow = flag.Duration("idle-window", 20*time.Second,
	"how long BenchmarkIdleSupervisor watches the supervisors")

func BenchmarkIdleSupervisor(b *testing.B) {
	const zones = 20
	window := *idleWindow
	const ticksPerSecond = 100 // USER_HZ
	h := crowdedHost(b, zones)
	var pids []int
	for _, z := range h.state().Zones {
		if z.SupervisorPID > 0 {
			pids = append(pids, z.SupervisorPID)
		}
	}
	if len(pids) != zones {
		b.Fatalf("supervisors %v", pids)
	}
	time.Sleep(2 * time.Second) // let the boots settle
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		var before, after, runBefore, runAfter int64
		for _, p := range pids {
			t, _ := procCPU(p)
			before += t
			runBefore += procRunNS(p)
		}
		time.Sleep(window)
		mem := make([]int64, 3)
		for _, p := range pids {
			t, ok := procCPU(p)
			if !ok {
				b.Fatalf("supervisor %d died", p)
			}
			after += t
			runAfter += procRunNS(p)
			for j, v := range procMem(p, "Rss", "Pss", "Private_Dirty") {
				mem[j] += v
			}
		}
		cpu := float64(after-before) / ticksPerSecond
		b.ReportMetric(100*cpu/window.Seconds()/zones, "%core/zone")
		b.ReportMetric(float64(runAfter-runBefore)/1e3/window.Seconds()/zones, "cpu-µs/s/zone")
		b.ReportMetric(float64(mem[0])/zones, "rss-KiB/zone")
		b.ReportMetric(float64(mem[1])/zones, "pss-KiB/zone")
		b.ReportMetric(float64(mem[2])/zones, "private-KiB/zone")
	}
}

// BenchmarkIsolatedZlogin is what a probe costs in isolation mode:
// `zlogin pod true` on an isolated node, CPU per call of zlogin, of what
// it ran and of the zone's init (where the command may be reaped), and
// the init's memory after the calls.
func BenchmarkIsolatedZlogin(b *testing.B) {
	const network = 209
	fab := isolatedFabric(b, network)
	h, _ := isolatedNode(b, fab, network, 1, "exec sleep 100000")
	init := 0
	for _, z := range h.state().Zones {
		if z.Name == "pod" {
			init = z.InitPID
		}
	}
	if init <= 0 {
		b.Fatal("the zone has no init")
	}
	cpu, initCPU := childCPU(), procTreeCPU(init)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if r := h.run("zlogin", "pod", "true"); r.code != 0 {
			b.Fatalf("zlogin: %v", r)
		}
	}
	b.StopTimer()
	used := childCPU() - cpu + procTreeCPU(init) - initCPU
	b.ReportMetric(float64(used)/float64(b.N)/1e3, "cpu-µs/op")
	mem := procMem(init, "Rss", "Pss", "Private_Dirty")
	b.ReportMetric(float64(mem[0]), "init-rss-KiB")
	b.ReportMetric(float64(mem[1]), "init-pss-KiB")
	b.ReportMetric(float64(mem[2]), "init-private-KiB")
}

// procTreeCPU is a process's user+sys time with that of the children it
// has reaped.
func procTreeCPU(pid int) time.Duration {
	ticks, _ := statTicks(pid, 11, 12, 13, 14)          // utime stime cutime cstime
	return time.Duration(ticks) * 10 * time.Millisecond // USER_HZ is 100
}

// BenchmarkHaltAmongProcesses times zoneadm halt of a zone running one
// service, on a machine with 0 and with 3,000 other processes: a halt
// must cost the same whatever else runs (it reaps the zone's own
// processes, it does not read the whole process table).
func BenchmarkHaltAmongProcesses(b *testing.B) {
	for _, others := range []int{0, 3000} {
		b.Run(fmt.Sprintf("others=%d", others), func(b *testing.B) {
			var procs []*os.Process
			b.Cleanup(func() {
				for _, p := range procs {
					p.Kill()
					p.Wait()
				}
			})
			for range others {
				p, err := os.StartProcess("/bin/sleep", []string{"sleep", "100000"}, &os.ProcAttr{})
				if err != nil {
					b.Skipf("start the other processes: %v", err)
				}
				procs = append(procs, p)
			}
			h := newHost(b)
			h.zoneSetup("z", "installed")
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				h.must("zoneadm", "-z", "z", "boot")
				if r := h.runIn(manifest("app", "exec sleep 100000", "", true), "zlogin", "z", "svccfg", "import", "/dev/stdin"); r.code != 0 {
					b.Fatalf("import: %v", r)
				}
				waitFor(b, 30*time.Second, "service online", func() bool {
					st, pid, _ := h.service("z", "svc:/site/app:default")
					return st == "online" && pid > 0
				})
				b.StartTimer()
				h.must("zoneadm", "-z", "z", "halt")
			}
		})
	}
}
