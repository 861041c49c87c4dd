package workflows

import (
	"errors"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/zonewright/zonewright/internal/controlapi"
	"github.com/zonewright/zonewright/workflows/podcontract"
)

// NodeHealth's public contract: its name, ID and the signal that makes it
// look at the node now (sent after a forced delete, so it ends at once).
const (
	NodeHealthWorkflowName = "NodeHealth"
	SignalNodeCheck        = "check"
	QueryNodeHealth        = "status"
)

// NodeWorkflowID is the stable, readable ID of a node's health workflow.
func NodeWorkflowID(node string) string { return "node/" + node }

// Node health defaults, as Kubernetes' node lifecycle controller has them
// (40 s grace; 5 min before pods are evicted).
const (
	DefaultNodeGracePeriod     = 40 * time.Second
	DefaultNodeEvictionTimeout = 5 * time.Minute
)

// Search attribute values of ZwPhase for nodes.
const (
	NodePhaseReady    = "Ready"
	NodePhaseNotReady = "NotReady"
)

// NodeHealthInput starts a node's health workflow; State carries what it
// knows across continue-as-new.
type NodeHealthInput struct {
	Node string
	// GracePeriod without a heartbeat makes the node NotReady.
	GracePeriod time.Duration
	// EvictionTimeout after NotReady evicts the node's pods.
	EvictionTimeout time.Duration
	State           *NodeHealthState `json:",omitempty"`
	// HistoryLimit overrides when to continue-as-new (tests); 0: 2000 events.
	HistoryLimit int `json:",omitempty"`
}

// NodeHealthState is the node's health as the workflow last saw it.
type NodeHealthState struct {
	NotReady      bool
	NotReadySince time.Time `json:",omitempty"`
	Evicted       bool
	// EvictionsHeld: the eviction is due but held, most nodes being
	// NotReady (the EvictionHeld event was recorded).
	EvictionsHeld bool `json:",omitempty"`
	Evictions     int  // pods evicted, over the node's life
	Transitions   int  // Ready<->NotReady, over the node's life
}

// NodeHealth watches one node's heartbeats: no heartbeat for the grace
// period makes it NotReady (condition Unknown, unreachable taint); after
// the eviction timeout its pods are evicted once; heartbeats resuming make
// it Ready again. While the node is Ready it sleeps until the control
// plane's sweep says the heartbeat went stale (signal check), and ends
// when the node's row is deleted.
func NodeHealth(ctx workflow.Context, in NodeHealthInput) error {
	w := &nodeHealth{in: in, st: NodeHealthState{}}
	if in.State != nil {
		w.st = *in.State
	}
	if w.in.GracePeriod <= 0 {
		w.in.GracePeriod = DefaultNodeGracePeriod
	}
	if w.in.EvictionTimeout <= 0 {
		w.in.EvictionTimeout = DefaultNodeEvictionTimeout
	}
	if err := w.setup(ctx); err != nil {
		return err
	}
	return w.run(ctx)
}

type nodeHealth struct {
	in    NodeHealthInput
	st    NodeHealthState
	check bool
}

func (w *nodeHealth) setup(ctx workflow.Context) error {
	if err := workflow.SetQueryHandler(ctx, QueryNodeHealth, func() (NodeHealthState, error) { return w.st, nil }); err != nil {
		return err
	}
	workflow.Go(ctx, func(ctx workflow.Context) {
		ch := workflow.GetSignalChannel(ctx, SignalNodeCheck)
		for {
			ch.Receive(ctx, nil)
			w.check = true
		}
	})
	return nil
}

func (w *nodeHealth) run(ctx workflow.Context) error {
	ctx = workflow.WithActivityOptions(ctx, controlOptions)
	phase := NodePhaseReady
	if w.st.NotReady {
		phase = NodePhaseNotReady
	}
	if err := upsert(ctx, SearchAttrNode, w.in.Node, SearchAttrPhase, phase); err != nil {
		return err
	}
	limit := w.in.HistoryLimit
	if limit <= 0 {
		limit = 2000
	}
	for loops := 1; ; loops++ {
		// A loop adds about ten events (a look, maybe a mark, a timer);
		// the estimate also holds where the history length is not reported.
		info := workflow.GetInfo(ctx)
		if info.GetCurrentHistoryLength() > limit || loops*10 > limit || info.GetContinueAsNewSuggested() {
			st := w.st
			return workflow.NewContinueAsNewError(ctx, NodeHealth, NodeHealthInput{Node: w.in.Node, GracePeriod: w.in.GracePeriod,
				EvictionTimeout: w.in.EvictionTimeout, State: &st, HistoryLimit: w.in.HistoryLimit})
		}
		w.check = false // this look answers any check asked so far
		var obs controlapi.NodeObservation
		if err := workflow.ExecuteActivity(ctx, ctl.ObserveNode, w.in.Node).Get(ctx, &obs); err != nil {
			return err
		}
		if !obs.Found {
			return nil // the node was deleted
		}
		sleep, again, err := w.act(ctx, obs)
		if err != nil {
			return err
		}
		if again {
			continue
		}
		if _, err := workflow.AwaitWithTimeout(ctx, sleep, func() bool { return w.check }); err != nil {
			if temporal.IsCanceledError(err) {
				return nil
			}
			return err
		}
	}
}

