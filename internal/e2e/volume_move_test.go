package e2e_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"

	"github.com/zonewright/zonewright/internal/model"
	"github.com/zonewright/zonewright/workflows"
)

// movePodBody is a pod on claim "db" that writes mib MiB of random data
// once (Ready when done), then appends "<its IP> <time>" to ticks five
// times a second: what it wrote on one node shows in the copy on the
// other.
func movePodBody(t *testing.T, mib int) string {
	t.Helper()
	script := fmt.Sprintf(`[ -f data/done ] || { head -c %d /dev/urandom > data/blob && touch data/done; }; `, mib<<20) +
		`while :; do echo "$POD_IP $(date +%s%N)" >> data/ticks; sleep 0.2; done`
	b, err := json.Marshal(map[string]any{
		"metadata": map[string]any{"name": "db"},
		"spec": map[string]any{
			"terminationGracePeriodSeconds": 1,
			"volumes":                       []any{map[string]any{"name": "data", "persistentVolumeClaim": map[string]any{"claimName": "db"}}},
			"containers": []any{map[string]any{"name": "db", "image": "base", "command": []string{"sh", "-c", script},
				"volumeMounts":   []any{map[string]any{"name": "data", "mountPath": "/data"}},
				"readinessProbe": map[string]any{"exec": map[string]any{"command": []string{"test", "-f", "data/done"}}, "periodSeconds": 1}}},
		}})
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func fileSHA256(t *testing.T, p string) string {
	t.Helper()
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// downtime samples whether pod name is Running (and Ready) until stop;
// it returns the longest stretch it was not.
func (c *cluster) downtime(name string) (stop func() time.Duration) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	var longest time.Duration
	wg.Add(1)
	go func() {
		defer wg.Done()
		var downSince time.Time
		t := time.NewTicker(50 * time.Millisecond)
		defer t.Stop()
		for last := false; !last; {
			select {
			case <-done:
				last = true // one more look: the pod may have just come back
			case <-t.C:
			}
			var p model.Pod
			resp, err := c.http.Get(c.api + "/api/v1/namespaces/default/pods/" + name)
			if err != nil {
				continue
			}
			err = json.NewDecoder(resp.Body).Decode(&p)
			resp.Body.Close()
			if err != nil || resp.StatusCode != http.StatusOK {
				continue
			}
			up := p.Status.Phase == model.PodRunning && podReady(p)
			switch {
			case !up && downSince.IsZero():
				downSince = time.Now()
			case up && !downSince.IsZero():
				longest = max(longest, time.Since(downSince))
				downSince = time.Time{}
			}
		}
	}()
	return func() time.Duration { close(done); wg.Wait(); return longest }
}

// Draining a node moves a claim's data with its pod: a snapshot is
// copied to another node while the pod runs, the pod is stopped, what
// changed since follows, and the pod starts there with its data; the
// old node's copy is then destroyed.
//
// ZW_MOVE_TEST_MIB sets the data's size (default 64) to measure larger
// moves.
func TestDrainMovesAClaimWithItsPod(t *testing.T) {
	t.Parallel()
	mib := 64
	if v := os.Getenv("ZW_MOVE_TEST_MIB"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 || n > 8192 {
			t.Fatalf("ZW_MOVE_TEST_MIB=%q: want a size in MiB up to 8192", v)
		}
		mib = n
	}
	c := newCluster(t, 2)
	if code, b := c.do("POST", "/api/v1/namespaces/default/persistentvolumeclaims",
		fmt.Sprintf(`{"metadata":{"name":"db"},"spec":{"resources":{"requests":{"storage":"%dMi"}}}}`, max(256, 2*mib))); code != http.StatusCreated {
		t.Fatalf("create claim: %d %s", code, b)
	}
	c.createPod(movePodBody(t, mib))
	t.Cleanup(func() {
		if t.Failed() {
			pvc, _ := c.claim("db")
			b, _ := json.Marshal(pvc.Status)
			t.Logf("claim status: %s\nclaim events: %+v\npod events:\n%s", b, c.eventsOf(model.KindPersistentVolumeClaim, "db"), c.events("db"))
		}
	})
	p := c.waitPhase("db", model.PodRunning, true, 2*time.Minute)
	from, fromIP := p.Spec.NodeName, p.Status.PodIP
	fromIdx := c.nodeIndex(from)
	pvc, _ := c.claim("db")
	dataset := "tank/zonewright/volumes/" + pvc.Metadata.UID
	dir := func(node int) string { return filepath.Join(c.nodes.Nodes[node].Root, "fs", dataset) }
	sum := fileSHA256(t, filepath.Join(dir(fromIdx), "blob"))
	ticksAtDrain, _ := os.ReadFile(filepath.Join(dir(fromIdx), "ticks"))

	stop := c.downtime("db")
	start := time.Now()
	if code, b := c.do("POST", "/api/v1/nodes/"+from+"/drain", nil); code != http.StatusOK {
		t.Fatalf("drain: %d %s", code, b)
	}
	// The pod keeps running through the pre-copy.
	var precopied time.Duration
	c.eventually(3*time.Minute, "the claim's pre-copy done", func() bool {
		pvc, _ := c.claim("db")
		if m := pvc.Status.Move; m != nil && m.Phase == model.MoveCopying {
			if p, _ := c.pod("db"); p.Spec.NodeName != from || p.Status.Phase != model.PodRunning {
				t.Fatalf("the pod left %s during the pre-copy: %s on %q", from, p.Status.Phase, p.Spec.NodeName)
			}
		}
		if m := pvc.Status.Move; (m != nil && m.Phase != model.MovePlanning && m.Phase != model.MoveCopying) || pvc.Status.NodeName != from {
			precopied = time.Since(start)
			return true
		}
		return false
	})
	var to string
	c.eventually(3*time.Minute, "the claim on another node, its move ended", func() bool {
		pvc, _ = c.claim("db")
		to = pvc.Status.NodeName
		return to != from && pvc.Status.Move == nil
	})
	p = c.waitPhase("db", model.PodRunning, true, 2*time.Minute)
	down := stop()
	if p.Spec.NodeName != to || pvc.Status.Phase != model.ClaimBound {
		t.Fatalf("the pod runs on %s, its claim (%s) is on %s", p.Spec.NodeName, pvc.Status.Phase, to)
	}
	toIdx := c.nodeIndex(to)
	if got := fileSHA256(t, filepath.Join(dir(toIdx), "blob")); got != sum {
		t.Fatalf("the %d MiB blob on %s has sha256 %s, on %s it had %s", mib, to, got, from, sum)
	}
	// What the pod wrote on the old node after the pre-copy's snapshot
	// came with the final increment.
	ticks, _ := os.ReadFile(filepath.Join(dir(toIdx), "ticks"))
	if !bytes.HasPrefix(ticks, ticksAtDrain) {
		t.Fatalf("ticks on %s do not begin with what the pod wrote before the drain", to)
	}
	if n, before := strings.Count(string(ticks), fromIP+" "), strings.Count(string(ticksAtDrain), fromIP+" "); n <= before {
		t.Fatalf("ticks on %s hold %d lines from %s, no more than at the drain (%d)", to, n, from, before)
	}
	c.eventually(time.Minute, "the old node's copy destroyed", func() bool { return !c.hasDataset(fromIdx, dataset) })
	s, _ := c.state(toIdx)
	for _, d := range s.Datasets {
		if strings.HasPrefix(d.Name, dataset+"@move-") {
			t.Errorf("the move's snapshot %s stayed on %s", d.Name, to)
		}
	}
	if left, _ := os.ReadDir(filepath.Join(filepath.Dir(c.cpConfig.ImageStore), "volume-transfers")); len(left) > 0 {
		t.Errorf("the relay kept streams: %v", left)
	}
	if !c.hasEvent(model.KindPersistentVolumeClaim, "db", "ClaimMoved", "from node "+from+" to node "+to) {
		t.Errorf("no ClaimMoved event: %+v", c.eventsOf(model.KindPersistentVolumeClaim, "db"))
	}
	total := time.Since(start)
	c.eventually(30*time.Second, "the claim's workflow finished", func() bool {
		return c.workflowStatus(workflows.ClaimWorkflowID("default", "db")) == enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED
	})
	c.recordHistory(workflows.ClaimWorkflowID("default", "db"), "claim-moved.json")
	t.Logf("%d MiB claim moved %s -> %s: pre-copy done after %s (%.1f MiB/s end to end), whole move %s, pod down %s",
		mib, from, to, precopied.Round(time.Millisecond), float64(mib)/precopied.Seconds(), total.Round(time.Millisecond), down.Round(time.Millisecond))
}

// The old node's agent dies while it sends the pre-copy: the send is
// given up when its heartbeats stop and runs again on the restarted
// agent, and the move completes with one copy of the data, on the new
// node.
func TestAClaimMovesThroughAnAgentCrash(t *testing.T) {
	t.Parallel()
	c := newCluster(t, 2)
	if code, b := c.do("POST", "/api/v1/namespaces/default/persistentvolumeclaims",
		`{"metadata":{"name":"db"},"spec":{"resources":{"requests":{"storage":"64Mi"}}}}`); code != http.StatusCreated {
		t.Fatalf("create claim: %d %s", code, b)
	}
	c.createPod(movePodBody(t, 8))
	p := c.waitPhase("db", model.PodRunning, true, 2*time.Minute)
	from := p.Spec.NodeName
	fromIdx := c.nodeIndex(from)
	pvc, _ := c.claim("db")
	dataset := "tank/zonewright/volumes/" + pvc.Metadata.UID
	dir := func(node int) string { return filepath.Join(c.nodes.Nodes[node].Root, "fs", dataset) }
	sum := fileSHA256(t, filepath.Join(dir(fromIdx), "blob"))

	// zfs send on the old node takes a few seconds to start: long enough
	// to kill its agent while the send runs.
	faults := filepath.Join(c.nodes.Nodes[fromIdx].Root, "faults.json")
	if err := os.WriteFile(faults, []byte(`{"latency": {"zfs send": "4s"}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if code, b := c.do("POST", "/api/v1/nodes/"+from+"/drain", nil); code != http.StatusOK {
		t.Fatalf("drain: %d %s", code, b)
	}
	c.eventually(time.Minute, "the pre-copy's snapshot on "+from, func() bool {
		s, _ := c.state(fromIdx)
		for _, d := range s.Datasets {
			if strings.HasPrefix(d.Name, dataset+"@move-") {
				return true
			}
		}
		return false
	})
	time.Sleep(time.Second) // the send is under way
	c.nodes.Kill(fromIdx)
	os.Remove(faults)
	if p, _ := c.pod("db"); p.Spec.NodeName != from {
		t.Fatalf("the pod left %s before its claim's pre-copy", from)
	}
	time.Sleep(2 * time.Second)
	if err := c.nodes.Restart(context.Background(), fromIdx); err != nil {
		t.Fatal(err)
	}
	var to string
	c.eventually(3*time.Minute, "the claim on another node, its move ended", func() bool {
		pvc, _ = c.claim("db")
		to = pvc.Status.NodeName
		return to != from && pvc.Status.Move == nil
	})
	p = c.waitPhase("db", model.PodRunning, true, 2*time.Minute)
	toIdx := c.nodeIndex(to)
	if p.Spec.NodeName != to {
		t.Fatalf("the pod runs on %s, its claim is on %s", p.Spec.NodeName, to)
	}
	if got := fileSHA256(t, filepath.Join(dir(toIdx), "blob")); got != sum {
		t.Fatalf("the blob on %s has sha256 %s, on %s it had %s", to, got, from, sum)
	}
	c.eventually(time.Minute, "one copy of the claim, on "+to, func() bool {
		return !c.hasDataset(fromIdx, dataset) && c.hasDataset(toIdx, dataset)
	})
	t.Logf("the move through the agent's crash took %s", time.Since(start).Round(time.Millisecond))
}

// An operator moves one claim, to a node of their choosing, without a
// drain: the data goes first, then the pod follows; a move that cannot be
// is refused with the reason.
func TestOperatorMovesAClaim(t *testing.T) {
	t.Parallel()
	c := newCluster(t, 3)
	c.do("POST", "/api/v1/namespaces/default/persistentvolumeclaims", `{"metadata":{"name":"db"},"spec":{"resources":{"requests":{"storage":"64Mi"}}}}`)
	move := func(body string) (int, []byte) {
		return c.do("POST", "/api/v1/namespaces/default/persistentvolumeclaims/db/move", body)
	}
	if code, b := move(""); code != http.StatusConflict || !strings.Contains(string(b), "holds no data yet") {
		t.Fatalf("moving an unbound claim: %d %s, want 409", code, b)
	}
	c.createPod(movePodBody(t, 4))
	p := c.waitPhase("db", model.PodRunning, true, 2*time.Minute)
	from := p.Spec.NodeName
	var to string
	for _, n := range c.nodes.Nodes {
		if n.Name != from {
			to = n.Name // the first other node: not necessarily the scheduler's pick
		}
	}
	if code, b := move(`{"nodeName":"` + from + `"}`); code != http.StatusConflict {
		t.Fatalf("moving a claim to its own node: %d %s, want 409", code, b)
	}
	if code, b := move(`{"nodeName":"nowhere"}`); code != http.StatusNotFound {
		t.Fatalf("moving a claim to no node: %d %s, want 404", code, b)
	}
	pvc, _ := c.claim("db")
	blob := func(node string) string {
		return fileSHA256(t, filepath.Join(c.nodes.Nodes[c.nodeIndex(node)].Root, "fs/tank/zonewright/volumes", pvc.Metadata.UID, "blob"))
	}
	sum := blob(from)
	if code, b := move(`{"nodeName":"` + to + `"}`); code != http.StatusAccepted {
		t.Fatalf("move: %d %s", code, b)
	}
	if code, b := move(""); code != http.StatusConflict || !strings.Contains(string(b), "moving already") {
		t.Fatalf("moving a claim being moved: %d %s, want 409", code, b)
	}
	c.eventually(2*time.Minute, "the claim on "+to+", its move ended", func() bool {
		pvc, _ = c.claim("db")
		return pvc.Status.NodeName == to && pvc.Status.Move == nil
	})
	p = c.waitPhase("db", model.PodRunning, true, 2*time.Minute)
	if p.Spec.NodeName != to || blob(to) != sum {
		t.Fatalf("the pod runs on %s; the data on %s matches: %v", p.Spec.NodeName, to, blob(to) == sum)
	}
	c.eventually(time.Minute, "the old copy destroyed", func() bool {
		return !c.hasDataset(c.nodeIndex(from), "tank/zonewright/volumes/"+pvc.Metadata.UID)
	})
}

// relayStreams lists the relay's files: complete streams (.zstream) and
// uploads in progress (.part-*), with their sizes.
func (c *cluster) relayStreams() map[string]int64 {
	dir := filepath.Join(filepath.Dir(c.cpConfig.ImageStore), "volume-transfers")
	entries, _ := os.ReadDir(dir)
	out := map[string]int64{}
	for _, e := range entries {
		if fi, err := e.Info(); err == nil {
			out[e.Name()] = fi.Size()
		}
	}
	return out
}

// The old node's agent dies while the pre-copy's bytes flow (zfs send
// writes at 1 MiB/s here): the relay drops the half upload rather than
// keep it as a stream, nothing is received from it, and the send runs
// again from the start on the restarted agent. The move costs the bytes
// sent before the crash and the heartbeat timeout; it ends with one
// intact copy.
func TestAClaimMovesThroughAnAgentCrashMidStream(t *testing.T) {
	t.Parallel()
	c := newCluster(t, 2)
	if code, b := c.do("POST", "/api/v1/namespaces/default/persistentvolumeclaims",
		`{"metadata":{"name":"db"},"spec":{"resources":{"requests":{"storage":"64Mi"}}}}`); code != http.StatusCreated {
		t.Fatalf("create claim: %d %s", code, b)
	}
	const mib = 8
	c.createPod(movePodBody(t, mib))
	p := c.waitPhase("db", model.PodRunning, true, 2*time.Minute)
	from := p.Spec.NodeName
	fromIdx := c.nodeIndex(from)
	pvc, _ := c.claim("db")
	dataset := "tank/zonewright/volumes/" + pvc.Metadata.UID
	dir := func(node int) string { return filepath.Join(c.nodes.Nodes[node].Root, "fs", dataset) }
	sum := fileSHA256(t, filepath.Join(dir(fromIdx), "blob"))

	faults := filepath.Join(c.nodes.Nodes[fromIdx].Root, "faults.json")
	if err := os.WriteFile(faults, []byte(`{"stream_rate": {"zfs send": "1M"}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if code, b := c.do("POST", "/api/v1/nodes/"+from+"/drain", nil); code != http.StatusOK {
		t.Fatalf("drain: %d %s", code, b)
	}
	var part string
	var sent int64
	c.eventually(time.Minute, "the pre-copy's bytes flowing into the relay", func() bool {
		for name, size := range c.relayStreams() {
			if strings.Contains(name, ".part-") && size >= 1<<20 {
				part, sent = name, size
				return true
			}
		}
		return false
	})
	c.nodes.Kill(fromIdx)
	if sent >= mib<<20 {
		t.Fatalf("the kill did not land mid-stream: %d bytes were in the relay", sent)
	}
	os.Remove(faults)
	// The cut upload is dropped, not kept as a stream to receive.
	c.eventually(30*time.Second, "the relay dropping the cut upload", func() bool {
		_, ok := c.relayStreams()[part]
		return !ok
	})
	for name := range c.relayStreams() {
		if strings.HasSuffix(name, ".zstream") {
			t.Fatalf("the relay keeps %s after an upload cut short", name)
		}
	}
	if pvc, _ := c.claim("db"); pvc.Status.NodeName != from || c.hasDataset(1-fromIdx, dataset) {
		t.Fatalf("a copy was received from a cut stream: claim on %s", pvc.Status.NodeName)
	}
	if err := c.nodes.Restart(context.Background(), fromIdx); err != nil {
		t.Fatal(err)
	}
	var to string
	c.eventually(3*time.Minute, "the claim on another node, its move ended", func() bool {
		pvc, _ = c.claim("db")
		to = pvc.Status.NodeName
		return to != from && pvc.Status.Move == nil
	})
	p = c.waitPhase("db", model.PodRunning, true, 2*time.Minute)
	toIdx := c.nodeIndex(to)
	if p.Spec.NodeName != to {
		t.Fatalf("the pod runs on %s, its claim is on %s", p.Spec.NodeName, to)
	}
	if got := fileSHA256(t, filepath.Join(dir(toIdx), "blob")); got != sum {
		t.Fatalf("the blob on %s has sha256 %s, on %s it had %s", to, got, from, sum)
	}
	c.eventually(time.Minute, "one copy of the claim, on "+to+", and the relay empty", func() bool {
		return !c.hasDataset(fromIdx, dataset) && c.hasDataset(toIdx, dataset) && len(c.relayStreams()) == 0
	})
	t.Logf("the move through the agent's crash mid-stream took %s", time.Since(start).Round(time.Millisecond))
}
