package e2e_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/zonewright/zonewright/internal/model"
)

// bhyvePodBody is a bhyve pod booting image vm-disk with claim as its
// disk; the container runs command (sh -c), its readiness probe probe.
func bhyvePodBody(t *testing.T, name, claim, command, probe string) string {
	t.Helper()
	ct := map[string]any{"name": "guest", "image": "vm-disk", "command": []string{"sh", "-c", command},
		"volumeDevices": []map[string]string{{"name": "disk", "devicePath": "/dev/vdb"}},
		"resources":     map[string]any{"requests": map[string]string{"cpu": "100m", "memory": "64Mi"}}}
	if probe != "" {
		ct["readinessProbe"] = map[string]any{"exec": map[string]any{"command": []string{"sh", "-c", probe}}, "periodSeconds": 1}
	}
	b, err := json.Marshal(map[string]any{"metadata": map[string]string{"name": name}, "spec": map[string]any{
		"runtimeClassName": "bhyve",
		"volumes":          []map[string]any{{"name": "disk", "persistentVolumeClaim": map[string]string{"claimName": claim}}},
		"containers":       []any{ct}}})
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// A bhyve pod's claim is a zvol delegated to its zone as a disk: what the
// guest writes there its replacement reads; it grows online (volsize);
// its snapshot restores as a disk; once bound as a disk, a zone pod
// cannot mount it, and a bhyve pod takes neither mounts nor emptyDirs.
func TestBhyvePodKeepsItsDiskClaim(t *testing.T) {
	t.Parallel()
	c := newCluster(t, 1)
	files := newImageFiles(t)
	url, digest := files.add("vm", &served{body: randomBytes(1<<20, 9)})
	c.createImage("vm-disk", model.ImageBhyveDisk, url, digest, "")
	code, b := c.do("POST", "/api/v1/namespaces/default/persistentvolumeclaims",
		`{"metadata":{"name":"disk"},"spec":{"resources":{"requests":{"storage":"16Mi"}}}}`)
	var pvc model.PersistentVolumeClaim
	if code != http.StatusCreated || json.Unmarshal(b, &pvc) != nil {
		t.Fatalf("create claim: %d %s", code, b)
	}
	vol := "tank/zonewright/volumes/" + pvc.Metadata.UID
	// The simulator keeps a volume's data in its device file; the guest
	// (a process of the simulated zone) reaches it through the root.
	guestDev := "$ILLUMOS_SIM_ROOT/fs/dev/zvol/rdsk/" + vol
	dev := filepath.Join(c.nodes.Nodes[0].Root, "fs/dev/zvol/rdsk", vol)

	for _, bad := range []struct{ body, field string }{
		{`{"metadata":{"name":"bad"},"spec":{"runtimeClassName":"bhyve","volumes":[{"name":"disk","persistentVolumeClaim":{"claimName":"disk"}}],
			"containers":[{"name":"guest","image":"vm-disk","volumeMounts":[{"name":"disk","mountPath":"/data"}]}]}}`, "spec.containers[0].volumeMounts"},
		{`{"metadata":{"name":"bad"},"spec":{"runtimeClassName":"bhyve","volumes":[{"name":"disk","persistentVolumeClaim":{"claimName":"disk"}},{"name":"tmp","emptyDir":{}}],
			"containers":[{"name":"guest","image":"vm-disk"}]}}`, "spec.volumes[1].emptyDir"},
		{`{"metadata":{"name":"bad"},"spec":{"volumes":[{"name":"disk","persistentVolumeClaim":{"claimName":"disk"}}],
			"containers":[{"name":"app","image":"base","volumeDevices":[{"name":"disk","devicePath":"/dev/vdb"}]}]}}`, "spec.containers[0].volumeDevices[0]"},
	} {
		if code, b := c.do("POST", "/api/v1/namespaces/default/pods", bad.body); code != http.StatusUnprocessableEntity || !strings.Contains(string(b), bad.field) {
			t.Errorf("%s: %d %s, want 422 naming %s", bad.field, code, b, bad.field)
		}
	}

	c.waitImage("vm-disk", model.ImageReady, c.allNodes(model.ImageReady), 2*time.Minute)
	c.createPod(bhyvePodBody(t, "vm", "disk",
		`printf 'written by the guest' | dd of="`+guestDev+`" conv=notrunc 2>/dev/null; exec sleep 3600`, ""))
	c.waitPhase("vm", model.PodRunning, false, 2*time.Minute)
	pvc, _ = c.claim("disk")
	if pvc.Status.Phase != model.ClaimBound || pvc.Status.VolumeMode != model.VolumeBlock {
		t.Fatalf("the claim of a bhyve pod: %+v, want Bound as a Block volume", pvc.Status)
	}
	if out, err := simZFS(c, 0, "get", "-Hp", "-o", "value", "type,volsize,zonewright:claim", vol); err != nil || strings.Fields(out)[0] != "volume" ||
		strings.Fields(out)[1] != "16777216" || strings.Fields(out)[2] != "default/disk" {
		t.Fatalf("the claim's dataset: %q %v, want a volume of 16 MiB named for its claim", out, err)
	}
	s, _ := c.state(0)
	var zone string
	for _, z := range s.Zones {
		if z.Name != "global" {
			zone = z.Name
		}
	}
	if out, err := exec.Command(filepath.Join(c.nodes.Nodes[0].BinDir, "zonecfg"), "-z", zone, "info", "device").Output(); err != nil ||
		!strings.Contains(string(out), "match: /dev/zvol/rdsk/"+vol) {
		t.Fatalf("the zone's devices: %q %v, want the claim's zvol", out, err)
	}
	c.eventually(15*time.Second, "the guest's data on the volume", func() bool {
		b, _ := os.ReadFile(dev)
		return strings.HasPrefix(string(b), "written by the guest")
	})

	// Bound as a disk, the claim is no file system for a zone pod.
	if code, b := c.do("POST", "/api/v1/namespaces/default/pods", `{"metadata":{"name":"zone"},"spec":{"volumes":[{"name":"d","persistentVolumeClaim":{"claimName":"disk"}}],
		"containers":[{"name":"app","image":"base","command":["sleep","3600"],"volumeMounts":[{"name":"d","mountPath":"/d"}]}]}}`); code != http.StatusUnprocessableEntity ||
		!strings.Contains(string(b), "spec.volumes[0].persistentVolumeClaim.claimName") || !strings.Contains(string(b), "block volume") {
		t.Errorf("a zone pod mounting a disk claim: %d %s, want 422", code, b)
	}

	// Growing sets volsize while the guest runs; the data stays.
	pvc.Spec.Resources.Requests[model.ResourceStorage] = "32Mi"
	body, _ := json.Marshal(pvc)
	if code, b := c.do("PUT", "/api/v1/namespaces/default/persistentvolumeclaims/disk", string(body)); code != http.StatusOK {
		t.Fatalf("grow: %d %s", code, b)
	}
	c.eventually(30*time.Second, "the grown size applied on the node", func() bool {
		pvc, _ := c.claim("disk")
		return pvc.Status.Capacity[model.ResourceStorage] == "32Mi" && len(pvc.Status.Conditions) == 0
	})
	if out, err := simZFS(c, 0, "get", "-Hp", "-o", "value", "volsize", vol); err != nil || strings.TrimSpace(out) != "33554432" {
		t.Fatalf("volsize after growing: %q %v", out, err)
	}
	if fi, err := os.Stat(dev); err != nil || fi.Size() != 32<<20 {
		t.Fatalf("the device after growing: %v %v", fi, err)
	}

	// The replacement's guest reads what the first wrote.
	c.do("DELETE", "/api/v1/namespaces/default/pods/vm?gracePeriodSeconds=0", nil)
	c.waitGone("vm", time.Minute)
	if !c.hasDataset(0, vol) {
		t.Fatal("the claim's volume went with its pod")
	}
	c.createPod(bhyvePodBody(t, "vm2", "disk", "exec sleep 3600",
		fmt.Sprintf(`head -c 20 "%s" | grep -q 'written by the guest'`, guestDev)))
	c.waitPhase("vm2", model.PodRunning, true, 2*time.Minute)

	// A snapshot of the disk restores as a disk, for bhyve pods only.
	const snapURL = "/apis/snapshot.storage.k8s.io/v1/namespaces/default/volumesnapshots"
	if code, b := c.do("POST", snapURL, `{"metadata":{"name":"disk-snap"},"spec":{"source":{"persistentVolumeClaimName":"disk"}}}`); code != http.StatusCreated {
		t.Fatalf("snapshot: %d %s", code, b)
	}
	c.eventually(20*time.Second, "the snapshot ready to use", func() bool { s, _ := c.snapshot("disk-snap"); return s.Ready() })
	c.do("POST", "/api/v1/namespaces/default/persistentvolumeclaims", `{"metadata":{"name":"disk-copy"},"spec":{"resources":{"requests":{"storage":"32Mi"}},
		"dataSource":{"apiGroup":"snapshot.storage.k8s.io","kind":"VolumeSnapshot","name":"disk-snap"}}}`)
	c.createPod(`{"metadata":{"name":"zone"},"spec":{"volumes":[{"name":"d","persistentVolumeClaim":{"claimName":"disk-copy"}}],
		"containers":[{"name":"app","image":"base","command":["sleep","3600"],"volumeMounts":[{"name":"d","mountPath":"/d"}]}]}}`)
	c.eventually(15*time.Second, "a zone pod of a disk's clone waiting, saying why", func() bool {
		return strings.Contains(c.events("zone"), "a zone pod needs a filesystem volume")
	})
	c.do("DELETE", "/api/v1/namespaces/default/pods/zone?gracePeriodSeconds=0", nil)
	c.waitGone("zone", time.Minute)
	copyUID := mustClaimUID(c, "disk-copy")
	c.createPod(bhyvePodBody(t, "vm3", "disk-copy", "exec sleep 3600",
		`head -c 20 "$ILLUMOS_SIM_ROOT/fs/dev/zvol/rdsk/tank/zonewright/volumes/`+copyUID+`" | grep -q 'written by the guest'`))
	c.waitPhase("vm3", model.PodRunning, true, 2*time.Minute)
	if pvc, _ := c.claim("disk-copy"); pvc.Status.VolumeMode != model.VolumeBlock {
		t.Errorf("the disk's clone bound as %q", pvc.Status.VolumeMode)
	}

	for _, p := range []string{"vm2", "vm3"} {
		c.do("DELETE", "/api/v1/namespaces/default/pods/"+p+"?gracePeriodSeconds=0", nil)
		c.waitGone(p, time.Minute)
	}
	c.do("DELETE", "/api/v1/namespaces/default/persistentvolumeclaims/disk-copy", nil)
	c.do("DELETE", snapURL+"/disk-snap", nil)
	c.do("DELETE", "/api/v1/namespaces/default/persistentvolumeclaims/disk", nil)
	c.eventually(time.Minute, "the claims, the snapshot and the volumes gone", func() bool {
		_, code := c.claim("disk")
		_, code2 := c.claim("disk-copy")
		_, err := os.Stat(dev)
		out, _ := simZFS(c, 0, "list", "-H", "-t", "all", "-o", "name")
		return code == http.StatusNotFound && code2 == http.StatusNotFound && os.IsNotExist(err) &&
			!strings.Contains(out, pvc.Metadata.UID) && !strings.Contains(out, copyUID)
	})
}

// A claim restored from a snapshot whose node cannot take its pod (here
// cordoned) is copied to the node the pod goes to: send of the snapshot,
// receive there as the claim's own dataset. It holds the snapshot's data,
// not what the source wrote later.
func TestACloneIsCopiedToTheNodeItsPodRunsOn(t *testing.T) {
	t.Parallel()
	c := newCluster(t, 2)
	home := c.nodes.Nodes[0].Name
	c.do("POST", "/api/v1/namespaces/default/persistentvolumeclaims",
		`{"metadata":{"name":"src"},"spec":{"resources":{"requests":{"storage":"32Mi"}}}}`)
	c.createPod(`{"metadata":{"name":"w"},"spec":{"nodeName":"` + home + `","volumes":[{"name":"d","persistentVolumeClaim":{"claimName":"src"}}],
		"containers":[{"name":"app","image":"base","command":["sh","-c","echo v1 > d/v && exec sleep 3600"],"volumeMounts":[{"name":"d","mountPath":"/d"}]}]}}`)
	c.waitPhase("w", model.PodRunning, false, 90*time.Second)
	srcUID := mustClaimUID(c, "src")
	srcFile := filepath.Join(c.nodes.Nodes[0].Root, "fs/tank/zonewright/volumes", srcUID, "v")
	c.eventually(10*time.Second, "v1 written", func() bool { b, _ := os.ReadFile(srcFile); return string(b) == "v1\n" })
	const snapURL = "/apis/snapshot.storage.k8s.io/v1/namespaces/default/volumesnapshots"
	if code, b := c.do("POST", snapURL, `{"metadata":{"name":"s1"},"spec":{"source":{"persistentVolumeClaimName":"src"}}}`); code != http.StatusCreated {
		t.Fatalf("snapshot: %d %s", code, b)
	}
	var snap model.VolumeSnapshot
	c.eventually(20*time.Second, "the snapshot ready to use", func() bool {
		snap, _ = c.snapshot("s1")
		return snap.Ready()
	})
	if err := os.WriteFile(srcFile, []byte("v2\n"), 0o644); err != nil { // the source moves on
		t.Fatal(err)
	}

	// The snapshot's node takes no new pods: the clone goes elsewhere.
	c.do("POST", "/api/v1/nodes/"+home+"/cordon", nil)
	c.do("POST", "/api/v1/namespaces/default/persistentvolumeclaims", `{"metadata":{"name":"copy"},"spec":{"resources":{"requests":{"storage":"48Mi"}},
		"dataSource":{"apiGroup":"snapshot.storage.k8s.io","kind":"VolumeSnapshot","name":"s1"}}}`)
	c.createPod(`{"metadata":{"name":"r"},"spec":{"volumes":[{"name":"d","persistentVolumeClaim":{"claimName":"copy"}}],
		"containers":[{"name":"app","image":"base","command":["sleep","3600"],"volumeMounts":[{"name":"d","mountPath":"/d"}],
			"readinessProbe":{"exec":{"command":["grep","-qx","v1","d/v"]},"periodSeconds":1}}]}}`)
	r := c.waitPhase("r", model.PodRunning, true, 2*time.Minute)
	if r.Spec.NodeName == home {
		t.Fatalf("the clone's pod runs on the cordoned node %s", home)
	}
	far := c.nodeIndex(r.Spec.NodeName)
	pvc, _ := c.claim("copy")
	if pvc.Status.NodeName != r.Spec.NodeName || pvc.Status.Phase != model.ClaimBound || pvc.Status.SourceSnapshotUID != snap.Metadata.UID {
		t.Fatalf("the clone: %+v, want Bound on %s from snapshot %s", pvc.Status, r.Spec.NodeName, snap.Metadata.UID)
	}
	if !strings.Contains(c.events("copy"), "ClaimCloned") {
		t.Errorf("no ClaimCloned event on the clone: %s", c.events("copy"))
	}
	copyDS := "tank/zonewright/volumes/" + pvc.Metadata.UID
	if b, _ := os.ReadFile(filepath.Join(c.nodes.Nodes[far].Root, "fs", copyDS, "v")); string(b) != "v1\n" {
		t.Fatalf("the clone on %s holds %q, want the snapshot's v1", r.Spec.NodeName, b)
	}
	if b, _ := os.ReadFile(srcFile); string(b) != "v2\n" {
		t.Fatalf("the source holds %q, want its own v2", b)
	}
	if out, err := simZFS(c, far, "get", "-Hp", "-o", "value", "quota,zonewright:claim,zonewright:claim-uid", copyDS); err != nil ||
		strings.Join(strings.Fields(out), " ") != "50331648 default/copy "+pvc.Metadata.UID {
		t.Errorf("the clone's dataset: %q %v, want its own size and names", out, err)
	}
	c.eventually(30*time.Second, "the copy's move ended and its received snapshot gone", func() bool {
		pvc, _ := c.claim("copy")
		out, _ := simZFS(c, far, "list", "-H", "-t", "snapshot", "-o", "name")
		return pvc.Status.Move == nil && !strings.Contains(out, pvc.Metadata.UID+"@")
	})

	c.do("DELETE", "/api/v1/namespaces/default/pods/r?gracePeriodSeconds=0", nil)
	c.waitGone("r", time.Minute)
	c.do("DELETE", "/api/v1/namespaces/default/persistentvolumeclaims/copy", nil)
	c.eventually(30*time.Second, "the clone and its dataset gone", func() bool {
		_, code := c.claim("copy")
		return code == http.StatusNotFound && !c.hasDataset(far, copyDS)
	})
}
