package illumos

import (
	"context"
	"fmt"
	"strconv"
	"strings"
)

// The host-facts commands.
const (
	psrinfoPath  = "/usr/sbin/psrinfo"
	prtconfPath  = "/usr/sbin/prtconf"
	hostnamePath = "/usr/bin/hostname"
	unamePath    = "/usr/bin/uname"
)

// HostFacts is what a node reports about its capacity when it registers.
type HostFacts struct {
	Hostname    string
	CPUs        int    // processors that can run threads (on-line or no-intr)
	MemoryBytes uint64 // physical memory
	Pools       []Pool
	// DatasetAvail is the space available to the zones' parent dataset
	// (zfs get available), when one was asked for.
	DatasetAvail uint64
	Uname        Uname
}

// Uname is `uname -a`.
type Uname struct {
	Sysname  string // SunOS
	Nodename string
	Release  string // 5.11
	Version  string // omnios-r151050-...
	Machine  string // i86pc
	Raw      string
}

// Facts gathers the host's facts; dataset, if not empty, is the dataset
// whose available space to report (the parent of the zones' datasets).
func (h Host) Facts(ctx context.Context, dataset string) (HostFacts, error) {
	var f HostFacts
	res, err := run(ctx, h.Runner, "hostname", "", Cmd{Path: hostnamePath})
	if err != nil {
		return f, err
	}
	f.Hostname = strings.TrimSpace(string(res.Stdout))

	if res, err = run(ctx, h.Runner, "psrinfo", "", Cmd{Path: psrinfoPath}); err != nil {
		return f, err
	}
	if f.CPUs, err = ParsePsrinfo(string(res.Stdout)); err != nil {
		return f, parseError("psrinfo", "", err)
	}

	if res, err = run(ctx, h.Runner, "prtconf", "", Cmd{Path: prtconfPath}); err != nil {
		return f, err
	}
	if f.MemoryBytes, err = ParsePrtconfMemory(string(res.Stdout)); err != nil {
		return f, parseError("prtconf", "", err)
	}

	if f.Pools, err = h.Zpool().List(ctx); err != nil {
		return f, err
	}
	if dataset != "" {
		v, err := h.ZFS().Get(ctx, dataset, "available")
		if err != nil {
			return f, err
		}
		if f.DatasetAvail, err = parseZFSNumber(v); err != nil {
			return f, parseError("zfs get", dataset, err)
		}
	}

	if res, err = run(ctx, h.Runner, "uname", "", Cmd{Path: unamePath, Args: []string{"-a"}}); err != nil {
		return f, err
	}
	f.Uname = ParseUname(string(res.Stdout))
	return f, nil
}

// ParsePsrinfo counts the processors of `psrinfo` output
// ("0	on-line   since 01/15/2024 10:00:00") that can run threads.
func ParsePsrinfo(out string) (int, error) {
	n, seen := 0, 0
	for _, line := range nonEmptyLines(out) {
		f := strings.Fields(line)
		if _, err := strconv.Atoi(f[0]); err != nil {
			return 0, fmt.Errorf("not a processor line: %q", line)
		}
		seen++
		if len(f) < 2 || f[1] == "on-line" || f[1] == "no-intr" {
			n++
		}
	}
	if seen == 0 {
		return 0, fmt.Errorf("no processors listed")
	}
	return n, nil
}

// ParsePrtconfMemory finds "Memory size: N Megabytes" in `prtconf` output.
func ParsePrtconfMemory(out string) (uint64, error) {
	for _, line := range strings.Split(out, "\n") {
		rest, ok := strings.CutPrefix(strings.TrimSpace(line), "Memory size:")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) != 2 {
			return 0, fmt.Errorf("bad memory line %q", line)
		}
		n, err := strconv.ParseUint(f[0], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("bad memory size %q", f[0])
		}
		var shift uint
		switch strings.ToLower(f[1]) {
		case "kilobytes":
			shift = 10
		case "megabytes":
			shift = 20
		case "gigabytes":
			shift = 30
		case "terabytes":
			shift = 40
		default:
			return 0, fmt.Errorf("unknown memory unit %q", f[1])
		}
		if n > (^uint64(0))>>shift {
			return 0, fmt.Errorf("memory size %q too large", rest)
		}
		return n << shift, nil
	}
	return 0, fmt.Errorf("no \"Memory size:\" line")
}

// ParseUname splits `uname -a` output into its first five fields.
func ParseUname(out string) Uname {
	raw := strings.TrimSpace(out)
	u := Uname{Raw: raw}
	f := strings.Fields(raw)
	for i, dst := range []*string{&u.Sysname, &u.Nodename, &u.Release, &u.Version, &u.Machine} {
		if i < len(f) {
			*dst = f[i]
		}
	}
	return u
}
