// Package roomfeed wakes the pods that wait because no node fitted them
// when the change feed shows room made: a node that admits pods anew
// (added, uncordoned, Ready again, its labels or taints changed), a pod
// that leaves its node (removed, finished, unbound), a claim that moved
// to another node. Such a pod waits for a wake or its back-off; as
// kube-scheduler moves pods out of its unschedulable queue on cluster
// events, whoever freed the room need not know who waits for it.
package roomfeed

import (
	"context"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/zonewright/zonewright/internal/endpoints"
	"github.com/zonewright/zonewright/internal/informer"
	"github.com/zonewright/zonewright/internal/model"
	"github.com/zonewright/zonewright/internal/pglock"
	"github.com/zonewright/zonewright/internal/store"
)

// Follower follows nodes, pods and claims and wakes the waiting pods once
// per burst of changes that made room.
type Follower struct {
	Store *store.Store
	// Wake wakes the pods waiting for room, the oldest few
	// (controlops.WakeUnschedulable); it is best effort.
	Wake func(ctx context.Context) int
	Log  *slog.Logger
}

// A burst of changes (a node drained, a deployment scaled down) makes one
// wake: it ends after quiet without a change, or window after it began.
const (
	quiet  = 50 * time.Millisecond
	window = 500 * time.Millisecond
)

// Run leads when it can and follows while it leads, until ctx ends: one
// replica wakes, so a waiting pod is not signalled once per replica.
func (f *Follower) Run(ctx context.Context) {
	if f.Log == nil {
		f.Log = slog.Default()
	}
	leader := &endpoints.Leader{Pool: f.Store.Pool(), Key: pglock.RoomFeedLeader}
	leader.Lead(ctx, f.Log, "room feed", func(lctx context.Context) { f.newInformer().Run(lctx) })
}

// room is what the feed knows of each object, to tell a change that
// made room from one that did not.
type room struct {
	nodes  map[string]nodeRoom
	pods   map[string]podRoom
	claims map[string]string // claim → its node
	// made: room was made since the last wake.
	made bool
}

// newInformer lists (changes may have been missed while nobody followed,
// so the lists count as room made), then wakes after each burst of
// changes that made room.
func (f *Follower) newInformer() *informer.Informer {
	r := &room{nodes: map[string]nodeRoom{}, pods: map[string]podRoom{}, claims: map[string]string{}}
	return &informer.Informer{Name: "room feed", Log: f.Log,
		Sources: []informer.Source{
			informer.Kind(f.Store.Nodes(), informer.Handlers[model.Node]{Listed: r.listNodes, Changed: r.changeNode}),
			informer.Kind(f.Store.Pods(), informer.Handlers[model.Pod]{Listed: r.listPods, Changed: r.changePod}),
			informer.Kind(f.Store.Claims(), informer.Handlers[model.PersistentVolumeClaim]{Listed: r.listClaims, Changed: r.changeClaim}),
		},
		Flush: func(ctx context.Context) (bool, error) {
			if r.made {
				r.made = false
				f.Wake(ctx)
			}
			return false, nil
		},
		Quiet: quiet, Window: window,
	}
}

// nodeRoom is what of a node decides which pods it admits.
type nodeRoom struct {
	admits         bool // schedulable and Ready
	labels, taints string
	allocatable    string
}

func nodeRoomOf(n *model.Node) nodeRoom {
	ready := n.Condition(model.NodeReady)
	taints := make([]string, len(n.Spec.Taints))
	for i, t := range n.Spec.Taints {
		taints[i] = t.Key + "=" + t.Value + ":" + t.Effect
	}
	return nodeRoom{admits: !n.Spec.Unschedulable && ready != nil && ready.Status == model.ConditionTrue,
		labels: joined(n.Metadata.Labels), taints: strings.Join(taints, ","), allocatable: joined(n.Status.Allocatable)}
}

// joined is a map as one comparable string.
func joined(m map[string]string) string {
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(m)) {
		b.WriteString(k + "=" + m[k] + ";")
	}
	return b.String()
}

func (r *room) listNodes(_ context.Context, nodes []model.Node) error {
	clear(r.nodes)
	for i := range nodes {
		r.nodes[nodes[i].Metadata.Name] = nodeRoomOf(&nodes[i])
	}
	r.made = true
	return nil
}

// changeNode: a node admits pods it did not, or admits them on other
// terms (labels, taints, allocatable resources).
func (r *room) changeNode(_ context.Context, ev informer.Event[model.Node]) error {
	name := ev.Object.Metadata.Name
	if ev.Type == informer.Deleted {
		delete(r.nodes, name)
		return nil
	}
	now := nodeRoomOf(ev.Object)
	if old, ok := r.nodes[name]; now.admits && (!ok || old != now) {
		r.made = true
	}
	r.nodes[name] = now
	return nil
}

// podRoom is where a pod holds room: its node, and whether it ended
// (an ended pod's requests count no more).
type podRoom struct {
	node  string
	ended bool
}

func podRoomOf(p *model.Pod) podRoom {
	return podRoom{node: p.Spec.NodeName, ended: p.Status.Phase == model.PodFailed || p.Status.Phase == model.PodSucceeded}
}

func podKey(p *model.Pod) string { return p.Metadata.Namespace + "/" + p.Metadata.Name }

func (r *room) listPods(_ context.Context, pods []model.Pod) error {
	clear(r.pods)
	for i := range pods {
		r.pods[podKey(&pods[i])] = podRoomOf(&pods[i])
	}
	return nil
}

// changePod: a pod bound to a node is removed, ends or is unbound.
func (r *room) changePod(_ context.Context, ev informer.Event[model.Pod]) error {
	k, now := podKey(ev.Object), podRoomOf(ev.Object)
	old, ok := r.pods[k]
	if !ok {
		old = now
	}
	if ev.Type == informer.Deleted {
		delete(r.pods, k)
		r.made = r.made || now.node != ""
		return nil
	}
	r.pods[k] = now
	r.made = r.made || old.node != "" && (now.node == "" || now.ended && !old.ended)
	return nil
}

func claimKey(c *model.PersistentVolumeClaim) string {
	return c.Metadata.Namespace + "/" + c.Metadata.Name
}

func (r *room) listClaims(_ context.Context, claims []model.PersistentVolumeClaim) error {
	clear(r.claims)
	for i := range claims {
		r.claims[claimKey(&claims[i])] = claims[i].Status.NodeName
	}
	return nil
}

// changeClaim: a claim's data moved to another node, where its pods may
// now go.
func (r *room) changeClaim(_ context.Context, ev informer.Event[model.PersistentVolumeClaim]) error {
	k, node := claimKey(ev.Object), ev.Object.Status.NodeName
	if ev.Type == informer.Deleted {
		delete(r.claims, k)
		return nil
	}
	if old := r.claims[k]; old != "" && node != old {
		r.made = true
	}
	r.claims[k] = node
	return nil
}
