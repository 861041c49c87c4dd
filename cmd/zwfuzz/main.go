// zwfuzz sends hostile requests to every route of a running zonewright API
// on this machine (mutated paths, query strings, bodies, headers and
// methods, drawn from the API's own OpenAPI document) and reports what it
// answered: a response of 500 or more, a request that hung or a panic in
// the server's log is a failure. It starts a dev stack of its own unless
// --env names a running one's env file; it talks only to loopback.
//
//	go run ./cmd/zwfuzz --bin bin --requests 3000 --seed 1
package main

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"
)

func main() {
	bin := flag.String("bin", "bin", "directory of zonewright and illumos-sim (make build), for the dev stack zwfuzz starts")
	envFile := flag.String("env", "", "a running dev stack's env file (.data/env) to fuzz instead of starting one")
	requests := flag.Int("requests", 3000, "requests to send")
	seed := flag.Uint64("seed", 1, "seed of the mutations: the same seed sends the same requests")
	workers := flag.Int("concurrency", 8, "requests in flight at once")
	timeout := flag.Duration("timeout", 45*time.Second, "a request with no answer by then has hung (longer than the longest long poll the API holds, 30 s)")
	slow := flag.Int("slow-clients", 48, "connections held at once by slow clients (stalled handshakes, headers and bodies, unread answers) while the requests run; the server must let go of each within its bound")
	flag.Parse()
	if err := run(*bin, *envFile, *requests, *slow, *seed, *workers, *timeout); err != nil {
		fmt.Fprintln(os.Stderr, "zwfuzz:", err)
		os.Exit(1)
	}
}

// target is the API under test and how to reach it.
type target struct {
	base   string
	token  string
	client *http.Client
	log    func() string // the server's output so far ("" when not ours)
}

func run(bin, envFile string, n, slow int, seed uint64, workers int, timeout time.Duration) error {
	var t *target
	var err error
	if envFile != "" {
		t, err = fromEnv(envFile)
	} else {
		var stop func()
		t, stop, err = startStack(bin)
		if stop != nil {
			defer stop()
		}
	}
	if err != nil {
		return err
	}
	t.client.Timeout = timeout
	ops, err := t.operations()
	if err != nil {
		return err
	}
	if code, _, err := t.send(http.MethodPost, "/api/v1/namespaces", "application/json", []byte(`{"metadata":{"name":"fz"}}`), nil); err != nil || (code != 201 && code != 409) {
		return fmt.Errorf("create the namespace fz: %d %v", code, err)
	}
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	reqs := make([]request, n)
	for i := range reqs {
		reqs[i] = mutate(rng, ops[rng.IntN(len(ops))])
	}
	start := time.Now()
	results := make([]result, n)
	var wg sync.WaitGroup
	var slowResults []slowResult
	wg.Add(1)
	go func() {
		defer wg.Done()
		slowResults = t.slowClients(slow)
	}()
	next := make(chan int)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				results[i] = t.do(reqs[i])
			}
		}()
	}
	for i := range reqs {
		next <- i
	}
	close(next)
	wg.Wait()
	return report(os.Stdout, reqs, results, slowResults, t, time.Since(start), seed)
}

// operation is one method on one path of the document.
type operation struct {
	method, path string
	query        []string // the query parameters it documents
	body         bool
}

// operations reads the API's OpenAPI documents, every one the index at
// /openapi/v3 lists.
func (t *target) operations() ([]operation, error) {
	code, body, err := t.send(http.MethodGet, "/openapi/v3", "", nil, nil)
	if err != nil || code != 200 {
		return nil, fmt.Errorf("GET /openapi/v3: %d %v", code, err)
	}
	var index struct {
		Paths map[string]struct {
			URL string `json:"serverRelativeURL"`
		} `json:"paths"`
	}
	if err := json.Unmarshal(body, &index); err != nil {
		return nil, fmt.Errorf("the OpenAPI index: %w", err)
	}
	var ops []operation
	for key, entry := range index.Paths {
		code, body, err := t.send(http.MethodGet, entry.URL, "", nil, nil)
		if err != nil || code != 200 {
			return nil, fmt.Errorf("GET %s: %d %v", entry.URL, code, err)
		}
		more, err := documentOperations(body)
		if err != nil {
			return nil, fmt.Errorf("the OpenAPI document of %s: %w", key, err)
		}
		ops = append(ops, more...)
	}
	sort.Slice(ops, func(i, j int) bool { return ops[i].path+ops[i].method < ops[j].path+ops[j].method })
	if len(ops) == 0 {
		return nil, errors.New("the OpenAPI documents have no operations")
	}
	return ops, nil
}

