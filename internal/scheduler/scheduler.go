// Package scheduler places pods on nodes: filters (ready, schedulable,
// resources, brand, node selector, taints) and scores (least allocated,
// balanced allocation), then binds atomically in PostgreSQL so concurrent
// placements never overcommit a node.
package scheduler

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/zonewright/zonewright/internal/model"
)

// Resources are amounts in millicores, bytes and pods.
type Resources struct {
	MilliCPU int64
	Memory   int64
	Pods     int64
}

func (r Resources) add(o Resources) Resources {
	return Resources{r.MilliCPU + o.MilliCPU, r.Memory + o.Memory, r.Pods + o.Pods}
}

// PodRequests sums what a pod asks for over its containers, using a
// container's limit where it sets no request (as Kubernetes does).
func PodRequests(p *model.Pod) Resources {
	r := Resources{Pods: 1}
	for _, c := range p.Spec.Containers {
		r.MilliCPU += quantity(c.Resources.Requests, c.Resources.Limits, model.ResourceCPU, model.MilliCPU)
		r.Memory += quantity(c.Resources.Requests, c.Resources.Limits, model.ResourceMemory, model.Bytes)
	}
	return r
}

func quantity(req, lim model.ResourceList, name string, parse func(string) (int64, error)) int64 {
	v, ok := req[name]
	if !ok {
		v, ok = lim[name]
	}
	if !ok {
		return 0
	}
	n, _ := parse(v) // validated at admission
	return n
}

// Allocatable reads what a node offers to pods.
func Allocatable(n *model.Node) Resources {
	list := n.Status.Allocatable
	if len(list) == 0 {
		list = n.Status.Capacity
	}
	var r Resources
	if v, ok := list[model.ResourceCPU]; ok {
		r.MilliCPU, _ = model.MilliCPU(v)
	}
	if v, ok := list[model.ResourceMemory]; ok {
		r.Memory, _ = model.Bytes(v)
	}
	if v, ok := list[model.ResourcePods]; ok {
		m, _ := model.ParseQuantity(v)
		r.Pods = m / 1000
	}
	return r
}

// Candidate is a node with what its bound pods already request.
type Candidate struct {
	Node *model.Node
	Used Resources
	// ClaimBytes are the quotas of the claims bound to the node, and
	// NewClaimBytes those of the pod's claims not bound yet: together they
	// may not pass the node's allocatable storage.
	ClaimBytes, NewClaimBytes int64
	// Excluded, when set, is why the pod cannot go there whatever the
	// node offers (its claims' data is on another node).
	Excluded string
}

// Filter reasons, counted per node in the message of an unschedulable pod.
const (
	reasonNotReady     = "node(s) were not ready"
	reasonCordoned     = "node(s) were unschedulable"
	reasonBrand        = "node(s) did not support the zone brand"
	reasonSelector     = "node(s) didn't match Pod's node affinity/selector"
	reasonTaint        = "node(s) had untolerated taint(s)"
	reasonCPU          = "Insufficient cpu"
	reasonMemory       = "Insufficient memory"
	reasonPods         = "Too many pods"
	reasonStorage      = "Insufficient storage"
	reasonNodeNameMiss = "node(s) didn't match the requested node name"
	// ReasonVolumeNode: the pod's claims are bound to another node.
	ReasonVolumeNode = "node(s) had volume node affinity conflict"
)

// Decision is the outcome of placing one pod.
type Decision struct {
	Node    string // empty when no node fits
	Message string // why no node fits, Kubernetes style
	// Reason is ReasonCapacityExceeded when the capacity map, not the
	// nodes, keeps the pod waiting; empty otherwise.
	Reason string
	// Claims are the pod's claims, bound to Node.
	Claims []BoundClaim
	// Cloning names the pod's claims whose snapshots' data is being
	// copied to the node chosen: their workflows must be woken.
	Cloning []string
}

// BoundClaim is a claim a placed pod uses: its dataset is on the pod's
// node.
type BoundClaim struct {
	Name  string
	UID   string
	Bytes int64
	// SourceSnapshotUID and SourceClaimUID name the snapshot a claim is
	// cloned from.
	SourceSnapshotUID, SourceClaimUID string
	// Block: the claim is a zvol (a bhyve pod's disk).
	Block bool
	// Copying: its snapshot's data is still being copied to the node.
	Copying bool
}

