package hostops

import (
	"context"
	"errors"
	"fmt"

	"github.com/zonewright/zonewright/internal/hostapi"
	"github.com/zonewright/zonewright/internal/model"
)

// SecretEnvSource reads the values a pod's containers take from secrets,
// from the control plane, for a pod bound to this node. The values go
// straight into the containers' services: never into a result, a
// heartbeat, an error or a log.
type SecretEnvSource interface {
	SecretEnv(ctx context.Context, namespace, pod, uid string) (*model.PodSecretEnv, error)
}

// readsSecrets reports whether any container of the sandbox takes a
// variable from a secret.
func readsSecrets(s hostapi.PodSandbox) bool {
	for _, c := range s.Containers {
		for _, e := range c.Env {
			if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
				return true
			}
		}
	}
	return false
}

// secretEnv reads the secret values of the sandbox's containers: by
// container, by variable name. A reference that names no secret or key
// (and is not optional) is a *ConfigError.
func (h *Host) secretEnv(ctx context.Context, s hostapi.PodSandbox) (map[string]map[string]string, error) {
	if !readsSecrets(s) {
		return nil, nil
	}
	if h.Secrets == nil {
		return nil, &InvalidError{Err: errors.New("the pod reads secrets and this node has no control plane API to read them from (--api-url)")}
	}
	env, err := h.Secrets.SecretEnv(ctx, s.Namespace, s.Name, s.UID)
	if err != nil {
		return nil, fmt.Errorf("read the pod's secret environment: %w", err)
	}
	if len(env.Missing) > 0 {
		m := env.Missing[0]
		msg := m.Message
		if len(env.Missing) > 1 {
			msg += fmt.Sprintf(" (and %d more)", len(env.Missing)-1)
		}
		return nil, &ConfigError{Container: m.Container, Message: msg}
	}
	out := make(map[string]map[string]string, len(env.Containers))
	for _, c := range env.Containers {
		vars := make(map[string]string, len(c.Env))
		for _, v := range c.Env {
			vars[v.Name] = v.Value
		}
		out[c.Name] = vars
	}
	return out, nil
}
