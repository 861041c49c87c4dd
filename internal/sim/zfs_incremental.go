package sim

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// writeDelta streams what changed from the snapshot tree from to the
// tree to: removals first (so a path that changed type is removed, then
// made again), then every directory, file and symlink that is new or
// differs. The simulation keeps no block birth times: files are compared
// by content, except that one of the same size and modification time,
// older than settled (a second before the source snapshot was taken, so
// no later write can share its coarse timestamp), is taken as unchanged
// without reading it.
func (s *streamWriter) writeDelta(from, to string, settled time.Time) error {
	err := walkBelow(from, func(p, rel string, d fs.DirEntry, _ fs.FileInfo) error {
		fi, err := os.Lstat(filepath.Join(to, rel))
		if err == nil && fi.Mode().Type() == d.Type() {
			return nil
		}
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
		if err := s.entry('X', filepath.ToSlash(rel), 0, 0, nil); err != nil {
			return err
		}
		if d.IsDir() {
			return filepath.SkipDir // its contents go with it
		}
		return nil
	})
	if err != nil {
		return err
	}
	return walkBelow(to, func(p, rel string, d fs.DirEntry, info fs.FileInfo) error {
		old := filepath.Join(from, rel)
		same, err := sameEntry(old, p, info, settled)
		if err != nil {
			return err
		}
		if same {
			return nil
		}
		return s.writeEntry(p, rel, d, info)
	})
}

// sameEntry reports whether old holds what cur (described by info) does:
// the same type and, for files and symlinks, content (or, for files of
// the same size and modification time older than settled, that time).
// Modes are not compared: the simulation's copies do not keep
// directories' modes.
func sameEntry(old, cur string, info fs.FileInfo, settled time.Time) (bool, error) {
	oi, err := os.Lstat(old)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if oi.Mode().Type() != info.Mode().Type() {
		return false, nil
	}
	switch {
	case info.IsDir():
		return true, nil
	case info.Mode()&fs.ModeSymlink != 0:
		a, err1 := os.Readlink(old)
		b, err2 := os.Readlink(cur)
		return err1 == nil && err2 == nil && a == b, nil
	case info.Mode().IsRegular():
		if oi.Size() != info.Size() {
			return false, nil
		}
		if mt := info.ModTime(); mt.Equal(oi.ModTime()) && mt.Before(settled) {
			return true, nil
		}
		return sameContent(old, cur)
	}
	return true, nil
}

func sameContent(a, b string) (bool, error) {
	fa, err := os.Open(a)
	if err != nil {
		return false, err
	}
	defer fa.Close()
	fb, err := os.Open(b)
	if err != nil {
		return false, err
	}
	defer fb.Close()
	ba, bb := make([]byte, 256<<10), make([]byte, 256<<10)
	for {
		na, erra := io.ReadFull(fa, ba)
		nb, errb := io.ReadFull(fb, bb)
		if na != nb || !bytes.Equal(ba[:na], bb[:nb]) {
			return false, nil
		}
		if erra != nil || errb != nil {
			return errors.Is(erra, io.EOF) || errors.Is(erra, io.ErrUnexpectedEOF), nil
		}
	}
}

// sameTree reports whether two trees hold the same entries (see
// sameEntry for settled).
func sameTree(a, b string, settled time.Time) (bool, error) {
	count := func(dir string) (int, error) {
		n := 0
		err := filepath.WalkDir(dir, func(_ string, _ fs.DirEntry, err error) error {
			if errors.Is(err, os.ErrNotExist) {
				return filepath.SkipAll
			}
			n++
			return err
		})
		return n, err
	}
	na, err := count(a)
	if err != nil {
		return false, err
	}
	nb, err := count(b)
	if err != nil || na != nb {
		return false, err
	}
	same := true
	err = walkBelow(b, func(p, rel string, _ fs.DirEntry, info fs.FileInfo) error {
		ok, err := sameEntry(filepath.Join(a, rel), p, info, settled)
		if err != nil || !ok {
			same = false
			return filepath.SkipAll
		}
		return nil
	})
	return same, err
}

type incrementalFlags struct {
	force, dry, verbose bool
	start               time.Time
}

