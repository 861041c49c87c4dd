package nodeserver_test

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/zonewright/zonewright/internal/connbounds"
	"github.com/zonewright/zonewright/internal/containerlog"
	"github.com/zonewright/zonewright/internal/execstream"
	"github.com/zonewright/zonewright/internal/illumos"
	"github.com/zonewright/zonewright/internal/illumos/names"
	"github.com/zonewright/zonewright/internal/nodeclient"
	"github.com/zonewright/zonewright/internal/nodeserver"
	"github.com/zonewright/zonewright/internal/pki"
	"github.com/zonewright/zonewright/internal/portforward"
	"github.com/zonewright/zonewright/internal/simtest"
)

func TestMain(m *testing.M) { os.Exit(simtest.Main(m.Run)) }

const ns, pod, uid = "default", "web", "0b9c7a52-1d2e-4f00-9a11-5e0c3b1c2d3e"

// endpoint is a node's endpoint over a simulated host with the pod's zone
// running, and the control plane's dialer.
type endpoint struct {
	base   string
	cp     *nodeclient.Dialer
	ca     *pki.CA
	zone   string
	root   string // the zone's root on this machine
	runner *illumos.Runner
	server *nodeserver.Server
	// network is the node's pod network (none until set).
	network *netip.Prefix
}

func newEndpoint(t *testing.T, maxExecs int) *endpoint {
	t.Helper()
	return newEndpointWith(t, maxExecs, nil, connbounds.Bounds{})
}

// newEndpointWith is newEndpoint keeping logs in kept, its connections
// held to bounds.
func newEndpointWith(t *testing.T, maxExecs int, kept *containerlog.Kept, bounds connbounds.Bounds) *endpoint {
	t.Helper()
	n := simtest.NewNode(t, "n1")
	zone := names.ZoneName(ns, pod, uid)
	for _, args := range [][]string{
		{"zonecfg", "-z", zone, "create -b; set zonepath=/zones/" + zone + "; set ip-type=exclusive"},
		{"zoneadm", "-z", zone, "install"},
		{"zoneadm", "-z", zone, "boot"},
	} {
		if out, err := exec.Command(filepath.Join(n.Bin, args[0]), args[1:]...).CombinedOutput(); err != nil {
			t.Fatalf("%v: %v\n%s", args, err, out)
		}
	}
	ca, err := pki.LoadOrCreateCA(t.TempDir(), "zonewright CA")
	if err != nil {
		t.Fatal(err)
	}
	keyPEM, csr, err := pki.NewCSR("node:n1")
	if err != nil {
		t.Fatal(err)
	}
	certPEM, err := ca.SignServingCSR(csr, pki.NodeCNPrefix+"n1", pki.NodeServingName("n1"))
	if err != nil {
		t.Fatal(err)
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	zonesDir := filepath.Join(n.Root, "fs", "zones")
	network := new(netip.Prefix)
	srv, err := nodeserver.Listen("127.0.0.1:0", nodeserver.Config{Certificate: cert, ClientCAs: ca.Pool(), ZonesDir: zonesDir,
		PodNetwork: func() netip.Prefix { return *network },
		Runner:     &illumos.Runner{BinDir: n.Bin}, MaxExecs: maxExecs, KeptLogs: kept, Bounds: bounds, Log: slog.New(slog.DiscardHandler),
		Metrics: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "zonewright_endpoint_test 1\n") })})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	cp, err := nodeclient.New(ca)
	if err != nil {
		t.Fatal(err)
	}
	return &endpoint{base: "https://127.0.0.1:" + strconv.Itoa(srv.Port()), cp: cp, ca: ca, zone: zone,
		root: filepath.Join(zonesDir, zone, "root"), server: srv, network: network, runner: &illumos.Runner{BinDir: n.Bin}}
}

func (e *endpoint) client() *http.Client { return &http.Client{Transport: e.cp.Transport("n1")} }

