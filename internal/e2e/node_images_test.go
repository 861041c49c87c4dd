package e2e_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	tclient "go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/zonewright/zonewright/internal/hostapi"
	"github.com/zonewright/zonewright/internal/model"
	"github.com/zonewright/zonewright/workflows/taskqueue"
)

// imageJob is the input of the test's own workflow: pull (or remove)
// images on one node through its agent.
type imageJob struct {
	Node   string
	Images []hostapi.NodeImage
	Remove bool
}

// nodeImages runs PullImage or RemoveImage on the node's task queue, as
// the control plane's image distribution does.
func nodeImages(ctx workflow.Context, job imageJob) ([]hostapi.NodeImageResult, error) {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		TaskQueue:           taskqueue.Node(job.Node),
		StartToCloseTimeout: 2 * time.Minute,
		HeartbeatTimeout:    time.Minute,
		RetryPolicy:         &temporal.RetryPolicy{MaximumAttempts: 3, InitialInterval: time.Second},
	})
	var out []hostapi.NodeImageResult
	for _, img := range job.Images {
		if job.Remove {
			if err := workflow.ExecuteActivity(ctx, "RemoveImage", img).Get(ctx, nil); err != nil {
				return nil, err
			}
			continue
		}
		var res hostapi.NodeImageResult
		if err := workflow.ExecuteActivity(ctx, "PullImage", img).Get(ctx, &res); err != nil {
			return nil, err
		}
		out = append(out, res)
	}
	return out, nil
}

// A node's agent pulls images of each kind from an HTTP server into its
// images dataset, image directory and volume devices (all inside the
// simulated node), and removes them again.
func TestAgentPullsAndRemovesImages(t *testing.T) {
	t.Parallel()
	c := newCluster(t, 1)
	node := c.nodes.Nodes[0]

	// A zfs stream made with the node's own simulator.
	simcmd := func(stdin []byte, args ...string) []byte {
		t.Helper()
		cmd := execSim(node.BinDir, args...)
		cmd.Stdin = bytes.NewReader(stdin)
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		return out
	}
	simcmd(nil, "zfs", "create", "tank/fixture")
	os.WriteFile(filepath.Join(node.Root, "fs/tank/fixture/motd"), []byte("hi\n"), 0o644)
	simcmd(nil, "zfs", "snapshot", "tank/fixture@v1")
	stream := simcmd(nil, "zfs", "send", "tank/fixture@v1")
	disk := bytes.Repeat([]byte("disk"), 300<<10)

	files := map[string][]byte{"ubuntu": stream, "alpine": []byte("not really a tarball, but bytes"), "freebsd": disk}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write(files[strings.TrimPrefix(r.URL.Path, "/")])
	}))
	t.Cleanup(srv.Close)
	image := func(name, kind string) hostapi.NodeImage {
		sum := sha256.Sum256(files[name])
		return hostapi.NodeImage{Name: name, Kind: kind, URL: srv.URL + "/" + name,
			SHA256: hex.EncodeToString(sum[:]), Size: int64(len(files[name]))}
	}
	imgs := []hostapi.NodeImage{
		image("ubuntu", model.ImageZFSStream), image("alpine", model.ImageLXTarball), image("freebsd", model.ImageBhyveDisk),
	}

	w := worker.New(c.temporal, "e2e-images", worker.Options{})
	w.RegisterWorkflowWithOptions(nodeImages, workflow.RegisterOptions{Name: "E2ENodeImages"})
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	run := func(job imageJob) []hostapi.NodeImageResult {
		t.Helper()
		ctx := t.Context()
		wr, err := c.temporal.ExecuteWorkflow(ctx, tclient.StartWorkflowOptions{TaskQueue: "e2e-images", WorkflowExecutionTimeout: 3 * time.Minute}, "E2ENodeImages", job)
		if err != nil {
			t.Fatal(err)
		}
		var out []hostapi.NodeImageResult
		if err := wr.Get(ctx, &out); err != nil {
			t.Fatalf("images on %s: %v", job.Node, err)
		}
		return out
	}

	res := run(imageJob{Node: node.Name, Images: imgs})
	want := []string{"tank/zonewright/images/ubuntu@base", filepath.Join(node.Root, "fs/var/zonewright/images/alpine.tar"), "tank/zonewright/images/freebsd@base"}
	for i, r := range res {
		if r.Artefact != want[i] {
			t.Errorf("artefact %d = %q, want %q", i, r.Artefact, want[i])
		}
	}
	s, raw := c.state(0)
	has := func(name string) bool {
		for _, d := range s.Datasets {
			if d.Name == name {
				return true
			}
		}
		return false
	}
	for _, ds := range []string{"tank/zonewright/images/ubuntu@base", "tank/zonewright/images/freebsd@base", "tank/zonewright/volumes"} {
		if !has(ds) {
			t.Errorf("no %s on the node:\n%s", ds, raw)
		}
	}
	if b, err := os.ReadFile(filepath.Join(node.Root, "fs/dev/zvol/rdsk/tank/zonewright/images/freebsd")); err != nil || !bytes.Equal(b[:len(disk)], disk) {
		t.Errorf("the disk image is not in its volume's device (err %v)", err)
	}

	run(imageJob{Node: node.Name, Images: imgs, Remove: true})
	s, raw = c.state(0)
	for _, d := range s.Datasets {
		if strings.HasPrefix(d.Name, "tank/zonewright/images/") {
			t.Errorf("image dataset %s left:\n%s", d.Name, raw)
		}
	}
	if left, _ := filepath.Glob(filepath.Join(node.Root, "fs/var/zonewright/images/*")); len(left) > 0 {
		t.Errorf("image files left: %v", left)
	}
}

// execSim runs a simulated command through the node's command directory.
func execSim(nodeBin string, args ...string) *exec.Cmd {
	return exec.Command(filepath.Join(nodeBin, args[0]), args[1:]...)
}
