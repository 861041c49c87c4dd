package e2e_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"

	"github.com/zonewright/zonewright/internal/model"
	"github.com/zonewright/zonewright/workflows"
)

const deploymentsPath = "/apis/apps/v1/namespaces/default/deployments"

// webDeployment is a deployment of replicas pods labelled app=<name>,
// each running command.
func webDeployment(name string, replicas int, command string, extra string) string {
	return fmt.Sprintf(`{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":%q},
	 "spec":{"replicas":%d,"selector":{"matchLabels":{"app":%q}},%s
	  "template":{"metadata":{"labels":{"app":%q}},"spec":{"terminationGracePeriodSeconds":2,
	   "containers":[{"name":"app","image":"base","command":["sh","-c",%q]}]}}}}`, name, replicas, name, extra, name, command)
}

func (c *cluster) deployment(name string) model.Deployment {
	c.t.Helper()
	var d model.Deployment
	if code := c.get(deploymentsPath+"/"+name, &d); code != http.StatusOK {
		c.t.Fatalf("get deployment %s: %d", name, code)
	}
	return d
}

// editDeployment reads, changes and writes a deployment, reading again
// when its workflow's status write got there first.
func (c *cluster) editDeployment(name string, change func(d *model.Deployment)) model.Deployment {
	c.t.Helper()
	for range 20 {
		d := c.deployment(name)
		change(&d)
		code, b := c.do("PUT", deploymentsPath+"/"+name, d)
		if code == http.StatusConflict {
			continue
		}
		if code != http.StatusOK {
			c.t.Fatalf("update deployment %s: %d %s", name, code, b)
		}
		_ = json.Unmarshal(b, &d)
		return d
	}
	c.t.Fatalf("update deployment %s: conflicts all along", name)
	return model.Deployment{}
}

func progressing(d model.Deployment) (string, string) {
	if cond := d.Status.Condition(model.DeploymentProgressing); cond != nil {
		return cond.Status, cond.Reason
	}
	return "", ""
}

