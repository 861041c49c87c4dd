package sim

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
)

// Volumes have device files a writer can open, as on illumos:
// /dev/zvol/rdsk/<pool>/<vol> (raw) and /dev/zvol/dsk/<pool>/<vol> (block),
// under the simulated filesystem (ROOT/fs/dev/zvol/...). Both are one
// sparse file (hard links) of the volume's size; a snapshot keeps a sparse
// copy in its snapshot directory, and a clone starts from that copy.

const (
	zvolRawDir   = "/dev/zvol/rdsk"
	zvolBlockDir = "/dev/zvol/dsk"
	// volChunk is the unit in which volume data is copied and streamed;
	// all-zero chunks are skipped, so sparse volumes stay sparse.
	volChunk = 1 << 20
)

// zvolPath is the host path of a volume's raw device.
func (h *host) zvolPath(vol string) string { return h.hostPath(zvolRawDir + "/" + vol) }

// zvolBlockPath is the host path of a volume's block device.
func (h *host) zvolBlockPath(vol string) string { return h.hostPath(zvolBlockDir + "/" + vol) }

// snapshotVolData is where a volume snapshot's frozen data lives.
func (h *host) snapshotVolData(snap string) string {
	return filepath.Join(h.snapshotDir(snap), "zvol")
}

// makeZvolDevice creates (or resizes) a volume's device files; data
// already in them is kept.
func (h *host) makeZvolDevice(vol string, size uint64) error {
	raw := h.zvolPath(vol)
	if err := os.MkdirAll(filepath.Dir(raw), 0o755); err != nil {
		return err
	}
	f, err := os.OpenFile(raw, os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	if err := f.Truncate(int64(size)); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	blk := h.zvolBlockPath(vol)
	if err := os.MkdirAll(filepath.Dir(blk), 0o755); err != nil {
		return err
	}
	os.Remove(blk)
	return os.Link(raw, blk)
}

// removeZvolDevice removes a volume's device files.
func (h *host) removeZvolDevice(vol string) {
	os.Remove(h.zvolPath(vol))
	os.Remove(h.zvolBlockPath(vol))
}

// renameZvolDevice moves a volume's device files to a new name.
func (h *host) renameZvolDevice(from, to string) {
	for _, p := range [][2]string{{h.zvolPath(from), h.zvolPath(to)}, {h.zvolBlockPath(from), h.zvolBlockPath(to)}} {
		os.MkdirAll(filepath.Dir(p[1]), 0o755)
		os.Rename(p[0], p[1])
	}
}

// copySparse copies src to dst chunk by chunk, writing only chunks that
// hold data, and gives dst the size of src. A missing src makes an empty
// dst of size bytes.
func copySparse(src, dst string, size uint64) error {
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	in, err := os.Open(src)
	if errors.Is(err, os.ErrNotExist) {
		if err := out.Truncate(int64(size)); err != nil {
			out.Close()
			return err
		}
		return out.Close()
	}
	if err != nil {
		out.Close()
		return err
	}
	defer in.Close()
	err = forEachDataChunk(in, func(off int64, b []byte) error {
		_, err := out.WriteAt(b, off)
		return err
	})
	if err == nil {
		err = out.Truncate(int64(size))
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	return err
}

// forEachDataChunk calls fn for every volChunk of r that is not all zeros.
func forEachDataChunk(r io.Reader, fn func(off int64, b []byte) error) error {
	buf := make([]byte, volChunk)
	zero := make([]byte, volChunk)
	var off int64
	for {
		n, err := io.ReadFull(r, buf)
		if n > 0 && !bytes.Equal(buf[:n], zero[:n]) {
			if ferr := fn(off, buf[:n]); ferr != nil {
				return ferr
			}
		}
		off += int64(n)
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return nil
		}
		if err != nil {
			return err
		}
	}
}
