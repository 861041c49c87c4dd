package sim

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/zonewright/zonewright/internal/mountinfo"
)

// What the kernel enforces of a filesystem's properties, when the
// simulator runs as the machine's root: a filesystem with a quota is an
// ext4 image of that size (ROOT/backing/GUID.img, a sparse file) loop
// mounted at its mountpoint, so a write past it fails (ENOSPC, where
// illumos says EDQUOT); setuid=off, devices=off and exec=off make the
// mount nosuid, nodev, noexec (a filesystem without a quota gets a bind
// mount of its directory for them). Without root nothing is mounted and
// the properties are only recorded.
//
// The mounts are the kernel's, so they outlive the command that made
// them; ROOT/run/storage.mounted names the boot and mount namespace they
// were made in, and a command that finds it missing or different (after
// stop-all, which unmounts them all, or a reboot) mounts them again.

// minBacking is the smallest image: ext4 will not make a smaller one.
const minBacking = 256 << 10

// errBusyBacking refuses to move a zone's data while the zone runs: its
// processes hold the old directory.
var errBusyBacking = errors.New("dataset is busy")

// enforcesStorage says whether this process mounts filesystems.
func (h *host) enforcesStorage() bool {
	if h.machineRoot == nil {
		r := machineRoot()
		h.machineRoot = &r
	}
	return *h.machineRoot
}

func (h *host) backingImage(d *Dataset) string {
	return filepath.Join(h.root, "backing", strconv.FormatUint(d.GUID, 10)+".img")
}

func (h *host) storageMarker() string { return filepath.Join(h.root, "run", "storage.mounted") }

// storageEpoch names this boot and mount namespace.
func storageEpoch() string {
	boot, _ := os.ReadFile("/proc/sys/kernel/random/boot_id")
	ns, _ := os.Readlink("/proc/self/ns/mnt")
	return strings.TrimSpace(string(boot)) + " " + ns + "\n"
}

// mountStorage mounts every filesystem's storage again if its mounts
// are not this boot's and namespace's (a restarted stack): one file read
// when they are.
func (h *host) mountStorage(st *State) {
	if !h.enforcesStorage() {
		return
	}
	epoch := storageEpoch()
	if b, err := os.ReadFile(h.storageMarker()); err == nil && string(b) == epoch {
		return
	}
	fss := append([]*Dataset(nil), st.Datasets...)
	sortDatasets(fss)
	for _, d := range fss {
		if err := h.realiseStorage(st, d); err != nil {
			h.storageLog("mount %s: %v", d.Name, err)
		}
	}
	_ = os.MkdirAll(filepath.Dir(h.storageMarker()), 0o755)
	_ = os.WriteFile(h.storageMarker(), []byte(epoch), 0o644)
}

// unmountStorage takes every mount the simulator made under the root
// away (stop-all); the images stay, with their data.
func (h *host) unmountStorage() {
	os.Remove(h.storageMarker())
	detachBelow(h.root, true)
}

// storageLog records what could not be mounted (the command's own result
// stands).
func (h *host) storageLog(format string, a ...any) { h.runLog("storage.log", format, a...) }

// mountFlags are the mount options a filesystem's properties ask for.
func (st *State) mountFlags(h *host, d *Dataset) uintptr {
	var flags uintptr
	for prop, flag := range map[string]uintptr{"setuid": unix.MS_NOSUID, "devices": unix.MS_NODEV, "exec": unix.MS_NOEXEC} {
		if v, _ := st.propValue(h, d, prop); v == "off" {
			flags |= flag
		}
	}
	return flags
}

// storageDir is where a filesystem's files are ("" when its mountpoint
// is none or legacy).
func (h *host) storageDir(st *State, d *Dataset) string {
	mp, _ := st.mountpoint(d)
	if d.Type != "filesystem" || !strings.HasPrefix(mp, "/") || mp == "/" {
		return ""
	}
	return h.hostPath(mp)
}

// realiseStorageTree realises d and then its descendants (whose options
// it may pass on).
func (h *host) realiseStorageTree(st *State, d *Dataset) error {
	if err := h.realiseStorage(st, d); err != nil {
		return err
	}
	h.realiseBelow(st, d)
	return nil
}

