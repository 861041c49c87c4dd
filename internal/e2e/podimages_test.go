package e2e_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	tclient "go.temporal.io/sdk/client"

	"github.com/zonewright/zonewright/internal/controlplane"
	"github.com/zonewright/zonewright/internal/model"
	"github.com/zonewright/zonewright/workflows"
)

// A registry image pods added to the catalog is removed, from its node
// and the catalog, once no pod has used it for --pod-registry-image-ttl
// (small here), at the image-sync schedule's runs. Kept: an operator's
// own registry image no pod uses (drop the made-for-pods label condition
// of the sweep's queries in store.SweepPodImages to see it removed),
// one a running pod uses, and one only a deployment scaled to zero names
// (drop the deployments and controllerrevisions lines of
// store.imageUsersSQL to see it removed: each covers it alone).
func TestUnusedPodImagesExpire(t *testing.T) {
	t.Parallel()
	host := startRegistry(t, func(h http.Handler) http.Handler { return h })
	cfg := v1.Config{Entrypoint: []string{"/bin/sh", "-c"}, Cmd: []string{"exec sleep 3600"}}
	amd64 := v1.Platform{OS: "linux", Architecture: "amd64"}
	for _, repo := range []string{"gone", "used", "idle", "ops"} {
		push(t, host, "demo/"+repo+":1", ociImage(t, cfg, amd64, layer(t, repo, repo+"\n")))
	}
	c := newClusterWith(t, 1, func(cfg *controlplane.Config) { cfg.PodRegistryImageTTL = 3 * time.Second })
	pod := func(name string) string {
		return fmt.Sprintf(`{"metadata":{"name":%q},"spec":{"runtimeClassName":"lx",
		  "containers":[{"name":"app","image":%q,"resources":{"requests":{"cpu":"100m","memory":"64Mi"}}}]}}`, name, host+"/demo/"+name+":1")
	}
	gone := c.createPod(pod("gone")).Spec.Containers[0].Image
	used := c.createPod(pod("used")).Spec.Containers[0].Image
	code, b := c.do("POST", "/apis/apps/v1/namespaces/default/deployments", fmt.Sprintf(`{"metadata":{"name":"idle"},"spec":{"replicas":0,
	  "selector":{"matchLabels":{"app":"idle"}},"template":{"metadata":{"labels":{"app":"idle"}},"spec":{"runtimeClassName":"lx",
	  "containers":[{"name":"app","image":%q,"resources":{"requests":{"cpu":"100m","memory":"64Mi"}}}]}}}}`, host+"/demo/idle:1"))
	if code != http.StatusCreated {
		t.Fatalf("create the deployment: %d %s", code, b)
	}
	var d model.Deployment
	c.get("/apis/apps/v1/namespaces/default/deployments/idle", &d)
	idle := d.Spec.Template.Spec.Containers[0].Image
	if code, b := c.do("POST", "/api/v1/images", fmt.Sprintf(`{"metadata":{"name":"ops"},"spec":{"kind":"oci","source":%q}}`, host+"/demo/ops:1")); code != http.StatusCreated {
		t.Fatalf("create the operator's image: %d %s", code, b)
	}
	for _, name := range []string{gone, used, idle} {
		if !strings.HasPrefix(name, "oci-") {
			t.Fatalf("a registry reference resolved to %q", name)
		}
	}
	c.waitPhase("gone", model.PodRunning, true, 3*time.Minute)
	c.waitPhase("used", model.PodRunning, true, 3*time.Minute)
	if _, ds := c.state(0); !strings.Contains(ds, "/zonewright/images/"+gone+"/") {
		t.Fatalf("the node holds no dataset of %s", gone)
	}
	if code, b := c.do("DELETE", "/api/v1/namespaces/default/pods/gone?gracePeriodSeconds=0", nil); code != http.StatusOK {
		t.Fatalf("delete pod gone: %d %s", code, b)
	}
	c.waitGone("gone", time.Minute)

	sync := c.temporal.ScheduleClient().GetHandle(context.Background(), workflows.ImageSyncScheduleID)
	var last time.Time
	c.eventually(3*time.Minute, "the unused image "+gone+" removed", func() bool {
		if time.Since(last) > 2*time.Second {
			last = time.Now()
			if err := sync.Trigger(context.Background(), tclient.ScheduleTriggerOptions{}); err != nil {
				t.Logf("trigger the image sync: %v", err)
			}
		}
		return c.get("/api/v1/images/"+gone, nil) == http.StatusNotFound
	})
	if _, ds := c.state(0); strings.Contains(ds, "/zonewright/images/"+gone+"/") {
		t.Errorf("the node still holds a dataset of the removed image %s", gone)
	}
	for _, name := range []string{used, idle, "ops"} {
		var img model.Image
		if code := c.get("/api/v1/images/"+name, &img); code != http.StatusOK || img.Metadata.DeletionTimestamp != nil {
			t.Errorf("image %s: %d, deleting %v", name, code, img.Metadata.DeletionTimestamp)
		}
	}
}
