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
	"strings"
	"syscall"
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
