package e2e_test

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/zonewright/zonewright/internal/model"
	"github.com/zonewright/zonewright/workflows"
	"github.com/zonewright/zonewright/workflows/podcontract"
)

func (c *cluster) claim(name string) (model.PersistentVolumeClaim, int) {
	c.t.Helper()
	var pvc model.PersistentVolumeClaim
	code := c.get("/api/v1/namespaces/default/persistentvolumeclaims/"+name, &pvc)
	return pvc, code
}

func (c *cluster) hasDataset(node int, name string) bool {
	s, _ := c.state(node)
	for _, d := range s.Datasets {
		if d.Name == name {
			return true
		}
	}
	return false
}

// A claim binds to the node of its first pod; what one pod writes there
// the next pod reads, wherever it would otherwise have gone; an emptyDir
// goes with its pod; deleting a claim in use waits for its last pod, then
// its node destroys the data.
func TestClaimDataOutlivesItsPods(t *testing.T) {
	t.Parallel()
	c := newCluster(t, 2)
	if code, b := c.do("POST", "/api/v1/namespaces/default/persistentvolumeclaims",
		`{"metadata":{"name":"data"},"spec":{"resources":{"requests":{"storage":"64Mi"}}}}`); code != http.StatusCreated {
		t.Fatalf("create claim: %d %s", code, b)
	}
	if pvc, _ := c.claim("data"); pvc.Status.Phase != model.ClaimPending || pvc.Spec.AccessModes[0] != model.AccessModeReadWriteOnce ||
		pvc.Spec.PersistentVolumeReclaimPolicy != model.ReclaimDelete {
		t.Fatalf("a new claim: %+v", pvc)
	}
	for _, bad := range []struct{ body, field string }{
		{`{"metadata":{"name":"x"},"spec":{"accessModes":["ReadWriteMany"],"resources":{"requests":{"storage":"1Gi"}}}}`, "spec.accessModes[0]"},
		{`{"metadata":{"name":"x"},"spec":{"resources":{"requests":{}}}}`, "spec.resources.requests.storage"},
		{`{"metadata":{"name":"x"},"spec":{"resources":{"requests":{"storage":"-1"}}}}`, "spec.resources.requests.storage"},
	} {
		if code, b := c.do("POST", "/api/v1/namespaces/default/persistentvolumeclaims", bad.body); code != http.StatusUnprocessableEntity || !strings.Contains(string(b), bad.field) {
			t.Errorf("%s: %d %s, want 422 naming %s", bad.body, code, b, bad.field)
		}
	}
	if code, b := c.do("POST", "/api/v1/namespaces/default/pods", `{"metadata":{"name":"bad"},"spec":{
		"volumes":[{"name":"data","persistentVolumeClaim":{"claimName":"data"}}],
		"containers":[{"name":"app","image":"base","command":["true"],"volumeMounts":[{"name":"nope","mountPath":"/data"},{"name":"data","mountPath":"rel"}]}]}}`); code != http.StatusUnprocessableEntity ||
		!strings.Contains(string(b), "spec.containers[0].volumeMounts[0].name") || !strings.Contains(string(b), "spec.containers[0].volumeMounts[1].mountPath") {
		t.Errorf("a pod mounting an unknown volume at a relative path: %d %s", code, b)
	}

	// The writer: its claim and an emptyDir. Processes of a simulated
	// zone run in the zone root, so data/… is the zone's /data/….
	c.createPod(`{"metadata":{"name":"writer"},"spec":{
		"volumes":[{"name":"data","persistentVolumeClaim":{"claimName":"data"}},{"name":"scratch","emptyDir":{"sizeLimit":"16Mi"}}],
		"containers":[{"name":"app","image":"base","command":["sh","-c","echo hello from $POD_NAME > data/greeting && echo x > scratch/x && exec sleep 3600"],
			"volumeMounts":[{"name":"data","mountPath":"/data"},{"name":"scratch","mountPath":"/scratch"}]}]}}`)
	w := c.waitPhase("writer", model.PodRunning, true, 90*time.Second)
	pvc, _ := c.claim("data")
	if pvc.Status.Phase != model.ClaimBound || pvc.Status.NodeName != w.Spec.NodeName || pvc.Status.Capacity[model.ResourceStorage] != "64Mi" {
		t.Fatalf("the claim after its first pod (on %s): %+v", w.Spec.NodeName, pvc.Status)
	}
	node := c.nodeIndex(w.Spec.NodeName)
	dataset := "tank/zonewright/volumes/" + pvc.Metadata.UID
	greeting := filepath.Join(c.nodes.Nodes[node].Root, "fs", dataset, "greeting")
	c.eventually(10*time.Second, "the writer's greeting in the claim's dataset", func() bool {
		b, _ := os.ReadFile(greeting)
		return string(b) == "hello from writer\n"
	})
	_, st := c.state(node)
	if !strings.Contains(st, "/vol-scratch") {
		t.Fatalf("no emptyDir dataset for the writer: %s", st)
	}

	// Every other node is excluded for the claim's next pod: cordon the
	// claim's node and the reader waits rather than going elsewhere.
	c.do("POST", "/api/v1/nodes/"+w.Spec.NodeName+"/cordon", nil)
	c.do("DELETE", "/api/v1/namespaces/default/pods/writer?gracePeriodSeconds=0", nil)
	c.waitGone("writer", 60*time.Second)
	if !c.hasDataset(node, dataset) {
		t.Fatal("the claim's dataset went with its pod")
	}
	if _, st := c.state(node); strings.Contains(st, "/vol-scratch") {
		t.Fatalf("the emptyDir outlived its pod: %s", st)
	}
	c.createPod(`{"metadata":{"name":"reader"},"spec":{
		"volumes":[{"name":"data","persistentVolumeClaim":{"claimName":"data","readOnly":true}}],
		"containers":[{"name":"app","image":"base","command":["sleep","3600"],"volumeMounts":[{"name":"data","mountPath":"/srv/data"}],
			"readinessProbe":{"exec":{"command":["grep","-q","hello from writer","srv/data/greeting"]},"periodSeconds":1}}]}}`)
	c.eventually(15*time.Second, "the reader Pending on the cordoned node holding its claim", func() bool {
		p, _ := c.pod("reader")
		return p.Spec.NodeName == "" && strings.Contains(c.events("reader"), "volume node affinity conflict")
	})
	c.do("POST", "/api/v1/nodes/"+w.Spec.NodeName+"/uncordon", nil)
	r := c.waitPhase("reader", model.PodRunning, true, 3*time.Minute)
	if r.Spec.NodeName != w.Spec.NodeName {
		t.Fatalf("the reader runs on %s, its claim's data is on %s", r.Spec.NodeName, w.Spec.NodeName)
	}

	// Deleting the claim while the reader uses it only marks it.
	if code, b := c.do("DELETE", "/api/v1/namespaces/default/persistentvolumeclaims/data", nil); code != http.StatusOK {
		t.Fatalf("delete the claim: %d %s", code, b)
	}
	time.Sleep(time.Second)
	if pvc, code := c.claim("data"); code != http.StatusOK || pvc.Metadata.DeletionTimestamp == nil || !c.hasDataset(node, dataset) {
		t.Fatalf("a claim in use was not kept (status %d): %+v", code, pvc.Metadata)
	}
	c.createPod(`{"metadata":{"name":"late"},"spec":{"volumes":[{"name":"data","persistentVolumeClaim":{"claimName":"data"}}],
		"containers":[{"name":"app","image":"base","command":["sleep","3600"],"volumeMounts":[{"name":"data","mountPath":"/data"}]}]}}`)
	c.eventually(15*time.Second, "a new pod of a claim being deleted to wait", func() bool {
		return strings.Contains(c.events("late"), `persistentvolumeclaim "data" is being deleted`)
	})
	c.do("DELETE", "/api/v1/namespaces/default/pods/late?gracePeriodSeconds=0", nil)
	c.do("DELETE", "/api/v1/namespaces/default/pods/reader?gracePeriodSeconds=0", nil)
	c.waitGone("reader", 60*time.Second)
	c.eventually(30*time.Second, "the claim and its dataset gone after its last pod", func() bool {
		_, code := c.claim("data")
		return code == http.StatusNotFound && !c.hasDataset(node, dataset)
	})
	c.recordHistory(workflows.ClaimWorkflowID("default", "data"), "claim-deleted-after-last-pod.json")
	c.recordHistory(podcontract.WorkflowID("default", "reader"), "pod-claim-reader.json")
}

