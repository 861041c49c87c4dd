package imagestore

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/klauspost/compress/zstd"
	"github.com/ulikunitz/xz"

	"github.com/zonewright/zonewright/internal/model"
)

// Artefact is the decompressed file nodes pull.
type Artefact struct {
	Path        string
	SHA256      string // hex digest of the artefact
	Compression string // what the download was: none, gzip, zstd or xz
	Size        int64
}

// Magic bytes of the compressions an image may use.
var (
	magicGzip = []byte{0x1f, 0x8b}
	magicZstd = []byte{0x28, 0xb5, 0x2f, 0xfd}
	magicXZ   = []byte{0xfd, '7', 'z', 'X', 'Z', 0x00}
)

// DetectCompression names the compression whose magic bytes head starts
// with, or model.CompressionNone. Six bytes are enough to tell.
func DetectCompression(head []byte) string {
	switch {
	case bytes.HasPrefix(head, magicGzip):
		return model.CompressionGzip
	case bytes.HasPrefix(head, magicZstd):
		return model.CompressionZstd
	case bytes.HasPrefix(head, magicXZ):
		return model.CompressionXZ
	}
	return model.CompressionNone
}

// Decompress turns the verified download into the artefact nodes pull
// (<Dir>/<name>.artefact), detecting gzip, zstd or xz from the magic bytes.
// compression "" means detect; a declared one ("none" included) that the
// magic bytes contradict is an ErrInvalid. The artefact is written under a
// temporary name and renamed when complete; the download is kept, so the
// call can be repeated. With no download but an artefact present (a repeat
// after the download was removed), the artefact is described as it is,
// with an empty Compression.
func (s *Store) Decompress(ctx context.Context, name, compression string) (Artefact, error) {
	return s.DecompressProgress(ctx, name, compression, nil)
}

// DecompressProgress is Decompress reporting, at most every ~500ms, how
// many bytes of the download it has read out of its size, so a caller can
// heartbeat through a long decode (xz runs at tens of MiB/s).
func (s *Store) DecompressProgress(ctx context.Context, name, compression string, progress func(read, total int64)) (Artefact, error) {
	if err := validName(name); err != nil {
		return Artefact{}, err
	}
	switch compression {
	case "", model.CompressionNone, model.CompressionGzip, model.CompressionZstd, model.CompressionXZ, asIs:
	default:
		return Artefact{}, fmt.Errorf("%w: image %s: unknown compression %q", ErrInvalid, name, compression)
	}
	ctx, end, err := s.begin(ctx, name)
	if err != nil {
		return Artefact{}, err
	}
	defer end()

	in, err := os.Open(s.downloadPath(name))
	if errors.Is(err, os.ErrNotExist) {
		return s.describeArtefact(ctx, name, progress)
	}
	if err != nil {
		return Artefact{}, fmt.Errorf("decompress image %s: %w", name, err)
	}
	defer in.Close()

	var size int64
	if fi, err := in.Stat(); err == nil {
		size = fi.Size()
	}
	br := bufio.NewReaderSize(&progressReader{r: in, report: throttle(progress, size)}, 1<<20)
	head, err := br.Peek(len(magicXZ))
	if err != nil && !errors.Is(err, io.EOF) {
		return Artefact{}, fmt.Errorf("decompress image %s: read header: %w", name, err)
	}
	found := DetectCompression(head)
	if compression == asIs {
		found = model.CompressionNone
	} else if compression != "" && compression != found {
		return Artefact{}, fmt.Errorf("%w: image %s: declared compression %s but the file's magic bytes say %s", ErrInvalid, name, compression, found)
	}

	if found == model.CompressionNone {
		if art, ok, err := s.linkArtefact(ctx, name, progress); err != nil || ok {
			return art, err
		}
	}
	dec, closeDec, err := decoder(found, ctxReader{ctx: ctx, r: br})
	if err != nil {
		return Artefact{}, fmt.Errorf("decompress image %s: %w: %v", name, ErrCorrupt, err)
	}
	defer closeDec()

	art, err := s.writeArtefact(ctx, name, dec)
	if err != nil {
		return Artefact{}, err
	}
	art.Compression = found
	if progress != nil {
		progress(size, size)
	}
	return art, nil
}

// Publish makes the verified download itself the artefact nodes pull,
// compressed or not: an oci layer blob, which nodes verify against its
// own digest and unpack themselves. Like Decompress it may be repeated.
func (s *Store) Publish(ctx context.Context, name string) (Artefact, error) {
	return s.DecompressProgress(ctx, name, asIs, nil)
}

// asIs is Publish's "compression": the download, not decoded.
const asIs = "as-is"

