package sim

import (
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// A zone's processes (SMF methods, zlogin commands) are the simulated
// zone's, not the simulator's: they get an environment of their own, and
// when the simulator runs as root each zone's processes run as a uid and
// gid of that zone's own, the simulated zone's root. That user owns the
// zone's files: booting a zone hands it the zone root, the datasets
// mounted into it and its devices, as on illumos a zone's root owns what
// is inside the zone. Another zone's processes are another user's, so a
// zone can neither signal them nor read their /proc files (environment,
// memory), and the tops of its trees are closed to others. The
// simulator's own files (state, locks) stay root's and unreadable by
// every zone.

// zoneUIDCounter holds the next uid this machine gives a zone. It is one
// file for the whole machine, whatever the state root, so the zones of
// several simulated hosts on one machine never share a uid; it only
// counts up, so no uid is given twice while a zone holding it can exist.
// The host fact zone_uid_counter names another: the hosts of a stack in a
// user namespace of its own share theirs.
const zoneUIDCounter = "/var/lib/illumos-sim/next-zone-uid"

// defaultZoneUIDBase is the first uid given to a zone: far above the
// uids of people and system users and above the first subordinate-uid
// ranges (useradd gives each user 65536 from 100000 in /etc/subuid),
// below 2^31 where some tools stop treating ids as numbers. The host fact
// zone_uid_base moves it where a machine needs.
const defaultZoneUIDBase = 2000000

// maxZoneUID is the last uid given to a zone.
const maxZoneUID = math.MaxInt32 - 1

// zoneUser is the user a zone's processes run as.
type zoneUser struct {
	name string
	home string
	uid  uint32
	gid  uint32
	// access is the zone's access group (zoneIDs.access) the user holds
	// besides gid; 0: none.
	access uint32
	// drop is set when the simulator runs as root: the processes switch
	// to uid and gid, with no supplementary group but access.
	drop bool
}

// zoneUser is the user z's processes run as: under root, the zone's own
// uid, with the group of the same number, named root inside the zone
// (illumos' zlogin logs in as the zone's root) and at home in the zone's
// root; otherwise the caller's user, who is every zone's.
func (h *host) zoneUser(z *Zone) (zoneUser, error) {
	if os.Geteuid() != 0 {
		u := zoneUser{uid: uint32(os.Getuid()), gid: uint32(os.Getgid()), home: "/"}
		if cur, err := user.Current(); err == nil {
			u.name, u.home = cur.Username, cur.HomeDir
		}
		return u, nil
	}
	if z.UID == 0 {
		return zoneUser{}, fmt.Errorf("zone %s has no user of its own (booted by an older illumos-sim): reboot it", z.Name)
	}
	return zoneUser{name: "root", home: h.zoneRoot(z), uid: z.UID, gid: z.UID, access: z.ids().access(), drop: true}, nil
}

// zoneLogin is the zone's user name (a login name of the zone's
// /etc/passwd, or a uid) in group (a group name of its /etc/group, or a
// gid; empty: the user's own, or 0 for a uid the passwd file does not
// name), as method_credential and zlogin -l name them; "" or root is the
// zone's root. The user runs as the machine's id of its uid in the zone's
// block: a zone that owns one id only (a stack in a user namespace of its
// own) cannot run anyone but its root. Without root the simulator runs
// every zone's processes as the caller, whoever the user.
func (h *host) zoneLogin(z *Zone, name, group string) (zoneUser, error) {
	root, err := h.zoneUser(z)
	if err != nil || !root.drop || (name == "" || name == "root") && group == "" {
		return root, err
	}
	fsys, err := os.OpenRoot(h.zoneRoot(z))
	if err != nil {
		return zoneUser{}, err
	}
	defer fsys.Close()
	u := zoneUser{name: "root", home: "/", access: root.access, drop: true}
	var uid, gid uint64
	if name != "" && name != "root" {
		pw, found := lookupIDFile(fsys, "etc/passwd", name)
		switch {
		case found:
			var err1, err2 error
			uid, err1 = strconv.ParseUint(pw[2], 10, 32)
			gid, err2 = strconv.ParseUint(pw[3], 10, 32)
			if err1 != nil || err2 != nil {
				return zoneUser{}, fmt.Errorf("user %q: the zone's /etc/passwd gives it no numeric uid and gid", name)
			}
			u.name, u.home = pw[0], pw[5]
		default:
			n, err := strconv.ParseUint(name, 10, 32)
			if err != nil {
				return zoneUser{}, fmt.Errorf("user %q: no such user in the zone's /etc/passwd", name)
			}
			uid, u.name = n, name
		}
	}
	if group != "" {
		gr, found := lookupIDFile(fsys, "etc/group", group)
		switch {
		case found:
			if gid, err = strconv.ParseUint(gr[2], 10, 32); err != nil {
				return zoneUser{}, fmt.Errorf("group %q: the zone's /etc/group gives it no numeric gid", group)
			}
		default:
			n, err := strconv.ParseUint(group, 10, 32)
			if err != nil {
				return zoneUser{}, fmt.Errorf("group %q: no such group in the zone's /etc/group", group)
			}
			gid = n
		}
	}
	ids := z.ids()
	mu, okU := ids.machine(uint32(uid))
	mg, okG := ids.machine(uint32(gid))
	if !okU || !okG {
		if ids.n <= 1 {
			return zoneUser{}, fmt.Errorf("user %q: this simulated host gives each zone one id, its root's (no room for more in its user namespace), so it runs nothing as another user", name+":"+group)
		}
		return zoneUser{}, fmt.Errorf("user %q: uid %d or gid %d is past the zone's %d ids", name+":"+group, uid, gid, ids.n)
	}
	u.uid, u.gid, u.home = mu, mg, filepath.Join(h.zoneRoot(z), filepath.Clean("/"+u.home))
	return u, nil
}

// lookupIDFile finds the entry of an /etc/passwd- or /etc/group-shaped
// file of the zone whose name, or else whose id, is key.
func lookupIDFile(fsys *os.Root, file, key string) ([]string, bool) {
	b, err := fsys.ReadFile(file)
	if err != nil {
		return nil, false
	}
	var byID []string
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Split(line, ":")
		if len(f) < 4 || (file == "etc/passwd" && len(f) < 7) {
			continue
		}
		if f[0] == key {
			return f, true
		}
		if f[2] == key && byID == nil {
			byID = f
		}
	}
	return byID, byID != nil
}

