package sim

import (
	"archive/tar"
	"bufio"
	"compress/gzip"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// The lx brand installer (OmniOS lx.7): -s clones a dataset or snapshot,
// or receives a send stream file; -t unpacks a root tarball (.tar or
// .tar.gz). Image files are paths on the Linux host (like every file the
// simulator is given), datasets are simulated ones. The zone root is
// <zonepath>/root; when the zonepath is a dataset, a clone or a received
// stream becomes its child dataset <zonepath dataset>/root, so the image
// snapshot has a dependent clone while the zone is installed.

// lxInstall fills the zone root from source (-s) or tarball (-t) and
// returns the hook's exit status.
func lxInstall(c *zoneadmCall, source, tarball string) int {
	z, err := c.zoneCopy()
	if err != nil {
		c.errf("ERROR: %v", err)
		return 255
	}
	root := c.h.zoneRoot(z)
	switch {
	case tarball != "":
		if err := untar(tarball, root); err != nil {
			c.errf("ERROR: unable to extract tarball %s: %s", tarball, strerror(err))
			return 254
		}
		c.outf("       Image: Unpacked %s to %s.", tarball, strings.TrimSuffix(z.Config.Zonepath, "/")+"/root")
		return 0
	case strings.HasPrefix(source, "/"):
		return lxFromStreamFile(c, z, source, root)
	}
	return lxFromDataset(c, z, source, root)
}

// lxFromDataset clones a snapshot (or the current contents of a dataset)
// into the zone root.
func lxFromDataset(c *zoneadmCall, z *Zone, source, root string) int {
	status := 0
	from := ""
	err := c.h.update(func(st *State) bool {
		src := st.dataset(source)
		if src == nil {
			c.errf("ERROR: the source %s does not exist", source)
			status = 254
			return false
		}
		switch {
		case src.Type == "snapshot" && st.dataset(parentName(source)).Type == "filesystem":
			from = c.h.snapshotDir(source)
		case src.Type == "filesystem" && st.isMounted(src):
			mp, _ := st.mountpoint(src)
			from = c.h.hostPath(mp)
		default:
			c.errf("ERROR: the source %s is not a file system or a snapshot of one", source)
			status = 254
			return false
		}
		if zpds := datasetMountedAt(st, z.Config.Zonepath); zpds != nil && src.Type == "snapshot" {
			name := zpds.Name + "/root"
			if st.dataset(name) == nil {
				d := newDataset(name, "filesystem")
				d.Origin, d.Refer = source, src.Refer
				st.Datasets = append(st.Datasets, d)
			}
			if sz := st.zone(z.Name); sz != nil {
				sz.RootDataset = name
			}
		}
		return true
	})
	if err != nil {
		c.errf("ERROR: %v", err)
		return 255
	}
	if status != 0 {
		return status
	}
	// Copied outside the lock: the clone recorded above keeps the
	// snapshot from being destroyed meanwhile.
	if err := copyTree(from, root); err != nil {
		c.errf("ERROR: cannot clone %s: %s", source, strerror(err))
		status = 255
	}
	if status == 0 {
		c.outf("       Image: Cloned %s to %s.", source, strings.TrimSuffix(z.Config.Zonepath, "/")+"/root")
	}
	return status
}

// lxFromStreamFile receives a send stream file into the zone root.
func lxFromStreamFile(c *zoneadmCall, z *Zone, path, root string) int {
	f, err := os.Open(path)
	if err != nil {
		c.errf("ERROR: the source %s does not exist", path)
		return 254
	}
	defer f.Close()
	sr := newStreamReader(f)
	hdr, err := sr.header()
	if err == nil && hdr.Type != "filesystem" {
		err = errors.New("not a file system stream")
	}
	if err == nil {
		err = sr.body(root, "")
	}
	if err != nil {
		c.errf("cannot receive: %s", streamErrText(err))
		c.errf("ERROR: the send stream %s could not be received", path)
		return 255
	}
	err = c.h.update(func(st *State) bool {
		zpds := datasetMountedAt(st, z.Config.Zonepath)
		if zpds == nil {
			return false
		}
		name := zpds.Name + "/root"
		if st.dataset(name) == nil {
			st.Datasets = append(st.Datasets, newDataset(name, "filesystem"))
			_, snap, _ := strings.Cut(hdr.ToName, "@")
			s := newDataset(name+"@"+snap, "snapshot")
			st.Datasets = append(st.Datasets, s)
			copyTree(root, c.h.snapshotDir(s.Name))
		}
		if sz := st.zone(z.Name); sz != nil {
			sz.RootDataset = name
		}
		return true
	})
	if err != nil {
		c.errf("ERROR: %v", err)
		return 255
	}
	c.outf("       Image: Received %s into %s.", path, strings.TrimSuffix(z.Config.Zonepath, "/")+"/root")
	return 0
}

// untar unpacks a tar or gzipped tar (by its magic bytes) into dir,
// refusing members that would land outside it.
func untar(path, dir string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	br := bufio.NewReader(f)
	var r io.Reader = br
	if magic, _ := br.Peek(2); len(magic) == 2 && magic[0] == 0x1f && magic[1] == 0x8b {
		gz, err := gzip.NewReader(br)
		if err != nil {
			return err
		}
		defer gz.Close()
		r = gz
	}
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if filepath.Clean(strings.TrimPrefix(h.Name, "/")) == "." {
			continue
		}
		target, err := safeJoin(dir, h.Name)
		if err != nil {
			return err
		}
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(target, 0o755); err != nil {
				return err
			}
		case tar.TypeSymlink:
			os.MkdirAll(filepath.Dir(target), 0o755)
			os.Remove(target)
			if err := os.Symlink(h.Linkname, target); err != nil {
				return err
			}
		case tar.TypeReg:
			os.MkdirAll(filepath.Dir(target), 0o755)
			out, err := os.OpenFile(target, os.O_CREATE|os.O_WRONLY|os.O_TRUNC|syscall.O_NOFOLLOW, os.FileMode(h.Mode)&0o777|0o600)
			if err != nil {
				return err
			}
			_, err = io.Copy(out, tr)
			if cerr := out.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return err
			}
		}
	}
}