// documentOperations are the operations of one OpenAPI document.
func documentOperations(body []byte) ([]operation, error) {
	var doc struct {
		Paths      map[string]map[string]json.RawMessage `json:"paths"`
		Components struct {
			Parameters map[string]struct {
				Name string `json:"name"`
				In   string `json:"in"`
			} `json:"parameters"`
		} `json:"components"`
	}
	if err := json.Unmarshal(body, &doc); err != nil {
		return nil, err
	}
	var ops []operation
	for path, methods := range doc.Paths {
		for method, raw := range methods {
			var op struct {
				Parameters []struct {
					Ref  string `json:"$ref"`
					Name string `json:"name"`
					In   string `json:"in"`
				} `json:"parameters"`
				RequestBody json.RawMessage `json:"requestBody"`
			}
			if json.Unmarshal(raw, &op) != nil {
				continue // not an operation (a path's own parameters)
			}
			o := operation{method: strings.ToUpper(method), path: path, body: len(op.RequestBody) > 0}
			for _, p := range op.Parameters {
				name, in := p.Name, p.In
				if ref, ok := strings.CutPrefix(p.Ref, "#/components/parameters/"); ok {
					name, in = doc.Components.Parameters[ref].Name, doc.Components.Parameters[ref].In
				}
				if in == "query" {
					o.query = append(o.query, name)
				}
			}
			ops = append(ops, o)
		}
	}
	return ops, nil
}

// request is one hostile request.
type request struct {
	method, path, rawQuery, contentType string
	header                              http.Header
	body                                []byte
}

func (r request) String() string {
	s := r.method + " " + r.path
	if r.rawQuery != "" {
		s += "?" + r.rawQuery
	}
	if len(s) > 300 {
		s = s[:300] + "…"
	}
	if len(r.body) > 0 {
		b := string(r.body)
		if len(b) > 200 {
			b = b[:200] + "…"
		}
		s += fmt.Sprintf(" [%s, %d bytes] %q", r.contentType, len(r.body), b)
	}
	return s
}

// Hostile values for names, query parameters and fields.
var (
	names   = []string{"x", "fz", "default", "%00", "a%00b", "%ff%fe", "..", "%2e%2e", strings.Repeat("a", 300), "A_B", "-", "%20", "%E2%80%8B", "web-1", "node-1"}
	values  = []string{"", "0", "-1", "1", "9223372036854775807", "-9223372036854775808", "18446744073709551616", "1e400", "NaN", "true", "yes", "\x00", "\xff\xfe", "%00", "a=b", "a in (b", "!", ",,,", "x=y,!z,w notin (a,b)", "metadata.name=x", "spec.nodeName!=", "Zm9v", "eyJucyI6IngifQ", strings.Repeat("a=b,", 5000), strings.Repeat("9", 400)}
	strVals = []any{"", "\x00", "a\x00b", "\xff", "\u202e", "$(id)", "`id`", "a;b", "\r\nX: y", strings.Repeat("x", 70000), "../../etc/passwd", "500m", "2Gi", "-1", "1e30"}
	numVals = []any{0, -1, 1, 9223372036854775807, -9223372036854775808, 1e308, 2147483648, 9223372036, 0.5}
)

