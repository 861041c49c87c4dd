package controlops_test

import (
	"context"
	"errors"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/zonewright/zonewright/internal/controlapi"
	"github.com/zonewright/zonewright/internal/controlops"
	"github.com/zonewright/zonewright/internal/model"
	"github.com/zonewright/zonewright/internal/pgtest"
	"github.com/zonewright/zonewright/internal/store"
	"github.com/zonewright/zonewright/internal/storetest"
	"github.com/zonewright/zonewright/workflows/podcontract"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

func openStore(t *testing.T) *store.Store { return storetest.New(t) }

func createNode(t *testing.T, st *store.Store, name string, heartbeat time.Time) {
	t.Helper()
	n := &model.Node{Metadata: model.ObjectMeta{Name: name}, Spec: model.NodeSpec{PodCIDR: "10.88.1.0/24"},
		Status: model.NodeStatus{Conditions: []model.NodeCondition{{Type: model.NodeReady, Status: model.ConditionTrue,
			Reason: "AgentReady", LastHeartbeatTime: &heartbeat, LastTransitionTime: &heartbeat}}}}
	model.DefaultNode(n)
	if err := st.Nodes().Create(context.Background(), n); err != nil {
		t.Fatal(err)
	}
}

func readyOf(t *testing.T, st *store.Store, name string) (model.NodeCondition, []model.Taint) {
	t.Helper()
	n, err := st.Nodes().Get(context.Background(), "", name)
	if err != nil {
		t.Fatal(err)
	}
	if c := n.Condition(model.NodeReady); c != nil {
		return *c, n.Spec.Taints
	}
	t.Fatalf("node %s has no Ready condition", name)
	return model.NodeCondition{}, nil
}

// nodeEvents is how many times events with reason were recorded: a
// repeated event is one row that counts them.
func nodeEvents(t *testing.T, st *store.Store, reason string) int {
	t.Helper()
	list, err := st.Events().List(context.Background(), store.ListOptions{FieldSelector: "reason=" + reason})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range list.Items {
		n += e.Count
	}
	return n
}

// The mark is made once: the transition time and the event do not repeat,
// a fresh heartbeat is never overwritten, and the agent's concurrent
// writes (conflicts) are read again rather than lost or failing the mark.
func TestMarkNodeNotReadyAndReady(t *testing.T) {
	st := openStore(t)
	ctx := context.Background()
	ctl := controlops.NewControl(st, nil)
	createNode(t, st, "n1", time.Now().Add(-time.Minute))

	// An agent-like writer edits the same row meanwhile.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			_ = controlops.UpdateNode(ctx, st, "n1", func(n *model.Node, _ time.Time) bool {
				if n.Metadata.Annotations == nil {
					n.Metadata.Annotations = map[string]string{}
				}
				n.Metadata.Annotations["writes"] = time.Now().String()
				return true
			})
		}
	}()
	res, err := ctl.MarkNodeNotReady(ctx, controlapi.MarkNotReadyInput{Node: "n1", GracePeriod: 40 * time.Second})
	close(stop)
	wg.Wait()
	if err != nil || !res.Marked || !res.Changed {
		t.Fatalf("mark a stale node: %+v %v", res, err)
	}
	cond, taints := readyOf(t, st, "n1")
	if cond.Status != model.ConditionUnknown || cond.Reason != controlops.ReasonNodeStatusUnknown || cond.LastTransitionTime == nil ||
		time.Since(*cond.LastTransitionTime) > time.Minute/2 {
		t.Fatalf("Ready after the mark: %+v", cond)
	}
	if len(taints) != 1 || taints[0].Key != controlops.TaintUnreachable || taints[0].Effect != model.TaintNoSchedule {
		t.Fatalf("taints after the mark: %+v", taints)
	}
	first := *cond.LastTransitionTime

	res, err = ctl.MarkNodeNotReady(ctx, controlapi.MarkNotReadyInput{Node: "n1", GracePeriod: 40 * time.Second})
	if err != nil || !res.Marked || res.Changed {
		t.Fatalf("second mark: %+v %v; want marked, nothing changed", res, err)
	}
	cond, taints = readyOf(t, st, "n1")
	if !cond.LastTransitionTime.Equal(first) || len(taints) != 1 || nodeEvents(t, st, "NodeNotReady") != 1 {
		t.Fatalf("a second mark moved the transition time (%v, was %v), added a taint (%d) or an event (%d)",
			cond.LastTransitionTime, first, len(taints), nodeEvents(t, st, "NodeNotReady"))
	}

	// The agent is back: Ready=True with a fresh heartbeat, as it writes it.
	_ = controlops.UpdateNode(ctx, st, "n1", func(n *model.Node, now time.Time) bool {
		n.Status.Conditions = []model.NodeCondition{{Type: model.NodeReady, Status: model.ConditionTrue, LastHeartbeatTime: &now, LastTransitionTime: &now}}
		return true
	})
	if res, err = ctl.MarkNodeNotReady(ctx, controlapi.MarkNotReadyInput{Node: "n1", GracePeriod: 40 * time.Second}); err != nil || res.Marked {
		t.Fatalf("a fresh heartbeat was marked NotReady: %+v %v", res, err)
	}
	if removed, err := ctl.MarkNodeReady(ctx, "n1"); err != nil || !removed {
		t.Fatalf("MarkNodeReady: %t %v; want the taint removed", removed, err)
	}
	if _, taints = readyOf(t, st, "n1"); len(taints) != 0 {
		t.Fatalf("taints after Ready: %+v", taints)
	}
	if removed, _ := ctl.MarkNodeReady(ctx, "n1"); removed || nodeEvents(t, st, "NodeReady") != 1 {
		t.Fatal("a second MarkNodeReady removed something or recorded another event")
	}
	if obs, err := ctl.ObserveNode(ctx, "gone"); err != nil || obs.Found {
		t.Fatalf("ObserveNode of a missing node: %+v %v", obs, err)
	}
}

