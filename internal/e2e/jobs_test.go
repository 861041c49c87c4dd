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

const jobsPath = "/apis/batch/v1/namespaces/default/jobs"

func jobJSON(name, command, spec string) string {
	return fmt.Sprintf(`{"apiVersion":"batch/v1","kind":"Job","metadata":{"name":%q},"spec":{%s
	  "template":{"spec":{"terminationGracePeriodSeconds":2,"containers":[{"name":"work","image":"base","command":["sh","-c",%q]}]}}}}`, name, spec, command)
}

func (c *cluster) job(name string) (model.Job, bool) {
	c.t.Helper()
	var j model.Job
	code := c.get(jobsPath+"/"+name, &j)
	return j, code == http.StatusOK
}

func (c *cluster) waitJobCondition(name, typ string, timeout time.Duration) model.Job {
	c.t.Helper()
	var j model.Job
	c.eventually(timeout, "job "+name+" "+typ, func() bool {
		j, _ = c.job(name)
		if done := j.Status.Finished(); done != nil {
			if done.Type != typ {
				c.t.Fatalf("job %s ended %s (%s: %s); want %s", name, done.Type, done.Reason, done.Message, typ)
			}
			return true
		}
		return false
	})
	return j
}

// runningTally follows a job's pods and keeps the most running at once
// (neither finished nor terminating).
type runningTally struct {
	mu      sync.Mutex
	pods    map[string]model.Pod
	maxSeen int
}

func (c *cluster) followJobPods(job string) *runningTally {
	c.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	c.t.Cleanup(cancel)
	req, _ := http.NewRequestWithContext(ctx, "GET", c.api+"/api/v1/namespaces/default/pods?watch=true&labelSelector=job-name%3D"+job, nil)
	resp, err := c.http.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	tally := &runningTally{pods: map[string]model.Pod{}}
	go func() {
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
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
			tally.mu.Lock()
			if ev.Type == "DELETED" {
				delete(tally.pods, ev.Object.Metadata.Name)
			} else {
				tally.pods[ev.Object.Metadata.Name] = ev.Object
			}
			running := 0
			for _, p := range tally.pods {
				if p.Metadata.DeletionTimestamp == nil && p.Status.Phase != model.PodSucceeded && p.Status.Phase != model.PodFailed {
					running++
				}
			}
			tally.maxSeen = max(tally.maxSeen, running)
			tally.mu.Unlock()
		}
	}()
	return tally
}

func (c *cluster) jobPods(job string) []model.Pod {
	c.t.Helper()
	var list model.List[model.Pod]
	c.get("/api/v1/namespaces/default/pods?labelSelector=job-name%3D"+job, &list)
	return list.Items
}

// Four jobs at once: five completions two at a time never run more than
// two pods; a failing command fails its job at the backoff limit; the
// active deadline stops running pods and fails the job; a finished job
// with a TTL goes, pods and all.
func TestJobsRunToTheirEnd(t *testing.T) {
	t.Parallel()
	c := newCluster(t, 3)
	five := c.followJobPods("five")
	for _, body := range []string{
		jobJSON("five", "sleep 1", `"completions":5,"parallelism":2,`),
		jobJSON("fails", "exit 7", `"backoffLimit":1,`),
		jobJSON("slow", "exec sleep 600", `"completions":2,"parallelism":2,"activeDeadlineSeconds":5,`),
		jobJSON("brief", "true", `"ttlSecondsAfterFinished":3,`),
	} {
		if code, b := c.do("POST", jobsPath, body); code != http.StatusCreated {
			t.Fatalf("create job: %d %s", code, b)
		}
	}

	start := time.Now()
	done := c.waitJobCondition("five", model.JobComplete, 2*time.Minute)
	t.Logf("5 completions, 2 at a time, in %s", time.Since(start).Round(100*time.Millisecond))
	if done.Status.Succeeded != 5 || done.Status.Active != 0 || done.Status.CompletionTime == nil || done.Status.StartTime == nil {
		t.Fatalf("five: %+v; want 5 succeeded, none active, start and completion times", done.Status)
	}
	succeeded := 0
	for _, p := range c.jobPods("five") {
		if p.Status.Phase == model.PodSucceeded {
			succeeded++
		}
	}
	five.mu.Lock()
	most := five.maxSeen
	five.mu.Unlock()
	if succeeded != 5 || most > 2 || most == 0 {
		t.Fatalf("five: %d pods Succeeded (want 5), at most %d running at once (want 1..2)", succeeded, most)
	}

	// A failed pod ends Failed once its zone is torn down, which takes a
	// while on a busy machine.
	failed := c.waitJobCondition("fails", model.JobFailed, 4*time.Minute)
	if cond := failed.Status.Finished(); cond.Reason != model.ReasonBackoffLimitExceeded || failed.Status.Failed != 2 {
		t.Fatalf("fails: reason %s, %d failed; want BackoffLimitExceeded after 2", cond.Reason, failed.Status.Failed)
	}
	for _, p := range c.jobPods("fails") {
		if p.Status.Phase != model.PodFailed {
			t.Fatalf("fails: pod %s is %s; want Failed", p.Metadata.Name, p.Status.Phase)
		}
	}

	t.Logf("fails failed at %s", time.Since(start).Round(100*time.Millisecond))
	slow := c.waitJobCondition("slow", model.JobFailed, time.Minute)
	if cond := slow.Status.Finished(); cond.Reason != model.ReasonDeadlineExceeded {
		t.Fatalf("slow: reason %s; want DeadlineExceeded", cond.Reason)
	}
	if ran := slow.Status.CompletionTime.Sub(*slow.Status.StartTime); ran < 5*time.Second || ran > 15*time.Second {
		t.Fatalf("slow ran %s; its deadline is 5 s", ran)
	}
	c.eventually(time.Minute, "slow's pods to be stopped", func() bool {
		for _, p := range c.jobPods("slow") {
			if p.Status.Phase == model.PodRunning || p.Status.Phase == model.PodPending {
				return false
			}
		}
		return true
	})

	t.Logf("slow's pods stopped at %s", time.Since(start).Round(100*time.Millisecond))
	c.eventually(time.Minute, "brief and its pod to be gone after their TTL", func() bool {
		_, there := c.job("brief")
		return !there && len(c.jobPods("brief")) == 0
	})
	c.eventually(30*time.Second, "brief's workflow to end", func() bool {
		d, err := c.temporal.DescribeWorkflowExecution(context.Background(), workflows.JobWorkflowID("default", "brief"), "")
		return err == nil && d.WorkflowExecutionInfo.Status == enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED
	})
	c.recordHistory(workflows.JobWorkflowID("default", "brief"), "job-complete-ttl.json")
}
