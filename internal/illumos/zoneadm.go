package illumos

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/zonewright/zonewright/internal/illumos/names"
)

const zoneadmPath = "/usr/sbin/zoneadm"

// installTimeout bounds install, clone and uninstall when the context has no
// deadline: brand installers unpack whole images.
const installTimeout = 30 * time.Minute

// ZoneState is a state of the zone state machine (spec 3).
type ZoneState string

const (
	ZoneConfigured   ZoneState = "configured"
	ZoneIncomplete   ZoneState = "incomplete"
	ZoneInstalled    ZoneState = "installed"
	ZoneReady        ZoneState = "ready"
	ZoneMounted      ZoneState = "mounted"
	ZoneRunning      ZoneState = "running"
	ZoneShuttingDown ZoneState = "shutting_down"
	ZoneDown         ZoneState = "down"
)

var zoneStates = map[ZoneState]bool{
	ZoneConfigured: true, ZoneIncomplete: true, ZoneInstalled: true, ZoneReady: true,
	ZoneMounted: true, ZoneRunning: true, ZoneShuttingDown: true, ZoneDown: true,
}

// Transitional reports states a zone passes through on its own (install or
// uninstall in progress, halt in progress): wait and look again.
func (s ZoneState) Transitional() bool {
	return s == ZoneIncomplete || s == ZoneShuttingDown || s == ZoneDown
}

// IPType is a zone's IP type.
type IPType string

const (
	IPExclusive IPType = "exclusive"
	IPShared    IPType = "shared"
)

// Zone is one line of `zoneadm list -p`.
type Zone struct {
	ID     int // kernel zone id; -1 when the zone is not in the kernel
	Name   string
	State  ZoneState
	Path   string
	UUID   string
	Brand  string
	IPType IPType
}

// Zoneadm administers zones on a host.
type Zoneadm struct{ Runner Executor }

// List returns every zone of the host in any state, the global zone
// included (`zoneadm list -cp`).
func (z Zoneadm) List(ctx context.Context) ([]Zone, error) {
	const op = "zoneadm list"
	res, err := run(ctx, z.Runner, op, "", Cmd{Path: zoneadmPath, Args: []string{"list", "-cp"}})
	if err != nil {
		return nil, err
	}
	zones, err := ParseZoneadmList(string(res.Stdout))
	if err != nil {
		return nil, parseError(op, "", err)
	}
	return zones, nil
}

// Get returns one zone in any state (`zoneadm -z Z list -p`); ErrNotFound
// when it is not configured.
func (z Zoneadm) Get(ctx context.Context, name string) (Zone, error) {
	const op = "zoneadm list"
	if err := checkZoneName(op, name); err != nil {
		return Zone{}, err
	}
	res, err := run(ctx, z.Runner, op, name, Cmd{Path: zoneadmPath, Args: []string{"-z", name, "list", "-p"}})
	if err != nil {
		return Zone{}, err
	}
	zones, err := ParseZoneadmList(string(res.Stdout))
	if err != nil {
		return Zone{}, parseError(op, name, err)
	}
	for _, zn := range zones {
		if zn.Name == name {
			return zn, nil
		}
	}
	return Zone{}, parseError(op, name, fmt.Errorf("zone %q missing from its own listing", name))
}

// InstallOptions are the brand arguments of `zoneadm install`.
type InstallOptions struct {
	// NoDataset passes -x nodataset: do not create a dataset for the zonepath.
	NoDataset bool
	// Source (lx) passes -s: an absolute path to a ZFS send stream, or a
	// dataset or snapshot to clone.
	Source string
	// Tarball (lx) passes -t: an absolute path to a root file system tarball.
	Tarball string
	// Args are further brand arguments, passed as they are (for example
	// image paths of the omicron1 brand).
	Args []string
}

func (o InstallOptions) argv() []string {
	var a []string
	if o.NoDataset {
		a = append(a, "-x", "nodataset")
	}
	if o.Source != "" {
		a = append(a, "-s", o.Source)
	}
	if o.Tarball != "" {
		a = append(a, "-t", o.Tarball)
	}
	return append(a, o.Args...)
}

// Install installs a configured zone. bhyve zones take no options (their
// disk is a zvol made beforehand). ErrAlreadyExists when it is installed.
func (z Zoneadm) Install(ctx context.Context, name string, opts InstallOptions) error {
	return z.do(ctx, "zoneadm install", name, installTimeout, append([]string{"install"}, opts.argv()...)...)
}

// Clone installs a configured zone as a copy of the installed zone source.
func (z Zoneadm) Clone(ctx context.Context, name, source string) error {
	const op = "zoneadm clone"
	if err := checkZoneName(op, source); err != nil {
		return err
	}
	return z.do(ctx, op, name, installTimeout, "clone", source)
}

