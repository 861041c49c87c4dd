package sim

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/zonewright/zonewright/internal/cgroups"
)

// A zone's capped-memory and capped-cpu are held by a Linux cgroup of its
// own in isolation mode, under the machine's root: the zone's init, its
// services and so every command zlogin has the init start are in it.
//
// illumos and Linux part ways past a cap: illumos pages a zone over its
// physical cap out (rcapd, or zoneadmd's memory capper) and fails the
// allocations past zone.max-swap (ENOMEM), while Linux kills a process of
// the cgroup (its OOM killer) once it can reclaim nothing more. Either
// way the zone does not get the memory; a killed process is the harsher
// answer, never the kinder. The memory+swap limit is zone.max-swap: on
// illumos it bounds all the zone reserves, RAM and swap. A cpu-cap
// throttles on both: CFS's quota is ncpus periods a period.
//
// The cgroup is named after the zone's UUID, which no zone of another
// host shares and a rename keeps: a boot after a crash finds its cgroup
// again rather than making a second one. Each is made under the
// cgroup of the process that boots the zone (one per controller with
// cgroup v1, one with v2), recorded in the zone's state, and removed, with
// anything left in it, when the zone leaves the kernel.

// zoneCgroupPrefix begins the name of a zone's cgroup.
const zoneCgroupPrefix = "illumos-sim-zone-"

// cfsPeriod is the CFS period a cpu-cap is counted over, in microseconds
// (the kernel's default).
const cfsPeriod = 100000

// errCgroupsUnavailable wraps why this machine cannot hold zones to their
// caps: the zone then boots without, as before the simulator had them.
var errCgroupsUnavailable = errors.New("memory and CPU caps not enforced")

// zoneCaps is what a zone's configuration caps, 0 where it sets nothing:
// bytes of RAM (capped-memory physical), bytes of RAM and swap together
// (swap: zone.max-swap), hundredths of a CPU (capped-cpu: zone.cpu-cap).
type zoneCaps struct {
	physical, swap, cpuCap uint64
}

// capsOf reads a zone's caps from its configuration.
func capsOf(c *ZoneConfig) (zoneCaps, error) {
	if c == nil {
		return zoneCaps{}, nil
	}
	caps := zoneCaps{physical: c.CappedMemory}
	for _, r := range []struct {
		rctl string
		to   *uint64
	}{{"zone.max-swap", &caps.swap}, {"zone.cpu-cap", &caps.cpuCap}} {
		v, ok := c.rctlLimit(r.rctl)
		if !ok {
			continue
		}
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return zoneCaps{}, fmt.Errorf("%s %q: %w", r.rctl, v, err)
		}
		*r.to = n
	}
	return caps, nil
}

func (c zoneCaps) none() bool { return c == zoneCaps{} }

// memory is the zone's RAM limit: its physical cap, and no more than its
// swap cap, which counts RAM too. 0: none.
func (c zoneCaps) memory() uint64 {
	switch {
	case c.physical == 0:
		return c.swap
	case c.swap == 0:
		return c.physical
	}
	return min(c.physical, c.swap)
}

// zoneCgroupDirs are the zone's cgroup directories named name: one per v1
// hierarchy, one in v2.
func zoneCgroupDirs(l cgroups.Layout, name string) []string {
	if l.Memory == l.CPU {
		return []string{filepath.Join(l.Memory, name)}
	}
	return []string{filepath.Join(l.Memory, name), filepath.Join(l.CPU, name)}
}

// cgroupWrite is one value written to one of a cgroup's files; optional
// for a file a kernel may lack (swap accounting off).
type cgroupWrite struct {
	file, value string
	optional    bool
}

// capWrites are the writes that give the cgroups named name the zone's
// caps, in order. They set every limit, so that a cgroup found again
// loses the caps of its last boot; a v1 cgroup's memory+swap limit may
// never be below its memory limit, so it is lifted first.
func capWrites(l cgroups.Layout, name string, c zoneCaps) []cgroupWrite {
	mem, cpu := filepath.Join(l.Memory, name), filepath.Join(l.CPU, name)
	if l.Unified {
		swap := "max" // memory.swap.max is swap alone, beyond memory.max
		if c.swap != 0 {
			swap = strconv.FormatUint(c.swap-c.memory(), 10)
		}
		quota := "max"
		if c.cpuCap != 0 {
			quota = strconv.FormatUint(c.cpuCap*cfsPeriod/100, 10)
		}
		return []cgroupWrite{
			{file: filepath.Join(mem, "memory.max"), value: limitOrMax(c.memory(), "max")},
			{file: filepath.Join(mem, "memory.swap.max"), value: swap, optional: true},
			{file: filepath.Join(cpu, "cpu.max"), value: quota + " " + strconv.Itoa(cfsPeriod)},
		}
	}
	quota := "-1"
	if c.cpuCap != 0 {
		quota = strconv.FormatUint(c.cpuCap*cfsPeriod/100, 10)
	}
	return []cgroupWrite{
		{file: filepath.Join(mem, "memory.memsw.limit_in_bytes"), value: "-1", optional: true},
		{file: filepath.Join(mem, "memory.limit_in_bytes"), value: limitOrMax(c.memory(), "-1")},
		{file: filepath.Join(mem, "memory.memsw.limit_in_bytes"), value: limitOrMax(c.swap, "-1"), optional: true},
		{file: filepath.Join(cpu, "cpu.cfs_period_us"), value: strconv.Itoa(cfsPeriod)},
		{file: filepath.Join(cpu, "cpu.cfs_quota_us"), value: quota},
	}
}

func limitOrMax(n uint64, unlimited string) string {
	if n == 0 {
		return unlimited
	}
	return strconv.FormatUint(n, 10)
}

