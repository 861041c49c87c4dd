package sim

import (
	"fmt"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"golang.org/x/sys/unix"
	"golang.org/x/term"
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
	i := 0
	for ; i < len(inv.args); i++ {
		a := inv.args[i]
		if a == "--" {
			i++
			break
		}
		if !strings.HasPrefix(a, "-") || len(a) < 2 {
			break
		}
		opt, val := a[1], a[2:]
		if opt != 'z' && opt != 'u' && opt != 'R' {
			fmt.Fprint(inv.stderr, zoneadmUsage)
			return 2
		}
		if val == "" {
			if i+1 >= len(inv.args) {
				fmt.Fprint(inv.stderr, zoneadmUsage)
				return 2
			}
			i++
			val = inv.args[i]
		}
		switch opt {
		case 'z':
			c.zone = val
		case 'u':
			uuid = val
		}
	}
	if i >= len(inv.args) {
		fmt.Fprint(inv.stderr, zoneadmUsage)
		return 2
	}
	c.sub, c.args = inv.args[i], inv.args[i+1:]
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

// list [-cipv]
func (c *zoneadmCall) list() int {
	var all, installed, parsable, verbose bool
	for _, a := range c.args {
		if !strings.HasPrefix(a, "-") || len(a) < 2 {
			c.subUsage("list [-cipv]")
			return 2
		}
		for _, ch := range a[1:] {
			switch ch {
			case 'c':
				all = true
			case 'i':
				installed = true
			case 'p':
				parsable = true
			case 'v':
				verbose = true
			default:
				c.subUsage("list [-cipv]")
				return 2
			}
		}
	}
	if c.zone != "" && (all || installed) {
		c.subUsage("list [-cipv]")
		return 2
	}
	if parsable && verbose {
		c.zerror("%s -p and -v are mutually exclusive.", "list")
		return 1
	}
	// Listing one zone reads that zone's file alone; listing all reads
	// every zone file and rewrites none.
	var candidates []*Zone
	if c.zone != "" {
		z, err := c.h.viewZone(c.zone)
		if err != nil {
			return c.stateErr(err)
		}
		if z != nil {
			candidates = []*Zone{z}
		}
	} else {
		all, err := c.h.listZones()
		if err != nil {
			return c.stateErr(err)
		}
		candidates = listOrder(all)
	}
	var zones []*Zone
	for _, z := range candidates {
		switch {
		case c.zone != "":
		case all:
		case installed:
			if stateRank(z.State) < stateRank(stateInstalled) {
				continue
			}
		default:
			if !inKernel(z.State) {
				continue
			}
		}
		zones = append(zones, z)
	}
	if verbose {
		c.outf("%*s %-16s %-10s %-30s %-8s %-6s", 4, "ID", "NAME", "STATUS", "PATH", "BRAND", "IP")
	}
	for _, z := range zones {
		id := "-"
		if z.ID >= 0 {
			id = fmt.Sprint(z.ID)
		}
		ip := "shared"
		if z.Config.exclusive() {
			ip = "excl"
		}
		switch {
		case parsable:
			c.outf("%s:%s:%s:%s:%s:%s:%s", id, z.Name, z.State,
				strings.ReplaceAll(z.Config.Zonepath, ":", `\:`), z.UUID, z.Config.Brand, ip)
		case verbose:
			c.outf("%*s %-16s %-10s %-30s %-8s %-6s", 4, id, z.Name, z.State, z.Config.Zonepath, z.Config.Brand, ip)
		default:
			c.outf("%s", z.Name)
		}
	}
	return 0
}

// listOrder is zoneadm's order: zones in the kernel by id, then the rest in
// index order (the order zones come in).
func listOrder(zones []*Zone) []*Zone {
	var kernel, rest []*Zone
	for _, z := range zones {
		if z.ID >= 0 {
			kernel = append(kernel, z)
		} else {
			rest = append(rest, z)
		}
	}
	sort.SliceStable(kernel, func(i, j int) bool { return kernel[i].ID < kernel[j].ID })
	return append(kernel, rest...)
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

// install [-x nodataset] [brand args]
func (c *zoneadmCall) install() int {
	args := c.args
	nodataset := false
	for len(args) >= 2 && args[0] == "-x" {
		if args[1] != "nodataset" {
			c.subUsage("install [-x nodataset] [brand-specific args]")
			return 2
		}
		nodataset = true
		args = args[2:]
	}
	created := ""
	code := 0
	err := c.h.update(func(st *State) bool {
		z := st.zone(c.zone)
		if !c.checkState(z, "install") {
			code = 1
			return false
		}
		if msgs := verifyZone(st, z, false); len(msgs) > 0 {
			for _, m := range msgs {
				c.zerror("%s", m)
			}
			code = 1
			return false
		}
		z.State = stateIncomplete
		ds, err := c.prepareZonepath(st, z, nodataset)
		if err != nil {
			c.zerror("%v", err)
			z.State = stateConfigured
			code = 1
			return true
		}
		created = ds
		return true
	})
	if err != nil {
		return c.stateErr(err)
	}
	if code != 0 {
		return code
	}
	if created != "" {
		c.outf("A ZFS file system has been created for this zone.")
	}
	c.faults.sleep()
	status := brandInstall(c, args)
	if status == 0 {
		status = c.faults.brandExit()
		if status != 0 {
			c.errf("ERROR: brand installer failed (injected fault, exit %d)", status)
		}
	}
	return c.finishInstall(status)
}

// finishInstall applies the brand hook's exit status: 0 installs; 253
// (usage) and 254 (not complete) clean the zonepath and go back to
// configured; anything else leaves the zone incomplete.
func (c *zoneadmCall) finishInstall(status int) int {
	err := c.h.update(func(st *State) bool {
		z := st.zone(c.zone)
		if z == nil {
			return false
		}
		switch status {
		case 0:
			z.State = stateInstalled
			if z.UUID == "" {
				z.UUID = newUUID()
			}
		case 253, 254:
			c.cleanZonepath(st, z)
			z.State = stateConfigured
		}
		return true
	})
	if err != nil {
		return c.stateErr(err)
	}
	switch status {
	case 0:
		c.outf("        Done: Installation completed in 0.0 seconds.")
		return 0
	case 253:
		return 2
	}
	return 1
}

// prepareZonepath creates the zonepath (as a dataset when its parent
// directory is a ZFS mountpoint) and the zone root. It returns the name of
// a dataset it created.
func (c *zoneadmCall) prepareZonepath(st *State, z *Zone, nodataset bool) (string, error) {
	zp := z.Config.Zonepath
	created := ""
	if !nodataset && datasetMountedAt(st, zp) == nil {
		if parent := datasetMountedAt(st, filepath.Dir(zp)); parent != nil && parent.Type == "filesystem" {
			name := parent.Name + "/" + filepath.Base(zp)
			if st.dataset(name) == nil {
				d := newDataset(name, "filesystem")
				st.Datasets = append(st.Datasets, d)
				z.OwnDataset = name
				created = name
			}
		}
	}
	dir := c.h.hostPath(zp)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("could not create zonepath %s: %v", zp, strerror(err))
	}
	root := c.h.zoneRoot(z)
	for _, sub := range []string{"etc", "tmp", "var/svc/log", "var/tmp"} {
		if err := os.MkdirAll(filepath.Join(root, sub), 0o755); err != nil {
			return "", fmt.Errorf("could not create zone root: %v", strerror(err))
		}
	}
	return created, nil
}

// cleanZonepath removes what install made: the zone root and the dataset
// zoneadm created. The zonepath directory of a pre-made dataset stays.
func (c *zoneadmCall) cleanZonepath(st *State, z *Zone) {
	dir := c.h.hostPath(z.Config.Zonepath)
	if entries, err := os.ReadDir(dir); err == nil {
		for _, e := range entries {
			os.RemoveAll(filepath.Join(dir, e.Name()))
		}
	}
	if z.RootDataset != "" {
		destroyDatasetTree(c.h, st, z.RootDataset)
		z.RootDataset = ""
	}
	if z.OwnDataset != "" {
		destroyDatasetTree(c.h, st, z.OwnDataset)
		os.Remove(dir)
		z.OwnDataset = ""
	}
	z.Services = nil
	z.Interfaces, z.Addresses, z.Routes, z.PersistentRoutes = nil, nil, nil, nil
	c.h.dropNAT(z.Name)
}

// brandInstall validates brand installer arguments. It returns the hook's
// exit status (0, 253 usage, 254 not complete).
func brandInstall(c *zoneadmCall, args []string) int {
	var brand string
	if z, err := c.zoneCopy(); err == nil {
		brand = z.Config.Brand
	}
	switch brand {
	case "lx":
		var source, tarball string
		for i := 0; i < len(args); i++ {
			switch args[i] {
			case "-x":
				i++
			case "-s", "-t":
				if i+1 >= len(args) {
					return brandUsage(c, brand)
				}
				if args[i] == "-s" {
					source = args[i+1]
				} else {
					tarball = args[i+1]
				}
				i++
			default:
				return brandUsage(c, brand)
			}
		}
		if source != "" && tarball != "" {
			return brandUsage(c, brand)
		}
		if source != "" || tarball != "" {
			return lxInstall(c, source, tarball)
		}
	case "bhyve", "kvm":
		for i := 0; i < len(args); i++ {
			if args[i] == "-x" && i+1 < len(args) {
				i++
				continue
			}
			return brandUsage(c, brand)
		}
	case "omicron1":
		for _, a := range args {
			if strings.HasPrefix(a, "-") {
				return brandUsage(c, brand)
			}
			if _, err := os.Stat(a); err != nil {
				c.errf("ERROR: image %s does not exist", a)
				return 254
			}
		}
	default:
		c.outf("       Image: Preparing at %s/root.", strings.TrimSuffix(c.zonepathOf(), "/"))
	}
	return 0
}

func brandUsage(c *zoneadmCall, brand string) int {
	switch brand {
	case "lx":
		c.errf("Usage: zoneadm -z %s install [-x nodataset] {-s <sendstream|dataset|snapshot> | -t <tarball>}", c.zone)
	default:
		c.errf("Usage: zoneadm -z %s install [-x nodataset]", c.zone)
	}
	return 253
}

func (c *zoneadmCall) zonepathOf() string {
	if z, err := c.zoneCopy(); err == nil {
		return z.Config.Zonepath
	}
	return ""
}

// uninstall [-F]
func (c *zoneadmCall) uninstall() int {
	force := false
	for _, a := range c.args {
		if a == "-F" {
			force = true
		}
	}
	code := 0
	err := c.h.update(func(st *State) bool {
		z := st.zone(c.zone)
		if !c.checkState(z, "uninstall") {
			code = 1
			return false
		}
		if !force && !c.confirm(fmt.Sprintf("Are you sure you want to uninstall zone %s (y/[n])? ", c.zone)) {
			code = 1
			return false
		}
		z.State = stateIncomplete
		return true
	})
	if err != nil {
		return c.stateErr(err)
	}
	if code != 0 {
		return code
	}
	c.faults.sleep()
	err = c.h.update(func(st *State) bool {
		z := st.zone(c.zone)
		if z == nil {
			return false
		}
		c.cleanZonepath(st, z)
		z.State = stateConfigured
		return true
	})
	if err != nil {
		return c.stateErr(err)
	}
	return 0
}

// confirm asks on a terminal; without one it prints zoneadm's refusal.
func (c *zoneadmCall) confirm(question string) bool {
	f, ok := c.stdin.(*os.File)
	if !ok || !term.IsTerminal(int(f.Fd())) {
		c.zerror("Input not from terminal and -F not specified: %s not done.", c.sub)
		return false
	}
	fmt.Fprint(c.stdout, question)
	var answer string
	fmt.Fscanln(f, &answer)
	return strings.HasPrefix(strings.ToLower(answer), "y")
}

// ready
func (c *zoneadmCall) ready() int {
	if len(c.args) > 0 {
		c.subUsage("ready")
		return 2
	}
	var pid int
	code, done := 0, false
	err := c.h.update(func(st *State) bool {
		z := st.zone(c.zone)
		switch z.State {
		case stateConfigured, stateIncomplete:
			c.checkState(z, "ready")
			code, done = 1, true
			return false
		case stateReady:
			c.zerror("zone is already ready")
			done = true
			return false
		case stateInstalled:
			if msgs := verifyZone(st, z, true); len(msgs) > 0 {
				for _, m := range msgs[:len(msgs)-1] {
					c.zerror("%s", m)
				}
				code, done = c.zoneadmdFailed("%s", msgs[len(msgs)-1]), true
				return false
			}
			enterReady(st, z)
			done = true
			return true
		}
		pid = z.SupervisorPID
		z.State = stateShuttingDown
		return true
	})
	if err != nil {
		return c.stateErr(err)
	}
	if done {
		return code
	}
	// running: halt, then ready.
	stopSupervisor(c.h, c.zone, pid, false)
	err = c.h.update(func(st *State) bool {
		z := st.zone(c.zone)
		killServiceGroups(z)
		leaveKernel(st, z)
		enterReady(st, z)
		return true
	})
	if err != nil {
		return c.stateErr(err)
	}
	return 0
}

// enterReady gives the zone an id and its network: interfaces and
// from-gz addresses for allowed-address, a default route for defrouter,
// and the persistent routes.
func enterReady(st *State, z *Zone) {
	z.State = stateReady
	z.ID = st.NextZoneID
	st.NextZoneID++
	if !z.Config.exclusive() {
		return
	}
	for _, n := range z.Config.resources("net") {
		phys, addr := n.Props["physical"], n.Props["allowed-address"]
		if addr == "" {
			continue
		}
		if findIface(z, phys) == nil {
			z.Interfaces = append(z.Interfaces, &IPInterface{Name: phys, Temporary: true})
		}
		z.Addresses = append(z.Addresses, &IPAddress{Obj: phys + "/v4", Type: "from-gz", Addr: addr, Temporary: true})
		if gw := n.Props["defrouter"]; gw != "" && findRoute(z.Routes, "default", gw) == nil {
			z.Routes = append(z.Routes, &Route{Dest: "default", Gateway: gw, Iface: phys})
		}
	}
	for _, r := range z.PersistentRoutes {
		if findRoute(z.Routes, r.Dest, r.Gateway) == nil {
			cp := *r
			z.Routes = append(z.Routes, &cp)
		}
	}
}

// leaveKernel takes a halted zone out of the kernel: temporary IP
// configuration and routes go, services stop.
func leaveKernel(st *State, z *Zone) {
	z.State = stateInstalled
	z.ID = -1
	z.BootID, z.BootOwner = "", 0
	z.SupervisorPID, z.InitPID = 0, 0
	z.Routes = nil
	var ifs []*IPInterface
	for _, i := range z.Interfaces {
		if !i.Temporary {
			ifs = append(ifs, i)
		}
	}
	z.Interfaces = ifs
	var addrs []*IPAddress
	for _, a := range z.Addresses {
		if !a.Temporary {
			addrs = append(addrs, a)
		}
	}
	z.Addresses = addrs
	st.tx.h.unmountLofs(z)
	st.tx.h.dropNAT(z.Name)
	for _, s := range z.Services {
		s.PID = 0
		if s.State == "online" || s.State == "offline" || s.State == "uninitialized" {
			s.State = "offline"
			s.STime = time.Now().UTC()
		}
	}
}

// boot [-f] [-s] [-X] [-- bootargs]
func (c *zoneadmCall) boot() int {
	force := false
	for _, a := range c.args {
		if a == "--" {
			break
		}
		if strings.HasPrefix(a, "-") {
			for _, ch := range a[1:] {
				switch ch {
				case 'f':
					force = true
				case 's', 'X', 'm', 'i':
				default:
					c.subUsage("boot [-- boot_arguments]")
					return 2
				}
			}
		}
	}
	return c.bootZone(force)
}

func (c *zoneadmCall) bootZone(force bool) int {
	bootID := newUUID()
	code, done, waitOther := 0, false, false
	var booting *Zone
	err := c.h.update(func(st *State) bool {
		z := st.zone(c.zone)
		min := stateInstalled
		if force {
			min = stateIncomplete
		}
		switch {
		case stateRank(z.State) < stateRank(min):
			c.zerror("must be installed before boot.")
			code, done = 1, true
			return false
		case stateRank(z.State) >= stateRank(stateRunning):
			c.zerror("zone is already booted")
			done = true
			return false
		case z.State == stateReady && z.BootID != "" && processAlive(z.BootOwner):
			waitOther = true
			return false
		}
		if msgs := verifyZone(st, z, true); len(msgs) > 0 {
			for _, m := range msgs[:len(msgs)-1] {
				c.zerror("%s", m)
			}
			code, done = c.zoneadmdFailed("%s", msgs[len(msgs)-1]), true
			return false
		}
		if err := c.h.giveZoneUID(z); err != nil {
			c.zerror("%v", err)
			code, done = c.zoneadmdFailed("unable to give the zone a user"), true
			return false
		}
		if err := c.h.mountLofs(z); err != nil {
			c.zerror("%v", err)
			code, done = c.zoneadmdFailed("unable to mount file systems"), true
			return false
		}
		if z.State != stateReady {
			enterReady(st, z)
		}
		z.BootID, z.BootOwner = bootID, os.Getpid()
		booting = z
		return true
	})
	if err != nil {
		return c.stateErr(err)
	}
	if waitOther {
		return c.waitForOtherBoot()
	}
	if done {
		return code
	}
	c.faults.sleep()
	// Outside the host's lock: a large zone root takes a while to walk.
	err = c.h.handOverZone(booting)
	if err == nil {
		err = startSupervisor(c.h, c.zone, bootID)
	}
	if err != nil {
		c.h.update(func(st *State) bool {
			z := st.zone(c.zone)
			if z != nil && z.BootID == bootID {
				leaveKernel(st, z)
			}
			return true
		})
		c.zerror("%v", err)
		return c.zoneadmdFailed("boot failed")
	}
	return 0
}

// waitForOtherBoot handles a boot racing another boot of the same zone:
// like zoneadmd serialising requests, it waits for the first to finish.
func (c *zoneadmCall) waitForOtherBoot() int {
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
		z, err := c.zoneCopy()
		if err != nil {
			return c.stateErr(err)
		}
		if z.State == stateRunning {
			c.zerror("zone is already booted")
			return 0
		}
		if z.State != stateReady || z.BootID == "" {
			return c.zoneadmdFailed("boot failed")
		}
	}
	return c.zoneadmdFailed("boot failed")
}

