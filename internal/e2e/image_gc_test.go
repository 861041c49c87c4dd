package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	tclient "go.temporal.io/sdk/client"

	"github.com/zonewright/zonewright/internal/controlops"
	"github.com/zonewright/zonewright/internal/controlplane"
	"github.com/zonewright/zonewright/internal/imagegc"
	"github.com/zonewright/zonewright/internal/model"
	"github.com/zonewright/zonewright/workflows"
	"github.com/zonewright/zonewright/workflows/taskqueue"
)

// setPoolSize gives node i's simulated pool tank the size a pool of
// capacity bytes (used plus available, after ZFS's 1/32 slop) has.
func (c *cluster) setPoolSize(i int, capacity int64) {
	c.t.Helper()
	file := filepath.Join(c.nodes.Nodes[i].Root, "host.json")
	facts := map[string]any{}
	if b, err := os.ReadFile(file); err == nil {
		if err := json.Unmarshal(b, &facts); err != nil {
			c.t.Fatal(err)
		}
	}
	facts["pools"] = []map[string]any{{"name": "tank", "size": capacity * 32 / 31}}
	b, _ := json.Marshal(facts)
	if err := os.WriteFile(file, b, 0o644); err != nil {
		c.t.Fatal(err)
	}
}

// poolUsed is what node i's pool tank holds, as zfs says.
func (c *cluster) poolUsed(i int) int64 {
	c.t.Helper()
	out, code := c.simCmd(i, "zfs", "get", "-Hp", "-o", "value", "used", "tank")
	n, err := strconv.ParseInt(strings.TrimSpace(out), 10, 64)
	if code != 0 || err != nil {
		c.t.Fatalf("zfs get used tank on node %d: %d %q", i, code, out)
	}
	return n
}

