package sim

import (
	"fmt"
	"io"
	"log"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// On the shared loopback (no isolation mode, where the kernel does it:
// natkernel.go) the node's NAT daemon, `illumos-sim natd ROOT`, realises
// the global zone's rdr rules as user-space forwarders: a TCP and/or UDP listener on
// each rule's external address and port, each new connection (or UDP
// flow) sent to a target chosen as the kernel would (spec §10.3): the
// first rule of the address's chain, alternating between its two targets,
// and a round-robin rule moves to the end of the chain once used.
//
// One daemon per node, started by the first ipnat that loads an rdr rule
// and found again through run/natd.lock, an flock it holds for life (a
// second daemon cannot take it and exits). It lives until `illumos-sim
// stop-all` or until its root is removed. It re-reads nat/global.json
// when the file changes (SIGUSR1 from ipnat, or a 50 ms poll of its
// identity) and converges its listeners on the rule set; it writes the
// generation it has applied to run/natd.applied, which ipnat waits for, so
// a rule is in force when ipnat returns, as on a host.
//
// Listeners use SO_REUSEPORT, so several simulated nodes on one machine
// can serve the same ClusterIP:port: the kernel spreads connections over
// them and each forwards by its own rules. A connection lives on when its
// rule goes (sessions outlive rules, §10.6); -F cuts every connection.

const (
	natdPoll        = 50 * time.Millisecond
	natdWait        = 3 * time.Second // how long ipnat waits for convergence
	natdDialTimeout = 2 * time.Second
	natdUDPIdle     = 60 * time.Second
	// natdMaxPorts bounds the ports a port range opens listeners for.
	natdMaxPorts = 256
)

func (h *host) natdFile(name string) string { return filepath.Join(h.root, "run", "natd."+name) }

// natdRunning reports whether a daemon holds the node's natd lock.
func natdRunning(h *host) bool {
	f, err := os.OpenFile(h.natdFile("lock"), os.O_RDONLY, 0)
	if err != nil {
		return false
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		return true
	}
	syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
	return false
}

// natdPID is the daemon that holds the lock, from its pid file.
func natdPID(h *host) int {
	b, _ := os.ReadFile(h.natdFile("pid"))
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	if pid <= 0 || !isNatdOf(pid, h.root) {
		return 0 // none, or a recycled pid
	}
	return pid
}

// isNatdOf says whether process pid is `illumos-sim natd ROOT` for root.
func isNatdOf(pid int, root string) bool {
	cmd, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	args := strings.Split(strings.TrimRight(string(cmd), "\x00"), "\x00")
	return len(args) == 3 && args[1] == "natd" && args[2] == root
}

// natdPIDs are every daemon of the node, the lock holder or not (one
// whose pid file was lost or overwritten).
func natdPIDs(h *host) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err == nil && pid != os.Getpid() && isNatdOf(pid, h.root) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// natdApplied is the generation pair the daemon has converged on.
func natdApplied(h *host) (gen, flush uint64, ok bool) {
	b, err := os.ReadFile(h.natdFile("applied"))
	if err != nil {
		return 0, 0, false
	}
	_, err = fmt.Sscanf(string(b), "%d %d", &gen, &flush)
	return gen, flush, err == nil
}

// syncNatd makes the daemon take a change of the global table into
// account before ipnat returns: it signals a running daemon (starting one
// when rdr rules need it) and waits until it has applied gen.
func syncNatd(h *host, gen, flush uint64, need bool) {
	if !natdRunning(h) {
		if !need {
			return
		}
		if err := startNatd(h); err != nil {
			fmt.Fprintf(os.Stderr, "ipnat: illumos-sim: %v\n", err)
			return
		}
	} else if pid := natdPID(h); pid > 0 {
		syscall.Kill(pid, sigReconcile)
	}
	deadline := time.Now().Add(natdWait)
	for time.Now().Before(deadline) {
		if g, f, ok := natdApplied(h); ok && g >= gen && f >= flush {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func startNatd(h *host) error {
	exe, err := selfExe()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Join(h.root, "run"), 0o755); err != nil {
		return fmt.Errorf("create run dir: %w", err)
	}
	logf, err := os.OpenFile(h.natdFile("log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("open natd log: %w", err)
	}
	defer logf.Close()
	// A dead daemon's generation must not pass for the new one's.
	os.Remove(h.natdFile("applied"))
	cmd := exec.Command(exe, "natd", h.root)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Env = append(envWithout(os.Environ(), EnvFaults, "GOMAXPROCS"), "GOMAXPROCS=2")
	// Its own session: it must outlive this ipnat and the terminal.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("could not start natd: %w", err)
	}
	return cmd.Process.Release()
}

// stopNatd ends the node's daemons (stop-all): SIGTERM, and SIGKILL for
// one still there after two seconds.
func stopNatd(h *host) {
	pids := natdPIDs(h)
	for _, pid := range pids {
		syscall.Kill(pid, syscall.SIGTERM)
	}
	deadline := time.Now().Add(2 * time.Second)
	for _, pid := range pids {
		for processAlive(pid) && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		if processAlive(pid) && isNatdOf(pid, h.root) {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

// runNatd is the entry point of `illumos-sim natd ROOT`.
func runNatd(args []string, stderr io.Writer) int {
	if len(args) != 1 {
		fmt.Fprintln(stderr, "usage: illumos-sim natd ROOT")
		return 2
	}
	h := &host{root: args[0]}
	logger := log.New(stderr, "natd ", log.LstdFlags|log.Lmicroseconds)
	lock, err := os.OpenFile(h.natdFile("lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		logger.Print(err)
		return 1
	}
	// Referenced until the daemon returns: an unreferenced *os.File is
	// closed by its finalizer, which would release the flock mid-life and
	// let the next ipnat start a second daemon.
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		return 0 // another daemon serves this node
	}
	if err := writeFileAtomic(h.natdFile("pid"), []byte(strconv.Itoa(os.Getpid())+"\n")); err != nil {
		logger.Print(err)
		return 1
	}
	d := &natd{h: h, log: logger, listeners: map[natKey]*natListener{}, failed: map[natKey]bool{}, conns: map[*natConn]bool{}, pid: os.Getpid()}
	d.dropOrphanSessions()
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, sigReconcile, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	defer signal.Stop(sigs)
	tick := time.NewTicker(natdPoll)
	defer tick.Stop()
	var seen fileID
	first := true
	for {
		// The node is gone (or going: a removal may leave run/ behind
		// for a while, which this daemon's own files would keep alive).
		if _, err := os.Stat(h.zonesDir()); err != nil {
			d.shutdown()
			return 0
		}
		id := statID(h.natPath("global"))
		if first || id != seen {
			first, seen = false, id
			d.reload()
		} else if d.retryDue() {
			d.converge(d.last)
		}
		select {
		case s := <-sigs:
			if s != sigReconcile {
				d.shutdown()
				return 0
			}
			seen = fileID{} // look again even if the file seems unchanged
		case <-tick.C:
		}
	}
}

// fileID identifies a version of a file: it is replaced by rename, so
// every write gives a new inode.
type fileID struct {
	ino   uint64
	mtime int64
	size  int64
}

func statID(path string) fileID {
	var st syscall.Stat_t
	if syscall.Stat(path, &st) != nil {
		return fileID{}
	}
	return fileID{ino: st.Ino, mtime: st.Mtim.Nano(), size: st.Size}
}

// natKey is one forwarder: protocol (tcp or udp), address and port.
type natKey struct {
	proto string
	addr  netip.Addr
	port  int
}

// natRoute is one rule as a forwarder uses it.
type natRoute struct {
	rule       int
	targets    []netip.Addr
	port       int
	roundRobin bool
	next       int // which of two targets is next (IPN_SPLIT alternates)
	// affinity pins a client to a target: `A,B sticky` without
	// round-robin is the one form whose affinity records the kernel
	// creates (spec §10.3); they last as long as the rule here (their
	// lifetime on a host is UNCONFIRMED).
	affinity map[netip.Addr]netip.Addr
}

type natListener struct {
	key   natKey
	mu    sync.Mutex
	chain []*natRoute // in the order the next connection tries them
	tcp   net.Listener
	udp   *net.UDPConn
	flows map[string]*natFlow // UDP flows by client address
}

// natConn is one forwarded TCP connection or UDP flow.
type natConn struct {
	session int
	close   func()
}

type natd struct {
	h         *host
	log       *log.Logger
	pid       int
	mu        sync.Mutex
	listeners map[natKey]*natListener
	failed    map[natKey]bool // listeners that could not bind, logged once
	conns     map[*natConn]bool
	gen       uint64
	flushGen  uint64
	loaded    bool
	last      *NATTable // the table last read
	lastRetry time.Time
}

// retryDue says whether listeners that could not bind should be tried
// again (once a second: the address may have appeared, the port been
// freed).
func (d *natd) retryDue() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.failed) == 0 || d.last == nil || time.Since(d.lastRetry) < time.Second {
		return false
	}
	d.lastRetry = time.Now()
	return true
}

// dropOrphanSessions ends the sessions of a daemon that died with them
// open (stop-all): their connections are gone.
func (d *natd) dropOrphanSessions() {
	err := d.h.updateNAT("global", func(t *NATTable) bool {
		var keep []*NATSession
		for _, s := range t.Sessions {
			if s.Owner == 0 { // only a daemon makes sessions, and it is gone
				keep = append(keep, s)
			} else {
				t.Expired++
			}
		}
		if len(keep) == len(t.Sessions) {
			return false
		}
		t.Sessions = keep
		t.reap()
		return true
	})
	if err != nil {
		d.log.Print(err)
	}
}

func (d *natd) reload() {
	t, err := d.h.viewNAT("global")
	if err != nil {
		d.log.Print(err)
		return
	}
	if d.loaded && t.FlushGen != d.flushGen {
		d.cutAll() // -F dropped every session: their traffic stops
	}
	if !d.loaded || t.Gen != d.gen {
		d.converge(t)
	}
	d.last = t
	d.loaded, d.gen, d.flushGen = true, t.Gen, t.FlushGen
	b := fmt.Sprintf("%d %d\n", t.Gen, t.FlushGen)
	if err := writeFileAtomic(d.h.natdFile("applied"), []byte(b)); err != nil {
		d.log.Print(err)
	}
}

// routes turns the listed rdr rules into forwarders' chains, in rule
// order. Only what a forwarder can serve is realised: a single external
// address (/32) with ports, tcp and/or udp.
func natRoutes(t *NATTable) map[natKey][]*natRoute {
	out := map[natKey][]*natRoute{}
	for _, e := range t.listed() {
		r, ok := parseNATRule(e.Text)
		if !ok || r.Kind != "rdr" || r.Mask != ^uint32(0) || !r.HasPorts || r.PortLo == 0 || !r.TCPUDP() ||
			r.PortHi-r.PortLo >= natdMaxPorts || r.ToBits >= 0 {
			continue
		}
		var targets []netip.Addr
		for _, to := range r.To {
			targets = append(targets, netip.AddrFrom4([4]byte{byte(to >> 24), byte(to >> 16), byte(to >> 8), byte(to)}))
		}
		addr := netip.AddrFrom4([4]byte{byte(r.Addr >> 24), byte(r.Addr >> 16), byte(r.Addr >> 8), byte(r.Addr)})
		for p := r.PortLo; p <= r.PortHi; p++ {
			q := r.ToPort
			if !r.FixedDst {
				q += p - r.PortLo // a range maps offset-wise (§10.2)
			}
			for _, proto := range strings.Split(r.Proto, "/") {
				k := natKey{proto, addr, p}
				route := &natRoute{rule: e.ID, targets: targets, port: q, roundRobin: r.RoundRobin}
				if r.Sticky && !r.RoundRobin && len(targets) == 2 {
					route.affinity = map[netip.Addr]netip.Addr{}
				}
				out[k] = append(out[k], route)
			}
		}
	}
	return out
}

func (d *natd) converge(t *NATTable) {
	want := natRoutes(t)
	d.mu.Lock()
	defer d.mu.Unlock()
	for k := range d.failed {
		if _, ok := want[k]; !ok {
			delete(d.failed, k)
		}
	}
	for k, l := range d.listeners {
		routes, ok := want[k]
		if !ok {
			d.log.Printf("close %s %s:%d", k.proto, k.addr, k.port)
			l.close()
			delete(d.listeners, k)
			continue
		}
		l.mu.Lock()
		l.chain = mergeChain(l.chain, routes)
		l.mu.Unlock()
	}
	for k, routes := range want {
		if _, ok := d.listeners[k]; ok {
			continue
		}
		l := &natListener{key: k, chain: routes, flows: map[string]*natFlow{}}
		if err := l.listen(); err != nil {
			// The rule stays loaded, as a host keeps a rule for an
			// address it does not have; it just forwards nothing.
			if !d.failed[k] {
				d.log.Printf("listen %s %s:%d: %v", k.proto, k.addr, k.port, err)
				d.failed[k] = true
			}
			continue
		}
		delete(d.failed, k)
		d.log.Printf("listen %s %s:%d", k.proto, k.addr, k.port)
		d.listeners[k] = l
		if l.tcp != nil {
			go d.serveTCP(l)
		} else {
			go d.serveUDP(l)
		}
	}
}

// mergeChain keeps the rotation of the rules that stay and appends new
// ones in rule order.
func mergeChain(old, want []*natRoute) []*natRoute {
	byRule := map[int]*natRoute{}
	for _, r := range want {
		byRule[r.rule] = r
	}
	var out []*natRoute
	kept := map[int]bool{}
	for _, r := range old {
		if w, ok := byRule[r.rule]; ok {
			w.next = r.next
			if w.affinity != nil && r.affinity != nil {
				w.affinity = r.affinity
			}
			out = append(out, w)
			kept[r.rule] = true
		}
	}
	for _, r := range want {
		if !kept[r.rule] {
			out = append(out, r)
		}
	}
	return out
}

func (d *natd) shutdown() {
	os.Remove(d.h.natdFile("applied"))
	d.mu.Lock()
	for k, l := range d.listeners {
		l.close()
		if l.udp != nil {
			l.udp.Close()
		}
		delete(d.listeners, k)
	}
	d.mu.Unlock()
	d.cutAll()
}
