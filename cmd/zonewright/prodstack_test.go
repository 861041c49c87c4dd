//go:build !illumos && !nodev

package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"

	"github.com/zonewright/zonewright/api"
	nodeagent "github.com/zonewright/zonewright/internal/agent"
	"github.com/zonewright/zonewright/internal/auth"
	"github.com/zonewright/zonewright/internal/devnodes"
	"github.com/zonewright/zonewright/internal/execstream"
	"github.com/zonewright/zonewright/internal/fabric"
	"github.com/zonewright/zonewright/internal/model"
	"github.com/zonewright/zonewright/internal/pgtest"
	"github.com/zonewright/zonewright/internal/pki"
	"github.com/zonewright/zonewright/workflows/taskqueue"
)

// The deployment of docs/running.md, assembled from the real binaries as
// an operator would: PostgreSQL with a role and a password each for
// zonewright and Temporal, `zonewright init`, `zonewright temporal` on
// that PostgreSQL with mutual TLS, two `zonewright serve` replicas on
// 127.0.0.2 and 127.0.0.3 sharing the database, the image store and
// Temporal, and three `zonewright agent` processes on simulated illumos
// hosts (each a network namespace of its own, as the isolated e2e
// cluster), each joined with a single-use token minted through the API
// for its name. The test's requests alternate between the replicas
// (one with the admin token, the other with an operator's certificate
// of a --client-ca): pods run, exec and logs work, a pod reaches a
// service whose backend is on another node, and with serve-2 killed just
// after it took a pod, serve-1 runs that pod and deletes it and another.
// Refused in this shape: a spent join token through the other replica, a
// plaintext Temporal client, and a node's certificate starting a
// workflow. (Drop joinNode's SpendJoinToken call, api/tokens.go, to see
// the spent token join again; drop `|| !a.nodeMay(…)` from
// nodeAuthorizer.Authorize, internal/devstack/auth.go, to see node-1
// start a pod's workflow; make syncKernelNAT, internal/sim/natkernel.go,
// return at once to see the ClusterIP unreachable.)
func TestProductionShapedStack(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a whole deployment")
	}
	if err := fabric.DirectIsolationSupported(); err != nil {
		t.Skip(err)
	}
	bin := buildBinary(t)
	s := startProductionStack(t, bin)

	t.Run("a spent join token is refused by the other replica", func(t *testing.T) {
		tok, err := os.ReadFile(filepath.Join(s.nodesDir, "node-1", "join.token"))
		if err != nil {
			t.Fatal(err)
		}
		_, csr, err := pki.NewCSR("node:node-1")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := json.Marshal(api.JoinRequest{CSR: csr})
		// node-1 joined through serve-1 (its --api-url).
		req, _ := http.NewRequest("POST", s.replicas[1].url+"/api/v1/nodes/node-1/join", bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(tok)))
		req.Header.Set("Content-Type", "application/json")
		resp, err := s.anonymous.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("node-1's join token again, through serve-2: %d %s; want 401", resp.StatusCode, b)
		}
	})

	t.Run("Temporal refuses a plaintext client and a node starting a workflow", func(t *testing.T) {
		plain, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if c, err := client.DialContext(plain, client.Options{HostPort: s.temporalAddr, Namespace: "default"}); err == nil {
			c.Close()
			t.Error("a plaintext client connected to zonewright temporal")
		}
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		n := s.nodes.Nodes[0]
		pair, err := tls.LoadX509KeyPair(filepath.Join(n.StateDir, nodeagent.NodeCertFile), filepath.Join(n.StateDir, nodeagent.NodeKeyFile))
		if err != nil {
			t.Fatal(err)
		}
		asNode, err := client.DialContext(ctx, client.Options{HostPort: s.temporalAddr, Namespace: "default",
			ConnectionOptions: client.ConnectionOptions{TLS: &tls.Config{RootCAs: s.ca, ServerName: prodTemporalName, Certificates: []tls.Certificate{pair}}}})
		if err != nil {
			t.Fatalf("node-1's certificate with Temporal: %v", err)
		}
		defer asNode.Close()
		_, err = asNode.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: "pod/default/forged", TaskQueue: taskqueue.Control}, "PodLifecycle")
		var denied *serviceerror.PermissionDenied
		if !errors.As(err, &denied) {
			t.Fatalf("node-1 starting a pod workflow: %v; want PermissionDenied", err)
		}
	})

	if !t.Run("pods run, exec, log and reach a service on another node", func(t *testing.T) {
		s.create(t, "/api/v1/namespaces/default/services",
			`{"metadata":{"name":"web"},"spec":{"selector":{"app":"web"},"ports":[{"port":80,"targetPort":8080}]}}`)
		s.create(t, "/api/v1/namespaces/default/pods", `{"metadata":{"name":"web-0","labels":{"app":"web"}},"spec":{"nodeName":"node-2",
		  "terminationGracePeriodSeconds":5,"containers":[{"name":"http","image":"base",
		    "command":["sh","-c","echo serving on node-2; echo web-on-node-2 > index.html && exec python3 -m http.server --bind $POD_IP 8080"],
		    "readinessProbe":{"httpGet":{"path":"/","port":8080},"periodSeconds":1}}]}}`)
		s.create(t, "/api/v1/namespaces/default/pods", `{"metadata":{"name":"client"},"spec":{"nodeName":"node-1","terminationGracePeriodSeconds":1,
		  "containers":[{"name":"c","image":"base","command":["sleep","600"]}]}}`)
		web := s.waitRunning(t, "web-0")
		client := s.waitRunning(t, "client")
		if web.Status.PodIP == "" || client.Status.PodIP == "" {
			t.Fatalf("Running without an IP: web-0 %q, client %q", web.Status.PodIP, client.Status.PodIP)
		}

		// The exec carries the container's environment (the zone's
		// hostname is e2e's to check).
		if out, code := s.exec(t, "client", "sh", "-c", "echo hello from $POD_NAME"); code != 0 || out != "hello from client\n" {
			t.Fatalf("exec in client: %q, exit %d", out, code)
		}
		var svc model.Service
		if code, b := s.do(s.next(), "GET", "/api/v1/namespaces/default/services/web", ""); code != 200 || json.Unmarshal(b, &svc) != nil || svc.Spec.ClusterIP == "" {
			t.Fatalf("service web: %d %s", code, b)
		}
		fetch := fmt.Sprintf("import urllib.request; print(urllib.request.urlopen('http://%s/', timeout=2).read().decode().strip())", svc.Spec.ClusterIP)
		s.eventually(t, time.Minute, "client on node-1 to reach web-0 on node-2 through ClusterIP "+svc.Spec.ClusterIP, func() bool {
			out, code := s.exec(t, "client", "python3", "-c", fetch)
			return code == 0 && out == "web-on-node-2\n"
		})
		s.eventually(t, 30*time.Second, "web-0's log to show its start and the client's request", func() bool {
			code, b := s.do(s.next(), "GET", "/api/v1/namespaces/default/pods/web-0/log", "")
			return code == 200 && strings.Contains(string(b), "serving on node-2\n") && strings.Contains(string(b), client.Status.PodIP+" - - [")
		})
	}) {
		return // the rest deletes what this made
	}

	t.Run("with a replica killed the other completes what it began", func(t *testing.T) {
		if zones := s.zones(t, 1); len(zones) != 2 {
			t.Fatalf("node-2's zones with web-0 running: %q, want global and web-0's", zones)
		}
		// serve-2 takes a pod and dies at once: its row and workflow are
		// serve-1's to carry on.
		serve2 := s.replicas[1]
		if code, b := s.do(serve2, "POST", "/api/v1/namespaces/default/pods", `{"metadata":{"name":"late"},"spec":{"nodeName":"node-3",
		  "terminationGracePeriodSeconds":1,"containers":[{"name":"c","image":"base","command":["sleep","600"]}]}}`); code != http.StatusCreated {
			t.Fatalf("create late through serve-2: %d %s", code, b)
		}
		s.kill(t, 1)
		if code, b := s.do(s.next(), "GET", "/readyz", ""); code != 200 || !strings.Contains(string(b), `"temporal":"ok"`) {
			t.Fatalf("serve-1's readyz with serve-2 killed: %d %s", code, b)
		}
		s.waitRunning(t, "late")
		for _, name := range []string{"web-0", "late"} {
			code, b := s.do(s.next(), "DELETE", "/api/v1/namespaces/default/pods/"+name, "")
			var p model.Pod
			if code != http.StatusOK || json.Unmarshal(b, &p) != nil || p.Metadata.DeletionTimestamp == nil {
				t.Fatalf("delete %s: %d %s; want the pod with its deletionTimestamp", name, code, b)
			}
		}
		for _, name := range []string{"web-0", "late"} {
			s.eventually(t, 2*time.Minute, name+" gone from the API", func() bool {
				code, _ := s.do(s.next(), "GET", "/api/v1/namespaces/default/pods/"+name, "")
				return code == http.StatusNotFound
			})
		}
		for _, node := range []int{1, 2} {
			if zones := s.zones(t, node); len(zones) != 1 || zones[0] != "global" {
				t.Errorf("%s's zones after its pod's deletion: %q, want global alone", s.nodes.Nodes[node].Name, zones)
			}
		}
	})
}

