package sim

import (
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Facts are the host's fixed properties: what psrinfo, prtconf, uname,
// hostname and zpool report, and the links and pools a new host starts
// with. Defaults can be overridden field by field in ROOT/host.json.
type Facts struct {
	Hostname    string     `json:"hostname"`
	NCPUs       int        `json:"ncpus"`
	CPUMHz      int        `json:"cpu_mhz"`
	MemoryMB    int        `json:"memory_mb"`
	Sysname     string     `json:"sysname"`
	Release     string     `json:"release"`
	Version     string     `json:"version"`
	Machine     string     `json:"machine"`
	Processor   string     `json:"processor"`
	Platform    string     `json:"platform"`
	GlobalBrand string     `json:"global_brand"`
	Pools       []PoolFact `json:"pools"`
	Links       []LinkFact `json:"links"`
	SMF         SMFFacts   `json:"smf"`
	// ZoneUIDBase is the lowest uid (and gid) this host's zones get when
	// the simulator runs as root; 0 means 2000000. Every zone of the
	// machine gets a uid of its own above it (runas.go).
	ZoneUIDBase uint32 `json:"zone_uid_base,omitempty"`
	// ZoneUIDCounter is the file counting the zone uids given out, shared
	// by every host whose zones must not share a uid; empty means the
	// machine's, /var/lib/illumos-sim/next-zone-uid (runas.go).
	ZoneUIDCounter string `json:"zone_uid_counter,omitempty"`
}

// PoolFact is a zpool of the host.
type PoolFact struct {
	Name string `json:"name"`
	Size Size   `json:"size"`
}

// LinkFact is a physical datalink of the host.
type LinkFact struct {
	Name  string `json:"name"`
	MAC   string `json:"mac"`
	MTU   int    `json:"mtu"`
	Speed int    `json:"speed"`
}

// SMFFacts tune the supervisor's restart policy.
type SMFFacts struct {
	// RestartLimit exits of a service within RestartWindow put it into
	// maintenance.
	RestartLimit  int      `json:"restart_limit"`
	RestartWindow Duration `json:"restart_window"`
	// RestartDelay is the pause before restarting a service that exited.
	RestartDelay Duration `json:"restart_delay"`
}

// Size is a byte count written in JSON as a number or as "1T", "512G".
type Size uint64

// UnmarshalJSON accepts a number or a zfs-style size string.
func (s *Size) UnmarshalJSON(b []byte) error {
	var n uint64
	if err := json.Unmarshal(b, &n); err == nil {
		*s = Size(n)
		return nil
	}
	var str string
	if err := json.Unmarshal(b, &str); err != nil {
		return fmt.Errorf("size: %w", err)
	}
	v, ok := parseZfsSize(str)
	if !ok {
		return fmt.Errorf("size: bad value %q", str)
	}
	*s = Size(v)
	return nil
}

// Duration is a time.Duration written in JSON as "60s".
type Duration time.Duration

// UnmarshalJSON accepts a Go duration string or a number of seconds.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var secs float64
	if err := json.Unmarshal(b, &secs); err == nil {
		*d = Duration(secs * float64(time.Second))
		return nil
	}
	var str string
	if err := json.Unmarshal(b, &str); err != nil {
		return fmt.Errorf("duration: %w", err)
	}
	v, err := time.ParseDuration(str)
	if err != nil {
		return fmt.Errorf("duration: %w", err)
	}
	*d = Duration(v)
	return nil
}

// MarshalJSON writes the duration as a string.
func (d Duration) MarshalJSON() ([]byte, error) {
	return json.Marshal(time.Duration(d).String())
}

const hostFactsFile = "host.json"

var genericRootNames = map[string]bool{"root": true, "state": true, "sim": true, "illumos-sim": true}

// defaultFacts describe a sane OmniOS host named after its root directory.
func defaultFacts(root string) *Facts {
	name := filepath.Base(filepath.Clean(root))
	if genericRootNames[name] {
		// ".../node1/root" names the node, not "root".
		name = filepath.Base(filepath.Dir(filepath.Clean(root)))
	}
	return &Facts{
		Hostname:    name,
		NCPUs:       8,
		CPUMHz:      2400,
		MemoryMB:    32768,
		Sysname:     "SunOS",
		Release:     "5.11",
		Version:     "omnios-r151054",
		Machine:     "i86pc",
		Processor:   "i386",
		Platform:    "i86pc",
		GlobalBrand: "ipkg",
		Pools:       []PoolFact{{Name: "tank", Size: 1 << 40}},
		Links:       []LinkFact{{Name: "net0", MAC: stableMAC(name), MTU: 1500, Speed: 10000}},
		SMF: SMFFacts{
			RestartLimit:  3,
			RestartWindow: Duration(60 * time.Second),
			RestartDelay:  Duration(100 * time.Millisecond),
		},
	}
}

// loadFacts reads ROOT/host.json over the defaults.
func loadFacts(root string) (*Facts, error) {
	f := defaultFacts(root)
	b, err := os.ReadFile(filepath.Join(root, hostFactsFile))
	if errors.Is(err, os.ErrNotExist) {
		return f, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read host facts: %w", err)
	}
	if err := json.Unmarshal(b, f); err != nil {
		return nil, fmt.Errorf("parse %s: %w", filepath.Join(root, hostFactsFile), err)
	}
	for i := range f.Links {
		if f.Links[i].MAC == "" {
			f.Links[i].MAC = stableMAC(f.Hostname + "/" + f.Links[i].Name)
		}
		if f.Links[i].MTU == 0 {
			f.Links[i].MTU = 1500
		}
		if f.Links[i].Speed == 0 {
			f.Links[i].Speed = 10000
		}
	}
	return f, nil
}

