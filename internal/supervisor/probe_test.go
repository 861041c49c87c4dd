package supervisor

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/zonewright/zonewright/internal/model"
)

// serverPort is the port of a test server's address (host:port).
func serverPort(t *testing.T, addr string) int32 {
	t.Helper()
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.Atoi(p)
	if err != nil {
		t.Fatal(err)
	}
	return int32(n)
}

// request is what an HTTP test server received.
type request struct {
	host   string
	header http.Header
}

// httpServer answers 200 on 127.0.0.1 and records each request.
func httpServer(t *testing.T) (port int32, got func() []request) {
	t.Helper()
	var mu sync.Mutex
	var reqs []request
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		reqs = append(reqs, request{host: r.Host, header: r.Header.Clone()})
		mu.Unlock()
	}))
	t.Cleanup(srv.Close)
	return serverPort(t, srv.Listener.Addr().String()), func() []request {
		mu.Lock()
		defer mu.Unlock()
		return append([]request(nil), reqs...)
	}
}

func TestHTTPProbeSendsItsHeaders(t *testing.T) {
	port, got := httpServer(t)
	p := &model.Probe{HTTPGet: &model.HTTPGetAction{Path: "/healthz", Port: model.IntValue(port), Scheme: "HTTP",
		HTTPHeaders: []model.HTTPHeader{{Name: "X-Probe", Value: "one"}, {Name: "x-probe", Value: "two"},
			{Name: "Host", Value: "app.example"}, {Name: "User-Agent", Value: "mine"}}}}
	res, err := RunProbe(t.Context(), nil, "", "", "127.0.0.1", nil, p)
	if err != nil || !res.Success {
		t.Fatalf("probe: %+v, %v", res, err)
	}
	reqs := got()
	if len(reqs) != 1 {
		t.Fatalf("server got %d requests, want 1", len(reqs))
	}
	r := reqs[0]
	if v := r.header.Values("X-Probe"); len(v) != 2 || v[0] != "one" || v[1] != "two" {
		t.Errorf("X-Probe = %q, want [one two]", v)
	}
	if r.host != "app.example" {
		t.Errorf("Host = %q, want the probe's Host header app.example", r.host)
	}
	if ua := r.header.Values("User-Agent"); len(ua) != 1 || ua[0] != "mine" {
		t.Errorf("User-Agent = %q, want only the probe's own", ua)
	}
}

func TestHTTPAndTCPProbesConnectToTheirHost(t *testing.T) {
	port, got := httpServer(t)
	// The pod's address has nothing listening; the probe's host has.
	const podIP = "127.0.0.2"
	httpProbe := &model.Probe{HTTPGet: &model.HTTPGetAction{Path: "/", Port: model.IntValue(port), Host: "127.0.0.1"}}
	if res, err := RunProbe(t.Context(), nil, "", "", podIP, nil, httpProbe); err != nil || !res.Success {
		t.Errorf("httpGet with host: %+v, %v", res, err)
	}
	if len(got()) != 1 {
		t.Errorf("the server at the probe's host got %d requests, want 1", len(got()))
	}
	tcpProbe := &model.Probe{TCPSocket: &model.TCPSocketAction{Port: model.IntValue(port), Host: "127.0.0.1"}}
	if res, err := RunProbe(t.Context(), nil, "", "", podIP, nil, tcpProbe); err != nil || !res.Success || !strings.Contains(res.Message, "127.0.0.1:") {
		t.Errorf("tcpSocket with host: %+v, %v", res, err)
	}
	// Without host, the pod's address is probed (and nothing is there).
	tcpProbe.TCPSocket.Host = ""
	if res, err := RunProbe(t.Context(), nil, "", "", podIP, nil, tcpProbe); err != nil || res.Success || !strings.Contains(res.Message, podIP) {
		t.Errorf("tcpSocket without host: %+v, %v; want a refused connection to %s", res, err, podIP)
	}
}

func TestNamedProbePortsAreTheContainersPorts(t *testing.T) {
	port, got := httpServer(t)
	ports := []model.ContainerPort{{Name: "metrics", ContainerPort: 1}, {Name: "http", ContainerPort: port}}
	httpProbe := &model.Probe{HTTPGet: &model.HTTPGetAction{Path: "/", Port: model.StrValue("http")}}
	if res, err := RunProbe(t.Context(), nil, "", "", "127.0.0.1", ports, httpProbe); err != nil || !res.Success {
		t.Errorf("httpGet on port \"http\": %+v, %v", res, err)
	}
	if len(got()) != 1 {
		t.Errorf("server got %d requests, want 1", len(got()))
	}
	tcpProbe := &model.Probe{TCPSocket: &model.TCPSocketAction{Port: model.StrValue("http")}}
	if res, err := RunProbe(t.Context(), nil, "", "", "127.0.0.1", ports, tcpProbe); err != nil || !res.Success {
		t.Errorf("tcpSocket on port \"http\": %+v, %v", res, err)
	}
	tcpProbe.TCPSocket.Port = model.StrValue("admin")
	if _, err := RunProbe(t.Context(), nil, "", "", "127.0.0.1", ports, tcpProbe); err == nil || !strings.Contains(err.Error(), `"admin"`) {
		t.Errorf("a port name the container lacks: %v, want an error naming it", err)
	}
}

func TestGRPCProbeAsksTheHealthService(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	hs := health.NewServer()
	healthpb.RegisterHealthServer(srv, hs)
	go srv.Serve(l)
	t.Cleanup(srv.Stop)
	port := serverPort(t, l.Addr().String())
	hs.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
	hs.SetServingStatus("db", healthpb.HealthCheckResponse_NOT_SERVING)

	probe := func(service *string) Result {
		t.Helper()
		res, err := RunProbe(t.Context(), nil, "", "", "127.0.0.1", nil, &model.Probe{GRPC: &model.GRPCAction{Port: port, Service: service}})
		if err != nil {
			t.Fatalf("grpc probe: %v", err)
		}
		return res
	}
	if res := probe(nil); !res.Success {
		t.Errorf("server SERVING: %+v", res)
	}
	db := "db"
	if res := probe(&db); res.Success || !strings.Contains(res.Message, "NOT_SERVING") {
		t.Errorf("service db NOT_SERVING: %+v", res)
	}
	hs.SetServingStatus("db", healthpb.HealthCheckResponse_SERVING)
	if res := probe(&db); !res.Success {
		t.Errorf("service db SERVING again: %+v", res)
	}
	unknown := "nosuch"
	if res := probe(&unknown); res.Success {
		t.Errorf("an unknown service: %+v", res)
	}

	// A server without the health service, and no server at all.
	bare := grpc.NewServer()
	l2, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go bare.Serve(l2)
	t.Cleanup(bare.Stop)
	res, err := RunProbe(t.Context(), nil, "", "", "127.0.0.1", nil, &model.Probe{GRPC: &model.GRPCAction{Port: serverPort(t, l2.Addr().String())}})
	if err != nil || res.Success || !strings.Contains(res.Message, "does not implement") {
		t.Errorf("a server without the health service: %+v, %v", res, err)
	}
	l2.Close()
	bare.Stop()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	res, err = RunProbe(ctx, nil, "", "", "127.0.0.1", nil, &model.Probe{GRPC: &model.GRPCAction{Port: serverPort(t, l2.Addr().String())}})
	if err != nil || res.Success {
		t.Errorf("no server: %+v, %v", res, err)
	}
}
