package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/zonewright/zonewright/internal/illumos"
	"github.com/zonewright/zonewright/internal/model"
	"github.com/zonewright/zonewright/internal/nodeapi"
	"github.com/zonewright/zonewright/internal/retry"
	"github.com/zonewright/zonewright/internal/supervisor"
)

// ReasonAgentReady is the reason of the Ready condition the agent writes
// (its labels and annotations are model.LabelNodeHostname,
// model.AnnotationNodeZones and model.AnnotationNodeZonesAvailable).
const ReasonAgentReady = "AgentReady"

// hostSummary is what the node's status reports of its host besides
// capacity; a change of it is written at the next heartbeat.
type hostSummary struct {
	zones     string // "running=3,installed=1", "" when unknown
	available string // bytes free for zones, "" when unknown
	// storage is what the claims' datasets may hold in all (the volumes
	// dataset's used and available bytes); 0 when unknown.
	storage int64
	// poolUsed and poolSize are the images' pool's bytes used and its
	// size (used plus available), for image GC; "" when unknown.
	poolUsed, poolSize string
}

// summary counts the host's zones by state and reads the zones' free space.
func (a *Agent) summary(ctx context.Context) hostSummary {
	var s hostSummary
	if zones, ok := a.recentlyObservedZones(); ok {
		s.zones = ZoneSummary(zones)
	} else if zones, err := a.host.Zoneadm().List(ctx); err != nil {
		a.log.Warn("list zones", "err", err)
	} else {
		s.zones = ZoneSummary(zones)
	}
	// One zfs get for the three datasets (latestSummary: once a minute).
	pool, _, _ := strings.Cut(a.cfg.ImagesDataset, "/")
	space, err := a.host.ZFS().GetPropsOfEach(ctx, []string{a.cfg.ZonesDataset, pool, a.cfg.VolumesDataset}, "used", "available")
	if err != nil {
		a.log.Warn("read the datasets' space", "err", err)
	}
	if v, ok := space[a.cfg.ZonesDataset]["available"]; ok {
		s.available = v
	}
	if used, avail, ok := usedAndAvailable(space[pool]); ok {
		s.poolUsed, s.poolSize = strconv.FormatInt(used, 10), strconv.FormatInt(used+avail, 10)
	}
	if used, avail, ok := usedAndAvailable(space[a.cfg.VolumesDataset]); ok {
		s.storage = avail + used
	}
	return s
}

// hostReadBeats is how many heartbeats one reading of the host's zones
// and space serves. The reading runs commands (a zoneadm list unless the
// supervisor just listed the zones, and a zfs get), which cost a node of
// 100 zones several times what renewing its lease costs (docs/benchmark.md,
// "node heartbeats"); nothing it reports (zone counts, free space, the
// images' pool for image GC) needs to be fresher than a minute. The
// lease, the liveness, is renewed every interval.
const hostReadBeats = 6

// latestSummary is the host's summary read at most once every
// hostReadBeats heartbeat intervals; between readings, the last one,
// with the zones counted again from the supervisor's list when it is
// recent. A reading that could not read the space is not kept.
func (a *Agent) latestSummary(ctx context.Context) hostSummary {
	r := &a.hostRead
	r.Lock()
	defer r.Unlock()
	if r.at.IsZero() || time.Since(r.at) >= hostReadBeats*a.cfg.HeartbeatInterval {
		s := a.summary(ctx)
		if s.available != "" {
			r.summary, r.at = s, time.Now()
		}
		return s
	}
	s := r.summary
	if zones, ok := a.recentlyObservedZones(); ok {
		s.zones = ZoneSummary(zones)
	}
	return s
}

// usedAndAvailable parses a dataset's used and available bytes; ok is
// false when either is missing or not a number.
func usedAndAvailable(props map[string]string) (used, avail int64, ok bool) {
	avail, err1 := strconv.ParseInt(props["available"], 10, 64)
	used, err2 := strconv.ParseInt(props["used"], 10, 64)
	return used, avail, err1 == nil && err2 == nil
}

