// Package ocilayer applies OCI image layers onto a directory (whiteouts,
// opaque directories, every path confined to the directory) and names
// stacks of them by chain ID: what a node needs of an image, apart from
// the registry (package oci), which only the control plane speaks to.
package ocilayer

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"strings"
	"syscall"
	"time"

	"github.com/klauspost/compress/zstd"
)

const (
	whiteoutPrefix = ".wh."
	whiteoutMeta   = ".wh..wh."
	opaqueMarker   = ".wh..wh..opq"
)

// ApplyLayer unpacks one layer (a tar stream, compressed as mediaType says:
// gzip, zstd or none; detected from magic bytes if mediaType is empty) onto
// the directory root, with OCI whiteouts: ".wh.<name>" removes <name> from
// the lower layers, ".wh..wh..opq" in a directory empties it of what lower
// layers put there (but keeps what this layer adds, in any order within the
// tar). It returns the sha256 DiffID ("sha256:<hex>") of the uncompressed
// tar, for the caller to compare with the image config's.
//
// A layer is untrusted input, so every file operation goes through an
// os.Root: no entry escapes root by "..", an absolute path or a symlink.
// Names are cleaned relative to root as Docker does ("/etc/x" and
// "../../etc/x" are root/etc/x); a symlink entry is created as it is but
// never followed: an entry whose parent path runs through a symlink is an
// error. Device nodes and fifos are skipped (a zone gets its devices
// elsewhere); ownership is set only when running as root.
func ApplyLayer(root string, r io.Reader, mediaType string) (diffID string, err error) {
	rt, err := os.OpenRoot(root)
	if err != nil {
		return "", err
	}
	defer rt.Close()

	ur, closeFn, err := decompress(r, mediaType)
	if err != nil {
		return "", err
	}
	defer closeFn()
	h := sha256.New()
	tee := io.TeeReader(ur, h)

	a := &applier{
		root:    rt,
		written: map[string]bool{"": true},
		dirs:    map[string]bool{"": true},
		chown:   os.Geteuid() == 0,
	}
	tr := tar.NewReader(tee)
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return "", fmt.Errorf("read layer: %w", err)
		}
		if err := a.entry(hdr, tr); err != nil {
			return "", fmt.Errorf("layer entry %q: %w", hdr.Name, err)
		}
	}
	// The DiffID covers the whole stream, including the padding after the
	// end-of-archive marker; reading to EOF also makes gzip check its CRC.
	if _, err := io.Copy(io.Discard, tee); err != nil {
		return "", fmt.Errorf("read layer: %w", err)
	}
	// Directory modes and times last, deepest first, since filling a
	// directory changes its mtime and may need write permission.
	for i := len(a.dirMeta) - 1; i >= 0; i-- {
		if err := a.finishDir(a.dirMeta[i]); err != nil {
			return "", fmt.Errorf("layer entry %q: %w", a.dirMeta[i].name, err)
		}
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil)), nil
}

// ChainIDs are the OCI chain IDs of a stack of layers, bottom first:
// ChainID(L0) = DiffID(L0), ChainID(Ln) = sha256(ChainID(Ln-1) + " " +
// DiffID(Ln)). A chain ID names a stack of unpacked layers, so a stack can
// be shared by every image that starts with the same layers.
func ChainIDs(diffIDs []string) []string {
	out := make([]string, len(diffIDs))
	for i, d := range diffIDs {
		if i == 0 {
			out[i] = d
			continue
		}
		sum := sha256.Sum256([]byte(out[i-1] + " " + d))
		out[i] = "sha256:" + hex.EncodeToString(sum[:])
	}
	return out
}

// decompress returns the uncompressed tar stream.
func decompress(r io.Reader, mediaType string) (io.Reader, func(), error) {
	kind := ""
	switch {
	case mediaType == "":
		br := bufio.NewReader(r)
		magic, _ := br.Peek(4)
		switch {
		case bytes.HasPrefix(magic, []byte{0x1f, 0x8b}):
			kind = "gzip"
		case bytes.HasPrefix(magic, []byte{0x28, 0xb5, 0x2f, 0xfd}):
			kind = "zstd"
		}
		r = br
	case strings.HasSuffix(mediaType, "+gzip") || strings.HasSuffix(mediaType, ".tar.gzip") || strings.HasSuffix(mediaType, ".tar.gz"):
		kind = "gzip"
	case strings.HasSuffix(mediaType, "+zstd") || strings.HasSuffix(mediaType, ".tar.zstd"):
		kind = "zstd"
	case strings.HasSuffix(mediaType, ".tar") || strings.HasSuffix(mediaType, ".v1.tar"):
	default:
		return nil, nil, fmt.Errorf("layer media type %q is not a tar, tar+gzip or tar+zstd", mediaType)
	}
	switch kind {
	case "gzip":
		zr, err := gzip.NewReader(r)
		if err != nil {
			return nil, nil, fmt.Errorf("gzip layer: %w", err)
		}
		return zr, func() { zr.Close() }, nil
	case "zstd":
		// One goroutine, and a window no larger than zstd --long's
		// (128 MiB), so a hostile layer cannot demand more memory.
		zr, err := zstd.NewReader(r, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxWindow(128<<20))
		if err != nil {
			return nil, nil, fmt.Errorf("zstd layer: %w", err)
		}
		return zr, zr.Close, nil
	}
	return r, func() {}, nil
}

