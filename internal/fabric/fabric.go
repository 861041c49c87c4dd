// Package fabric makes the networks of isolation mode on Linux: a fabric
// (a bridge in a network namespace of its own, standing for the hosts'
// physical network) joining one network namespace per simulated node,
// where the node's agent runs and illumos-sim realises the node's links,
// addresses and routes. Each node has an underlay address on the fabric
// (net0); the host running the control plane has one too, so it reaches
// the agents' endpoints as it would over a real network, and nothing
// else: it has no route to the pods. Relays listening inside a node's
// namespace carry its agent's connections to the control plane's
// loopback addresses.
package fabric

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// IsolatedClusterCIDR is the pod range of a stack in isolation mode:
// 10.<network>.0.0/17, beside its underlay (IsolatedUnderlay), inside
// namespaces only.
func IsolatedClusterCIDR(network int) string { return fmt.Sprintf("10.%d.0.0/17", network) }

// IsolatedUnderlay is the nodes' network in isolation mode,
// 10.<network>.255.0/24: node i is .i, the control plane's host .254.
func IsolatedUnderlay(network int) netip.Prefix {
	return netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(network), 255, 0}), 24)
}

// IsolationSupported says why isolation mode cannot run here, or nil:
// it needs iproute2's ip, util-linux's nsenter, nftables' nft
// and conntrack-tools' conntrack (kernel NAT), network namespaces, and
// root or, without it, a user namespace with subordinate ids
// (userNamespaceSupported).
func IsolationSupported() error {
	for _, tool := range []string{"ip", "nsenter", "nft", "conntrack"} {
		if _, err := exec.LookPath(tool); err != nil {
			return fmt.Errorf("isolation mode needs %s: %w", tool, err)
		}
	}
	if os.Geteuid() != 0 {
		return userNamespaceSupported()
	}
	name := fmt.Sprintf("zwprobe%d", os.Getpid())
	if err := ipCmd("netns", "add", name); err != nil {
		return fmt.Errorf("isolation mode cannot make a network namespace: %w", err)
	}
	return ipCmd("netns", "del", name)
}

// DirectIsolationSupported is IsolationSupported for a program that runs
// the nodes' commands itself rather than through Fabric.Command (tests,
// benchmarks): it needs root.
func DirectIsolationSupported() error {
	if os.Geteuid() != 0 {
		return errors.New("isolation mode with the nodes' commands run from outside their namespaces needs root")
	}
	return IsolationSupported()
}

func ipCmd(args ...string) error {
	return run(exec.Command("ip", args...))
}

