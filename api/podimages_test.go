package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"

	tclient "go.temporal.io/sdk/client"

	"github.com/zonewright/zonewright/api"
	"github.com/zonewright/zonewright/internal/imagemap"
	"github.com/zonewright/zonewright/internal/model"
	"github.com/zonewright/zonewright/internal/pgtest"
	"github.com/zonewright/zonewright/workflows"
)

// startRecorder stands for Temporal: it accepts every workflow start and
// records its ID (any other call panics: nothing else is expected).
type startRecorder struct {
	tclient.Client
	mu  sync.Mutex
	ids []string
}

func (s *startRecorder) ExecuteWorkflow(_ context.Context, o tclient.StartWorkflowOptions, _ any, _ ...any) (tclient.WorkflowRun, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ids = append(s.ids, o.ID)
	return nil, nil
}

// imports are the image imports started (workflow IDs image/<name>).
func (s *startRecorder) imports() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, id := range s.ids {
		if strings.HasPrefix(id, "image/") && strings.Count(id, "/") == 1 {
			out = append(out, id)
		}
	}
	return out
}

// podImagesAPI serves the API over a database of its own with a Temporal
// that accepts every start; max bounds the registry images pods add
// (zero: the default).
func podImagesAPI(t *testing.T, max int) (*client, *startRecorder) {
	t.Helper()
	temporal := &startRecorder{}
	c := serveConfig(t, pgtest.NewDatabase(t), api.Config{
		ImageMap:             &imagemap.Map{},
		Lifecycles:           &workflows.PodClient{Temporal: temporal},
		Images:               &workflows.ImageClient{Temporal: temporal},
		MaxPodRegistryImages: max,
	})
	return c, temporal
}

func registryPod(name, ref string) string {
	return fmt.Sprintf(`{"metadata":{"name":%q},"spec":{"runtimeClassName":"lx","containers":[{"name":"a","image":%q}]}}`, name, ref)
}

// madeForPods lists the catalog's images made for pods.
func madeForPods(t *testing.T, c *client) []model.Image {
	t.Helper()
	r := c.json("GET", "/api/v1/images?labelSelector="+model.LabelMadeForPods, nil)
	var l model.List[model.Image]
	if r.code != http.StatusOK || json.Unmarshal(r.body, &l) != nil {
		t.Fatalf("list images: %d %s", r.code, r.body)
	}
	return l.Items
}

// A pod create refused after its images were resolved (here by a quota,
// found in the create's transaction) adds no image to the catalog and
// starts no import: the image of a new reference is added in the pod's
// transaction and imported after its commit. The first pod that gets in
// adds it, marked made for pods, and starts its import. (Before,
// registryImage created the image and started its import ahead of the
// pod's create: run this test's first half against that commit to see
// the refused pod leave both behind.)
func TestAFailedPodCreateAddsNoImage(t *testing.T) {
	c, temporal := podImagesAPI(t, 0)
	if r := c.json("POST", "/api/v1/namespaces/default/resourcequotas", `{"metadata":{"name":"none"},"spec":{"hard":{"pods":"0"}}}`); r.code != http.StatusCreated {
		t.Fatalf("create quota: %d %s", r.code, r.body)
	}
	if r := c.json("POST", "/api/v1/namespaces/default/pods", registryPod("refused", "registry.example/demo/hello:1")); r.code != http.StatusForbidden {
		t.Fatalf("a pod over the quota: %d %s", r.code, r.body)
	}
	if imgs := madeForPods(t, c); len(imgs) != 0 {
		t.Errorf("the refused pod left image %s in the catalog", imgs[0].Metadata.Name)
	}
	if got := temporal.imports(); len(got) != 0 {
		t.Errorf("the refused pod started imports %v", got)
	}

	if r := c.json("DELETE", "/api/v1/namespaces/default/resourcequotas/none", nil); r.code != http.StatusOK {
		t.Fatalf("delete quota: %d %s", r.code, r.body)
	}
	if r := c.json("POST", "/api/v1/namespaces/default/pods", registryPod("admitted", "registry.example/demo/hello:1")); r.code != http.StatusCreated {
		t.Fatalf("the pod once admitted: %d %s", r.code, r.body)
	}
	imgs := madeForPods(t, c)
	if len(imgs) != 1 || imgs[0].Spec.Source != "registry.example/demo/hello:1" || imgs[0].Status.Phase != model.ImagePending {
		t.Fatalf("the admitted pod's image: %+v", imgs)
	}
	if got := temporal.imports(); len(got) != 1 || got[0] != "image/"+imgs[0].Metadata.Name {
		t.Errorf("the admitted pod's import: %v", got)
	}
}

