package endpoints

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"strconv"
	"time"

	"github.com/zonewright/zonewright/internal/clusterip"
	"github.com/zonewright/zonewright/internal/model"
	"github.com/zonewright/zonewright/internal/pglock"
	"github.com/zonewright/zonewright/internal/store"
)

// DefaultResync is how often the controller lists everything again and
// sweeps cluster IPs whose service is gone, as a safety net under the
// change feed.
const DefaultResync = 5 * time.Minute

// Controller writes Endpoints. Only one replica's controller writes at a
// time (see Leader); every write is conditioned on the resourceVersion the
// controller read, so even a leader that lost its lock without knowing it
// yet cannot overwrite a newer object, only fail and re-read.
type Controller struct {
	Store *store.Store
	Log   *slog.Logger
	// Resync: a full relist and cluster IP sweep; zero: DefaultResync.
	Resync time.Duration
}

// Run leads when it can and reconciles while it leads, until ctx ends.
func (c *Controller) Run(ctx context.Context) {
	log := c.Log
	if log == nil {
		log = slog.Default()
	}
	leader := &Leader{Pool: c.Store.Pool(), Key: pglock.EndpointsLeader}
	for ctx.Err() == nil {
		err := leader.While(ctx, func(lctx context.Context) error {
			log.Info("endpoints controller leading")
			for lctx.Err() == nil {
				err := c.reconcile(lctx, log)
				if errors.Is(err, errResync) {
					continue
				}
				if err != nil && lctx.Err() == nil {
					log.Warn("endpoints controller: starting over", "err", err)
					sleep(lctx, time.Second)
				}
			}
			return nil
		})
		if err != nil && ctx.Err() == nil {
			log.Warn("endpoints controller: leadership", "err", err)
		}
		sleep(ctx, time.Second)
	}
}

var errResync = errors.New("resync")