// recentlyObservedZones are the zones as the supervisor last listed them,
// if it did within two of its intervals: a heartbeat then runs no zoneadm
// list of its own.
func (a *Agent) recentlyObservedZones() ([]illumos.Zone, bool) {
	if a.observedZones == nil {
		return nil, false
	}
	states, at := a.observedZones()
	every := a.cfg.ObserveEvery
	if every <= 0 {
		every = supervisor.DefaultObserveEvery
	}
	if states == nil || time.Since(at) > 2*every {
		return nil, false
	}
	zones := make([]illumos.Zone, 0, len(states))
	for name, state := range states {
		zones = append(zones, illumos.Zone{Name: name, State: illumos.ZoneState(state)})
	}
	return zones, true
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

// register writes the Node as this agent sees it, creating it if it is
// missing (a first start, or an operator deleted it), and takes the pod
// CIDR the control plane assigned. It retries while the API does not
// answer; a refusal (another node holds the pod CIDR asked for) is final.
func (a *Agent) register(ctx context.Context) (*model.Node, error) {
	var node *model.Node
	err := retry.Do(ctx, apiRetry, func(context.Context) error {
		cur, err := a.api.GetNode(ctx)
		if nodeapi.IsNotFound(err) {
			cur, err = &model.Node{Metadata: model.ObjectMeta{Name: a.cfg.Node}}, nil
		}
		if err != nil {
			return err
		}
		next := a.nodeReport(cur, a.latestSummary(ctx))
		stampHeartbeat(next, time.Now().UTC())
		node, err = a.api.PutStatus(ctx, next)
		return err
	})
	if err != nil {
		return nil, err
	}
	p, err := netip.ParsePrefix(node.Spec.PodCIDR)
	if err != nil || p.Masked() != p {
		return nil, fmt.Errorf("the control plane assigned no usable pod CIDR (%q)", node.Spec.PodCIDR)
	}
	if a.podCIDR.IsValid() && a.podCIDR != p {
		// The gateway, DNS and NAT rules of this run sit in the old one.
		return nil, fmt.Errorf("the control plane now assigns pod CIDR %s, but this agent's pods use %s; restart the agent", p, a.podCIDR)
	}
	a.podCIDR = p
	a.podNetwork.Store(&p)
	a.checkConfiguredPodCIDR(ctx)
	return node, nil
}

// Reporting a configured pod CIDR the control plane did not assign.
const (
	// ConditionPodCIDRMismatch is True while the agent's configured pod
	// CIDR (--pod-cidr) is not the one the Node holds; the node uses the
	// assigned one only.
	ConditionPodCIDRMismatch = "PodCIDRMismatch"
	// ReasonPodCIDRNotAssigned is that condition's reason when True, and
	// the Warning event's.
	ReasonPodCIDRNotAssigned = "ConfiguredPodCIDRNotAssigned"
	reasonPodCIDRAssigned    = "ConfiguredPodCIDRAssigned"
)

// checkConfiguredPodCIDR refuses a configured pod CIDR other than the
// assigned one: the node keeps to the assigned one (its gateway, DNS, NAT
// rules, routes and pod addresses), and says so in its log, an event and
// its PodCIDRMismatch condition, so the operator corrects the setting. A
// node holds its pod CIDR for life; another one means deleting the Node.
func (a *Agent) checkConfiguredPodCIDR(ctx context.Context) {
	msg := a.podCIDRMismatch(a.podCIDR)
	if msg == "" {
		return
	}
	a.log.Error("refusing the configured pod CIDR; using the assigned one", "configured", a.cfg.PodCIDR, "assigned", a.podCIDR)
	a.event(ctx, model.ObjectReference{Kind: model.KindNode, Name: a.cfg.Node}, model.EventWarning, ReasonPodCIDRNotAssigned, msg)
}

// podCIDRMismatch says how the configured pod CIDR differs from the
// assigned one; "" when none is configured or assigned, or they agree.
func (a *Agent) podCIDRMismatch(assigned netip.Prefix) string {
	want, err := netip.ParsePrefix(a.cfg.PodCIDR)
	if a.cfg.PodCIDR == "" || !assigned.IsValid() || (err == nil && want == assigned) {
		return ""
	}
	return fmt.Sprintf("the agent is configured with pod CIDR %s (--pod-cidr), but the control plane assigned node %s %s: "+
		"the node uses %s only; correct --pod-cidr, or delete the Node to give it another", a.cfg.PodCIDR, a.cfg.Node, assigned, assigned)
}

// writeStatus writes the Node's status if what the agent sees differs
// from cur, the Node as the control plane has it. It returns the Node as
// now stored: cur when nothing changed.
func (a *Agent) writeStatus(ctx context.Context, cur *model.Node, sum hostSummary) (*model.Node, error) {
	next := a.nodeReport(cur, sum)
	if sameNode(cur, next) {
		return cur, nil
	}
	stampHeartbeat(next, time.Now().UTC())
	return a.api.PutStatus(ctx, next)
}

// nodeReport is cur with what the agent owns applied; the Ready
// condition's heartbeat time is cur's, so an unchanged node compares equal.
func (a *Agent) nodeReport(cur *model.Node, sum hostSummary) *model.Node {
	n := cloneNode(cur)
	var beat *time.Time
	if c := cur.Condition(model.NodeReady); c != nil {
		beat = c.LastHeartbeatTime
	}
	a.apply(n, time.Now().UTC(), sum, beat)
	return n
}

// stampHeartbeat sets the Ready condition's heartbeat time of a status
// about to be written.
func stampHeartbeat(n *model.Node, now time.Time) {
	for i := range n.Status.Conditions {
		if n.Status.Conditions[i].Type == model.NodeReady {
			n.Status.Conditions[i].LastHeartbeatTime = &now
		}
	}
}

func cloneNode(n *model.Node) *model.Node {
	b, err := json.Marshal(n)
	if err != nil {
		panic(err) // a Node always encodes
	}
	var c model.Node
	if err := json.Unmarshal(b, &c); err != nil {
		panic(err)
	}
	return &c
}

func sameNode(a, b *model.Node) bool {
	x, err1 := json.Marshal(a)
	y, err2 := json.Marshal(b)
	return err1 == nil && err2 == nil && bytes.Equal(x, y)
}

// apply sets what the agent owns on n: capacity, allocatable, node info,
// addresses, its labels, the Ready condition (with heartbeat time beat)
// and the summary annotations, and asks for a pod CIDR when n has none:
// the one this run uses, else the one configured, else the one the host's
// gateway holds from an earlier run. Everything else (taints,
// unschedulable, other labels) is the operator's and stays.
func (a *Agent) apply(n *model.Node, now time.Time, sum hostSummary, beat *time.Time) {
	a.askPodCIDR(n)
	a.applyResources(n, sum)
	a.applyAddresses(n)
	a.applyLabels(n)
	applySummary(n, sum)

	// nil until this agent has applied a snapshot: a status left by an
	// earlier run (or an agent now without --api-url) is not reported.
	n.Status.ServiceNetwork = a.serviceNAT.get()

	a.applyPodCIDRCondition(n, now)
	a.applyReady(n, now, beat)
}

// askPodCIDR asks for a pod CIDR when n has none.
func (a *Agent) askPodCIDR(n *model.Node) {
	if n.Spec.PodCIDR != "" {
		return
	}
	switch {
	case a.podCIDR.IsValid():
		n.Spec.PodCIDR = a.podCIDR.String()
	case a.cfg.PodCIDR != "":
		n.Spec.PodCIDR = a.cfg.PodCIDR
	case a.hostCIDR.IsValid():
		n.Spec.PodCIDR = a.hostCIDR.String()
	}
}

// applyResources sets capacity and allocatable: the host's, less what the
// system keeps.
func (a *Agent) applyResources(n *model.Node, sum hostSummary) {
	cfg, f := a.cfg, a.facts
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
}

// applyAddresses sets the node info and where the node and its endpoint
// are reached.
func (a *Agent) applyAddresses(n *model.Node) {
	cfg, f := a.cfg, a.facts
	n.Status.NodeInfo = model.NodeInfo{
		OSRelease:    f.Uname.Version,
		KernelVer:    strings.TrimSpace(f.Uname.Sysname + " " + f.Uname.Release),
		AgentVersion: cfg.Version,
		ZoneBrands:   append([]string(nil), cfg.ZoneBrands...),
	}
	n.Status.Addresses = nil
	if a.endpointIP != "" {
		n.Status.Addresses = append(n.Status.Addresses, model.NodeAddress{Type: model.NodeInternalIP, Address: a.endpointIP})
	}
	if f.Hostname != "" {
		n.Status.Addresses = append(n.Status.Addresses, model.NodeAddress{Type: model.NodeHostName, Address: f.Hostname})
	}
	n.Status.DaemonEndpoints = model.NodeDaemonEndpoints{AgentEndpoint: model.DaemonEndpoint{Port: int32(a.endpointPort)}}
}

// applyLabels sets the brand labels (the brands offered now only) and the
// hostname label.
func (a *Agent) applyLabels(n *model.Node) {
	if n.Metadata.Labels == nil {
		n.Metadata.Labels = map[string]string{}
	}
	for k := range n.Metadata.Labels {
		if strings.HasPrefix(k, model.LabelNodeBrandPrefix) {
			delete(n.Metadata.Labels, k) // brands no longer offered go
		}
	}
	for _, b := range a.cfg.ZoneBrands {
		n.Metadata.Labels[model.LabelNodeBrandPrefix+b] = "true"
	}
	if v := labelValue(a.facts.Hostname); v != "" {
		n.Metadata.Labels[model.LabelNodeHostname] = v
	}
}

// applySummary sets the summary annotations the host gave.
func applySummary(n *model.Node, sum hostSummary) {
	if n.Metadata.Annotations == nil {
		n.Metadata.Annotations = map[string]string{}
	}
	if sum.zones != "" {
		n.Metadata.Annotations[model.AnnotationNodeZones] = sum.zones
	}
	if sum.available != "" {
		n.Metadata.Annotations[model.AnnotationNodeZonesAvailable] = sum.available
	}
	if sum.poolSize != "" {
		n.Metadata.Annotations[model.AnnotationNodeImagePoolUsed] = sum.poolUsed
		n.Metadata.Annotations[model.AnnotationNodeImagePoolSize] = sum.poolSize
	}
}

// applyPodCIDRCondition says whether the configured pod CIDR is the one
// assigned.
func (a *Agent) applyPodCIDRCondition(n *model.Node, now time.Time) {
	// Only when a pod CIDR is configured (without one there is nothing to
	// disagree with), compared with the Node's: the assigned one (for a
	// new Node, the one asked for), so the first write already says.
	if assigned, err := netip.ParsePrefix(n.Spec.PodCIDR); a.cfg.PodCIDR != "" && err == nil {
		c := model.NodeCondition{Type: ConditionPodCIDRMismatch, Status: model.ConditionFalse, Reason: reasonPodCIDRAssigned,
			Message: "the configured pod CIDR is the one the control plane assigned"}
		if msg := a.podCIDRMismatch(assigned); msg != "" {
			c.Status, c.Reason, c.Message = model.ConditionTrue, ReasonPodCIDRNotAssigned, msg
		}
		model.SetCondition(&n.Status.Conditions, c, now)
	} else {
		n.Status.Conditions = slices.DeleteFunc(n.Status.Conditions, func(c model.NodeCondition) bool { return c.Type == ConditionPodCIDRMismatch })
	}
}

// applyReady sets the Ready condition, saying why the worker is not
// polling yet if it is not.
func (a *Agent) applyReady(n *model.Node, now time.Time, beat *time.Time) {
	a.mu.Lock()
	workerErr := a.workerErr
	a.mu.Unlock()
	msg := "zonewright agent is renewing its lease"
	if workerErr != nil {
		msg += "; its worker is not polling Temporal yet: " + workerErr.Error()
	}
	model.SetCondition(&n.Status.Conditions, model.NodeCondition{
		Type: model.NodeReady, Status: model.ConditionTrue, Reason: ReasonAgentReady, Message: msg, LastHeartbeatTime: beat,
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