// realiseStorage makes d's directory what its quota and mount options
// say: backed by an image of the quota's size, or not; mounted with its
// options, or a plain directory.
func (h *host) realiseStorage(st *State, d *Dataset) error {
	if d.Type != "filesystem" || !h.enforcesStorage() {
		return nil
	}
	dir := h.storageDir(st, d)
	if dir == "" {
		return nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	img := h.backingImage(d)
	_, err := os.Stat(img)
	hasImage := err == nil
	quota := propBytes(d, "quota")
	mounted := isMountPoint(dir)
	switch {
	case quota > 0 && !hasImage:
		if inUse(h, st, d) {
			return errBusyBacking
		}
		if err := h.rebuildBacking(dir, img, quota, mounted); err != nil {
			return err
		}
		mounted = true
		defer h.realiseBelow(st, d)
	case quota > 0:
		if !mounted {
			if err := mountImage(img, dir); err != nil {
				return err
			}
			mounted = true
		}
		if err := h.resizeBacking(st, d, dir, img, quota); err != nil {
			return err
		}
	case hasImage:
		// quota=none: the files go back to the host's disk, bounded by
		// the pool alone.
		if inUse(h, st, d) {
			return errBusyBacking
		}
		if err := unbackDir(dir, img, mounted); err != nil {
			return err
		}
		mounted = false
		defer h.realiseBelow(st, d)
	}
	flags := st.mountFlags(h, d)
	if flags == 0 && quota == 0 {
		if mounted {
			return unix.Unmount(dir, unix.MNT_DETACH)
		}
		return nil
	}
	if !mounted {
		if err := unix.Mount(dir, dir, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
			return fmt.Errorf("bind %s: %w", dir, err)
		}
	}
	if err := unix.Mount("", dir, "", unix.MS_REMOUNT|unix.MS_BIND|flags, ""); err != nil {
		return fmt.Errorf("remount %s: %w", dir, err)
	}
	return nil
}

// realiseBelow mounts d's descendants again after d's storage changed
// under them.
func (h *host) realiseBelow(st *State, d *Dataset) {
	for _, x := range st.Datasets {
		if x.Type == "filesystem" && strings.HasPrefix(x.Name, d.Name+"/") {
			if err := h.realiseStorage(st, x); err != nil {
				h.storageLog("realise %s: %v", x.Name, err)
			}
		}
	}
}

// realiseZoneStorage brings a booting zone's filesystems (its zonepath's
// and its lofs specials') to their properties before the zone holds them:
// a change put off while the zone ran (growing an image where the kernel
// cannot do it online) takes effect now.
func (h *host) realiseZoneStorage(st *State, z *Zone) {
	if !h.enforcesStorage() || z.Config == nil {
		return
	}
	dirs := []string{z.Config.Zonepath}
	for _, r := range z.Config.resources("fs") {
		if r.Props["type"] == "lofs" {
			dirs = append(dirs, filepath.Clean(r.Props["special"]))
		}
	}
	for _, dir := range dirs {
		if d := datasetMountedAt(st, dir); d != nil {
			if err := h.realiseStorageTree(st, d); err != nil {
				h.storageLog("boot %s: %s: %v", z.Name, d.Name, err)
			}
		}
	}
}

// inUse says whether a zone in the kernel uses d: its processes hold
// its directory, which a change of backing would leave behind.
func inUse(h *host, st *State, d *Dataset) bool {
	if _, busy := heldDatasets(st)[d.Name]; busy {
		return true
	}
	mp, _ := st.mountpoint(d)
	for _, z := range st.zones() {
		if z.Name == "global" || !inKernel(z.State) || z.Config == nil {
			continue
		}
		for _, r := range z.Config.resources("fs") {
			if r.Props["type"] == "lofs" && filepath.Clean(r.Props["special"]) == mp {
				return true
			}
		}
	}
	return false
}

// imageSize is the size of the image backing a quota.
func imageSize(quota uint64) int64 {
	return int64(max(quota, minBacking) &^ 4095)
}

// rebuildBacking puts dir's files (not those of filesystems mounted
// below it) into a new image of quota's size and mounts it at dir in
// place of what was there.
func (h *host) rebuildBacking(dir, img string, quota uint64, mounted bool) error {
	fi, err := os.Stat(dir)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(img), 0o700); err != nil {
		return err
	}
	detachBelow(dir, false)
	tmp := img + ".new"
	os.Remove(tmp)
	if err := makeImage(tmp, imageSize(quota), dir); err != nil {
		os.Remove(tmp)
		return err
	}
	if mounted {
		if err := unix.Unmount(dir, unix.MNT_DETACH); err != nil {
			os.Remove(tmp)
			return fmt.Errorf("unmount %s: %w", dir, err)
		}
	}
	// The files are in the image now; the directory under the mount
	// would only hide stale copies.
	if err := clearDir(dir); err != nil {
		os.Remove(tmp)
		return err
	}
	if err := os.Rename(tmp, img); err != nil {
		return err
	}
	if err := mountImage(img, dir); err != nil {
		return err
	}
	os.Remove(filepath.Join(dir, "lost+found")) // zfs has none
	st := fi.Sys().(*syscall.Stat_t)
	os.Chown(dir, int(st.Uid), int(st.Gid))
	return os.Chmod(dir, fi.Mode())
}

