package sim

import (
	"fmt"
	"io"
	"os"
	"path"
	"runtime"
	"strings"

	"golang.org/x/sys/unix"
)

// A simulated in-zone command (ipnat, svccfg...) runs as the simulator,
// which needs its own access to the state, but a file it names is the
// zone's: on illumos the path is looked up in the zone's root and opened
// with the zone's credentials. zoneFS gives that view: the zone root, with
// the zone's lofs mounts (links from the zone root to their special
// directories, see mountLofs) as the directories they mount. Every
// component is looked up by the simulator itself, one at a time and never
// following a link, so neither "..", an absolute link nor a renamed
// directory leads out of the zone; and when the simulator runs as root the
// lookup and the open run on a thread whose file-system identity is the
// zone's user (setfsuid), so the kernel checks the permissions the zone's
// processes have.

// maxSymlinks is illumos' MAXSYMLINKS: more links in one lookup is ELOOP.
const maxSymlinks = 20

// zoneFS is one zone's filesystem as its processes see it.
type zoneFS struct {
	root string
	// mounts maps the zone path of each lofs mount to the host directory
	// it mounts (the target of the link mountLofs made).
	mounts map[string]string
	user   zoneUser
}

// zoneFS is z's filesystem as a process of user u sees it.
func (h *host) zoneFS(z *Zone, u zoneUser) zoneFS {
	fsys := zoneFS{root: h.zoneRoot(z), mounts: map[string]string{}, user: u}
	for _, r := range z.Config.resources("fs") {
		if r.Props["type"] == "lofs" {
			fsys.mounts[path.Clean("/"+r.Props["dir"])] = h.hostPath(r.Props["special"])
		}
	}
	return fsys
}

// readZoneFile reads name as a process of the invocation's zone would: an
// absolute path from the zone's root, a relative one from the zone root
// (where zlogin starts its commands). The error is an *os.PathError naming
// name, for the command's own message.
func (inv *invocation) readZoneFile(name string) ([]byte, error) {
	z, err := inv.h.viewZone(inv.zone)
	if err != nil {
		return nil, err
	}
	if z == nil {
		return nil, &os.PathError{Op: "open", Path: name, Err: unix.ENOENT}
	}
	u, err := inv.h.zoneUser(z)
	if err != nil {
		return nil, err
	}
	return inv.h.zoneFS(z, u).readFile(name)
}

// readFile reads name in the zone (see readZoneFile).
func (fsys zoneFS) readFile(name string) ([]byte, error) {
	f, err := fsys.openFile(name, os.O_RDONLY, 0, false)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(f)
	if err != nil {
		return nil, &os.PathError{Op: "read", Path: name, Err: unwrapErrno(err)}
	}
	return data, nil
}

// openFile opens name in the zone with flag and, for a file it creates,
// perm; with mkdirs, missing directories on the way are created (0755).
// O_DIRECTORY opens a directory (to act on its entries with the *at
// system calls). The error is an *os.PathError naming name.
func (fsys zoneFS) openFile(name string, flag int, perm uint32, mkdirs bool) (*os.File, error) {
	// The zone root and the mounts' directories are the simulator's to
	// open: they are where the zone's view starts.
	rootFD, err := unix.Open(fsys.root, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: name, Err: err}
	}
	defer unix.Close(rootFD)
	mountFDs := map[string]int{}
	for dir, special := range fsys.mounts {
		if fd, err := unix.Open(special, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0); err == nil {
			mountFDs[dir] = fd
			defer unix.Close(fd)
		}
	}
	var f *os.File
	err = fsys.user.asFileUser(func() error {
		var err error
		f, err = fsys.open(rootFD, mountFDs, name, flag, perm, mkdirs)
		return err
	})
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: name, Err: unwrapErrno(err)}
	}
	return f, nil
}

// zoneDir is a directory reached by a lookup: its descriptor and its path
// in the zone.
type zoneDir struct {
	fd   int
	path string
}

