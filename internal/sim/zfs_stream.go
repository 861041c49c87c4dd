package sim

import (
	"bufio"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"golang.org/x/term"
)

// The simulator's send stream (see README.md, "zfs send streams"):
//
//	magic   8 bytes "ILSIMZS1"
//	header  uint32 big-endian length, then JSON (streamHeader)
//	records 'D' dir | 'F' file | 'L' symlink:
//	            uint16 path length, path (relative, '/'-separated),
//	            uint32 mode, uint64 length, that many bytes (content or link target)
//	        'X' removed (incremental streams): as 'D', the path and mode 0, length 0
//	        'V' volume data: uint64 offset, uint32 length, bytes
//	        'E' end: 32 bytes, the sha256 of every byte before the 'E'
//
// A stream that ends before 'E' is truncated; a wrong digest is a
// checksum error, as with real streams.
const streamMagic = "ILSIMZS1"

// streamHeader is the BEGIN record: what the stream holds.
type streamHeader struct {
	ToName       string            `json:"toname"` // the sent snapshot, pool/fs@snap
	Type         string            `json:"type"`   // filesystem or volume
	Creation     int64             `json:"creation"`
	GUID         uint64            `json:"guid"`
	VolSize      uint64            `json:"volsize,omitempty"`
	VolBlockSize string            `json:"volblocksize,omitempty"`
	Props        map[string]string `json:"props,omitempty"` // with -p: the source's local properties
	Refer        uint64            `json:"refer"`
	// An incremental stream (zfs send -i) names the snapshot it starts
	// from; its records are what changed since, 'X' a removal.
	FromName string `json:"fromname,omitempty"`
	FromGUID uint64 `json:"fromguid,omitempty"`
}

// streamWriter writes records and hashes them.
type streamWriter struct {
	w *bufio.Writer
	h hash.Hash
	n uint64
}

func newStreamWriter(w io.Writer) *streamWriter {
	h := sha256.New()
	return &streamWriter{w: bufio.NewWriterSize(io.MultiWriter(w, h), 256<<10), h: h}
}

func (s *streamWriter) write(b []byte) error {
	n, err := s.w.Write(b)
	s.n += uint64(n)
	return err
}

func (s *streamWriter) header(hdr streamHeader) error {
	b, err := json.Marshal(hdr)
	if err != nil {
		return err
	}
	var l [4]byte
	binary.BigEndian.PutUint32(l[:], uint32(len(b)))
	if err := s.write([]byte(streamMagic)); err != nil {
		return err
	}
	if err := s.write(l[:]); err != nil {
		return err
	}
	return s.write(b)
}

func (s *streamWriter) entry(kind byte, rel string, mode uint32, size uint64, body io.Reader) error {
	var hdr [1 + 2]byte
	hdr[0] = kind
	binary.BigEndian.PutUint16(hdr[1:], uint16(len(rel)))
	if err := s.write(hdr[:]); err != nil {
		return err
	}
	if err := s.write([]byte(rel)); err != nil {
		return err
	}
	var ms [4 + 8]byte
	binary.BigEndian.PutUint32(ms[:4], mode)
	binary.BigEndian.PutUint64(ms[4:], size)
	if err := s.write(ms[:]); err != nil {
		return err
	}
	if body == nil {
		return nil
	}
	n, err := io.CopyN(s.w, body, int64(size))
	s.n += uint64(n)
	return err
}

func (s *streamWriter) volume(off int64, b []byte) error {
	var h [1 + 8 + 4]byte
	h[0] = 'V'
	binary.BigEndian.PutUint64(h[1:], uint64(off))
	binary.BigEndian.PutUint32(h[9:], uint32(len(b)))
	if err := s.write(h[:]); err != nil {
		return err
	}
	return s.write(b)
}

func (s *streamWriter) end() error {
	if err := s.w.Flush(); err != nil {
		return err
	}
	sum := s.h.Sum(nil)
	if _, err := s.w.Write(append([]byte{'E'}, sum...)); err != nil {
		return err
	}
	s.n += 1 + uint64(len(sum))
	return s.w.Flush()
}