// Pods created at once that name one new reference add one image,
// imported once, and every one of them is created. (Drop the look for an
// image another write added in store.addPodImage to see the later pods
// refused with 409.)
func TestConcurrentPodsOfANewReferenceAddOneImage(t *testing.T) {
	c, temporal := podImagesAPI(t, 0)
	const pods = 8
	codes := make([]int, pods)
	var wg sync.WaitGroup
	for i := range pods {
		wg.Go(func() {
			codes[i] = c.json("POST", "/api/v1/namespaces/default/pods", registryPod(fmt.Sprintf("p%d", i), "registry.example/demo/same:1")).code
		})
	}
	wg.Wait()
	for i, code := range codes {
		if code != http.StatusCreated {
			t.Errorf("pod p%d: %d", i, code)
		}
	}
	if imgs := madeForPods(t, c); len(imgs) != 1 {
		t.Errorf("the pods added %d images", len(imgs))
	}
	if got := temporal.imports(); len(got) != 1 {
		t.Errorf("imports started: %v", got)
	}
}

// Past the cap on registry images pods add, a pod that would add one
// more is refused with 403 naming its field, the limit and what to do,
// and adds nothing; a pod of an image already there, and an operator's
// own image, are not refused. Creates at once cannot pass the last place
// together. (Drop the n >= max refusal in store.addPodImage to see the
// third image added.)
func TestTheCapOnImagesPodsAdd(t *testing.T) {
	c, _ := podImagesAPI(t, 2)
	var wg sync.WaitGroup
	codes := make([]int, 3)
	for i := range 3 {
		wg.Go(func() {
			codes[i] = c.json("POST", "/api/v1/namespaces/default/pods", registryPod(fmt.Sprintf("p%d", i), fmt.Sprintf("registry.example/demo/app%d:1", i))).code
		})
	}
	wg.Wait()
	created, refused := 0, 0
	for _, code := range codes {
		switch code {
		case http.StatusCreated:
			created++
		case http.StatusForbidden:
			refused++
		}
	}
	if created != 2 || refused != 1 {
		t.Fatalf("three new references at once under a cap of 2: %v", codes)
	}
	if imgs := madeForPods(t, c); len(imgs) != 2 {
		t.Fatalf("images made for pods: %d", len(imgs))
	}
	r := c.json("POST", "/api/v1/namespaces/default/pods", registryPod("over", "registry.example/demo/more:1"))
	st := r.status()
	if r.code != http.StatusForbidden || st.Reason != "Forbidden" || st.Details == nil || len(st.Details.Causes) != 1 ||
		st.Details.Causes[0].Field != "spec.containers[0].image" ||
		!strings.Contains(st.Message, "spec.containers[0].image") || !strings.Contains(st.Message, "limit 2") ||
		!strings.Contains(st.Message, "delete the pods") || !strings.Contains(st.Message, "ask an operator") {
		t.Fatalf("a pod over the cap: %d %s", r.code, r.body)
	}
	if r := c.json("POST", "/api/v1/namespaces/default/pods?dryRun=All", registryPod("over", "registry.example/demo/more:1")); r.code != http.StatusForbidden {
		t.Errorf("a dry run over the cap: %d %s", r.code, r.body)
	}
	// An existing image is never refused, whichever reference made it.
	for i, code := range codes {
		if code == http.StatusCreated {
			if r := c.json("POST", "/api/v1/namespaces/default/pods", registryPod(fmt.Sprintf("again%d", i), fmt.Sprintf("registry.example/demo/app%d:1", i))); r.code != http.StatusCreated {
				t.Errorf("a pod of an image in the catalog: %d %s", r.code, r.body)
			}
		}
	}
	// An operator's registry image is not made for pods: not capped, and
	// it cannot claim to be.
	if r := c.json("POST", "/api/v1/images", `{"metadata":{"name":"ops-more"},"spec":{"kind":"oci","source":"registry.example/demo/more:1"}}`); r.code != http.StatusCreated {
		t.Errorf("an operator's oci image over the cap: %d %s", r.code, r.body)
	}
	marked := fmt.Sprintf(`{"metadata":{"name":"ops-marked","labels":{%q:"true"}},"spec":{"kind":"oci","source":"registry.example/demo/x:1"}}`, model.LabelMadeForPods)
	if r := c.json("POST", "/api/v1/images", marked); r.code != http.StatusUnprocessableEntity || !strings.Contains(string(r.body), model.LabelMadeForPods) {
		t.Errorf("an operator's image marked made for pods: %d %s", r.code, r.body)
	}
	if imgs := madeForPods(t, c); len(imgs) != 2 {
		t.Errorf("images made for pods after the refusals: %d", len(imgs))
	}
}
