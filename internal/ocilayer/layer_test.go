package ocilayer

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"
)

// ent is a tar entry for a test layer; typ 0 is a regular file.
type ent struct {
	name string
	typ  byte
	body string
	link string
	mode int64
}

var epoch = time.Date(2024, 5, 6, 7, 8, 9, 0, time.UTC)

func mkTar(t *testing.T, ents ...ent) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range ents {
		h := &tar.Header{Name: e.name, Typeflag: e.typ, Linkname: e.link, Mode: e.mode, ModTime: epoch, Format: tar.FormatPAX}
		if h.Typeflag == 0 {
			h.Typeflag = tar.TypeReg
			h.Size = int64(len(e.body))
		}
		if h.Mode == 0 {
			h.Mode = 0o644
			if h.Typeflag == tar.TypeDir {
				h.Mode = 0o755
			}
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(e.body)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func sha(b []byte) string {
	s := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(s[:])
}

// tree describes every path under root: "d 0755", "f 0644 <content>" or
// "l -> <target>".
func tree(t *testing.T, root string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if rel == "." {
			return nil
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			target, _ := os.Readlink(p)
			out[rel] = "l -> " + target
		case fi.IsDir():
			out[rel] = fmt.Sprintf("d %04o", fi.Mode().Perm())
		default:
			b, _ := os.ReadFile(p)
			out[rel] = fmt.Sprintf("f %04o %s", fi.Mode()&(fs.ModePerm|fs.ModeSetuid|fs.ModeSetgid), b)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func diffTrees(t *testing.T, got, want map[string]string) {
	t.Helper()
	if reflect.DeepEqual(got, want) {
		return
	}
	var keys []string
	for k := range got {
		keys = append(keys, k)
	}
	for k := range want {
		if _, ok := got[k]; !ok {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		if got[k] != want[k] {
			t.Errorf("%s: got %q, want %q", k, got[k], want[k])
		}
	}
}

func apply(t *testing.T, root string, layer []byte, mt string) string {
	t.Helper()
	d, err := ApplyLayer(root, bytes.NewReader(layer), mt)
	if err != nil {
		t.Fatalf("ApplyLayer: %v", err)
	}
	if want := sha(layer); mt == "" || strings.HasSuffix(mt, ".tar") {
		if d != want {
			t.Fatalf("DiffID %s, want %s", d, want)
		}
	}
	return d
}

// Two layers applied in order: whiteouts of a file and a directory tree,
// an opaque directory whose marker comes between this layer's own entries,
// a file replacing a directory, a directory replacing a symlink, hard
// links, a read-only directory filled by its layer, device nodes and fifos
// skipped.
func TestApplyLayerStack(t *testing.T) {
	root := t.TempDir()
	l0 := mkTar(t,
		ent{name: "etc/", typ: tar.TypeDir},
		ent{name: "etc/passwd", body: "root:x:0:0\n"},
		ent{name: "etc/gone", body: "bye"},
		ent{name: "etc/hl", typ: tar.TypeLink, link: "etc/passwd"},
		ent{name: "etc/tree/a/b", body: "deep"}, // parents implied
		ent{name: "opt/", typ: tar.TypeDir},
		ent{name: "opt/old", body: "old"},
		ent{name: "opt/sub/", typ: tar.TypeDir},
		ent{name: "opt/sub/lower", body: "lower"},
		ent{name: "usr/bin/", typ: tar.TypeDir},
		ent{name: "usr/bin/sh", body: "#!", mode: 0o4755},
		ent{name: "ro/", typ: tar.TypeDir, mode: 0o555},
		ent{name: "ro/f", body: "in a read-only dir", mode: 0o444},
		ent{name: "link", typ: tar.TypeSymlink, link: "/etc/passwd"},
		ent{name: "wasdir", typ: tar.TypeSymlink, link: "etc"},
		ent{name: "dev/null", typ: tar.TypeChar, mode: 0o666},
		ent{name: "dev/fifo", typ: tar.TypeFifo, mode: 0o600},
		ent{name: "./", typ: tar.TypeDir, mode: 0o700},
	)
	apply(t, root, l0, "application/vnd.oci.image.layer.v1.tar")
	// Directory times are set once the directory is full.
	for _, p := range []string{"etc/passwd", "etc", "ro", "usr/bin/sh"} {
		fi, _ := os.Stat(filepath.Join(root, p))
		if !fi.ModTime().Equal(epoch) {
			t.Errorf("%s mtime %v, want %v", p, fi.ModTime(), epoch)
		}
	}
	if _, err := os.Lstat(filepath.Join(root, "dev")); err == nil {
		t.Errorf("skipped device nodes left their directory")
	}

	l1 := mkTar(t,
		ent{name: "etc/.wh.gone", body: ""},
		ent{name: "etc/.wh.tree", body: ""},
		ent{name: "opt/new", body: "before the marker"},
		ent{name: "opt/.wh..wh..opq", body: ""},
		ent{name: "opt/after", body: "after the marker"},
		ent{name: "opt/sub/mine", body: "this layer's"},
		ent{name: "usr/bin", body: "a file over a directory"},
		ent{name: "wasdir/", typ: tar.TypeDir, mode: 0o750},
		ent{name: "new/x", body: "x"},
		ent{name: "new/.wh.x", body: ""}, // hides lower layers only
		ent{name: "etc/hl2", typ: tar.TypeLink, link: "/etc/passwd"},
		ent{name: "/etc/.wh.nothing-there", body: ""},
		ent{name: "nowhere/.wh.x", body: ""},
	)
	apply(t, root, l1, "")

	want := map[string]string{
		"etc":          "d 0755",
		"etc/passwd":   "f 0644 root:x:0:0\n",
		"etc/hl":       "f 0644 root:x:0:0\n",
		"etc/hl2":      "f 0644 root:x:0:0\n",
		"opt":          "d 0755",
		"opt/new":      "f 0644 before the marker",
		"opt/after":    "f 0644 after the marker",
		"opt/sub":      "d 0755",
		"opt/sub/mine": "f 0644 this layer's",
		"usr":          "d 0755",
		"usr/bin":      "f 0644 a file over a directory",
		"ro":           "d 0555",
		"ro/f":         "f 0444 in a read-only dir",
		"link":         "l -> /etc/passwd",
		"wasdir":       "d 0750",
		"new":          "d 0755",
		"new/x":        "f 0644 x",
	}
	diffTrees(t, tree(t, root), want)

	a, _ := os.Stat(filepath.Join(root, "etc/passwd"))
	for _, hl := range []string{"etc/hl", "etc/hl2"} {
		b, err := os.Stat(filepath.Join(root, hl))
		if err != nil || !os.SameFile(a, b) {
			t.Errorf("%s is not a hard link of etc/passwd", hl)
		}
	}
	fi, _ := os.Stat(root)
	if fi.Mode().Perm() == 0o700 {
		t.Errorf("the layer's ./ entry changed root's mode")
	}
}

// sandbox is a parent directory holding root and a sibling that no layer
// may touch; check fails if anything appeared outside root.
type sandbox struct {
	parent, root, sibling string
}

func newSandbox(t *testing.T) sandbox {
	p := t.TempDir()
	s := sandbox{p, filepath.Join(p, "root"), filepath.Join(p, "sibling")}
	for _, d := range []string{s.root, s.sibling} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(s.sibling, "secret"), []byte("secret"), 0o644); err != nil {
		t.Fatal(err)
	}
	return s
}

func (s sandbox) check(t *testing.T) {
	t.Helper()
	entries, _ := os.ReadDir(s.parent)
	if len(entries) != 2 {
		t.Errorf("%d entries beside root: %v", len(entries), entries)
	}
	got := tree(t, s.sibling)
	want := map[string]string{"secret": "f 0644 secret"}
	diffTrees(t, got, want)
	fi, err := os.Stat(filepath.Join(s.sibling, "secret"))
	if err != nil {
		t.Fatal(err)
	}
	if n := nlink(fi); n != 1 {
		t.Errorf("sibling/secret has %d links", n)
	}
}

// A layer cannot write, link or remove outside root: ".." and absolute
// names are contained, a path through a planted symlink is refused.
func TestApplyLayerEscapes(t *testing.T) {
	for _, tc := range []struct {
		name    string
		ents    func(s sandbox) []ent
		wantErr bool
		inRoot  map[string]string // when the entry is contained
	}{
		{"dotdot", func(s sandbox) []ent {
			return []ent{{name: "../../escape", body: "x"}, {name: "a/../../../sibling/secret", body: "overwritten"}}
		}, false, map[string]string{"escape": "f 0644 x", "sibling": "d 0755", "sibling/secret": "f 0644 overwritten"}},
		{"absolute", func(s sandbox) []ent {
			return []ent{{name: filepath.Join(s.sibling, "abs"), body: "x"}}
		}, false, nil},
		{"relative symlink then write", func(s sandbox) []ent {
			return []ent{{name: "ln", typ: tar.TypeSymlink, link: "../sibling"}, {name: "ln/pwned", body: "x"}}
		}, true, nil},
		{"absolute symlink then write", func(s sandbox) []ent {
			return []ent{{name: "ln", typ: tar.TypeSymlink, link: s.sibling}, {name: "ln/pwned", body: "x"}}
		}, true, nil},
		{"symlink then dir through it", func(s sandbox) []ent {
			return []ent{{name: "ln", typ: tar.TypeSymlink, link: "../sibling"}, {name: "ln/d/", typ: tar.TypeDir}}
		}, true, nil},
		{"symlink then overwrite it", func(s sandbox) []ent {
			return []ent{{name: "f", typ: tar.TypeSymlink, link: "../sibling/secret"}, {name: "f", body: "replaced"}}
		}, false, map[string]string{"f": "f 0644 replaced"}},
		{"symlink then whiteout through it", func(s sandbox) []ent {
			return []ent{{name: "ln", typ: tar.TypeSymlink, link: "../sibling"}, {name: "ln/.wh.secret"}}
		}, true, nil},
		{"symlink then opaque through it", func(s sandbox) []ent {
			return []ent{{name: "ln", typ: tar.TypeSymlink, link: "../sibling"}, {name: "ln/.wh..wh..opq"}}
		}, true, nil},
		{"hard link outside", func(s sandbox) []ent {
			return []ent{{name: "hl", typ: tar.TypeLink, link: "../sibling/secret"}}
		}, true, nil},
		{"hard link through symlink", func(s sandbox) []ent {
			return []ent{{name: "ln", typ: tar.TypeSymlink, link: "../sibling"}, {name: "hl", typ: tar.TypeLink, link: "ln/secret"}}
		}, true, nil},
		{"whiteout of ..", func(s sandbox) []ent {
			return []ent{{name: "x/.wh..."}}
		}, true, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newSandbox(t)
			_, err := ApplyLayer(s.root, bytes.NewReader(mkTar(t, tc.ents(s)...)), "")
			if tc.wantErr && err == nil {
				t.Errorf("ApplyLayer succeeded")
			}
			if !tc.wantErr && err != nil {
				t.Errorf("ApplyLayer: %v", err)
			}
			t.Logf("ApplyLayer: %v", err)
			s.check(t)
			if tc.inRoot != nil {
				diffTrees(t, tree(t, s.root), tc.inRoot)
			}
			if tc.name == "absolute" {
				rel := strings.TrimPrefix(filepath.Join(s.sibling, "abs"), "/")
				b, err := os.ReadFile(filepath.Join(s.root, rel))
				if err != nil || string(b) != "x" {
					t.Errorf("absolute entry not contained at root/%s: %q %v", rel, b, err)
				}
			}
		})
	}
}

// The same layer, plain, gzip and zstd, by media type and by magic bytes,
// gives the same tree and the DiffID of the uncompressed tar, padding
// after the end-of-archive marker included.
func TestApplyLayerCompression(t *testing.T) {
	plain := mkTar(t,
		ent{name: "bin/", typ: tar.TypeDir},
		ent{name: "bin/tool", body: strings.Repeat("compress me ", 1000), mode: 0o755},
		ent{name: "etc/motd", body: "hello"},
		ent{name: "tool", typ: tar.TypeSymlink, link: "bin/tool"},
	)
	plain = append(plain, make([]byte, 4096)...)
	wantDiffID := sha(plain)

	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write(plain)
	zw.Close()
	var zs bytes.Buffer
	ze, err := zstd.NewWriter(&zs)
	if err != nil {
		t.Fatal(err)
	}
	ze.Write(plain)
	ze.Close()

	var first map[string]string
	for _, tc := range []struct {
		name, mt string
		data     []byte
	}{
		{"plain", "application/vnd.oci.image.layer.v1.tar", plain},
		{"docker plain", "application/vnd.docker.image.rootfs.diff.tar", plain},
		{"plain sniffed", "", plain},
		{"gzip", "application/vnd.oci.image.layer.v1.tar+gzip", gz.Bytes()},
		{"docker gzip", "application/vnd.docker.image.rootfs.diff.tar.gzip", gz.Bytes()},
		{"gzip sniffed", "", gz.Bytes()},
		{"zstd", "application/vnd.oci.image.layer.v1.tar+zstd", zs.Bytes()},
		{"zstd sniffed", "", zs.Bytes()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			d, err := ApplyLayer(root, bytes.NewReader(tc.data), tc.mt)
			if err != nil {
				t.Fatal(err)
			}
			if d != wantDiffID {
				t.Errorf("DiffID %s, want %s", d, wantDiffID)
			}
			got := tree(t, root)
			if first == nil {
				first = got
				if got["etc/motd"] != "f 0644 hello" || got["tool"] != "l -> bin/tool" {
					t.Fatalf("tree %v", got)
				}
			}
			diffTrees(t, got, first)
		})
	}

	if _, err := ApplyLayer(t.TempDir(), bytes.NewReader(plain), "application/vnd.oci.image.layer.v1.tar+bzip2"); err == nil {
		t.Errorf("unknown media type accepted")
	}
	corrupt := append([]byte(nil), gz.Bytes()...)
	corrupt[len(corrupt)-5] ^= 0xff // the CRC
	if _, err := ApplyLayer(t.TempDir(), bytes.NewReader(corrupt), ""); err == nil {
		t.Errorf("gzip layer with a bad CRC accepted")
	}
}

func TestChainIDs(t *testing.T) {
	a := "sha256:" + strings.Repeat("a", 64)
	b := "sha256:" + strings.Repeat("b", 64)
	c := "sha256:" + strings.Repeat("c", 64)
	// printf 'sha256:aaa…a sha256:bbb…b' | sha256sum, and so on.
	ab := "sha256:" + sha256hex(a+" "+b)
	abc := "sha256:" + sha256hex(ab+" "+c)
	if got := ChainIDs(nil); len(got) != 0 {
		t.Errorf("ChainIDs(nil) = %v", got)
	}
	if got, want := ChainIDs([]string{a, b, c}), []string{a, ab, abc}; !reflect.DeepEqual(got, want) {
		t.Errorf("ChainIDs = %v, want %v", got, want)
	}
	if ab != "sha256:"+chainAB {
		t.Errorf("chain of a, b = %s, want %s (from sha256sum)", ab, chainAB)
	}
}

func sha256hex(s string) string {
	h := sha256.New()
	h.Write([]byte(s))
	return hex.EncodeToString(h.Sum(nil))
}

// chainAB is printf 'sha256:<64 a> sha256:<64 b>' | sha256sum.
const chainAB = "ccd722928bd92476ba1745586fed6e45a102504185ad88cd89e01ff116fd146c"

func nlink(fi fs.FileInfo) uint64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return uint64(st.Nlink)
	}
	return 1
}
