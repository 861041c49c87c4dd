package scheduler

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/zonewright/zonewright/internal/model"
	"github.com/zonewright/zonewright/internal/pglock"
	"github.com/zonewright/zonewright/internal/store"
)

// Scheduler places pods recorded in the store.
type Scheduler struct {
	Store *store.Store
	// turn keeps this process to one connection waiting on the scheduling
	// lock, so waiters never starve the lock holder of pool connections;
	// a waiter whose context ends stops waiting.
	once sync.Once
	turn chan struct{}
	// Capacity is the cluster-wide capacity map; nil: no limits.
	Capacity Capacity
	// view follows the nodes and what the bound pods request. Only the
	// scheduling lock's holder touches it.
	view view
	// queue holds the placements asked for in this process and not yet
	// begun; placing says a round is under way, which takes them next.
	mu      sync.Mutex
	queue   []*placement
	placing bool
	// Rounds counts the holds of the scheduling lock that placed pods.
	Rounds atomic.Int64
}

// placement is one pod to place and where its caller waits for the
// decision.
type placement struct {
	ctx      context.Context
	ns, name string
	done     chan outcome // buffered: the round never waits on a caller
}

type outcome struct {
	d   Decision
	err error
}

// MaxRound bounds the placements of one round: the view is read again,
// and other replicas get the lock, between rounds.
const MaxRound = 64

// wait takes this process's turn at the scheduling lock.
func (s *Scheduler) wait(ctx context.Context) (done func(), err error) {
	s.once.Do(func() { s.turn = make(chan struct{}, 1) })
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	select {
	case s.turn <- struct{}{}:
		return func() { <-s.turn }, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// lock takes the scheduling lock, after this process's turn, on a
// connection of its own; unlock gives back all three.
func (s *Scheduler) lock(ctx context.Context) (conn *pgxpool.Conn, unlock func(), err error) {
	done, err := s.wait(ctx)
	if err != nil {
		return nil, nil, err
	}
	conn, err = s.Store.Pool().Acquire(ctx)
	if err != nil {
		done()
		return nil, nil, fmt.Errorf("%w: %v", store.ErrUnavailable, err)
	}
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock($1)", pglock.Scheduling); err != nil {
		conn.Release()
		done()
		return nil, nil, err
	}
	return conn, func() {
		conn.Exec(context.WithoutCancel(ctx), "SELECT pg_advisory_unlock($1)", pglock.Scheduling) //nolint:errcheck // the session ends the lock anyway
		conn.Release()
		done()
	}, nil
}

// Schedule binds the pod to the best node, or reports why none fits. It is
// idempotent: a pod already bound keeps its node.
//
// Placements asked for at once share a round: one hold of the scheduling
// lock and one reading of the changes since the last, for up to MaxRound
// pods in the order asked. Each placement taking the lock and reading the
// changes for itself made a burst of a thousand pods queue for minutes,
// each wait ending in its caller's timeout and a retry.
func (s *Scheduler) Schedule(ctx context.Context, ns, name string) (Decision, error) {
	if err := ctx.Err(); err != nil {
		return Decision{}, err
	}
	p := &placement{ctx: ctx, ns: ns, name: name, done: make(chan outcome, 1)}
	s.mu.Lock()
	s.queue = append(s.queue, p)
	if !s.placing {
		s.placing = true
		go s.rounds()
	}
	s.mu.Unlock()
	select {
	case o := <-p.done:
		return o.d, o.err
	case <-ctx.Done():
		return Decision{}, ctx.Err()
	}
}

// rounds places the queued pods, a round at a time, until none is left.
func (s *Scheduler) rounds() {
	for {
		s.mu.Lock()
		n := min(len(s.queue), MaxRound)
		round := s.queue[:n:n]
		s.queue = s.queue[n:]
		if n == 0 {
			s.placing = false
		}
		s.mu.Unlock()
		if n == 0 {
			return
		}
		s.round(round)
	}
}

// round places the pods of one round whose callers still wait, under one
// hold of the lock; it stops waiting for the lock once none does.
func (s *Scheduler) round(round []*placement) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var waiting atomic.Int64
	waiting.Store(int64(len(round)))
	for _, p := range round {
		stop := context.AfterFunc(p.ctx, func() {
			if waiting.Add(-1) == 0 {
				cancel()
			}
		})
		defer stop()
	}
	conn, unlock, err := s.lock(ctx)
	if err == nil {
		defer unlock()
		s.Rounds.Add(1)
		err = s.refresh(ctx)
	}
	rs := &roundState{conn: conn, batch: true}
	if err == nil {
		rs.pods, err = s.readPods(ctx, round)
	}
	var binds []bind
	for _, p := range round {
		switch {
		case p.ctx.Err() != nil:
			// Its caller has gone.
		case err != nil:
			p.done <- outcome{err: err}
		default:
			d, pod, err := s.schedule(p.ctx, rs, p.ns, p.name)
			if pod != nil {
				binds = append(binds, bind{p, d, pod})
				continue
			}
			p.done <- outcome{d, err}
		}
	}
	s.bindAll(ctx, rs, binds)
}