// giveZoneUID gives z its ids when it enters the kernel for the first
// time as root: a block of the machine's (zoneuids.go) as the machine's
// root, else one id from the counter. It keeps them until it is
// uninstalled (halts, reboots, renames). Callers hold the host lock; the
// machine's lock is taken after it and nothing is waited for while
// holding it.
func (h *host) giveZoneUID(z *Zone) error {
	if os.Geteuid() != 0 || z.UID != 0 {
		return nil
	}
	base := h.facts.ZoneUIDBase
	if base == 0 {
		base = defaultZoneUIDBase
	}
	if machineRoot() {
		uid, err := takeZoneUIDBlock(zoneUIDBlocks, h.root, base)
		if err != nil {
			return err
		}
		z.UID, z.UIDs = uid, zoneUIDBlock
		return nil
	}
	last := uint32(maxZoneUID)
	if b, err := os.ReadFile("/proc/self/uid_map"); err == nil {
		base, last = zoneUIDRange(string(b), base)
	}
	counter := zoneUIDCounter
	if h.facts.ZoneUIDCounter != "" {
		counter = h.facts.ZoneUIDCounter
	}
	uid, err := nextZoneUID(counter, base, last)
	if err != nil {
		return err
	}
	z.UID = uid
	return nil
}

// userNamespaceZoneUIDBase is the first uid a zone gets in a user
// namespace whose ids are mapped in blocks (its own subordinate ids):
// clear of the ids its system users would have.
const userNamespaceZoneUIDBase = 10000

