package hostops

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/zonewright/zonewright/internal/hostapi"
)

// ZoneDNS is the resolver configuration each zone gets before it boots:
// the cluster DNS its node serves on the pods' gateway, and the search
// list of the pod's namespace (dnsPolicy ClusterFirst in Kubernetes).
type ZoneDNS struct {
	// Nameserver is an address every pod on the node reaches without NAT:
	// the pods' gateway, where the agent answers from its service network.
	Nameserver string
	// Domain is the cluster domain, e.g. cluster.local.
	Domain string
}

// ResolvConf is the zone's /etc/resolv.conf for a pod of namespace ns.
// ndots:5 makes "web" and "web.other" try the search list first, as
// Kubernetes pods do.
func (d ZoneDNS) ResolvConf(ns string) []byte {
	domain := strings.TrimSuffix(strings.ToLower(d.Domain), ".")
	return fmt.Appendf(nil, "# Written by zonewright before the zone booted: the cluster DNS on this node.\n"+
		"nameserver %s\nsearch %s.svc.%s svc.%s %s\noptions ndots:5\n", d.Nameserver, ns, domain, domain, domain)
}

// writeZoneFiles writes, from the global zone before the zone boots,
// what the zone reads at boot: its node name (/etc/nodename; an lx
// zone's init reads /etc/hostname) and, with cluster DNS, its
// /etc/resolv.conf, with nsswitch.conf looking host names up in DNS.
// Paths resolve inside the zone root (os.Root), so a link the zone
// planted on an earlier boot cannot point the write elsewhere. A bhyve
// zone's root holds no guest filesystem: its guest configures itself.
func (h *Host) writeZoneFiles(s hostapi.PodSandbox) error {
	if s.Brand == "bhyve" {
		return nil
	}
	dir := filepath.Join(h.zonesDir(), s.ZoneName(), "root")
	root, err := os.OpenRoot(dir)
	if err != nil {
		return fmt.Errorf("open the zone root %s: %w", dir, err)
	}
	defer root.Close()
	if err := root.MkdirAll("etc", 0o755); err != nil {
		return fmt.Errorf("the zone root's etc: %w", err)
	}
	nodename := "etc/nodename"
	if s.Brand == "lx" {
		nodename = "etc/hostname"
	}
	if err := writeInRoot(root, nodename, []byte(s.NodeName()+"\n")); err != nil {
		return err
	}
	if h.ZoneDNS == nil {
		return nil
	}
	if err := writeInRoot(root, "etc/resolv.conf", h.ZoneDNS.ResolvConf(s.Namespace)); err != nil {
		return err
	}
	conf, err := root.ReadFile("etc/nsswitch.conf")
	if errors.Is(err, fs.ErrNotExist) {
		return nil // the resolver's default order already asks DNS
	}
	if err != nil {
		return fmt.Errorf("read the zone's nsswitch.conf: %w", err)
	}
	if edited, changed := hostsFromDNS(conf); changed {
		return writeInRoot(root, "etc/nsswitch.conf", edited)
	}
	return nil
}

// zonesDir is where this machine's filesystem holds the zones path.
func (h *Host) zonesDir() string {
	if h.ZonesDir != "" {
		return h.ZonesDir
	}
	return h.ZonesPath
}

// writeInRoot replaces name inside root with data: a temporary file
// renamed over it, so the zone never reads half a file.
func writeInRoot(root *os.Root, name string, data []byte) error {
	tmp := name + ".zonewright-new"
	if err := root.WriteFile(tmp, data, 0o644); err != nil {
		return fmt.Errorf("write the zone's /%s: %w", name, err)
	}
	if err := root.Rename(tmp, name); err != nil {
		_ = root.Remove(tmp)
		return fmt.Errorf("write the zone's /%s: %w", name, err)
	}
	return nil
}

// hostsFromDNS adds dns after files to the hosts and ipnodes lines of an
// nsswitch.conf that lacks it (illumos zones install with files only),
// keeping every other line and source as it is.
func hostsFromDNS(conf []byte) ([]byte, bool) {
	lines := bytes.SplitAfter(conf, []byte("\n"))
	changed := false
	for i, line := range lines {
		text := strings.TrimRight(string(line), "\n")
		db, sources, ok := strings.Cut(text, ":")
		name := strings.TrimSpace(db)
		if !ok || (name != "hosts" && name != "ipnodes") {
			continue
		}
		words := strings.Fields(sources)
		if slices.Contains(words, "dns") {
			continue
		}
		at := len(words)
		if j := slices.Index(words, "files"); j >= 0 {
			at = j + 1
		}
		words = slices.Insert(words, at, "dns")
		nl := ""
		if strings.HasSuffix(string(line), "\n") {
			nl = "\n"
		}
		lines[i] = []byte(name + ": " + strings.Join(words, " ") + nl)
		changed = true
	}
	return bytes.Join(lines, nil), changed
}