// halt
func (c *zoneadmCall) halt() int {
	for _, a := range c.args {
		if a != "-X" {
			c.subUsage("halt")
			return 2
		}
	}
	return c.stopZone(false, "halt")
}

// stopZone halts (graceful=false) or shuts down the zone.
func (c *zoneadmCall) stopZone(graceful bool, cmd string) int {
	var pid int
	code, done := 0, false
	err := c.h.update(func(st *State) bool {
		z := st.zone(c.zone)
		switch {
		case graceful && z.State != stateRunning:
			// shutdown's client-side check: only a zone with an id gets as
			// far as zoneadmd, which refuses a ready one.
			if z.State == stateReady {
				code = c.zoneadmdFailed("%s operation is invalid for zones in state '%s'", cmd, z.State)
			} else {
				c.zerror("not running")
				code = 1
			}
			done = true
			return false
		case z.State == stateConfigured:
			code, done = c.zoneadmdFailed("cannot manage a zone which is in state '%s'", z.State), true
			return false
		case z.State == stateIncomplete:
			code, done = c.zoneadmdFailed("%s operation is invalid for zones in state '%s'", cmd, z.State), true
			return false
		case z.State == stateInstalled && !graceful:
			c.zerror("zone is already halted")
			done = true
			return false
		}
		pid = z.SupervisorPID
		if z.State == stateReady {
			leaveKernel(st, z)
			done = true
			return true
		}
		z.State = stateShuttingDown
		return true
	})
	if err != nil {
		return c.stateErr(err)
	}
	if done {
		return code
	}
	stopSupervisor(c.h, c.zone, pid, graceful)
	err = c.h.update(func(st *State) bool {
		if z := st.zone(c.zone); z != nil {
			killServiceGroups(z)
			leaveKernel(st, z)
		}
		return true
	})
	if err != nil {
		return c.stateErr(err)
	}
	return 0
}