// seedBodies are valid bodies the mutations start from.
var seedBodies = []string{
	`{"metadata":{"name":"p","labels":{"app":"fz"}},"spec":{"terminationGracePeriodSeconds":1,"containers":[{"name":"app","image":"base","command":["sleep","3600"],"env":[{"name":"A","value":"b"}],"readinessProbe":{"exec":{"command":["true"]},"periodSeconds":5}}]}}`,
	`{"metadata":{"name":"s"},"spec":{"selector":{"app":"fz"},"ports":[{"port":80,"targetPort":8080}]}}`,
	`{"metadata":{"name":"d"},"spec":{"replicas":1,"selector":{"matchLabels":{"app":"d"}},"template":{"metadata":{"labels":{"app":"d"}},"spec":{"containers":[{"name":"app","image":"base","command":["sleep","1"]}]}}}}`,
	`{"metadata":{"name":"j"},"spec":{"completions":1,"template":{"spec":{"restartPolicy":"Never","containers":[{"name":"app","image":"base","command":["true"]}]}}}}`,
	`{"metadata":{"name":"c"},"spec":{"accessModes":["ReadWriteOnce"],"resources":{"requests":{"storage":"1Gi"}}}}`,
	`{"metadata":{"name":"sec"},"stringData":{"k":"v"}}`,
	`{"metadata":{"name":"img"},"spec":{"source":"http://127.0.0.1:1/x.tar.gz","sha256":"00"}}`,
	`{"role":"view","ttlSeconds":60}`,
	`{"reason":"because"}`,
	`{"spec":{"replicas":2}}`,
	`{"metadata":{"labels":{"a":"b"}}}`,
}

func mutate(rng *rand.Rand, op operation) request {
	pick := func(s []string) string { return s[rng.IntN(len(s))] }
	r := request{method: op.method, header: http.Header{}}
	if rng.IntN(20) == 0 {
		r.method = pick([]string{"GET", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "HEAD", "TRACE", "PROPFIND"})
	}
	var segs []string
	for _, seg := range strings.Split(op.path, "/") {
		if strings.HasPrefix(seg, "{") {
			name := "fz" // the namespace zwfuzz made, mostly
			if seg != "{ns}" || rng.IntN(3) == 0 {
				name = pick(names)
			}
			seg = name
		}
		segs = append(segs, seg)
	}
	r.path = strings.Join(segs, "/")
	if rng.IntN(30) == 0 {
		r.path += strings.Repeat("/a", 1+rng.IntN(3000))
	}
	q := url.Values{}
	for _, p := range op.query {
		if rng.IntN(2) == 0 {
			q.Set(p, pick(values))
		}
	}
	if rng.IntN(10) == 0 {
		q.Set(pick([]string{"watch", "limit", "continue", "resourceVersion", "labelSelector", "fieldSelector", "junk"}), pick(values))
	}
	r.rawQuery = q.Encode()
	if rng.IntN(15) == 0 {
		r.rawQuery = pick([]string{"%", "a=%zz", "a=%00", "&&&", "watch=true&watch=false", strings.Repeat("x", 20000)})
	}
	if op.body || rng.IntN(10) == 0 {
		r.contentType = "application/json"
		r.body = mutateBody(rng, []byte(pick(seedBodies)))
		switch rng.IntN(12) {
		case 0:
			r.contentType = "application/yaml"
			r.body = []byte("metadata:\n  name: y\n  labels: {a: [b]}\nspec: !!binary AAAA\n")
		case 1:
			r.contentType = pick([]string{"text/plain", "", "application/json; charset=latin1", "application/merge-patch+json", "multipart/form-data"})
		case 2:
			r.body = []byte(pick([]string{"{", "null", "[]", `"x"`, "{\"a\":1}{\"b\":2}", strings.Repeat("[", 10000), "\xff\xfe{}"}))
		}
	}
	if rng.IntN(8) == 0 {
		r.header.Set(pick([]string{"Origin", "Host", "Accept", "Last-Event-ID", "If-None-Match", "Range", "X-Forwarded-For"}),
			pick([]string{"http://evil.example", "evil.example", "application/yaml", "*/*;q=x", "99999999999999999999", "bytes=5-1", strings.Repeat("a", 9000)}))
	}
	return r
}

// mutateBody changes a few fields of a JSON body: types, huge or negative
// numbers, hostile strings, keys in another case, deep nesting.
func mutateBody(rng *rand.Rand, body []byte) []byte {
	var v any
	if json.Unmarshal(body, &v) != nil {
		return body
	}
	for range 1 + rng.IntN(3) {
		v = mutateValue(rng, v, 0)
	}
	out, err := json.Marshal(v)
	if err != nil {
		return body
	}
	return out
}

