package workflows

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	sdklog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	controlacts "github.com/zonewright/zonewright/activities/control"
	hostacts "github.com/zonewright/zonewright/activities/host"
	"github.com/zonewright/zonewright/internal/controlapi"
	"github.com/zonewright/zonewright/internal/hostapi"
	"github.com/zonewright/zonewright/internal/model"
	"github.com/zonewright/zonewright/workflows/podcontract"
)

// Unit tests of the image workflows' paths with mocked activities; the
// end-to-end tests in internal/e2e run them for real.

var testImage = controlapi.ImageRef{Name: "ubuntu", UID: "00000000-0000-4000-8000-0000000000aa"}

type imageHarness struct {
	testsuite.WorkflowTestSuite
	env *testsuite.TestWorkflowEnvironment

	mu      sync.Mutex
	nodes   map[string]controlapi.ImageNodeUpdate // last status per node
	failure *controlapi.ImageFailure
	removed []string // nodes RemoveImage ran on
	storeRm int
	ready   bool
}

func newImageHarness(t *testing.T) *imageHarness { return newImageHarnessOf(t, model.ImageLXTarball) }

func newImageHarnessOf(t *testing.T, kind string) *imageHarness {
	h := &imageHarness{nodes: map[string]controlapi.ImageNodeUpdate{}}
	h.SetLogger(sdklog.NewStructuredLogger(slog.New(slog.DiscardHandler)))
	h.env = h.NewTestWorkflowEnvironment()
	h.env.SetTestTimeout(time.Minute)
	h.env.RegisterActivity(&controlacts.Images{})
	h.env.RegisterActivity(&hostacts.Activities{})
	h.env.OnActivity(img.BeginImageImport, mock.Anything, mock.Anything).Return(
		controlapi.ImagePlan{Found: true, Spec: model.ImageSpec{Kind: kind, Source: "http://x/u.tar.gz"}}, nil)
	h.env.OnActivity(img.DecompressImage, mock.Anything, mock.Anything).Return(controlapi.ImageArtefact{SHA256: "ab", Size: 10}, nil)
	h.env.OnActivity(img.MarkImageReady, mock.Anything, mock.Anything).Return(func(context.Context, controlapi.ImageReadyInput) (controlapi.ImageTargets, error) {
		h.mu.Lock()
		h.ready = true
		h.mu.Unlock()
		return controlapi.ImageTargets{Nodes: []string{"n1", "n2", "n3"}, Image: hostapi.NodeImage{Name: "ubuntu", Kind: model.ImageLXTarball}}, nil
	})
	h.env.OnActivity(img.SetImageNodeStatus, mock.Anything, mock.Anything).Return(func(_ context.Context, u controlapi.ImageNodeUpdate) error {
		h.mu.Lock()
		defer h.mu.Unlock()
		h.nodes[u.Node] = u
		return nil
	})
	h.env.OnActivity(img.MarkImageFailed, mock.Anything, mock.Anything).Return(func(_ context.Context, f controlapi.ImageFailure) error {
		h.mu.Lock()
		defer h.mu.Unlock()
		h.failure = &f
		return nil
	})
	h.env.OnActivity(img.RemoveImageArtefact, mock.Anything, mock.Anything).Return(func(context.Context, string) error {
		h.mu.Lock()
		defer h.mu.Unlock()
		h.storeRm++
		return nil
	})
	h.env.OnActivity(host.RemoveImage, mock.Anything, mock.Anything).Return(func(ctx context.Context, _ hostapi.NodeImage) error {
		h.mu.Lock()
		defer h.mu.Unlock()
		h.removed = append(h.removed, "removed")
		return nil
	})
	return h
}

func (h *imageHarness) fetchReturns(ret ...any) {
	h.env.OnActivity(img.FetchImage, mock.Anything, mock.Anything).Return(ret...)
}