// reboot [-- bootargs]
func (c *zoneadmCall) reboot() int {
	z, err := c.zoneCopy()
	if err != nil {
		return c.stateErr(err)
	}
	switch {
	case z.State == stateReady:
		return c.zoneadmdFailed("%s operation is invalid for zones in state '%s'", "reboot", z.State)
	case z.State != stateRunning:
		c.zerror("not running")
		return 1
	}
	if code := c.stopZone(false, "reboot"); code != 0 {
		return code
	}
	return c.bootZone(false)
}

// shutdown [-r [-- bootargs]]
func (c *zoneadmCall) shutdown() int {
	rebootAfter := false
	for _, a := range c.args {
		if a == "--" {
			break
		}
		if a == "-r" {
			rebootAfter = true
			continue
		}
		c.subUsage("shutdown [-r [-- boot_arguments]]")
		return 2
	}
	if code := c.stopZone(true, "shutdown"); code != 0 || !rebootAfter {
		return code
	}
	return c.bootZone(false)
}

// clone [-m copy] [-s snapshot] SOURCE
func (c *zoneadmCall) clone() int {
	var src, snapName string
	copyMode := false
	for i := 0; i < len(c.args); i++ {
		a := c.args[i]
		switch {
		case a == "-m" && i+1 < len(c.args):
			if c.args[i+1] != "copy" {
				c.subUsage("clone [-m method] [-s <ZFS snapshot>] [brand-specific args] zonename")
				return 2
			}
			copyMode = true
			i++
		case a == "-s" && i+1 < len(c.args):
			snapName = c.args[i+1]
			i++
		case strings.HasPrefix(a, "-"):
			c.subUsage("clone [-m method] [-s <ZFS snapshot>] [brand-specific args] zonename")
			return 2
		default:
			src = a
		}
	}
	if src == "" {
		c.subUsage("clone [-m method] [-s <ZFS snapshot>] [brand-specific args] zonename")
		return 2
	}
	code := 0
	var srcRoot, dstRoot, msg string
	err := c.h.update(func(st *State) bool {
		z := st.zone(c.zone)
		if !c.checkState(z, "clone") {
			code = 1
			return false
		}
		sz := st.zone(src)
		if sz == nil {
			c.errf("zoneadm: %s: No such zone configured", src)
			code = 1
			return false
		}
		switch {
		case inKernel(sz.State):
			c.errf("zoneadm: zone '%s': %s operation is invalid for %s zones.", src, "clone", sz.State)
			code = 1
			return false
		case sz.State != stateInstalled:
			c.errf("zoneadm: zone '%s': must be installed before %s.", src, "clone")
			code = 1
			return false
		case sz.Config.Brand != z.Config.Brand:
			c.zerror("source zone %s is of brand %s, not %s", src, sz.Config.Brand, z.Config.Brand)
			code = 1
			return false
		}
		z.State = stateIncomplete
		if _, err := c.prepareZonepath(st, z, false); err != nil {
			c.zerror("%v", err)
			z.State = stateConfigured
			code = 1
			return true
		}
		srcDS := datasetMountedAt(st, sz.Config.Zonepath)
		switch {
		case snapName != "":
			msg = fmt.Sprintf("Cloning snapshot %s", snapName)
		case srcDS != nil && !copyMode:
			n := 1
			for st.dataset(fmt.Sprintf("%s@SUNWzone%d", srcDS.Name, n)) != nil {
				n++
			}
			snap := fmt.Sprintf("%s@SUNWzone%d", srcDS.Name, n)
			takeSnapshot(c.h, st, srcDS, snap)
			msg = fmt.Sprintf("Cloning snapshot %s", snap)
		default:
			msg = fmt.Sprintf("Copying %s...", sz.Config.Zonepath)
		}
		srcRoot, dstRoot = c.h.zoneRoot(sz), c.h.zoneRoot(z)
		z.Services = cloneServices(sz.Services)
		return true
	})
	if err != nil {
		return c.stateErr(err)
	}
	if code != 0 {
		return code
	}
	c.outf("%s", msg)
	c.faults.sleep()
	if err := copyTree(srcRoot, dstRoot); err != nil {
		c.zerror("clone failed: %v", err)
		return c.finishInstall(255)
	}
	return c.finishInstall(0)
}

