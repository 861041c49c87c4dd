package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/zonewright/zonewright/internal/model"
)

const (
	// streamStartupTarget is the create→Running p99 a rate must keep to
	// count as sustained (Kubernetes' pod startup SLO).
	streamStartupTarget = 5 * time.Second
	// streamInFlight bounds the stream's creations in flight: a rate the
	// API cannot answer at shows as creations started late, not as an
	// unbounded pile of requests.
	streamInFlight = 64
	// listPageSize is the page kubectl asks for (--chunk-size).
	listPageSize = 500
)

// StreamResults are pods created at steady rates on the scaled stack, one
// rate after another, while the API is read, written and watched.
type StreamResults struct {
	Rates []StreamRate `json:"rates"`
	// SustainedPodsPerSecond is the highest rate whose create→Running p99
	// stayed within StartupTargetMs.
	SustainedPodsPerSecond float64 `json:"sustainedPodsPerSecond"`
	StartupTargetMs        float64 `json:"startupTargetMs"`
}

// StreamRate is one rate's stream and the API's latencies while it ran.
type StreamRate struct {
	PodsPerSecond float64 `json:"podsPerSecond"`
	Seconds       float64 `json:"seconds"`
	Pods          int     `json:"pods"`
	// PodsOnTheStack is how many pods existed at the stream's end.
	PodsOnTheStack int `json:"podsOnTheStack"`
	// StartedLate counts creations that waited for a free slot (the API
	// answering slower than the rate).
	StartedLate     int         `json:"creationsStartedLate"`
	CreateToRunning Percentiles `json:"createToRunningMs"`
	NotRunning      int         `json:"podsNotRunning"`
	Create          Percentiles `json:"createMs"`
	Update          Percentiles `json:"updateMs"`
	Get             Percentiles `json:"getMs"`
	// List is a LIST of every pod, paged as kubectl pages.
	List      Percentiles `json:"listAllPagedMs"`
	ListPages int         `json:"listPages"`
	// WatchDelivery is from a pod's create request to each watcher's
	// ADDED event of it; every watcher started from one LIST's version.
	WatchDelivery Percentiles `json:"watchDeliveryMs"`
	Watchers      int         `json:"watchers"`
	WatchMissed   int         `json:"watchEventsMissed"`
	Errors        int         `json:"apiErrors"`
	FirstError    string      `json:"firstAPIError,omitempty"`
}

// stream is what the stream section runs on and how.
type stream struct {
	api string
	tr  *tracker
	// existing are the pods already there, which the API's reads and
	// updates pick from.
	existing    []string
	rates       []float64
	each        time.Duration // how long each rate lasts
	watchers    int
	probePeriod time.Duration // of the stream's pods
}

// streamSection streams pods at each rate in turn.
func streamSection(ctx context.Context, st stream) (*StreamResults, error) {
	res := &StreamResults{StartupTargetMs: float64(streamStartupTarget.Milliseconds())}
	for k, rate := range st.rates {
		fmt.Fprintf(stderr, "scale: streaming %.1f pods/s for %s with %d watchers\n", rate, st.each, st.watchers)
		r, err := st.at(ctx, fmt.Sprintf("stream%d-", k), rate)
		if err != nil {
			return nil, err
		}
		res.Rates = append(res.Rates, *r)
		if r.NotRunning == 0 && r.CreateToRunning.P99 <= res.StartupTargetMs && rate > res.SustainedPodsPerSecond {
			res.SustainedPodsPerSecond = rate
		}
	}
	return res, nil
}

// at creates pods named prefix0, prefix1, … at rate for st.each, while
// reading (GET, paged LIST), updating and watching the API, and waits for
// the stream's pods to run.
func (st stream) at(ctx context.Context, prefix string, rate float64) (*StreamRate, error) {
	api, tr, existing := st.api, st.tr, st.existing
	n := max(1, int(rate*st.each.Seconds()))
	r := &StreamRate{PodsPerSecond: rate, Pods: n, Watchers: st.watchers}
	rv, err := listVersion(api)
	if err != nil {
		return nil, err
	}
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("%s%d", prefix, i)
	}
	sent := newStamps()
	ws, err := startWatchers(ctx, api, rv, st.watchers, prefix)
	if err != nil {
		return nil, err
	}
	defer ws.stop()

	var errs apiErrors
	l := startLoad(ctx, api, existing, &errs)
	start := time.Now()
	var creates latencies
	slots := make(chan struct{}, streamInFlight)
	var wg sync.WaitGroup
	for i, name := range names {
		if err := sleepUntil(ctx, start.Add(time.Duration(float64(i)/rate*float64(time.Second)))); err != nil {
			l.stop()
			return nil, err
		}
		select {
		case slots <- struct{}{}:
		default:
			r.StartedLate++
			slots <- struct{}{}
		}
		wg.Go(func() {
			defer func() { <-slots }()
			t := time.Now()
			sent.set(name, t)
			err := createPod(api, name, scalePodBody(name, st.probePeriod))
			creates.add(time.Since(t))
			errs.note(err)
		})
	}
	wg.Wait()
	r.Seconds = time.Since(start).Seconds()
	running := make([]time.Time, n)
	werr := waitAll(ctx, tr, tr.running, "Running", names, running)
	l.stop()
	if werr != nil {
		return nil, werr
	}
	var startup []time.Duration
	for i, name := range names {
		if t, ok := sent.get(name); ok && !running[i].IsZero() {
			startup = append(startup, running[i].Sub(t))
		}
	}
	r.CreateToRunning, r.NotRunning = percentiles(startup), n-len(startup)
	r.Create, r.Get, r.List, r.Update, r.ListPages = creates.percentiles(), l.gets.percentiles(), l.lists.percentiles(), l.updates.percentiles(), l.pages
	r.WatchDelivery, r.WatchMissed = ws.delivery(names, sent, 10*time.Second)
	r.Errors, r.FirstError = errs.count, errs.first
	r.PodsOnTheStack = len(existing) + n
	return r, nil
}

