package workflows

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	enumspb "go.temporal.io/api/enums/v1"
	sdklog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	controlacts "github.com/zonewright/zonewright/activities/control"
	hostacts "github.com/zonewright/zonewright/activities/host"
	"github.com/zonewright/zonewright/internal/controlapi"
	"github.com/zonewright/zonewright/internal/hostapi"
	"github.com/zonewright/zonewright/internal/model"
)

// fakeImageNode is a node's image store: an image is partial while it
// downloads and ready once installed; a failed pull removes its partial
// files, as the node does.
type fakeImageNode struct {
	mu     sync.Mutex
	images map[string]string // name → partial | ready
	status []controlapi.ImageNodeUpdate
	woken  int
}

func runImagePull(t *testing.T, at *stepRef, kind faultKind) (*faultPlan, []string) {
	t.Helper()
	var suite testsuite.WorkflowTestSuite
	suite.SetLogger(sdklog.NewStructuredLogger(slog.New(slog.DiscardHandler)))
	env := suite.NewTestWorkflowEnvironment()
	env.SetTestTimeout(20 * time.Second)
	env.RegisterActivity(&controlacts.Control{})
	env.RegisterActivity(&controlacts.Images{})
	env.RegisterActivity(&hostacts.Activities{})
	plan := newFaultPlan(nil, env.Now)
	if at != nil {
		plan.inject(*at, kind)
	}
	n := &fakeImageNode{images: map[string]string{}}
	ni := hostapi.NodeImage{Name: "ubuntu", Kind: model.ImageLXTarball}
	on := func(fn, ret any) { env.OnActivity(fn, mock.Anything, mock.Anything).Return(ret) }
	on(img.ImagePullPlan, func(ctx context.Context, _ controlapi.ImageNodeInput) (controlapi.NodePull, error) {
		return controlapi.NodePull{Image: ni}, plan.do(ctx, "ImagePullPlan", func() error { return nil })
	})
	on(img.SetImageNodeStatus, func(ctx context.Context, u controlapi.ImageNodeUpdate) error {
		return plan.do(ctx, "SetImageNodeStatus", func() error {
			n.mu.Lock()
			defer n.mu.Unlock()
			n.status = append(n.status, u)
			return nil
		})
	})
	on(ctl.WakeImageWaiters, func(ctx context.Context, _ controlapi.ImageNodeInput) (int, error) {
		return 1, plan.do(ctx, "WakeImageWaiters", func() error {
			n.mu.Lock()
			defer n.mu.Unlock()
			n.woken++
			return nil
		})
	})
	on(host.PullImage, func(ctx context.Context, in hostapi.NodeImage) (hostapi.NodeImageResult, error) {
		res := hostapi.NodeImageResult{Artefact: "/var/zonewright/images/" + in.Name + ".tar"}
		hit, _ := plan.call(ctx, "PullImage")
		n.mu.Lock()
		defer n.mu.Unlock()
		if hit != nil {
			happens, err := hit.injected(ctx, env.Now())
			switch {
			case hit.kind == faultAgentKilled && err != nil:
				n.images[in.Name] = "partial" // killed mid-download
				return res, temporal.NewTimeoutError(enumspb.TIMEOUT_TYPE_HEARTBEAT, nil)
			case err != nil && !happens:
				delete(n.images, in.Name) // a failed pull removes its partial files
				return res, err
			case err != nil:
				n.images[in.Name] = "ready"
				return res, err
			}
		}
		n.images[in.Name] = "ready" // a partial download is started over
		return res, nil
	})
	env.ExecuteWorkflow(ImagePull, ImagePullInput{Image: ni.Name, Node: "n1"})

	var problems []string
	if !env.IsWorkflowCompleted() {
		problems = append(problems, "the pull did not end")
	} else if err := env.GetWorkflowError(); err != nil {
		problems = append(problems, "the pull failed: "+err.Error())
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	var last controlapi.ImageNodeUpdate
	if len(n.status) > 0 {
		last = n.status[len(n.status)-1]
	}
	// A pull that fails for good, or whose node is away past
	// ScheduleToStart, ends Failed for this node (pods waiting on it ask
	// again with back-off); anything else ends Ready.
	failureAllowed := kind == faultForGood || kind == faultUnreachable
	switch {
	case last.Phase == model.ImageReady && n.images[ni.Name] == "ready":
	case last.Phase == model.ImageFailed && failureAllowed && last.Reason == model.ImageReasonPullFailed && last.Message != "":
		if st, ok := n.images[ni.Name]; ok {
			problems = append(problems, fmt.Sprintf("a failed pull left the image %s on the node", st))
		}
	default:
		problems = append(problems, fmt.Sprintf("the node's image status ended %+v with the image %q on the node", last, n.images[ni.Name]))
	}
	if n.woken == 0 {
		problems = append(problems, "the pods waiting for the image were not woken")
	}
	return plan, problems
}

func TestFailureAtEveryStepOfAnImagePull(t *testing.T) {
	clean, problems := runImagePull(t, nil, "")
	if len(problems) > 0 {
		t.Fatalf("the pull without faults: %s", strings.Join(problems, "\n"))
	}
	for _, at := range slices.Clone(clean.steps) {
		for _, kind := range kindsFor(at, at.Activity == "PullImage") {
			t.Run(at.String()+"/"+string(kind), func(t *testing.T) {
				t.Parallel()
				_, problems := runImagePull(t, &at, kind)
				judge(t, problems)
			})
		}
	}
}
