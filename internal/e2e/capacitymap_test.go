package e2e_test

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/zonewright/zonewright/internal/controlplane"
	"github.com/zonewright/zonewright/internal/model"
	"github.com/zonewright/zonewright/internal/scheduler"
)

// Three jobs compete for a label the capacity map allows twice: at no
// event of the pod watch are more than two of their pods placed and not
// finished, even across a control-plane restart; the others wait Pending
// with reason CapacityExceeded, and every job completes.
func TestCapacityMapHoldsAcrossCompetingJobs(t *testing.T) {
	t.Parallel()
	capacity, err := scheduler.ParseCapacity("lane=gpu:2")
	if err != nil {
		t.Fatal(err)
	}
	c := newClusterWith(t, 3, func(cfg *controlplane.Config) { cfg.Capacity = capacity })

	var (
		mu       sync.Mutex
		pods     = map[string]model.Pod{}
		most     int
		heldBack bool
	)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go func() {
		last := ""
		for ctx.Err() == nil {
			url := c.api + "/api/v1/namespaces/default/pods?watch=true&labelSelector=lane%3Dgpu"
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
				mu.Lock()
				p := ev.Object
				if ev.Type == "DELETED" {
					delete(pods, p.Metadata.Name)
				} else {
					pods[p.Metadata.Name] = p
				}
				if p.Status.Phase == model.PodPending && p.Status.Reason == scheduler.ReasonCapacityExceeded {
					heldBack = true
				}
				placed := 0
				for _, q := range pods {
					if q.Spec.NodeName != "" && q.Status.Phase != model.PodSucceeded && q.Status.Phase != model.PodFailed {
						placed++
					}
				}
				most = max(most, placed)
				mu.Unlock()
			}
			resp.Body.Close()
			time.Sleep(200 * time.Millisecond)
		}
	}()

	for _, name := range []string{"lane-a", "lane-b", "lane-c"} {
		body := strings.Replace(jobJSON(name, "sleep 3", `"completions":2,"parallelism":2,`),
			`"template":{"spec"`, `"template":{"metadata":{"labels":{"lane":"gpu"}},"spec"`, 1)
		if code, b := c.do("POST", jobsPath, body); code != http.StatusCreated {
			t.Fatalf("create job %s: %d %s", name, code, b)
		}
	}
	c.eventually(time.Minute, "a pod held back by the capacity map", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return heldBack
	})
	// The bound lives in the pods' rows: a restart keeps it.
	startAgain := c.stopControlPlane()
	startAgain()
	start := time.Now()
	for _, name := range []string{"lane-a", "lane-b", "lane-c"} {
		c.waitJobCondition(name, model.JobComplete, 3*time.Minute)
	}
	t.Logf("6 pods through 2 slots in %s after the restart", time.Since(start).Round(100*time.Millisecond))
	mu.Lock()
	defer mu.Unlock()
	if most > 2 {
		t.Fatalf("%d pods of lane=gpu placed at once; the capacity is 2", most)
	}
	if most == 0 {
		t.Fatal("the watch saw no pod placed")
	}
}
