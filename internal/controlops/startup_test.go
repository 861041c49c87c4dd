package controlops_test

import (
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/zonewright/zonewright/internal/controlapi"
	"github.com/zonewright/zonewright/internal/controlops"
	"github.com/zonewright/zonewright/internal/metrics"
	"github.com/zonewright/zonewright/internal/model"
)

// The write that first makes a pod Ready measures its start from its
// creation; the same write again (a retried activity) finds the pod Ready
// and measures nothing, nor does a later Ready after a restart's
// NotReady (the lifecycle hands the record over once).
func TestTheFirstReadyWriteMeasuresTheStartOnce(t *testing.T) {
	ctx := t.Context()
	st := openStore(t)
	p := &model.Pod{Metadata: model.ObjectMeta{Name: "web", Namespace: model.DefaultNamespace},
		Spec: model.PodSpec{Containers: []model.Container{{Name: "c", Image: "i", Command: []string{"c"}}}}}
	if err := st.CreatePod(ctx, p); err != nil {
		t.Fatal(err)
	}
	created := *p.Metadata.CreationTimestamp
	reg := metrics.NewRegistry()
	ctl := controlops.NewControl(st, nil)
	ctl.Metrics = metrics.NewServe(reg)
	ref := controlapi.PodRef{Namespace: p.Metadata.Namespace, Name: p.Metadata.Name, UID: p.Metadata.UID}
	ready := created.Add(10 * time.Second)
	startup := &controlapi.PodStartup{Scheduled: created.Add(time.Second), ImageReady: created.Add(2 * time.Second),
		Provisioned: created.Add(9 * time.Second), Boot: 2 * time.Second, Network: time.Second, Containers: time.Second}
	u := controlapi.StatusUpdate{Pod: ref, Phase: model.PodRunning, Startup: startup,
		Conditions: []model.PodCondition{{Type: model.PodReady, Status: model.ConditionTrue, LastTransitionTime: &ready}}}
	for range 2 {
		if err := ctl.UpdatePodStatus(ctx, u); err != nil {
			t.Fatal(err)
		}
	}
	body := scrape(t, reg)
	for _, want := range []string{
		"zonewright_pod_startup_duration_seconds_count 1",
		"zonewright_pod_startup_duration_seconds_sum 10",
		`zonewright_pod_startup_phase_duration_seconds_sum{phase="install"} 3`,
		`zonewright_pod_startup_phase_duration_seconds_sum{phase="ready"} 1`,
		`zonewright_pod_startup_phase_duration_seconds_sum{phase="scheduling"} 1`,
	} {
		if !strings.Contains(body, want+"\n") {
			t.Errorf("metrics lack %q", want)
		}
	}
	// Without the record nothing is measured, whatever the writes.
	notReady, again := ready.Add(time.Minute), ready.Add(2*time.Minute)
	for _, c := range []model.PodCondition{{Type: model.PodReady, Status: model.ConditionFalse, LastTransitionTime: &notReady},
		{Type: model.PodReady, Status: model.ConditionTrue, LastTransitionTime: &again}} {
		if err := ctl.UpdatePodStatus(ctx, controlapi.StatusUpdate{Pod: ref, Conditions: []model.PodCondition{c}}); err != nil {
			t.Fatal(err)
		}
	}
	if body := scrape(t, reg); !strings.Contains(body, "zonewright_pod_startup_duration_seconds_count 1\n") {
		t.Errorf("a later Ready was measured as a start")
	}
}

func scrape(t *testing.T, reg *prometheus.Registry) string {
	t.Helper()
	rec := httptest.NewRecorder()
	metrics.Handler(reg).ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	return rec.Body.String()
}

// The update that ends a node's pull measures it with the artefact's
// size; the same update again measures nothing.
func TestTheEndOfANodesPullIsMeasuredOnce(t *testing.T) {
	ctx := t.Context()
	st := openStore(t)
	img := &model.Image{Metadata: model.ObjectMeta{Name: "base"}, Spec: model.ImageSpec{Kind: model.ImageZFSStream}}
	img.Status.ArtefactSize = 5 << 20
	if err := st.Images().Create(ctx, img); err != nil {
		t.Fatal(err)
	}
	createNode(t, st, "n1", time.Now())
	reg := metrics.NewRegistry()
	ops := &controlops.Images{Store: st, Metrics: metrics.NewServe(reg)}
	for _, phase := range []string{model.ImagePulling, model.ImageReady, model.ImageReady} {
		if err := ops.SetImageNodeStatus(ctx, controlapi.ImageNodeUpdate{Image: "base", Node: "n1", Phase: phase}); err != nil {
			t.Fatal(err)
		}
	}
	body := scrape(t, reg)
	for _, want := range []string{`zonewright_image_node_pull_duration_seconds_count{result="ok"} 1`, "zonewright_image_node_pull_bytes_total 5.24288e+06"} {
		if !strings.Contains(body, want+"\n") {
			t.Errorf("metrics lack %q", want)
		}
	}
}