// A claim bound to a node grows online: the node raises the dataset's
// quota and status.capacity follows. Shrinking is refused.
func TestClaimGrowsOnline(t *testing.T) {
	t.Parallel()
	c := newCluster(t, 1)
	c.do("POST", "/api/v1/namespaces/default/persistentvolumeclaims",
		`{"metadata":{"name":"db"},"spec":{"resources":{"requests":{"storage":"32Mi"}}}}`)
	c.createPod(`{"metadata":{"name":"db"},"spec":{"volumes":[{"name":"db","persistentVolumeClaim":{"claimName":"db"}}],
		"containers":[{"name":"app","image":"base","command":["sleep","3600"],"volumeMounts":[{"name":"db","mountPath":"/var/db"}]}]}}`)
	c.waitPhase("db", model.PodRunning, false, 90*time.Second)
	pvc, _ := c.claim("db")
	grow := func(size string) (int, []byte) {
		pvc.Spec.Resources.Requests[model.ResourceStorage] = size
		b, _ := json.Marshal(pvc)
		return c.do("PUT", "/api/v1/namespaces/default/persistentvolumeclaims/db", string(b))
	}
	if code, b := grow("16Mi"); code != http.StatusUnprocessableEntity || !strings.Contains(string(b), "spec.resources.requests.storage") {
		t.Fatalf("shrink: %d %s", code, b)
	}
	code, b := grow("128Mi")
	var grown model.PersistentVolumeClaim
	if code != http.StatusOK || json.Unmarshal(b, &grown) != nil || len(grown.Status.Conditions) != 1 ||
		grown.Status.Conditions[0].Type != model.ClaimResizing || grown.Status.Conditions[0].Status != model.ConditionTrue {
		t.Fatalf("grow: %d %s, want the Resizing condition", code, b)
	}
	c.eventually(30*time.Second, "the grown size applied on the node", func() bool {
		pvc, _ := c.claim("db")
		return pvc.Status.Capacity[model.ResourceStorage] == "128Mi" && len(pvc.Status.Conditions) == 0
	})
	c.recordHistory(workflows.ClaimWorkflowID("default", "db"), "claim-grown.json")
	out, err := simZFS(c, 0, "get", "-Hp", "-o", "value", "quota", "tank/zonewright/volumes/"+pvc.Metadata.UID)
	if err != nil || strings.TrimSpace(out) != "134217728" {
		t.Fatalf("the dataset's quota: %q %v, want 134217728", out, err)
	}
}