func run(cmd *exec.Cmd) error {
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%s: %w: %s", strings.Join(cmd.Args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// Fabric is the network of an isolated stack.
type Fabric struct {
	prefix   string // of every namespace and link name it makes
	underlay netip.Prefix
	cpLink   string // the control plane host's end, in this namespace or the keeper's
	log      *slog.Logger
	keeper   *keeper // in user-namespace mode; nil as root

	mu        sync.Mutex
	listeners []net.Listener
}

// New makes the fabric, with underlay (IsolatedUnderlay), of the stack
// keeping its data in dataDir (an absolute path: it names the
// namespaces), removing first what a stack there left behind (one killed
// before it could clean up). log may be nil.
func New(dataDir string, underlay netip.Prefix, log *slog.Logger) (*Fabric, error) {
	p := prefixOf(dataDir)
	f := &Fabric{prefix: p, underlay: underlay, cpLink: p + "cp", log: log}
	if os.Geteuid() != 0 {
		k, err := startKeeper()
		if err != nil {
			return nil, err
		}
		f.keeper = k
	}
	f.removeNamespaces()
	cp := underlay.Addr()
	for range 254 {
		cp = cp.Next()
	}
	steps := [][]string{
		{"netns", "add", f.ns("fabric")},
		{"-n", f.ns("fabric"), "link", "add", "fab0", "type", "bridge"},
		{"-n", f.ns("fabric"), "link", "set", "fab0", "up"},
		{"link", "add", f.cpLink, "type", "veth", "peer", "name", "cp", "netns", f.ns("fabric")},
		{"-n", f.ns("fabric"), "link", "set", "cp", "master", "fab0", "up"},
		{"addr", "add", netip.PrefixFrom(cp, underlay.Bits()).String(), "dev", f.cpLink},
		{"link", "set", f.cpLink, "up"},
	}
	for _, s := range steps {
		if err := f.ip(s...); err != nil {
			f.Remove()
			return nil, fmt.Errorf("make the nodes' fabric: %w", err)
		}
	}
	return f, nil
}

// ip runs ip(8) where the fabric's namespaces are named: here as root,
// in the keeper's namespaces otherwise.
func (f *Fabric) ip(args ...string) error {
	return run(f.Command("ip", args...))
}

// Command runs name with args in the fabric's context: as root, here; in
// user-namespace mode, in the keeper's namespaces as their root, where
// the namespaces' paths (AddNode) exist and the simulator has the rights
// to realise a node's network. Without a fabric (nil: the shared
// loopback) it runs as any program does.
func (f *Fabric) Command(name string, args ...string) *exec.Cmd {
	if f == nil || f.keeper == nil {
		return exec.Command(name, args...)
	}
	argv := append(f.keeper.enter(), name)
	return exec.Command(argv[0], append(argv[1:], args...)...)
}

// CommandIn runs name with args in the network namespace at nsPath (of
// AddNode), in the fabric's context (Command).
func (f *Fabric) CommandIn(nsPath, name string, args ...string) *exec.Cmd {
	return f.Command("nsenter", append([]string{"--net=" + nsPath, "--", name}, args...)...)
}

// DialContext connects to an address on the underlay (a node's
// endpoint) from the control plane host's end of the fabric.
func (f *Fabric) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	if f.keeper == nil || network != "tcp" {
		return (&net.Dialer{Timeout: 10 * time.Second}).DialContext(ctx, network, addr)
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	return f.keeper.dial(ctx, addr)
}

// Dialer is the control plane's way to the nodes' endpoints, set once the
// fabric exists (the control plane starts first); before that, and
// without a fabric, it dials as any program does.
type Dialer struct{ fab atomic.Pointer[Fabric] }

// Use routes later dials through f.
func (d *Dialer) Use(f *Fabric) { d.fab.Store(f) }

// DialContext dials addr, through the fabric once it is set.
func (d *Dialer) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	if f := d.fab.Load(); f != nil {
		return f.DialContext(ctx, network, addr)
	}
	return (&net.Dialer{Timeout: 10 * time.Second}).DialContext(ctx, network, addr)
}

func (f *Fabric) ns(name string) string { return f.prefix + "-" + name }

// prefixOf begins the name of everything the fabric of the stack in
// dataDir makes.
func prefixOf(dataDir string) string {
	h := fnv.New32a()
	_, _ = h.Write([]byte(dataDir))
	return fmt.Sprintf("zw%06x", h.Sum32()&0xffffff)
}

// Leftovers lists what the fabric of the stack in dataDir (absolute)
// left on this machine: its namespaces and its links in this one. Empty
// once the stack has stopped cleanly.
func Leftovers(dataDir string) []string {
	p := prefixOf(dataDir)
	var out []string
	entries, _ := os.ReadDir("/run/netns")
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), p+"-") {
			out = append(out, "network namespace "+e.Name())
		}
	}
	if ifs, err := net.Interfaces(); err == nil {
		for _, i := range ifs {
			if strings.HasPrefix(i.Name, p) {
				out = append(out, "link "+i.Name)
			}
		}
	}
	return out
}

// nsPath is where ip keeps a named namespace.
func nsPath(name string) string { return filepath.Join("/run/netns", name) }