// receiveIncremental applies an incremental stream to the filesystem or
// volume of snap, whose most recent snapshot must be the stream's source;
// with -F the dataset is first rolled back to it, else it must not have
// changed since.
func receiveIncremental(inv *invocation, sr *streamReader, hdr streamHeader, snap string, props map[string]string, f incrementalFlags) int {
	const errbuf = "cannot receive incremental stream"
	fsName := parentName(snap)
	var fromSnap string
	var settled time.Time
	check := func(st *State) string {
		d := st.dataset(fsName)
		if d == nil {
			return fmt.Sprintf("destination '%s' does not exist", fsName)
		}
		if st.dataset(snap) != nil {
			return fmt.Sprintf("destination '%s' exists", snap)
		}
		snaps := st.snapshotsOf(fsName)
		if len(snaps) == 0 || snaps[len(snaps)-1].GUID != hdr.FromGUID {
			return fmt.Sprintf("most recent snapshot of %s does not\nmatch incremental source", fsName)
		}
		fromSnap = snaps[len(snaps)-1].Name
		settled = time.Unix(snaps[len(snaps)-1].Creation-1, 0)
		if d.Type != hdr.Type {
			return "invalid stream (type of destination differs)"
		}
		return ""
	}
	var why, mp string
	err := inv.h.view(func(st *State) {
		if why = check(st); why == "" {
			mp, _ = st.mountpoint(st.dataset(fsName))
		}
	})
	if err != nil {
		return inv.stateErr(err)
	}
	if why != "" {
		inv.errf("%s: %s", errbuf, why)
		return 1
	}
	isVol := hdr.Type == "volume"
	hasFiles := !isVol && strings.HasPrefix(mp, "/") && mp != "/"
	if !f.force && (hasFiles || isVol) {
		var same bool
		if isVol {
			same, err = sameContent(inv.h.snapshotVolData(fromSnap), inv.h.zvolPath(fsName))
		} else {
			same, err = sameTree(inv.h.snapshotDir(fromSnap), inv.h.hostPath(mp), settled)
		}
		if err != nil {
			return inv.stateErr(err)
		}
		if !same {
			inv.errf("%s: destination %s has been modified\nsince most recent snapshot", errbuf, fsName)
			return 1
		}
	}
	if f.verbose {
		verb := "receiving"
		if f.dry {
			verb = "would receive"
		}
		inv.outf("%s incremental stream of %s into %s", verb, hdr.ToName, snap)
	}
	// The new snapshot's tree (or volume data) is the source snapshot's
	// with the stream's changes, staged outside the lock as a full
	// receive is. A volume's copy takes the stream's size first: what a
	// shrink drops goes, what a growth adds reads as zeros until written.
	stage, err := os.MkdirTemp(inv.h.root, ".recv-")
	if err != nil {
		return inv.stateErr(err)
	}
	defer os.RemoveAll(stage)
	tree, vol := filepath.Join(stage, "tree"), ""
	if isVol {
		tree, vol = "", filepath.Join(stage, "zvol")
		err = copySparse(inv.h.snapshotVolData(fromSnap), vol, hdr.VolSize)
	} else {
		err = linkTree(inv.h.snapshotDir(fromSnap), tree)
	}
	if err != nil {
		return inv.stateErr(err)
	}
	if err := sr.body(tree, vol); err != nil {
		prefix := "cannot receive"
		if errors.Is(err, errStreamChecksum) {
			prefix = errbuf
		}
		inv.errf("%s: %s", prefix, streamErrText(err))
		return 1
	}
	if f.dry {
		return 0
	}
	code := 0
	err = inv.h.update(func(st *State) bool {
		if why := check(st); why != "" {
			inv.errf("%s: %s", errbuf, why)
			code = 1
			return false
		}
		d := st.dataset(fsName)
		if !applyProps(inv, "receive", fsName, d, props) {
			code = 1
			return false
		}
		s := newDataset(snap, "snapshot")
		s.Refer, s.Creation, s.GUID = max(hdr.Refer, baseRefer), hdr.Creation, hdr.GUID
		d.Refer = s.Refer
		st.Datasets = append(st.Datasets, s)
		var cerr error
		if isVol {
			d.VolSize = hdr.VolSize
			cerr = commitReceived(inv.h, st, d, snap, "", vol)
		} else {
			cerr = commitIncremental(inv.h, st, d, snap, tree, settled)
		}
		if cerr != nil {
			inv.errf("%s: %s", errbuf, strerror(cerr))
			code = 1
			return false
		}
		return true
	})
	if err != nil {
		return inv.stateErr(err)
	}
	if code == 0 && f.verbose {
		secs := max(int64(time.Since(f.start).Seconds()), 1)
		inv.outf("received %sB stream in %d seconds (%sB/sec)", nicenum(sr.n), secs, nicenum(sr.n/uint64(secs)))
	}
	return code
}

// commitIncremental makes the staged tree the new snapshot's frozen copy
// and the filesystem's files (rolled back and brought forward at once):
// the files that differ are copied, those the snapshot lacks removed.
// The mountpoint directory itself stays: a zone's lofs mount may name it.
func commitIncremental(h *host, st *State, d *Dataset, snap, tree string, settled time.Time) error {
	os.RemoveAll(h.snapshotDir(snap))
	if err := os.MkdirAll(filepath.Dir(h.snapshotDir(snap)), 0o755); err != nil {
		return err
	}
	if err := os.Rename(tree, h.snapshotDir(snap)); err != nil {
		return err
	}
	mp, _ := st.mountpoint(d)
	if !strings.HasPrefix(mp, "/") || mp == "/" {
		return nil
	}
	return syncTree(h.snapshotDir(snap), h.hostPath(mp), settled)
}

// syncTree makes dst hold what src does, copying only what differs.
func syncTree(src, dst string, settled time.Time) error {
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return err
	}
	// Remove what src lacks, or holds as another type.
	err := walkBelow(dst, func(p, rel string, d fs.DirEntry, _ fs.FileInfo) error {
		si, err := os.Lstat(filepath.Join(src, rel))
		if err == nil && si.Mode().Type() == d.Type() {
			return nil
		}
		if err := os.RemoveAll(p); err != nil {
			return err
		}
		if d.IsDir() {
			return filepath.SkipDir
		}
		return nil
	})
	if err != nil {
		return err
	}
	same := func(target, p string, info fs.FileInfo) (bool, error) { return sameEntry(target, p, info, settled) }
	return mirrorTree(src, dst, same, func(p, target string) error {
		os.Remove(target) // never write into a file a snapshot may share
		return copyFile(p, target)
	})
}

// linkTree makes dst a tree of hard links to src's files (directories
// and symlinks made anew), falling back to copies across filesystems. A
// stream applied to it replaces files rather than writing into them.
func linkTree(src, dst string) error {
	return mirrorTree(src, dst, nil, func(p, target string) error {
		if os.Link(p, target) == nil {
			return nil
		}
		return copyFile(p, target)
	})
}