type dirMeta struct {
	name  string
	mode  fs.FileMode
	mtime time.Time
}

// finishDir sets a directory's mode and mtime, if it is still a directory
// (a later entry of the layer may have replaced it, even by a symlink,
// which Chmod and Chtimes would follow).
func (a *applier) finishDir(d dirMeta) error {
	if err := a.checkParents(path.Dir(d.name)); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return err
	}
	fi, err := a.root.Lstat(d.name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		return nil
	}
	if err := a.root.Chmod(d.name, d.mode); err != nil {
		return err
	}
	return a.root.Chtimes(d.name, time.Time{}, d.mtime)
}

type applier struct {
	root *os.Root
	// written holds what this layer has put in place, and their parent
	// directories, so an opaque marker or whiteout (which apply to the
	// lower layers only) spares them whatever the order of the tar.
	written map[string]bool
	// dirs caches paths known to be real directories (not symlinks);
	// it is reset whenever something is removed.
	dirs    map[string]bool
	chown   bool
	dirMeta []dirMeta
}

// cleanName makes a tar name relative to root: "/a/../b" and "../../b"
// both become "b"; "" is root itself.
func cleanName(n string) string {
	return strings.TrimPrefix(path.Clean("/"+n), "/")
}

func (a *applier) entry(hdr *tar.Header, r io.Reader) error {
	name := cleanName(hdr.Name)
	if name == "" {
		// The root directory itself: its owner and mode are the
		// caller's, not the layer's.
		return nil
	}
	dir, base := path.Split(name)
	dir = strings.TrimSuffix(dir, "/")

	if strings.HasPrefix(base, whiteoutPrefix) {
		return a.whiteout(dir, base)
	}

	switch hdr.Typeflag {
	case tar.TypeChar, tar.TypeBlock, tar.TypeFifo:
		return nil
	case tar.TypeReg, tar.TypeDir, tar.TypeSymlink, tar.TypeLink, tar.TypeGNUSparse:
	default:
		// Other types (PAX/GNU extension records are consumed by
		// archive/tar) carry no file.
		return nil
	}

	if err := a.mkParents(dir); err != nil {
		return err
	}
	isDir := hdr.Typeflag == tar.TypeDir
	if err := a.clear(name, isDir); err != nil {
		return err
	}
	a.markWritten(name)

	mode := hdr.FileInfo().Mode() & (fs.ModePerm | fs.ModeSetuid | fs.ModeSetgid | fs.ModeSticky)
	switch hdr.Typeflag {
	case tar.TypeDir:
		return a.mkdir(name, hdr, mode)
	case tar.TypeSymlink:
		if err := a.root.Symlink(hdr.Linkname, name); err != nil {
			return err
		}
		return a.lchown(name, hdr)
	case tar.TypeLink:
		return a.hardLink(name, hdr)
	}
	return a.writeFile(name, hdr, r, mode)
}

// mkdir makes directory name, its mode set at the end (finishDir).
func (a *applier) mkdir(name string, hdr *tar.Header, mode fs.FileMode) error {
	if err := a.root.Mkdir(name, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	a.dirs[name] = true
	if err := a.lchown(name, hdr); err != nil {
		return err
	}
	// Writable by us until the end, when the layer's mode is set:
	// a 0555 directory must still take this layer's entries.
	if err := a.root.Chmod(name, mode|0o700); err != nil {
		return err
	}
	a.dirMeta = append(a.dirMeta, dirMeta{name, mode, hdr.ModTime})
	return nil
}

// hardLink links name to its target, which must be under root through
// real directories.
func (a *applier) hardLink(name string, hdr *tar.Header) error {
	target := cleanName(hdr.Linkname)
	if target == "" {
		return fmt.Errorf("hard link to the root directory")
	}
	tdir, _ := path.Split(target)
	if err := a.checkParents(strings.TrimSuffix(tdir, "/")); err != nil {
		return fmt.Errorf("hard link target %q: %w", hdr.Linkname, err)
	}
	return a.root.Link(target, name)
}

// writeFile writes the regular file name from r.
func (a *applier) writeFile(name string, hdr *tar.Header, r io.Reader, mode fs.FileMode) error {
	// O_EXCL: clear removed whatever was there, and if something
	// reappeared it must not be followed.
	f, err := a.root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, r); err != nil {
		f.Close()
		return err
	}
	if a.chown {
		if err := f.Chown(hdr.Uid, hdr.Gid); err != nil && !errors.Is(err, syscall.EPERM) {
			f.Close()
			return err
		}
	}
	// Mode after chown, which clears set-id bits.
	if err := f.Chmod(mode); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return a.root.Chtimes(name, hdr.AccessTime, hdr.ModTime)
}

