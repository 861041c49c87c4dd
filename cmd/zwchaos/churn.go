package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/zonewright/zonewright/internal/model"
)

// OpCount is what the operations of one kind answered.
type OpCount struct {
	OK int `json:"ok"`
	// Expected are refusals the churn can cause itself (404 of a
	// resource already gone, 409 of a conflict, 422 while a claim moves).
	Expected int `json:"expected4xx"`
	// Unexpected4xx are other refusals: a request the API should have taken.
	Unexpected4xx int `json:"unexpected4xx"`
	// Unavailable are 503s: a dependency (PostgreSQL, Temporal) is
	// down for a moment, as the chaos makes it; clients retry them.
	Unavailable int `json:"unavailable503"`
	// ServerErrors are the other answers of 500 or more.
	ServerErrors int `json:"serverErrors5xx"`
	// Unreachable are requests without an answer (the replica was down).
	Unreachable int `json:"unreachable"`
}

// api sends the churn's requests, round robin over the replicas, and
// counts the answers by operation.
type api struct {
	s    *stack
	next atomic.Uint64

	mu  sync.Mutex
	ops map[string]*OpCount
	// failures keeps a few 5xx and unexpected answers, for the report.
	failures []string
}

// do sends one request and returns its status and body; a request no
// replica answered is retried on the next one, up to three times.
func (a *api) do(ctx context.Context, op, method, path string, body any) (int, []byte) {
	var raw []byte
	if body != nil {
		raw, _ = json.Marshal(body)
	}
	for attempt := 0; ; attempt++ {
		base := a.s.APIURLs[a.next.Add(1)%uint64(len(a.s.APIURLs))]
		req, err := http.NewRequestWithContext(ctx, method, base+path, bytes.NewReader(raw))
		if err != nil {
			panic(err)
		}
		if body != nil {
			req.Header.Set("Content-Type", "application/json")
		}
		resp, err := a.s.client.Do(req)
		if err != nil {
			if attempt < 3 && ctx.Err() == nil {
				time.Sleep(time.Second)
				continue
			}
			a.count(op, 0, method+" "+path+": "+err.Error())
			return 0, nil
		}
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
		resp.Body.Close()
		a.count(op, resp.StatusCode, fmt.Sprintf("%s %s: %d %s", method, path, resp.StatusCode, truncate(b, 300)))
		return resp.StatusCode, b
	}
}

func (a *api) count(op string, code int, what string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	c := a.ops[op]
	if c == nil {
		c = &OpCount{}
		a.ops[op] = c
	}
	switch {
	case code == 0:
		c.Unreachable++
	case code < 400:
		c.OK++
	case code == 404 || code == 409 || code == 422:
		c.Expected++
	case code == http.StatusServiceUnavailable:
		c.Unavailable++
	case code >= 500:
		c.ServerErrors++
		a.failures = append(a.failures, what)
	default:
		c.Unexpected4xx++
		a.failures = append(a.failures, what)
	}
}

// get reads a resource or list into v; false when it could not.
func (a *api) get(ctx context.Context, path string, v any) bool {
	code, b := a.do(ctx, "read", http.MethodGet, path, nil)
	return code == http.StatusOK && json.Unmarshal(b, v) == nil
}

func truncate(b []byte, n int) string {
	if len(b) > n {
		return string(b[:n]) + "…"
	}
	return string(b)
}

// world is what the churn made and removed, for the checks at the end.
type world struct {
	mu          sync.Mutex
	pods        map[string]bool   // standalone pods: alive (true) or deleted
	unanswered  map[string]bool   // pods whose create had no answer
	deployments map[string]int    // alive deployments and their replicas
	services    map[string]bool   // alive (true) or deleted
	claims      map[string]string // claim → the content written into it
	drained     map[string]bool   // nodes cordoned or drained by the churn
	// claimNodes are the nodes each claim was seen bound to, before
	// each drain and at the end: more than one is a move.
	claimNodes map[string]map[string]bool
	n          int
	// atRest are the pods of the deployment at rest (uid → name) once
	// it was available, atRestSince when it was.
	atRest      map[string]string
	atRestSince time.Time
}

// sawClaims records the node each claim is bound to now.
func (w *world) sawClaims(claims []model.PersistentVolumeClaim) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, c := range claims {
		if c.Status.NodeName == "" {
			continue
		}
		if w.claimNodes[c.Metadata.Name] == nil {
			w.claimNodes[c.Metadata.Name] = map[string]bool{}
		}
		w.claimNodes[c.Metadata.Name][c.Status.NodeName] = true
	}
}

// claimsMoved counts the claims seen on more than one node.
func (w *world) claimsMoved() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for _, nodes := range w.claimNodes {
		if len(nodes) > 1 {
			n++
		}
	}
	return n
}

