package sim

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// writeTestStream builds a stream of a small tree with the writer itself.
func writeTestStream(t testing.TB, files map[string]string) []byte {
	t.Helper()
	dir := t.TempDir()
	for name, body := range files {
		p := filepath.Join(dir, name)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var buf bytes.Buffer
	w := newStreamWriter(&buf)
	if err := w.header(streamHeader{ToName: "tank/a@s", Type: "filesystem"}); err != nil {
		t.Fatal(err)
	}
	if err := w.writeTree(dir); err != nil {
		t.Fatal(err)
	}
	if err := w.end(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// writeTestVolumeDelta builds an incremental volume stream between two
// small volumes' data.
func writeTestVolumeDelta(t testing.TB, from, to []byte) []byte {
	t.Helper()
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	os.WriteFile(a, from, 0o600)
	os.WriteFile(b, to, 0o600)
	var buf bytes.Buffer
	w := newStreamWriter(&buf)
	hdr := streamHeader{ToName: "tank/v@b", Type: "volume", VolSize: uint64(len(to)), FromName: "tank/v@a", FromGUID: 1}
	if err := w.header(hdr); err != nil {
		t.Fatal(err)
	}
	if err := w.writeVolumeDelta(a, b, 512); err != nil {
		t.Fatal(err)
	}
	if err := w.end(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestVolumeDeltaCarriesOnlyChangedBlocks(t *testing.T) {
	from := bytes.Repeat([]byte{'a'}, 4096)
	to := bytes.Clone(from)
	copy(to[1000:], "changed")         // block 1
	copy(to[3584:], make([]byte, 512)) // block 7, now zeros
	to = append(to, []byte("grown")...)
	stream := writeTestVolumeDelta(t, from, to)
	if len(stream) > 3*512+200 {
		t.Errorf("a delta of three blocks is %d bytes", len(stream))
	}
	vol := filepath.Join(t.TempDir(), "zvol")
	os.WriteFile(vol, from, 0o600)
	sr := newStreamReader(bytes.NewReader(stream))
	if _, err := sr.header(); err != nil {
		t.Fatal(err)
	}
	if err := sr.body("", vol); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(vol); !bytes.Equal(got, to) {
		t.Errorf("applied delta differs from the new data")
	}
}

func TestStreamRoundTripAndDamage(t *testing.T) {
	stream := writeTestStream(t, map[string]string{"etc/motd": "hello", "bin/sh": "#!"})
	read := func(b []byte) (string, error) {
		dir := t.TempDir()
		sr := newStreamReader(bytes.NewReader(b))
		if _, err := sr.header(); err != nil {
			return dir, err
		}
		return dir, sr.body(dir, "")
	}
	dir, err := read(stream)
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "etc/motd")); string(b) != "hello" {
		t.Errorf("motd %q", b)
	}
	tests := []struct {
		name string
		b    []byte
		want error
	}{
		{"empty", nil, errStreamShort},
		{"another magic", append([]byte("NOTMAGIC"), stream[8:]...), errStreamMagic},
		{"cut in the header", stream[:10], errStreamShort},
		{"cut in the body", stream[:len(stream)-40], errStreamShort},
		{"cut in the end record", stream[:len(stream)-5], errStreamShort},
		{"a flipped byte", bytes.Replace(stream, []byte("hello"), []byte("jello"), 1), errStreamChecksum},
	}
	for _, tt := range tests {
		if _, err := read(tt.b); !errors.Is(err, tt.want) {
			t.Errorf("%s: %v, want %v", tt.name, err, tt.want)
		}
	}
}

func TestStreamCannotWriteThroughItsOwnSymlinks(t *testing.T) {
	outside := t.TempDir()
	var buf bytes.Buffer
	w := newStreamWriter(&buf)
	w.header(streamHeader{ToName: "tank/a@s", Type: "filesystem"})
	w.entry('L', "escape", 0o777, uint64(len(outside)), strings.NewReader(outside))
	w.entry('F', "escape/owned", 0o644, 2, strings.NewReader("hi"))
	w.end()
	sr := newStreamReader(&buf)
	if _, err := sr.header(); err != nil {
		t.Fatal(err)
	}
	if err := sr.body(t.TempDir(), ""); !errors.Is(err, errStreamMalformed) {
		t.Errorf("body: %v, want a malformed stream", err)
	}
	if _, err := os.Stat(filepath.Join(outside, "owned")); !os.IsNotExist(err) {
		t.Errorf("the stream wrote through its symlink: %v", err)
	}
}

// FuzzStreamReader: no input makes the reader panic or write outside its
// directory.
func FuzzStreamReader(f *testing.F) {
	f.Add(writeTestStream(f, map[string]string{"etc/motd": "hello"}))
	f.Add([]byte(streamMagic + "\x00\x00\x00\x02{}"))
	f.Add(writeTestVolumeDelta(f, bytes.Repeat([]byte{'a'}, 2048), append(bytes.Repeat([]byte{'b'}, 600), make([]byte, 1600)...)))
	f.Add(writeTestVolumeDelta(f, make([]byte, 1024), []byte("short")))
	f.Fuzz(func(t *testing.T, b []byte) {
		base := t.TempDir()
		dir := filepath.Join(base, "tree")
		os.Mkdir(dir, 0o755)
		sr := newStreamReader(bytes.NewReader(b))
		if _, err := sr.header(); err != nil {
			return
		}
		_ = sr.body(dir, filepath.Join(base, "zvol"))
		entries, _ := os.ReadDir(base)
		for _, e := range entries {
			if e.Name() != "tree" && e.Name() != "zvol" {
				t.Fatalf("the stream wrote %s outside its directory", e.Name())
			}
		}
	})
}