func sleep(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

// state is what the controller knows, from the lists and the watches.
type state struct {
	services  map[string]*model.Service
	endpoints map[string]*model.Endpoints
	pods      map[string]map[string]*model.Pod // namespace → name → pod
}

func key(ns, name string) string { return ns + "/" + name }

// reconcile lists services, pods and endpoints, brings every Endpoints
// object up to date, then follows the change feed, recomputing the
// services a change touches, until a watch ends or the resync is due.
func (c *Controller) reconcile(ctx context.Context, log *slog.Logger) error {
	st := &state{services: map[string]*model.Service{}, endpoints: map[string]*model.Endpoints{}, pods: map[string]map[string]*model.Pod{}}
	svcs, err := c.Store.Services().List(ctx, store.ListOptions{})
	if err != nil {
		return err
	}
	pods, err := c.Store.Pods().List(ctx, store.ListOptions{})
	if err != nil {
		return err
	}
	eps, err := c.Store.Endpoints().List(ctx, store.ListOptions{})
	if err != nil {
		return err
	}
	for i := range svcs.Items {
		s := &svcs.Items[i]
		st.services[key(s.Metadata.Namespace, s.Metadata.Name)] = s
	}
	for i := range pods.Items {
		st.putPod(&pods.Items[i])
	}
	for i := range eps.Items {
		e := &eps.Items[i]
		st.endpoints[key(e.Metadata.Namespace, e.Metadata.Name)] = e
	}
	watch := func(w *store.Watch, err error) (*store.Watch, error) { return w, err }
	svcW, err := watch(c.Store.Services().Watch(ctx, store.WatchOptions{ResourceVersion: rv(svcs.Metadata.ResourceVersion)}))
	if err != nil {
		return err
	}
	defer svcW.Stop()
	podW, err := watch(c.Store.Pods().Watch(ctx, store.WatchOptions{ResourceVersion: rv(pods.Metadata.ResourceVersion)}))
	if err != nil {
		return err
	}
	defer podW.Stop()
	epW, err := watch(c.Store.Endpoints().Watch(ctx, store.WatchOptions{ResourceVersion: rv(eps.Metadata.ResourceVersion)}))
	if err != nil {
		return err
	}
	defer epW.Stop()

	dirty := map[string]bool{}
	for k := range st.services {
		dirty[k] = true
	}
	for k := range st.endpoints {
		dirty[k] = true
	}
	if n, err := clusterip.Sweep(ctx, c.Store.Pool()); err != nil {
		log.Warn("cluster IP sweep", "err", err)
	} else if n > 0 {
		log.Info("freed cluster IPs of services that are gone", "count", n)
	}
	resync := c.Resync
	if resync <= 0 {
		resync = DefaultResync
	}
	timer := time.NewTimer(resync)
	defer timer.Stop()
	now := make(chan time.Time)
	close(now)
	// take applies one change from the watches; it reports false when
	// retry or idle came first (idle: now, to take only what is queued).
	take := func(retry, idle <-chan time.Time) (bool, error) {
		select {
		case <-ctx.Done():
			return false, ctx.Err()
		case <-timer.C:
			return false, errResync
		case <-retry:
			return false, nil
		case <-idle:
			return false, nil
		case ev, ok := <-svcW.Events:
			if !ok {
				return false, watchEnded("services", svcW)
			}
			st.applyService(ev, dirty)
		case ev, ok := <-podW.Events:
			if !ok {
				return false, watchEnded("pods", podW)
			}
			st.applyPod(ev, dirty)
		case ev, ok := <-epW.Events:
			if !ok {
				return false, watchEnded("endpoints", epW)
			}
			st.applyEndpoints(ev, dirty)
		}
		return true, nil
	}
	for {
		// Write what is dirty, then wait for the next change; the changes
		// that came meanwhile are taken together.
		for k := range dirty {
			if err := c.sync(ctx, st, k); err != nil {
				log.Warn("endpoints: write failed; will retry", "service", k, "err", err)
				continue
			}
			delete(dirty, k)
		}
		var retry <-chan time.Time
		if len(dirty) > 0 {
			retry = time.After(time.Second)
		}
		// Wait for a change, then take those already queued with it, so
		// the writes above cover them together.
		got, err := take(retry, nil)
		for err == nil && got {
			got, err = take(nil, now)
		}
		if err != nil {
			return err
		}
	}
}

func rv(s string) int64 { n, _ := strconv.ParseInt(s, 10, 64); return n }

func watchEnded(what string, w *store.Watch) error {
	if err := w.Err(); err != nil {
		return fmt.Errorf("%s watch: %w", what, err)
	}
	return fmt.Errorf("%s watch ended", what)
}

func (st *state) putPod(p *model.Pod) {
	ns := st.pods[p.Metadata.Namespace]
	if ns == nil {
		ns = map[string]*model.Pod{}
		st.pods[p.Metadata.Namespace] = ns
	}
	ns[p.Metadata.Name] = p
}

func (st *state) applyService(ev store.WatchEvent, dirty map[string]bool) {
	var s model.Service
	if json.Unmarshal(ev.Object, &s) != nil {
		return
	}
	k := key(s.Metadata.Namespace, s.Metadata.Name)
	if ev.Type == "DELETED" {
		delete(st.services, k)
	} else {
		st.services[k] = &s
	}
	dirty[k] = true
}

// applyPod marks the services that select the pod before or after the
// change: both may need it added or removed.
func (st *state) applyPod(ev store.WatchEvent, dirty map[string]bool) {
	var p model.Pod
	if json.Unmarshal(ev.Object, &p) != nil {
		return
	}
	ns := p.Metadata.Namespace
	old := st.pods[ns][p.Metadata.Name]
	if ev.Type == "DELETED" {
		delete(st.pods[ns], p.Metadata.Name)
	} else {
		st.putPod(&p)
	}
	for k, s := range st.services {
		if s.Metadata.Namespace != ns || len(s.Spec.Selector) == 0 {
			continue
		}
		if selects(s.Spec.Selector, p.Metadata.Labels) || (old != nil && selects(s.Spec.Selector, old.Metadata.Labels)) {
			dirty[k] = true
		}
	}
}

// applyEndpoints keeps the controller's copy current (its own writes come
// back here); any other change to an object is undone by recomputing it.
func (st *state) applyEndpoints(ev store.WatchEvent, dirty map[string]bool) {
	var e model.Endpoints
	if json.Unmarshal(ev.Object, &e) != nil {
		return
	}
	k := key(e.Metadata.Namespace, e.Metadata.Name)
	if cur := st.endpoints[k]; cur != nil && rv(cur.Metadata.ResourceVersion) > ev.ResourceVersion {
		return // an older event than what the controller wrote itself
	}
	if ev.Type == "DELETED" {
		delete(st.endpoints, k)
	} else {
		st.endpoints[k] = &e
	}
	dirty[k] = true
}

// sync makes the Endpoints object of service k what it should be: gone
// with its service, otherwise the computed subsets and the service's
// labels. Each write is at the version last seen.
func (c *Controller) sync(ctx context.Context, st *state, k string) error {
	svc := st.services[k]
	cur := st.endpoints[k]
	if svc == nil {
		if cur == nil {
			return nil
		}
		_, err := c.Store.Endpoints().Delete(ctx, cur.Metadata.Namespace, cur.Metadata.Name, cur.Metadata.ResourceVersion)
		if err == nil || errors.Is(err, store.ErrNotFound) {
			delete(st.endpoints, k)
			return nil
		}
		return c.refresh(ctx, st, k, cur.Metadata.Namespace, cur.Metadata.Name, err)
	}
	pods := make([]*model.Pod, 0, len(st.pods[svc.Metadata.Namespace]))
	for _, p := range st.pods[svc.Metadata.Namespace] {
		pods = append(pods, p)
	}
	want := Compute(svc, pods)
	if cur != nil && sameSubsets(cur.Subsets, want) && maps.Equal(cur.Metadata.Labels, svc.Metadata.Labels) {
		return nil
	}
	if cur == nil {
		ep := &model.Endpoints{Metadata: model.ObjectMeta{Name: svc.Metadata.Name, Namespace: svc.Metadata.Namespace, Labels: svc.Metadata.Labels},
			EndpointsData: model.EndpointsData{Subsets: want}}
		ep.APIVersion, ep.Kind = model.APIVersion, model.KindEndpoints
		if err := c.Store.Endpoints().Create(ctx, ep); err != nil {
			return c.refresh(ctx, st, k, svc.Metadata.Namespace, svc.Metadata.Name, err)
		}
		st.endpoints[k] = ep
		return nil
	}
	next := *cur
	next.Metadata.Labels = svc.Metadata.Labels
	next.Subsets = want
	if err := c.Store.Endpoints().Update(ctx, &next); err != nil {
		return c.refresh(ctx, st, k, cur.Metadata.Namespace, cur.Metadata.Name, err)
	}
	st.endpoints[k] = &next
	return nil
}

// refresh re-reads an Endpoints object after a write lost a race (a
// conflict, or it already existed), so the next try starts from it.
func (c *Controller) refresh(ctx context.Context, st *state, k, ns, name string, cause error) error {
	if !errors.Is(cause, store.ErrConflict) && !errors.Is(cause, store.ErrAlreadyExists) {
		return cause
	}
	got, err := c.Store.Endpoints().Get(ctx, ns, name)
	switch {
	case errors.Is(err, store.ErrNotFound):
		delete(st.endpoints, k)
	case err != nil:
		return err
	default:
		st.endpoints[k] = got
	}
	return cause
}

func sameSubsets(a, b []model.EndpointSubset) bool {
	x, _ := json.Marshal(normalise(a))
	y, _ := json.Marshal(normalise(b))
	return bytes.Equal(x, y)
}

func normalise(s []model.EndpointSubset) []model.EndpointSubset {
	if s == nil {
		return []model.EndpointSubset{}
	}
	return s
}
