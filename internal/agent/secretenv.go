package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/zonewright/zonewright/internal/model"
)

// apiSecretEnv reads pods' secret environment from the control plane's
// API (GET …/pods/{name}/secretenv), which answers only for pods bound to
// the asking node. What it reads goes to the host operations alone:
// errors carry the answer's status, never its body's values.
type apiSecretEnv struct {
	base   string
	node   string
	client *http.Client
}

func (s apiSecretEnv) SecretEnv(ctx context.Context, namespace, pod, uid string) (*model.PodSecretEnv, error) {
	u := fmt.Sprintf("%s/api/v1/namespaces/%s/pods/%s/secretenv?uid=%s", strings.TrimRight(s.base, "/"),
		url.PathEscape(namespace), url.PathEscape(pod), url.QueryEscape(uid))
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set(model.NodeHeader, s.node)
	resp, err := s.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		var st model.Status
		if json.Unmarshal(body, &st) == nil && st.Message != "" {
			return nil, fmt.Errorf("the control plane answered %s: %s", resp.Status, st.Message)
		}
		return nil, fmt.Errorf("the control plane answered %s", resp.Status)
	}
	var env model.PodSecretEnv
	if err := json.Unmarshal(body, &env); err != nil {
		return nil, fmt.Errorf("decode the pod's secret environment: malformed answer")
	}
	return &env, nil
}
