package sim

import (
	"fmt"
	"os"
	"path"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// The kernel states: ready, boot, halt, reboot and shutdown, the zone's
// lofs mounts, and the transitions into and out of the kernel (spec §2.5, §3).

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
	st.tx.h.releaseCgroups(z)
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
		if z.State != stateReady {
			c.h.realiseZoneStorage(st, z)
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
