package scheduler_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/zonewright/zonewright/internal/model"
	"github.com/zonewright/zonewright/internal/pgtest"
	"github.com/zonewright/zonewright/internal/scheduler"
	"github.com/zonewright/zonewright/internal/store"
	"github.com/zonewright/zonewright/internal/storetest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

func node(name, cpu, mem string, ready bool, mut ...func(*model.Node)) *model.Node {
	status := model.ConditionTrue
	if !ready {
		status = model.ConditionFalse
	}
	n := &model.Node{Metadata: model.ObjectMeta{Name: name, Labels: map[string]string{}},
		Status: model.NodeStatus{
			Allocatable: model.ResourceList{"cpu": cpu, "memory": mem, "pods": "110"},
			Conditions:  []model.NodeCondition{{Type: model.NodeReady, Status: status}},
			NodeInfo:    model.NodeInfo{ZoneBrands: []string{"sparse", "lx"}},
		}}
	for _, m := range mut {
		m(n)
	}
	return n
}

func pod(name, cpu, mem string, mut ...func(*model.Pod)) *model.Pod {
	p := &model.Pod{Metadata: model.ObjectMeta{Name: name, Namespace: "default"},
		Spec: model.PodSpec{Containers: []model.Container{{Name: "a", Image: "i", Command: []string{"c"},
			Resources: model.ResourceRequirements{Requests: model.ResourceList{"cpu": cpu, "memory": mem}}}}}}
	model.DefaultPod(p)
	for _, m := range mut {
		m(p)
	}
	return p
}

func TestFiltersAndTheirReasons(t *testing.T) {
	cands := []scheduler.Candidate{
		{Node: node("down", "8", "8Gi", false)},
		{Node: node("cordoned", "8", "8Gi", true, func(n *model.Node) { n.Spec.Unschedulable = true })},
		{Node: node("tainted", "8", "8Gi", true, func(n *model.Node) {
			n.Spec.Taints = []model.Taint{{Key: "dedicated", Value: "db", Effect: model.TaintNoSchedule}}
		})},
		{Node: node("small", "250m", "8Gi", true)},
		{Node: node("nolx", "8", "8Gi", true, func(n *model.Node) { n.Status.NodeInfo.ZoneBrands = []string{"sparse"} })},
	}
	d := scheduler.Place(pod("p", "500m", "1Gi", func(p *model.Pod) { p.Spec.RuntimeClassName = "lx" }), cands)
	if d.Node != "" {
		t.Fatalf("placed on %s, want nowhere", d.Node)
	}
	for _, want := range []string{"0/5 nodes are available", "1 Insufficient cpu", "1 node(s) had untolerated taint(s)",
		"1 node(s) were not ready", "1 node(s) were unschedulable", "1 node(s) did not support the zone brand"} {
		if !strings.Contains(d.Message, want) {
			t.Errorf("message %q lacks %q", d.Message, want)
		}
	}
	tolerant := pod("p", "500m", "1Gi", func(p *model.Pod) {
		p.Spec.RuntimeClassName = "lx"
		p.Spec.Tolerations = []model.Toleration{{Key: "dedicated", Operator: "Equal", Value: "db", Effect: model.TaintNoSchedule}}
	})
	if d := scheduler.Place(tolerant, cands); d.Node != "tainted" {
		t.Fatalf("a pod tolerating the taint went to %q: %s", d.Node, d.Message)
	}
	selective := pod("p", "100m", "1Gi", func(p *model.Pod) { p.Spec.NodeSelector = map[string]string{"disk": "ssd"} })
	withSSD := append(cands, scheduler.Candidate{Node: node("ssd", "1", "2Gi", true, func(n *model.Node) { n.Metadata.Labels["disk"] = "ssd" })})
	if d := scheduler.Place(selective, withSSD); d.Node != "ssd" {
		t.Fatalf("node selector: placed on %q (%s)", d.Node, d.Message)
	}
}

func TestScoresPreferTheLeastAllocatedBalancedNode(t *testing.T) {
	cands := []scheduler.Candidate{
		{Node: node("busy", "4", "8Gi", true), Used: scheduler.Resources{MilliCPU: 3000, Memory: 6 << 30, Pods: 3}},
		{Node: node("idle", "4", "8Gi", true)},
		{Node: node("lopsided", "4", "8Gi", true), Used: scheduler.Resources{MilliCPU: 3500, Pods: 1}},
	}
	if d := scheduler.Place(pod("p", "500m", "1Gi"), cands); d.Node != "idle" {
		t.Fatalf("placed on %s, want idle", d.Node)
	}
}

