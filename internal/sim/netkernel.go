package sim

import (
	"encoding/json"
	"fmt"
	"hash/fnv"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// Isolation mode: a root whose NetnsFile names a network namespace (the
// node's) has its network realised in the kernel. The global zone's
// etherstubs are bridges in that namespace, its VNICs veth pairs (the
// VNIC's end named as the VNIC, the other on the etherstub's bridge), its
// addresses, routes and forwarding those of the namespace. A booted zone
// is a network namespace of its own, made by its supervisor
// (CLONE_NEWNET), which lives exactly as long as the zone runs: the zone's
// VNIC end is moved into it, its addresses and routes are realised there,
// and its services and zlogin commands run in it. Without the file the
// simulator touches no kernel network state.
const NetnsFile = "netns"

// nodeNetns is the path of the node's network namespace, "" outside
// isolation mode.
func (h *host) nodeNetns() string {
	b, err := os.ReadFile(filepath.Join(h.root, NetnsFile))
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// zoneNetns is the network namespace of the zone whose supervisor is pid.
func zoneNetns(pid int) string { return fmt.Sprintf("/proc/%d/ns/net", pid) }

// zoneNetnsOf is the namespace z's processes run in, "" outside isolation
// mode or when z has no supervisor.
func (h *host) zoneNetnsOf(z *Zone) string {
	if z == nil || z.Name == "global" || z.SupervisorPID <= 0 || h.nodeNetns() == "" {
		return ""
	}
	return zoneNetns(z.SupervisorPID)
}

// The main goroutine keeps the main thread. A thread that entered another
// namespace is never handed back (enterNetns), and were it the main
// thread, the Go runtime would wedge it rather than end it: it stays, in
// the namespace it entered, and /proc/PID/ns/net names the main thread's
// namespace. A supervisor's pid stands for its zone's network, so its
// zone's links would be moved into, and set up in, the node's.
func init() { runtime.LockOSThread() }

// enterNetns moves the calling OS thread into the namespace at path. The
// caller has locked the goroutine to its thread and must never unlock it
// (the thread then ends with the goroutine instead of serving others in
// the wrong namespace).
func enterNetns(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := unix.Setns(int(f.Fd()), unix.CLONE_NEWNET); err != nil {
		return fmt.Errorf("enter network namespace %s: %w", path, err)
	}
	return nil
}

// inNetns runs fn on a thread inside the namespace at path; processes fn
// starts are born there.
func inNetns(path string, fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: see enterNetns
		if err := enterNetns(path); err != nil {
			errc <- err
			return
		}
		errc <- fn()
	}()
	return <-errc
}

// kernelName is a link's name in the kernel (15 bytes at most).
func kernelName(link string) string {
	if len(link) <= 15 {
		return link
	}
	return "l" + shortHash(link)
}

// peerName is the bridge end of a VNIC's veth pair.
func peerName(vnic string) string { return "p" + shortHash(vnic) }

var peerNameRE = regexp.MustCompile(`^p[0-9a-f]{8}$`)

func shortHash(s string) string {
	h := fnv.New32a()
	_, _ = h.Write([]byte(s))
	return fmt.Sprintf("%08x", h.Sum32())
}

// kernelNet is what `ip -j` shows of a namespace.
type kernelNet struct {
	links  map[string]kernelLink
	addrs  map[string][]string // dev -> IPv4 ADDR/PREFIX
	routes []kernelRoute
}

type kernelLink struct {
	IfName   string `json:"ifname"`
	Master   string `json:"master"`
	LinkInfo struct {
		Kind string `json:"info_kind"`
	} `json:"linkinfo"`
}

type kernelRoute struct {
	Dst      string `json:"dst"`
	Gateway  string `json:"gateway"`
	Protocol string `json:"protocol"`
}

// readKernelNet reads the namespace the calling thread is in.
func readKernelNet() (*kernelNet, error) {
	kn := &kernelNet{links: map[string]kernelLink{}, addrs: map[string][]string{}}
	var links []kernelLink
	if err := ipJSON(&links, "-d", "link", "show"); err != nil {
		return nil, err
	}
	for _, l := range links {
		kn.links[l.IfName] = l
	}
	var addrs []struct {
		IfName   string `json:"ifname"`
		AddrInfo []struct {
			Family    string `json:"family"`
			Local     string `json:"local"`
			PrefixLen int    `json:"prefixlen"`
		} `json:"addr_info"`
	}
	if err := ipJSON(&addrs, "-4", "addr", "show"); err != nil {
		return nil, err
	}
	for _, a := range addrs {
		for _, ai := range a.AddrInfo {
			kn.addrs[a.IfName] = append(kn.addrs[a.IfName], fmt.Sprintf("%s/%d", ai.Local, ai.PrefixLen))
		}
	}
	return kn, ipJSON(&kn.routes, "-4", "route", "show")
}

func ipJSON(into any, args ...string) error {
	out, err := exec.Command("ip", append([]string{"-j"}, args...)...).Output()
	if err != nil {
		return fmt.Errorf("ip %s: %w", strings.Join(args, " "), err)
	}
	if len(strings.TrimSpace(string(out))) == 0 {
		return nil
	}
	return json.Unmarshal(out, into)
}

// ipBatch runs ip commands in the calling thread's namespace, each
// whatever the others' fate; failures come back as one error.
func ipBatch(lines []string) error {
	if len(lines) == 0 {
		return nil
	}
	cmd := exec.Command("ip", "-force", "-batch", "-")
	cmd.Stdin = strings.NewReader(strings.Join(lines, "\n") + "\n")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("ip -batch: %w: %s", err, strings.TrimSpace(string(out)))
	}
	return nil
}