// zoneCgroup is a booting zone's cgroup, as its supervisor holds it.
type zoneCgroup struct {
	unified bool
	dirs    []string
	// fd is the v2 cgroup's directory, which the spawner's forks are
	// born into (CLONE_INTO_CGROUP); -1 in v1.
	fd int
}

// makeZoneCgroup makes z's cgroup (or finds the one a crashed boot left)
// and gives it the zone's caps. nil for a zone without caps; an error
// wrapping errCgroupsUnavailable where the machine cannot hold them.
// It reads the process's own /proc: a supervisor calls it before its
// zone's /proc covers the host's.
func makeZoneCgroup(z *Zone) (*zoneCgroup, error) {
	caps, err := capsOf(z.Config)
	if err != nil || caps.none() {
		return nil, err
	}
	if !machineRoot() {
		return nil, fmt.Errorf("%w: only the machine's root makes cgroups", errCgroupsUnavailable)
	}
	if z.UUID == "" { // a zone of an older simulator: its name would be every such zone's
		return nil, fmt.Errorf("%w: the zone has no UUID", errCgroupsUnavailable)
	}
	l, err := cgroups.Own()
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errCgroupsUnavailable, err)
	}
	name := zoneCgroupPrefix + z.UUID
	cg := &zoneCgroup{unified: l.Unified, dirs: zoneCgroupDirs(l, name), fd: -1}
	if l.Unified {
		// v2 gives a child a controller only through its parent's
		// subtree_control, which a cgroup holding processes cannot set.
		for _, ctl := range []string{"+memory", "+cpu"} {
			if err := os.WriteFile(filepath.Join(l.Memory, "cgroup.subtree_control"), []byte(ctl), 0); err != nil {
				return nil, fmt.Errorf("%w: enable %s under %s: %v", errCgroupsUnavailable, ctl[1:], l.Memory, err)
			}
		}
	}
	for _, d := range cg.dirs {
		if err := os.Mkdir(d, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
			if errors.Is(err, fs.ErrPermission) || errors.Is(err, syscall.EROFS) {
				err = fmt.Errorf("%w: %v", errCgroupsUnavailable, err)
			}
			return nil, err
		}
	}
	for _, w := range capWrites(l, name, caps) {
		err := os.WriteFile(w.file, []byte(w.value), 0)
		if err != nil && !(w.optional && errors.Is(err, fs.ErrNotExist)) {
			removeCgroups(cg.dirs)
			return nil, fmt.Errorf("cap the zone: %s: %w", w.file, err)
		}
	}
	return cg, nil
}

// enter puts what the calling thread forks from now on into the cgroup:
// in v1 the thread itself moves (v1 moves a single thread, so the rest
// of the supervisor stays out); v2 moves whole processes only, so the
// forks are born into it instead (intoCgroup). Called on the spawner's
// locked thread.
func (cg *zoneCgroup) enter() error {
	if cg.unified {
		fd, err := unix.Open(cg.dirs[0], unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("open the zone's cgroup: %w", err)
		}
		cg.fd = fd
		return nil
	}
	tid := []byte(strconv.Itoa(unix.Gettid()))
	for _, d := range cg.dirs {
		if err := os.WriteFile(filepath.Join(d, "tasks"), tid, 0); err != nil {
			return fmt.Errorf("enter the zone's cgroup: %w", err)
		}
	}
	return nil
}

// intoCgroup has a fork of attr born into the cgroup, in v2; cg may be
// nil.
func (cg *zoneCgroup) intoCgroup(attr *syscall.SysProcAttr) {
	if cg != nil && cg.fd >= 0 {
		attr.UseCgroupFD, attr.CgroupFD = true, cg.fd
	}
}

// removeCgroups kills whatever is still in each cgroup (a zone's halt
// has killed its processes; one may still be exiting) and removes it,
// waiting a few seconds for the kernel to let go. It says what it could
// not remove.
func removeCgroups(dirs []string) error {
	deadline := time.Now().Add(5 * time.Second)
	var left []string
	for _, d := range dirs {
		for {
			err := unix.Rmdir(d)
			if err == nil || errors.Is(err, unix.ENOENT) {
				break
			}
			if !errors.Is(err, unix.EBUSY) || time.Now().After(deadline) {
				left = append(left, fmt.Sprintf("%s: %v", d, err))
				break
			}
			killCgroup(d)
			time.Sleep(10 * time.Millisecond)
		}
	}
	if len(left) > 0 {
		return fmt.Errorf("remove the zone's cgroups: %s", strings.Join(left, "; "))
	}
	return nil
}

// killCgroup SIGKILLs every process in the cgroup.
func killCgroup(dir string) {
	b, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
	if err != nil {
		return
	}
	for _, f := range strings.Fields(string(b)) {
		if pid, err := strconv.Atoi(f); err == nil && pid > 0 && pid != os.Getpid() {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

// releaseCgroups removes the cgroups of a zone leaving the kernel; those
// that outlive the attempt stay recorded, for uninstall or the next boot.
func (h *host) releaseCgroups(z *Zone) {
	if len(z.Cgroups) == 0 {
		return
	}
	if err := removeCgroups(z.Cgroups); err != nil {
		h.zoneLog(z.Name, err)
		return
	}
	z.Cgroups = nil
}

// zoneLog appends a line to the zone's supervisor log, for what a command
// outside the supervisor could not do for the zone.
func (h *host) zoneLog(zone string, err error) {
	f, ferr := os.OpenFile(filepath.Join(h.runDir(zone), "zoneadmd.log"), os.O_WRONLY|os.O_APPEND, 0)
	if ferr != nil {
		return
	}
	defer f.Close()
	fmt.Fprintf(f, "%s %v\n", time.Now().UTC().Format(time.RFC3339Nano), err)
}