func (w *world) name(prefix string) string {
	w.n++
	return fmt.Sprintf("%s-%d", prefix, w.n)
}

func pick[T any](rng *rand.Rand, m map[string]T, want func(T) bool) (string, bool) {
	var names []string
	for k, v := range m {
		if want(v) {
			names = append(names, k)
		}
	}
	if len(names) == 0 {
		return "", false
	}
	// Map order is random; sort for the seed to mean something.
	sort.Strings(names)
	return names[rng.IntN(len(names))], true
}

// Limits of the churn, so that three simulated nodes on a shared
// machine keep up.
const (
	maxPods        = 8
	maxDeployments = 3
	maxReplicas    = 3
	maxServices    = 4
	maxClaims      = 3
)

// sleepPod is a pod whose container sleeps, labelled for the services.
func sleepPod(name string, app int, claim, content string) map[string]any {
	cmd := "exec sleep 86400"
	spec := map[string]any{"terminationGracePeriodSeconds": 2}
	c := map[string]any{"name": "app", "image": "base",
		"resources": map[string]any{"requests": map[string]any{"cpu": "50m", "memory": "32Mi"}}}
	if claim != "" {
		// The file is written once, by the claim's first pod; a later
		// pod (after a move) finds it and keeps it.
		cmd = fmt.Sprintf("[ -f var/data/chaos ] || printf %%s '%s' > var/data/chaos; exec sleep 86400", content)
		spec["volumes"] = []any{map[string]any{"name": "data", "persistentVolumeClaim": map[string]any{"claimName": claim}}}
		c["volumeMounts"] = []any{map[string]any{"name": "data", "mountPath": "/var/data"}}
	}
	c["command"] = []string{"sh", "-c", cmd}
	spec["containers"] = []any{c}
	return map[string]any{"apiVersion": "v1", "kind": "Pod",
		"metadata": map[string]any{"name": name, "labels": map[string]string{"app": fmt.Sprintf("chaos-%d", app)}}, "spec": spec}
}

func deployment(name string, replicas int, rev int) map[string]any {
	pod := sleepPod("", 0, "", "")
	tmpl := map[string]any{"metadata": map[string]any{"labels": map[string]string{"app": name}}, "spec": pod["spec"]}
	c := pod["spec"].(map[string]any)["containers"].([]any)[0].(map[string]any)
	c["env"] = []any{map[string]any{"name": "REVISION", "value": fmt.Sprint(rev)}}
	return map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "metadata": map[string]any{"name": name},
		"spec": map[string]any{"replicas": replicas, "selector": map[string]any{"matchLabels": map[string]string{"app": name}}, "template": tmpl}}
}

const (
	podsPath        = "/api/v1/namespaces/default/pods"
	servicesPath    = "/api/v1/namespaces/default/services"
	claimsPath      = "/api/v1/namespaces/default/persistentvolumeclaims"
	deploymentsPath = "/apis/apps/v1/namespaces/default/deployments"
	jobsPath        = "/apis/batch/v1/namespaces/default/jobs"
)

// churn changes the cluster at random until ctx ends.
func churn(ctx context.Context, a *api, w *world, rng *rand.Rand, nodes []string) {
	type op struct {
		weight int
		run    func()
	}
	ops := []op{
		{5, func() { createPod(ctx, a, w, rng) }},
		{4, func() { deletePod(ctx, a, w, rng) }},
		{2, func() { createDeployment(ctx, a, w, rng) }},
		{3, func() { scaleDeployment(ctx, a, w, rng) }},
		{2, func() { rollDeployment(ctx, a, w, rng) }},
		{1, func() { deleteDeployment(ctx, a, w, rng) }},
		{2, func() { runJob(ctx, a, w) }},
		{2, func() { createService(ctx, a, w, rng) }},
		{2, func() { deleteService(ctx, a, w, rng) }},
		{1, func() { createClaimPod(ctx, a, w, rng) }},
		{2, func() { cordonOrDrain(ctx, a, w, rng, nodes) }},
		{2, func() { uncordon(ctx, a, w, rng) }},
	}
	total := 0
	for _, o := range ops {
		total += o.weight
	}
	for ctx.Err() == nil {
		n := rng.IntN(total)
		for _, o := range ops {
			if n < o.weight {
				o.run()
				break
			}
			n -= o.weight
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Duration(500+rng.IntN(1500)) * time.Millisecond):
		}
	}
}

func alive(b bool) bool { return b }