func TestImportDistributesAndOneFailingNodeFailsOnlyItself(t *testing.T) {
	h := newImageHarness(t)
	h.fetchReturns(controlapi.ImageFetched{Bytes: 10}, nil)
	h.env.OnActivity(host.PullImage, mock.Anything, mock.Anything).Return(func(ctx context.Context, ni hostapi.NodeImage) (hostapi.NodeImageResult, error) {
		return hostapi.NodeImageResult{Artefact: "/images/ubuntu.tar"}, nil
	}).Times(2)
	// The third pull fails every attempt, as a node whose zfs is broken.
	h.env.OnActivity(host.PullImage, mock.Anything, mock.Anything).Return(hostapi.NodeImageResult{},
		temporal.NewApplicationError("zfs receive failed: pool is faulted", "Transient"))
	h.env.ExecuteWorkflow(ImageImport, ImageInput{Image: testImage})
	if err := h.env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	if !h.ready || h.failure != nil {
		t.Fatalf("the image must be Ready (ready=%v failure=%+v)", h.ready, h.failure)
	}
	var ready, failed []string
	for n, u := range h.nodes {
		switch u.Phase {
		case model.ImageReady:
			ready = append(ready, n)
		case model.ImageFailed:
			failed = append(failed, n)
			if u.Reason != model.ImageReasonPullFailed || u.Message == "" {
				t.Errorf("a failed node needs a reason and message: %+v", u)
			}
		}
	}
	if len(ready) != 2 || len(failed) != 1 {
		t.Fatalf("want two nodes Ready and one Failed, got %+v", h.nodes)
	}
}

func TestDigestMismatchFailsTheImageWithoutRetry(t *testing.T) {
	h := newImageHarness(t)
	calls := 0
	h.fetchReturns(func(context.Context, controlapi.ImageRef) (controlapi.ImageFetched, error) {
		calls++
		return controlapi.ImageFetched{}, temporal.NewNonRetryableApplicationError("sha256 of x is 00, the catalog expects ff", controlapi.ErrTypeDigestMismatch, nil)
	})
	h.env.ExecuteWorkflow(ImageImport, ImageInput{Image: testImage})
	if err := h.env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	if calls != 1 {
		t.Fatalf("a digest mismatch must not be retried; fetched %d times", calls)
	}
	if h.failure == nil || h.failure.Reason != model.ImageReasonDigestMismatch || h.ready {
		t.Fatalf("want Failed/DigestMismatch, got %+v ready=%v", h.failure, h.ready)
	}
	if h.storeRm != 1 {
		t.Fatalf("the partial download must be removed; RemoveImageArtefact ran %d times", h.storeRm)
	}
}

func TestStalledFetchIsRetried(t *testing.T) {
	h := newImageHarness(t)
	calls := 0
	h.fetchReturns(func(context.Context, controlapi.ImageRef) (controlapi.ImageFetched, error) {
		calls++
		if calls < 3 {
			return controlapi.ImageFetched{}, temporal.NewApplicationError("stalled", controlapi.ErrTypeStalled)
		}
		return controlapi.ImageFetched{Bytes: 10, Resumed: true}, nil
	})
	h.env.OnActivity(host.PullImage, mock.Anything, mock.Anything).Return(hostapi.NodeImageResult{}, nil)
	h.env.ExecuteWorkflow(ImageImport, ImageInput{Image: testImage})
	if err := h.env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	if calls != 3 || !h.ready {
		t.Fatalf("a stalled fetch must be retried until it completes: %d calls, ready=%v", calls, h.ready)
	}
}

func TestCancelMidDownloadRemovesPartialFiles(t *testing.T) {
	h := newImageHarness(t)
	h.fetchReturns(func(ctx context.Context, _ controlapi.ImageRef) (controlapi.ImageFetched, error) {
		<-ctx.Done()
		return controlapi.ImageFetched{}, ctx.Err()
	})
	h.env.RegisterDelayedCallback(h.env.CancelWorkflow, 5*time.Second)
	h.env.ExecuteWorkflow(ImageImport, ImageInput{Image: testImage})
	err := h.env.GetWorkflowError()
	var cancelled *temporal.CanceledError
	if !errors.As(err, &cancelled) {
		t.Fatalf("want the workflow cancelled, got %v", err)
	}
	if h.storeRm != 1 || h.failure == nil || h.failure.Reason != model.ImageReasonCancelled {
		t.Fatalf("cancel must remove the store's files and fail the image Cancelled: storeRm=%d failure=%+v", h.storeRm, h.failure)
	}
}

func TestCancelDuringDistributionRemovesFromPullingNodes(t *testing.T) {
	h := newImageHarness(t)
	h.fetchReturns(controlapi.ImageFetched{Bytes: 10}, nil)
	h.env.OnActivity(host.PullImage, mock.Anything, mock.Anything).Return(func(ctx context.Context, _ hostapi.NodeImage) (hostapi.NodeImageResult, error) {
		<-ctx.Done()
		return hostapi.NodeImageResult{}, ctx.Err()
	})
	h.env.RegisterDelayedCallback(h.env.CancelWorkflow, 5*time.Second)
	h.env.ExecuteWorkflow(ImageImport, ImageInput{Image: testImage})
	if len(h.removed) != 3 || h.storeRm != 1 {
		t.Fatalf("cancel while pulling must remove the image from the three nodes and the store: nodes=%d store=%d", len(h.removed), h.storeRm)
	}
	if h.failure == nil || h.failure.Reason != model.ImageReasonCancelled {
		t.Fatalf("the image must end Failed/Cancelled: %+v", h.failure)
	}
}