// roundState is what a round's placements share: the lock's connection,
// its pods read at once (each taken by its first look), and the claims'
// sizes by node, read once until a placement binds a claim.
type roundState struct {
	conn       *pgxpool.Conn
	pods       map[string]*model.Pod
	claimBytes map[string]int64 // nil: read it
	// batch leaves the bindings it can to bindAll.
	batch bool
}

// readPods reads the pods of a round in one query, by "namespace/name".
func (s *Scheduler) readPods(ctx context.Context, round []*placement) (map[string]*model.Pod, error) {
	namespaces, names := make([]string, len(round)), make([]string, len(round))
	for i, p := range round {
		namespaces[i], names[i] = p.ns, p.name
	}
	return s.Store.Pods().GetMany(ctx, namespaces, names)
}

// pod is the round's reading of ns/name the first time, then a fresh one.
func (rs *roundState) pod(ctx context.Context, st *store.Store, ns, name string) (*model.Pod, error) {
	if p, ok := rs.pods[ns+"/"+name]; ok {
		delete(rs.pods, ns+"/"+name)
		return p, nil
	}
	return st.Pods().Get(ctx, ns, name)
}

// bind is a placement decided in a round, its pod's binding to be
// written with the round's others.
type bind struct {
	p   *placement
	d   Decision
	pod *model.Pod
}

// bindAll writes the round's bindings in one transaction. A pod that
// changed meanwhile (a label edit) is placed again on its own.
func (s *Scheduler) bindAll(ctx context.Context, rs *roundState, binds []bind) {
	if len(binds) == 0 {
		return
	}
	pods := make([]*model.Pod, len(binds))
	for i, b := range binds {
		pods[i] = b.pod
	}
	failed, err := s.Store.Pods().UpdateMany(ctx, pods)
	for i, b := range binds {
		switch {
		case err != nil:
			s.view.dropPod(b.pod.Metadata.UID)
			b.p.done <- outcome{err: err}
		case failed[i] != nil:
			s.view.dropPod(b.pod.Metadata.UID)
			rs.batch = false
			d, _, err := s.schedule(b.p.ctx, rs, b.p.ns, b.p.name)
			b.p.done <- outcome{d, err}
		default:
			b.p.done <- outcome{d: b.d}
		}
	}
}

// schedule places one pod of a round, the lock held and the view read.
// With rs.batch, the binding of a pod without claims or capacity limits
// is not written but returned, counted in the view already, for bindAll.
func (s *Scheduler) schedule(ctx context.Context, rs *roundState, ns, name string) (Decision, *model.Pod, error) {
	for {
		pod, err := rs.pod(ctx, s.Store, ns, name)
		if err != nil {
			return Decision{}, nil, err
		}
		if pod.Spec.NodeName != "" && hasCondition(pod, model.PodScheduled) {
			d, again, err := s.keepNode(ctx, pod)
			if again {
				continue
			}
			return d, nil, err
		}
		pc, why, err := s.claims(ctx, pod)
		if err != nil || why != "" {
			return Decision{Message: why, Cloning: pc.copying}, nil, err
		}
		// Checked under the scheduling lock, so two placements never take
		// the last slot twice.
		if why, err := s.Capacity.full(ctx, rs.conn.Conn(), pod); err != nil || why != "" {
			return Decision{Message: why, Reason: ReasonCapacityExceeded}, nil, err
		}
		if rs.claimBytes == nil {
			if rs.claimBytes, err = s.claimBytes(ctx, rs.conn.Conn()); err != nil {
				return Decision{}, nil, err
			}
		}
		d := s.place(pod, pc, rs.claimBytes)
		if d.Node == "" {
			return d, nil, nil
		}
		if len(pc.claims) > 0 {
			rs.claimBytes = nil // its claims count on their node from now on
		}
		// The claims first: a crash before the pod is bound leaves them on
		// the node the next placement then picks.
		if d.Claims, err = s.bindClaims(ctx, pod, pc, d.Node); errors.Is(err, store.ErrConflict) {
			continue
		} else if err != nil {
			return Decision{}, nil, err
		}
		if wait, copying := waitForClones(d.Claims, d.Node); copying {
			// The pod stays unbound: it is placed again, on the claim's
			// node, once the copy is there.
			return wait, nil, nil
		}
		now := time.Now().UTC()
		pod.Spec.NodeName = d.Node
		model.SetCondition(&pod.Status.Conditions, model.PodCondition{Type: model.PodScheduled, Status: model.ConditionTrue}, now)
		// The round's next placements count it; reading its change later
		// finds it applied.
		s.view.bind(pod.Metadata.UID, d.Node, PodRequests(pod))
		// The capacity map counts the pods bound in the database, so a pod
		// under a limit is bound before the next one is placed.
		if rs.batch && len(pc.claims) == 0 && !s.Capacity.limits(pod) {
			return d, pod, nil
		}
		if err = s.Store.Pods().Update(ctx, pod); err != nil {
			s.view.dropPod(pod.Metadata.UID)
		}
		if errors.Is(err, store.ErrConflict) {
			continue // the pod changed under us (a label edit): read it again
		}
		return d, nil, err
	}
}

