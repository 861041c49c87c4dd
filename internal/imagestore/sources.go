package imagestore

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// Sources says what the control plane may read images from. Without it an
// import could read any file the control plane can (file:///etc/shadow) or
// reach any address on its network (its database, Temporal, a cloud
// metadata service). The zero value refuses file:// sources and every
// non-public address.
type Sources struct {
	// FileDir: file:// sources only beneath this directory (symlinks are
	// followed only while they stay inside it); empty refuses file://.
	FileDir string
	// AllowPrivate lists non-public ranges http(s) sources may reach
	// anyway (the dev stack allows loopback).
	AllowPrivate []netip.Prefix
}

// RefusedSourceError is a source the store does not read from. Permanent.
// Reason says why without describing anything the store found there.
type RefusedSourceError struct{ Reason string }

func (e *RefusedSourceError) Error() string { return "source refused: " + e.Reason }

func refused(format string, args ...any) error {
	return &RefusedSourceError{Reason: fmt.Sprintf(format, args...)}
}

// nonPublic are the ranges an http(s) source may not reach unless allowed:
// unspecified, loopback, private (RFC 1918, ULA), CGNAT, link-local (cloud
// metadata 169.254.169.254 and fd00:ec2::254 included), multicast,
// reserved and broadcast.
var nonPublic = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),
	netip.MustParsePrefix("10.0.0.0/8"),
	netip.MustParsePrefix("100.64.0.0/10"),
	netip.MustParsePrefix("127.0.0.0/8"),
	netip.MustParsePrefix("169.254.0.0/16"),
	netip.MustParsePrefix("172.16.0.0/12"),
	netip.MustParsePrefix("192.0.0.0/24"),
	netip.MustParsePrefix("192.168.0.0/16"),
	netip.MustParsePrefix("198.18.0.0/15"),
	netip.MustParsePrefix("224.0.0.0/4"),
	netip.MustParsePrefix("240.0.0.0/4"),
	netip.MustParsePrefix("::/128"),
	netip.MustParsePrefix("::1/128"),
	netip.MustParsePrefix("fc00::/7"),
	netip.MustParsePrefix("fe80::/10"),
	netip.MustParsePrefix("ff00::/8"),
}

// nat64 embeds an IPv4 address in its last 32 bits.
var nat64 = netip.MustParsePrefix("64:ff9b::/96")

// ParsePrefixes reads a comma-separated list of CIDRs or single addresses
// (what --image-allow-private-sources takes).
func ParsePrefixes(list string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, f := range strings.Split(list, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		if !strings.Contains(f, "/") {
			a, err := netip.ParseAddr(f)
			if err != nil {
				return nil, fmt.Errorf("%q is neither a CIDR nor an address", f)
			}
			out = append(out, netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen()))
			continue
		}
		p, err := netip.ParsePrefix(f)
		if err != nil {
			return nil, fmt.Errorf("%q is neither a CIDR nor an address", f)
		}
		out = append(out, p.Masked())
	}
	return out, nil
}

// CheckAddr refuses an address an http(s) source may not reach.
func (p *Sources) CheckAddr(a netip.Addr) error {
	a = a.Unmap().WithZone("")
	if nat64.Contains(a) {
		b := a.As16()
		a = netip.AddrFrom4([4]byte(b[12:]))
	}
	for _, allowed := range p.AllowPrivate {
		if allowed.Contains(a) {
			return nil
		}
	}
	for _, n := range nonPublic {
		if n.Contains(a) {
			return refused("the address is loopback, private, link-local or otherwise not public (see --image-allow-private-sources)")
		}
	}
	return nil
}

// CheckURL decides what the URL alone tells: the scheme, credentials, a
// file outside FileDir, a literal address that may not be reached. Names
// are checked again on the address actually dialled (dialControl).
func (p *Sources) CheckURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return refused("the URL does not parse")
	}
	if u.User != nil {
		return refused("credentials in the URL are not accepted")
	}
	switch u.Scheme {
	case "http", "https":
		return p.checkHost(u.Hostname())
	case "file":
		if u.Host != "" && u.Host != "localhost" {
			return refused("a file URL names no host")
		}
		_, err := p.fileRel(u.Path)
		return err
	}
	return refused("the scheme must be http, https or file")
}

func (p *Sources) checkHost(host string) error {
	if host == "" {
		return refused("the URL has no host")
	}
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return p.CheckAddr(netip.IPv6Loopback())
	}
	if a, err := netip.ParseAddr(host); err == nil {
		return p.CheckAddr(a)
	}
	return nil
}

// fileRel is path relative to FileDir, refused when it is outside it,
// climbs with "..", or (where it exists already) resolves outside it.
func (p *Sources) fileRel(path string) (string, error) {
	if p.FileDir == "" {
		return "", refused("file sources are disabled (no --image-source-dir)")
	}
	if !filepath.IsAbs(path) {
		return "", refused("a file URL needs an absolute path")
	}
	for _, part := range strings.Split(path, "/") {
		if part == ".." {
			return "", refused("the path may not contain \"..\"")
		}
	}
	dir := filepath.Clean(p.FileDir)
	outside := refused("the file is not inside the image source directory (--image-source-dir)")
	rel, err := filepath.Rel(dir, filepath.Clean(path))
	if err != nil || rel == "." || rel == ".." || strings.HasPrefix(rel, "../") {
		return "", outside
	}
	// A symlink inside the directory may lead out of it: where the file
	// exists already, say so now (the fetch opens it confined anyway).
	if realDir, err := filepath.EvalSymlinks(dir); err == nil {
		if real, err := filepath.EvalSymlinks(filepath.Join(dir, rel)); err == nil {
			if r, err := filepath.Rel(realDir, real); err != nil || r == "." || r == ".." || strings.HasPrefix(r, "../") {
				return "", outside
			}
		}
	}
	return rel, nil
}

// openFile opens a file source confined to FileDir: os.Root refuses ".."
// and symlinks that lead out of the directory, whatever the file system
// holds by the time the fetch runs. Only regular files are read.
func (p *Sources) openFile(path string) (*os.File, error) {
	rel, err := p.fileRel(path)
	if err != nil {
		return nil, err
	}
	root, err := os.OpenRoot(p.FileDir)
	if err != nil {
		return nil, fmt.Errorf("image source directory: %w", err)
	}
	defer root.Close()
	// Non-blocking: opening a FIFO would otherwise wait for a writer.
	f, err := root.OpenFile(rel, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		var pe *os.PathError
		if errors.As(err, &pe) && strings.Contains(pe.Err.Error(), "escapes") {
			return nil, refused("the file is not inside the image source directory (--image-source-dir)")
		}
		return nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, refused("the source is not a regular file")
	}
	return f, nil
}

// dialControl refuses a connection to an address an http(s) source may
// not reach. It runs on the address actually dialled, after resolution,
// so neither a name that resolves (or re-resolves) to a private address
// nor a redirect to one gets past it.
func (p *Sources) dialControl(network, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return refused("the address does not parse")
	}
	return p.CheckAddr(ap.Addr())
}

// guardedDialer dials only addresses the policy allows.
func (p *Sources) guardedDialer(d *net.Dialer) func(ctx context.Context, network, addr string) (net.Conn, error) {
	d.Control = p.dialControl
	return d.DialContext
}