func cloneServices(in []*Service) []*Service {
	var out []*Service
	for _, s := range in {
		cp := *s
		cp.PID, cp.Restarts, cp.RestartReq, cp.ClearReq = 0, 0, 0, 0
		if cp.State != "disabled" && cp.State != "maintenance" {
			cp.State = "offline"
		}
		out = append(out, &cp)
	}
	return out
}

// mark incomplete
func (c *zoneadmCall) mark() int {
	if len(c.args) != 1 || c.args[0] != "incomplete" {
		c.subUsage("mark incomplete")
		return 2
	}
	return c.simpleTransition("mark", stateIncomplete)
}

// detach [-n]: installed -> configured, files untouched.
func (c *zoneadmCall) detach() int {
	return c.simpleTransition("detach", stateConfigured)
}

// attach [-F] [-n path]: configured -> installed when the zonepath exists.
func (c *zoneadmCall) attach() int {
	code := 0
	err := c.h.update(func(st *State) bool {
		z := st.zone(c.zone)
		if !c.checkState(z, "attach") {
			code = 1
			return false
		}
		if z.State != stateConfigured {
			c.zerror("must be in state '%s' before attach.", stateConfigured)
			code = 1
			return false
		}
		if _, err := os.Stat(c.h.zoneRoot(z)); err != nil {
			c.zerror("the zonepath %s has no zone installed in it", z.Config.Zonepath)
			code = 1
			return false
		}
		z.State = stateInstalled
		if z.UUID == "" {
			z.UUID = newUUID()
		}
		return true
	})
	if err != nil {
		return c.stateErr(err)
	}
	return code
}

