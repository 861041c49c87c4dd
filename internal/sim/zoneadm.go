package sim

import (
	"fmt"
	"path/filepath"
	"strings"
)

// Zone states, in the order of zone_state_t.
const (
	stateConfigured   = "configured"
	stateIncomplete   = "incomplete"
	stateInstalled    = "installed"
	stateReady        = "ready"
	stateRunning      = "running"
	stateShuttingDown = "shutting_down"
	stateDown         = "down"
)

// stateRank orders zone states; an unknown zone ranks below configured.
func stateRank(s string) int {
	switch s {
	case stateConfigured:
		return 1
	case stateIncomplete:
		return 2
	case stateInstalled:
		return 3
	case stateReady:
		return 4
	case stateRunning:
		return 5
	case stateShuttingDown:
		return 6
	case stateDown:
		return 7
	}
	return 0
}

// inKernel reports states in which the zone has an id and holds resources.
func inKernel(s string) bool { return stateRank(s) >= stateRank(stateReady) }

const zoneadmUsage = `usage:	zoneadm help
	zoneadm [-z <zone>] [-u <uuid-match>] list
	zoneadm {-z <zone>|-u <uuid-match>} <subcommand>

Subcommands:

help
boot [-- boot_arguments]
halt
ready
shutdown [-r [-- boot_arguments]]
reboot [-- boot_arguments]
list [-cipv]
verify
install [-x nodataset] [brand-specific args]
uninstall [-F] [brand-specific args]
clone [-m method] [-s <ZFS snapshot>] [brand-specific args] zonename
move zonepath
detach [-n] [brand-specific args]
attach [-F] [-n <path>] [brand-specific args]
mark incomplete

`

// zoneadmCall is one zoneadm run with its target zone resolved.
type zoneadmCall struct {
	*invocation
	zone string // "" when no -z/-u was given
	sub  string
	args []string
}

// zerror prints "zoneadm: zone 'Z': msg", or "zoneadm: msg" without a zone.
func (c *zoneadmCall) zerror(format string, a ...any) {
	if c.zone != "" {
		c.errf("zoneadm: zone '%s': "+format, append([]any{c.zone}, a...)...)
		return
	}
	c.errf("zoneadm: "+format, a...)
}

func runZoneadm(inv *invocation) int {
	c := &zoneadmCall{invocation: inv}
	var uuid string
	opts, rest, _, ok := getopt(inv.args, "z:u:R:")
	if !ok || len(rest) == 0 {
		fmt.Fprint(inv.stderr, zoneadmUsage)
		return 2
	}
	for _, o := range opts {
		switch o.c {
		case 'z':
			c.zone = o.val
		case 'u':
			uuid = o.val
		}
	}
	c.sub, c.args = rest[0], rest[1:]
	if c.sub == "help" {
		fmt.Fprint(inv.stdout, zoneadmUsage)
		return 0
	}
	if code, ok := c.resolveZone(uuid); !ok {
		return code
	}
	handlers := map[string]func() int{
		"list": c.list, "verify": c.verify, "install": c.install, "uninstall": c.uninstall,
		"ready": c.ready, "boot": c.boot, "halt": c.halt, "reboot": c.reboot,
		"shutdown": c.shutdown, "clone": c.clone, "mark": c.mark,
		"detach": c.detach, "attach": c.attach, "move": c.move,
	}
	h, ok := handlers[c.sub]
	if !ok {
		fmt.Fprint(inv.stderr, zoneadmUsage)
		return 2
	}
	if c.sub != "list" {
		if c.zone == "" {
			c.zerror("no zone specified")
			return 1
		}
		if c.zone == "global" {
			c.zerror("%s operation is invalid for the global zone.", c.sub)
			return 1
		}
		if strings.HasPrefix(c.zone, "SUNW") {
			c.zerror("%s operation is invalid for zones starting with SUNW.", c.sub)
			return 1
		}
	}
	if c.sub != "install" && c.sub != "uninstall" && c.sub != "boot" && c.sub != "clone" {
		// Those four sleep at the point where the zone sits in its
		// transient state; every other subcommand sleeps up front.
		c.faults.sleep()
	}
	return h()
}

