package sim

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/term"
)

// Changes below the kernel states: install, uninstall and clone, with the
// zonepath and the brand installer, and mark, detach, attach and move (spec §2.6).

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
	// Its files are gone: its ids go to the next zone.
	if z.UIDs > 1 {
		if err := releaseZoneUIDBlock(zoneUIDBlocks, c.h.root, z.UID); err != nil {
			c.zerror("%v", err)
		}
	}
	if z.UIDs > 1 || machineRoot() {
		z.UID, z.UIDs = 0, 0
	}
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
		c.h.releaseCgroups(z) // left by a halt that could not remove them
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