// zoneUIDRange is the first and last uid zones may get, given the
// simulator's user namespace's uid_map: from base up as the machine's
// root, where every id is its own; in a user namespace of its own, the
// largest block mapped beside its root (0), from 10000 or base if the
// block holds it, so each zone's id is an id of the machine's and
// nobody's else.
func zoneUIDRange(uidMap string, base uint32) (uint32, uint32) {
	var lo, hi uint64
	for _, line := range strings.Split(uidMap, "\n") {
		f := strings.Fields(line)
		if len(f) != 3 {
			continue
		}
		inside, err1 := strconv.ParseUint(f[0], 10, 32)
		outside, err2 := strconv.ParseUint(f[1], 10, 32)
		count, err3 := strconv.ParseUint(f[2], 10, 33)
		if err1 != nil || err2 != nil || err3 != nil {
			continue
		}
		if inside == 0 && outside == 0 && count == math.MaxUint32 { // as machineRoot
			return base, maxZoneUID // the machine's own ids
		}
		if inside > 0 && count > hi-lo {
			lo, hi = inside, inside+count
		}
	}
	if hi == 0 {
		return base, base - 1 // nothing to give
	}
	first := max(lo, userNamespaceZoneUIDBase)
	if uint64(base) >= lo && uint64(base) < hi {
		first = uint64(base)
	}
	return uint32(first), uint32(min(hi-1, maxZoneUID))
}

// nextZoneUID takes the next uid, at least base and at most last, from
// the counter file under its lock, and writes the counter back durably
// before the uid is used.
func nextZoneUID(counter string, base, last uint32) (uint32, error) {
	if err := os.MkdirAll(filepath.Dir(counter), 0o700); err != nil {
		return 0, fmt.Errorf("zone uids: %w", err)
	}
	l, err := lockFile(counter+".lock", true)
	if err != nil {
		return 0, fmt.Errorf("zone uids: %w", err)
	}
	defer l.release()
	next := uint64(base)
	b, err := os.ReadFile(counter)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return 0, fmt.Errorf("zone uids: %w", err)
	default:
		n, perr := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 32)
		if perr != nil {
			return 0, fmt.Errorf("zone uids: %s holds %q, not a uid", counter, b)
		}
		next = max(next, n)
	}
	if next > uint64(last) {
		return 0, fmt.Errorf("zone uids: none left from %d to %d (%s)", base, last, counter)
	}
	if err := writeFileDurably(counter, []byte(strconv.FormatUint(next+1, 10)+"\n")); err != nil {
		return 0, fmt.Errorf("zone uids: %w", err)
	}
	return uint32(next), nil
}

// writeFileDurably is writeFileAtomic with the data on disk before the
// rename: a crash must not bring an older counter back.
func writeFileDurably(path string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".tmp-"+filepath.Base(path)+"-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // once renamed, nothing is there
	_, err = tmp.Write(data)
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		return err
	}
	return syncDir(filepath.Dir(path))
}

// credential is what a spawn of a zone's process sets: nil keeps the
// simulator's user; an empty group list clears supplementary groups.
func (u zoneUser) credential() *syscall.Credential {
	if !u.drop {
		return nil
	}
	groups := []uint32{}
	if u.access != 0 && u.access != u.gid {
		groups = append(groups, u.access)
	}
	return &syscall.Credential{Uid: u.uid, Gid: u.gid, Groups: groups}
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
// the zone root, the lofs-mounted directories (a claim's dataset that
// last served another zone, here or on another host, becomes this
// zone's) and the devices; closes the top of each to every other user;
// and lets the zone's user reach them (search permission on the
// directories above the state root; nothing becomes readable). A no-op
// unless running as root.
func (h *host) handOverZone(z *Zone) error {
	u, err := h.zoneUser(z)
	if err != nil || !u.drop {
		return err
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
		if err := chownTree(t, z.ids()); err != nil {
			return fmt.Errorf("hand %s to the zone: %w", t, err)
		}
	}
	for _, r := range z.Config.resources("device") {
		dev := h.hostPath(r.Props["match"])
		if err := grantSearch(filepath.Dir(dev)); err != nil {
			return err
		}
		if err := handOver(dev, u.uid, u.gid); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("hand %s to the zone: %w", dev, err)
		}
	}
	return nil
}