// parseRates parses comma-separated positive rates; empty is none.
func parseRates(v string) ([]float64, error) {
	var out []float64
	for _, f := range strings.Split(v, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		r, err := strconv.ParseFloat(f, 64)
		if err != nil || r <= 0 || math.IsInf(r, 0) {
			return nil, fmt.Errorf("rate %q: want a positive number of pods a second", f)
		}
		out = append(out, r)
	}
	return out, nil
}

// apiLoad reads and writes the API while a stream runs: a GET every
// 100 ms, a label update every 200 ms and a LIST of every pod, paged,
// every second, each of a pod picked at random from existing.
type apiLoad struct {
	gets, lists, updates latencies
	pages                int // the most pages a LIST took
	cancel               context.CancelFunc
	wg                   sync.WaitGroup
}

func startLoad(ctx context.Context, api string, existing []string, errs *apiErrors) *apiLoad {
	ctx, cancel := context.WithCancel(ctx)
	l := &apiLoad{cancel: cancel}
	pick := func() string { return existing[rand.IntN(len(existing))] }
	l.wg.Go(func() { l.gets.loop(ctx, errs, 100*time.Millisecond, func() error { return getPod(api, pick()) }) })
	l.wg.Go(func() { l.updates.loop(ctx, errs, 200*time.Millisecond, func() error { return labelPod(api, pick()) }) })
	l.wg.Go(func() {
		l.lists.loop(ctx, errs, time.Second, func() error {
			pages, err := listAllPaged(api)
			l.pages = max(l.pages, pages)
			return err
		})
	})
	return l
}

// stop ends the load and waits for its requests.
func (l *apiLoad) stop() {
	l.cancel()
	l.wg.Wait()
}

func sleepUntil(ctx context.Context, t time.Time) error {
	if d := time.Until(t); d > 0 {
		return sleep(ctx, d)
	}
	return nil
}

// listVersion is the resourceVersion of a LIST of the namespace's pods.
func listVersion(api string) (string, error) {
	var list model.List[model.Pod]
	if err := getJSON(api+"/api/v1/namespaces/default/pods?limit=1", &list); err != nil {
		return "", fmt.Errorf("list pods: %w", err)
	}
	return list.Metadata.ResourceVersion, nil
}

// listAllPaged lists every pod of the namespace a page at a time, as
// kubectl get pods does, and says how many pages it took.
func listAllPaged(api string) (int, error) {
	return eachPodPage(api, func([]model.Pod) {})
}

// eachPodPage lists the namespace's pods a page at a time (continue
// tokens, as kubectl pages), hands each page to fn, and says how many
// pages it took.
func eachPodPage(api string, fn func([]model.Pod)) (int, error) {
	cont, pages := "", 0
	for {
		var list model.List[model.Pod]
		url := fmt.Sprintf("%s/api/v1/namespaces/default/pods?limit=%d&continue=%s", api, listPageSize, cont)
		if err := getOK(url, &list); err != nil {
			return pages, err
		}
		pages++
		fn(list.Items)
		if cont = list.Metadata.Continue; cont == "" {
			return pages, nil
		}
	}
}

func getPod(api, name string) error {
	var p json.RawMessage
	return getOK(api+"/api/v1/namespaces/default/pods/"+name, &p)
}

// labelPod writes a pod's metadata, as a controller's label update does.
func labelPod(api, name string) error {
	body := fmt.Sprintf(`{"metadata":{"labels":{"zwbench-touched":"%d"}}}`, time.Now().UnixNano())
	req, _ := http.NewRequest("PATCH", api+"/api/v1/namespaces/default/pods/"+name, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/merge-patch+json")
	return doOK(req, nil)
}

// getOK GETs url into into, failing on any status but 200.
func getOK(url string, into any) error {
	req, _ := http.NewRequest("GET", url, nil)
	return doOK(req, into)
}

func doOK(req *http.Request, into any) error {
	resp, err := apiHTTP.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return &statusError{code: resp.StatusCode, msg: fmt.Sprintf("%s %s: %d %s", req.Method, req.URL.Path, resp.StatusCode, bytes.TrimSpace(b))}
	}
	if into == nil {
		_, err = io.Copy(io.Discard, resp.Body)
		return err
	}
	return json.NewDecoder(resp.Body).Decode(into)
}