func mutateValue(rng *rand.Rand, v any, depth int) any {
	switch x := v.(type) {
	case map[string]any:
		if len(x) == 0 || rng.IntN(6) == 0 {
			x[[]string{"junk", "Metadata", "NAME", "spec", "\x00"}[rng.IntN(5)]] = randomValue(rng, depth)
			return x
		}
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		k := keys[rng.IntN(len(keys))]
		if rng.IntN(10) == 0 { // the same key in another case
			x[strings.ToUpper(k[:1])+k[1:]] = x[k]
			delete(x, k)
			return x
		}
		x[k] = mutateValue(rng, x[k], depth+1)
		return x
	case []any:
		if len(x) == 0 || rng.IntN(5) == 0 {
			return append(x, randomValue(rng, depth))
		}
		i := rng.IntN(len(x))
		x[i] = mutateValue(rng, x[i], depth+1)
		return x
	default:
		return randomValue(rng, depth)
	}
}

func randomValue(rng *rand.Rand, depth int) any {
	switch rng.IntN(6) {
	case 0, 1:
		return strVals[rng.IntN(len(strVals))]
	case 2, 3:
		return numVals[rng.IntN(len(numVals))]
	case 4:
		if depth < 50 {
			return []any{randomValue(rng, depth+1)}
		}
		return nil
	default:
		return map[string]any{"a": nil, "b": true}
	}
}

// result is what a request got.
type result struct {
	code    int
	hung    bool
	err     string
	elapsed time.Duration
	// tooLarge: a 504 that says the resourceVersion asked for is ahead of
	// the store, as Kubernetes answers it; not a failure.
	tooLarge bool
}

func (t *target) do(r request) result {
	start := time.Now()
	code, body, err := t.send(r.method, r.path+"?"+r.rawQuery, r.contentType, r.body, r.header)
	res := result{code: code, elapsed: time.Since(start),
		tooLarge: code == http.StatusGatewayTimeout && strings.Contains(string(body), "ResourceVersionTooLarge")}
	if err != nil {
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			res.hung = true
		}
		res.err = err.Error()
	}
	return res
}