// simZFS runs zfs on the simulated node.
func simZFS(c *cluster, node int, args ...string) (string, error) {
	out, err := exec.Command(filepath.Join(c.nodes.Nodes[node].BinDir, "zfs"), args...).Output()
	return string(out), err
}

// A claim whose node is lost is Lost: its pod, evicted, waits Pending
// rather than start elsewhere without its data, and runs on the node with
// its data once the node is back.
func TestLostNodeLosesItsClaimsUntilItReturns(t *testing.T) {
	t.Parallel()
	const grace, eviction = 3 * time.Second, 2 * time.Second
	c := nodeHealthCluster(t, 2, grace, eviction)
	victim := c.nodes.Nodes[0].Name
	c.do("POST", "/api/v1/namespaces/default/persistentvolumeclaims",
		`{"metadata":{"name":"state"},"spec":{"resources":{"requests":{"storage":"16Mi"}}}}`)
	c.createPod(`{"metadata":{"name":"keeper"},"spec":{"nodeName":"` + victim + `",
		"volumes":[{"name":"state","persistentVolumeClaim":{"claimName":"state"}}],
		"containers":[{"name":"app","image":"base","command":["sh","-c","echo kept >> state/log && exec sleep 3600"],
			"volumeMounts":[{"name":"state","mountPath":"/state"}]}]}}`)
	c.waitPhase("keeper", model.PodRunning, false, 90*time.Second)

	c.nodes.Kill(0)
	c.eventually(grace+15*time.Second, "the claim Lost", func() bool {
		pvc, _ := c.claim("state")
		return pvc.Status.Phase == model.ClaimLost && pvc.Status.NodeName == victim
	})
	c.eventually(30*time.Second, "the evicted pod waiting for its claim", func() bool {
		p, _ := c.pod("keeper")
		return p.Status.Phase == model.PodPending && strings.Contains(c.events("keeper"), `persistentvolumeclaim "state" is Lost`)
	})
	if p, _ := c.pod("keeper"); p.Spec.NodeName != "" {
		t.Fatalf("the pod of a lost claim was placed on %s", p.Spec.NodeName)
	}

	if err := c.nodes.Restart(context.Background(), 0); err != nil {
		t.Fatal(err)
	}
	p := c.waitPhase("keeper", model.PodRunning, false, 2*time.Minute)
	if p.Spec.NodeName != victim {
		t.Fatalf("the pod runs on %s, its data is on %s", p.Spec.NodeName, victim)
	}
	if pvc, _ := c.claim("state"); pvc.Status.Phase != model.ClaimBound {
		t.Fatalf("the claim is %s with its node back", pvc.Status.Phase)
	}
	log := filepath.Join(c.nodes.Nodes[0].Root, "fs/tank/zonewright/volumes", mustClaimUID(c, "state"), "log")
	c.eventually(10*time.Second, "the second run appending to the first run's data", func() bool {
		b, _ := os.ReadFile(log)
		return string(b) == "kept\nkept\n"
	})
}