// A control plane that has just started gives every node a fresh grace
// period: a heartbeat older than the grace period, missed while no
// control plane was there to hear it, does not make the node NotReady.
func TestAControlPlaneJustStartedGivesNodesAFreshGracePeriod(t *testing.T) {
	st := openStore(t)
	ctx := context.Background()
	ctl := controlops.NewControl(st, nil)
	ctl.HearingSince = time.Now()
	createNode(t, st, "n1", time.Now().Add(-time.Minute))
	const grace = 40 * time.Second
	if obs, err := ctl.ObserveNode(ctx, "n1"); err != nil || obs.HeartbeatAge >= grace {
		t.Fatalf("observed %+v %v; want a heartbeat age within the grace period", obs, err)
	}
	if res, err := ctl.MarkNodeNotReady(ctx, controlapi.MarkNotReadyInput{Node: "n1", GracePeriod: grace}); err != nil || res.Marked {
		t.Fatalf("marked %+v %v; want the node left Ready", res, err)
	}
	ctl.HearingSince = time.Now().Add(-time.Hour)
	if res, err := ctl.MarkNodeNotReady(ctx, controlapi.MarkNotReadyInput{Node: "n1", GracePeriod: grace}); err != nil || !res.Marked {
		t.Fatalf("a control plane hearing for an hour: %+v %v; want the node marked", res, err)
	}
}

// A NotReady node's observation counts the cluster's NotReady nodes (a
// Ready one's costs no count), and a held eviction says so on the node.
// (Make ObserveNode count for Ready nodes only to see it fail.)
func TestObservingANotReadyNodeCountsTheNotReadyNodes(t *testing.T) {
	st := openStore(t)
	ctx := context.Background()
	ctl := controlops.NewControl(st, nil)
	old := time.Now().Add(-time.Hour)
	for _, name := range []string{"n1", "n2", "n3"} {
		createNode(t, st, name, old)
	}
	if obs, err := ctl.ObserveNode(ctx, "n1"); err != nil || obs.Nodes != 0 || obs.NodesNotReady != 0 {
		t.Fatalf("a Ready node observed %+v %v; want no count", obs, err)
	}
	for _, name := range []string{"n1", "n2"} {
		if res, err := ctl.MarkNodeNotReady(ctx, controlapi.MarkNotReadyInput{Node: name, GracePeriod: 40 * time.Second}); err != nil || !res.Marked {
			t.Fatalf("mark %s: %+v %v", name, res, err)
		}
	}
	obs, err := ctl.ObserveNode(ctx, "n1")
	if err != nil || obs.Nodes != 3 || obs.NodesNotReady != 2 || obs.Disrupted() {
		t.Fatalf("n1 NotReady with n2 observed %+v %v; want 2 of 3 NotReady, not disrupted", obs, err)
	}
	if err := ctl.HoldNodeEvictions(ctx, controlapi.HoldEvictionsInput{Node: "n1", NodesNotReady: 3, Nodes: 3}); err != nil {
		t.Fatal(err)
	}
	list, err := st.Events().List(ctx, store.ListOptions{FieldSelector: "reason=" + controlops.ReasonEvictionHeld})
	if err != nil || len(list.Items) != 1 || list.Items[0].InvolvedObject.Name != "n1" || !strings.Contains(list.Items[0].Message, "3 of 3 nodes are NotReady") {
		t.Fatalf("events after a held eviction: %+v %v; want one on n1 with the count", list, err)
	}
	if err := ctl.HoldNodeEvictions(ctx, controlapi.HoldEvictionsInput{Node: "gone", NodesNotReady: 3, Nodes: 3}); err != nil {
		t.Fatalf("holding a deleted node's evictions: %v; want nothing to say", err)
	}
}