// writeTree streams a snapshot's file tree.
func (s *streamWriter) writeTree(dir string) error {
	return walkBelow(dir, func(p, rel string, d fs.DirEntry, info fs.FileInfo) error {
		return s.writeEntry(p, rel, d, info)
	})
}

// walkBelow calls fn for every entry below root (root itself excluded)
// with its path relative to root and its information; a missing root is
// an empty tree. fn may return filepath.SkipDir or SkipAll.
func walkBelow(root string, fn func(p, rel string, d fs.DirEntry, info fs.FileInfo) error) error {
	return filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if p == root && errors.Is(err, os.ErrNotExist) {
				return filepath.SkipAll
			}
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if rel == "." {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		return fn(p, rel, d, info)
	})
}

// writeEntry streams one directory, symlink or regular file of a tree
// at its relative path rel.
func (s *streamWriter) writeEntry(p, rel string, d fs.DirEntry, info fs.FileInfo) error {
	rel = filepath.ToSlash(rel)
	mode := uint32(info.Mode().Perm())
	switch {
	case d.IsDir():
		return s.entry('D', rel, mode, 0, nil)
	case d.Type()&fs.ModeSymlink != 0:
		target, err := os.Readlink(p)
		if err != nil {
			return err
		}
		return s.entry('L', rel, mode, uint64(len(target)), strings.NewReader(target))
	case d.Type().IsRegular():
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		defer f.Close()
		return s.entry('F', rel, mode, uint64(info.Size()), f)
	}
	return nil
}

// errors of reading a stream, worded by the caller as zfs does.
var (
	errStreamMagic     = errors.New("invalid stream (bad magic number)")
	errStreamShort     = errors.New("failed to read from stream")
	errStreamChecksum  = errors.New("checksum mismatch or incomplete stream")
	errStreamMalformed = errors.New("invalid stream (malformed record)")
)

// streamReader reads a stream, hashing what it reads.
type streamReader struct {
	r       *bufio.Reader
	h       hash.Hash
	n       uint64
	volSize uint64 // a volume stream's: no data record may pass it
}

func newStreamReader(r io.Reader) *streamReader {
	return &streamReader{r: bufio.NewReaderSize(r, 256<<10), h: sha256.New()}
}

func (s *streamReader) full(b []byte) error {
	n, err := io.ReadFull(s.r, b)
	s.h.Write(b[:n])
	s.n += uint64(n)
	if err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return errStreamShort
		}
		return err
	}
	return nil
}

// header reads the magic and the BEGIN record.
func (s *streamReader) header() (streamHeader, error) {
	var hdr streamHeader
	magic := make([]byte, len(streamMagic))
	if err := s.full(magic); err != nil {
		return hdr, err
	}
	if string(magic) != streamMagic {
		return hdr, errStreamMagic
	}
	var l [4]byte
	if err := s.full(l[:]); err != nil {
		return hdr, err
	}
	n := binary.BigEndian.Uint32(l[:])
	if n > 1<<20 {
		return hdr, errStreamMalformed
	}
	b := make([]byte, n)
	if err := s.full(b); err != nil {
		return hdr, err
	}
	if err := json.Unmarshal(b, &hdr); err != nil || !strings.Contains(hdr.ToName, "@") ||
		(hdr.Type != "filesystem" && hdr.Type != "volume") {
		return hdr, errStreamMalformed
	}
	s.volSize = hdr.VolSize
	return hdr, nil
}