func mustClaimUID(c *cluster, name string) string {
	pvc, code := c.claim(name)
	if code != http.StatusOK {
		c.t.Fatalf("claim %s: %d", name, code)
	}
	return pvc.Metadata.UID
}

func (c *cluster) snapshot(name string) (model.VolumeSnapshot, int) {
	c.t.Helper()
	var s model.VolumeSnapshot
	code := c.get("/apis/snapshot.storage.k8s.io/v1/namespaces/default/volumesnapshots/"+name, &s)
	return s, code
}

// A snapshot freezes a claim's data; a claim restored from it is a clone
// with that data while the original moves on. Deletions wait for what
// depends on them: the source claim for its snapshot, the snapshot for
// its clone; then the whole chain goes, datasets and snapshots with it.
func TestSnapshotsAndClones(t *testing.T) {
	t.Parallel()
	c := newCluster(t, 2)
	c.do("POST", "/api/v1/namespaces/default/persistentvolumeclaims",
		`{"metadata":{"name":"src"},"spec":{"resources":{"requests":{"storage":"32Mi"}}}}`)
	const snapURL = "/apis/snapshot.storage.k8s.io/v1/namespaces/default/volumesnapshots"
	if code, b := c.do("POST", snapURL, `{"metadata":{"name":"early"},"spec":{"source":{"persistentVolumeClaimName":"src"}}}`); code != http.StatusConflict {
		t.Fatalf("a snapshot of a claim holding no data: %d %s, want 409", code, b)
	}
	if code, b := c.do("POST", snapURL, `{"metadata":{"name":"bad"},"spec":{"source":{}}}`); code != http.StatusUnprocessableEntity ||
		!strings.Contains(string(b), "spec.source.persistentVolumeClaimName") {
		t.Fatalf("a snapshot of nothing: %d %s", code, b)
	}
	c.createPod(`{"metadata":{"name":"w"},"spec":{"volumes":[{"name":"d","persistentVolumeClaim":{"claimName":"src"}}],
		"containers":[{"name":"app","image":"base","command":["sh","-c","echo v1 > d/v && exec sleep 3600"],"volumeMounts":[{"name":"d","mountPath":"/d"}]}]}}`)
	w := c.waitPhase("w", model.PodRunning, false, 90*time.Second)
	node := c.nodeIndex(w.Spec.NodeName)
	srcUID := mustClaimUID(c, "src")
	srcFile := filepath.Join(c.nodes.Nodes[node].Root, "fs/tank/zonewright/volumes", srcUID, "v")
	c.eventually(10*time.Second, "v1 written", func() bool { b, _ := os.ReadFile(srcFile); return string(b) == "v1\n" })

	if code, b := c.do("POST", snapURL, `{"apiVersion":"snapshot.storage.k8s.io/v1","kind":"VolumeSnapshot","metadata":{"name":"s1"},"spec":{"source":{"persistentVolumeClaimName":"src"}}}`); code != http.StatusCreated {
		t.Fatalf("snapshot: %d %s", code, b)
	}
	var snap model.VolumeSnapshot
	c.eventually(20*time.Second, "the snapshot ready to use", func() bool {
		snap, _ = c.snapshot("s1")
		return snap.Ready()
	})
	if snap.APIVersion != "snapshot.storage.k8s.io/v1" || snap.Status.RestoreSize != "32Mi" || snap.Status.CreationTime == nil || snap.Status.NodeName != w.Spec.NodeName {
		t.Fatalf("the snapshot: %+v %+v", snap.TypeMeta, snap.Status)
	}
	zfsSnap := "tank/zonewright/volumes/" + srcUID + "@" + snap.Metadata.UID
	if out, err := simZFS(c, node, "list", "-H", "-t", "snapshot", "-o", "name"); err != nil || !strings.Contains(out, zfsSnap) {
		t.Fatalf("no ZFS snapshot %s: %q %v", zfsSnap, out, err)
	}
	if err := os.WriteFile(srcFile, []byte("v2\n"), 0o644); err != nil { // the source moves on
		t.Fatal(err)
	}

	c.do("POST", "/api/v1/namespaces/default/persistentvolumeclaims", `{"metadata":{"name":"copy"},"spec":{"resources":{"requests":{"storage":"32Mi"}},
		"dataSource":{"apiGroup":"snapshot.storage.k8s.io","kind":"VolumeSnapshot","name":"s1"}}}`)
	c.createPod(`{"metadata":{"name":"r"},"spec":{"volumes":[{"name":"d","persistentVolumeClaim":{"claimName":"copy"}}],
		"containers":[{"name":"app","image":"base","command":["sleep","3600"],"volumeMounts":[{"name":"d","mountPath":"/d"}],
			"readinessProbe":{"exec":{"command":["grep","-qx","v1","d/v"]},"periodSeconds":1}}]}}`)
	r := c.waitPhase("r", model.PodRunning, true, 90*time.Second)
	if r.Spec.NodeName != w.Spec.NodeName {
		t.Fatalf("the clone's pod runs on %s, the snapshot is on %s", r.Spec.NodeName, w.Spec.NodeName)
	}
	copyUID := mustClaimUID(c, "copy")
	if b, _ := os.ReadFile(filepath.Join(c.nodes.Nodes[node].Root, "fs/tank/zonewright/volumes", copyUID, "v")); string(b) != "v1\n" {
		t.Fatalf("the clone holds %q, want the snapshot's v1", b)
	}
	if b, _ := os.ReadFile(srcFile); string(b) != "v2\n" {
		t.Fatalf("the source holds %q, want its own v2", b)
	}

	// Deleting from the bottom up: each waits for what depends on it.
	c.do("DELETE", "/api/v1/namespaces/default/pods/w?gracePeriodSeconds=0", nil)
	c.waitGone("w", time.Minute)
	c.do("DELETE", "/api/v1/namespaces/default/persistentvolumeclaims/src", nil)
	c.do("DELETE", snapURL+"/s1", nil)
	time.Sleep(time.Second)
	if _, code := c.claim("src"); code != http.StatusOK {
		t.Fatalf("the claim went while its snapshot exists (%d)", code)
	}
	if s, code := c.snapshot("s1"); code != http.StatusOK || s.Metadata.DeletionTimestamp == nil {
		t.Fatalf("the snapshot went while its clone exists (%d)", code)
	}
	c.do("DELETE", "/api/v1/namespaces/default/pods/r?gracePeriodSeconds=0", nil)
	c.waitGone("r", time.Minute)
	c.do("DELETE", "/api/v1/namespaces/default/persistentvolumeclaims/copy", nil)
	c.eventually(30*time.Second, "the clone, the snapshot and the source gone, on the node too", func() bool {
		_, a := c.claim("copy")
		_, b := c.snapshot("s1")
		_, d := c.claim("src")
		out, _ := simZFS(c, node, "list", "-H", "-t", "all", "-o", "name")
		return a == http.StatusNotFound && b == http.StatusNotFound && d == http.StatusNotFound &&
			!strings.Contains(out, srcUID) && !strings.Contains(out, copyUID)
	})
	c.recordHistory(workflows.SnapshotWorkflowID("default", "s1"), "snapshot-deleted-after-its-clone.json")
}