type signals struct {
	noForcedEnds
	mu   sync.Mutex
	sent map[string]podcontract.EvictSignal
}

func (s *signals) Start(context.Context, controlapi.PodRef) error { return nil }
func (s *signals) Running(context.Context, string, string) (bool, error) {
	return true, nil
}
func (s *signals) RunningPods(context.Context) (map[controlapi.PodName]bool, error) {
	return nil, nil
}
func (s *signals) Signal(_ context.Context, _, name, signal string, arg any) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if signal != podcontract.SignalEvict {
		return errors.New("unexpected signal " + signal)
	}
	if name == "orphan" {
		return podcontract.ErrNoLifecycle
	}
	s.sent[name] = arg.(podcontract.EvictSignal)
	return nil
}

// Eviction of a lost node marks its unfinished pods Failed/NodeLost and
// signals their lifecycles; finished pods and other nodes' pods are left
// alone; an unbound pod is Pending and unscheduled, same UID.
func TestEvictLostNodeAndUnbind(t *testing.T) {
	st := openStore(t)
	ctx := context.Background()
	sig := &signals{sent: map[string]podcontract.EvictSignal{}}
	ctl := controlops.NewControl(st, sig)
	mk := func(name, node, phase string) *model.Pod {
		p := &model.Pod{Metadata: model.ObjectMeta{Name: name, Namespace: model.DefaultNamespace},
			Spec: model.PodSpec{NodeName: node, Containers: []model.Container{{Name: "a", Image: "i", Command: []string{"c"}}}}}
		model.DefaultPod(p)
		p.Status.Phase = phase
		now := time.Now()
		p.Status.Conditions = []model.PodCondition{{Type: model.PodScheduled, Status: model.ConditionTrue, LastTransitionTime: &now}}
		if err := st.CreatePod(ctx, p); err != nil {
			t.Fatal(err)
		}
		return p
	}
	run := mk("run", "n1", model.PodRunning)
	mk("orphan", "n1", model.PodRunning)
	mk("done", "n1", model.PodFailed)
	mk("elsewhere", "n2", model.PodRunning)

	n, err := ctl.EvictNodePods(ctx, controlapi.EvictInput{Node: "n1", Lost: true})
	if err != nil || n != 2 {
		t.Fatalf("evicted %d, %v; want the 2 unfinished pods of n1", n, err)
	}
	if s, ok := sig.sent["run"]; !ok || !s.Lost || s.Node != "n1" || s.Reason != podcontract.ReasonNodeLost || len(sig.sent) != 1 {
		t.Fatalf("signals sent: %+v", sig.sent)
	}
	// Only a pod's lifecycle writes its status: eviction only tells it.
	for _, name := range []string{"run", "orphan", "done", "elsewhere"} {
		p, _ := st.Pods().Get(ctx, model.DefaultNamespace, name)
		if p.Status.Reason != "" {
			t.Fatalf("eviction wrote pod %s's status (reason %q); only its lifecycle may", name, p.Status.Reason)
		}
	}
	refs, err := ctl.ListNodePods(ctx, "n1")
	if err != nil || len(refs) != 2 {
		t.Fatalf("ListNodePods(n1) = %+v, %v; want the 2 unfinished pods", refs, err)
	}

	if err := ctl.UnbindPod(ctx, controlapi.UnbindInput{Pod: controlapi.PodRef{Namespace: "default", Name: "run", UID: run.Metadata.UID}, Message: "moving"}); err != nil {
		t.Fatal(err)
	}
	p, _ := st.Pods().Get(ctx, model.DefaultNamespace, "run")
	scheduled := ""
	for _, c := range p.Status.Conditions {
		if c.Type == model.PodScheduled {
			scheduled = c.Status
		}
	}
	if p.Spec.NodeName != "" || p.Status.Phase != model.PodPending || scheduled != model.ConditionFalse || p.Metadata.UID != run.Metadata.UID {
		t.Fatalf("after unbinding: node %q phase %s scheduled %s uid %s", p.Spec.NodeName, p.Status.Phase, scheduled, p.Metadata.UID)
	}
	// Another incarnation of the name is left alone.
	if err := ctl.UnbindPod(ctx, controlapi.UnbindInput{Pod: controlapi.PodRef{Namespace: "default", Name: "elsewhere", UID: "other"}}); err != nil {
		t.Fatal(err)
	}
	if p, _ := st.Pods().Get(ctx, model.DefaultNamespace, "elsewhere"); p.Spec.NodeName != "n2" {
		t.Fatal("UnbindPod touched another incarnation of the pod")
	}
}