// body reads the records into dir (a file tree) or, for a volume, into
// the file vol (for a full stream, new and empty); it stops after a good
// END record.
func (s *streamReader) body(dir, vol string) error {
	var volFile *os.File
	if vol != "" {
		// An incremental stream writes its blocks into a copy of the
		// source snapshot's data.
		f, err := os.OpenFile(vol, os.O_CREATE|os.O_WRONLY, 0o600)
		if err != nil {
			return err
		}
		volFile = f
		defer f.Close()
	}
	for {
		var kind [1]byte
		sum := s.h.Sum(nil) // the digest of everything before this record
		if err := s.full(kind[:]); err != nil {
			return err
		}
		switch kind[0] {
		case 'E':
			got := make([]byte, sha256.Size)
			n, err := io.ReadFull(s.r, got)
			s.n += uint64(n)
			if err != nil {
				return errStreamShort
			}
			if string(got) != string(sum) {
				return errStreamChecksum
			}
			return nil
		case 'V':
			var h [12]byte
			if err := s.full(h[:]); err != nil {
				return err
			}
			off := int64(binary.BigEndian.Uint64(h[:8]))
			n := binary.BigEndian.Uint32(h[8:])
			if volFile == nil || n > 64<<20 || off < 0 || uint64(off)+uint64(n) > s.volSize {
				return errStreamMalformed
			}
			b := make([]byte, n)
			if err := s.full(b); err != nil {
				return err
			}
			if _, err := volFile.WriteAt(b, off); err != nil {
				return err
			}
		case 'D', 'F', 'L', 'X':
			if err := s.entry(kind[0], dir); err != nil {
				return err
			}
		default:
			return errStreamMalformed
		}
	}
}

func (s *streamReader) entry(kind byte, dir string) error {
	var l [2]byte
	if err := s.full(l[:]); err != nil {
		return err
	}
	name := make([]byte, binary.BigEndian.Uint16(l[:]))
	if err := s.full(name); err != nil {
		return err
	}
	var ms [12]byte
	if err := s.full(ms[:]); err != nil {
		return err
	}
	mode := os.FileMode(binary.BigEndian.Uint32(ms[:4]) & 0o7777)
	size := binary.BigEndian.Uint64(ms[4:])
	if dir == "" {
		return errStreamMalformed
	}
	target, err := safeJoin(dir, string(name))
	if err != nil {
		return errStreamMalformed
	}
	switch kind {
	case 'X':
		if size != 0 {
			return errStreamMalformed
		}
		return os.RemoveAll(target)
	case 'D':
		if fi, err := os.Lstat(target); err == nil && !fi.IsDir() {
			os.Remove(target)
		}
		return os.MkdirAll(target, mode|0o700)
	case 'L':
		if size > 4096 {
			return errStreamMalformed
		}
		b := make([]byte, size)
		if err := s.full(b); err != nil {
			return err
		}
		os.MkdirAll(filepath.Dir(target), 0o755)
		os.RemoveAll(target) // an incremental stream replaces what was there
		return os.Symlink(string(b), target)
	}
	os.MkdirAll(filepath.Dir(target), 0o755)
	// Replace, never write into, a file already there: an incremental
	// stream's staging tree shares its files with the source snapshot.
	if _, err := os.Lstat(target); err == nil {
		os.RemoveAll(target)
	}
	f, err := os.OpenFile(target, os.O_CREATE|os.O_WRONLY|os.O_TRUNC|syscall.O_NOFOLLOW, mode|0o600)
	if err != nil {
		return err
	}
	n, err := io.CopyN(io.MultiWriter(f, s.h), s.r, int64(size))
	s.n += uint64(n)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if errors.Is(err, io.EOF) {
		return errStreamShort
	}
	return err
}

// safeJoin joins a member path of an archive or stream to dir, refusing
// one that leaves dir: absolute, "..", or through a symlink an earlier
// member made (the simulator may run as root).
func safeJoin(dir, member string) (string, error) {
	rel := filepath.Clean(filepath.FromSlash(strings.TrimPrefix(member, "/")))
	if !filepath.IsLocal(rel) {
		return "", fmt.Errorf("member %q leaves the tree", member)
	}
	p := dir
	parts := strings.Split(rel, string(filepath.Separator))
	for _, part := range parts[:len(parts)-1] {
		p = filepath.Join(p, part)
		if fi, err := os.Lstat(p); err == nil && fi.Mode()&fs.ModeSymlink != 0 {
			return "", fmt.Errorf("member %q goes through the symlink %s", member, p)
		}
	}
	return filepath.Join(dir, rel), nil
}

