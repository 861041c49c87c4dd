package agent

import (
	"context"
	"errors"
	"runtime/debug"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/zonewright/zonewright/internal/illumos"
	"github.com/zonewright/zonewright/internal/model"
	"github.com/zonewright/zonewright/internal/store"
)

// Labels, annotations and the condition reason the agent writes.
const (
	LabelHostname       = "zonewright.io/hostname"
	AnnotationZones     = "zonewright.io/zones"                 // "running=3,installed=1"
	AnnotationAvailable = "zonewright.io/zones-available-bytes" // free space for zones
	ReasonAgentReady    = "AgentReady"
)

// hostSummary is what each heartbeat reports besides being alive.
type hostSummary struct {
	zones     string // "running=3,installed=1", "" when unknown
	available string // bytes free for zones, "" when unknown
	// storage is what the claims' datasets may hold in all (the volumes
	// dataset's used and available bytes); 0 when unknown.
	storage int64
}

// summary counts the host's zones by state and reads the zones' free space.
func (a *Agent) summary(ctx context.Context) hostSummary {
	var s hostSummary
	if zones, err := a.host.Zoneadm().List(ctx); err != nil {
		a.log.Warn("list zones", "err", err)
	} else {
		s.zones = ZoneSummary(zones)
	}
	if v, err := a.host.ZFS().Get(ctx, a.cfg.ZonesDataset, "available"); err != nil {
		a.log.Warn("read the zones dataset's free space", "err", err)
	} else {
		s.available = v
	}
	if p, err := a.host.ZFS().GetProps(ctx, a.cfg.VolumesDataset, "available", "used"); err != nil {
		a.log.Warn("read the volumes dataset's space", "err", err)
	} else {
		avail, err1 := strconv.ParseInt(p["available"], 10, 64)
		used, err2 := strconv.ParseInt(p["used"], 10, 64)
		if err1 == nil && err2 == nil {
			s.storage = avail + used
		}
	}
	return s
}

// ZoneSummary counts non-global zones by state: "running=3,installed=1"
// (states in alphabetical order), "none" when there are none.
func ZoneSummary(zones []illumos.Zone) string {
	counts := map[string]int{}
	for _, z := range zones {
		if z.Name != "global" {
			counts[string(z.State)]++
		}
	}
	if len(counts) == 0 {
		return "none"
	}
	states := make([]string, 0, len(counts))
	for s := range counts {
		states = append(states, s)
	}
	sort.Strings(states)
	parts := make([]string, len(states))
	for i, s := range states {
		parts[i] = s + "=" + strconv.Itoa(counts[s])
	}
	return strings.Join(parts, ",")
}

// sync writes the Node as this agent sees it, creating it if it is
// missing (a first start, or an operator deleted it), retrying on
// conflicting writes.
func (a *Agent) sync(ctx context.Context, sum hostSummary) (*model.Node, error) {
	nodes := a.st.Nodes()
	for range 10 {
		now := time.Now().UTC()
		n, err := nodes.Get(ctx, "", a.cfg.Node)
		if errors.Is(err, store.ErrNotFound) {
			n = &model.Node{Metadata: model.ObjectMeta{Name: a.cfg.Node}}
			model.DefaultNode(n)
			a.apply(n, now, sum)
			err = nodes.Create(ctx, n)
			if errors.Is(err, store.ErrAlreadyExists) {
				continue // registered concurrently: update it
			}
			return n, err
		}
		if err != nil {
			return nil, err
		}
		a.apply(n, now, sum)
		err = nodes.Update(ctx, n)
		if errors.Is(err, store.ErrConflict) {
			continue // someone else wrote it (an operator's label): read again
		}
		return n, err
	}
	return nil, errors.New("the node kept changing under the agent's writes")
}