// Place picks the best node for the pod among the candidates.
func Place(p *model.Pod, candidates []Candidate) Decision {
	req := PodRequests(p)
	rejected := map[string]int{}
	type scored struct {
		name  string
		score float64
	}
	var fit []scored
	for _, c := range candidates {
		if reason := filter(p, req, c); reason != "" {
			rejected[reason]++
			continue
		}
		fit = append(fit, scored{c.Node.Metadata.Name, score(req, c)})
	}
	if len(fit) == 0 {
		return Decision{Message: unschedulable(len(candidates), rejected)}
	}
	sort.Slice(fit, func(i, j int) bool {
		if fit[i].score != fit[j].score {
			return fit[i].score > fit[j].score
		}
		return fit[i].name < fit[j].name
	})
	return Decision{Node: fit[0].name}
}

func filter(p *model.Pod, req Resources, c Candidate) string {
	n := c.Node
	if c.Excluded != "" {
		return c.Excluded
	}
	if p.Spec.NodeName != "" && p.Spec.NodeName != n.Metadata.Name {
		return reasonNodeNameMiss
	}
	if !n.Ready() {
		return reasonNotReady
	}
	if n.Spec.Unschedulable {
		return reasonCordoned
	}
	if !slices.Contains(n.Status.NodeInfo.ZoneBrands, p.Spec.RuntimeClassName) {
		return reasonBrand
	}
	for k, v := range p.Spec.NodeSelector {
		if n.Metadata.Labels[k] != v {
			return reasonSelector
		}
	}
	for _, t := range n.Spec.Taints {
		if (t.Effect == model.TaintNoSchedule || t.Effect == model.TaintNoExecute) && !tolerates(p.Spec.Tolerations, t) {
			return reasonTaint
		}
	}
	alloc := Allocatable(n)
	total := c.Used.add(req)
	switch {
	case total.Pods > alloc.Pods:
		return reasonPods
	case total.MilliCPU > alloc.MilliCPU:
		return reasonCPU
	case total.Memory > alloc.Memory:
		return reasonMemory
	}
	if c.NewClaimBytes > 0 {
		if v, ok := n.Status.Allocatable[model.ResourceStorage]; ok {
			if storage, err := model.Bytes(v); err == nil && c.ClaimBytes+c.NewClaimBytes > storage {
				return reasonStorage
			}
		}
	}
	return ""
}

func tolerates(tols []model.Toleration, t model.Taint) bool {
	for _, tol := range tols {
		if tol.Effect != "" && tol.Effect != t.Effect {
			continue
		}
		if tol.Operator == "Exists" && (tol.Key == "" || tol.Key == t.Key) {
			return true
		}
		if tol.Key == t.Key && tol.Value == t.Value {
			return true
		}
	}
	return false
}

// score favours nodes left with the most free capacity (least allocated)
// and with cpu and memory used in similar proportion (balanced).
func score(req Resources, c Candidate) float64 {
	alloc := Allocatable(c.Node)
	frac := func(used, total int64) float64 {
		if total <= 0 {
			return 1
		}
		return float64(used) / float64(total)
	}
	total := c.Used.add(req)
	cpu, mem := frac(total.MilliCPU, alloc.MilliCPU), frac(total.Memory, alloc.Memory)
	least := ((1 - cpu) + (1 - mem)) / 2
	diff := cpu - mem
	if diff < 0 {
		diff = -diff
	}
	balanced := 1 - diff
	return least + balanced
}

func unschedulable(total int, rejected map[string]int) string {
	reasons := make([]string, 0, len(rejected))
	for r, n := range rejected {
		reasons = append(reasons, fmt.Sprintf("%d %s", n, r))
	}
	sort.Strings(reasons)
	if total == 0 {
		return "0/0 nodes are available: no nodes are registered"
	}
	return fmt.Sprintf("0/%d nodes are available: %s.", total, strings.Join(reasons, ", "))
}
