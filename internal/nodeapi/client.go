package nodeapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/zonewright/zonewright/internal/model"
)

// Client is one node's client of the control plane's API.
type Client struct {
	http *http.Client
	base string // the API's base URL, without a trailing slash
	node string
}

// New returns node's client of the API at base, over hc: the one
// *http.Client the agent makes (its TLS trust and credentials are the
// node's).
func New(hc *http.Client, base, node string) *Client {
	return &Client{http: hc, base: strings.TrimRight(base, "/"), node: node}
}

// HTTP is the client's *http.Client, for the agent's other calls to the
// API (the service network long poll).
func (c *Client) HTTP() *http.Client { return c.http }

// BaseURL is the API's base URL.
func (c *Client) BaseURL() string { return c.base }

// Node is the node this client speaks for.
func (c *Client) Node() string { return c.node }

// StatusError is the API's answer to a refused request: its HTTP code
// and the Status it sent.
type StatusError struct {
	Method, Path string
	Code         int
	Reason       string
	Message      string
}

func (e *StatusError) Error() string {
	msg := e.Message
	if msg == "" {
		msg = http.StatusText(e.Code)
	}
	return fmt.Sprintf("%s %s: %d %s: %s", e.Method, e.Path, e.Code, e.Reason, msg)
}

// IsNotFound tells whether err is the API's 404.
func IsNotFound(err error) bool { return hasCode(err, http.StatusNotFound) }

// IsConflict tells whether err is the API's 409.
func IsConflict(err error) bool { return hasCode(err, http.StatusConflict) }

func hasCode(err error, code int) bool {
	var se *StatusError
	return errors.As(err, &se) && se.Code == code
}

// Retryable tells whether a failed call may succeed if made again: the
// API was unreachable, timed out, or answered 429 or 5xx.
func Retryable(err error) bool {
	var se *StatusError
	if errors.As(err, &se) {
		return se.Code == http.StatusTooManyRequests || se.Code >= 500
	}
	return err != nil && !errors.Is(err, context.Canceled)
}

// do sends one request with a JSON body (nil: none) and decodes a JSON
// answer into out (nil: discarded). It does not retry.
func (c *Client) do(ctx context.Context, method, path string, in, out any) error {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return fmt.Errorf("%s %s: encode: %w", method, path, err)
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, body)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 300 {
		se := &StatusError{Method: method, Path: path, Code: resp.StatusCode}
		var st model.Status
		if b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10)); json.Unmarshal(b, &st) == nil {
			se.Reason, se.Message = st.Reason, st.Message
		}
		return se
	}
	if out == nil {
		_, _ = io.Copy(io.Discard, resp.Body)
		return nil
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("%s %s: decode the answer: %w", method, path, err)
	}
	return nil
}

func (c *Client) nodePath(sub string) string {
	return "/api/v1/nodes/" + url.PathEscape(c.node) + sub
}

// GetNode reads this node's Node; IsNotFound when it is not registered.
func (c *Client) GetNode(ctx context.Context) (*model.Node, error) {
	var n model.Node
	if err := c.do(ctx, http.MethodGet, c.nodePath(""), nil, &n); err != nil {
		return nil, err
	}
	return &n, nil
}