// send makes one request; a stream's answer counts once its headers came.
func (t *target) send(method, pathAndQuery, contentType string, body []byte, header http.Header) (int, []byte, error) {
	var rd io.Reader
	if body != nil {
		rd = strings.NewReader(string(body))
	}
	req, err := http.NewRequest(method, t.base, rd)
	if err != nil {
		return 0, nil, err
	}
	path, query, _ := strings.Cut(pathAndQuery, "?")
	req.URL.Opaque = "//" + req.URL.Host + path // sent as written, escapes and all
	req.URL.RawQuery = query
	for k, v := range header {
		req.Header[k] = v
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	req.Header.Set("Authorization", "Bearer "+t.token)
	resp, err := t.client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") || resp.Header.Get("Content-Type") == "text/plain; charset=utf-8" && method == http.MethodGet {
		return resp.StatusCode, nil, nil // a watch or a followed log: answered
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	return resp.StatusCode, b, err
}

func report(w io.Writer, reqs []request, results []result, slow []slowResult, t *target, took time.Duration, seed uint64) error {
	byClass := map[string]int{}
	var failures []string
	for i, r := range results {
		switch {
		case r.hung:
			byClass["hung"]++
			failures = append(failures, fmt.Sprintf("hung after %s: %s", r.elapsed.Round(time.Millisecond), reqs[i]))
		case r.err != "":
			byClass["transport error"]++
			failures = append(failures, fmt.Sprintf("%s: %s", r.err, reqs[i]))
		case r.tooLarge:
			byClass["504 (version ahead)"]++
		case r.code >= 500:
			byClass[fmt.Sprint(r.code)]++
			failures = append(failures, fmt.Sprintf("%d: %s", r.code, reqs[i]))
		default:
			byClass[fmt.Sprintf("%dxx", r.code/100)]++
		}
	}
	failures = append(failures, slowFailures(slow)...)
	panics := 0
	if log := t.log(); log != "" {
		panics = strings.Count(log, "panic:") + strings.Count(log, "[Recovery]")
	}
	if code, _, err := t.send(http.MethodGet, "/readyz", "", nil, nil); err != nil || code != 200 {
		failures = append(failures, fmt.Sprintf("the API is not ready after the run: %d %v", code, err))
	}
	classes := make([]string, 0, len(byClass))
	for c := range byClass {
		classes = append(classes, c)
	}
	sort.Strings(classes)
	fmt.Fprintf(w, "zwfuzz: %d requests in %s (seed %d)\n", len(reqs), took.Round(time.Millisecond), seed)
	for _, c := range classes {
		fmt.Fprintf(w, "  %-16s %d\n", c, byClass[c])
	}
	fmt.Fprintf(w, "  %-16s %d\n", "panics logged", panics)
	slowSummary(w, slow)
	for _, f := range failures {
		fmt.Fprintln(w, "FAIL", f)
	}
	if len(failures) > 0 || panics > 0 {
		return fmt.Errorf("%d failures, %d panics (rerun with --seed %d)", len(failures), panics, seed)
	}
	return nil
}

// fromEnv reads a dev stack's env file; the API must be on loopback.
func fromEnv(path string) (*target, error) {
	out, err := exec.Command("sh", "-c", `. "$1" && printf '%s\n%s\n%s\n' "$ZW_API_URL" "$ZW_CACERT" "$ZW_TOKEN"`, "sh", path).Output()
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	f := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(f) != 3 {
		return nil, fmt.Errorf("%s does not say ZW_API_URL, ZW_CACERT and ZW_TOKEN", path)
	}
	return newTarget(f[0], f[1], f[2], func() string { return "" })
}

func newTarget(base, caFile, token string, log func() string) (*target, error) {
	u, err := url.Parse(base)
	if err != nil {
		return nil, err
	}
	if ip := net.ParseIP(u.Hostname()); ip == nil || !ip.IsLoopback() {
		return nil, fmt.Errorf("%s is not a loopback address: zwfuzz sends hostile requests only to this machine", base)
	}
	pem, err := os.ReadFile(caFile)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pem)
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}, MaxIdleConnsPerHost: 64}
	return &target{base: base, token: token, client: &http.Client{Transport: tr}, log: log}, nil
}

// startStack starts `zonewright dev` with one node on free ports in a
// temporary directory.
func startStack(bin string) (*target, func(), error) {
	dir, err := os.MkdirTemp("", "zwfuzz-")
	if err != nil {
		return nil, nil, err
	}
	var addrs []string
	for range 4 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, nil, err
		}
		addrs = append(addrs, l.Addr().String())
		l.Close()
	}
	self, err := filepath.Abs(filepath.Join(bin, "zonewright"))
	if err != nil {
		return nil, nil, err
	}
	cmd := exec.Command(self, "dev", "--data-dir", filepath.Join(dir, "data"), "--nodes", "1", "--listen", addrs[0],
		"--temporal-address", addrs[1], "--ui-address", addrs[2], "--dns-listen", addrs[3], "--registry", "")
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, nil, err
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		return nil, nil, err
	}
	var mu sync.Mutex
	var log strings.Builder
	up := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		once := sync.Once{}
		for sc.Scan() {
			mu.Lock()
			log.WriteString(sc.Text() + "\n")
			mu.Unlock()
			if strings.Contains(sc.Text(), "Ctrl-C stops everything") {
				once.Do(func() { close(up) })
			}
		}
	}()
	stop := func() {
		_ = cmd.Process.Signal(syscall.SIGINT)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
		}
		os.RemoveAll(dir)
	}
	select {
	case <-up:
	case <-time.After(3 * time.Minute):
		stop()
		mu.Lock()
		defer mu.Unlock()
		said := log.String()
		if len(said) > 4000 {
			said = "…" + said[len(said)-4000:]
		}
		return nil, nil, fmt.Errorf("the dev stack did not come up within 3 minutes; it said:\n%s", said)
	}
	t, err := fromEnv(filepath.Join(dir, "data", "env"))
	if err != nil {
		stop()
		return nil, nil, err
	}
	t.log = func() string { mu.Lock(); defer mu.Unlock(); return log.String() }
	return t, stop, nil
}
