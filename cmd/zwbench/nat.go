package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/zonewright/zonewright/internal/model"
	"github.com/zonewright/zonewright/internal/servicenet"
)

// NATResults is how long a service's endpoint change takes to be in force
// in every node's NAT rules.
type NATResults struct {
	Changes int `json:"changes"`
	Nodes   int `json:"nodes"`
	// Latency runs from the control plane's snapshot with the change to
	// each node's report of having it in force (its rules read back), one
	// sample per change and node.
	Latency Percentiles `json:"snapshotToNodeAppliedMs"`
}

// natSection adds and removes a backend of a service n times, each a
// generation of the service network, and measures when every node has
// the change's rules in force.
func natSection(ctx context.Context, api string, nodes, n int) (*NATResults, error) {
	fmt.Fprintf(stderr, "nat: %d endpoint changes of one service on %d nodes\n", n, nodes)
	if err := post(api+"/api/v1/namespaces/default/services",
		`{"metadata":{"name":"natbench"},"spec":{"selector":{"app":"natbench"},"ports":[{"port":80,"targetPort":8080}]}}`); err != nil {
		return nil, err
	}
	body := func(name string) []byte {
		return []byte(fmt.Sprintf(`{"metadata":{"name":%q,"labels":{"app":"natbench"}},"spec":{"terminationGracePeriodSeconds":0,
		  "containers":[{"name":"app","image":"base","command":["sleep","3600"],"resources":{"requests":{"cpu":"10m","memory":"16Mi"}}}]}}`, name))
	}
	var snap servicenet.Snapshot
	if err := getJSON(api+"/api/v1/servicenet", &snap); err != nil {
		return nil, err
	}
	var samples []time.Duration
	for i := range n {
		name := fmt.Sprintf("natbench-%d", i)
		// Each pod's arrival among the endpoints and its departure are two
		// changes; the second of each pair removes what the first added.
		for _, add := range []bool{true, false} {
			change := func() error { return createPod(api, name, body(name)) }
			if !add {
				change = func() error { return deletePod(api, name) }
			}
			if err := change(); err != nil {
				return nil, err
			}
			next, at, err := nextSnapshot(ctx, api, snap.Generation, name, add)
			if err != nil {
				return nil, err
			}
			snap = next
			got, err := nodesApplied(ctx, api, nodes, snap.Generation, at)
			if err != nil {
				return nil, err
			}
			samples = append(samples, got...)
		}
	}
	return &NATResults{Changes: 2 * n, Nodes: nodes, Latency: percentiles(samples)}, nil
}

// nextSnapshot waits for the first snapshot after gen that lists pod
// among the service's endpoints (present) or no longer does, and returns
// it with when it arrived.
func nextSnapshot(ctx context.Context, api string, gen int64, pod string, present bool) (servicenet.Snapshot, time.Time, error) {
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		var snap servicenet.Snapshot
		req, _ := http.NewRequestWithContext(ctx, "GET", fmt.Sprintf("%s/api/v1/servicenet?after=%d&timeoutSeconds=10", api, gen), nil)
		resp, err := apiHTTP.Do(req)
		if err != nil {
			return snap, time.Time{}, err
		}
		at := time.Now()
		if resp.StatusCode == http.StatusNotModified {
			resp.Body.Close()
			continue
		}
		err = json.NewDecoder(resp.Body).Decode(&snap)
		resp.Body.Close()
		if err != nil {
			return snap, time.Time{}, err
		}
		if lists(&snap, pod) == present {
			return snap, at, nil
		}
		gen = snap.Generation
	}
	return servicenet.Snapshot{}, time.Time{}, fmt.Errorf("%s's endpoint did not change within 2 minutes", pod)
}

func lists(snap *servicenet.Snapshot, pod string) bool {
	for _, s := range snap.Services {
		for _, e := range s.Endpoints {
			if e.Pod == pod {
				return true
			}
		}
	}
	return false
}

// nodesApplied waits until every node has applied gen and returns, per
// node, from since to the time it says it did.
func nodesApplied(ctx context.Context, api string, nodes int, gen int64, since time.Time) ([]time.Duration, error) {
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		var list model.List[model.Node]
		if err := getJSON(api+"/api/v1/nodes", &list); err != nil {
			return nil, err
		}
		var got []time.Duration
		for _, n := range list.Items {
			if sn := n.Status.ServiceNetwork; sn != nil && sn.Generation >= gen && sn.AppliedTime != nil {
				got = append(got, max(sn.AppliedTime.Sub(since), 0))
			}
		}
		if len(got) == nodes {
			return got, nil
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
	}
	return nil, fmt.Errorf("not every node applied generation %d within a minute", gen)
}

func post(url, body string) error {
	resp, err := apiHTTP.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		b, _ := io.ReadAll(resp.Body)
		return fmt.Errorf("POST %s: %d %s", url, resp.StatusCode, b)
	}
	return nil
}