// PutStatus registers the node or writes its status and agent-owned
// labels and annotations (spec.podCIDR asks for that CIDR). It answers
// the Node as stored, with the pod CIDR the control plane assigned.
func (c *Client) PutStatus(ctx context.Context, n *model.Node) (*model.Node, error) {
	in := *n
	in.TypeMeta = model.TypeMeta{APIVersion: model.APIVersion, Kind: model.KindNode}
	in.Metadata.Name = c.node
	var out model.Node
	if err := c.do(ctx, http.MethodPut, c.nodePath("/status"), &in, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// RenewLease renews the node's lease for duration; with nodeVersion, only
// while the Node is at that resourceVersion (IsConflict otherwise).
func (c *Client) RenewLease(ctx context.Context, holder string, duration time.Duration, nodeVersion string) (*model.Lease, error) {
	secs := int32(min(max(duration.Round(time.Second)/time.Second, 1), model.MaxLeaseDurationSeconds))
	in := model.Lease{TypeMeta: model.TypeMeta{APIVersion: model.APIVersionCoordination, Kind: model.KindLease},
		Metadata: model.ObjectMeta{Name: c.node}, Spec: model.LeaseSpec{HolderIdentity: holder, LeaseDurationSeconds: secs}}
	if nodeVersion != "" {
		in.Metadata.Annotations = map[string]string{model.AnnotationLeaseNodeVersion: nodeVersion}
	}
	var out model.Lease
	if err := c.do(ctx, http.MethodPut, c.nodePath("/lease"), &in, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// RecordEvent records an event on this node or one of its pods.
func (c *Client) RecordEvent(ctx context.Context, obj model.ObjectReference, typ, reason, msg string) error {
	ev := model.Event{TypeMeta: model.TypeMeta{APIVersion: model.APIVersion, Kind: model.KindEvent},
		EventData: model.EventData{InvolvedObject: obj, Type: typ, Reason: reason, Message: msg}}
	return c.do(ctx, http.MethodPost, c.nodePath("/events"), &ev, nil)
}

// BoundPods lists the pods bound to this node, at any version (as Nodes).
func (c *Client) BoundPods(ctx context.Context) ([]model.Pod, error) {
	return listAll[model.Pod](ctx, c, "/api/v1/pods", url.Values{"fieldSelector": {"spec.nodeName=" + c.node}, "resourceVersion": {"0"}})
}

// Nodes lists every Node of the cluster: the pod CIDRs and addresses the
// node routes its pods' traffic to. It asks for any version: every node
// lists them every few seconds and watches nothing from the list, so it
// need not hold the control plane's writers back for a settled one.
func (c *Client) Nodes(ctx context.Context) ([]model.Node, error) {
	return listAll[model.Node](ctx, c, "/api/v1/nodes", url.Values{"resourceVersion": {"0"}})
}

// listAll reads every page of a list, 500 items at a time.
func listAll[T any](ctx context.Context, c *Client, path string, q url.Values) ([]T, error) {
	var all []T
	q.Set("limit", "500")
	for {
		var list struct {
			Metadata struct {
				Continue string `json:"continue"`
			} `json:"metadata"`
			Items []T `json:"items"`
		}
		if err := c.do(ctx, http.MethodGet, path+"?"+q.Encode(), nil, &list); err != nil {
			return nil, err
		}
		all = append(all, list.Items...)
		if list.Metadata.Continue == "" {
			return all, nil
		}
		q.Set("continue", list.Metadata.Continue)
	}
}

// Reconcile sends the host's inventory; the answer names the orphans to
// remove now.
func (c *Client) Reconcile(ctx context.Context, in ReconcileRequest) (*ReconcileResponse, error) {
	var out ReconcileResponse
	if err := c.do(ctx, http.MethodPost, c.nodePath("/reconcile"), &in, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// OrphanRemoved reports an orphan the node removed.
func (c *Client) OrphanRemoved(ctx context.Context, in OrphanRemoval) error {
	return c.do(ctx, http.MethodPost, c.nodePath("/orphanremovals"), &in, nil)
}

// ErrPodGone: the report will never be taken (the pod, its lifecycle or
// its binding to this node is gone); stop reporting the pod.
var ErrPodGone = errors.New("the pod is no longer this node's, or its lifecycle ended")

// ReportPod delivers a report of one of this node's pods to its
// lifecycle. It answers nil when delivered, an error wrapping ErrPodGone
// when the report will never be taken, and another error (retry) when the
// control plane did not answer.
func (c *Client) ReportPod(ctx context.Context, namespace, name string, rep model.PodReport) error {
	rep.Node = c.node
	path := "/api/v1/namespaces/" + url.PathEscape(namespace) + "/pods/" + url.PathEscape(name) + "/report"
	err := c.do(ctx, http.MethodPost, path, &rep, nil)
	if IsNotFound(err) || IsConflict(err) {
		return fmt.Errorf("%w: %w", ErrPodGone, err)
	}
	return err
}

// SecretEnv reads the secret environment of a pod bound to this node
// (GET …/pods/{name}/secretenv), for its containers' start. Errors carry
// the answer's status and message, never values.
func (c *Client) SecretEnv(ctx context.Context, namespace, pod, uid string) (*model.PodSecretEnv, error) {
	path := "/api/v1/namespaces/" + url.PathEscape(namespace) + "/pods/" + url.PathEscape(pod) + "/secretenv?uid=" + url.QueryEscape(uid)
	var env model.PodSecretEnv
	if err := c.do(ctx, http.MethodGet, path, nil, &env); err != nil {
		return nil, err
	}
	return &env, nil
}