func TestZoneTemplateImportFetchesNothing(t *testing.T) {
	h := newImageHarnessOf(t, model.ImageZoneTemplate)
	fetched := false
	h.fetchReturns(func(context.Context, controlapi.ImageRef) (controlapi.ImageFetched, error) {
		fetched = true
		return controlapi.ImageFetched{}, nil
	})
	h.env.ExecuteWorkflow(ImageImport, ImageInput{Image: testImage})
	if err := h.env.GetWorkflowError(); err != nil || fetched {
		t.Fatalf("a zone template has nothing to fetch: err=%v fetched=%v", err, fetched)
	}
}

func TestImagePullSkipsWhatNeedsNoPull(t *testing.T) {
	h := newImageHarness(t)
	h.env.OnActivity(img.ImagePullPlan, mock.Anything, mock.Anything).Return(controlapi.NodePull{Skip: true, Why: "not Ready"}, nil)
	pulled := false
	h.env.OnActivity(host.PullImage, mock.Anything, mock.Anything).Return(func(context.Context, hostapi.NodeImage) (hostapi.NodeImageResult, error) {
		pulled = true
		return hostapi.NodeImageResult{}, nil
	})
	h.env.ExecuteWorkflow(ImagePull, ImagePullInput{Image: "ubuntu", Node: "n4"})
	if err := h.env.GetWorkflowError(); err != nil || pulled {
		t.Fatalf("err=%v pulled=%v", err, pulled)
	}
}

func TestImageDeleteRemovesFromNodesThenTheRow(t *testing.T) {
	h := newImageHarness(t)
	h.env.OnActivity(img.ImageNodeNames, mock.Anything, mock.Anything).Return([]string{"n1", "n2"}, nil)
	deleted := false
	h.env.OnActivity(img.DeleteImageRow, mock.Anything, mock.Anything).Return(func(context.Context, controlapi.ImageRef) error {
		deleted = len(h.removed) == 2 && h.storeRm == 1
		return nil
	})
	h.env.OnRequestCancelExternalWorkflow(mock.Anything, ImageWorkflowID("ubuntu"), "").Return(nil)
	h.env.ExecuteWorkflow(ImageDelete, ImageInput{Image: testImage})
	if err := h.env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	if !deleted {
		t.Fatalf("the row must go after the nodes (%d) and the store (%d) were cleaned", len(h.removed), h.storeRm)
	}
}

// slowLooks makes a waiting pod look again on its own only after ten
// hours: only a wake can start it within a test's minutes.
func slowLooks() *Tuning {
	t := fastTuning
	t.RetryMin, t.RetryMax = 10*time.Hour, 10*time.Hour
	return &t
}