// zfs send [-v] [-p] [-i SNAP] SNAP
func zfsSend(inv *invocation, args []string) int {
	opts, rest, bad, ok := getopt(args, "vpi:")
	if !ok {
		return badOption(inv, "send", bad)
	}
	if len(rest) != 1 {
		return zfsOperandErr(inv, "send", "snapshot", len(rest))
	}
	var verbose, withProps bool
	var from string
	for _, o := range opts {
		switch o.c {
		case 'v':
			verbose = true
		case 'p':
			withProps = true
		case 'i':
			from = o.val
		}
	}
	name := rest[0]
	if !strings.Contains(name, "@") {
		return zfsUsageErr(inv, "send", "argument must be a snapshot")
	}
	if from != "" {
		// -i @snap names a snapshot of the same filesystem.
		if strings.HasPrefix(from, "@") {
			from = parentName(name) + from
		}
		if !strings.Contains(from, "@") {
			return zfsUsageErr(inv, "send", "incremental source must be a snapshot")
		}
		if parentName(from) != parentName(name) {
			inv.errf("cannot send '%s': incremental source must be in same filesystem", name)
			return 1
		}
	}
	if f, ok := inv.stdout.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		inv.errf("Error: Stream can not be written to a terminal.\nYou must redirect standard output.")
		return 1
	}
	var hdr streamHeader
	found, fromFound, earlier := false, true, true
	var settled time.Time
	err := inv.h.view(func(st *State) {
		s := st.dataset(name)
		src := st.dataset(parentName(name))
		if s == nil || s.Type != "snapshot" || src == nil {
			return
		}
		found = true
		if from != "" {
			f := st.dataset(from)
			if f == nil || f.Type != "snapshot" {
				fromFound = false
				return
			}
			earlier = slices.Index(st.Datasets, f) < slices.Index(st.Datasets, s)
			settled = time.Unix(f.Creation-1, 0)
			hdr.FromName, hdr.FromGUID = from, f.GUID
		}
		hdr = streamHeader{ToName: name, Type: src.Type, Creation: s.Creation, GUID: s.GUID, Refer: s.Refer,
			FromName: hdr.FromName, FromGUID: hdr.FromGUID}
		if src.Type == "volume" {
			hdr.VolSize = src.VolSize
			hdr.VolBlockSize, _ = st.propValue(inv.h, src, "volblocksize")
		}
		if withProps {
			hdr.Props = map[string]string{}
			for k, v := range src.Props {
				if k != "refreservation" && k != "mountpoint" {
					hdr.Props[k] = v
				}
			}
		}
	})
	if err != nil {
		return inv.stateErr(err)
	}
	if !found {
		inv.errf("cannot open '%s': dataset does not exist", name)
		return 1
	}
	if !fromFound {
		inv.errf("cannot open '%s': dataset does not exist", from)
		return 1
	}
	if !earlier {
		inv.errf("cannot send '%s': incremental source (%s) is not earlier than it", name, from)
		return 1
	}
	if verbose && from != "" {
		inv.errf("incremental send of %s estimated size is %s", name, nicenum(hdr.Refer))
		inv.errf("total estimated size is %s", nicenum(hdr.Refer))
	} else if verbose {
		inv.errf("full send of %s estimated size is %s", name, nicenum(hdr.Refer))
		inv.errf("total estimated size is %s", nicenum(hdr.Refer))
	}
	if hdr.Type == "volume" {
		// The stream carries the snapshot's size: the volume may have
		// been resized since it was taken.
		if fi, err := os.Stat(inv.h.snapshotVolData(name)); err == nil {
			hdr.VolSize = uint64(fi.Size())
		}
	}
	inv.faults.sleep()
	w := newStreamWriter(inv.faults.throttle(inv.stdout))
	err = w.header(hdr)
	if err == nil && hdr.Type == "volume" && from != "" {
		err = w.writeVolumeDelta(inv.h.snapshotVolData(from), inv.h.snapshotVolData(name), volBlockBytes(hdr.VolBlockSize))
	} else if err == nil && hdr.Type == "volume" {
		var f *os.File
		if f, err = os.Open(inv.h.snapshotVolData(name)); err == nil {
			err = forEachDataChunk(f, w.volume)
			f.Close()
		} else if errors.Is(err, os.ErrNotExist) {
			err = nil
		}
	} else if err == nil && from != "" {
		err = w.writeDelta(inv.h.snapshotDir(from), inv.h.snapshotDir(name), settled)
	} else if err == nil {
		err = w.writeTree(inv.h.snapshotDir(name))
	}
	if err == nil {
		err = w.end()
	}
	if err != nil {
		inv.errf("warning: cannot send '%s': %s", name, strerror(err))
		return 1
	}
	return 0
}