// resolveZone checks that -z/-u name a configured zone, as zoneadm's main()
// does before any subcommand runs.
func (c *zoneadmCall) resolveZone(uuid string) (int, bool) {
	if c.zone == "" && uuid == "" {
		return 0, true
	}
	found := false
	var err error
	if uuid != "" {
		// Only -u has to look at every zone.
		var zones []*Zone
		zones, err = c.h.listZones()
		for _, z := range zones {
			if z.UUID == uuid && (c.zone == "" || c.zone == z.Name) {
				c.zone, found = z.Name, true
				break
			}
		}
	} else {
		var z *Zone
		z, err = c.h.viewZone(c.zone)
		found = z != nil
	}
	if err != nil {
		return c.stateErr(err), false
	}
	if !found {
		name := c.zone
		if name == "" {
			name = uuid
		}
		c.errf("zoneadm: %s: No such zone configured", name)
		return 1, false
	}
	return 0, true
}

func (c *zoneadmCall) subUsage(short string) {
	c.errf("usage:\t%s", short)
}

// checkState applies sanity_check's client-side state rules; it prints
// the refusal and returns false when the subcommand may not proceed.
func (c *zoneadmCall) checkState(z *Zone, cmd string) bool {
	s := z.State
	switch cmd {
	case "install", "clone":
		if s == stateInstalled {
			c.zerror("is already installed.")
			return false
		}
	}
	switch cmd {
	case "install", "clone", "verify":
		if s == stateIncomplete {
			c.zerror("zone is incomplete; uninstall required.")
			return false
		}
	}
	switch cmd {
	case "install", "clone", "uninstall", "attach", "detach", "move", "mark":
		if inKernel(s) {
			c.zerror("%s operation is invalid for %s zones.", cmd, s)
			return false
		}
	}
	if cmd == "uninstall" && s == stateConfigured {
		c.zerror("is already in state '%s'.", stateConfigured)
		return false
	}
	switch cmd {
	case "ready", "detach", "move", "mark":
		if stateRank(s) < stateRank(stateInstalled) {
			c.zerror("must be installed before %s.", cmd)
			return false
		}
	}
	return true
}

// zoneadmdFailed prints zoneadmd's refusal and the client's trailer.
func (c *zoneadmCall) zoneadmdFailed(format string, a ...any) int {
	c.zerror(format, a...)
	c.zerror("call to zoneadmd failed")
	return 1
}

// zoneCopy reads the zone as it is now.
func (c *zoneadmCall) zoneCopy() (*Zone, error) {
	z, err := c.h.viewZone(c.zone)
	if err == nil && z == nil {
		err = fmt.Errorf("zone %s vanished", c.zone)
	}
	return z, err
}

// verify
func (c *zoneadmCall) verify() int {
	if len(c.args) > 0 {
		c.subUsage("verify")
		return 2
	}
	code := 0
	err := c.h.view(func(st *State) {
		z := st.zone(c.zone)
		if !c.checkState(z, "verify") {
			code = 1
			return
		}
		for _, msg := range verifyZone(st, z, false) {
			c.zerror("%s", msg)
			code = 1
		}
	})
	if err != nil {
		return c.stateErr(err)
	}
	return code
}

// verifyZone checks the configuration against the host: delegated
// datasets exist and, when booting, the zone's links exist and are free.
func verifyZone(st *State, z *Zone, booting bool) []string {
	var out []string
	if z.Config.Zonepath == "" {
		out = append(out, "zonepath not specified")
	}
	for _, d := range z.Config.resources("dataset") {
		if st.dataset(d.Props["name"]) == nil {
			out = append(out, fmt.Sprintf("could not verify zfs dataset %s: dataset does not exist", d.Props["name"]))
		}
	}
	if !booting || !z.Config.exclusive() {
		return out
	}
	owners := linkOwners(st)
	for _, l := range z.Config.netLinks() {
		link := st.link(l)
		switch {
		case link == nil || link.Class == "etherstub":
			out = append(out, fmt.Sprintf("failed to add network device %s: object not found", l))
		case owners[l] != "" && owners[l] != z.Name:
			out = append(out, fmt.Sprintf("failed to add network device %s: link busy", l))
		}
	}
	return out
}

// linkOwners maps each link used by the exclusive-IP configuration of a
// zone in the kernel to that zone. It reads every zone.
func linkOwners(st *State) map[string]string {
	owners := map[string]string{}
	for _, z := range st.zones() {
		if z.Name == "global" || !inKernel(z.State) || !z.Config.exclusive() {
			continue
		}
		for _, l := range z.Config.netLinks() {
			if _, taken := owners[l]; !taken {
				owners[l] = z.Name
			}
		}
	}
	return owners
}

// hostPath maps an illumos absolute path to its directory under the root.
func (h *host) hostPath(p string) string {
	return filepath.Join(h.root, "fs", filepath.Clean("/"+p))
}

// zoneRoot is the directory services of a zone run in.
func (h *host) zoneRoot(z *Zone) string {
	return filepath.Join(h.hostPath(z.Config.Zonepath), "root")
}
