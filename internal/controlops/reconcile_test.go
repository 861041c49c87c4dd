package controlops_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"

	"github.com/zonewright/zonewright/internal/controlapi"
	"github.com/zonewright/zonewright/internal/controlops"
	"github.com/zonewright/zonewright/internal/devstack"
	"github.com/zonewright/zonewright/internal/model"
	"github.com/zonewright/zonewright/workflows"
	"github.com/zonewright/zonewright/workflows/podcontract"
)

// temporalCalls counts the reconciler's look at each lifecycle, refuses
// the start of one workflow ID, and fails listings when told.
type temporalCalls struct {
	client.Client
	mu        sync.Mutex
	describes int
	refuse    string
	noListing bool
}

func (c *temporalCalls) ListWorkflow(ctx context.Context, req *workflowservice.ListWorkflowExecutionsRequest) (*workflowservice.ListWorkflowExecutionsResponse, error) {
	if c.noListing {
		return nil, errors.New("operation not supported by this visibility store")
	}
	return c.Client.ListWorkflow(ctx, req)
}

func (c *temporalCalls) DescribeWorkflowExecution(ctx context.Context, id, run string) (*workflowservice.DescribeWorkflowExecutionResponse, error) {
	c.mu.Lock()
	c.describes++
	c.mu.Unlock()
	return c.Client.DescribeWorkflowExecution(ctx, id, run)
}

func (c *temporalCalls) ExecuteWorkflow(ctx context.Context, o client.StartWorkflowOptions, wf any, args ...any) (client.WorkflowRun, error) {
	if o.ID == c.refuse {
		return nil, errors.New("start refused")
	}
	return c.Client.ExecuteWorkflow(ctx, o, wf, args...)
}

func (c *temporalCalls) takeDescribes() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.describes
	c.describes = 0
	return n
}