// zfs receive|recv [-Fnuv] [-o property=value]... FS[@SNAP]
func zfsReceive(inv *invocation, args []string) int {
	opts, rest, bad, ok := getopt(args, "Fnuvo:")
	if !ok {
		return badOption(inv, "receive", bad)
	}
	if len(rest) != 1 {
		return zfsOperandErr(inv, "receive", "snapshot", len(rest))
	}
	props, code, ok := parseCreateProps(inv, "receive", opts)
	if !ok {
		return code
	}
	var force, dry, noMount, verbose bool
	for _, o := range opts {
		switch o.c {
		case 'F':
			force = true
		case 'n':
			dry = true
		case 'u':
			noMount = true
		case 'v':
			verbose = true
		}
	}
	if f, ok := inv.stdin.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		inv.errf("Error: Backup stream can not be read from a terminal.\nYou must redirect standard input.")
		return 1
	}
	target := rest[0]
	fsName, snapName, hasAt := strings.Cut(target, "@")
	if why := datasetNameProblem(target); why != "" || (hasAt && snapName == "") {
		if why == "" {
			why = "empty component in name"
		}
		inv.errf("cannot receive: invalid name '%s': %s", target, why)
		return 1
	}
	start := time.Now()
	sr := newStreamReader(inv.stdin)
	hdr, err := sr.header()
	if err != nil {
		inv.errf("cannot receive: %s", streamErrText(err))
		return 1
	}
	if !hasAt {
		_, snapName, _ = strings.Cut(hdr.ToName, "@")
	}
	snap := fsName + "@" + snapName
	if hdr.FromGUID != 0 {
		return receiveIncremental(inv, sr, hdr, snap, props, incrementalFlags{force: force, dry: dry, verbose: verbose, start: start})
	}
	const errbuf = "cannot receive new filesystem stream"

	// Check the destination as zfs does before it reads the data.
	var why string
	err = inv.h.view(func(st *State) { why = receiveProblem(st, fsName, force) })
	if err != nil {
		return inv.stateErr(err)
	}
	if why != "" {
		inv.errf("%s: %s", errbuf, why)
		return 1
	}
	if verbose {
		verb := "receiving"
		if dry {
			verb = "would receive"
		}
		inv.outf("%s full stream of %s into %s", verb, hdr.ToName, snap)
	}

	// Read the data into a staging area outside the state lock (real zfs
	// receives into a hidden %recv dataset), then commit it in one update.
	stage, err := os.MkdirTemp(inv.h.root, ".recv-")
	if err != nil {
		return inv.stateErr(err)
	}
	defer os.RemoveAll(stage)
	tree, vol := filepath.Join(stage, "tree"), ""
	if hdr.Type == "volume" {
		tree, vol = "", filepath.Join(stage, "zvol")
	} else if err := os.Mkdir(tree, 0o755); err != nil {
		return inv.stateErr(err)
	}
	if dry {
		tree, vol = filepath.Join(stage, "tree"), filepath.Join(stage, "zvol")
		os.MkdirAll(tree, 0o755)
	}
	if err := sr.body(tree, vol); err != nil {
		prefix := "cannot receive"
		if errors.Is(err, errStreamChecksum) {
			prefix = errbuf
		}
		inv.errf("%s: %s", prefix, streamErrText(err))
		return 1
	}
	if dry {
		return 0
	}

	code = 0
	err = inv.h.update(func(st *State) bool {
		if why := receiveProblem(st, fsName, force); why != "" {
			inv.errf("%s: %s", errbuf, why)
			code = 1
			return false
		}
		if old := st.dataset(fsName); old != nil {
			removeDatasets(inv.h, st, []*Dataset{old})
		}
		d := newDataset(fsName, hdr.Type)
		d.Refer = max(hdr.Refer, baseRefer)
		for k, v := range hdr.Props {
			d.Props[k] = v
		}
		if hdr.Type == "volume" {
			d.VolSize = hdr.VolSize
			if hdr.VolBlockSize != "" && hdr.VolBlockSize != "8192" {
				d.Props["volblocksize"] = hdr.VolBlockSize
			}
		}
		if !applyProps(inv, "receive", fsName, d, props) {
			code = 1
			return false
		}
		if noMount && d.Type == "filesystem" {
			d.Unmounted = true
		}
		st.Datasets = append(st.Datasets, d)
		s := newDataset(snap, "snapshot")
		// A received snapshot keeps the sent one's GUID: incremental
		// streams name their source by it.
		s.Refer, s.Creation = d.Refer, hdr.Creation
		if hdr.GUID != 0 {
			s.GUID = hdr.GUID
		}
		st.Datasets = append(st.Datasets, s)
		if err := commitReceived(inv.h, st, d, snap, tree, vol); err != nil {
			inv.errf("%s: %s", errbuf, strerror(err))
			code = 1
			return false
		}
		return true
	})
	if err != nil {
		return inv.stateErr(err)
	}
	if code == 0 && verbose {
		secs := max(int64(time.Since(start).Seconds()), 1)
		inv.outf("received %sB stream in %d seconds (%sB/sec)", nicenum(sr.n), secs, nicenum(sr.n/uint64(secs)))
	}
	return code
}

