package controlops

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/zonewright/zonewright/internal/controlapi"
	"github.com/zonewright/zonewright/internal/imagegc"
	"github.com/zonewright/zonewright/internal/model"
	"github.com/zonewright/zonewright/internal/store"
)

// Image garbage collection's event reasons: the kubelet's when the unused
// images are not enough; a Normal event for each image removed (the
// kubelet only logs it, but here the choice is the control plane's, so
// the Node's events are where an operator sees why a pod pulls again).
const (
	ReasonFreeDiskSpaceFailed   = "FreeDiskSpaceFailed"
	ReasonImageGarbageCollected = "ImageGarbageCollected"
	imageGCSource               = "zonewright-image-gc"
)

// imagePool is the node's pool usage as its agent reports it; ok is false
// when it reports none.
func imagePool(n *model.Node) (used, size int64, ok bool) {
	used, err1 := strconv.ParseInt(n.Metadata.Annotations[model.AnnotationNodeImagePoolUsed], 10, 64)
	size, err2 := strconv.ParseInt(n.Metadata.Annotations[model.AnnotationNodeImagePoolSize], 10, 64)
	return used, size, err1 == nil && err2 == nil && used >= 0 && size > 0
}

// PlanImageGC looks at every node's pool and, where its usage is at or
// above the high threshold, chooses the images no pod assigned to the
// node uses, least recently used first, until the estimate is below the
// low threshold (imagegc.Choose). Thresholds unset or off plan nothing.
func (a *Images) PlanImageGC(ctx context.Context) (controlapi.ImageGCPlan, error) {
	var plan controlapi.ImageGCPlan
	if a.GC.High == 0 || a.GC.Off() {
		return plan, nil
	}
	nodes, err := a.allNodes(ctx)
	if err != nil {
		return plan, err
	}
	for i := range nodes {
		used, size, ok := imagePool(&nodes[i])
		if !ok || used*100 < int64(a.GC.High)*size {
			continue
		}
		name := nodes[i].Metadata.Name
		held, err := a.Store.ImagesOnNode(ctx, name)
		if err != nil {
			return plan, fmt.Errorf("images on node %s: %w", name, err)
		}
		images := make([]imagegc.Image, len(held))
		for j, h := range held {
			images[j] = imagegc.Image{Name: h.Image, Bytes: h.Bytes, LastUsed: h.LastUsed, InUse: h.InUse}
		}
		c := imagegc.Choose(a.GC, used, size, images)
		if !c.Collect() {
			continue
		}
		n := controlapi.NodeImageGC{Node: name, Used: used, Size: size, Left: c.Left, LowThreshold: a.GC.Low, Short: c.Short}
		for _, r := range c.Remove {
			n.Remove = append(n.Remove, controlapi.ImageGCCandidate{Image: r.Name, Bytes: r.Bytes, LastUsed: r.LastUsed})
		}
		plan.Nodes = append(plan.Nodes, n)
	}
	return plan, nil
}

// ReleaseImageNode forgets that the node holds the image so its removal
// can begin (store.ReleaseImageNode), unless a pod assigned to the node
// uses it or its state there is not Ready.
func (a *Images) ReleaseImageNode(ctx context.Context, in controlapi.ImageNodeInput) (controlapi.ImageRelease, error) {
	ok, why, err := a.Store.ReleaseImageNode(ctx, in.Image, in.Node)
	return controlapi.ImageRelease{Released: ok, Why: why}, err
}

// RecordImageGC records on the Node a Normal event for each image
// removed, and the kubelet's Warning FreeDiskSpaceFailed when what was
// removed does not bring the estimate below the low threshold.
func (a *Images) RecordImageGC(ctx context.Context, r controlapi.ImageGCReport) error {
	p := r.Plan
	node := model.ObjectReference{Kind: model.KindNode, Name: p.Node}
	removed := map[string]bool{}
	for _, n := range r.Removed {
		removed[n] = true
	}
	left := p.Used
	for _, c := range p.Remove {
		if !removed[c.Image] {
			continue
		}
		left -= c.Bytes
		msg := fmt.Sprintf("Removed unused image %s (%d bytes, last used %s) from node %s: its pool was %d%% full, at or above the image GC high threshold",
			c.Image, c.Bytes, c.LastUsed.UTC().Format(time.RFC3339), p.Node, percent(p.Used, p.Size))
		if err := a.Store.RecordEvent(ctx, node, model.EventNormal, ReasonImageGarbageCollected, msg, imageGCSource); err != nil {
			return err
		}
	}
	if left*100 < int64(p.LowThreshold)*p.Size {
		return nil
	}
	msg := fmt.Sprintf("Failed to garbage collect required amount of images. Attempted to free %d bytes, but only found %d bytes eligible to free.",
		p.Used-int64(p.LowThreshold)*p.Size/100, p.Used-left)
	return a.Store.RecordEvent(ctx, node, model.EventWarning, ReasonFreeDiskSpaceFailed, msg, imageGCSource)
}

func percent(used, size int64) int64 {
	if size <= 0 {
		return 0
	}
	return used * 100 / size
}

// touchImages records that the pod used its images on its node now (it
// started or ended); best effort: an image's order in the collection is
// all that a lost write changes.
func touchImages(ctx context.Context, st *store.Store, p *model.Pod) {
	if p.Spec.NodeName == "" {
		return
	}
	var images []string
	for _, c := range p.Spec.Containers {
		images = append(images, c.Image)
	}
	_ = st.TouchImageNodes(ctx, p.Spec.NodeName, images)
}