func createPod(ctx context.Context, a *api, w *world, rng *rand.Rand) {
	w.mu.Lock()
	n := 0
	for _, ok := range w.pods {
		if ok {
			n++
		}
	}
	if n >= maxPods {
		w.mu.Unlock()
		return
	}
	name := w.name("pod")
	w.mu.Unlock()
	code, _ := a.do(ctx, "create pod", http.MethodPost, podsPath, sleepPod(name, rng.IntN(3), "", ""))
	// Names are never reused: a 409 means an attempt whose answer was
	// lost (its replica died) made it.
	if code == http.StatusCreated || code == http.StatusConflict || code == 0 {
		w.mu.Lock()
		w.pods[name] = true
		if code == 0 {
			// Unanswered: it may or may not exist; the end counts it
			// if it does.
			w.unanswered[name] = true
		}
		w.mu.Unlock()
	}
}

func deletePod(ctx context.Context, a *api, w *world, rng *rand.Rand) {
	w.mu.Lock()
	name, ok := pick(rng, w.pods, alive)
	w.mu.Unlock()
	if !ok {
		return
	}
	grace := rng.IntN(3)
	code, _ := a.do(ctx, "delete pod", http.MethodDelete, fmt.Sprintf("%s/%s?gracePeriodSeconds=%d", podsPath, name, grace), nil)
	if code == http.StatusOK || code == http.StatusAccepted || code == http.StatusNotFound {
		w.mu.Lock()
		w.pods[name] = false
		w.mu.Unlock()
	}
}

func createDeployment(ctx context.Context, a *api, w *world, rng *rand.Rand) {
	w.mu.Lock()
	if len(w.deployments) >= maxDeployments {
		w.mu.Unlock()
		return
	}
	name := w.name("deploy")
	w.mu.Unlock()
	replicas := 1 + rng.IntN(maxReplicas)
	if code, _ := a.do(ctx, "create deployment", http.MethodPost, deploymentsPath, deployment(name, replicas, 1)); code == http.StatusCreated || code == http.StatusConflict {
		w.mu.Lock()
		w.deployments[name] = replicas
		w.mu.Unlock()
	}
}

func scaleDeployment(ctx context.Context, a *api, w *world, rng *rand.Rand) {
	w.mu.Lock()
	name, ok := pick(rng, w.deployments, func(int) bool { return true })
	w.mu.Unlock()
	if !ok {
		return
	}
	replicas := rng.IntN(maxReplicas + 1)
	scale := map[string]any{"apiVersion": "autoscaling/v1", "kind": "Scale", "metadata": map[string]any{"name": name, "namespace": "default"},
		"spec": map[string]any{"replicas": replicas}}
	if code, _ := a.do(ctx, "scale deployment", http.MethodPut, deploymentsPath+"/"+name+"/scale", scale); code == http.StatusOK {
		w.mu.Lock()
		w.deployments[name] = replicas
		w.mu.Unlock()
	}
}

// rollDeployment changes the template (an env value), or restarts it.
func rollDeployment(ctx context.Context, a *api, w *world, rng *rand.Rand) {
	w.mu.Lock()
	name, ok := pick(rng, w.deployments, func(int) bool { return true })
	w.mu.Unlock()
	if !ok {
		return
	}
	if rng.IntN(2) == 0 {
		a.do(ctx, "restart deployment", http.MethodPost, deploymentsPath+"/"+name+"/restart", nil)
		return
	}
	var d map[string]any
	if !a.get(ctx, deploymentsPath+"/"+name, &d) {
		return
	}
	spec, _ := d["spec"].(map[string]any)
	tmpl, _ := spec["template"].(map[string]any)
	pspec, _ := tmpl["spec"].(map[string]any)
	cs, _ := pspec["containers"].([]any)
	if len(cs) == 0 {
		return
	}
	c := cs[0].(map[string]any)
	c["env"] = []any{map[string]any{"name": "REVISION", "value": fmt.Sprint(rng.IntN(1_000_000))}}
	code, _ := a.do(ctx, "roll deployment", http.MethodPut, deploymentsPath+"/"+name, d)
	if code == http.StatusOK {
		// A roll keeps the replicas the object holds now.
		if r, ok := spec["replicas"].(float64); ok {
			w.mu.Lock()
			w.deployments[name] = int(r)
			w.mu.Unlock()
		}
	}
}

func deleteDeployment(ctx context.Context, a *api, w *world, rng *rand.Rand) {
	w.mu.Lock()
	name, ok := pick(rng, w.deployments, func(int) bool { return true })
	w.mu.Unlock()
	if !ok {
		return
	}
	code, _ := a.do(ctx, "delete deployment", http.MethodDelete, deploymentsPath+"/"+name, nil)
	if code == http.StatusOK || code == http.StatusAccepted || code == http.StatusNotFound {
		w.mu.Lock()
		delete(w.deployments, name)
		w.mu.Unlock()
	}
}