// apply sets what the agent owns on n: capacity, allocatable, node info,
// addresses, pod CIDR, its labels, the Ready condition and the summary
// annotations. Everything else (taints, unschedulable, other labels) is
// the operator's and stays.
func (a *Agent) apply(n *model.Node, now time.Time, sum hostSummary) {
	cfg, f := a.cfg, a.facts
	if n.Spec.PodCIDR != "" && n.Spec.PodCIDR != cfg.PodCIDR {
		a.log.Warn("the node's pod CIDR changes; addresses allocated from the old one stay until their pods go",
			"old", n.Spec.PodCIDR, "new", cfg.PodCIDR)
	}
	n.Spec.PodCIDR = cfg.PodCIDR

	capCPU := int64(f.CPUs) * 1000
	capMem := int64(f.MemoryBytes)
	n.Status.Capacity = model.ResourceList{
		model.ResourceCPU:    FormatMilliCPU(capCPU),
		model.ResourceMemory: FormatBytes(capMem),
		model.ResourcePods:   strconv.Itoa(cfg.MaxPods),
	}
	n.Status.Allocatable = model.ResourceList{
		model.ResourceCPU:    FormatMilliCPU(max(capCPU-cfg.SystemReservedMilliCPU, 0)),
		model.ResourceMemory: FormatBytes(max(capMem-cfg.SystemReservedMemory, 0)),
		model.ResourcePods:   strconv.Itoa(cfg.MaxPods),
	}
	if sum.storage > 0 {
		// Claims' quotas are summed against it when they bind here.
		n.Status.Capacity[model.ResourceStorage] = FormatBytes(sum.storage)
		n.Status.Allocatable[model.ResourceStorage] = FormatBytes(sum.storage)
	}
	n.Status.NodeInfo = model.NodeInfo{
		OSRelease:    f.Uname.Version,
		KernelVer:    strings.TrimSpace(f.Uname.Sysname + " " + f.Uname.Release),
		AgentVersion: cfg.Version,
		ZoneBrands:   append([]string(nil), cfg.ZoneBrands...),
	}
	if f.Hostname != "" {
		n.Status.Addresses = []model.NodeAddress{{Type: "Hostname", Address: f.Hostname}}
	}

	if n.Metadata.Labels == nil {
		n.Metadata.Labels = map[string]string{}
	}
	for k := range n.Metadata.Labels {
		if strings.HasPrefix(k, model.LabelNodeBrandPrefix) {
			delete(n.Metadata.Labels, k) // brands no longer offered go
		}
	}
	for _, b := range cfg.ZoneBrands {
		n.Metadata.Labels[model.LabelNodeBrandPrefix+b] = "true"
	}
	if v := labelValue(f.Hostname); v != "" {
		n.Metadata.Labels[LabelHostname] = v
	}
	if n.Metadata.Annotations == nil {
		n.Metadata.Annotations = map[string]string{}
	}
	if sum.zones != "" {
		n.Metadata.Annotations[AnnotationZones] = sum.zones
	}
	if sum.available != "" {
		n.Metadata.Annotations[AnnotationAvailable] = sum.available
	}

	// nil until this agent has applied a snapshot: a status left by an
	// earlier run (or an agent now without --api-url) is not reported.
	n.Status.ServiceNetwork = a.serviceNAT.get()

	a.mu.Lock()
	workerErr := a.workerErr
	a.mu.Unlock()
	msg := "zonewright agent is posting heartbeats"
	if workerErr != nil {
		msg += "; its worker is not polling Temporal yet: " + workerErr.Error()
	}
	model.SetCondition(&n.Status.Conditions, model.NodeCondition{
		Type: model.NodeReady, Status: model.ConditionTrue, Reason: ReasonAgentReady, Message: msg, LastHeartbeatTime: &now,
	}, now)
}

// FormatMilliCPU renders millicores as a quantity: "8", "7500m".
func FormatMilliCPU(m int64) string {
	if m%1000 == 0 {
		return strconv.FormatInt(m/1000, 10)
	}
	return strconv.FormatInt(m, 10) + "m"
}

// FormatBytes renders bytes as a quantity in the largest binary unit that
// divides them exactly: "32Gi", "1536Mi", "1000".
func FormatBytes(b int64) string {
	for _, u := range []struct {
		suffix string
		shift  uint
	}{{"Ei", 60}, {"Pi", 50}, {"Ti", 40}, {"Gi", 30}, {"Mi", 20}, {"Ki", 10}} {
		if b != 0 && b%(1<<u.shift) == 0 {
			return strconv.FormatInt(b>>u.shift, 10) + u.suffix
		}
	}
	return strconv.FormatInt(b, 10)
}

// labelValue makes s a valid label value (at most 63 characters of
// [A-Za-z0-9._-], alphanumeric at both ends), or "".
func labelValue(s string) string {
	b := []byte(s)
	for i, c := range b {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == '-') {
			b[i] = '-'
		}
	}
	v := string(b)
	if len(v) > 63 {
		v = v[:63]
	}
	return strings.Trim(v, "._-")
}

// buildVersion is the binary's version from its build information.
func buildVersion() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	v := bi.Main.Version
	if v == "" {
		v = "(devel)"
	}
	for _, s := range bi.Settings {
		if s.Key == "vcs.revision" && len(s.Value) >= 12 {
			v += "+" + s.Value[:12]
		}
	}
	return v
}