// stableMAC derives a fixed-looking MAC from a name so a host's physical
// NIC keeps its address across runs.
func stableMAC(seed string) string {
	hf := fnv.New32a()
	hf.Write([]byte(seed))
	v := hf.Sum32()
	return formatMAC([]byte{0x0, 0x8, 0x20, byte(v >> 16), byte(v >> 8), byte(v)})
}

// poolSize returns the configured size of a pool.
func (f *Facts) poolSize(name string) uint64 {
	for _, p := range f.Pools {
		if p.Name == name {
			return uint64(p.Size)
		}
	}
	return 0
}

// psrinfo [-p] [-v]
func runPsrinfo(inv *invocation) int {
	physical, verbose := false, false
	for _, a := range inv.args {
		if !strings.HasPrefix(a, "-") || a == "-" {
			continue
		}
		for _, c := range a[1:] {
			switch c {
			case 'p':
				physical = true
			case 'v':
				verbose = true
			default:
				inv.errf("psrinfo: illegal option -- %c", c)
				inv.errf("usage: \n\tpsrinfo [-v] [-p] [processor_id ...]\n\tpsrinfo -s [-p] processor_id")
				return 2
			}
		}
	}
	var boot time.Time
	if err := inv.h.view(func(st *State) { boot = st.BootTime }); err != nil {
		return inv.stateErr(err)
	}
	since := boot.Local().Format("01/02/2006 15:04:05")
	f := inv.h.facts
	switch {
	case physical && !verbose:
		inv.outf("1")
	case verbose:
		for i := 0; i < f.NCPUs; i++ {
			inv.outf("Status of virtual processor %d as of: %s", i, time.Now().Format("01/02/2006 15:04:05"))
			inv.outf("  on-line since %s.", since)
			inv.outf("  The %s processor operates at %d MHz,", f.Processor, f.CPUMHz)
			inv.outf("\tand has an i387 compatible floating point processor.")
		}
	default:
		for i := 0; i < f.NCPUs; i++ {
			inv.outf("%d\ton-line   since %s", i, since)
		}
	}
	return 0
}

// prtconf [-m]
func runPrtconf(inv *invocation) int {
	f := inv.h.facts
	for _, a := range inv.args {
		if a == "-m" {
			inv.outf("%d", f.MemoryMB)
			return 0
		}
	}
	inv.outf("System Configuration:  illumos  %s", f.Machine)
	inv.outf("Memory size: %d Megabytes", f.MemoryMB)
	inv.outf("System Peripherals (Software Nodes):")
	inv.outf("")
	inv.outf("%s", f.Platform)
	inv.outf("    scsi_vhci, instance #0")
	inv.outf("    pci, instance #0")
	inv.outf("    cpus, instance #0")
	for i := 0; i < f.NCPUs; i++ {
		inv.outf("        cpu, instance #%d", i)
	}
	return 0
}

// nodename is the node name seen from the invocation's zone: what the
// zone read at boot, else its zone name.
func (inv *invocation) nodename() string {
	if inv.zone == "global" {
		return inv.h.facts.Hostname
	}
	if z, err := inv.h.viewZone(inv.zone); err == nil && z != nil && z.Nodename != "" {
		return z.Nodename
	}
	return inv.zone
}

// bootNodename is the node name a booting zone takes from its root: the
// first word of /etc/nodename (svc:/system/identity:node), or of
// /etc/hostname in an lx zone, whose init sets it (spec §6.4). A change
// takes effect at the next boot, as on illumos.
func bootNodename(root, brand string) string {
	file := "etc/nodename"
	if brand == "lx" {
		file = "etc/hostname"
	}
	r, err := os.OpenRoot(root)
	if err != nil {
		return ""
	}
	defer r.Close()
	b, err := r.ReadFile(file)
	if err != nil {
		return ""
	}
	if words := strings.Fields(string(b)); len(words) > 0 && len(words[0]) <= 256 {
		return words[0]
	}
	return ""
}

// hostname prints the node name. Setting it is not simulated.
func runHostname(inv *invocation) int {
	if len(inv.args) > 0 {
		inv.errf("hostname: setting the hostname is not supported by illumos-sim")
		return 1
	}
	inv.outf("%s", inv.nodename())
	return 0
}

// uname [-asnrvmpi]
func runUname(inv *invocation) int {
	f := inv.h.facts
	var want []byte
	for _, a := range inv.args {
		if !strings.HasPrefix(a, "-") || len(a) < 2 {
			inv.errf("usage: uname [-snrvmapiX]")
			return 1
		}
		for _, c := range []byte(a[1:]) {
			if !strings.ContainsRune("asnrvmpi", rune(c)) {
				inv.errf("uname: illegal option -- %c", c)
				inv.errf("usage: uname [-snrvmapiX]")
				return 1
			}
			want = append(want, c)
		}
	}
	has := func(c byte) bool {
		for _, w := range want {
			if w == c || w == 'a' {
				return true
			}
		}
		return false
	}
	if len(want) == 0 {
		want = []byte{'s'}
	}
	var out []string
	for _, field := range []struct {
		c byte
		v string
	}{
		{'s', f.Sysname}, {'n', inv.nodename()}, {'r', f.Release}, {'v', f.Version},
		{'m', f.Machine}, {'p', f.Processor}, {'i', f.Platform},
	} {
		if has(field.c) {
			out = append(out, field.v)
		}
	}
	inv.outf("%s", strings.Join(out, " "))
	return 0
}

// zonename prints the name of the zone the command runs in.
func runZonename(inv *invocation) int {
	inv.outf("%s", inv.zone)
	return 0
}
