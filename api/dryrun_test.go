package api_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	tclient "go.temporal.io/sdk/client"

	"github.com/zonewright/zonewright/api"
	"github.com/zonewright/zonewright/internal/imagemap"
	"github.com/zonewright/zonewright/internal/pgtest"
	"github.com/zonewright/zonewright/workflows"
)

// startCounter stands for Temporal: it counts the workflows a request
// starts and refuses them (any other call panics: nothing else is
// expected of it here).
type startCounter struct {
	tclient.Client
	started atomic.Int32
}

func (s *startCounter) ExecuteWorkflow(context.Context, tclient.StartWorkflowOptions, any, ...any) (tclient.WorkflowRun, error) {
	s.started.Add(1)
	return nil, errors.New("no workflows in this test")
}

// A dry run of a pod, a job, a namespace or a claim (kubectl diff,
// --dry-run=server) is the create checked and answered, and then nothing:
// no object, no lifecycle, no image import, even for a registry image
// nobody pulled yet. A node's is refused. (Drop the !store.IsDryRun guard
// in createPod to see the pod's lifecycle started, or make
// store.writeWithPodImages return a dry run's images (return made, not
// nil, after errDryRun) to see the import started.)
func TestDryRunsCreateAndStartNothing(t *testing.T) {
	temporal := &startCounter{}
	c := serveConfig(t, pgtest.NewDatabase(t), api.Config{
		ImageMap:   &imagemap.Map{},
		Lifecycles: &workflows.PodClient{Temporal: temporal},
		Images:     &workflows.ImageClient{Temporal: temporal},
	})
	for _, w := range []struct{ path, name, body string }{
		{"/api/v1/namespaces/default/pods", "dry", `{"metadata":{"name":"dry"},"spec":{"containers":[{"name":"a","image":"omnios","command":["sleep","1"]}]}}`},
		{"/api/v1/namespaces/default/pods", "dry-oci", `{"metadata":{"name":"dry-oci"},"spec":{"runtimeClassName":"lx","containers":[{"name":"a","image":"docker.io/library/alpine:3.20"}]}}`},
		{"/apis/batch/v1/namespaces/default/jobs", "dry", `{"metadata":{"name":"dry"},"spec":{"template":{"spec":{"restartPolicy":"Never","containers":[{"name":"a","image":"omnios","command":["true"]}]}}}}`},
		{"/api/v1/namespaces", "dry", `{"metadata":{"name":"dry"}}`},
		{"/api/v1/namespaces/default/persistentvolumeclaims", "dry", `{"metadata":{"name":"dry"},"spec":{"accessModes":["ReadWriteOnce"],"resources":{"requests":{"storage":"1Gi"}}}}`},
	} {
		if r := c.json("POST", w.path+"?dryRun=All", w.body); r.code != http.StatusCreated || !strings.Contains(string(r.body), `"name":"`+w.name+`"`) {
			t.Errorf("a dry-run create at %s: %d %s", w.path, r.code, r.body)
		}
		if r := c.json("GET", w.path+"/"+w.name, nil); r.code != http.StatusNotFound {
			t.Errorf("the dry run made %s/%s: %d %s", w.path, w.name, r.code, r.body)
		}
	}
	if r := c.json("GET", "/api/v1/images", nil); strings.Contains(string(r.body), "oci-alpine") {
		t.Errorf("the dry run made the registry image's catalog entry: %s", r.body)
	}
	if n := temporal.started.Load(); n != 0 {
		t.Errorf("the dry runs started %d workflows", n)
	}
	if r := c.json("POST", "/api/v1/nodes?dryRun=All", `{"metadata":{"name":"n9"}}`); r.code != http.StatusBadRequest {
		t.Errorf("a dry-run node create: %d %s", r.code, r.body)
	}
	// The same pod for real starts its lifecycle (refused here, so it is
	// not kept): the counter sees what the dry run did not do.
	if r := c.json("POST", "/api/v1/namespaces/default/pods", `{"metadata":{"name":"dry"},"spec":{"containers":[{"name":"a","image":"omnios","command":["sleep","1"]}]}}`); r.code != http.StatusServiceUnavailable || temporal.started.Load() != 1 {
		t.Errorf("a real create: %d %s, %d workflows started", r.code, r.body, temporal.started.Load())
	}
}