// open looks name up component by component from the zone root and opens
// what it names (see openFile).
func (fsys zoneFS) open(rootFD int, mountFDs map[string]int, name string, flag int, perm uint32, mkdirs bool) (*os.File, error) {
	// dirs is the chain of directories from the root to the current one,
	// so ".." goes back up it and stops at the zone's root, as in a zone.
	dirs := []zoneDir{{fd: rootFD, path: "/"}}
	defer func() {
		for _, d := range dirs[1:] {
			unix.Close(d.fd)
		}
	}()
	up := func() {
		if len(dirs) > 1 {
			unix.Close(dirs[len(dirs)-1].fd)
			dirs = dirs[:len(dirs)-1]
		}
	}
	pending := strings.Split(name, "/")
	links := 0
	for len(pending) > 0 {
		c := pending[0]
		pending = pending[1:]
		switch c {
		case "", ".":
			continue
		case "..":
			up()
			continue
		}
		cur := dirs[len(dirs)-1]
		zpath := path.Join(cur.path, c)
		last := !hasComponent(pending)
		if mkdirs && (!last || flag&unix.O_DIRECTORY != 0) {
			// EEXIST (a directory, or a link looked at below) is fine.
			if err := unix.Mkdirat(cur.fd, c, 0o755); err != nil && err != unix.EEXIST {
				return nil, err
			}
		}
		if last {
			fd, err := unix.Openat(cur.fd, c, flag|unix.O_NOFOLLOW|unix.O_NOCTTY|unix.O_CLOEXEC, perm)
			if err == nil {
				return os.NewFile(uintptr(fd), name), nil
			}
			if err != unix.ELOOP && !(err == unix.ENOTDIR && flag&unix.O_DIRECTORY != 0) {
				return nil, err
			}
			// A link: looked at below.
		}
		fd, err := unix.Openat(cur.fd, c, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			return nil, err
		}
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil {
			unix.Close(fd)
			return nil, err
		}
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFDIR:
			dirs = append(dirs, zoneDir{fd: fd, path: zpath})
			continue
		case unix.S_IFLNK:
		default:
			unix.Close(fd)
			if last && flag&unix.O_DIRECTORY == 0 {
				return nil, unix.ELOOP // it was a link a moment ago
			}
			return nil, unix.ENOTDIR
		}
		target, err := readlinkFD(fd)
		unix.Close(fd)
		if err != nil {
			return nil, err
		}
		if mfd, ok := mountFDs[zpath]; ok && target == fsys.mounts[zpath] {
			// The mount point: the lookup goes on in the mounted
			// directory, reached by the simulator's own descriptor.
			dup, err := unix.FcntlInt(uintptr(mfd), unix.F_DUPFD_CLOEXEC, 0)
			if err != nil {
				return nil, err
			}
			dirs = append(dirs, zoneDir{fd: dup, path: zpath})
			continue
		}
		if links++; links > maxSymlinks {
			return nil, unix.ELOOP
		}
		if strings.HasPrefix(target, "/") {
			for len(dirs) > 1 {
				up()
			}
		}
		pending = append(strings.Split(target, "/"), pending...)
	}
	// The name ends in a directory (or is the root, or a mount point).
	cur := dirs[len(dirs)-1]
	fd, err := unix.Openat(cur.fd, ".", flag&^unix.O_CREAT|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	return os.NewFile(uintptr(fd), name), nil
}

// hasComponent says whether a rest of a path names anything but the
// directory it is in.
func hasComponent(rest []string) bool {
	for _, c := range rest {
		if c != "" && c != "." {
			return true
		}
	}
	return false
}

func readlinkFD(fd int) (string, error) {
	buf := make([]byte, unix.PathMax)
	n, err := unix.Readlinkat(fd, "", buf)
	if err != nil {
		return "", err
	}
	return string(buf[:n]), nil
}

// unwrapErrno keeps the errno of a failed system call, for strerror.
func unwrapErrno(err error) error {
	if pe, ok := err.(*os.PathError); ok {
		return pe.Err
	}
	return err
}

// asFileUser runs fn with the user's rights on files: when the simulator
// runs as root, on a thread of its own whose file-system uid and gid are
// the user's and which has no supplementary groups (changing the fsuid
// from 0 also drops the capabilities that bypass file permissions). The
// thread is never handed back: it ends with fn, credentials and all.
func (u zoneUser) asFileUser(fn func() error) error {
	if !u.drop {
		return fn()
	}
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // not unlocked: the thread exits with this goroutine
		if err := unix.Setgroups(nil); err != nil {
			done <- fmt.Errorf("setgroups: %w", err)
			return
		}
		unix.Setfsgid(int(u.gid))
		unix.Setfsuid(int(u.uid))
		// setfsuid reports no failure: check what the thread now is.
		fsuid, _ := unix.SetfsuidRetUid(-1)
		fsgid, _ := unix.SetfsgidRetGid(-1)
		if fsuid != int(u.uid) || fsgid != int(u.gid) {
			done <- fmt.Errorf("could not take the identity of %s (uid %d, gid %d)", u.name, u.uid, u.gid)
			return
		}
		done <- fn()
	}()
	return <-done
}

// mountLofsAt makes name in directory dirFD the link to special, in place
// of an empty mount point directory or a stale link.
func mountLofsAt(dirFD int, name, special string) error {
	buf := make([]byte, unix.PathMax)
	if n, err := unix.Readlinkat(dirFD, name, buf); err == nil && string(buf[:n]) == special {
		return nil
	}
	if err := unix.Unlinkat(dirFD, name, 0); err == unix.EISDIR || err == unix.EPERM {
		_ = unix.Unlinkat(dirFD, name, unix.AT_REMOVEDIR) // only if empty
	}
	return unix.Symlinkat(special, dirFD, name)
}

// unmountLofsAt turns the link name in directory dirFD back into an empty
// mount point directory.
func unmountLofsAt(dirFD int, name string) {
	var st unix.Stat_t
	if unix.Fstatat(dirFD, name, &st, unix.AT_SYMLINK_NOFOLLOW) != nil || st.Mode&unix.S_IFMT != unix.S_IFLNK {
		return
	}
	if unix.Unlinkat(dirFD, name, 0) == nil {
		_ = unix.Mkdirat(dirFD, name, 0o755)
	}
}