// AddNode makes node i's namespace on the fabric: net0, its underlay
// link, and loopback up. It returns the namespace's path and the node's
// underlay address with its prefix.
func (f *Fabric) AddNode(i int) (string, netip.Prefix, error) {
	name, ns := fmt.Sprintf("node-%d", i), f.ns(fmt.Sprintf("node-%d", i))
	addr := f.underlay.Addr()
	for range i {
		addr = addr.Next()
	}
	steps := [][]string{
		{"netns", "add", ns},
		{"-n", ns, "link", "set", "lo", "up"},
		{"-n", f.ns("fabric"), "link", "add", name, "type", "veth", "peer", "name", "net0", "netns", ns},
		{"-n", f.ns("fabric"), "link", "set", name, "master", "fab0", "up"},
		{"-n", ns, "link", "set", "net0", "up"},
	}
	for _, s := range steps {
		if err := f.ip(s...); err != nil {
			return "", netip.Prefix{}, fmt.Errorf("make the network of %s: %w", name, err)
		}
	}
	return nsPath(ns), netip.PrefixFrom(addr, f.underlay.Bits()), nil
}

// Relay listens inside the namespace at nsPath on each of addrs (host:port)
// and relays every connection to the same address here.
func (f *Fabric) Relay(nsPath string, addrs ...string) error {
	for _, a := range addrs {
		listen := listenIn
		if f.keeper != nil {
			listen = f.keeper.listen
		}
		l, err := listen(nsPath, a)
		if err != nil {
			return fmt.Errorf("relay %s into %s: %w", a, nsPath, err)
		}
		f.mu.Lock()
		f.listeners = append(f.listeners, l)
		f.mu.Unlock()
		go relayFrom(l, a)
	}
	return nil
}

// listenIn opens a listener inside the namespace at path: from a thread
// that entered it and never serves another goroutine (the socket stays in
// that namespace; the thread ends with its goroutine).
func listenIn(path, addr string) (net.Listener, error) {
	type result struct {
		l   net.Listener
		err error
	}
	ch := make(chan result, 1)
	go func() {
		runtime.LockOSThread() // never unlocked
		fd, err := os.Open(path)
		if err != nil {
			ch <- result{err: err}
			return
		}
		defer fd.Close()
		if err := unix.Setns(int(fd.Fd()), unix.CLONE_NEWNET); err != nil {
			ch <- result{err: fmt.Errorf("enter %s: %w", path, err)}
			return
		}
		l, err := net.Listen("tcp", addr)
		ch <- result{l, err}
	}()
	r := <-ch
	return r.l, r.err
}

func relayFrom(l net.Listener, to string) {
	for {
		c, err := l.Accept()
		if err != nil {
			return
		}
		go func() {
			defer c.Close()
			up, err := net.Dial("tcp", to)
			if err != nil {
				return
			}
			defer up.Close()
			done := make(chan struct{}, 2)
			go func() { _, _ = io.Copy(up, c); closeWrite(up); done <- struct{}{} }()
			go func() { _, _ = io.Copy(c, up); closeWrite(c); done <- struct{}{} }()
			<-done
			<-done
		}()
	}
}

func closeWrite(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.CloseWrite()
	}
}

// Remove takes the fabric and the nodes' namespaces away: with them go
// every link in them and every zone's link on them, and the keeper.
func (f *Fabric) Remove() {
	f.removeNamespaces()
	if f.keeper != nil {
		f.keeper.stop()
	}
}

// removeNamespaces removes the fabric's namespaces and relays.
func (f *Fabric) removeNamespaces() {
	f.mu.Lock()
	for _, l := range f.listeners {
		l.Close()
	}
	f.listeners = nil
	f.mu.Unlock()
	if f.keeper != nil {
		// The keeper's /run is its own: only this stack's names are there.
		out, _ := f.Command("ip", "netns", "list").Output()
		for _, line := range strings.Split(string(out), "\n") {
			if name, _, _ := strings.Cut(line, " "); strings.HasPrefix(name, f.prefix+"-") {
				if err := f.ip("netns", "del", name); err != nil && f.log != nil {
					f.log.Warn("remove a node's network", "err", err)
				}
			}
		}
		_ = f.ip("link", "del", f.cpLink)
		return
	}
	entries, _ := os.ReadDir("/run/netns")
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), f.prefix+"-") {
			if err := ipCmd("netns", "del", e.Name()); err != nil && f.log != nil {
				f.log.Warn("remove a node's network", "err", err)
			}
		}
	}
	// Gone with its peer in the fabric; this covers a fabric namespace
	// removed by hand.
	_ = exec.Command("ip", "link", "del", f.cpLink).Run()
}