// The reconciler compares the pod rows with one listing of the running
// lifecycles and asks about a lifecycle on its own only for a pod missing
// from it (one per pod before); a start that fails leaves the other pods'
// repairs to go on, and is reported.
func TestEnsurePodWorkflowsListsInsteadOfDescribingEveryPod(t *testing.T) {
	ctx := t.Context()
	st := openStore(t)
	tmp := devstack.StartTestTemporal(t)
	tc, err := client.Dial(client.Options{HostPort: tmp.Address(), Namespace: tmp.Namespace(),
		Logger: sdklog.NewStructuredLogger(slog.New(slog.DiscardHandler))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tc.Close)
	calls := &temporalCalls{Client: tc}
	lc := workflows.PodClient{Temporal: calls}
	const pods, withLifecycle = 200, 150
	for i := range pods {
		p := &model.Pod{Metadata: model.ObjectMeta{Name: fmt.Sprintf("p%03d", i), Namespace: model.DefaultNamespace},
			Spec: model.PodSpec{Containers: []model.Container{{Name: "a", Image: "i", Command: []string{"c"}}}}}
		model.DefaultPod(p)
		if err := st.CreatePod(ctx, p); err != nil {
			t.Fatal(err)
		}
		if i < withLifecycle {
			if err := lc.Start(ctx, controlapi.PodRef{Namespace: p.Metadata.Namespace, Name: p.Metadata.Name, UID: p.Metadata.UID}); err != nil {
				t.Fatal(err)
			}
		}
	}
	listed := func(want int) {
		t.Helper()
		deadline := time.Now().Add(time.Minute)
		for {
			running, err := lc.RunningPods(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if len(running) == want {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("the visibility store lists %d running lifecycles; want %d", len(running), want)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	listed(withLifecycle)
	ctl := controlops.NewControl(st, lc)
	calls.takeDescribes()
	calls.refuse = podcontract.WorkflowID("default", "p160")
	started, err := ctl.EnsurePodWorkflows(ctx, 0)
	if started != pods-withLifecycle-1 || err == nil || !strings.Contains(err.Error(), "default/p160") {
		t.Fatalf("first run started %d (want %d) and returned %v (want the refused start of default/p160)", started, pods-withLifecycle-1, err)
	}
	if n := calls.takeDescribes(); n != pods-withLifecycle {
		t.Fatalf("first run described %d lifecycles; want %d, the pods missing from the listing", n, pods-withLifecycle)
	}
	listed(pods - 1)
	calls.refuse = ""
	begin := time.Now()
	started, err = ctl.EnsurePodWorkflows(ctx, 0)
	took := time.Since(begin)
	if started != 1 || err != nil {
		t.Fatalf("second run started %d and returned %v; want the one refused before", started, err)
	}
	n := calls.takeDescribes()
	if n != 1 {
		t.Fatalf("second run described %d lifecycles; want 1", n)
	}
	t.Logf("%d pods: a run takes %v with %d describe(s) (one per pod before: %d)", pods, took, n, pods)

	// A visibility store that cannot list: every pod is looked at.
	late := &model.Pod{Metadata: model.ObjectMeta{Name: "late", Namespace: model.DefaultNamespace},
		Spec: model.PodSpec{Containers: []model.Container{{Name: "a", Image: "i", Command: []string{"c"}}}}}
	model.DefaultPod(late)
	if err := st.CreatePod(ctx, late); err != nil {
		t.Fatal(err)
	}
	calls.noListing = true
	started, err = ctl.EnsurePodWorkflows(ctx, 0)
	if started != 1 || err != nil {
		t.Fatalf("without a listing the run started %d and returned %v; want the late pod's", started, err)
	}
	if n := calls.takeDescribes(); n != pods+1 {
		t.Fatalf("without a listing the run described %d lifecycles; want every pod's, %d", n, pods+1)
	}
}

// deliveries stands for the pod lifecycles, all running: it records the
// terminate signals, and refuses them while down (a control plane
// stopping between a deletion's stamp and its signal).
type deliveries struct {
	noForcedEnds
	mu     sync.Mutex
	down   bool
	graces map[string]int64 // pod name: the grace period signalled
}

func (d *deliveries) Start(context.Context, controlapi.PodRef) error        { return nil }
func (d *deliveries) Running(context.Context, string, string) (bool, error) { return true, nil }
func (d *deliveries) RunningPods(context.Context) (map[controlapi.PodName]bool, error) {
	return nil, nil // the reconciler asks Running for each
}

func (d *deliveries) Signal(_ context.Context, _, name, signal string, arg any) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.down {
		return errors.New("Temporal is not answering")
	}
	if signal == podcontract.SignalTerminate {
		d.graces[name] = grace(arg.(podcontract.TerminateSignal).GracePeriodSeconds)
	}
	return nil
}

func (d *deliveries) take() map[string]int64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	g := d.graces
	d.graces = map[string]int64{}
	return g
}

func grace(g *int64) int64 {
	if g == nil {
		return -1
	}
	return *g
}

// A deletion stamped on the row whose signal never reached the lifecycle
// (the control plane stopped between the two) is delivered by the
// reconciler once it has settled, with the deletion's grace period; one
// the lifecycle has acted on (reason Terminating), or too young to tell,
// is left alone. Before, such a pod ran on, Terminating for ever, and a
// rollout through a control-plane restart never ended. Make
// deletionUnheard return false to see it fail.
func TestADeletionItsLifecycleNeverHeardIsRedelivered(t *testing.T) {
	ctx := t.Context()
	st := openStore(t)
	lc := &deliveries{graces: map[string]int64{}}
	ctl := controlops.NewControl(st, lc)
	for _, name := range []string{"lost", "heard", "young"} {
		p := &model.Pod{Metadata: model.ObjectMeta{Name: name, Namespace: model.DefaultNamespace},
			Spec: model.PodSpec{Containers: []model.Container{{Name: "a", Image: "i", Command: []string{"c"}}}}}
		model.DefaultPod(p)
		p.Status.Phase = model.PodRunning
		if err := st.CreatePod(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	seven := int64(7)
	del := func(name string) {
		t.Helper()
		_, err := ctl.Pods().Delete(ctx, model.DefaultNamespace, name, controlops.PodDelete{GracePeriodSeconds: &seven})
		if lc.down != (err != nil) {
			t.Fatalf("delete %s with the lifecycles down=%v: %v", name, lc.down, err)
		}
	}
	edit := func(name string, fn func(*model.Pod)) {
		t.Helper()
		p, err := st.Pods().Get(ctx, model.DefaultNamespace, name)
		if err != nil {
			t.Fatal(err)
		}
		fn(p)
		if err := st.Pods().Update(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	del("heard")
	edit("heard", func(p *model.Pod) { p.Status.Reason = model.ReasonTerminating })
	lc.down = true
	del("lost")
	del("young")
	lc.down = false
	lc.take()
	// Stamped a minute ago: settled.
	edit("lost", func(p *model.Pod) {
		ago := p.Metadata.DeletionTimestamp.Add(-time.Minute)
		p.Metadata.DeletionTimestamp = &ago
	})

	if _, err := ctl.EnsurePodWorkflows(ctx, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	if got := lc.take(); len(got) != 1 || got["lost"] != seven {
		t.Fatalf("the reconciler signalled terminate to %v; want only lost, with its grace period of 7s", got)
	}
	if n := nodeEvents(t, st, "DeletionRedelivered"); n != 1 {
		t.Fatalf("%d DeletionRedelivered events; want 1", n)
	}
	// Once the lifecycle has acted on it, nothing more is sent.
	edit("lost", func(p *model.Pod) { p.Status.Reason = model.ReasonTerminating })
	if _, err := ctl.EnsurePodWorkflows(ctx, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	if got := lc.take(); len(got) != 0 {
		t.Fatalf("the reconciler signalled terminate to %v after the lifecycle acted on the deletion; want none", got)
	}
}