// Boot boots an installed or ready zone. Booting a running zone succeeds
// (zoneadm prints "zone is already booted" and exits 0).
func (z Zoneadm) Boot(ctx context.Context, name string) error {
	return z.do(ctx, "zoneadm boot", name, 0, "boot")
}

// Shutdown stops a running zone gracefully (its services stop in order).
// ErrWrongState when it is not running.
func (z Zoneadm) Shutdown(ctx context.Context, name string) error {
	return z.do(ctx, "zoneadm shutdown", name, 0, "shutdown")
}

// Halt tears a zone down at once. Halting an installed zone succeeds.
func (z Zoneadm) Halt(ctx context.Context, name string) error {
	return z.do(ctx, "zoneadm halt", name, 0, "halt")
}

// Ready sets up a zone's virtual platform without starting processes.
func (z Zoneadm) Ready(ctx context.Context, name string) error {
	return z.do(ctx, "zoneadm ready", name, 0, "ready")
}

// Reboot halts and boots a running zone.
func (z Zoneadm) Reboot(ctx context.Context, name string) error {
	return z.do(ctx, "zoneadm reboot", name, 0, "reboot")
}

// Uninstall removes an installed (or incomplete) zone's files, back to
// configured. -F is always given: there is no one to confirm. A ready or
// running zone must be halted first (ErrWrongState); a zone that is only
// configured gives ErrWrongState too ("already in state 'configured'").
func (z Zoneadm) Uninstall(ctx context.Context, name string) error {
	return z.do(ctx, "zoneadm uninstall", name, installTimeout, "uninstall", "-F")
}

// Verify checks the zone's configuration against the system.
func (z Zoneadm) Verify(ctx context.Context, name string) error {
	return z.do(ctx, "zoneadm verify", name, 0, "verify")
}

func (z Zoneadm) do(ctx context.Context, op, name string, timeout time.Duration, args ...string) error {
	if err := checkZoneName(op, name); err != nil {
		return err
	}
	_, err := run(ctx, z.Runner, op, name, Cmd{Path: zoneadmPath, Args: append([]string{"-z", name}, args...), Timeout: timeout})
	return err
}

func checkZoneName(op, name string) error {
	if !names.ValidZoneName(name) {
		return invalidf(op, name, "invalid zone name %q", name)
	}
	return nil
}

// ParseZoneadmList parses `zoneadm list -p` output: one zone per line,
// zoneid:zonename:state:zonepath:uuid:brand:ip-type, where only the zonepath
// escapes ':' as '\:' (and '\' as '\\'). Lines of older zoneadm without the
// ip-type field are accepted with an empty IPType.
func ParseZoneadmList(out string) ([]Zone, error) {
	var zones []Zone
	for n, line := range strings.Split(out, "\n") {
		if strings.TrimSpace(line) == "" {
			continue
		}
		f, err := splitZoneadmLine(line)
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", n+1, err)
		}
		if len(f) != 7 && len(f) != 6 {
			return nil, fmt.Errorf("line %d: %d fields, want 7: %q", n+1, len(f), line)
		}
		zn := Zone{ID: -1, Name: f[1], State: ZoneState(f[2]), Path: f[3], UUID: f[4], Brand: f[5]}
		if f[0] != "-" {
			id, err := strconv.Atoi(f[0])
			if err != nil || id < 0 {
				return nil, fmt.Errorf("line %d: bad zone id %q", n+1, f[0])
			}
			zn.ID = id
		}
		if zn.Name == "" {
			return nil, fmt.Errorf("line %d: empty zone name", n+1)
		}
		if !zoneStates[zn.State] {
			return nil, fmt.Errorf("line %d: unknown zone state %q", n+1, f[2])
		}
		if len(f) == 7 {
			switch f[6] {
			case "excl":
				zn.IPType = IPExclusive
			case "shared":
				zn.IPType = IPShared
			default:
				return nil, fmt.Errorf("line %d: unknown ip-type %q", n+1, f[6])
			}
		}
		zones = append(zones, zn)
	}
	return zones, nil
}

// splitZoneadmLine splits on ':' not preceded by a backslash and removes
// the escaping backslashes.
func splitZoneadmLine(line string) ([]string, error) {
	var fields []string
	var cur strings.Builder
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case c == '\\':
			if i+1 >= len(line) {
				return nil, fmt.Errorf("dangling backslash in %q", line)
			}
			i++
			cur.WriteByte(line[i])
		case c == ':':
			fields = append(fields, cur.String())
			cur.Reset()
		default:
			cur.WriteByte(c)
		}
	}
	return append(fields, cur.String()), nil
}