// zones lists node i's configured zones, as its zoneadm does.
func (s *productionStack) zones(t *testing.T, i int) []string {
	t.Helper()
	out, err := exec.Command(filepath.Join(s.nodes.Nodes[i].BinDir, "zoneadm"), "list", "-c").CombinedOutput()
	if err != nil {
		t.Fatalf("zoneadm list -c on %s: %v\n%s", s.nodes.Nodes[i].Name, err, out)
	}
	return strings.Fields(string(out))
}

// prodTemporalName is the name Temporal's certificate carries for the
// agents and serve (running.md's cp1.example).
const prodTemporalName = "cp1.example"

// productionStack is the deployment TestProductionShapedStack runs.
type productionStack struct {
	temporalAddr string
	ca           *x509.CertPool
	replicas     []*replica
	turn         int
	anonymous    *http.Client // trusts the cluster CA, sends nothing
	nodes        *devnodes.Nodes
	nodesDir     string
}

// replica is one `zonewright serve` and the test's client of it.
type replica struct {
	name, url string
	http      *http.Client
	cmd       *exec.Cmd
	killed    bool
}

func startProductionStack(t *testing.T, bin string) *productionStack {
	t.Helper()
	dir := t.TempDir()
	logs := filepath.Join(dir, "logs")
	if err := os.Mkdir(logs, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			showLogs(t, logs)
		}
	})
	// 1. PostgreSQL.
	zwURL, temporalURL := productionDatabases(t, dir)

	// 2. The cluster CA and the encryption key.
	cp1 := filepath.Join(dir, "cp1")
	out, err := exec.Command(bin, "init", "--state-dir", cp1, "--encryption-key-file", filepath.Join(cp1, "encryption.key")).CombinedOutput()
	_, fingerprint, _ := strings.Cut(string(out), "(SHA-256 ")
	fingerprint, _, found := strings.Cut(fingerprint, ")")
	if err != nil || !found || fingerprint == "" {
		t.Fatalf("zonewright init: %v\n%s", err, out)
	}

	// 3. zonewright temporal, on its own role's databases.
	s := &productionStack{temporalAddr: freeAddr(t)}
	tmp := startTemporalCommandWith(t, bin, "temporal", []string{"ZW_TEMPORAL_DATABASE_URL=" + temporalURL, "ZW_DATABASE_URL=" + zwURL},
		"--address", s.temporalAddr, "--state-dir", cp1, "--data-dir", filepath.Join(dir, "temporal"), "--tls-san", prodTemporalName,
		"--history-shards", "4")
	tmp.waitServing(t)
	ca, err := pki.PoolFromFile(filepath.Join(cp1, "tls", "ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	s.ca = ca
	s.anonymous = &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ca}}}

	// 4. Two replicas: cp2's state is copied from cp1's, as running.md
	// says; the pods' network stays inside the nodes' namespaces.
	cp2 := filepath.Join(dir, "cp2")
	for _, f := range []string{"tls/ca.crt", "tls/ca.key", "tls/temporal-control-plane.crt", "tls/temporal-control-plane.key", "encryption.key"} {
		copyFileKeepingMode(t, filepath.Join(cp1, f), filepath.Join(cp2, f))
	}
	ops := opsClientCA(t, dir)
	network := int(netip.MustParsePrefix(devnodes.ClusterCIDROf(dir)).Addr().As4()[1])
	images, imageMap := filepath.Join(dir, "shared", "images"), absPath(t, "../../deploy/images.yaml")
	for i, ip := range []string{"127.0.0.2", "127.0.0.3"} {
		state := []string{cp1, cp2}[i]
		r := &replica{name: fmt.Sprintf("serve-%d", i+1)}
		listen := freeAddrOn(t, ip)
		r.url = "https://" + listen
		r.cmd = exec.Command(bin, "serve", "--listen", listen, "--state-dir", state, "--tls-san", "cp1.example,cp2.example",
			"--image-store", images, "--image-map", imageMap, "--encryption-key-file", filepath.Join(state, "encryption.key"),
			"--temporal-address", s.temporalAddr, "--temporal-tls-server-name", prodTemporalName,
			"--temporal-tls-ca", filepath.Join(state, "tls", "ca.crt"),
			"--temporal-tls-cert", filepath.Join(state, "tls", "temporal-control-plane.crt"),
			"--temporal-tls-key", filepath.Join(state, "tls", "temporal-control-plane.key"),
			"--client-ca", ops.caFile, "--client-ca-admin", "ops",
			"--cluster-cidr", fabric.IsolatedClusterCIDR(network), "--node-cidr-mask-size", "24")
		r.cmd.Env = append(os.Environ(), "ZW_DATABASE_URL="+zwURL)
		startLogged(t, r.cmd, filepath.Join(logs, r.name+".log"))
		s.replicas = append(s.replicas, r)
	}
	for _, r := range s.replicas {
		s.eventually(t, 2*time.Minute, r.name+" ready", func() bool {
			resp, err := s.anonymous.Get(r.url + "/readyz")
			if err != nil {
				return false
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			return resp.StatusCode == 200 && strings.Contains(string(b), `"temporal":"ok"`)
		})
		// Both serve under the CA init made (cp2's copied from cp1).
		if b, _ := os.ReadFile(filepath.Join(logs, r.name+".log")); !strings.Contains(string(b), "caFingerprint="+fingerprint) {
			t.Fatalf("%s does not log init's CA fingerprint %s", r.name, fingerprint)
		}
	}
	token, err := os.ReadFile(filepath.Join(cp1, "admin.token"))
	if err != nil {
		t.Fatal(err)
	}
	s.replicas[0].http = &http.Client{Timeout: 30 * time.Second, Transport: auth.Bearer{Token: strings.TrimSpace(string(token)), Next: s.anonymous.Transport}}
	s.replicas[1].http = &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ca, Certificates: []tls.Certificate{ops.cert}}}}

	// 5. Three agents on simulated hosts, each joined with a token the
	// API minted for its name; every agent's --api-url is serve-1's.
	s.nodesDir = filepath.Join(dir, "nodes")
	s.nodes, err = devnodes.Start(context.Background(), devnodes.Config{Count: 3, DataDir: s.nodesDir, Agent: bin, Sim: filepath.Join(filepath.Dir(bin), "illumos-sim"),
		Temporal: s.temporalAddr, Namespace: "default", TemporalMTLS: true, TemporalServerName: prodTemporalName,
		APIURL: s.replicas[0].url, APICAFile: filepath.Join(cp1, "tls", "ca.crt"), Tokens: apiJoinTokens{s: s, t: t},
		ExtraArgs: []string{"--heartbeat-interval", "1s", "--node-route-interval", "2s"}, Underlay: fabric.IsolatedUnderlay(network),
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			for _, n := range s.nodes.Nodes {
				b, _ := os.ReadFile(filepath.Join(filepath.Dir(n.Root), "agent.log"))
				t.Logf("%s's agent:\n%s", n.Name, tail(string(b), 4000))
			}
		}
		s.nodes.Stop()
	})
	s.eventually(t, 2*time.Minute, "the three nodes Ready", func() bool {
		var list model.List[model.Node]
		code, b := s.do(s.next(), "GET", "/api/v1/nodes", "")
		if code != 200 || json.Unmarshal(b, &list) != nil {
			return false
		}
		ready := 0
		for _, n := range list.Items {
			if n.Ready() {
				ready++
			}
		}
		return ready == 3
	})
	return s
}