// handOver gives the file (not a link's target) to uid:gid, readable and
// writable by them alone.
func handOver(path string, uid, gid uint32) error {
	if err := os.Lchown(path, int(uid), int(gid)); err != nil {
		return err
	}
	fi, err := os.Lstat(path)
	if err != nil || fi.Mode()&fs.ModeSymlink != 0 {
		return err
	}
	return os.Chmod(path, fi.Mode().Perm()&^0o077)
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

// chownTree gives every file under dir (links themselves, never their
// targets) to the zone whose ids are ids, each to the zone's id its owner
// stands for (zoneIDs.claim), and dir itself to the zone's root, entered
// only by the zone's users.
// The walk stays inside dir (os.Root): a link the tree's previous owner
// planted, or a directory swapped for one mid-walk, cannot take a chown
// elsewhere.
func chownTree(dir string, ids zoneIDs) error {
	root, err := os.OpenRoot(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer root.Close()
	if err := chownIn(root, ids); err != nil {
		return err
	}
	group, closed := ids.base, fs.FileMode(0o077)
	if a := ids.access(); a != 0 {
		group, closed = a, 0o027 // the zone's users may enter
	}
	if err := root.Lchown(".", int(ids.base), int(group)); err != nil {
		return err
	}
	fi, err := root.Stat(".")
	if err != nil {
		return err
	}
	return root.Chmod(".", fi.Mode().Perm()&^closed)
}

// claimEntry gives one entry of dir to the zone's id its owner stands
// for, leaving one that is the zone's already.
func claimEntry(dir *os.Root, name string, ids zoneIDs) error {
	uid, gid := ids.base, ids.base
	if ids.n > 1 {
		fi, err := dir.Lstat(name)
		if err != nil {
			return err
		}
		if st, ok := fi.Sys().(*syscall.Stat_t); ok {
			uid, gid = ids.claim(st.Uid), ids.claim(st.Gid)
			if st.Uid == uid && st.Gid == gid {
				return nil
			}
		}
	}
	return dir.Lchown(name, int(uid), int(gid))
}

// chownIn gives what dir holds to the zone, one directory at a time, each
// opened as a root of its own so every chown names a single entry.
func chownIn(dir *os.Root, ids zoneIDs) error {
	d, err := dir.Open(".")
	if err != nil {
		return err
	}
	entries, err := d.ReadDir(-1)
	d.Close()
	if err != nil {
		return err
	}
	for _, e := range entries {
		if err := claimEntry(dir, e.Name(), ids); err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				continue
			}
			return err
		}
		if !e.IsDir() {
			continue
		}
		sub, err := dir.OpenRoot(e.Name())
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return err
		}
		err = chownIn(sub, ids)
		sub.Close()
		if err != nil {
			return err
		}
	}
	return nil
}

// limitProcesses makes zone.max-processes and zone.max-lwps of z the
// kernel's for the processes this one starts as z's user u: a zone's
// processes run as a uid of its own, so Linux's limit on one uid's tasks
// (RLIMIT_NPROC) is the zone's. Linux counts threads there, illumos's
// LWPs, and has no count of processes alone: the limit is the lower of
// the two, so a threaded process meets max-processes sooner than on
// illumos, never later. The caller, the machine's root, sets it on
// itself and is not held to it (the kernel exempts the initial
// namespace's root); the processes it starts inherit it, and a fork or a
// thread past it fails with EAGAIN, as in a zone at its limit. A user
// namespace's root is held to it, counting every process of the stack,
// so a stack in a user namespace of its own enforces none.
func limitProcesses(z *Zone, u zoneUser) error {
	if !u.drop || z.Config == nil || !machineRoot() {
		return nil
	}
	limit := uint64(0)
	for _, rctl := range []string{"zone.max-processes", "zone.max-lwps"} {
		v, ok := z.Config.rctlLimit(rctl)
		if !ok {
			continue
		}
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return fmt.Errorf("%s %q: %w", rctl, v, err)
		}
		if limit == 0 || n < limit {
			limit = n
		}
	}
	if limit == 0 {
		return nil
	}
	return unix.Setrlimit(unix.RLIMIT_NPROC, &unix.Rlimit{Cur: limit, Max: limit})
}

// machineRoot says whether this process is the machine's root, in the
// initial user namespace, where every id maps to itself.
func machineRoot() bool {
	if os.Geteuid() != 0 {
		return false
	}
	b, err := os.ReadFile("/proc/self/uid_map")
	if err != nil {
		return false
	}
	f := strings.Fields(string(b))
	return len(f) == 3 && f[0] == "0" && f[1] == "0" && f[2] == "4294967295"
}
