package sim

import (
	"bytes"
	"errors"
	"io"
	"os"
)

// writeVolumeDelta streams the blocks of the volume data to that differ
// from those of from, block by block (blockSize, the volblocksize), each
// run of changed blocks one 'V' record. A block that became zeros is sent
// as zeros; the new size travels in the header, so data beyond it is not
// sent. A missing file is a volume never written (all zeros).
func (s *streamWriter) writeVolumeDelta(from, to string, blockSize int) error {
	old, err := openOrEmpty(from)
	if err != nil {
		return err
	}
	defer old.Close()
	cur, err := openOrEmpty(to)
	if err != nil {
		return err
	}
	defer cur.Close()
	blocks := max(volChunk/blockSize, 1) * blockSize
	a, b := make([]byte, blocks), make([]byte, blocks)
	var off int64
	for {
		nb, errb := io.ReadFull(cur, b)
		na, erra := io.ReadFull(old, a)
		if erra != nil && !errors.Is(erra, io.EOF) && !errors.Is(erra, io.ErrUnexpectedEOF) {
			return erra
		}
		clear(a[na:])
		if err := s.changedBlocks(off, a[:nb], b[:nb], blockSize); err != nil {
			return err
		}
		off += int64(nb)
		if errors.Is(errb, io.EOF) || errors.Is(errb, io.ErrUnexpectedEOF) {
			return nil
		}
		if errb != nil {
			return errb
		}
	}
}

// changedBlocks writes the runs of blocks where cur differs from old,
// both read at off.
func (s *streamWriter) changedBlocks(off int64, old, cur []byte, blockSize int) error {
	start := -1
	flush := func(end int) error {
		if start < 0 {
			return nil
		}
		err := s.volume(off+int64(start), cur[start:end])
		start = -1
		return err
	}
	for i := 0; i < len(cur); i += blockSize {
		j := min(i+blockSize, len(cur))
		if bytes.Equal(old[i:j], cur[i:j]) {
			if err := flush(i); err != nil {
				return err
			}
		} else if start < 0 {
			start = i
		}
	}
	return flush(len(cur))
}

// openOrEmpty opens a volume's data file; a missing one reads as empty.
func openOrEmpty(p string) (*os.File, error) {
	f, err := os.Open(p)
	if errors.Is(err, os.ErrNotExist) {
		return os.Open(os.DevNull)
	}
	return f, err
}

// volBlockBytes is a volblocksize property's value in bytes (8K if it
// cannot be read).
func volBlockBytes(v string) int {
	if n, ok := parseZfsSize(v); ok && n >= 512 && n <= volChunk {
		return int(n)
	}
	return 8192
}
