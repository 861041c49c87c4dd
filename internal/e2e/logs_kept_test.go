package e2e_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/zonewright/zonewright/internal/agent"
	"github.com/zonewright/zonewright/internal/model"
)

// A finished container's output outlives its zone until its pod is
// deleted: a Job pod whose container failed once and then succeeded shows
// its last run and, with previous, the failed one after the zone is gone;
// the README's failing pod shows what it wrote; deleting the pods removes
// what the node kept of them.
func TestFinishedContainersLogsOutliveTheirZones(t *testing.T) {
	t.Parallel()
	c := newCluster(t, 1, "--reconcile-interval", "1s")

	// Run 1 fails, run 2 succeeds, restarted in place (OnFailure).
	if code, b := c.do("POST", jobsPath, `{"apiVersion":"batch/v1","kind":"Job","metadata":{"name":"twice"},"spec":{"backoffLimit":3,
	  "template":{"spec":{"restartPolicy":"OnFailure","containers":[{"name":"work","image":"base","command":["sh","-c",
	  "n=$(cat runs 2>/dev/null || echo 0); n=$((n+1)); echo $n > runs; echo \"run $n starts\"; if [ $n -lt 2 ]; then echo \"run $n fails\" >&2; exit 1; fi; echo \"run $n done\""]}]}}}}`); code != 201 {
		t.Fatalf("create the job: %d %s", code, b)
	}
	// The README's pod that cannot start.
	c.createPod(`{"metadata":{"name":"oops"},"spec":{"restartPolicy":"Never","containers":[{"name":"app","image":"base",
	  "command":["sh","-c","echo cannot find config.yaml >&2; exit 3"]}]}}`)
	c.waitJobCondition("twice", "Complete", 3*time.Minute)
	c.waitPhase("oops", model.PodFailed, false, 2*time.Minute)
	var list model.List[model.Pod]
	c.get("/api/v1/namespaces/default/pods?labelSelector=job-name%3Dtwice", &list)
	if len(list.Items) != 1 || list.Items[0].Status.Phase != model.PodSucceeded {
		t.Fatalf("the job's pods: %+v", list.Items)
	}
	jobPod := list.Items[0]
	if n := containerStatus(jobPod).RestartCount; n != 1 {
		t.Fatalf("the job's pod restarted its container %d times, want 1", n)
	}
	oops, _ := c.pod("oops")

	// Both pods ended: their zones are gone.
	c.eventually(time.Minute, "the finished pods' zones removed", func() bool {
		zones, _, _ := c.podResources(0)
		return zones == 0
	})

	jobBase := "/api/v1/namespaces/default/pods/" + jobPod.Metadata.Name
	if code, b := c.do("GET", jobBase+"/log", nil); code != 200 || string(b) != "run 2 starts\nrun 2 done\n" {
		t.Errorf("the completed job pod's log: %d %q", code, b)
	}
	if code, b := c.do("GET", jobBase+"/log?previous=true", nil); code != 200 || string(b) != "run 1 starts\nrun 1 fails\n" {
		t.Errorf("the completed job pod's previous log: %d %q", code, b)
	}
	// A kept log is not followed: the answer ends with the run's lines.
	if code, b := c.do("GET", jobBase+"/log?follow=true&tailLines=1", nil); code != 200 || string(b) != "run 2 done\n" {
		t.Errorf("following the completed job pod's log: %d %q", code, b)
	}
	const oopsBase = "/api/v1/namespaces/default/pods/oops"
	if code, b := c.do("GET", oopsBase+"/log", nil); code != 200 || string(b) != "cannot find config.yaml\n" {
		t.Errorf("the failed pod's log: %d %q", code, b)
	}
	if code, b := c.do("GET", oopsBase+"/log?previous=true", nil); code != 400 ||
		!strings.Contains(string(b), `previous terminated container \"app\" in pod \"oops\" not found`) {
		t.Errorf("the failed pod's previous log (it ran once): %d %s", code, b)
	}

	// Deleting the pods removes what the node kept of them.
	kept := filepath.Join(c.nodes.Nodes[0].StateDir, agent.KeptLogsDir)
	for _, uid := range []string{jobPod.Metadata.UID, oops.Metadata.UID} {
		if _, err := os.Stat(filepath.Join(kept, uid)); err != nil {
			t.Fatalf("the node keeps no logs of pod %s: %v", uid, err)
		}
	}
	for _, name := range []string{"oops", jobPod.Metadata.Name} {
		if code, b := c.do("DELETE", "/api/v1/namespaces/default/pods/"+name, nil); code != 200 {
			t.Fatalf("delete pod %s: %d %s", name, code, b)
		}
	}
	c.waitGone("oops", time.Minute)
	c.waitGone(jobPod.Metadata.Name, time.Minute)
	c.eventually(30*time.Second, "the deleted pods' kept logs removed", func() bool {
		ents, err := os.ReadDir(kept)
		return err == nil && len(ents) == 0
	})
}
