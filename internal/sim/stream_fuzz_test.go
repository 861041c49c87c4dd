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