// resizeBacking grows a mounted image online to a larger quota, or
// rebuilds it smaller, refused if what is there does not fit.
func (h *host) resizeBacking(st *State, d *Dataset, dir, img string, quota uint64) error {
	fi, err := os.Stat(img)
	if err != nil {
		return err
	}
	want := imageSize(quota)
	switch {
	case fi.Size() == want:
		return nil
	case fi.Size() > want:
		if used, ok := storageUsed(dir); ok && used > uint64(want) {
			return errQuotaBelowUsed
		}
		if inUse(h, st, d) {
			return errBusyBacking
		}
		if err := h.rebuildBacking(dir, img, quota, true); err != nil {
			return err
		}
		h.realiseBelow(st, d)
		return nil
	}
	err = growOnline(dir, img, fi.Size(), want)
	if err == nil {
		return nil
	}
	if !inUse(h, st, d) {
		if err := h.rebuildBacking(dir, img, quota, true); err != nil {
			return err
		}
		h.realiseBelow(st, d)
		return nil
	}
	// Growing a mounted ext4 needs CAP_SYS_RESOURCE, which a container's
	// root may lack: the zone keeps the smaller size (stricter than the
	// quota, never kinder) until it next boots.
	h.storageLog("grow %s in use: %v; put off to its zone's next boot", d.Name, err)
	return nil
}

// growOnline grows a mounted image and its filesystem (resize2fs);
// when that fails the image gets its old size back, so a later attempt
// sees the difference again.
func growOnline(dir, img string, old, want int64) error {
	if err := os.Truncate(img, want); err != nil {
		return err
	}
	err := func() error {
		var s unix.Stat_t
		if err := unix.Stat(dir, &s); err != nil {
			return err
		}
		loop := fmt.Sprintf("/dev/loop%d", unix.Minor(s.Dev))
		f, err := os.OpenFile(loop, os.O_RDWR, 0)
		if err != nil {
			return err
		}
		err = unix.IoctlSetInt(int(f.Fd()), unix.LOOP_SET_CAPACITY, 0)
		f.Close()
		if err != nil {
			return fmt.Errorf("grow %s: %w", loop, err)
		}
		if out, err := exec.Command("resize2fs", loop).CombinedOutput(); err != nil {
			return fmt.Errorf("resize2fs %s: %v: %s", loop, err, strings.TrimSpace(string(out)))
		}
		return nil
	}()
	if err != nil {
		os.Truncate(img, old)
	}
	return err
}

// errQuotaBelowUsed is zfs's refusal of a quota below what is used.
var errQuotaBelowUsed = errors.New("size is less than current used or reserved space")

// unbackDir moves an image's files back into its directory and removes
// the image.
func unbackDir(dir, img string, mounted bool) error {
	if !mounted {
		if err := mountImage(img, dir); err != nil {
			return err
		}
	}
	detachBelow(dir, false)
	stage := img + ".out"
	os.RemoveAll(stage)
	if err := os.Mkdir(stage, 0o700); err != nil {
		return err
	}
	defer os.RemoveAll(stage)
	os.Remove(filepath.Join(dir, "lost+found"))
	if out, err := exec.Command("cp", "-a", dir+"/.", stage).CombinedOutput(); err != nil {
		return fmt.Errorf("copy out %s: %v: %s", dir, err, out)
	}
	if err := unix.Unmount(dir, unix.MNT_DETACH); err != nil {
		return fmt.Errorf("unmount %s: %w", dir, err)
	}
	if out, err := exec.Command("cp", "-a", stage+"/.", dir).CombinedOutput(); err != nil {
		return fmt.Errorf("copy back %s: %v: %s", dir, err, out)
	}
	return os.Remove(img)
}

// releaseStorage unmounts d's directory and everything mounted below it
// before they move (a rename, a new mountpoint: realiseStorageTree
// mounts them again where they go).
func (h *host) releaseStorage(st *State, d *Dataset) {
	if d.Type != "filesystem" || !h.enforcesStorage() {
		return
	}
	if dir := h.storageDir(st, d); dir != "" {
		detachBelow(dir, true)
	}
}