// netLog appends a line to ROOT/run/net.log: kernel network changes that
// failed, which the simulated commands do not report.
func (h *host) netLog(format string, a ...any) { h.runLog("net.log", format, a...) }

// runLog appends a time-stamped line to ROOT/run/NAME.
func (h *host) runLog(name, format string, a ...any) {
	_ = os.MkdirAll(filepath.Join(h.root, "run"), 0o755)
	f, err := os.OpenFile(filepath.Join(h.root, "run", name), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return
	}
	defer f.Close()
	fmt.Fprintf(f, "%s %s\n", time.Now().UTC().Format(time.RFC3339Nano), fmt.Sprintf(format, a...))
}

// stackPlan is the wanted state of one IP stack's interfaces: IPv4
// addresses, routes and forwarding, from the zone's file.
func stackPlan(z *Zone, kn *kernelNet) (lines []string, forwarding map[string]bool) {
	forwarding = map[string]bool{}
	want := map[string][]string{}
	for _, ifc := range z.Interfaces {
		dev := kernelName(ifc.Name)
		if ifc.Name == "lo0" {
			continue
		}
		if _, ok := kn.links[dev]; !ok {
			continue // no kernel link behind it (a physical link of the simulated host)
		}
		want[dev] = nil
		forwarding[dev] = ifc.Props["ipv4/forwarding"] == "on"
		lines = append(lines, "link set dev "+dev+" up")
	}
	for _, a := range z.Addresses {
		ifc, _, _ := strings.Cut(a.Obj, "/")
		dev := kernelName(ifc)
		p, err := netip.ParsePrefix(a.Addr)
		if _, managed := want[dev]; !managed || err != nil || !p.Addr().Is4() {
			continue
		}
		want[dev] = append(want[dev], p.String())
		lines = append(lines, "addr replace "+p.String()+" dev "+dev)
	}
	for dev, have := range kn.addrs {
		wanted, managed := want[dev]
		for _, a := range have {
			if managed && !slices.Contains(wanted, a) {
				lines = append(lines, "addr del "+a+" dev "+dev)
			}
		}
	}
	var routes []string
	for _, r := range z.Routes {
		gw, err := netip.ParseAddr(r.Gateway)
		if err != nil || !gw.Is4() {
			continue
		}
		dst := r.Dest
		if r.Host && !strings.Contains(dst, "/") {
			dst += "/32"
		}
		if p, err := netip.ParsePrefix(dst); err == nil {
			dst = p.Masked().String()
		}
		if dst == "0.0.0.0/0" {
			dst = "default"
		}
		routes = append(routes, dst)
		lines = append(lines, "route replace "+dst+" via "+gw.String())
	}
	for _, r := range kn.routes {
		dst := r.Dst
		if dst != "default" && !strings.Contains(dst, "/") {
			dst += "/32" // ip shows a host route without its length
		}
		if r.Gateway != "" && !slices.Contains(routes, dst) {
			lines = append(lines, "route del "+r.Dst+" via "+r.Gateway)
		}
	}
	return lines, forwarding
}