func (a *applier) lchown(name string, hdr *tar.Header) error {
	if !a.chown {
		return nil
	}
	if err := a.root.Lchown(name, hdr.Uid, hdr.Gid); err != nil && !errors.Is(err, syscall.EPERM) {
		return err
	}
	return nil
}

// whiteout handles ".wh.<name>" and ".wh..wh..opq" in dir.
func (a *applier) whiteout(dir, base string) error {
	if base == opaqueMarker {
		if err := a.checkParents(dir); err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if dir != "" {
			fi, err := a.root.Lstat(dir)
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			if err != nil {
				return err
			}
			if !fi.IsDir() {
				return fmt.Errorf("opaque marker in %q, which is not a directory", dir)
			}
		}
		return a.opaque(dir)
	}
	if strings.HasPrefix(base, whiteoutMeta) {
		// Other AUFS metadata (.wh..wh.plnk, .wh..wh.aufs): not files.
		return nil
	}
	target := strings.TrimPrefix(base, whiteoutPrefix)
	if target == "" || target == "." || target == ".." {
		return fmt.Errorf("invalid whiteout %q", base)
	}
	name := path.Join(dir, target)
	if a.written[name] {
		// A whiteout hides lower layers only.
		return nil
	}
	if err := a.checkParents(dir); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return err
	}
	a.dirs = map[string]bool{"": true}
	if err := a.root.RemoveAll(name); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

// opaque removes from dir everything this layer has not written.
func (a *applier) opaque(dir string) error {
	d := dir
	if d == "" {
		d = "."
	}
	f, err := a.root.Open(d)
	if err != nil {
		return err
	}
	names, err := f.Readdirnames(-1)
	f.Close()
	if err != nil {
		return err
	}
	for _, n := range names {
		p := path.Join(dir, n)
		if !a.written[p] {
			a.dirs = map[string]bool{"": true}
			if err := a.root.RemoveAll(p); err != nil {
				return err
			}
			continue
		}
		// Written by this layer: if it is a directory, what lower
		// layers left inside it goes too (the whole subtree was
		// opaque), unless this layer wrote it.
		fi, err := a.root.Lstat(p)
		if err != nil {
			return err
		}
		if fi.IsDir() {
			if err := a.opaque(p); err != nil {
				return err
			}
		}
	}
	return nil
}

// markWritten records name and its parents as this layer's.
func (a *applier) markWritten(name string) {
	for name != "" && !a.written[name] {
		a.written[name] = true
		name = path.Dir(name)
		if name == "." {
			name = ""
		}
	}
}

// mkParents makes sure every component of dir is a real directory,
// creating missing ones, and refuses a symlink or a file on the way: a
// symlink planted by a layer is never followed.
func (a *applier) mkParents(dir string) error {
	return a.walkParents(dir, true)
}

// checkParents is mkParents without creating anything; a missing
// component is fs.ErrNotExist.
func (a *applier) checkParents(dir string) error {
	return a.walkParents(dir, false)
}

func (a *applier) walkParents(dir string, create bool) error {
	if a.dirs[dir] {
		return nil
	}
	p := ""
	for _, c := range strings.Split(dir, "/") {
		p = path.Join(p, c)
		if a.dirs[p] {
			continue
		}
		fi, err := a.root.Lstat(p)
		switch {
		case errors.Is(err, fs.ErrNotExist) && create:
			if err := a.root.Mkdir(p, 0o755); err != nil {
				return err
			}
			a.markWritten(p)
		case err != nil:
			return err
		case fi.Mode()&fs.ModeSymlink != 0:
			return fmt.Errorf("parent %q is a symlink, which is not followed", p)
		case !fi.IsDir():
			return fmt.Errorf("parent %q is not a directory", p)
		}
		a.dirs[p] = true
	}
	return nil
}

// clear removes what is at name unless both it and the new entry are
// directories (a directory entry over a directory only updates its
// metadata). A file over a directory removes the directory's tree.
func (a *applier) clear(name string, isDir bool) error {
	fi, err := a.root.Lstat(name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if isDir && fi.IsDir() {
		return nil
	}
	a.dirs = map[string]bool{"": true}
	if fi.IsDir() {
		return a.root.RemoveAll(name)
	}
	return a.root.Remove(name)
}