// 50 pods scheduled at once onto small nodes never overcommit one.
func TestConcurrentBindingNeverOvercommits(t *testing.T) {
	st, ctx := storetest.New(t), context.Background()
	for i := range 3 {
		if err := st.Nodes().Create(ctx, node(fmt.Sprintf("n%d", i), "2", "4Gi", true)); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 50 {
		if err := st.CreatePod(ctx, pod(fmt.Sprintf("p%02d", i), "500m", "256Mi")); err != nil {
			t.Fatal(err)
		}
	}
	s := &scheduler.Scheduler{Store: st}
	var wg sync.WaitGroup
	var mu sync.Mutex
	placed, refused := 0, 0
	for i := range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			d, err := s.Schedule(ctx, "default", fmt.Sprintf("p%02d", i))
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err != nil:
				t.Error(err)
			case d.Node != "":
				placed++
			default:
				refused++
				if !strings.Contains(d.Message, "3 Insufficient cpu") {
					t.Errorf("refusal message %q", d.Message)
				}
			}
		}()
	}
	wg.Wait()
	if placed != 12 || refused != 38 {
		t.Fatalf("placed %d and refused %d; want 12 (three nodes of 2 cpu, 500m each) and 38", placed, refused)
	}
	perNode := map[string]int{}
	list, _ := st.Pods().List(ctx, store.ListOptions{})
	for _, p := range list.Items {
		if p.Spec.NodeName != "" {
			perNode[p.Spec.NodeName]++
		}
	}
	for n, count := range perNode {
		if count > 4 {
			t.Errorf("node %s holds %d pods of 500m on 2 cpu", n, count)
		}
	}
	// Binding is idempotent: a bound pod keeps its node.
	bound := list.Items[0]
	for _, p := range list.Items {
		if p.Spec.NodeName != "" {
			bound = p
			break
		}
	}
	d, err := s.Schedule(ctx, "default", bound.Metadata.Name)
	if err != nil || d.Node != bound.Spec.NodeName {
		t.Fatalf("rescheduling a bound pod moved it: %v %v", d, err)
	}
}

// What a pod requests stops counting once it ends (the scheduler's cache
// of requests follows the pods), and a placement whose context ends stops
// waiting for its turn.
func TestEndedPodsFreeTheirRoom(t *testing.T) {
	st, ctx := storetest.New(t), context.Background()
	if err := st.Nodes().Create(ctx, node("n0", "1", "4Gi", true)); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"a", "b"} {
		if err := st.CreatePod(ctx, pod(name, "600m", "256Mi")); err != nil {
			t.Fatal(err)
		}
	}
	s := &scheduler.Scheduler{Store: st}
	if d, err := s.Schedule(ctx, "default", "a"); err != nil || d.Node != "n0" {
		t.Fatalf("a: %+v %v", d, err)
	}
	if d, err := s.Schedule(ctx, "default", "b"); err != nil || d.Node != "" {
		t.Fatalf("b fits beside a on one cpu: %+v %v", d, err)
	}
	a, err := st.Pods().Get(ctx, "default", "a")
	if err != nil {
		t.Fatal(err)
	}
	a.Status.Phase = model.PodFailed
	if err := st.Pods().Update(ctx, a); err != nil {
		t.Fatal(err)
	}
	if d, err := s.Schedule(ctx, "default", "b"); err != nil || d.Node != "n0" {
		t.Fatalf("b still refused once a ended: %+v %v", d, err)
	}

	done, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := s.Schedule(done, "default", "b"); !errors.Is(err, context.Canceled) {
		t.Fatalf("a placement with its context ended: %v", err)
	}
}

