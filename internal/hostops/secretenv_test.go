package hostops

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/zonewright/zonewright/internal/hostapi"
	"github.com/zonewright/zonewright/internal/model"
)

type fakeSecretEnv struct {
	env   *model.PodSecretEnv
	asked []string
}

func (f *fakeSecretEnv) SecretEnv(_ context.Context, ns, pod, uid string) (*model.PodSecretEnv, error) {
	f.asked = append(f.asked, ns+"/"+pod+"/"+uid)
	return f.env, nil
}

func secretRef(name, key string) *model.EnvVarSource {
	return &model.EnvVarSource{SecretKeyRef: &model.SecretKeySelector{Name: name, Key: key}}
}

func TestSecretValuesGoIntoTheServiceEnvironmentInOrder(t *testing.T) {
	sb := hostapi.PodSandbox{Namespace: "default", Name: "web", UID: "u1", IP: "10.0.0.5", Containers: []hostapi.ContainerSpec{{
		Name: "app", Argv: []string{"run"},
		Env: []model.EnvVar{
			{Name: "A", Value: "plain"},
			{Name: "A", ValueFrom: secretRef("db", "a")}, // later wins
			{Name: "OPT", ValueFrom: secretRef("absent", "k")},
			{Name: "B", ValueFrom: secretRef("db", "b")},
			{Name: "B", Value: "literal"}, // later wins
		},
	}}}
	src := &fakeSecretEnv{env: &model.PodSecretEnv{Containers: []model.ContainerSecretEnv{{Name: "app",
		Env: []model.SecretValue{{Name: "A", Value: "from-secret"}, {Name: "B", Value: "b-secret"}}}}}}
	h := &Host{Secrets: src}
	env, err := h.secretEnv(t.Context(), sb)
	if err != nil {
		t.Fatal(err)
	}
	if len(src.asked) != 1 || src.asked[0] != "default/web/u1" {
		t.Fatalf("asked for %v", src.asked)
	}
	svc, err := sandboxService(sb, sb.Containers[0], env["app"], "node-1")
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, e := range svc.Env {
		got[e.Name] = e.Value
	}
	if got["A"] != "from-secret" || got["B"] != "literal" || got["POD_IP"] != "10.0.0.5" {
		t.Errorf("service environment: %v", got)
	}
	if _, ok := got["OPT"]; ok {
		t.Errorf("an optional variable whose secret is missing is set: %v", got)
	}
}

func TestAMissingSecretIsAConfigErrorWithoutValues(t *testing.T) {
	sb := hostapi.PodSandbox{Namespace: "default", Name: "web", Containers: []hostapi.ContainerSpec{{Name: "app", Argv: []string{"run"},
		Env: []model.EnvVar{{Name: "P", ValueFrom: secretRef("db", "p")}}}}}
	h := &Host{Secrets: &fakeSecretEnv{env: &model.PodSecretEnv{
		Containers: []model.ContainerSecretEnv{{Name: "app", Env: []model.SecretValue{{Name: "Q", Value: "hunter2"}}}},
		Missing:    []model.MissingSecretRef{{Container: "app", Name: "P", Message: `secret "db" not found`}}}}}
	_, err := h.secretEnv(t.Context(), sb)
	var ce *ConfigError
	if !errors.As(err, &ce) || !strings.Contains(err.Error(), `CreateContainerConfigError: container "app": secret "db" not found`) {
		t.Fatalf("got %v, want a ConfigError naming the secret", err)
	}
	if strings.Contains(err.Error(), "hunter2") || Permanent(err) {
		t.Errorf("the error carries a value or is not worth retrying: %v", err)
	}
	if _, err := (&Host{}).secretEnv(t.Context(), sb); !Permanent(err) {
		t.Errorf("a node without an API: %v, want a permanent refusal", err)
	}
	if env, err := (&Host{}).secretEnv(t.Context(), hostapi.PodSandbox{Containers: []hostapi.ContainerSpec{{Name: "app"}}}); env != nil || err != nil {
		t.Errorf("a pod that reads no secrets: %v, %v", env, err)
	}
}

// A step failing for a missing secret is not tried again on the node:
// the pod says CreateContainerConfigError at once and its lifecycle
// retries with back-off, instead of the node retrying for the step's two
// minutes before anyone is told.
func TestAMissingSecretFailsTheStepAtOnce(t *testing.T) {
	calls := 0
	st := ProvisionStep{Name: "StartContainers", Timeout: time.Minute, run: func(*Host, context.Context, hostapi.PodSandbox) error {
		calls++
		return &ConfigError{Container: "app", Message: `secret "db" not found`}
	}}
	h := &Host{StepRetry: time.Millisecond}
	tries, err := h.runStep(t.Context(), st, hostapi.PodSandbox{Namespace: "default", Name: "web", UID: "u1"})
	var ce *ConfigError
	if !errors.As(err, &ce) || tries != 1 || calls != 1 {
		t.Fatalf("runStep = %d tries, %d calls, %v; want one try and the ConfigError", tries, calls, err)
	}
}