// dropStorage unmounts d's directory and removes its image (zfs
// destroy): its descendants are dropped on their own, and another
// filesystem mounted below stays.
func (h *host) dropStorage(st *State, d *Dataset) {
	if d.Type != "filesystem" || !h.enforcesStorage() {
		return
	}
	if dir := h.storageDir(st, d); dir != "" {
		for isMountPoint(dir) {
			if unix.Unmount(dir, unix.MNT_DETACH) != nil {
				break
			}
		}
	}
	os.Remove(h.backingImage(d))
}

// storageErrText is the zfs reason for a failure to realise storage.
func storageErrText(err error) string {
	if errors.Is(err, errQuotaBelowUsed) || errors.Is(err, errBusyBacking) {
		return err.Error()
	}
	return strerror(err)
}

// makeImage makes a sparse ext4 image of size bytes holding src's files
// (mkfs.ext4 -d): no journal and no reserved blocks, to stay small.
func makeImage(img string, size int64, src string) error {
	f, err := os.OpenFile(img, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	err = f.Truncate(size)
	f.Close()
	if err != nil {
		return err
	}
	out, err := exec.Command("mkfs.ext4", "-q", "-F", "-m", "0", "-O", "^has_journal", "-d", src, img).CombinedOutput()
	if err != nil {
		if strings.Contains(string(out), "Could not allocate") {
			return errQuotaBelowUsed
		}
		return fmt.Errorf("mkfs.ext4: %v: %s", err, strings.TrimSpace(string(out)))
	}
	return nil
}

// mountImage loop mounts img at dir; the loop device goes with the
// mount (mount(8) sets autoclear).
func mountImage(img, dir string) error {
	out, err := exec.Command("mount", "-o", "loop", img, dir).CombinedOutput()
	if err != nil {
		return fmt.Errorf("mount %s: %v: %s", img, err, strings.TrimSpace(string(out)))
	}
	return nil
}

// storageUsed is what d's files take in its image, if it has one
// mounted: one statfs.
func (h *host) storageUsed(st *State, d *Dataset) (uint64, bool) {
	if d.Type != "filesystem" || propBytes(d, "quota") == 0 || !h.enforcesStorage() {
		return 0, false
	}
	return storageUsed(h.storageDir(st, d))
}

// storageUsed is what a mounted image's files take.
func storageUsed(dir string) (uint64, bool) {
	if !isMountPoint(dir) {
		return 0, false
	}
	var s unix.Statfs_t
	if err := unix.Statfs(dir, &s); err != nil || s.Type != unix.EXT4_SUPER_MAGIC {
		return 0, false
	}
	return (s.Blocks - s.Bfree) * uint64(s.Bsize), true
}

// isMountPoint says whether something is mounted at dir.
func isMountPoint(dir string) bool {
	var a, b unix.Statx_t
	if unix.Statx(unix.AT_FDCWD, dir, unix.AT_SYMLINK_NOFOLLOW, unix.STATX_MNT_ID, &a) != nil {
		return false
	}
	if unix.Statx(unix.AT_FDCWD, filepath.Dir(dir), 0, unix.STATX_MNT_ID, &b) != nil {
		return false
	}
	return a.Mnt_id != b.Mnt_id
}

// clearDir removes what dir holds, leaving it.
func clearDir(dir string) error {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range ents {
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			return err
		}
	}
	return nil
}

// detachBelow lazily unmounts every mount below dir (and dir's own when
// self), deepest first, so a tree can be removed or moved without a
// mount left behind under it.
func detachBelow(dir string, self bool) {
	points := mountPointsBelow(dir)
	for _, p := range points {
		_ = unix.Unmount(p, unix.MNT_DETACH)
	}
	for self && isMountPoint(dir) {
		if unix.Unmount(dir, unix.MNT_DETACH) != nil {
			return
		}
	}
}

// mountPointsBelow lists the mount points under dir, deepest first.
func mountPointsBelow(dir string) []string {
	if real, err := filepath.EvalSymlinks(dir); err == nil {
		dir = real
	}
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	defer f.Close()
	var points []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 5 {
			continue
		}
		if p := mountinfo.Unescape(fields[4]); strings.HasPrefix(p, dir+"/") {
			points = append(points, p)
		}
	}
	sort.Slice(points, func(i, j int) bool { return len(points[i]) > len(points[j]) })
	return points
}