// checkRecorder is a NodeHealthStarter that records the checks asked;
// a check of failFor fails.
type checkRecorder struct {
	checked []string
	failFor string
}

func (*checkRecorder) Ensure(context.Context, string) error { return nil }
func (r *checkRecorder) Check(_ context.Context, node string) error {
	if node == r.failFor {
		return errors.New("frontend unavailable")
	}
	r.checked = append(r.checked, node)
	return nil
}

// The sweep tells only the workflows of nodes whose recorded readiness no
// longer matches their heartbeats: silent yet Ready, or heard again yet
// tainted. A Ready node heard from, or one already marked, costs nothing;
// one still due is told again only after NodeRetell. (Make nodesToCheck
// return every node, or drop the retell check, to see it fail.)
func TestTheSweepTellsOnlyNodesWhoseReadinessNoLongerMatches(t *testing.T) {
	st := openStore(t)
	ctx := context.Background()
	rec := &checkRecorder{}
	ctl := controlops.NewControl(st, nil)
	ctl.NodeHealth = rec
	if _, err := (&controlops.NodeSweep{Control: ctl}).Sweep(ctx); err == nil {
		t.Fatal("a sweep without a grace period succeeded")
	}
	const grace = 40 * time.Second
	ctl.NodeGracePeriod = grace
	old := time.Now().Add(-time.Hour)
	createNode(t, st, "heard", time.Now())
	createNode(t, st, "leased", old) // its condition is old, its lease new
	createNode(t, st, "silent", old)
	createNode(t, st, "marked", old)
	createNode(t, st, "back", old)
	for _, name := range []string{"marked", "back"} {
		if res, err := ctl.MarkNodeNotReady(ctx, controlapi.MarkNotReadyInput{Node: name, GracePeriod: grace}); err != nil || !res.Marked {
			t.Fatalf("mark %s: %+v %v", name, res, err)
		}
	}
	for _, name := range []string{"leased", "back"} {
		if _, err := st.RenewNodeLease(ctx, name, name, 40); err != nil {
			t.Fatal(err)
		}
	}
	sweep := &controlops.NodeSweep{Control: ctl}
	told, err := sweep.Sweep(ctx)
	slices.Sort(rec.checked)
	if err != nil || told != 2 || !slices.Equal(rec.checked, []string{"back", "silent"}) {
		t.Fatalf("the sweep told %d (%v), %v; want back and silent", told, rec.checked, err)
	}
	// Still due a sweep later: not told again yet.
	rec.checked = nil
	if told, err := sweep.Sweep(ctx); err != nil || told != 0 || len(rec.checked) != 0 {
		t.Fatalf("the next sweep told %d (%v), %v; want none within %s", told, rec.checked, err, controlops.NodeRetell)
	}

	// A signal that fails holds back no other node's, and is tried again
	// at the next sweep.
	sweep, rec.failFor = &controlops.NodeSweep{Control: ctl}, "back"
	if told, err := sweep.Sweep(ctx); err == nil || told != 1 || !slices.Equal(rec.checked, []string{"silent"}) {
		t.Fatalf("with back's signal failing the sweep told %d (%v), %v; want silent told and an error", told, rec.checked, err)
	}
	rec.checked, rec.failFor = nil, ""
	if told, err := sweep.Sweep(ctx); err != nil || told != 1 || !slices.Equal(rec.checked, []string{"back"}) {
		t.Fatalf("after back's failed signal the sweep told %d (%v), %v; want back", told, rec.checked, err)
	}
}