// apiJoinTokens mints join tokens through the API, as an admin does with
// POST /api/v1/nodejointokens, taking the replicas in turn.
type apiJoinTokens struct {
	s *productionStack
	t *testing.T
}

func (a apiJoinTokens) IssueJoin(_ context.Context, _ auth.Identity, node string, ttl time.Duration) (string, auth.Token, error) {
	r := a.s.next()
	code, b := a.s.do(r, "POST", "/api/v1/nodejointokens", fmt.Sprintf(`{"nodeName":%q,"ttlSeconds":%d}`, node, int(ttl.Seconds())))
	var issued api.IssuedToken
	if code != http.StatusCreated || json.Unmarshal(b, &issued) != nil || issued.NodeName != node {
		return "", auth.Token{}, fmt.Errorf("join token for %s from %s: %d %s", node, r.name, code, b)
	}
	return issued.Token, auth.Token{ID: issued.ID, Role: issued.Role, NodeName: issued.NodeName, ExpiresAt: issued.ExpiresAt}, nil
}

// next is the next replica still running, in turn.
func (s *productionStack) next() *replica {
	for {
		s.turn++
		if r := s.replicas[s.turn%len(s.replicas)]; !r.killed {
			return r
		}
	}
}

func (s *productionStack) do(r *replica, method, path, body string) (int, []byte) {
	req, _ := http.NewRequest(method, r.url+path, strings.NewReader(body))
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := r.http.Do(req)
	if err != nil {
		return 0, []byte(err.Error())
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

func (s *productionStack) create(t *testing.T, path, body string) {
	t.Helper()
	r := s.next()
	if code, b := s.do(r, "POST", path, body); code != http.StatusCreated {
		t.Fatalf("POST %s through %s: %d %s", path, r.name, code, b)
	}
}

func (s *productionStack) waitRunning(t *testing.T, name string) model.Pod {
	t.Helper()
	var p model.Pod
	s.eventually(t, 2*time.Minute, name+" Running and Ready", func() bool {
		code, b := s.do(s.next(), "GET", "/api/v1/namespaces/default/pods/"+name, "")
		p = model.Pod{}
		return code == 200 && json.Unmarshal(b, &p) == nil && p.Status.Phase == model.PodRunning && podReady(p)
	})
	return p
}

func podReady(p model.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == "Ready" {
			return c.Status == "True"
		}
	}
	return false
}

// exec runs argv in pod's container through the next replica; it
// returns stdout and stderr together and the exit code (-1: no session).
func (s *productionStack) exec(t *testing.T, pod string, argv ...string) (string, int) {
	t.Helper()
	r := s.next()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	q := execstream.Options{Command: argv, Stdout: true, Stderr: true}.Values()
	sess, err := execstream.Dial(ctx, r.http, r.url+"/api/v1/namespaces/default/pods/"+pod+"/exec?"+q.Encode(), nil)
	if err != nil {
		t.Logf("exec %q in %s through %s: %v", argv, pod, r.name, err)
		return "", -1
	}
	var out strings.Builder
	code, err := sess.Run(ctx, nil, &out, &out, nil)
	if err != nil {
		t.Logf("exec %q in %s through %s: %v", argv, pod, r.name, err)
		return out.String(), -1
	}
	return out.String(), code
}

// kill ends replica i at once (SIGKILL), as a crashed host.
func (s *productionStack) kill(t *testing.T, i int) {
	t.Helper()
	r := s.replicas[i]
	if err := r.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = r.cmd.Wait()
	r.killed = true
}

func (s *productionStack) eventually(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s", what, timeout)
		}
		time.Sleep(300 * time.Millisecond)
	}
}

