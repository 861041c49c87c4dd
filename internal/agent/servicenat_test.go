package agent

import (
	"context"
	"encoding/json"
	"encoding/pem"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/zonewright/zonewright/internal/illumos"
	"github.com/zonewright/zonewright/internal/model"
	"github.com/zonewright/zonewright/internal/nodeapi"
	"github.com/zonewright/zonewright/internal/servicenat"
	"github.com/zonewright/zonewright/internal/servicenet"
	"github.com/zonewright/zonewright/internal/simtest"
)

// serveServiceNet answers GET /api/v1/servicenet as the control plane
// does, from held (the long poll waits at most a second here), over HTTPS.
func serveServiceNet(held *servicenet.Holder) *httptest.Server {
	return httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var snap *servicenet.Snapshot
		if after := r.URL.Query().Get("after"); after == "" {
			snap = held.Load()
		} else {
			n, _ := strconv.ParseInt(after, 10, 64)
			ctx, cancel := context.WithTimeout(r.Context(), time.Second)
			defer cancel()
			if snap = held.Newer(ctx, n); snap == nil {
				w.WriteHeader(http.StatusNotModified)
				return
			}
		}
		if snap == nil {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		_ = json.NewEncoder(w).Encode(snap)
	}))
}

func webAt(gen int64, ip string) *servicenet.Snapshot {
	return &servicenet.Snapshot{Generation: gen, Services: []servicenet.Service{{Namespace: "default", Name: "web",
		ClusterIP: "10.96.0.20", Ports: []servicenet.Port{{Protocol: "TCP", Port: 80}},
		Endpoints: []servicenet.Endpoint{{IP: ip, TargetPorts: []int32{8080}}}}}}
}

// The agent follows the snapshots through the API and converges on each;
// with the control plane gone it keeps the last one, and repairs a wipe
// from it.
func TestServiceNATFollowsSnapshotsAndKeepsTheLastOne(t *testing.T) {
	node := simtest.NewNode(t, "node1")
	var cp servicenet.Holder
	cp.Store(webAt(5, "10.88.1.5"))
	srv := serveServiceNet(&cp)
	t.Cleanup(srv.Close)

	// The agent's API client trusts the server's CA from --api-ca.
	caFile := filepath.Join(t.TempDir(), "ca.crt")
	if err := os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := Config{Node: "node1", APIURL: srv.URL, APICAFile: caFile, ServiceNATCheckInterval: 200 * time.Millisecond}
	hc, err := newAPIClient(cfg)
	if err != nil {
		t.Fatal(err)
	}
	a := &Agent{cfg: cfg, api: nodeapi.New(hc, srv.URL, "node1"), podCIDR: netip.MustParsePrefix("10.88.1.0/24"),
		log: slog.New(slog.DiscardHandler), host: illumos.Host{Runner: &illumos.Runner{BinDir: node.Bin, Timeout: time.Minute}}}
	reported := make(chan int64, 10)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	newer := make(chan struct{}, 1)
	go a.followServiceNet(ctx, newer)
	go a.programServiceNAT(ctx, newer, func(context.Context) { reported <- a.serviceNAT.get().Generation })

	ipnat := func(args ...string) string {
		out, err := exec.Command(filepath.Join(node.Bin, "ipnat"), args...).CombinedOutput()
		if err != nil {
			t.Fatalf("ipnat %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	waitRules := func(what string, ok func(string) bool) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for {
			l := ipnat("-l")
			if ok(l) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: ipnat -l:\n%s", what, l)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	waitReport := func(gen int64) {
		t.Helper()
		for {
			select {
			case g := <-reported:
				if g == gen {
					return
				}
			case <-time.After(5 * time.Second):
				t.Fatalf("generation %d not reported", gen)
			}
		}
	}

	waitRules("the current snapshot's rule at start", func(l string) bool { return strings.Contains(l, "-> 10.88.1.5 port 8080") })
	waitReport(5)
	cp.Store(webAt(6, "10.88.1.6"))
	waitRules("the next snapshot's rule", func(l string) bool {
		return strings.Contains(l, "-> 10.88.1.6 port 8080") && !strings.Contains(l, "-> 10.88.1.5 ")
	})
	waitReport(6)

	// The control plane goes away; a wipe is repaired from the last snapshot.
	srv.Close()
	ipnat("-CF")
	waitRules("the rule restored without the control plane", func(l string) bool { return strings.Contains(l, "-> 10.88.1.6 port 8080") })
	if st := a.serviceNAT.get(); st == nil || st.Generation != 6 || st.Rules != 2 || st.Missing != 0 {
		t.Errorf("status = %+v, want generation 6 with 2 rules", st)
	}
}

func TestConfigAPIURLIsRequiredAndHTTP(t *testing.T) {
	for url, ok := range map[string]bool{"": false, "http://cp:8080": true, "https://cp.example/": true,
		"cp:8080": false, "ftp://cp": false, "http://": false} {
		cfg := Config{Node: "node1", TemporalAddress: "t:7233", PodCIDR: "10.88.1.0/24", APIURL: url}
		cfg.setDefaults()
		err := cfg.validate()
		if (err == nil) != ok {
			t.Errorf("API URL %q: validate = %v, want ok %v", url, err, ok)
		}
	}
}

// A refused new rule is reported but does not hold the generation back
// (terminating pods wait for it); an obsolete rule still loaded does.
func TestAppliedStatusWaitsOnlyForObsoleteRules(t *testing.T) {
	now := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	prev := &model.NodeServiceNetwork{Generation: 5}
	var rule illumos.NATRule = illumos.RawRule("rdr zwgw0 10.96.0.20/32 port 80 -> 10.88.1.5 port 8080 tcp")
	refused := appliedStatus(prev, 6, 3, servicenat.Result{Missing: []illumos.NATRule{rule}}, "1 rules missing", now)
	if refused.Generation != 6 || refused.Missing != 1 || refused.Message == "" || refused.AppliedTime == nil || !refused.AppliedTime.Equal(now) {
		t.Fatalf("with a refused rule: %+v; want generation 6 applied, the rule counted and told", refused)
	}
	left := appliedStatus(prev, 6, 3, servicenat.Result{Leftover: []illumos.NATRule{rule}}, "1 obsolete rules left", now)
	if left.Generation != 5 || left.Message == "" {
		t.Fatalf("with an obsolete rule left: %+v; want generation 5 kept", left)
	}
	same := appliedStatus(&refused, 6, 3, servicenat.Result{}, "", now.Add(time.Minute))
	if same.Generation != 6 || !same.AppliedTime.Equal(now) || same.Missing != 0 || same.Message != "" {
		t.Fatalf("the same generation again: %+v; want its first applied time and no problem", same)
	}
}