// keepNode is the decision for a pod already bound: its node, once its
// claims are bound there too. again: a claim changed under us, read the
// pod again.
func (s *Scheduler) keepNode(ctx context.Context, pod *model.Pod) (d Decision, again bool, err error) {
	pc, why, err := s.claims(ctx, pod)
	if err == nil && why == "" && pc.node != "" && pc.node != pod.Spec.NodeName {
		why = fmt.Sprintf("the pod is bound to node %s but its claims' data is on node %s", pod.Spec.NodeName, pc.node)
	}
	if err != nil || why != "" {
		return Decision{Message: why, Cloning: pc.copying}, false, err
	}
	bound, err := s.bindClaims(ctx, pod, pc, pod.Spec.NodeName)
	if errors.Is(err, store.ErrConflict) {
		return Decision{}, true, nil
	}
	if err != nil {
		return Decision{}, false, err
	}
	if d, copying := waitForClones(bound, pod.Spec.NodeName); copying {
		return d, false, nil
	}
	return Decision{Node: pod.Spec.NodeName, Claims: bound}, false, nil
}

// place picks the pod's node among the cluster's (none: d.Node empty,
// d says why), its claims' node if their data is on one.
func (s *Scheduler) place(pod *model.Pod, pc podClaims, claimBytes map[string]int64) Decision {
	nodes, used := s.cluster(pod.Metadata.UID)
	var newClaimBytes int64
	for _, c := range pc.claims {
		if c.Status.NodeName == "" {
			newClaimBytes += model.ClaimBytes(c)
		}
	}
	// A clone goes to its snapshot's node when the pod fits there (a
	// zfs clone, instant); elsewhere its data is copied first.
	pin := pc.node
	if pin == "" {
		pin = pc.cloneNode()
	}
	candidates := make([]Candidate, len(nodes))
	for i, n := range nodes {
		name := n.Metadata.Name
		candidates[i] = Candidate{Node: n, Used: used[name], ClaimBytes: claimBytes[name], NewClaimBytes: newClaimBytes}
		if pin != "" && name != pin {
			candidates[i].Excluded = ReasonVolumeNode
		}
	}
	d := Place(pod, candidates)
	if d.Node == "" && pc.node == "" && pin != "" {
		for i := range candidates {
			candidates[i].Excluded = ""
		}
		d = Place(pod, candidates)
	}
	return d
}

func hasCondition(p *model.Pod, typ string) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == typ && c.Status == model.ConditionTrue {
			return true
		}
	}
	return false
}

// podClaims are a pod's claims and where their data is.
type podClaims struct {
	claims []*model.PersistentVolumeClaim
	// node holds the bound claims' data; empty while none is bound.
	node string
	// sources maps each unbound clone (claim UID) to the node holding
	// its snapshot.
	sources map[string]string
	// copying names the claims whose snapshots' data is being copied.
	copying []string
}

// cloneNode is the node of the first unbound clone's snapshot: where the
// pod goes if it can, so the clone is made there by ZFS at once.
func (pc *podClaims) cloneNode() string {
	for _, c := range pc.claims {
		if n := pc.sources[c.Metadata.UID]; n != "" {
			return n
		}
	}
	return ""
}

