package sim

import (
	"io/fs"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"
)

// A zone's processes (SMF methods, zlogin commands) are the simulated
// zone's, not the simulator's: they get an environment of their own, and
// when the simulator runs as root they run as an unprivileged user, the
// simulated zone's root. That user owns the zone's files: booting a zone
// hands it the zone root, the datasets mounted into it and its devices, as
// on illumos a zone's root owns what is inside the zone. The simulator's
// own files (state, locks) stay root's and unreadable by the zone.

// fallbackID is nobody's uid and gid on most Linux systems.
const fallbackID = 65534

// zoneUser is the user a zone's processes run as.
type zoneUser struct {
	name string
	home string
	uid  uint32
	gid  uint32
	// drop is set when the simulator runs as root: the processes switch
	// to uid and gid, without supplementary groups.
	drop bool
}

// zoneUser resolves the host's run-as user (host fact run_as, default
// nobody) when the simulator runs as root; otherwise the processes stay
// the caller's user.
func (h *host) zoneUser() zoneUser {
	if os.Geteuid() != 0 {
		u := zoneUser{uid: uint32(os.Getuid()), gid: uint32(os.Getgid()), home: "/"}
		if cur, err := user.Current(); err == nil {
			u.name, u.home = cur.Username, cur.HomeDir
		}
		return u
	}
	name := h.facts.RunAs
	if name == "" {
		name = "nobody"
	}
	u := zoneUser{name: name, home: "/", uid: fallbackID, gid: fallbackID, drop: true}
	found, err := user.Lookup(name)
	if err != nil {
		found, err = user.LookupId(name)
	}
	if err != nil {
		if id, perr := strconv.ParseUint(name, 10, 32); perr == nil {
			u.uid, u.gid = uint32(id), uint32(id)
		}
		return u
	}
	uid, _ := strconv.ParseUint(found.Uid, 10, 32)
	gid, _ := strconv.ParseUint(found.Gid, 10, 32)
	u.name, u.uid, u.gid = found.Username, uint32(uid), uint32(gid)
	if found.HomeDir != "" {
		u.home = found.HomeDir
	}
	return u
}

// credential is what a spawn of a zone's process sets: nil keeps the
// simulator's user; an empty group list clears supplementary groups.
func (u zoneUser) credential() *syscall.Credential {
	if !u.drop {
		return nil
	}
	return &syscall.Credential{Uid: u.uid, Gid: u.gid, Groups: []uint32{}}
}

// loginEnv names the user to the process, as login and svc.startd do.
func (u zoneUser) loginEnv() []string {
	return []string{"HOME=" + u.home, "LOGNAME=" + u.name, "USER=" + u.name}
}

// zoneEnv is what the simulator's in-zone commands need to act on this
// zone (its own variables, no secrets), with the zone's command directory
// first on PATH.
func (h *host) zoneEnv(zone string) []string {
	return []string{
		"PATH=" + h.zoneBinDir(zone) + ":/usr/sbin:/usr/bin:/sbin:/bin",
		EnvRoot + "=" + h.root,
		EnvZone + "=" + zone,
	}
}

// handOverZone gives the zone's files to its user before the zone boots:
// the zone root, the lofs-mounted directories and the devices, and lets
// that user reach them (search permission on the directories above the
// state root; nothing becomes readable). A no-op unless running as root.
func (h *host) handOverZone(z *Zone) error {
	u := h.zoneUser()
	if !u.drop {
		return nil
	}
	if err := grantSearch(h.root); err != nil {
		return err
	}
	zonepath := filepath.Dir(h.zoneRoot(z))
	if err := grantSearch(zonepath); err != nil {
		return err
	}
	trees := []string{h.zoneRoot(z)}
	for _, r := range z.Config.resources("fs") {
		if r.Props["type"] == "lofs" {
			trees = append(trees, h.hostPath(r.Props["special"]))
		}
	}
	for _, t := range trees {
		if err := chownTree(t, u.uid, u.gid); err != nil {
			return err
		}
	}
	for _, r := range z.Config.resources("device") {
		dev := h.hostPath(r.Props["match"])
		if err := grantSearch(filepath.Dir(dev)); err != nil {
			return err
		}
		if err := os.Lchown(dev, int(u.uid), int(u.gid)); err != nil && !os.IsNotExist(err) {
			return err
		}
	}
	return nil
}

// grantSearch adds search permission for others to dir and every directory
// above it, so the zone's user can walk down to its files by absolute path.
func grantSearch(dir string) error {
	for d := filepath.Clean(dir); ; d = filepath.Dir(d) {
		fi, err := os.Stat(d)
		if err != nil {
			if os.IsNotExist(err) {
				if d == filepath.Dir(d) {
					return nil
				}
				continue
			}
			return err
		}
		if fi.Mode().Perm()&0o001 == 0 {
			if err := os.Chmod(d, fi.Mode().Perm()|0o001); err != nil {
				return err
			}
		}
		if d == filepath.Dir(d) {
			return nil
		}
	}
}

// chownTree gives every file under dir (links themselves, not their
// targets) to uid:gid.
func chownTree(dir string, uid, gid uint32) error {
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, int(uid), int(gid))
	})
	if os.IsNotExist(err) {
		return nil
	}
	return err
}
