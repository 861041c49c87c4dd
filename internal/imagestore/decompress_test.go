package imagestore

import (
	"bytes"
	"compress/gzip"
	"errors"
	"os"
	"slices"
	"testing"

	"github.com/klauspost/compress/zstd"
	"github.com/ulikunitz/xz"

	"github.com/zonewright/zonewright/internal/model"
)

func compress(t *testing.T, compression string, data []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	switch compression {
	case model.CompressionGzip:
		w := gzip.NewWriter(&buf)
		w.Write(data)
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
	case model.CompressionZstd:
		w, err := zstd.NewWriter(&buf)
		if err != nil {
			t.Fatal(err)
		}
		w.Write(data)
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
	case model.CompressionXZ:
		w, err := xz.NewWriter(&buf)
		if err != nil {
			t.Fatal(err)
		}
		w.Write(data)
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
	default:
		buf.Write(data)
	}
	return buf.Bytes()
}

// fetched puts file into the store as image name's verified download, by
// fetching it from a local server under a misleading file name.
func fetched(t *testing.T, s *Store, name string, file []byte) {
	t.Helper()
	_, srv := newSource(t, file)
	if _, err := s.Fetch(t.Context(), FetchRequest{Name: name, URL: srv.URL + "/rootfs.tar.bz2", SHA256: sum(file)}); err != nil {
		t.Fatal(err)
	}
}

func TestDecompressDetectsEachCompressionFromMagicBytes(t *testing.T) {
	data := payload(2<<20+3, 20)
	for _, c := range []string{model.CompressionGzip, model.CompressionZstd, model.CompressionXZ, model.CompressionNone} {
		for _, declared := range []string{"", c} {
			t.Run(c+"/declared="+declared, func(t *testing.T) {
				s := newStore(t)
				file := compress(t, c, data)
				fetched(t, s, "img", file)

				var calls [][2]int64
				art, err := s.DecompressProgress(t.Context(), "img", declared, func(read, total int64) {
					calls = append(calls, [2]int64{read, total})
				})
				if err != nil {
					t.Fatal(err)
				}
				if n := int64(len(file)); len(calls) == 0 || calls[len(calls)-1] != [2]int64{n, n} {
					t.Fatalf("progress calls %v, want the last to be the download's size (%d) twice", calls, n)
				}
				if art.Compression != c || art.SHA256 != sum(data) || art.Size != int64(len(data)) || art.Path != s.artefactPath("img") {
					t.Fatalf("artefact %+v, want %s with the payload's digest and size", art, c)
				}
				if !bytes.Equal(readFile(t, art.Path), data) {
					t.Fatal("artefact differs from the payload")
				}
				if got := storeFiles(t, s); !slices.Equal(got, []string{"img.artefact", "img.download"}) {
					t.Fatalf("store holds %v, want the download and the artefact only", got)
				}
				// The download is kept, so a repeat gives the same artefact.
				again, err := s.Decompress(t.Context(), "img", declared)
				if err != nil || again != art {
					t.Fatalf("repeat: %+v, %v; want %+v", again, err, art)
				}
			})
		}
	}
}

func TestDecompressRefusesADeclaredCompressionTheMagicContradicts(t *testing.T) {
	s := newStore(t)
	fetched(t, s, "img", compress(t, model.CompressionGzip, payload(1000, 21)))
	for _, declared := range []string{model.CompressionZstd, model.CompressionXZ, model.CompressionNone, "bzip2"} {
		_, err := s.Decompress(t.Context(), "img", declared)
		if !errors.Is(err, ErrInvalid) || !Permanent(err) {
			t.Fatalf("declared %s: err = %v, want ErrInvalid", declared, err)
		}
	}
	if _, err := os.Stat(s.artefactPath("img")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("an artefact appeared after refusals: %v", err)
	}
}

func TestDecompressStopsABomb(t *testing.T) {
	s := newStore(t)
	s.MaxBytes = 1 << 20
	fetched(t, s, "bomb", compress(t, model.CompressionZstd, make([]byte, 16<<20)))
	_, err := s.Decompress(t.Context(), "bomb", "")
	if !errors.Is(err, ErrTooLarge) || !Permanent(err) {
		t.Fatalf("err = %v, want ErrTooLarge for exceeding the limit", err)
	}
	if got := storeFiles(t, s); !slices.Equal(got, []string{"bomb.download"}) {
		t.Fatalf("store holds %v, want no artefact and no temporary", got)
	}
}

func TestDecompressRejectsCorruptData(t *testing.T) {
	s := newStore(t)
	file := compress(t, model.CompressionGzip, payload(256<<10, 22))
	file = file[:len(file)/2] // a truncated stream that still starts with gzip's magic
	fetched(t, s, "broken", file)
	_, err := s.Decompress(t.Context(), "broken", "")
	if !errors.Is(err, ErrCorrupt) || !Permanent(err) {
		t.Fatalf("err = %v, want ErrCorrupt", err)
	}
	if got := storeFiles(t, s); !slices.Equal(got, []string{"broken.download"}) {
		t.Fatalf("store holds %v, want no artefact and no temporary", got)
	}
}

func TestDecompressWithoutDownloadIsNotFound(t *testing.T) {
	s := newStore(t)
	_, err := s.Decompress(t.Context(), "absent", "")
	if !errors.Is(err, ErrNotFound) {
		t.Fatalf("err = %v, want ErrNotFound", err)
	}
}

func FuzzDetectCompression(f *testing.F) {
	for _, seed := range [][]byte{nil, magicGzip, magicZstd, magicXZ, magicXZ[:5], []byte("ustar\x00"), {0x1f}} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, head []byte) {
		got := DetectCompression(head)
		magic := map[string][]byte{model.CompressionGzip: magicGzip, model.CompressionZstd: magicZstd, model.CompressionXZ: magicXZ}
		if got == model.CompressionNone {
			for c, m := range magic {
				if bytes.HasPrefix(head, m) {
					t.Fatalf("% x starts with %s's magic but was detected as none", head, c)
				}
			}
			return
		}
		m, ok := magic[got]
		if !ok || !bytes.HasPrefix(head, m) {
			t.Fatalf("% x detected as %q without its magic", head, got)
		}
	})
}

// A published blob is the artefact exactly as downloaded, compressed or
// not: nodes verify it against its own digest (an oci layer's).
func TestPublishKeepsTheDownloadAsItIs(t *testing.T) {
	s := newStore(t)
	for _, compression := range []string{model.CompressionGzip, model.CompressionZstd, model.CompressionNone} {
		blob := compress(t, compression, payload(5000, 3))
		name := BlobName(sum(blob))
		fetched(t, s, name, blob)
		for range 2 { // repeatable
			art, err := s.Publish(t.Context(), name)
			if err != nil {
				t.Fatalf("%s: %v", compression, err)
			}
			if art.SHA256 != sum(blob) || art.Size != int64(len(blob)) {
				t.Errorf("%s: artefact %s of %d bytes, want the download's %s of %d", compression, art.SHA256, art.Size, sum(blob), len(blob))
			}
		}
		if got, err := os.ReadFile(s.artefactPath(name)); err != nil || !bytes.Equal(got, blob) {
			t.Errorf("%s: the artefact is not the download as it is (%v)", compression, err)
		}
	}
}
