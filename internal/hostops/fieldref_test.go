package hostops

import (
	"testing"

	"github.com/zonewright/zonewright/internal/hostapi"
	"github.com/zonewright/zonewright/internal/model"
)

// A variable read from a field of the pod takes the field's value, and
// does not make the node ask for secrets.
func TestFieldRefsTakeThePodsFields(t *testing.T) {
	ref := func(path string) *model.EnvVarSource {
		return &model.EnvVarSource{FieldRef: &model.ObjectFieldSelector{FieldPath: path}}
	}
	sb := hostapi.PodSandbox{Namespace: "shop", Name: "web", UID: "u1", IP: "10.0.0.5", Containers: []hostapi.ContainerSpec{{
		Name: "app", Argv: []string{"run"},
		Env: []model.EnvVar{
			{Name: "MY_NAME", ValueFrom: ref(model.FieldPodName)},
			{Name: "MY_NS", ValueFrom: ref(model.FieldPodNamespace)},
			{Name: "MY_UID", ValueFrom: ref(model.FieldPodUID)},
			{Name: "MY_NODE", ValueFrom: ref(model.FieldNodeName)},
			{Name: "MY_IP", ValueFrom: ref(model.FieldPodIP)},
			{Name: "MY_IPS", ValueFrom: ref(model.FieldPodIPs)},
			{Name: "POD_IP", ValueFrom: ref(model.FieldPodName)}, // the container's own wins
		},
	}}}
	if readsSecrets(sb) {
		t.Error("a pod with fieldRefs alone reads secrets")
	}
	svc, err := sandboxService(sb, sb.Containers[0], nil, "node-1")
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, e := range svc.Env {
		got[e.Name] = e.Value
	}
	want := map[string]string{"MY_NAME": "web", "MY_NS": "shop", "MY_UID": "u1", "MY_NODE": "node-1", "MY_IP": "10.0.0.5",
		"MY_IPS": "10.0.0.5", "POD_IP": "web", "POD_NAME": "web", "POD_NAMESPACE": "shop"}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %q, want %q (all: %v)", k, got[k], v, got)
		}
	}
}