// claims reads the pod's claims and the node holding their data, if
// any. why says what keeps the pod from being placed: a claim missing,
// being deleted, of the other volume mode, or claims bound to two nodes.
func (s *Scheduler) claims(ctx context.Context, pod *model.Pod) (pc podClaims, why string, err error) {
	mode := model.VolumeModeOf(&pod.Spec)
	for _, name := range pod.Spec.ClaimNames() {
		c, err := s.Store.Claims().Get(ctx, pod.Metadata.Namespace, name)
		if errors.Is(err, store.ErrNotFound) {
			return pc, fmt.Sprintf("persistentvolumeclaim %q not found", name), nil
		}
		if err != nil {
			return pc, "", err
		}
		if c.Metadata.DeletionTimestamp != nil {
			return pc, fmt.Sprintf("persistentvolumeclaim %q is being deleted", name), nil
		}
		if c.Status.NodeName != "" && c.Mode() != mode {
			return pc, model.VolumeModeConflict(name, c.Mode()), nil
		}
		if c.Moving() {
			// Its data is on its way to another node: the pod starts there,
			// once it has arrived.
			m := c.Status.Move
			if m.Phase == model.MoveCloning {
				pc.copying = append(pc.copying, name) // its workflow is woken again
				return pc, fmt.Sprintf("persistentvolumeclaim %q: its volumesnapshot's data is being copied from node %s to node %s", name, m.From, m.To), nil
			}
			to := "another node"
			if m.To != "" {
				to = "node " + m.To
			}
			return pc, fmt.Sprintf("persistentvolumeclaim %q is moving from node %s to %s with its pods", name, m.From, to), nil
		}
		if c.Status.Phase == model.ClaimLost {
			if why, err := s.findLost(ctx, name, c); err != nil || why != "" {
				return pc, why, err
			}
		}
		n := c.Status.NodeName
		if n == "" && c.Spec.DataSource != nil {
			snapNode, why, err := s.cloneSource(ctx, pod.Metadata.Namespace, name, c, mode)
			if err != nil || why != "" {
				return pc, why, err
			}
			if pc.sources == nil {
				pc.sources = map[string]string{}
			}
			pc.sources[c.Metadata.UID] = snapNode
		}
		if n != "" {
			if pc.node != "" && pc.node != n {
				return pc, fmt.Sprintf("the pod's claims are bound to two nodes, %s and %s", pc.node, n), nil
			}
			pc.node = n
		}
		pc.claims = append(pc.claims, c)
	}
	return pc, "", nil
}

// findLost binds the Lost claim c (name) again when its node is back and Ready,
// or says why the pod cannot start.
func (s *Scheduler) findLost(ctx context.Context, name string, c *model.PersistentVolumeClaim) (why string, err error) {
	// Its node may be back under the same name (registered again
	// after a deletion): the data is there, the claim Bound again.
	n, err := s.Store.Nodes().Get(ctx, "", c.Status.NodeName)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return "", err
	}
	if err != nil || !n.Ready() {
		return fmt.Sprintf("persistentvolumeclaim %q is Lost: node %s holding its data is unreachable or gone", name, c.Status.NodeName), nil
	}
	c.Status.Phase = model.ClaimBound
	return "", s.Store.Claims().Update(ctx, c)
}

// cloneSource checks the snapshot the unbound clone c (name in ns)
// restores, for a pod of volume mode mode, and returns the node holding
// it; c notes which snapshot and claim it is made from.
func (s *Scheduler) cloneSource(ctx context.Context, ns, name string, c *model.PersistentVolumeClaim, mode string) (snapNode, why string, err error) {
	// A clone of a snapshot: made on the snapshot's node, or copied
	// from there to the pod's.
	snap, err := s.Store.Snapshots().Get(ctx, ns, c.Spec.DataSource.Name)
	if errors.Is(err, store.ErrNotFound) {
		return "", fmt.Sprintf("volumesnapshot %q of persistentvolumeclaim %q not found", c.Spec.DataSource.Name, name), nil
	}
	if err != nil {
		return "", "", err
	}
	if !snap.Ready() || snap.Metadata.DeletionTimestamp != nil {
		return "", fmt.Sprintf("volumesnapshot %q of persistentvolumeclaim %q is not ready to use", snap.Metadata.Name, name), nil
	}
	if restore, _ := model.Bytes(snap.Status.RestoreSize); model.ClaimBytes(c) < restore {
		return "", fmt.Sprintf("persistentvolumeclaim %q asks for less than the restore size %s of volumesnapshot %q", name, snap.Status.RestoreSize, snap.Metadata.Name), nil
	}
	if src := snap.Spec.Source.PersistentVolumeClaimName; src != nil {
		// A zvol's snapshot restores as a zvol, a filesystem's as one.
		source, err := s.Store.Claims().Get(ctx, ns, *src)
		if err == nil && source.Metadata.UID == snap.Status.SourceClaimUID && source.Mode() != mode {
			return "", fmt.Sprintf("persistentvolumeclaim %q restores volumesnapshot %q of a %s volume: %s", name, snap.Metadata.Name, source.Mode(), modeNeeds(mode)), nil
		}
	}
	c.Status.SourceSnapshotUID, c.Status.SourceClaimUID = snap.Metadata.UID, snap.Status.SourceClaimUID
	return snap.Status.NodeName, "", nil
}