func runJob(ctx context.Context, a *api, w *world) {
	w.mu.Lock()
	name := w.name("job")
	w.mu.Unlock()
	pod := sleepPod("", 0, "", "")
	spec := pod["spec"].(map[string]any)
	spec["restartPolicy"] = "Never"
	spec["containers"].([]any)[0].(map[string]any)["command"] = []string{"sh", "-c", "sleep 1"}
	job := map[string]any{"apiVersion": "batch/v1", "kind": "Job", "metadata": map[string]any{"name": name},
		"spec": map[string]any{"completions": 1, "backoffLimit": 6, "ttlSecondsAfterFinished": 20,
			"template": map[string]any{"metadata": map[string]any{"labels": map[string]string{"job": name}}, "spec": spec}}}
	a.do(ctx, "run job", http.MethodPost, jobsPath, job)
}

func createService(ctx context.Context, a *api, w *world, rng *rand.Rand) {
	w.mu.Lock()
	n := 0
	for _, ok := range w.services {
		if ok {
			n++
		}
	}
	if n >= maxServices {
		w.mu.Unlock()
		return
	}
	name := w.name("svc")
	w.mu.Unlock()
	svc := map[string]any{"apiVersion": "v1", "kind": "Service", "metadata": map[string]any{"name": name},
		"spec": map[string]any{"selector": map[string]string{"app": fmt.Sprintf("chaos-%d", rng.IntN(3))},
			"ports": []any{map[string]any{"port": 80, "targetPort": 8080, "protocol": "TCP"}}}}
	code, _ := a.do(ctx, "create service", http.MethodPost, servicesPath, svc)
	if code == http.StatusCreated || code == http.StatusConflict || code == 0 {
		w.mu.Lock()
		w.services[name] = true
		w.mu.Unlock()
	}
}

func deleteService(ctx context.Context, a *api, w *world, rng *rand.Rand) {
	w.mu.Lock()
	name, ok := pick(rng, w.services, alive)
	w.mu.Unlock()
	if !ok {
		return
	}
	code, _ := a.do(ctx, "delete service", http.MethodDelete, servicesPath+"/"+name, nil)
	if code == http.StatusOK || code == http.StatusAccepted || code == http.StatusNotFound {
		w.mu.Lock()
		w.services[name] = false
		w.mu.Unlock()
	}
}

// createClaimPod makes a claim and a pod that writes known content into
// it; drains move the claim with its pod.
func createClaimPod(ctx context.Context, a *api, w *world, rng *rand.Rand) {
	w.mu.Lock()
	if len(w.claims) >= maxClaims {
		w.mu.Unlock()
		return
	}
	name := w.name("claim")
	w.mu.Unlock()
	content := fmt.Sprintf("chaos %s %016x", name, rng.Uint64())
	claim := map[string]any{"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": map[string]any{"name": name},
		"spec": map[string]any{"resources": map[string]any{"requests": map[string]any{"storage": "64Mi"}}}}
	if code, _ := a.do(ctx, "create claim", http.MethodPost, claimsPath, claim); code != http.StatusCreated && code != http.StatusConflict {
		return
	}
	// The pod is named after its claim; it is never deleted by the churn.
	// A claim whose pod could not be made (a dependency down all along)
	// stays unused and unchecked.
	for range 10 {
		code, _ := a.do(ctx, "create pod", http.MethodPost, podsPath, sleepPod(name, 0, name, content))
		if code == http.StatusCreated || code == http.StatusConflict {
			w.mu.Lock()
			w.claims[name] = content
			w.mu.Unlock()
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(2 * time.Second):
		}
	}
}

func cordonOrDrain(ctx context.Context, a *api, w *world, rng *rand.Rand, nodes []string) {
	w.mu.Lock()
	// One node at a time out of service, so the pods always have room.
	if len(w.drained) > 0 {
		w.mu.Unlock()
		return
	}
	node := nodes[rng.IntN(len(nodes))]
	w.drained[node] = true
	w.mu.Unlock()
	verb := "cordon"
	if rng.IntN(2) == 0 {
		verb = "drain"
		var claims model.List[model.PersistentVolumeClaim]
		if a.get(ctx, claimsPath, &claims) {
			w.sawClaims(claims.Items)
		}
	}
	a.do(ctx, verb+" node", http.MethodPost, "/api/v1/nodes/"+node+"/"+verb, nil)
}

func uncordon(ctx context.Context, a *api, w *world, rng *rand.Rand) {
	w.mu.Lock()
	node, ok := pick(rng, w.drained, alive)
	w.mu.Unlock()
	if !ok {
		return
	}
	if code, _ := a.do(ctx, "uncordon node", http.MethodPost, "/api/v1/nodes/"+node+"/uncordon", nil); code == http.StatusOK {
		w.mu.Lock()
		delete(w.drained, node)
		w.mu.Unlock()
	}
}