// waitRolledOut waits for kubectl rollout status's success (the
// generation observed, every replica updated and available, Progressing
// True/NewReplicaSetAvailable), then for nothing old left: the old pods
// still terminating then do not count, as in Kubernetes.
func (c *cluster) waitRolledOut(name string, timeout time.Duration) model.Deployment {
	c.t.Helper()
	var d model.Deployment
	deadline := time.Now().Add(timeout)
	for {
		d = c.deployment(name)
		st, reason := progressing(d)
		r := d.DesiredReplicas()
		pods := c.podsOf(name)
		if d.Status.ObservedGeneration == d.Metadata.Generation && d.Status.UpdatedReplicas == r &&
			d.Status.AvailableReplicas == r && d.Status.Replicas == r && st == model.ConditionTrue && reason == model.ReasonNewReplicaSetAvailable &&
			len(pods) <= 1 {
			return d
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("timed out after %s waiting for deployment %s rolled out: generation %d, status %+v\npods by revision:%s",
				timeout, name, d.Metadata.Generation, d.Status, podSummary(pods))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// podSummary lists pods by revision with their phase, readiness, node and
// deletion, for a failure's message.
func podSummary(byHash map[string][]model.Pod) string {
	var b strings.Builder
	for h, pods := range byHash {
		fmt.Fprintf(&b, "\n  %s (%d):", h, len(pods))
		for _, p := range pods {
			fmt.Fprintf(&b, "\n    %s %s ready=%v node=%q deleting=%v reason=%q message=%q",
				p.Metadata.Name, p.Status.Phase, isReady(p), p.Spec.NodeName, p.Metadata.DeletionTimestamp != nil, p.Status.Reason, p.Status.Message)
		}
	}
	return b.String()
}

// podTally follows a deployment's pods on the watch stream and keeps, at
// every event, the most pods not terminating and the fewest available.
type podTally struct {
	mu        sync.Mutex
	pods      map[string]model.Pod
	gone      map[string]model.Pod // deleted pods, as last seen
	added     map[string]int       // ADDED events per pod name
	maxActive int
	minAvail  int
	events    int
	sampling  bool
	minAt     string // the pods when availability was lowest
	// overlap, when set, is an old revision's hash: overlapped records
	// the pods when one of it and one of another revision existed at once.
	overlap, overlapped string
}

func (c *cluster) followPods(app string) *podTally {
	c.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	c.t.Cleanup(cancel)
	tally := &podTally{pods: map[string]model.Pod{}, gone: map[string]model.Pod{}, added: map[string]int{}, minAvail: 1 << 30}
	// The stream resumes from the last version seen when the API comes
	// back after a restart, so no event is lost or repeated.
	go func() {
		last := ""
		for ctx.Err() == nil {
			url := c.api + "/api/v1/namespaces/default/pods?watch=true&labelSelector=app%3D" + app
			if last != "" {
				url += "&resourceVersion=" + last
			}
			req, _ := http.NewRequestWithContext(ctx, "GET", url, nil)
			resp, err := c.http.Do(req)
			if err != nil {
				time.Sleep(200 * time.Millisecond)
				continue
			}
			sc := bufio.NewScanner(resp.Body)
			sc.Buffer(make([]byte, 1<<20), 1<<20)
			for sc.Scan() {
				if id, ok := strings.CutPrefix(sc.Text(), "id: "); ok {
					last = id
				}
				line, ok := strings.CutPrefix(sc.Text(), "data: ")
				if !ok {
					continue
				}
				var ev struct {
					Type   string
					Object model.Pod
				}
				if json.Unmarshal([]byte(line), &ev) != nil {
					continue
				}
				tally.apply(ev.Type, ev.Object)
			}
			resp.Body.Close()
			time.Sleep(200 * time.Millisecond)
		}
	}()
	return tally
}

func (t *podTally) apply(typ string, p model.Pod) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.events++
	if typ == "DELETED" {
		delete(t.pods, p.Metadata.Name)
		t.gone[p.Metadata.Name] = p
	} else {
		if typ == "ADDED" {
			t.added[p.Metadata.Name]++
		}
		t.pods[p.Metadata.Name] = p
	}
	if t.overlap != "" && t.overlapped == "" {
		old, other := false, false
		for _, p := range t.pods {
			if p.Metadata.Labels[model.LabelPodTemplateHash] == t.overlap {
				old = true
			} else {
				other = true
			}
		}
		if old && other {
			t.overlapped = t.describe()
		}
	}
	if !t.sampling {
		return
	}
	active, avail := t.counts()
	t.maxActive = max(t.maxActive, active)
	if avail < t.minAvail {
		t.minAvail = avail
		t.minAt = t.describe()
	}
}

// describe lists the pods as the tally sees them, for a failure message.
func (t *podTally) describe() string {
	var b strings.Builder
	for _, p := range t.pods {
		reason := ""
		for _, c := range p.Status.Conditions {
			if c.Type == model.PodReady {
				reason = c.Status + "/" + c.Reason
			}
		}
		fmt.Fprintf(&b, "\n  %s %s ready=%s deleting=%t", p.Metadata.Name, p.Status.Phase, reason, p.Metadata.DeletionTimestamp != nil)
	}
	return b.String()
}

func (t *podTally) counts() (active, avail int) {
	for _, p := range t.pods {
		if p.Metadata.DeletionTimestamp != nil {
			continue
		}
		active++
		if isReady(p) {
			avail++
		}
	}
	return active, avail
}

// sample starts the bookkeeping of bounds once the stream has caught up
// with a rolled-out deployment of replicas pods.
func (t *podTally) sample(c *cluster, replicas int) {
	c.t.Helper()
	c.eventually(10*time.Second, "the watch stream to show the deployment rolled out", func() bool {
		t.mu.Lock()
		defer t.mu.Unlock()
		active, avail := t.counts()
		if active != replicas || avail != replicas {
			return false
		}
		t.sampling = true
		t.maxActive, t.minAvail = active, avail
		return true
	})
}

func (t *podTally) bounds() (maxActive, minAvail, events int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.maxActive, t.minAvail, t.events
}

// podsOf lists the deployment's pods, by the revision hash they run.
func (c *cluster) podsOf(app string) map[string][]model.Pod {
	c.t.Helper()
	var list model.List[model.Pod]
	c.get("/api/v1/namespaces/default/pods?labelSelector=app%3D"+app, &list)
	out := map[string][]model.Pod{}
	for _, p := range list.Items {
		h := p.Metadata.Labels[model.LabelPodTemplateHash]
		out[h] = append(out[h], p)
	}
	return out
}

// A template change on 4 replicas with the default 25%/25% never runs
// more than 5 pods nor fewer than 3 available; it ends with every
// replica updated and available and nothing of the old revision. Its
// workflow then costs no history events while nothing changes; a rollback
// by hand returns to the first template, and deleting the deployment
// removes its pods and revisions.
func TestDeploymentRollingUpdateKeepsItsBounds(t *testing.T) {
	t.Parallel()
	c := newCluster(t, 3)
	tally := c.followPods("web")
	if code, b := c.do("POST", deploymentsPath, webDeployment("web", 4, "exec sleep 3600", "")); code != http.StatusCreated {
		t.Fatalf("create deployment: %d %s", code, b)
	}
	start := time.Now()
	first := c.waitRolledOut("web", 2*time.Minute)
	t.Logf("4 replicas created and available in %s", time.Since(start).Round(100*time.Millisecond))
	firstHash := ""
	for h, ps := range c.podsOf("web") {
		firstHash = h
		for _, p := range ps {
			if o := model.ControllerOf(&p.Metadata); o == nil || o.Kind != model.KindDeployment || o.UID != first.Metadata.UID ||
				!strings.HasPrefix(p.Metadata.Name, "web-"+h+"-") {
				t.Fatalf("pod %s: owner %+v; want the deployment, named web-%s-…", p.Metadata.Name, o, h)
			}
		}
	}
	wfID := workflows.DeploymentWorkflowID("default", "web")
	before := c.historyLength(wfID)

	tally.sample(c, 4)
	start = time.Now()
	changed := c.editDeployment("web", func(d *model.Deployment) {
		d.Spec.Template.Spec.Containers[0].Command = []string{"sh", "-c", "exec sleep 7200"}
	})
	if changed.Metadata.Generation != first.Metadata.Generation+1 {
		t.Fatalf("generation %d after a template change; want %d", changed.Metadata.Generation, first.Metadata.Generation+1)
	}
	done := c.waitRolledOut("web", 3*time.Minute)
	rollTime := time.Since(start)
	c.eventually(30*time.Second, "the old revision's pods to be gone", func() bool { return len(c.podsOf("web")[firstHash]) == 0 })
	maxActive, minAvail, events := tally.bounds()
	if maxActive > 5 || minAvail < 3 {
		tally.mu.Lock()
		minAt := tally.minAt
		tally.mu.Unlock()
		t.Fatalf("over %d pod events: at most %d pods not terminating (want ≤ 5), at least %d available (want ≥ 3); the pods at the fewest:%s", events, maxActive, minAvail, minAt)
	}
	if done.Status.Revision != 2 || done.Metadata.Annotations[model.AnnotationRevision] != "2" {
		t.Fatalf("revision %d (annotation %q) after one template change; want 2", done.Status.Revision, done.Metadata.Annotations[model.AnnotationRevision])
	}
	spent := c.historyLength(wfID) - before
	t.Logf("rolled 4 replicas in %s; %d pod events; the deployment's workflow spent %d history events", rollTime.Round(100*time.Millisecond), events, spent)

	// Nothing changes: nothing is spent. Once the last sync is done, the
	// workflow waits with no timer set, so only a signal can wake it.
	var idle int64
	c.eventually(30*time.Second, "the deployment's workflow to settle", func() bool {
		before := c.historyLength(wfID)
		time.Sleep(time.Second)
		idle = c.historyLength(wfID)
		return idle == before
	})
	if timers := c.pendingTimers(wfID); timers != 0 {
		t.Fatalf("the settled workflow has %d timers set; want none", timers)
	}
	time.Sleep(5 * time.Second)
	if now := c.historyLength(wfID); now != idle {
		t.Fatalf("the workflow spent %d history events in 5 s of nothing happening", now-idle)
	}

	// Back to the first template by hand: it becomes revision 3.
	if code, b := c.do("POST", deploymentsPath+"/web/rollback", nil); code != http.StatusOK {
		t.Fatalf("rollback: %d %s", code, b)
	}
	back := c.waitRolledOut("web", 3*time.Minute)
	pods := c.podsOf("web")
	if len(pods[firstHash]) != 4 || back.Status.Revision != 3 {
		t.Fatalf("after the rollback: %d pods of the first template, revision %d; want 4 and 3", len(pods[firstHash]), back.Status.Revision)
	}
	var revs model.List[model.ControllerRevision]
	c.get("/apis/apps/v1/namespaces/default/controllerrevisions", &revs)
	nums := map[int64]bool{}
	for _, r := range revs.Items {
		nums[r.Revision] = true
	}
	if len(revs.Items) != 2 || !nums[2] || !nums[3] {
		t.Fatalf("revisions %v; want 2 and 3 (the first became 3)", nums)
	}
	for name, n := range tally.added {
		if n > 1 {
			t.Fatalf("pod %s was created %d times", name, n)
		}
	}

	// Deleting cascades: pods, then revisions, then the deployment.
	if code, b := c.do("DELETE", deploymentsPath+"/web", nil); code != http.StatusOK {
		t.Fatalf("delete: %d %s", code, b)
	}
	c.eventually(time.Minute, "the deployment and its pods to be gone", func() bool {
		code := c.get(deploymentsPath+"/web", nil)
		return code == http.StatusNotFound && len(c.podsOf("web")) == 0
	})
	c.get("/apis/apps/v1/namespaces/default/controllerrevisions", &revs)
	if len(revs.Items) != 0 {
		t.Fatalf("%d revisions left after the deployment went", len(revs.Items))
	}
	c.eventually(30*time.Second, "the deployment's workflow to end", func() bool {
		d, err := c.temporal.DescribeWorkflowExecution(context.Background(), wfID, "")
		return err == nil && d.WorkflowExecutionInfo.Status == enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED
	})
	c.recordHistory(wfID, "deployment-roll-rollback-delete.json")

	// Recreate: every old pod is gone before the first new one exists.
	re := c.followPods("re")
	if code, b := c.do("POST", deploymentsPath, webDeployment("re", 3, "exec sleep 3600", `"strategy":{"type":"Recreate"},`)); code != http.StatusCreated {
		t.Fatalf("create deployment: %d %s", code, b)
	}
	c.waitRolledOut("re", 2*time.Minute)
	oldHash := ""
	for h := range c.podsOf("re") {
		oldHash = h
	}
	re.mu.Lock()
	re.overlap = oldHash
	re.mu.Unlock()
	c.editDeployment("re", func(d *model.Deployment) {
		d.Spec.Template.Spec.Containers[0].Command = []string{"sh", "-c", "exec sleep 7200"}
	})
	c.waitRolledOut("re", 2*time.Minute)
	re.mu.Lock()
	defer re.mu.Unlock()
	if re.overlapped != "" {
		t.Fatalf("Recreate ran old and new pods together:%s", re.overlapped)
	}
}

// A template whose containers exit at once never becomes Ready. With
// progressDeadlineSeconds 30 the rollout is declared failed within the
// deadline and a little, and availability never drops below replicas -
// maxUnavailable meanwhile. With autoRevert the deployment returns to its
// last fully available revision by itself; without, it stays failed until
// a rollback by hand. With healthyDeadlineSeconds, new pods not Ready in
// time fail the rollout before its progress deadline.
func TestDeploymentFailedRolloutRevertsItselfOrByHand(t *testing.T) {
	// Alone: it times a 30 s progress deadline and a 5 s healthy deadline.
	c := newCluster(t, 3)
	tallies := map[string]*podTally{}
	for _, name := range []string{"auto", "manual", "healthy"} {
		tallies[name] = c.followPods(name)
		// A container that exits at once is Ready for moments between
		// restarts; minReadySeconds keeps such a pod from counting as
		// available, as Kubernetes' documentation advises.
		extra := `"minReadySeconds":3,"progressDeadlineSeconds":30,`
		switch name {
		case "auto":
			extra += `"autoRevert":true,`
		case "healthy":
			extra = `"minReadySeconds":3,"autoRevert":true,"strategy":{"rollingUpdate":{"healthyDeadlineSeconds":5}},`
		}
		if code, b := c.do("POST", deploymentsPath, webDeployment(name, 4, "exec sleep 3600", extra)); code != http.StatusCreated {
			t.Fatalf("create deployment %s: %d %s", name, code, b)
		}
	}
	firstHash := map[string]string{}
	for _, name := range []string{"auto", "manual", "healthy"} {
		c.waitRolledOut(name, 2*time.Minute)
		for h := range c.podsOf(name) {
			firstHash[name] = h
		}
		tallies[name].sample(c, 4)
	}
	start := time.Now()
	for _, name := range []string{"auto", "manual", "healthy"} {
		c.editDeployment(name, func(d *model.Deployment) {
			d.Spec.Template.Spec.Containers[0].Command = []string{"sh", "-c", "exit 3"}
		})
	}

	// healthyDeadlineSeconds 5: four new pods (one per replica) that were
	// not Ready within 5 s fail the rollout long before its 600 s deadline.
	c.eventually(40*time.Second, "the healthy deployment to revert", func() bool {
		_, reason := progressing(c.deployment("healthy"))
		return reason == model.ReasonRolledBack || c.deployment("healthy").Status.Revision == 3
	})
	t.Logf("healthyDeadlineSeconds failed the rollout and reverted it %s after the template change", time.Since(start).Round(100*time.Millisecond))
	// The event follows the deployment's write (a reader sent to the
	// revert must find it there), so it may come a moment after.
	var reverted model.List[model.Event]
	c.eventually(15*time.Second, "an event saying why healthy was reverted", func() bool {
		c.get("/api/v1/namespaces/default/events?fieldSelector=involvedObject.name%3Dhealthy,reason%3D"+model.ReasonRolledBack, &reverted)
		return len(reverted.Items) > 0
	})
	if msg := firstSeenFirst(reverted.Items)[0].Message; !strings.Contains(msg, "healthy deadline") {
		t.Fatalf("the revert's event does not say the healthy deadline failed it: %q", msg)
	}
	c.waitRolledOut("healthy", 2*time.Minute)

	var manual model.Deployment
	c.eventually(60*time.Second, "the manual deployment's rollout to time out", func() bool {
		manual = c.deployment("manual")
		st, reason := progressing(manual)
		return st == model.ConditionFalse && reason == model.ReasonProgressDeadlineExceeded
	})
	timedOut := time.Since(start)
	var auto model.Deployment
	c.eventually(30*time.Second, "the auto deployment to revert", func() bool {
		auto = c.deployment("auto")
		_, reason := progressing(auto)
		return reason == model.ReasonRolledBack || auto.Status.Revision == 3
	})
	t.Logf("the rollout timed out %s after the template change (deadline 30 s)", timedOut.Round(100*time.Millisecond))
	if timedOut > 45*time.Second {
		t.Fatalf("timed out after %s; want within 30 s and a little", timedOut)
	}
	if cmd := auto.Spec.Template.Spec.Containers[0].Command; strings.Join(cmd, " ") != "sh -c exec sleep 3600" {
		t.Fatalf("auto's template after the revert runs %q; want the first one back", cmd)
	}
	c.waitRolledOut("auto", 2*time.Minute)
	if pods := c.podsOf("auto"); len(pods) != 1 || len(pods[firstHash["auto"]]) != 4 {
		t.Fatalf("auto after the revert: pods by revision %v; want 4 of the first", keysAndCounts(pods))
	}
	var events model.List[model.Event]
	c.get("/api/v1/namespaces/default/events?fieldSelector=involvedObject.name%3Dauto,reason%3D"+model.ReasonRolledBack, &events)
	if len(events.Items) == 0 || !strings.Contains(firstSeenFirst(events.Items)[0].Message, "timed out") {
		t.Fatalf("no event says why auto was reverted: %+v", events.Items)
	}

	// Without autoRevert the failed rollout stays until a rollback by hand.
	if d := c.deployment("manual"); strings.Join(d.Spec.Template.Spec.Containers[0].Command, " ") != "sh -c exit 3" {
		t.Fatalf("manual was reverted without autoRevert")
	}
	if code, b := c.do("POST", deploymentsPath+"/manual/rollback", `{"revision":1}`); code != http.StatusOK {
		t.Fatalf("rollback: %d %s", code, b)
	}
	c.waitRolledOut("manual", 2*time.Minute)
	if pods := c.podsOf("manual"); len(pods[firstHash["manual"]]) != 4 {
		t.Fatalf("manual after the rollback: pods by revision %v; want 4 of the first", keysAndCounts(pods))
	}
	for name, tally := range tallies {
		if maxActive, minAvail, events := tally.bounds(); maxActive > 5 || minAvail < 3 {
			t.Fatalf("%s over %d pod events: at most %d pods not terminating (want ≤ 5), at least %d available (want ≥ 3); at the lowest:%s", name, events, maxActive, minAvail, tally.minAt)
		}
	}
}

func keysAndCounts(m map[string][]model.Pod) map[string]int {
	out := map[string]int{}
	for k, v := range m {
		out[k] = len(v)
	}
	return out
}

// Scaling makes no revision; a restart rolls 30 replicas on 3 nodes; 30
// replicas roll to a new template through a control-plane restart without
// a pod created twice; scaling down to 5, a pod deleted by hand is
// replaced; a paused deployment starts no rollout until resumed; the
// revisions stay contiguous.
func TestDeploymentScalesRollsThroughARestartAndPauses(t *testing.T) {
	t.Parallel()
	c := newCluster(t, 3)
	tally := c.followPods("many")
	if code, b := c.do("POST", deploymentsPath, webDeployment("many", 0, "exec sleep 3600", "")); code != http.StatusCreated {
		t.Fatalf("create deployment: %d %s", code, b)
	}
	c.waitRolledOut("many", time.Minute)
	wfID := workflows.DeploymentWorkflowID("default", "many")

	start := time.Now()
	if code, b := c.do("PUT", deploymentsPath+"/many/scale", `{"spec":{"replicas":30}}`); code != http.StatusOK {
		t.Fatalf("scale to 30: %d %s", code, b)
	}
	scaled := c.waitRolledOut("many", 5*time.Minute)
	t.Logf("scaled 0 → 30 in %s", time.Since(start).Round(100*time.Millisecond))
	if scaled.Status.Revision != 1 {
		t.Fatalf("revision %d after scaling; scaling makes no revision", scaled.Status.Revision)
	}
	// A clean roll of all 30 (a restart makes a new revision of the same
	// pods), for the figures.
	before := c.historyLength(wfID)
	start = time.Now()
	if code, b := c.do("POST", deploymentsPath+"/many/restart", nil); code != http.StatusOK {
		t.Fatalf("restart: %d %s", code, b)
	}
	if d := c.waitRolledOut("many", 5*time.Minute); d.Status.Revision != 2 {
		t.Fatalf("restarted: revision %d; want 2", d.Status.Revision)
	}
	t.Logf("rolled 30 replicas on 3 nodes in %s; the workflow spent %d history events", time.Since(start).Round(100*time.Millisecond), c.historyLength(wfID)-before)
	firstHash := ""
	c.eventually(time.Minute, "one revision's pods left", func() bool {
		pods := c.podsOf("many")
		for h := range pods {
			firstHash = h
		}
		return len(pods) == 1
	})

	// Roll all 30 to a new template, with the control plane stopped and
	// started again in the middle.
	tally.sample(c, 30)
	before = c.historyLength(wfID)
	start = time.Now()
	c.editDeployment("many", func(d *model.Deployment) {
		d.Spec.Template.Spec.Containers[0].Command = []string{"sh", "-c", "exec sleep 7200"}
	})
	c.eventually(time.Minute, "the rollout to be under way", func() bool {
		d := c.deployment("many")
		return d.Status.UpdatedReplicas >= 8
	})
	t.Logf("8 pods of the new revision after %s; stopping the control plane", time.Since(start).Round(100*time.Millisecond))
	startAgain := c.stopControlPlane()
	time.Sleep(2 * time.Second)
	startAgain()
	c.eventually(5*time.Minute, "20 pods of the new revision", func() bool { return c.deployment("many").Status.UpdatedReplicas >= 20 })
	t.Logf("20 pods of the new revision after %s", time.Since(start).Round(100*time.Millisecond))
	rolled := c.waitRolledOut("many", 5*time.Minute)
	rollTime := time.Since(start)
	c.eventually(time.Minute, "the old revision's pods to be gone", func() bool { return len(c.podsOf("many")[firstHash]) == 0 })
	maxActive, minAvail, events := tally.bounds()
	t.Logf("rolled 30 replicas on 3 nodes in %s through a control-plane restart; %d pod events; at most %d pods, at least %d available; the workflow spent %d history events",
		rollTime.Round(100*time.Millisecond), events, maxActive, minAvail, c.historyLength(wfID)-before)
	// 30 replicas at 25%: maxSurge 8 (rounded up), maxUnavailable 7 (down).
	if maxActive > 38 || minAvail < 23 {
		t.Fatalf("at most %d pods not terminating (want ≤ 38), at least %d available (want ≥ 23)", maxActive, minAvail)
	}
	newHash := ""
	for h := range c.podsOf("many") {
		newHash = h
	}
	created := 0
	tally.mu.Lock()
	for name, n := range tally.added {
		if n > 1 {
			t.Errorf("pod %s was created %d times", name, n)
		}
		if strings.HasPrefix(name, "many-"+newHash+"-") {
			created++
		}
	}
	tally.mu.Unlock()
	if created != 30 {
		// Which went, and how they ended: a replacement is made for each.
		var gone []string
		tally.mu.Lock()
		for name, p := range tally.gone {
			if strings.HasPrefix(name, "many-"+newHash+"-") {
				gone = append(gone, fmt.Sprintf("%s: phase %s, reason %q, message %q, deleted %v, conditions %+v",
					name, p.Status.Phase, p.Status.Reason, p.Status.Message, p.Metadata.DeletionTimestamp != nil, p.Status.Conditions))
			}
		}
		tally.mu.Unlock()
		t.Fatalf("%d pods of the new revision were created; want exactly 30; those deleted: %v", created, gone)
	}
	if rolled.Status.Revision != 3 {
		t.Fatalf("revision %d; want 3", rolled.Status.Revision)
	}

	// Down to 5; a pod deleted by hand is replaced.
	if code, b := c.do("PUT", deploymentsPath+"/many/scale", `{"spec":{"replicas":5}}`); code != http.StatusOK {
		t.Fatalf("scale to 5: %d %s", code, b)
	}
	c.waitRolledOut("many", 2*time.Minute)
	c.eventually(time.Minute, "5 pods left", func() bool {
		n := 0
		for _, ps := range c.podsOf("many") {
			n += len(ps)
		}
		return n == 5
	})
	var victim string
	for _, ps := range c.podsOf("many") {
		victim = ps[0].Metadata.Name
	}
	if code, b := c.do("DELETE", "/api/v1/namespaces/default/pods/"+victim, nil); code != http.StatusOK {
		t.Fatalf("delete pod %s: %d %s", victim, code, b)
	}
	c.eventually(time.Minute, "the deleted pod to be replaced", func() bool {
		_, stillThere := c.pod(victim)
		d := c.deployment("many")
		return !stillThere && d.Status.AvailableReplicas == 5 && d.Status.Replicas == 5
	})

	// Paused: a template edit waits for resume.
	if code, b := c.do("POST", deploymentsPath+"/many/pause", nil); code != http.StatusOK {
		t.Fatalf("pause: %d %s", code, b)
	}
	c.editDeployment("many", func(d *model.Deployment) {
		d.Spec.Template.Spec.Containers[0].Command = []string{"sh", "-c", "exec sleep 9000"}
	})
	c.eventually(30*time.Second, "the paused deployment to say so", func() bool {
		d := c.deployment("many")
		st, reason := progressing(d)
		return d.Status.ObservedGeneration == d.Metadata.Generation && st == model.ConditionUnknown && reason == model.ReasonDeploymentPaused
	})
	time.Sleep(2 * time.Second)
	if d := c.deployment("many"); d.Status.Revision != 3 || d.Status.UpdatedReplicas != 5 {
		t.Fatalf("paused: revision %d, updated %d; want 3 and 5 (nothing rolled)", d.Status.Revision, d.Status.UpdatedReplicas)
	}
	if code, b := c.do("POST", deploymentsPath+"/many/resume", nil); code != http.StatusOK {
		t.Fatalf("resume: %d %s", code, b)
	}
	if d := c.waitRolledOut("many", 2*time.Minute); d.Status.Revision != 4 {
		t.Fatalf("resumed: revision %d; want 4", d.Status.Revision)
	}
	var revs model.List[model.ControllerRevision]
	c.get("/apis/apps/v1/namespaces/default/controllerrevisions", &revs)
	nums := map[int64]bool{}
	for _, r := range revs.Items {
		nums[r.Revision] = true
	}
	if len(nums) != 4 || !nums[1] || !nums[2] || !nums[3] || !nums[4] {
		t.Fatalf("revisions %v; want 1 to 4, contiguous", nums)
	}
}

// pendingTimers counts the timers a workflow has started and that neither
// fired nor were cancelled.
func (c *cluster) pendingTimers(workflowID string) int {
	c.t.Helper()
	iter := c.temporal.GetWorkflowHistory(context.Background(), workflowID, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	n := 0
	for iter.HasNext() {
		ev, err := iter.Next()
		if err != nil {
			c.t.Fatal(err)
		}
		switch ev.GetEventType() {
		case enumspb.EVENT_TYPE_TIMER_STARTED:
			n++
		case enumspb.EVENT_TYPE_TIMER_FIRED, enumspb.EVENT_TYPE_TIMER_CANCELED:
			n--
		}
	}
	return n
}

// Scaling down removes the pods that are not Ready before Ready ones.
func TestDeploymentScaleDownRemovesNotReadyPodsFirst(t *testing.T) {
	t.Parallel()
	c := newCluster(t, 3)
	// Pods whose address ends in an even number never become Ready.
	body := `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"half"},
	 "spec":{"replicas":6,"selector":{"matchLabels":{"app":"half"}},
	  "template":{"metadata":{"labels":{"app":"half"}},"spec":{"terminationGracePeriodSeconds":2,
	   "containers":[{"name":"app","image":"base",
	    "command":["sh","-c","case $POD_IP in *[13579]) touch ready;; esac; exec sleep 3600"],
	    "readinessProbe":{"exec":{"command":["test","-f","ready"]},"periodSeconds":1}}]}}}}`
	if code, b := c.do("POST", deploymentsPath, body); code != http.StatusCreated {
		t.Fatalf("create deployment: %d %s", code, b)
	}
	var ready, notReady []string
	c.eventually(2*time.Minute, "6 pods running, the odd addresses Ready", func() bool {
		ready, notReady = nil, nil
		for _, ps := range c.podsOf("half") {
			for _, p := range ps {
				if p.Status.Phase != model.PodRunning || p.Status.PodIP == "" {
					return false
				}
				if last := p.Status.PodIP[len(p.Status.PodIP)-1]; (last-'0')%2 == 1 {
					if !isReady(p) {
						return false
					}
					ready = append(ready, p.Metadata.Name)
				} else {
					notReady = append(notReady, p.Metadata.Name)
				}
			}
		}
		return len(ready)+len(notReady) == 6
	})
	if len(notReady) == 0 || len(ready) == 0 {
		t.Fatalf("ready %v, not ready %v: the addresses gave no mix", ready, notReady)
	}
	if code, b := c.do("PUT", deploymentsPath+"/half/scale", fmt.Sprintf(`{"spec":{"replicas":%d}}`, len(ready))); code != http.StatusOK {
		t.Fatalf("scale: %d %s", code, b)
	}
	c.eventually(3*time.Minute, "the deployment scaled down", func() bool {
		n := 0
		for _, ps := range c.podsOf("half") {
			n += len(ps)
		}
		return n == len(ready)
	})
	left := map[string]bool{}
	for _, ps := range c.podsOf("half") {
		for _, p := range ps {
			left[p.Metadata.Name] = true
		}
	}
	for _, name := range ready {
		if !left[name] {
			t.Fatalf("Ready pod %s was removed while not-Ready ones %v were there; left %v", name, notReady, left)
		}
	}
}

// A deployment whose image left the catalog creates no pod: it says why
// (ReplicaFailure, reason FailedCreate, and a Warning event), and once the
// image is imported again its pods are created and the condition goes.
func TestDeploymentWaitsForAnImageThatLeftTheCatalog(t *testing.T) {
	t.Parallel()
	c := newCluster(t, 1)
	c.createImage("transient", model.ImageZoneTemplate, "", "", "")
	c.waitImage("transient", model.ImageReady, nil, time.Minute)
	body := strings.Replace(webDeployment("lost", 0, "exec sleep 3600", ""), `"image":"base"`, `"image":"transient"`, 1)
	if code, b := c.do("POST", deploymentsPath, body); code != http.StatusCreated {
		t.Fatalf("create deployment: %d %s", code, b)
	}
	c.waitRolledOut("lost", time.Minute)
	if code, b := c.do("DELETE", "/api/v1/images/transient", nil); code != http.StatusAccepted && code != http.StatusOK {
		t.Fatalf("delete the image: %d %s", code, b)
	}
	c.eventually(time.Minute, "the image to be gone", func() bool { _, code := c.image("transient"); return code == http.StatusNotFound })
	if code, b := c.do("PUT", deploymentsPath+"/lost/scale", `{"spec":{"replicas":2}}`); code != http.StatusOK {
		t.Fatalf("scale to 2: %d %s", code, b)
	}
	c.eventually(time.Minute, "ReplicaFailure on the deployment", func() bool {
		d := c.deployment("lost")
		cond := d.Status.Condition(model.ConditionReplicaFailure)
		return cond != nil && cond.Status == model.ConditionTrue && cond.Reason == model.ReasonFailedCreate &&
			strings.Contains(cond.Message, "spec.template.spec.containers[0].image")
	})
	if pods := c.podsOf("lost"); len(pods) != 0 {
		t.Fatalf("pods of an image not in the catalog: %v", pods)
	}
	var events model.List[model.Event]
	c.get("/api/v1/namespaces/default/events?fieldSelector=involvedObject.name%3Dlost", &events)
	failed := 0
	for _, e := range events.Items {
		if e.Reason == model.ReasonFailedCreate && e.Type == model.EventWarning {
			failed++
		}
	}
	if failed != 1 {
		t.Fatalf("%d FailedCreate events; want one: %+v", failed, events.Items)
	}

	c.createImage("transient", model.ImageZoneTemplate, "", "", "")
	d := c.waitRolledOut("lost", 2*time.Minute)
	if cond := d.Status.Condition(model.ConditionReplicaFailure); cond != nil {
		t.Fatalf("ReplicaFailure stays once the pods run: %+v", cond)
	}
}
