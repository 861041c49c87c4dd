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
	// drop is set when the simulator runs as root: the processes switch
	// to uid and gid, without supplementary groups.
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
	return zoneUser{name: "root", home: h.zoneRoot(z), uid: z.UID, gid: z.UID, drop: true}, nil
}

// giveZoneUID gives z its uid when it enters the kernel for the first
// time as root; it keeps it for life (halts, reboots, renames). Callers
// hold the host lock; the machine's counter lock is taken after it and
// nothing is waited for while holding it.
func (h *host) giveZoneUID(z *Zone) error {
	if os.Geteuid() != 0 || z.UID != 0 {
		return nil
	}
	base := h.facts.ZoneUIDBase
	if base == 0 {
		base = defaultZoneUIDBase
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
	d, err := os.Open(filepath.Dir(path))
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
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
		if err := chownTree(t, u.uid, u.gid); err != nil {
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
// targets) to uid:gid, and dir itself to them alone. The walk stays
// inside dir (os.Root): a link the tree's previous owner planted, or a
// directory swapped for one mid-walk, cannot take a chown elsewhere.
func chownTree(dir string, uid, gid uint32) error {
	root, err := os.OpenRoot(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer root.Close()
	if err := chownIn(root, int(uid), int(gid)); err != nil {
		return err
	}
	if err := root.Lchown(".", int(uid), int(gid)); err != nil {
		return err
	}
	fi, err := root.Stat(".")
	if err != nil {
		return err
	}
	return root.Chmod(".", fi.Mode().Perm()&^0o077)
}

// chownIn gives what dir holds to uid:gid, one directory at a time, each
// opened as a root of its own so every chown names a single entry.
func chownIn(dir *os.Root, uid, gid int) error {
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
		if err := dir.Lchown(e.Name(), uid, gid); err != nil {
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
		err = chownIn(sub, uid, gid)
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