// decoder wraps r in the reader for compression.
func decoder(compression string, r io.Reader) (io.Reader, func(), error) {
	switch compression {
	case model.CompressionGzip:
		zr, err := gzip.NewReader(r)
		if err != nil {
			return nil, nil, err
		}
		return zr, func() { zr.Close() }, nil
	case model.CompressionZstd:
		// One goroutine and a bounded window: the control plane decodes
		// beside everything else it runs.
		zr, err := zstd.NewReader(r, zstd.WithDecoderConcurrency(1), zstd.WithDecoderLowmem(true))
		if err != nil {
			return nil, nil, err
		}
		return zr, zr.Close, nil
	case model.CompressionXZ:
		zr, err := xz.NewReader(r)
		if err != nil {
			return nil, nil, err
		}
		return zr, func() {}, nil
	}
	return r, func() {}, nil
}

// writeArtefact streams dec into a temporary file, bounded by the store's
// limit, hashing as it goes, and renames it into place once synced.
func (s *Store) writeArtefact(ctx context.Context, name string, dec io.Reader) (Artefact, error) {
	tmp, err := os.CreateTemp(s.Dir, name+".artefact.tmp-*")
	if err != nil {
		return Artefact{}, fmt.Errorf("decompress image %s: %w", name, err)
	}
	defer func() {
		if tmp != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	limit := s.maxBytes()
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(tmp, h), io.LimitReader(dec, limit+1))
	if err != nil {
		if ctx.Err() != nil {
			return Artefact{}, fmt.Errorf("decompress image %s: %w", name, context.Cause(ctx))
		}
		var perr *os.PathError
		if errors.As(err, &perr) {
			return Artefact{}, fmt.Errorf("decompress image %s: %w", name, err)
		}
		return Artefact{}, fmt.Errorf("decompress image %s: %w after %d bytes: %v", name, ErrCorrupt, n, err)
	}
	if n > limit {
		return Artefact{}, fmt.Errorf("decompress image %s: %w: decompresses to more than %d bytes", name, ErrTooLarge, limit)
	}
	if err := tmp.Sync(); err != nil {
		return Artefact{}, fmt.Errorf("decompress image %s: sync: %w", name, err)
	}
	if err := tmp.Close(); err != nil {
		return Artefact{}, fmt.Errorf("decompress image %s: close: %w", name, err)
	}
	path := s.artefactPath(name)
	if err := os.Rename(tmp.Name(), path); err != nil {
		return Artefact{}, fmt.Errorf("decompress image %s: install artefact: %w", name, err)
	}
	tmp = nil
	if err := syncDir(s.Dir); err != nil {
		return Artefact{}, fmt.Errorf("decompress image %s: sync store directory: %w", name, err)
	}
	return Artefact{Path: path, SHA256: hex.EncodeToString(h.Sum(nil)), Size: n}, nil
}

// linkArtefact makes an uncompressed download the artefact without a copy:
// a hard link under a temporary name, renamed into place. ok=false means
// the file system cannot link and the caller should copy.
func (s *Store) linkArtefact(ctx context.Context, name string, progress func(read, total int64)) (Artefact, bool, error) {
	tmp := fmt.Sprintf("%s.tmp-link-%d", s.artefactPath(name), os.Getpid())
	os.Remove(tmp)
	if err := os.Link(s.downloadPath(name), tmp); err != nil {
		return Artefact{}, false, nil
	}
	if err := os.Rename(tmp, s.artefactPath(name)); err != nil {
		os.Remove(tmp)
		return Artefact{}, false, fmt.Errorf("decompress image %s: install artefact: %w", name, err)
	}
	if err := syncDir(s.Dir); err != nil {
		return Artefact{}, false, fmt.Errorf("decompress image %s: sync store directory: %w", name, err)
	}
	art, err := s.describeArtefact(ctx, name, progress)
	art.Compression = model.CompressionNone
	return art, true, err
}

// describeArtefact hashes an artefact already in place.
func (s *Store) describeArtefact(ctx context.Context, name string, progress func(read, total int64)) (Artefact, error) {
	path := s.artefactPath(name)
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return Artefact{}, fmt.Errorf("decompress image %s: %w", name, ErrNotFound)
	}
	if err != nil {
		return Artefact{}, fmt.Errorf("decompress image %s: %w", name, err)
	}
	defer f.Close()
	var size int64
	if fi, err := f.Stat(); err == nil {
		size = fi.Size()
	}
	h := sha256.New()
	n, err := copyCtx(ctx, h, &progressReader{r: f, report: throttle(progress, size)})
	if err != nil {
		return Artefact{}, fmt.Errorf("decompress image %s: hash artefact: %w", name, err)
	}
	if progress != nil {
		progress(n, n)
	}
	return Artefact{Path: path, SHA256: hex.EncodeToString(h.Sum(nil)), Size: n}, nil
}