func (c *zoneadmCall) simpleTransition(cmd, to string) int {
	code := 0
	err := c.h.update(func(st *State) bool {
		z := st.zone(c.zone)
		if !c.checkState(z, cmd) {
			code = 1
			return false
		}
		z.State = to
		return true
	})
	if err != nil {
		return c.stateErr(err)
	}
	return code
}

// move is not simulated.
func (c *zoneadmCall) move() int {
	c.zerror("move is not supported by illumos-sim")
	return 1
}

// mountLofs realises the zone's lofs file systems: each dir inside the
// zone root becomes a link to its special's directory, so the zone's
// processes, which run in the zone root, reach the mounted files by
// relative paths (data/f for /data/f). A special that does not exist
// fails the boot, as the mount would. Read-only mounts are not enforced.
// The mount point is looked up in the zone's view (zoneFS): the zone's
// user owns the zone root, and a link it made on the way must not lead
// the simulator to remove or create anything outside the zone.
func (h *host) mountLofs(z *Zone) error {
	fsys := h.zoneFS(z, zoneUser{}) // the simulator's own rights: the zone is not handed over yet
	for _, r := range z.Config.resources("fs") {
		if r.Props["type"] != "lofs" {
			continue
		}
		dir, special := r.Props["dir"], h.hostPath(r.Props["special"])
		if fi, err := os.Stat(special); err != nil || !fi.IsDir() {
			return fmt.Errorf("cannot mount %s on %s: %s is not a directory", r.Props["special"], dir, r.Props["special"])
		}
		parent, base := path.Split(path.Clean("/" + dir))
		if base == "" {
			return fmt.Errorf("cannot mount %s on %s: the zone's root", r.Props["special"], dir)
		}
		d, err := fsys.openFile(parent, os.O_RDONLY|unix.O_DIRECTORY, 0, true)
		if err != nil {
			return fmt.Errorf("cannot mount %s on %s: %s", r.Props["special"], dir, strerror(err))
		}
		err = mountLofsAt(int(d.Fd()), base, special)
		d.Close()
		if err != nil {
			return fmt.Errorf("cannot mount %s on %s: %s", r.Props["special"], dir, strerror(err))
		}
	}
	return nil
}

// unmountLofs takes the zone's lofs links away, leaving their mount
// points as empty directories (looked up in the zone's view, as mountLofs
// does).
func (h *host) unmountLofs(z *Zone) {
	fsys := h.zoneFS(z, zoneUser{})
	for _, r := range z.Config.resources("fs") {
		if r.Props["type"] != "lofs" {
			continue
		}
		parent, base := path.Split(path.Clean("/" + r.Props["dir"]))
		if base == "" {
			continue
		}
		d, err := fsys.openFile(parent, os.O_RDONLY|unix.O_DIRECTORY, 0, false)
		if err != nil {
			continue
		}
		unmountLofsAt(int(d.Fd()), base)
		d.Close()
	}
}