// statusError is an answer other than 200, with its status.
type statusError struct {
	code int
	msg  string
}

func (e *statusError) Error() string { return e.msg }

// latencies collects request durations from several goroutines.
type latencies struct {
	mu sync.Mutex
	d  []time.Duration
}

func (l *latencies) add(d time.Duration) {
	l.mu.Lock()
	l.d = append(l.d, d)
	l.mu.Unlock()
}

func (l *latencies) percentiles() Percentiles {
	l.mu.Lock()
	defer l.mu.Unlock()
	return percentiles(l.d)
}

// loop calls fn every period until ctx ends, timing each call.
func (l *latencies) loop(ctx context.Context, errs *apiErrors, period time.Duration, fn func() error) {
	tick := time.NewTicker(period)
	defer tick.Stop()
	for {
		t := time.Now()
		err := fn()
		if ctx.Err() != nil {
			return
		}
		l.add(time.Since(t))
		errs.note(err)
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// apiErrors counts failed requests and keeps the first.
type apiErrors struct {
	mu    sync.Mutex
	count int
	first string
}

func (e *apiErrors) note(err error) {
	if err == nil {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.count++; e.first == "" {
		e.first = err.Error()
	}
}

// stamps are times by pod name, written and read by several goroutines.
type stamps struct {
	mu sync.Mutex
	m  map[string]time.Time
}

func newStamps() *stamps { return &stamps{m: map[string]time.Time{}} }

func (s *stamps) set(name string, t time.Time) {
	s.mu.Lock()
	s.m[name] = t
	s.mu.Unlock()
}

func (s *stamps) get(name string) (time.Time, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.m[name]
	return t, ok
}

// watchers are watches of the namespace's pods started from one version,
// each noting when it first saw each pod whose name has prefix ADDED.
type watchers struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup
	seen   []*stamps
}

func startWatchers(ctx context.Context, api, rv string, n int, prefix string) (*watchers, error) {
	ctx, cancel := context.WithCancel(ctx)
	ws := &watchers{cancel: cancel}
	for range n {
		req, _ := http.NewRequestWithContext(ctx, "GET", api+"/api/v1/namespaces/default/pods?watch=true&resourceVersion="+rv, nil)
		resp, err := apiHTTP.Do(req)
		if err != nil {
			ws.stop()
			return nil, fmt.Errorf("watch pods: %w", err)
		}
		if resp.StatusCode != http.StatusOK {
			resp.Body.Close()
			ws.stop()
			return nil, fmt.Errorf("watch pods: %s", resp.Status)
		}
		seen := newStamps()
		ws.seen = append(ws.seen, seen)
		ws.wg.Go(func() {
			defer resp.Body.Close()
			sc := bufio.NewScanner(resp.Body)
			sc.Buffer(make([]byte, 1<<20), 1<<22)
			for sc.Scan() {
				line := sc.Bytes()
				if !bytes.HasPrefix(line, []byte("data: ")) || !bytes.Contains(line, []byte(prefix)) {
					continue
				}
				now := time.Now()
				var ev struct {
					Type   string
					Object struct{ Metadata struct{ Name string } }
				}
				if json.Unmarshal(line[6:], &ev) != nil || ev.Type != "ADDED" || !strings.HasPrefix(ev.Object.Metadata.Name, prefix) {
					continue
				}
				if _, ok := seen.get(ev.Object.Metadata.Name); !ok {
					seen.set(ev.Object.Metadata.Name, now)
				}
			}
		})
	}
	return ws, nil
}

func (ws *watchers) stop() {
	ws.cancel()
	ws.wg.Wait()
}

// delivery is, over every watcher and every pod of names, the time from
// the pod's create request to the watcher's ADDED event, and how many
// such events no watcher delivered. The watchers get up to grace to
// catch up first.
func (ws *watchers) delivery(names []string, sent *stamps, grace time.Duration) (Percentiles, int) {
	deadline := time.Now().Add(grace)
	for {
		missed := 0
		var d []time.Duration
		for _, seen := range ws.seen {
			for _, name := range names {
				at, ok := seen.get(name)
				t, sentOK := sent.get(name)
				switch {
				case !ok:
					missed++
				case sentOK:
					d = append(d, max(0, at.Sub(t)))
				}
			}
		}
		if missed == 0 || time.Now().After(deadline) {
			return percentiles(d), missed
		}
		time.Sleep(200 * time.Millisecond)
	}
}