// A node whose pool passes the high threshold loses its unused images,
// least recently used first, until the estimate is below the low
// threshold; the image its running pod uses stays, and so does every image
// of the other node. A pod of a removed image pulls it again and runs.
//
// It fails with the guards dropped: without the InUse filter in
// imagegc.Choose (the slices.DeleteFunc line) disk-a, in use and older
// than disk-b, is chosen second, ReleaseImageNode keeps it, and disk-b
// stays; without the sort on LastUsed the choice goes by name and removes
// disk-b and disk-c while disk-d stays; without ReleaseImageNode's
// delete (store.ReleaseImageNode's DELETE) node-1 still lists the removed
// images and the later pod never pulls again.
func TestImageGCRemovesUnusedImagesLeastRecentlyUsedFirst(t *testing.T) {
	t.Parallel()
	th := imagegc.Thresholds{High: 90, Low: 70}
	c := newClusterWith(t, 2, func(cfg *controlplane.Config) { cfg.ImageGC = th })
	files := newImageFiles(t)
	const size = 16 << 20 // a volume's refreservation: what it costs the pool
	disks := []string{"disk-a", "disk-b", "disk-c", "disk-d"}
	for i, name := range disks {
		url, digest := files.add(name, &served{body: randomBytes(size, uint64(i+1))})
		c.createImage(name, model.ImageBhyveDisk, url, digest, model.CompressionNone)
	}
	for _, name := range disks {
		c.waitImage(name, model.ImageReady, c.allNodes(model.ImageReady), 3*time.Minute)
	}
	pod := func(name, image string) {
		c.createPod(fmt.Sprintf(`{"metadata":{"name":%q},"spec":{"runtimeClassName":"bhyve","nodeName":"node-1",
		  "containers":[{"name":"app","image":%q,"command":["sleep","3600"],"resources":{"requests":{"cpu":"100m","memory":"64Mi"}}}]}}`, name, image))
		c.waitPhase(name, model.PodRunning, true, 2*time.Minute)
	}
	del := func(name string) {
		if code, b := c.do("DELETE", "/api/v1/namespaces/default/pods/"+name+"?gracePeriodSeconds=0", nil); code != 200 {
			t.Fatalf("delete pod %s: %d %s", name, code, b)
		}
		c.waitGone(name, time.Minute)
	}
	// Last used: disk-d when pulled, disk-a when its pod started (it
	// still runs), disk-b then disk-c when their pods went.
	pod("pod-a", "disk-a")
	pod("pod-b", "disk-b")
	pod("pod-c", "disk-c")
	del("pod-b")
	del("pod-c")

	// Node-1's pool shrinks so that it is 95% used: above the high
	// threshold, and two images (but not one) bring it below the low one.
	used := c.poolUsed(0)
	capacity := used * 100 / 95
	if after := func(n int64) int64 { return (used - n*size) * 100 / capacity }; after(1) < int64(th.Low) || after(2) >= int64(th.Low) {
		t.Fatalf("the pool's other contents (%d bytes used in all) leave no room for the test's arithmetic", used)
	}
	c.setPoolSize(0, capacity)
	c.eventually(time.Minute, "node-1 reporting its pool at or above the high threshold", func() bool {
		var n model.Node
		c.get("/api/v1/nodes/node-1", &n)
		u, err1 := strconv.ParseInt(n.Metadata.Annotations[model.AnnotationNodeImagePoolUsed], 10, 64)
		s, err2 := strconv.ParseInt(n.Metadata.Annotations[model.AnnotationNodeImagePoolSize], 10, 64)
		return err1 == nil && err2 == nil && s > 0 && u*100 >= int64(th.High)*s
	})
	c.eventually(time.Minute, "the image GC schedule triggered", func() bool {
		return c.temporal.ScheduleClient().GetHandle(context.Background(), workflows.ImageGCScheduleID).
			Trigger(context.Background(), tclient.ScheduleTriggerOptions{}) == nil
	})

	onNode1 := func(name string) bool {
		img, _ := c.image(name)
		_, ok := img.Status.Node("node-1")
		return ok
	}
	c.eventually(2*time.Minute, "disk-d and disk-b gone from node-1", func() bool {
		return !onNode1("disk-d") && !onNode1("disk-b") && len(c.imageOnNode(0, "disk-d")) == 0 && len(c.imageOnNode(0, "disk-b")) == 0
	})
	for _, kept := range []string{"disk-a", "disk-c"} {
		if !onNode1(kept) || len(c.imageOnNode(0, kept)) == 0 {
			t.Errorf("%s must stay on node-1 (in use, or not needed to get below the low threshold)", kept)
		}
	}
	for _, name := range disks {
		if img, _ := c.image(name); !onNode2Ready(img) || len(c.imageOnNode(1, name)) == 0 {
			t.Errorf("%s must stay on node-2, whose pool is not full: %+v", name, img.Status.Nodes)
		}
	}
	if p, _ := c.pod("pod-a"); p.Status.Phase != model.PodRunning || !isReady(p) {
		t.Errorf("pod-a, whose image stays, must keep running: %s", p.Status.Phase)
	}
	// The events follow the node's removals: the images leave node-1's
	// status when their removal begins.
	var evs []model.Event
	c.eventually(time.Minute, "a Normal event on node-1 for each image removed", func() bool {
		evs = c.nodeEvents("node-1", controlops.ReasonImageGarbageCollected)
		return len(evs) >= 2
	})
	if len(evs) != 2 || !strings.Contains(evs[0].Message+evs[1].Message, "disk-d") || !strings.Contains(evs[0].Message+evs[1].Message, "disk-b") {
		t.Errorf("a Normal event on node-1 for each image removed: %+v", evs)
	}

	// The node sync does not bring them back (without the collected
	// pairs in controlops.SyncNodeImages it starts 2 pulls here)...
	run, err := c.temporal.ExecuteWorkflow(context.Background(), tclient.StartWorkflowOptions{ID: "test-image-sync", TaskQueue: taskqueue.Control},
		workflows.ImageSyncWorkflowName)
	if err != nil {
		t.Fatal(err)
	}
	var started int
	if err := run.Get(context.Background(), &started); err != nil || started != 0 {
		t.Errorf("the node sync started %d pulls (%v); what image GC removed comes back with a pod only", started, err)
	}

	// ...a pod of a removed image pulls it again and runs.
	pod("pod-b2", "disk-b")
	if img, _ := c.image("disk-b"); !onNode1("disk-b") || len(c.imageOnNode(0, "disk-b")) == 0 {
		t.Errorf("disk-b must be on node-1 again: %+v", img.Status.Nodes)
	}
}

func onNode2Ready(img model.Image) bool {
	ns, ok := img.Status.Node("node-2")
	return ok && ns.Phase == model.ImageReady
}