// setForwarding sets net.ipv4.conf.DEV.forwarding in the calling thread's
// namespace.
func setForwarding(fw map[string]bool) error {
	var errs []string
	for dev, on := range fw {
		v := "0"
		if on {
			v = "1"
		}
		if err := os.WriteFile("/proc/sys/net/ipv4/conf/"+dev+"/forwarding", []byte(v), 0o644); err != nil {
			errs = append(errs, err.Error())
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("forwarding: %s", strings.Join(errs, "; "))
	}
	return nil
}

// syncNodeNet makes the node's namespace match the global zone's network:
// a bridge per etherstub, a veth pair per VNIC over one (removing those of
// deleted links), and the global zone's addresses, routes and forwarding.
func (h *host) syncNodeNet() error {
	ns := h.nodeNetns()
	if ns == "" {
		return nil
	}
	l, err := h.lockNet()
	if err != nil {
		return err
	}
	defer l.release()
	var links []*Link
	var gz *Zone
	err = h.view(func(st *State) {
		links = st.Links
		gz = st.zone("global")
	})
	if err != nil {
		return err
	}
	return inNetns(ns, func() error {
		kn, err := readKernelNet()
		if err != nil {
			return err
		}
		stubs := map[string]bool{}   // etherstubs by name
		bridges := map[string]bool{} // their bridges by kernel name
		var lines []string
		for _, l := range links {
			if l.Class == "etherstub" {
				br := kernelName(l.Name)
				stubs[l.Name], bridges[br] = true, true
				if _, ok := kn.links[br]; !ok {
					lines = append(lines, "link add name "+br+" type bridge")
				}
				// An etherstub has no IP: its bridge answers no ARP, so the
				// node's IP stack sees pods' packets only on the gateway VNIC
				// they are addressed to, as rdr rules and forwarding expect.
				lines = append(lines, "link set dev "+br+" arp off", "link set dev "+br+" up")
			}
		}
		peers := map[string]bool{}
		for _, l := range links {
			if l.Class != "vnic" || !stubs[l.Over] {
				continue
			}
			dev, peer := kernelName(l.Name), peerName(l.Name)
			peers[peer] = true
			if _, ok := kn.links[peer]; !ok {
				// The pair is gone with the zone that had it, or was never
				// made: make it again; the new VNIC end waits in the node.
				lines = append(lines, "link add name "+dev+" type veth peer name "+peer)
				kn.links[dev] = kernelLink{IfName: dev}
			}
			lines = append(lines, "link set dev "+peer+" master "+kernelName(l.Over), "link set dev "+peer+" up")
		}
		for name, l := range kn.links {
			if (peerNameRE.MatchString(name) && !peers[name]) || (l.LinkInfo.Kind == "bridge" && !bridges[name]) {
				lines = append(lines, "link del dev "+name)
			}
		}
		if err := ipBatch(lines); err != nil {
			h.netLog("node links: %v", err)
		}
		// Nor do the IP hooks see frames crossing a bridge, which
		// br_netfilter would hand them with the bridge as input device,
		// tracking a pod's connection before its gateway's rdr rule
		// could translate it.
		if err := os.WriteFile("/proc/sys/net/bridge/bridge-nf-call-iptables", []byte("0\n"), 0o644); err != nil && !os.IsNotExist(err) {
			h.netLog("bridge-nf-call-iptables: %v", err)
		}
		if gz == nil {
			return nil
		}
		if kn, err = readKernelNet(); err != nil {
			return err
		}
		lines, fw := stackPlan(gz, kn)
		err1 := ipBatch(lines)
		err2 := setForwarding(fw)
		for _, e := range []error{err1, err2} {
			if e != nil {
				h.netLog("global zone: %v", e)
			}
		}
		return nil
	})
}

// plumbZoneNet gives the zone whose supervisor is pid (the caller, at
// boot) its VNICs, moved from the node's namespace into the zone's, and
// realises its addresses and routes there.
func (h *host) plumbZoneNet(zone string, pid int) error {
	if err := h.syncNodeNet(); err != nil {
		return err
	}
	z, err := h.viewZone(zone)
	if err != nil || z == nil {
		return err
	}
	var links []*Link
	if err := h.view(func(st *State) { links = st.Links }); err != nil {
		return err
	}
	move := func() error {
		kn, err := readKernelNet()
		if err != nil {
			return err
		}
		var lines []string
		for _, name := range z.Config.netLinks() {
			i := slices.IndexFunc(links, func(l *Link) bool { return l.Name == name })
			if i < 0 || links[i].Class != "vnic" {
				continue
			}
			dev, peer := kernelName(name), peerName(name)
			if _, ok := kn.links[dev]; !ok {
				// The pair of the zone's last boot may still be on its
				// way out with that boot's namespace: make a new one.
				if _, ok := kn.links[peer]; ok {
					lines = append(lines, "link del dev "+peer)
				}
				lines = append(lines, "link add name "+dev+" type veth peer name "+peer,
					"link set dev "+peer+" master "+kernelName(links[i].Over), "link set dev "+peer+" up")
			}
			lines = append(lines, fmt.Sprintf("link set dev %s netns %d", dev, pid))
		}
		return ipBatch(lines)
	}
	l, err := h.lockNet()
	if err != nil {
		return err
	}
	err = inNetns(h.nodeNetns(), move)
	l.release()
	if err != nil {
		return fmt.Errorf("move the zone's links into its network: %w", err)
	}
	return h.syncZoneNet(z, zoneNetns(pid))
}

// syncZoneNet makes the zone's namespace match its file: loopback up, its
// addresses, routes and forwarding.
func (h *host) syncZoneNet(z *Zone, ns string) error {
	return inNetns(ns, func() error {
		kn, err := readKernelNet()
		if err != nil {
			return err
		}
		lines, fw := stackPlan(z, kn)
		if err := ipBatch(append([]string{"link set dev lo up"}, lines...)); err != nil {
			return err
		}
		return setForwarding(fw)
	})
}

// lockNet serialises the changes of the node's namespace: each reads the
// kernel and the state, then acts on both, and must not see half of
// another's (a pair made for a VNIC it did not see yet, say).
func (h *host) lockNet() (*fileLock, error) {
	if err := os.MkdirAll(filepath.Join(h.root, "run"), 0o755); err != nil {
		return nil, err
	}
	return lockFile(filepath.Join(h.root, "run", "net.lock"), true)
}

// clearNodeNet removes what the simulator made in the node's namespace:
// the etherstubs' bridges and the VNICs' veth pairs (and with them the
// addresses and routes over them).
func (h *host) clearNodeNet() error {
	ns := h.nodeNetns()
	if ns == "" {
		return nil
	}
	l, err := h.lockNet()
	if err != nil {
		return err
	}
	defer l.release()
	var links []*Link
	if err := h.view(func(st *State) { links = st.Links }); err != nil {
		return err
	}
	return inNetns(ns, func() error {
		kn, err := readKernelNet()
		if err != nil {
			return err
		}
		var lines []string
		for name, l := range kn.links {
			if peerNameRE.MatchString(name) || (l.LinkInfo.Kind == "bridge" && slices.ContainsFunc(links, func(x *Link) bool { return x.Class == "etherstub" && kernelName(x.Name) == name })) {
				lines = append(lines, "link del dev "+name)
			}
		}
		// A VNIC end whose peer went first is gone with it; one left in
		// the node (never given to a zone) goes with its peer too.
		return ipBatch(lines)
	})
}

// realiseNet follows a network command in isolation mode: the global
// zone's commands (and zoneadm's, which move VNICs) update the node's
// namespace, a zone's own ipadm and route its namespace. Failures go to
// ROOT/run/net.log: the command's own result stands.
func (inv *invocation) realiseNet() {
	if inv.h.nodeNetns() == "" || !changesNet(inv.name, inv.args) {
		return
	}
	if inv.zone == "global" {
		if err := inv.h.syncNodeNet(); err != nil {
			inv.h.netLog("%s %s: %v", inv.name, strings.Join(inv.args, " "), err)
		}
		return
	}
	z, err := inv.h.viewZone(inv.zone)
	if err == nil && z != nil && z.SupervisorPID > 0 {
		err = inv.h.syncZoneNet(z, zoneNetns(z.SupervisorPID))
	}
	if err != nil {
		inv.h.netLog("%s in zone %s: %v", inv.name, inv.zone, err)
	}
}

// changesNet says whether a command may have changed the network.
func changesNet(name string, args []string) bool {
	switch name {
	case "dladm", "ipadm", "zoneadm":
		for _, a := range args {
			if strings.HasPrefix(a, "show") || a == "list" {
				return false
			}
		}
		return true
	case "route":
		for _, a := range args {
			if a == "get" || a == "show" || a == "monitor" {
				return false
			}
		}
		return true
	}
	return false
}
