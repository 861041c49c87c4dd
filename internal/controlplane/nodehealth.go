package controlplane

import (
	"context"
	"encoding/json"
	"strconv"
	"time"

	"github.com/zonewright/zonewright/internal/model"
	"github.com/zonewright/zonewright/internal/store"
)

// watchNodes starts the health workflow of every node as soon as it is
// registered (whichever API replica a node registered through), so a node
// never runs unwatched until the next reconcile. It starts those of the
// nodes already there first, and resumes the watch when it ends.
func (cp *ControlPlane) watchNodes(ctx context.Context) {
	defer cp.bg.Done()
	for ctx.Err() == nil {
		if err := cp.watchNodesOnce(ctx); err != nil && ctx.Err() == nil {
			cp.log.Warn("node watch ended; starting it again", "err", err)
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
}

func (cp *ControlPlane) watchNodesOnce(ctx context.Context) error {
	list, err := cp.Store.Nodes().List(ctx, store.ListOptions{})
	if err != nil {
		return err
	}
	for _, n := range list.Items {
		if err := cp.nodes.Ensure(ctx, n.Metadata.Name); err != nil {
			return err
		}
	}
	rv, _ := strconv.ParseInt(list.Metadata.ResourceVersion, 10, 64)
	w, err := cp.Store.Nodes().Watch(ctx, store.WatchOptions{ResourceVersion: rv})
	if err != nil {
		return err
	}
	defer w.Stop()
	for ev := range w.Events {
		if ev.Type != "ADDED" {
			continue
		}
		var n model.Node
		if err := json.Unmarshal(ev.Object, &n); err != nil {
			continue
		}
		if err := cp.nodes.Ensure(ctx, n.Metadata.Name); err != nil {
			return err
		}
	}
	return w.Err()
}