// modeNeeds says what a pod of volume mode needs.
func modeNeeds(mode string) string {
	if mode == model.VolumeBlock {
		return "a bhyve pod needs a block volume"
	}
	return "a zone pod needs a filesystem volume"
}

// bindClaims binds the claims not bound yet to node (WaitForFirstConsumer),
// in the pod's volume mode, and returns them all. A clone whose snapshot
// is on another node is marked for copying (MoveCloning). A claim changed
// meanwhile is ErrConflict.
func (s *Scheduler) bindClaims(ctx context.Context, pod *model.Pod, pc podClaims, node string) ([]BoundClaim, error) {
	var bound []BoundClaim
	for _, c := range pc.claims {
		if c.Status.NodeName == "" {
			c.Status = model.PersistentVolumeClaimStatus{Phase: model.ClaimBound, NodeName: node,
				AccessModes: c.Spec.AccessModes, Capacity: model.ResourceList{model.ResourceStorage: c.Spec.Resources.Requests[model.ResourceStorage]},
				SourceSnapshotUID: c.Status.SourceSnapshotUID, SourceClaimUID: c.Status.SourceClaimUID,
				VolumeMode: model.VolumeModeOf(&pod.Spec)}
			if from := pc.sources[c.Metadata.UID]; from != "" && from != node {
				c.Status.Move = &model.ClaimMove{Phase: model.MoveCloning, From: from, To: node,
					ID: strconv.FormatInt(time.Now().UnixNano(), 36), Snapshot: c.Status.SourceSnapshotUID}
			}
			if err := s.Store.Claims().Update(ctx, c); err != nil {
				return nil, err
			}
		} else if c.Status.NodeName != node {
			return nil, fmt.Errorf("%w: claim %q is bound to node %s, not %s", store.ErrConflict, c.Metadata.Name, c.Status.NodeName, node)
		}
		bound = append(bound, BoundClaim{Name: c.Metadata.Name, UID: c.Metadata.UID, Bytes: model.ClaimBytes(c),
			SourceSnapshotUID: c.Status.SourceSnapshotUID, SourceClaimUID: c.Status.SourceClaimUID,
			Block: c.Mode() == model.VolumeBlock, Copying: c.Moving()})
	}
	return bound, nil
}

// waitForClones is the decision for a pod some of whose claims are being
// copied to node from their snapshots' node: wait, and wake the claims'
// workflows that do the copy.
func waitForClones(claims []BoundClaim, node string) (Decision, bool) {
	var d Decision
	for _, c := range claims {
		if c.Copying {
			d.Cloning = append(d.Cloning, c.Name)
		}
	}
	if len(d.Cloning) == 0 {
		return Decision{}, false
	}
	d.Message = fmt.Sprintf("persistentvolumeclaim %q: its volumesnapshot's data is being copied to node %s", d.Cloning[0], node)
	return d, true
}

// claimBytes sums the sizes of the claims bound to each node, and of
// those moving to it.
func (s *Scheduler) claimBytes(ctx context.Context, conn *pgx.Conn) (map[string]int64, error) {
	// A claim moving counts on its destination too: its room is taken
	// there from the pre-copy on.
	rows, err := conn.Query(ctx, `SELECT status ->> 'nodeName', spec -> 'resources' -> 'requests' ->> 'storage'
		FROM persistentvolumeclaims WHERE coalesce(status ->> 'nodeName', '') <> ''
		UNION ALL SELECT status -> 'move' ->> 'to', spec -> 'resources' -> 'requests' ->> 'storage'
		FROM persistentvolumeclaims WHERE coalesce(status -> 'move' ->> 'to', '') <> ''
			AND status -> 'move' ->> 'to' <> status ->> 'nodeName'`)
	if err != nil {
		return nil, err
	}
	bound, err := pgx.CollectRows(rows, pgx.RowToStructByPos[struct{ Node, Storage string }])
	if err != nil {
		return nil, err
	}
	out := map[string]int64{}
	for _, b := range bound {
		n, _ := model.Bytes(b.Storage) // validated at admission
		out[b.Node] += n
	}
	return out, nil
}