// act takes the timings obs carries and acts on the node's heartbeat:
// marks the node Ready, or NotReady and, once the eviction timeout has
// passed, evicts its pods. sleep is how long until the next look; again:
// look again at once.
func (w *nodeHealth) act(ctx workflow.Context, obs controlapi.NodeObservation) (sleep time.Duration, again bool, err error) {
	// The timings configured now win over those this run started
	// with: a changed flag reaches every node at its next look.
	if obs.GracePeriod > 0 {
		w.in.GracePeriod = obs.GracePeriod
	}
	if obs.EvictionTimeout > 0 {
		w.in.EvictionTimeout = obs.EvictionTimeout
	}
	// While NotReady the node is looked at this often, so a returning
	// agent is noticed soon; while Ready the workflow sleeps until the
	// last heartbeat would be stale.
	recheck := min(w.in.GracePeriod, 10*time.Second)
	if fresh := obs.HeartbeatAge >= 0 && obs.HeartbeatAge < w.in.GracePeriod; fresh {
		if w.st.NotReady || obs.Tainted {
			if err := w.ready(ctx); err != nil {
				return 0, false, err
			}
		}
		// The control plane's sweep tells the workflow when the heartbeat
		// turns stale, so a healthy node costs no workflow task; the
		// workflow looks by itself only as a safety net. Before: it woke
		// just after the heartbeat would turn stale.
		if workflow.GetVersion(ctx, versionSweptNodes, workflow.DefaultVersion, 1) >= 1 {
			return NodeSafetyLook, false, nil
		}
		return w.in.GracePeriod - obs.HeartbeatAge + 100*time.Millisecond, false, nil
	}
	if !w.st.NotReady {
		marked, err := w.notReady(ctx)
		if err != nil {
			return 0, false, err
		}
		if !marked {
			return 0, true, nil // a heartbeat arrived meanwhile: look again
		}
	}
	sleep = recheck
	if !w.st.Evicted {
		left := w.st.NotReadySince.Add(w.in.EvictionTimeout).Sub(workflow.Now(ctx))
		if left <= 0 {
			if obs.Disrupted() && workflow.GetVersion(ctx, versionHoldEvictions, workflow.DefaultVersion, 1) >= 1 {
				return sleep, false, w.holdEvictions(ctx, obs)
			}
			if err := w.evict(ctx); err != nil {
				return 0, false, err
			}
		} else {
			sleep = min(sleep, left)
		}
	}
	return sleep, false, nil
}

// versionSweptNodes marks node health runs that sleep while the node is
// Ready until the control plane's sweep (controlops' NodeSweep) signals
// check, or NodeSafetyLook passes.
const versionSweptNodes = "swept-nodes"

// NodeSafetyLook is how long a Ready node's health workflow sleeps
// without a check signal: the sweep finds a stale heartbeat within
// seconds, this only bounds how late a lost node is noticed should the
// sweep fail.
const NodeSafetyLook = 10 * time.Minute

// versionHoldEvictions marks node health runs that do not evict a lost
// node's pods while most nodes are NotReady (controlapi's Disrupted).
const versionHoldEvictions = "hold-evictions-in-disruption"

// holdEvictions leaves the node's pods where they are, saying why once a
// hold; the next looks evict them when fewer nodes are NotReady.
func (w *nodeHealth) holdEvictions(ctx workflow.Context, obs controlapi.NodeObservation) error {
	if w.st.EvictionsHeld {
		return nil
	}
	in := controlapi.HoldEvictionsInput{Node: w.in.Node, NodesNotReady: obs.NodesNotReady, Nodes: obs.Nodes}
	if err := workflow.ExecuteActivity(ctx, ctl.HoldNodeEvictions, in).Get(ctx, nil); err != nil {
		return err
	}
	w.st.EvictionsHeld = true
	return nil
}

