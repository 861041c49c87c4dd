package agent

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/zonewright/zonewright/internal/illumos"
	"github.com/zonewright/zonewright/internal/illumos/fakes"
	"github.com/zonewright/zonewright/internal/model"
	"github.com/zonewright/zonewright/internal/nodeapi"
)

// nodeAPI answers a node's Node, status and lease routes as the control
// plane does (api/nodeagent.go), keeping one Node at a counted version.
// checks: the lease is renewed only at the version a renewal names, and
// the answer carries the Node's; false is a control plane of an earlier
// release.
type nodeAPI struct {
	mu       sync.Mutex
	node     model.Node
	version  int
	checks   bool
	renewals int
	requests []string
}

func (s *nodeAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	route := r.Method + " " + r.URL.Path
	s.requests = append(s.requests, route)
	answer := func(code int, v any) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		_ = json.NewEncoder(w).Encode(v)
	}
	switch route {
	case "GET /api/v1/nodes/node1":
		answer(http.StatusOK, s.node)
	case "PUT /api/v1/nodes/node1/status":
		var n model.Node
		if err := json.NewDecoder(r.Body).Decode(&n); err != nil {
			answer(http.StatusBadRequest, model.Status{Message: err.Error()})
			return
		}
		s.node = n
		s.bump()
		answer(http.StatusOK, s.node)
	case "PUT /api/v1/nodes/node1/lease":
		var l model.Lease
		if err := json.NewDecoder(r.Body).Decode(&l); err != nil {
			answer(http.StatusBadRequest, model.Status{Message: err.Error()})
			return
		}
		if want := l.NodeVersion(); s.checks && want != "" && want != s.node.Metadata.ResourceVersion {
			answer(http.StatusConflict, model.Status{Reason: "Conflict", Message: "node changed"})
			return
		}
		s.renewals++
		l.Metadata.Annotations = nil
		if s.checks {
			l.Metadata.Annotations = map[string]string{model.AnnotationLeaseNodeVersion: s.node.Metadata.ResourceVersion}
		}
		answer(http.StatusOK, l)
	default:
		answer(http.StatusNotFound, model.Status{Reason: "NotFound"})
	}
}

// bump gives the Node its next version, as any write does.
func (s *nodeAPI) bump() {
	s.version++
	s.node.Metadata.ResourceVersion = strconv.Itoa(s.version)
}

// took answers the requests since the last call, and the renewals so far.
func (s *nodeAPI) took() ([]string, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.requests
	s.requests = nil
	return r, s.renewals
}

// A heartbeat is one request while the Node is the one the agent last
// saw; a Node changed meanwhile is read before the lease is renewed, and
// a control plane that does not check the version gets the Node read
// before every renewal. (Make beat's fast path renew with no version to
// see the changed Node's lease renewed before it is read; make it ignore
// the answered version to see the earlier control plane's never read.)
func TestAHeartbeatIsOneRequestWhileTheNodeIsUnchanged(t *testing.T) {
	const (
		get   = "GET /api/v1/nodes/node1"
		put   = "PUT /api/v1/nodes/node1/status"
		renew = "PUT /api/v1/nodes/node1/lease"
	)
	cp := &nodeAPI{checks: true, node: model.Node{Metadata: model.ObjectMeta{Name: "node1"}}}
	cp.bump()
	srv := httptest.NewServer(cp)
	t.Cleanup(srv.Close)
	host := &fakes.Executor{}
	host.On("zfs", func(illumos.Cmd) fakes.Reply {
		return fakes.Reply{Stdout: "tank/zonewright/zones\tavailable\t1000\ntank/zonewright/zones\tused\t5\n"}
	})
	a := &Agent{cfg: Config{Node: "node1", ZonesDataset: "tank/zonewright/zones", ImagesDataset: "tank/zonewright/images",
		VolumesDataset: "tank/zonewright/volumes", HeartbeatInterval: time.Hour},
		api: nodeapi.New(srv.Client(), srv.URL, "node1"), log: slog.New(slog.DiscardHandler), host: illumos.Host{Runner: host}}
	a.observedZones = func() (map[string]string, time.Time) { return map[string]string{"global": "running"}, time.Now() }

	beat := func(known *model.Node, want ...string) *model.Node {
		t.Helper()
		next, err := a.beat(t.Context(), nil, nil, known)
		if err != nil {
			t.Fatal(err)
		}
		if got, _ := cp.took(); !slices.Equal(got, want) {
			t.Fatalf("beat took %q; want %q", got, want)
		}
		return next
	}

	// A first beat reads the Node, writes the agent's status, renews.
	known := beat(nil, get, put, renew)
	if known == nil || known.Metadata.ResourceVersion != cp.node.Metadata.ResourceVersion {
		t.Fatalf("after the first beat the agent knows %+v; want the Node as written", known)
	}
	known = beat(known, renew)
	known = beat(known, renew)

	// The control plane changes the Node (declares it lost, labels it):
	// the renewal is refused, the Node read, the lease renewed then.
	_, renewals := cp.took()
	cp.mu.Lock()
	cp.node.Metadata.Labels = map[string]string{"tier": "gold"}
	cp.bump()
	cp.mu.Unlock()
	known = beat(known, renew, get, renew)
	if _, n := cp.took(); n != renewals+1 {
		t.Errorf("%d renewals for a changed Node; want 1, after it was read", n-renewals)
	}
	known = beat(known, renew)

	// A control plane of an earlier release renews without checking and
	// answers no version: the agent reads the Node at once, and before
	// every renewal from then on.
	cp.mu.Lock()
	cp.checks = false
	cp.mu.Unlock()
	if known = beat(known, renew, get, renew); known != nil {
		t.Fatalf("after an answer without the Node's version the agent keeps %+v; want nothing", known)
	}
	beat(known, get, renew)
}