// A pod's new claims must fit beside the claims already bound to a node;
// a node holding the data of its claims is the only one it may go to.
func TestClaimsNeedRoomAndTheirNode(t *testing.T) {
	withStorage := func(size string) func(*model.Node) {
		return func(n *model.Node) { n.Status.Allocatable[model.ResourceStorage] = size }
	}
	cands := []scheduler.Candidate{
		{Node: node("full", "8", "8Gi", true, withStorage("10Gi")), ClaimBytes: 9 << 30, NewClaimBytes: 2 << 30},
		{Node: node("roomy", "8", "8Gi", true, withStorage("100Gi")), ClaimBytes: 9 << 30, NewClaimBytes: 2 << 30},
	}
	if d := scheduler.Place(pod("p", "100m", "1Gi"), cands); d.Node != "roomy" {
		t.Fatalf("placed on %q (%s), want roomy", d.Node, d.Message)
	}
	cands[1].Excluded = scheduler.ReasonVolumeNode
	d := scheduler.Place(pod("p", "100m", "1Gi"), cands)
	if d.Node != "" || !strings.Contains(d.Message, "1 Insufficient storage") || !strings.Contains(d.Message, "1 node(s) had volume node affinity conflict") {
		t.Fatalf("placed on %q: %s", d.Node, d.Message)
	}
}

// A placement among 100 nodes holding 5,000 pods counts every bound pod's
// requests: the one node left empty is the least allocated and gets the
// new pods. The log says what a placement costs, cold and warm.
func TestPlacementAmongManyBoundPods(t *testing.T) {
	st, ctx := storetest.New(t), context.Background()
	const nodes, bound = 100, 5000
	for i := range nodes {
		if err := st.Nodes().Create(ctx, node(fmt.Sprintf("n%03d", i), "64", "256Gi", true)); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.CreatePod(ctx, pod("seed", "100m", "128Mi")); err != nil {
		t.Fatal(err)
	}
	// Copies of the seed bound to every node but n000, Running.
	if _, err := st.Pool().Exec(ctx, `INSERT INTO pods (uid, namespace, name, resource_version, spec, status)
		SELECT gen_random_uuid(), namespace, 'b-' || i, resource_version,
			jsonb_set(spec, '{nodeName}', to_jsonb(format('n%s', lpad((1 + i % ($2 - 1))::text, 3, '0')))),
			jsonb_set(status, '{phase}', '"Running"')
		FROM pods, generate_series(1, $1) AS i WHERE name = 'seed'`, bound, nodes); err != nil {
		t.Fatal(err)
	}
	const placements = 20
	for i := range placements {
		if err := st.CreatePod(ctx, pod(fmt.Sprintf("new-%02d", i), "100m", "128Mi")); err != nil {
			t.Fatal(err)
		}
	}
	s := &scheduler.Scheduler{Store: st}
	var cold, warm time.Duration
	for i := range placements {
		start := time.Now()
		d, err := s.Schedule(ctx, "default", fmt.Sprintf("new-%02d", i))
		if i == 0 {
			cold = time.Since(start)
		} else {
			warm += time.Since(start)
		}
		if err != nil || d.Node != "n000" {
			t.Fatalf("placement %d went to %q (%v); want n000, the node without the %d bound pods", i, d.Node, err, bound)
		}
	}
	t.Logf("a placement among %d nodes and %d bound pods: %v the first, %v each after", nodes, bound, cold, warm/(placements-1))
}

// The scheduler follows pods as they are deleted, and reads them afresh
// when the changes it has not seen were compacted away.
func TestDeletedPodsFreeTheirRoomAndCompactionIsCaughtUp(t *testing.T) {
	st, ctx := storetest.New(t), context.Background()
	if err := st.Nodes().Create(ctx, node("n0", "1", "4Gi", true)); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"a", "b", "c"} {
		if err := st.CreatePod(ctx, pod(name, "600m", "256Mi")); err != nil {
			t.Fatal(err)
		}
	}
	s := &scheduler.Scheduler{Store: st}
	if d, err := s.Schedule(ctx, "default", "a"); err != nil || d.Node != "n0" {
		t.Fatalf("a: %+v %v", d, err)
	}
	if d, err := s.Schedule(ctx, "default", "b"); err != nil || d.Node != "" {
		t.Fatalf("b fits beside a on one cpu: %+v %v", d, err)
	}
	if _, err := st.Pods().Delete(ctx, "default", "a", ""); err != nil {
		t.Fatal(err)
	}
	if d, err := s.Schedule(ctx, "default", "b"); err != nil || d.Node != "n0" {
		t.Fatalf("b still refused once a was deleted: %+v %v", d, err)
	}
	if d, err := s.Schedule(ctx, "default", "c"); err != nil || d.Node != "" {
		t.Fatalf("c fits beside b on one cpu: %+v %v", d, err)
	}
	// b ends, then another write, then the history goes: the end of b is
	// known only from the pods themselves.
	b, err := st.Pods().Get(ctx, "default", "b")
	if err != nil {
		t.Fatal(err)
	}
	b.Status.Phase = model.PodSucceeded
	if err := st.Pods().Update(ctx, b); err != nil {
		t.Fatal(err)
	}
	if err := st.EnsureNamespace(ctx, "other"); err != nil {
		t.Fatal(err)
	}
	if n, err := st.Compact(ctx, 0); err != nil || n == 0 {
		t.Fatalf("compact: %d %v", n, err)
	}
	if d, err := s.Schedule(ctx, "default", "c"); err != nil || d.Node != "n0" {
		t.Fatalf("c refused after b ended and the history was compacted: %+v %v", d, err)
	}
}