func (w *nodeHealth) notReady(ctx workflow.Context) (bool, error) {
	var res controlapi.MarkNotReadyResult
	in := controlapi.MarkNotReadyInput{Node: w.in.Node, GracePeriod: w.in.GracePeriod}
	if err := workflow.ExecuteActivity(ctx, ctl.MarkNodeNotReady, in).Get(ctx, &res); err != nil {
		return false, err
	}
	if !res.Marked {
		return false, nil
	}
	w.st.NotReady, w.st.NotReadySince, w.st.Evicted = true, workflow.Now(ctx), false
	w.st.Transitions++
	if err := upsert(ctx, SearchAttrPhase, NodePhaseNotReady); err != nil {
		return true, err
	}
	// Its pods stop looking Ready at once, as Kubernetes' MarkPodsNotReady.
	if workflow.GetVersion(ctx, versionSignalPods, workflow.DefaultVersion, 1) >= 1 {
		return true, w.signalPods(ctx, podcontract.SignalNode, func(controlapi.PodRef) any { return podcontract.NodeSignal{Node: w.in.Node, Ready: false} })
	}
	return true, nil
}

// versionSignalPods marks node health runs that tell their pods of the
// node's readiness and evict them by signalling them themselves.
const versionSignalPods = "signal-pods"

// signalPods sends a signal to the lifecycle of every unfinished pod bound
// to the node, each until it is delivered (a lifecycle that has ended
// needs none): visible in this history, retried, never half done.
func (w *nodeHealth) signalPods(ctx workflow.Context, name string, arg func(controlapi.PodRef) any) error {
	var pods []controlapi.PodRef
	if err := workflow.ExecuteActivity(ctx, ctl.ListNodePods, w.in.Node).Get(ctx, &pods); err != nil {
		return err
	}
	for attempt := 0; len(pods) > 0; attempt++ {
		if attempt > 0 {
			if err := workflow.Sleep(ctx, min(time.Second<<min(attempt-1, 5), 30*time.Second)); err != nil {
				return err
			}
		}
		futs := make([]workflow.Future, len(pods))
		for i, p := range pods {
			futs[i] = workflow.SignalExternalWorkflow(ctx, podcontract.WorkflowID(p.Namespace, p.Name), "", name, arg(p))
		}
		var failed []controlapi.PodRef
		for i, f := range futs {
			var gone *temporal.UnknownExternalWorkflowExecutionError
			if err := f.Get(ctx, nil); err != nil && !errors.As(err, &gone) {
				workflow.GetLogger(ctx).Warn("signal to a pod failed; retrying", "pod", pods[i].String(), "signal", name, "error", err)
				failed = append(failed, pods[i])
			}
		}
		pods = failed
	}
	return nil
}

func (w *nodeHealth) ready(ctx workflow.Context) error {
	if err := workflow.ExecuteActivity(ctx, ctl.MarkNodeReady, w.in.Node).Get(ctx, nil); err != nil {
		return err
	}
	wasNotReady := w.st.NotReady
	if w.st.NotReady {
		w.st.Transitions++
	}
	w.st.NotReady, w.st.NotReadySince, w.st.Evicted, w.st.EvictionsHeld = false, time.Time{}, false, false
	if err := upsert(ctx, SearchAttrPhase, NodePhaseReady); err != nil {
		return err
	}
	if wasNotReady && workflow.GetVersion(ctx, versionSignalPods, workflow.DefaultVersion, 1) >= 1 {
		return w.signalPods(ctx, podcontract.SignalNode, func(controlapi.PodRef) any { return podcontract.NodeSignal{Node: w.in.Node, Ready: true} })
	}
	return nil
}

func (w *nodeHealth) evict(ctx workflow.Context) error {
	if workflow.GetVersion(ctx, versionSignalPods, workflow.DefaultVersion, 1) >= 1 {
		n := 0
		err := w.signalPods(ctx, podcontract.SignalEvict, func(controlapi.PodRef) any {
			n++
			return podcontract.EvictSignal{Node: w.in.Node, Lost: true, Reason: podcontract.ReasonNodeLost}
		})
		if err != nil {
			return err
		}
		w.st.Evicted = true
		w.st.Evictions += n
		return nil
	}
	var n int
	if err := workflow.ExecuteActivity(ctx, ctl.EvictNodePods, controlapi.EvictInput{Node: w.in.Node, Lost: true}).Get(ctx, &n); err != nil {
		return err
	}
	w.st.Evicted = true
	w.st.Evictions += n
	return nil
}
