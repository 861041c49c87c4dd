package sim

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
)

// What datasets hold on disk: a snapshot is a frozen copy of its
// filesystem's tree (or volume's data), and destroying datasets removes
// their directories and devices.

// snapshotDir is where a snapshot's frozen contents live.
func (h *host) snapshotDir(snap string) string {
	return filepath.Join(h.root, "snap", strings.NewReplacer("/", "%", "@", "@").Replace(snap))
}

// takeSnapshot records a snapshot and freezes a copy of the filesystem.
func takeSnapshot(h *host, st *State, src *Dataset, name string) *Dataset {
	snap := newDataset(name, "snapshot")
	snap.Refer = src.Refer
	st.Datasets = append(st.Datasets, snap)
	// The simulation keeps an unmounted filesystem's files at its
	// mountpoint too (zfs unmount, zfs receive -u), so they are its data.
	if mp, _ := st.mountpoint(src); src.Type == "filesystem" && strings.HasPrefix(mp, "/") {
		copyTree(h.hostPath(mp), h.snapshotDir(name))
	}
	if src.Type == "volume" {
		copySparse(h.zvolPath(src.Name), h.snapshotVolData(name), src.VolSize)
	}
	return snap
}

// destroyDatasetTree removes a dataset, its descendants and their files.
func destroyDatasetTree(h *host, st *State, name string) {
	var doomed []*Dataset
	for _, d := range st.Datasets {
		if d.Name == name || isDescendant(d.Name, name) {
			doomed = append(doomed, d)
		}
	}
	removeDatasets(h, st, doomed)
}

// removeDatasets deletes datasets from the state and their directories
// from disk (deepest first), leaving any directory another dataset still
// mounts below.
func removeDatasets(h *host, st *State, doomed []*Dataset) {
	gone := map[string]bool{}
	for _, d := range doomed {
		gone[d.Name] = true
	}
	sort.Slice(doomed, func(i, j int) bool { return len(doomed[i].Name) > len(doomed[j].Name) })
	for _, d := range doomed {
		h.dropStorage(st, d)
	}
	for _, d := range doomed {
		if d.Type == "snapshot" {
			os.RemoveAll(h.snapshotDir(d.Name))
			continue
		}
		if d.Type == "volume" {
			h.removeZvolDevice(d.Name)
			continue
		}
		if !st.isMounted(d) || parentName(d.Name) == "" {
			continue
		}
		mp, _ := st.mountpoint(d)
		if mp == "/" {
			continue
		}
		shared := false
		for _, o := range st.Datasets {
			if gone[o.Name] || o.Type != "filesystem" || !st.isMounted(o) {
				continue
			}
			if omp, _ := st.mountpoint(o); omp == mp || strings.HasPrefix(omp, mp+"/") {
				shared = true
			}
		}
		if !shared {
			os.RemoveAll(h.hostPath(mp))
		}
	}
	out := st.Datasets[:0]
	for _, d := range st.Datasets {
		if !gone[d.Name] {
			out = append(out, d)
		}
	}
	st.Datasets = out
}

// copyTree copies a directory tree (regular files, dirs, symlinks).
func copyTree(src, dst string) error { return mirrorTree(src, dst, nil, copyFile) }

// mirrorTree makes dst hold src's directories, symlinks and regular
// files, each file put there by place. Entries same reports as already
// there are left alone (nil: none are). A missing src is an empty tree.
func mirrorTree(src, dst string, same func(target, p string, info fs.FileInfo) (bool, error), place func(p, target string) error) error {
	if _, err := os.Stat(src); err != nil {
		return os.MkdirAll(dst, 0o755)
	}
	// Directories get their owners and modes once filled: a read-only
	// one must still take its entries.
	var dirs [][2]string
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		target := filepath.Join(dst, rel)
		if same != nil && rel != "." {
			info, err := d.Info()
			if err != nil {
				return err
			}
			if ok, err := same(target, p, info); err != nil || ok {
				return err
			}
		}
		switch {
		case d.IsDir():
			dirs = append(dirs, [2]string{p, target})
			return os.MkdirAll(target, 0o755)
		case d.Type()&fs.ModeSymlink != 0:
			l, err := os.Readlink(p)
			if err != nil {
				return err
			}
			os.Remove(target)
			if err := os.Symlink(l, target); err != nil {
				return err
			}
		case d.Type().IsRegular():
			if err := place(p, target); err != nil {
				return err
			}
		default:
			return nil
		}
		return keepOwnerAndMode(p, target)
	})
	for i := len(dirs) - 1; i >= 0 && err == nil; i-- {
		err = keepOwnerAndMode(dirs[i][0], dirs[i][1])
	}
	return err
}

// keepOwnerAndMode gives target src's owner and mode, as a snapshot, a
// clone or a received stream keeps every file's: an image's file owned
// by its user stays that user's in a zone cloned from it. Only root may
// give files away; for others the copy stays theirs.
func keepOwnerAndMode(src, target string) error {
	fi, err := os.Lstat(src)
	if err != nil {
		return err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return nil
	}
	if err := os.Lchown(target, int(st.Uid), int(st.Gid)); err != nil && !errors.Is(err, syscall.EPERM) {
		return err
	}
	if fi.Mode()&fs.ModeSymlink != 0 {
		return nil
	}
	// After the chown, which clears setuid and setgid bits.
	return os.Chmod(target, fi.Mode()&(fs.ModePerm|fs.ModeSetuid|fs.ModeSetgid|fs.ModeSticky))
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	fi, err := in.Stat()
	if err != nil {
		return err
	}
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, fi.Mode().Perm())
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	if err := out.Close(); err != nil {
		return err
	}
	// A copy keeps its modification time, as a snapshot's files do: what
	// compares trees (incremental streams) skips unchanged files by it.
	return os.Chtimes(dst, fi.ModTime(), fi.ModTime())
}