// productionDatabases makes running.md's roles and databases on the
// test's PostgreSQL: zonewright's role owns its database and reads its
// password from a passfile; temporal's owns its two and gets its
// password in its URL. Neither is a superuser or may create databases.
func productionDatabases(t *testing.T, dir string) (zonewrightURL, temporalURL string) {
	t.Helper()
	srv := pgtest.Server(t)
	ctx := context.Background()
	admin, err := pgx.Connect(ctx, srv.URL("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	zwPassword, temporalPassword := randomText(t), randomText(t)
	for _, sql := range []string{
		"CREATE ROLE zonewright LOGIN NOSUPERUSER NOCREATEDB PASSWORD '" + zwPassword + "'",
		"CREATE ROLE temporal LOGIN NOSUPERUSER NOCREATEDB PASSWORD '" + temporalPassword + "'",
		"CREATE DATABASE zonewright OWNER zonewright",
		"CREATE DATABASE temporal OWNER temporal",
		"CREATE DATABASE temporal_visibility OWNER temporal",
	} {
		if _, err := admin.Exec(ctx, sql); err != nil {
			t.Fatalf("%s: %v", strings.Split(sql, " PASSWORD")[0], err)
		}
	}
	t.Cleanup(func() {
		c, err := pgx.Connect(ctx, srv.URL("postgres"))
		if err != nil {
			return
		}
		defer c.Close(ctx)
		for _, sql := range []string{"DROP DATABASE IF EXISTS zonewright WITH (FORCE)", "DROP DATABASE IF EXISTS temporal WITH (FORCE)",
			"DROP DATABASE IF EXISTS temporal_visibility WITH (FORCE)", "DROP ROLE IF EXISTS zonewright", "DROP ROLE IF EXISTS temporal"} {
			_, _ = c.Exec(ctx, sql)
		}
	})
	host := srv.Addr()
	passfile := filepath.Join(dir, "pgpass")
	line := host + ":zonewright:zonewright:" + zwPassword + "\n"
	if err := os.WriteFile(passfile, []byte(line), 0o600); err != nil {
		t.Fatal(err)
	}
	zonewrightURL = "postgres://zonewright@" + host + "/zonewright?sslmode=disable&passfile=" + url.QueryEscape(passfile)
	temporalURL = (&url.URL{Scheme: "postgres", User: url.UserPassword("temporal", temporalPassword), Host: host, Path: "/temporal", RawQuery: "sslmode=disable"}).String()
	return zonewrightURL, temporalURL
}

func randomText(t *testing.T) string {
	t.Helper()
	return rand.Text() // base32: nothing to quote in SQL or a URL
}

// opsCA is an operator's CA of its own (serve's --client-ca) and the
// client certificate it issued to CN=ops (--client-ca-admin).
type opsCA struct {
	caFile string
	cert   tls.Certificate
}

func opsClientCA(t *testing.T, dir string) opsCA {
	t.Helper()
	caDir := filepath.Join(dir, "ops-ca")
	ca, err := pki.LoadOrCreateCA(caDir, "operators' CA")
	if err != nil {
		t.Fatal(err)
	}
	certPEM, keyPEM, err := ca.ClientCert("ops", nil)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	return opsCA{caFile: filepath.Join(caDir, "ca.crt"), cert: cert}
}

// copyFileKeepingMode copies from to to (making its directory), with
// from's mode, as running.md's copy from cp1 to cp2 does.
func copyFileKeepingMode(t *testing.T, from, to string) {
	t.Helper()
	fi, err := os.Stat(from)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(to), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, fi.Mode().Perm()); err != nil {
		t.Fatal(err)
	}
}

func absPath(t *testing.T, rel string) string {
	t.Helper()
	p, err := filepath.Abs(rel)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// startLogged starts cmd with its output in logFile, and kills it when
// t ends.
func startLogged(t *testing.T, cmd *exec.Cmd, logFile string) {
	t.Helper()
	f, err := os.Create(logFile)
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		f.Close()
	})
}

// showLogs logs the end of every log file in dir.
func showLogs(t *testing.T, dir string) {
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		b, _ := os.ReadFile(filepath.Join(dir, e.Name()))
		t.Logf("%s:\n%s", e.Name(), tail(string(b), 4000))
	}
}

// tail is the last n bytes of s.
func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}
