package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/zonewright/zonewright/internal/model"
)

// drainWait bounds how long the drain section waits for the drained
// node's pods to run elsewhere.
const drainWait = 10 * time.Minute

// DrainResults are a node with the most pods drained at scale: from the
// drain request until every pod that was on it runs on another node.
type DrainResults struct {
	Node    string  `json:"node"`
	Pods    int     `json:"pods"`
	Moved   int     `json:"podsRunningElsewhere"`
	Seconds float64 `json:"seconds"`
	// Requests is how many drain requests it took: a drain whose pods
	// Temporal did not all hear answers 503, to be sent again.
	Requests int    `json:"drainRequests"`
	Error    string `json:"error,omitempty"`
}

// drainRetries bounds the drain requests sent while they answer 503.
const drainRetries = 10

// drainNode asks for the drain of res.Node, again while it answers 503,
// as kubectl drain asks again for each eviction.
func drainNode(ctx context.Context, api string, res *DrainResults) error {
	for {
		res.Requests++
		req, _ := http.NewRequest("POST", api+"/api/v1/nodes/"+res.Node+"/drain", nil)
		err := doOK(req, nil)
		var st *statusError
		if !errors.As(err, &st) || st.code != http.StatusServiceUnavailable || res.Requests >= drainRetries {
			return err
		}
		if err := sleep(ctx, 5*time.Second); err != nil {
			return err
		}
	}
}

// drainSection drains the node holding the most pods and waits for them
// to run elsewhere (their restartPolicy is Always, so each is placed
// again).
func drainSection(ctx context.Context, api string) (*DrainResults, error) {
	on, err := podsByNode(api)
	if err != nil {
		return nil, err
	}
	res := &DrainResults{}
	for node, names := range on {
		if len(names) > res.Pods {
			res.Node, res.Pods = node, len(names)
		}
	}
	fmt.Fprintf(stderr, "scale: draining %s with %d pods\n", res.Node, res.Pods)
	start := time.Now()
	if err := drainNode(ctx, api, res); err != nil {
		res.Error = err.Error()
		return res, nil
	}
	left := map[string]bool{}
	for _, name := range on[res.Node] {
		left[name] = true
	}
	for len(left) > 0 && time.Since(start) < drainWait {
		if err := sleep(ctx, 500*time.Millisecond); err != nil {
			return nil, err
		}
		for name := range left {
			var p model.Pod
			if getOK(api+"/api/v1/namespaces/default/pods/"+name, &p) == nil &&
				p.Status.Phase == model.PodRunning && p.Spec.NodeName != "" && p.Spec.NodeName != res.Node {
				delete(left, name)
				res.Moved++
			}
		}
	}
	res.Seconds = time.Since(start).Seconds()
	return res, nil
}

// podsByNode lists every pod of the namespace by the node it is on.
func podsByNode(api string) (map[string][]string, error) {
	on := map[string][]string{}
	_, err := eachPodPage(api, func(pods []model.Pod) {
		for _, p := range pods {
			if p.Spec.NodeName != "" {
				on[p.Spec.NodeName] = append(on[p.Spec.NodeName], p.Metadata.Name)
			}
		}
	})
	if err != nil {
		return nil, fmt.Errorf("list pods: %w", err)
	}
	return on, nil
}