// A pod whose image is missing on its node starts the pull, waits with
// reason ImagePulling and starts within a second of the pull's end, woken
// as WakeImageWaiters wakes it, however the wake falls against its own
// steps: while it waits, while it looks, or before it has written that it
// waits. Its periodic look (ten hours here) cannot be what starts it.
func TestPodWaitsImagePullingThenProvisions(t *testing.T) {
	for _, tc := range []struct {
		name string
		// pullEnds arranges for end to run at the moment under test.
		pullEnds func(h *harness, firstLook *bool, end func())
	}{
		{"the pull ends while the pod waits", func(h *harness, _ *bool, end func()) {
			h.env.RegisterDelayedCallback(end, 30*time.Second)
		}},
		{"the pull ends while the pod looks", func(_ *harness, firstLook *bool, end func()) {
			*firstLook = true
		}},
		{"the pull ends before the pod writes that it waits", func(h *harness, _ *bool, end func()) {
			ended := false
			h.onStatus = func(u controlapi.StatusUpdate) {
				if u.Reason == podcontract.ReasonImagePulling && !ended {
					ended = true
					end()
				}
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var (
				mu                      sync.Mutex
				present, endInFirstLook bool
				resolves                int
				pulls                   []controlapi.ImageNodeInput
				kind                    string
				pulledAt, provisionedAt time.Time
			)
			var h *harness
			end := func() { // what pullToNode does: the image is Ready on n1, then the waiters are woken
				mu.Lock()
				present, pulledAt = true, h.env.Now()
				mu.Unlock()
				h.env.SignalWorkflow(podcontract.SignalWake, struct{}{})
			}
			install := override{fn: host.ProvisionPod, ret: []any{func(_ context.Context, in hostapi.ProvisionInput) (hostapi.ProvisionResult, error) {
				mu.Lock()
				defer mu.Unlock()
				kind, provisionedAt = in.Sandbox.ImageKind, h.env.Now()
				return hostapi.ProvisionResult{Seq: supervisedSeq}, nil
			}}}
			h = newHarness(t, podSpec(), install, override{fn: img.ResolvePodImage, ret: []any{func(_ context.Context, in controlapi.ImageNodeInput) (controlapi.ResolvedImage, error) {
				mu.Lock()
				resolves++
				first, there := resolves == 1, present
				mu.Unlock()
				switch {
				case there:
					return controlapi.ResolvedImage{Found: true, Kind: model.ImageZFSStream, Present: true}, nil
				case first && endInFirstLook:
					defer end() // the answer below is already stale when the pod reads it
				}
				return controlapi.ResolvedImage{Found: true, Kind: model.ImageZFSStream, Pull: first, Message: "pulling image base to node n1"}, nil
			}}})
			h.env.OnActivity(img.RequestImagePull, mock.Anything, mock.Anything).Return(func(_ context.Context, in controlapi.ImageNodeInput) error {
				mu.Lock()
				defer mu.Unlock()
				pulls = append(pulls, in)
				return nil
			})
			tc.pullEnds(h, &endInFirstLook, end)
			zero := int64(0)
			h.env.RegisterDelayedCallback(func() {
				h.env.SignalWorkflow(podcontract.SignalTerminate, podcontract.TerminateSignal{GracePeriodSeconds: &zero})
			}, 2*time.Minute)
			h.env.ExecuteWorkflow(PodLifecycle, PodInput{Pod: testRef, Tuning: slowLooks()})
			if err := h.env.GetWorkflowError(); err != nil {
				t.Fatal(err)
			}
			if !h.sawReason(podcontract.ReasonImagePulling) {
				t.Fatalf("the pod must wait with reason ImagePulling: %+v", h.statuses)
			}
			if len(pulls) != 1 || pulls[0] != (controlapi.ImageNodeInput{Image: "base", Node: "n1"}) {
				t.Fatalf("want one pull of base to n1, got %+v", pulls)
			}
			if provisionedAt.IsZero() || provisionedAt.Sub(pulledAt) > time.Second {
				t.Fatalf("the pull ended at %s, the zone was provisioned at %s (zero: never); want within a second",
					pulledAt.Format(time.TimeOnly), provisionedAt.Format(time.TimeOnly))
			}
			if kind != model.ImageZFSStream {
				t.Fatalf("the zone must install from the image's kind once present: kind=%q calls=%s", kind, h.calls)
			}
		})
	}
}

// A pod waiting for an address on its full node gets one within a second
// of one being freed there, woken as ReleasePodIP's wakeAddressWaiters
// wakes it, not at its next back-off (ten hours here).
func TestIPExhaustedPodStartsWhenAnAddressIsFreed(t *testing.T) {
	var (
		mu                   sync.Mutex
		free                 bool
		freedAt, allocatedAt time.Time
	)
	var h *harness
	h = newHarness(t, podSpec(), override{fn: ctl.AllocatePodIP, ret: []any{func(context.Context, controlapi.AllocateInput) (controlapi.AllocateResult, error) {
		mu.Lock()
		defer mu.Unlock()
		if !free {
			return controlapi.AllocateResult{Exhausted: "pod CIDR exhausted: node n1 has no free address in 10.88.1.0/29 (5 in use)"}, nil
		}
		allocatedAt = h.env.Now()
		return controlapi.AllocateResult{IP: "10.88.1.4", PrefixLen: 29, Gateway: "10.88.1.1"}, nil
	}}})
	h.env.RegisterDelayedCallback(func() {
		mu.Lock()
		free, freedAt = true, h.env.Now()
		mu.Unlock()
		h.env.SignalWorkflow(podcontract.SignalWake, struct{}{})
	}, 30*time.Second)
	h.env.RegisterDelayedCallback(func() { h.env.SignalWorkflow(podcontract.SignalTerminate, podcontract.TerminateSignal{}) }, 2*time.Minute)
	h.env.ExecuteWorkflow(PodLifecycle, PodInput{Pod: testRef, Tuning: slowLooks()})
	if err := h.env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	if !h.sawReason(podcontract.ReasonIPExhausted) {
		t.Fatalf("the pod must wait with reason IPExhausted: %+v", h.statuses)
	}
	if allocatedAt.IsZero() || allocatedAt.Sub(freedAt) > time.Second || !h.calls.has("ProvisionPod") {
		t.Fatalf("an address was freed at %s, the pod got one at %s (zero: never); want within a second, then provisioned: %s",
			freedAt.Format(time.TimeOnly), allocatedAt.Format(time.TimeOnly), h.calls)
	}
}

// failedLooksThenPresent runs a pod whose first two looks at its image
// get failed and whose third finds it on the node; it returns the
// harness, what the last look asked and how many pulls the pod started.
func failedLooksThenPresent(t *testing.T, spec model.PodSpec, failed controlapi.ResolvedImage) (*harness, controlapi.ImageNodeInput, int) {
	t.Helper()
	resolves, pulls := 0, 0
	var asked controlapi.ImageNodeInput
	h := newHarness(t, spec, override{fn: img.ResolvePodImage, ret: []any{func(_ context.Context, in controlapi.ImageNodeInput) (controlapi.ResolvedImage, error) {
		resolves++
		asked = in
		if resolves < 3 {
			return failed, nil
		}
		return controlapi.ResolvedImage{Found: true, Kind: failed.Kind, Present: true}, nil
	}}})
	h.env.OnActivity(img.RequestImagePull, mock.Anything, mock.Anything).Return(func(context.Context, controlapi.ImageNodeInput) error {
		pulls++
		return nil
	})
	zero := int64(0)
	h.run(time.Minute, podcontract.SignalTerminate, podcontract.TerminateSignal{GracePeriodSeconds: &zero})
	if err := h.env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	return h, asked, pulls
}

func TestPodRetriesAFailedPullWithBackOff(t *testing.T) {
	h, _, pulls := failedLooksThenPresent(t, podSpec(),
		controlapi.ResolvedImage{Found: true, Kind: model.ImageLXTarball, Pull: true, Failed: true, Message: "pull failed: disk full"})
	if i := slices.IndexFunc(h.statuses, func(u controlapi.StatusUpdate) bool {
		return u.Reason == podcontract.ReasonErrImagePull || u.Reason == podcontract.ReasonImagePullBackOff
	}); i < 0 || h.statuses[i].Reason != podcontract.ReasonErrImagePull {
		t.Fatalf("the first failed look says ErrImagePull, as the kubelet does: %+v", h.statuses)
	}
	if !slices.ContainsFunc(h.statuses, func(u controlapi.StatusUpdate) bool { return u.EventOnly && u.EventReason == "Pulled" }) {
		t.Fatalf("the image's arrival is a Pulled event: %+v", h.statuses)
	}
	if !h.sawReason(podcontract.ReasonImagePullBackOff) || pulls != 2 || !h.calls.has("ProvisionPod") {
		t.Fatalf("a failed pull keeps the pod Pending (ImagePullBackOff) and is retried: pulls=%d calls=%s", pulls, h.calls)
	}
	if slices.ContainsFunc(h.statuses, func(u controlapi.StatusUpdate) bool { return u.Phase == model.PodFailed }) {
		t.Fatal("a failed pull must not fail the pod")
	}
}

// A pod whose imagePullPolicy is Never asks for the image without a pull,
// and waits with the reason the answer gives (ErrImageNeverPull), never
// starting one, until its node holds the image.
func TestNeverPullWaitsWithoutPulling(t *testing.T) {
	spec := podSpec(func(s *model.PodSpec) { s.Containers[0].ImagePullPolicy = model.PullNever })
	h, asked, pulls := failedLooksThenPresent(t, spec,
		controlapi.ResolvedImage{Found: true, Kind: model.ImageLXTarball, Failed: true, Reason: podcontract.ReasonErrImageNeverPull, Message: "not present"})
	if !asked.NeverPull || !h.sawReason(podcontract.ReasonErrImageNeverPull) || pulls != 0 || !h.calls.has("ProvisionPod") {
		t.Fatalf("asked %+v, pulls %d, calls %s, statuses %+v", asked, pulls, h.calls, h.statuses)
	}
}