// receiveProblem is why a new full stream cannot be received into fs.
func receiveProblem(st *State, fs string, force bool) string {
	if d := st.dataset(fs); d != nil {
		if !force {
			return fmt.Sprintf("destination '%s' exists\nmust specify -F to overwrite it", fs)
		}
		if snaps := st.snapshotsOf(fs); len(snaps) > 0 {
			return fmt.Sprintf("destination has snapshots (eg. %s)\nmust destroy them to overwrite it", snaps[0].Name)
		}
		if d.Origin != "" {
			return fmt.Sprintf("destination '%s' is a clone\nmust destroy it to overwrite it", fs)
		}
		if len(st.children(fs)) > 0 {
			return "destination has children\nmust destroy them to overwrite it"
		}
		if _, busy := heldDatasets(st)[fs]; busy {
			return "dataset is busy"
		}
		return ""
	}
	if !strings.Contains(fs, "/") {
		return fmt.Sprintf("destination '%s' does not exist", fs)
	}
	parent := st.dataset(parentName(fs))
	if parent == nil {
		return "no such pool or dataset"
	}
	if parent.Type != "filesystem" {
		return "parent is not a filesystem"
	}
	return ""
}

// commitReceived moves staged data into place: the snapshot's frozen copy
// and the filesystem's files (or the volume's device).
func commitReceived(h *host, st *State, d *Dataset, snap, tree, vol string) error {
	if d.Type == "volume" {
		if err := os.MkdirAll(h.snapshotDir(snap), 0o755); err != nil {
			return err
		}
		if err := copySparse(vol, h.snapshotVolData(snap), d.VolSize); err != nil {
			return err
		}
		h.removeZvolDevice(d.Name)
		if err := os.MkdirAll(filepath.Dir(h.zvolPath(d.Name)), 0o755); err != nil {
			return err
		}
		if err := os.Rename(vol, h.zvolPath(d.Name)); err != nil {
			return err
		}
		return h.makeZvolDevice(d.Name, d.VolSize)
	}
	os.RemoveAll(h.snapshotDir(snap))
	if err := os.MkdirAll(filepath.Dir(h.snapshotDir(snap)), 0o755); err != nil {
		return err
	}
	if err := os.Rename(tree, h.snapshotDir(snap)); err != nil {
		return err
	}
	// The simulation keeps a filesystem's files at its mountpoint whether
	// or not it is mounted (as zfs unmount does).
	if mp, _ := st.mountpoint(d); strings.HasPrefix(mp, "/") && mp != "/" {
		return copyTree(h.snapshotDir(snap), h.hostPath(mp))
	}
	return nil
}

func streamErrText(err error) string {
	for _, e := range []error{errStreamMagic, errStreamShort, errStreamChecksum, errStreamMalformed} {
		if errors.Is(err, e) {
			return e.Error()
		}
	}
	return strerror(err)
}