func (e *endpoint) get(t *testing.T, path string) (int, string) {
	t.Helper()
	resp, err := e.client().Get(e.base + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func (e *endpoint) exec(t *testing.T, ctx context.Context, stdin io.Reader, argv ...string) (string, int, error) {
	t.Helper()
	q := execstream.Options{Command: argv, Stdout: true, Stderr: true, Stdin: stdin != nil}.Values()
	s, err := execstream.Dial(ctx, e.client(), e.base+nodeclient.ExecPath(ns, pod, uid, "app")+"?"+q.Encode(), nil)
	if err != nil {
		return "", 0, err
	}
	var out strings.Builder
	code, err := s.Run(ctx, stdin, &out, &out, nil)
	return out.String(), code, err
}

// The endpoint reads a container's service log in the zone, and runs
// commands in the zone through zlogin with every word as given.
func TestLogsAndExecInTheZone(t *testing.T) {
	e := newEndpoint(t, 0)
	logDir := filepath.Join(e.root, "var/svc/log")
	if err := os.MkdirAll(logDir, 0o755); err != nil {
		t.Fatal(err)
	}
	log := "[ Jan  5 10:00:00 Executing start method (\"x\"). ]\nhello\n[ Jan  5 10:00:05 Method \"start\" exited with status 96. ]\n"
	if err := os.WriteFile(filepath.Join(logDir, "zonewright-container-app:default.log"), []byte(log), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, body := e.get(t, nodeclient.LogsPath(ns, pod, uid, "app")); code != 200 || body != "hello\n" {
		t.Fatalf("log: %d %q", code, body)
	}
	if code, body := e.get(t, nodeclient.LogsPath(ns, pod, uid, "app")+"?previous=true"); code != 400 || !strings.Contains(body, `previous terminated container \"app\" in pod \"web\" not found`) {
		t.Fatalf("previous of a single run: %d %s", code, body)
	}
	if code, body := e.get(t, nodeclient.LogsPath(ns, pod, uid, "other")); code != 400 || !strings.Contains(body, "has not started") {
		t.Fatalf("log of a container that never ran: %d %s", code, body)
	}
	if code, _ := e.get(t, nodeclient.LogsPath(ns, "gone", uid, "app")); code != 404 {
		t.Fatalf("log of a pod without a zone here: %d", code)
	}
	// A link the zone planted does not lead out of it.
	if err := os.Symlink("/etc/passwd", filepath.Join(logDir, "zonewright-container-evil:default.log")); err != nil {
		t.Fatal(err)
	}
	if code, body := e.get(t, nodeclient.LogsPath(ns, pod, uid, "evil")); code == 200 {
		t.Fatalf("a link out of the zone was followed: %s", body)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for _, tt := range []struct {
		argv  []string
		stdin string
		out   string
		code  int
	}{
		{[]string{"echo", "a b;c"}, "", "a b;c\n", 0},
		{[]string{"printf", "%s|", "$(id)", "`id`", "it's", "x\ny"}, "", "$(id)|`id`|it's|x\ny|", 0},
		{[]string{"sh", "-c", "exit 3"}, "", "", 3},
		{[]string{"cat"}, "in\n", "in\n", 0},
		{[]string{"sh", "-c", "echo err >&2"}, "", "err\n", 0},
		{[]string{"pwd"}, "", e.root + "\n", 0},
	} {
		var stdin io.Reader
		if tt.stdin != "" {
			stdin = strings.NewReader(tt.stdin)
		}
		out, code, err := e.exec(t, ctx, stdin, tt.argv...)
		if err != nil || out != tt.out || code != tt.code {
			t.Errorf("%q: %q, exit %d, %v; want %q, exit %d", tt.argv, out, code, err, tt.out, tt.code)
		}
	}
}

// Only the control plane reads logs and runs execs; a cluster-admin's
// certificate reaches the metrics alone; a node's or none is refused at
// the handshake.
func TestOnlyTheControlPlaneIsServed(t *testing.T) {
	e := newEndpoint(t, 0)
	nodeCertPEM, nodeKeyPEM, err := e.ca.ClientCert(pki.NodeCNPrefix+"n2", []string{pki.NodesOrg})
	if err != nil {
		t.Fatal(err)
	}
	nodeCert, _ := tls.X509KeyPair(nodeCertPEM, nodeKeyPEM)
	opCertPEM, opKeyPEM, _ := e.ca.ClientCert("alice", []string{pki.ClusterAdminsOrg})
	opCert, _ := tls.X509KeyPair(opCertPEM, opKeyPEM)
	dial := func(certs []tls.Certificate) *http.Client {
		return &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true, Certificates: certs}}}
	}
	for name, certs := range map[string][]tls.Certificate{"none": nil, "a node's": {nodeCert}} {
		for _, path := range []string{nodeclient.LogsPath(ns, pod, uid, "app"), "/metrics"} {
			if resp, err := dial(certs).Get(e.base + path); err == nil {
				resp.Body.Close()
				t.Errorf("%s certificate, %s: %d, want a refused handshake", name, path, resp.StatusCode)
			}
		}
	}
	for path, want := range map[string]int{nodeclient.LogsPath(ns, pod, uid, "app"): http.StatusForbidden,
		nodeclient.ExecPath(ns, pod, uid, "app") + "?command=true&stdout=true": http.StatusForbidden, "/metrics": http.StatusOK} {
		resp, err := dial([]tls.Certificate{opCert}).Get(e.base + path)
		if err != nil {
			t.Fatalf("a cluster-admin's certificate, %s: %v", path, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("a cluster-admin's certificate, %s: %d, want %d", path, resp.StatusCode, want)
		}
		if path == "/metrics" && !strings.Contains(string(body), "zonewright_endpoint_test 1") {
			t.Errorf("/metrics served %q, want the node's metrics", body)
		}
	}
}

// A node runs at most MaxExecs sessions at once; one more is refused.
func TestExecsAreBounded(t *testing.T) {
	e := newEndpoint(t, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var re *execstream.RefusedError
	tooMany := func(err error) bool { return errors.As(err, &re) && re.Code == http.StatusTooManyRequests }
	var hold *io.PipeWriter
	first := make(chan error, 1)
	startFirst := func() {
		var stdin *io.PipeReader
		stdin, hold = io.Pipe()
		go func() {
			_, _, err := e.exec(t, ctx, stdin, "cat")
			first <- err
		}()
	}
	startFirst()
	deadline := time.Now().Add(10 * time.Second)
	for {
		select {
		case err := <-first: // a probe below took the one slot before cat did
			if !tooMany(err) {
				t.Fatalf("the first session ended: %v", err)
			}
			startFirst()
		default:
		}
		// A probe's own slot is free before its status comes back, so a
		// 429 means cat holds the slot.
		_, _, err := e.exec(t, ctx, nil, "true")
		if tooMany(err) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a second session while the first runs: %v, want 429", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	hold.Close() // cat ends
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	// The slot is free once the first session's status came.
	if _, code, err := e.exec(t, ctx, nil, "true"); err != nil || code != 0 {
		t.Fatalf("after the first ended: exit %d, %v", code, err)
	}
}

// A pod whose zone is gone is read from the logs the node kept of it,
// previous too; with none kept, the pod has nothing here.
func TestLogsKeptAfterTheZoneIsGone(t *testing.T) {
	kept := &containerlog.Kept{Dir: t.TempDir()}
	e := newEndpointWith(t, 0, kept, connbounds.Bounds{})
	const gone = "6f1d2c3b-0000-4000-8000-000000000001" // a UID of the pod with no zone here
	src := filepath.Join(t.TempDir(), "svc.log")
	log := "[ Jan  5 10:00:00 Executing start method (\"x\"). ]\nfirst\n[ Jan  5 10:00:05 Method \"start\" exited with status 1. ]\n" +
		"[ Jan  5 10:00:15 Executing start method (\"x\"). ]\nsecond\n[ Jan  5 10:00:20 Method \"start\" exited with status 0. ]\n"
	if err := os.WriteFile(src, []byte(log), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := kept.Keep(gone, "app", f); err != nil {
		t.Fatal(err)
	}
	if code, body := e.get(t, nodeclient.LogsPath(ns, pod, gone, "app")); code != 200 || body != "second\n" {
		t.Errorf("kept log: %d %q", code, body)
	}
	if code, body := e.get(t, nodeclient.LogsPath(ns, pod, gone, "app")+"?previous=true"); code != 200 || body != "first\n" {
		t.Errorf("kept previous log: %d %q", code, body)
	}
	// Following a kept log ends with its last line.
	if code, body := e.get(t, nodeclient.LogsPath(ns, pod, gone, "app")+"?follow=true"); code != 200 || body != "second\n" {
		t.Errorf("followed kept log: %d %q", code, body)
	}
	if code, body := e.get(t, nodeclient.LogsPath(ns, pod, gone, "other")); code != 404 {
		t.Errorf("a container with no kept log: %d %s", code, body)
	}
}

// A container may make its log anything: a FIFO (whose opening would wait
// for a writer, holding a log slot for as long as the zone liked), a link
// within its zone, a directory. The endpoint reads regular files only and
// says so at once, as a client's error, not the node's. Open the log with
// root.Open in openLog (as it did) to see the FIFO hold its request.
func TestALogThatIsNotAFileIsRefusedAtOnce(t *testing.T) {
	e := newEndpoint(t, 0)
	logDir := filepath.Join(e.root, "var/svc/log")
	if err := os.MkdirAll(logDir, 0o755); err != nil {
		t.Fatal(err)
	}
	path := func(c string) string { return filepath.Join(logDir, "zonewright-container-"+c+":default.log") }
	if err := syscall.Mkfifo(path("fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path("real"), []byte("hello\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("zonewright-container-real:default.log", path("link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(path("dir"), 0o755); err != nil {
		t.Fatal(err)
	}
	client := e.client()
	client.Timeout = 5 * time.Second
	for _, c := range []string{"fifo", "link", "dir"} {
		resp, err := client.Get(e.base + nodeclient.LogsPath(ns, pod, uid, c))
		if err != nil {
			t.Errorf("log that is a %s: %v", c, err)
			continue
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(b), "not a regular file") {
			t.Errorf("log that is a %s: %d %s, want 400 saying it is not a regular file", c, resp.StatusCode, b)
		}
	}
	if code, body := e.get(t, nodeclient.LogsPath(ns, pod, uid, "real")); code != 200 || body != "hello\n" {
		t.Errorf("a regular log after them: %d %q", code, body)
	}
}

// A port-forward connects to the pod's address the control plane names,
// only when it is one of the node's pods', and carries the bytes both
// ways; a port nothing listens on is a 502 before the upgrade.
//
// Drop the network.Contains check of portForward to see the forward to
// an address outside the pod network go through.
func TestPortForwardReachesOnlyThisNodesPods(t *testing.T) {
	e := newEndpoint(t, 8)
	// The "pod": an echo server on loopback.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() { defer c.Close(); _, _ = io.Copy(c, c) }()
		}
	}()
	port := strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	forward := func(ip, port string) (net.Conn, error) {
		return portforward.Dial(ctx, e.client(), e.base+nodeclient.PortForwardPath(ns, pod, uid)+"?ip="+ip+"&port="+port)
	}
	refused := func(ip, port string, code int, says string) {
		t.Helper()
		_, err := forward(ip, port)
		var re *execstream.RefusedError
		if !errors.As(err, &re) || re.Code != code || !strings.Contains(re.Message, says) {
			t.Errorf("ip %s port %s: %v; want %d saying %q", ip, port, err, code, says)
		}
	}
	// Before the node knows its pod network, and outside it: refused.
	refused("127.0.0.1", port, http.StatusBadRequest, "not an address of this node's pods")
	*e.network = netip.MustParsePrefix("10.88.1.0/24")
	refused("127.0.0.1", port, http.StatusBadRequest, "not an address of this node's pods")

	*e.network = netip.MustParsePrefix("127.0.0.0/8")
	conn, err := forward("127.0.0.1", port)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.WriteString(conn, "both ways\n"); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, len("both ways\n"))
	if _, err := io.ReadFull(conn, got); err != nil || string(got) != "both ways\n" {
		t.Fatalf("through the forward: %q, %v", got, err)
	}
	conn.Close()
	l.Close()
	refused("127.0.0.1", port, http.StatusBadGateway, "does not accept connections on port "+port)
	refused("127.0.0.1", "0", http.StatusBadRequest, "not a TCP port")
	if _, err := portforward.Dial(ctx, e.client(), e.base+nodeclient.PortForwardPath(ns, pod, "0b9c7a52-0000-0000-0000-000000000000")+"?ip=127.0.0.1&port="+port); err == nil ||
		!strings.Contains(err.Error(), "no zone on this node") {
		t.Errorf("a pod with no zone here: %v", err)
	}
}
