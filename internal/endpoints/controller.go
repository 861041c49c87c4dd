package endpoints

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"maps"
	"strconv"
	"time"

	"github.com/zonewright/zonewright/internal/clusterip"
	"github.com/zonewright/zonewright/internal/informer"
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
	leader.Lead(ctx, log, "endpoints controller", func(lctx context.Context) {
		log.Info("endpoints controller leading")
		c.newInformer(log).Run(lctx)
	})
}

func sleep(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

// state is what the controller knows, from the lists and the watches,
// and the services whose Endpoints may need a write.
type state struct {
	services  map[string]*model.Service
	endpoints map[string]*model.Endpoints
	pods      map[string]map[string]*model.Pod // namespace → name → pod
	dirty     map[string]bool
}

func key(ns, name string) string { return ns + "/" + name }

// newInformer follows services, pods and endpoints, brings every Endpoints
// object up to date after each list, then recomputes the services each
// burst of changes touches. Its resync lists everything again and sweeps
// the cluster IPs of services that are gone.
func (c *Controller) newInformer(log *slog.Logger) *informer.Informer {
	st := &state{services: map[string]*model.Service{}, endpoints: map[string]*model.Endpoints{},
		pods: map[string]map[string]*model.Pod{}, dirty: map[string]bool{}}
	resync := c.Resync
	if resync <= 0 {
		resync = DefaultResync
	}
	return &informer.Informer{Name: "endpoints controller", Log: log,
		Sources: []informer.Source{
			informer.Kind(c.Store.Services(), informer.Handlers[model.Service]{
				Listed: func(ctx context.Context, svcs []model.Service) error {
					st.listServices(svcs)
					c.sweep(ctx, log)
					return nil
				},
				Changed: st.applyService}),
			informer.Kind(c.Store.Pods(), informer.Handlers[model.Pod]{Listed: st.listPods, Changed: st.applyPod}),
			informer.Kind(c.Store.Endpoints(), informer.Handlers[model.Endpoints]{Listed: st.listEndpoints, Changed: st.applyEndpoints}),
		},
		Flush: func(ctx context.Context) (bool, error) {
			for k := range st.dirty {
				if err := c.sync(ctx, st, k); err != nil {
					log.Warn("endpoints: write failed; will retry", "service", k, "err", err)
					continue
				}
				delete(st.dirty, k)
			}
			return len(st.dirty) > 0, nil
		},
		Resync: resync,
	}
}

// sweep frees the cluster IPs of services that are gone; it runs with
// every list of services, as a safety net under their deletes.
func (c *Controller) sweep(ctx context.Context, log *slog.Logger) {
	if n, err := clusterip.Sweep(ctx, c.Store.Pool()); err != nil {
		log.Warn("cluster IP sweep", "err", err)
	} else if n > 0 {
		log.Info("freed cluster IPs of services that are gone", "count", n)
	}
}

// listServices, listPods and listEndpoints replace what the controller
// knew of a kind; every service and every Endpoints object is computed
// again.
func (st *state) listServices(svcs []model.Service) {
	clear(st.services)
	for i := range svcs {
		s := &svcs[i]
		k := key(s.Metadata.Namespace, s.Metadata.Name)
		st.services[k] = s
		st.dirty[k] = true
	}
}

func (st *state) listPods(_ context.Context, pods []model.Pod) error {
	clear(st.pods)
	for i := range pods {
		st.putPod(&pods[i])
	}
	return nil
}

func (st *state) listEndpoints(_ context.Context, eps []model.Endpoints) error {
	clear(st.endpoints)
	for i := range eps {
		e := &eps[i]
		k := key(e.Metadata.Namespace, e.Metadata.Name)
		st.endpoints[k] = e
		st.dirty[k] = true
	}
	return nil
}

func (st *state) putPod(p *model.Pod) {
	ns := st.pods[p.Metadata.Namespace]
	if ns == nil {
		ns = map[string]*model.Pod{}
		st.pods[p.Metadata.Namespace] = ns
	}
	ns[p.Metadata.Name] = p
}

func (st *state) applyService(_ context.Context, ev informer.Event[model.Service]) error {
	s := ev.Object
	k := key(s.Metadata.Namespace, s.Metadata.Name)
	if ev.Type == informer.Deleted {
		delete(st.services, k)
	} else {
		st.services[k] = s
	}
	st.dirty[k] = true
	return nil
}

// applyPod marks the services that select the pod before or after the
// change: both may need it added or removed.
func (st *state) applyPod(_ context.Context, ev informer.Event[model.Pod]) error {
	p := ev.Object
	ns := p.Metadata.Namespace
	old := st.pods[ns][p.Metadata.Name]
	if ev.Type == informer.Deleted {
		delete(st.pods[ns], p.Metadata.Name)
	} else {
		st.putPod(p)
	}
	for k, s := range st.services {
		if s.Metadata.Namespace != ns || len(s.Spec.Selector) == 0 {
			continue
		}
		if selects(s.Spec.Selector, p.Metadata.Labels) || (old != nil && selects(s.Spec.Selector, old.Metadata.Labels)) {
			st.dirty[k] = true
		}
	}
	return nil
}

// applyEndpoints keeps the controller's copy current (its own writes come
// back here); any other change to an object is undone by recomputing it.
func (st *state) applyEndpoints(_ context.Context, ev informer.Event[model.Endpoints]) error {
	e := ev.Object
	k := key(e.Metadata.Namespace, e.Metadata.Name)
	if cur := st.endpoints[k]; cur != nil {
		if v, _ := strconv.ParseInt(cur.Metadata.ResourceVersion, 10, 64); v > ev.ResourceVersion {
			return nil // an older event than what the controller wrote itself
		}
	}
	if ev.Type == informer.Deleted {
		delete(st.endpoints, k)
	} else {
		st.endpoints[k] = e
	}
	st.dirty[k] = true
	return nil
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