// Nodes cordoned, added and deleted between placements are seen by the
// next one.
func TestPlacementFollowsNodeChanges(t *testing.T) {
	st, ctx := storetest.New(t), context.Background()
	if err := st.Nodes().Create(ctx, node("a", "8", "8Gi", true)); err != nil {
		t.Fatal(err)
	}
	for i := range 4 {
		if err := st.CreatePod(ctx, pod(fmt.Sprintf("p%d", i), "100m", "128Mi")); err != nil {
			t.Fatal(err)
		}
	}
	s := &scheduler.Scheduler{Store: st}
	place := func(name, want string) {
		t.Helper()
		if d, err := s.Schedule(ctx, "default", name); err != nil || d.Node != want {
			t.Fatalf("%s went to %q (%s, %v); want %q", name, d.Node, d.Message, err, want)
		}
	}
	place("p0", "a")
	a, err := st.Nodes().Get(ctx, "", "a")
	if err != nil {
		t.Fatal(err)
	}
	a.Spec.Unschedulable = true
	if err := st.Nodes().Update(ctx, a); err != nil {
		t.Fatal(err)
	}
	place("p1", "")
	if err := st.Nodes().Create(ctx, node("b", "8", "8Gi", true)); err != nil {
		t.Fatal(err)
	}
	place("p1", "b")
	if err := st.Nodes().Create(ctx, node("c", "8", "8Gi", true)); err != nil {
		t.Fatal(err)
	}
	place("p2", "c") // the least allocated
	if _, err := st.Pods().Delete(ctx, "default", "p2", ""); err != nil {
		t.Fatal(err)
	}
	if _, err := st.DeleteNode(ctx, "c", ""); err != nil {
		t.Fatal(err)
	}
	place("p3", "b")
}

// Placements asked for at once share rounds: one hold of the scheduling
// lock and one reading of the changes serve up to MaxRound of them, and
// every pod still gets a node of its own share. (Set MaxRound to 1 to see
// a round per placement, as each placement once took the lock itself.)
func TestPlacementsAskedAtOnceShareRounds(t *testing.T) {
	st, ctx := storetest.New(t), context.Background()
	for i := range 4 {
		if err := st.Nodes().Create(ctx, node(fmt.Sprintf("n%d", i), "64", "64Gi", true)); err != nil {
			t.Fatal(err)
		}
	}
	const pods = 200
	for i := range pods {
		if err := st.CreatePod(ctx, pod(fmt.Sprintf("p%03d", i), "100m", "64Mi")); err != nil {
			t.Fatal(err)
		}
	}
	s := &scheduler.Scheduler{Store: st}
	var wg sync.WaitGroup
	start := time.Now()
	for i := range pods {
		wg.Go(func() {
			if d, err := s.Schedule(ctx, "default", fmt.Sprintf("p%03d", i)); err != nil || d.Node == "" {
				t.Errorf("p%03d: %+v %v", i, d, err)
			}
		})
	}
	wg.Wait()
	if r := s.Rounds.Load(); r > pods/10 {
		t.Errorf("%d placements asked at once took %d rounds; want at most %d", pods, r, pods/10)
	} else {
		t.Logf("%d placements asked at once took %d rounds, %s", pods, r, time.Since(start).Round(time.Millisecond))
	}
	perNode := map[string]int{}
	list, _ := st.Pods().List(ctx, store.ListOptions{})
	for _, p := range list.Items {
		perNode[p.Spec.NodeName]++
	}
	for n, count := range perNode {
		if count != pods/4 {
			t.Errorf("node %s holds %d pods; want %d each (the least allocated node first: %v)", n, count, pods/4, perNode)
		}
	}
}
