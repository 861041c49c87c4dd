package api_test

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/zonewright/zonewright/api"
	"github.com/zonewright/zonewright/internal/clusterip"
	"github.com/zonewright/zonewright/internal/model"
	"github.com/zonewright/zonewright/internal/servicenet"
	"github.com/zonewright/zonewright/internal/storetest"
)

// newServiceAPI serves a fresh database with a service network holder.
func newServiceAPI(t *testing.T) (*client, *servicenet.Holder) {
	t.Helper()
	return newServiceAPIWith(t, "10.96.0.0/16")
}

func newServiceAPIWith(t *testing.T, cidr string) (*client, *servicenet.Holder) {
	t.Helper()
	st := storetest.New(t)
	h := &servicenet.Holder{}
	srv := httptest.NewServer(validated(t, api.New(api.Config{Store: st, Logger: slog.New(slog.DiscardHandler), WatchKeepalive: 100 * time.Millisecond,
		ServiceCIDR: clusterip.MustParse(cidr), ServiceNet: h, ServiceNetWait: 5 * time.Second}).Handler()))
	t.Cleanup(func() { srv.CloseClientConnections(); srv.Close(); st.Close() })
	return newClient(t, srv.URL, st), h
}

const serviceJSON = `{"apiVersion":"v1","kind":"Service","metadata":{"name":%q},
 "spec":{"selector":{"app":"web"},"clusterIP":%q,"ports":[{"name":"http","port":80,"targetPort":"http"},{"name":"dns","port":53,"protocol":"UDP","targetPort":5353}]}}`

func decodeService(t *testing.T, r response) model.Service {
	t.Helper()
	var svc model.Service
	if err := json.Unmarshal(r.body, &svc); err != nil {
		t.Fatalf("decode %s: %v", r.body, err)
	}
	return svc
}

func causeFields(r response) []string {
	var fields []string
	if d := r.status().Details; d != nil {
		for _, c := range d.Causes {
			fields = append(fields, c.Field)
		}
	}
	return fields
}

func TestServiceCRUDKeepsItsAddress(t *testing.T) {
	c, _ := newServiceAPI(t)
	r := c.json("POST", "/api/v1/namespaces/default/services", fmt.Sprintf(serviceJSON, "web", ""))
	if r.code != http.StatusCreated {
		t.Fatalf("create: %d %s", r.code, r.body)
	}
	svc := decodeService(t, r)
	ip, err := netip.ParseAddr(svc.Spec.ClusterIP)
	if err != nil || !netip.MustParsePrefix("10.96.0.0/16").Contains(ip) {
		t.Fatalf("clusterIP %q is not an address of 10.96.0.0/16", svc.Spec.ClusterIP)
	}
	if p := svc.Spec.Ports; p[0].Protocol != "TCP" || p[0].TargetPort.StrVal != "http" || p[1].TargetPort.IntVal != 5353 ||
		svc.Spec.SessionAffinity != model.AffinityNone || svc.Spec.Type != model.ServiceTypeClusterIP || svc.Metadata.UID == "" {
		t.Fatalf("defaults not filled in: %s", r.body)
	}
	if r := c.json("GET", "/api/v1/namespaces/default/services/web", nil); r.code != 200 || decodeService(t, r).Spec.ClusterIP != svc.Spec.ClusterIP {
		t.Fatalf("get: %d %s", r.code, r.body)
	}
	for _, path := range []string{"/api/v1/services", "/api/v1/namespaces/default/services"} {
		var list model.List[model.Service]
		r := c.json("GET", path, nil)
		if err := json.Unmarshal(r.body, &list); err != nil || r.code != 200 || len(list.Items) != 1 || list.Kind != "ServiceList" {
			t.Fatalf("list %s: %d %s", path, r.code, r.body)
		}
	}

	// The same address asked for again: Kubernetes' words, on its field.
	r = c.json("POST", "/api/v1/namespaces/default/services", fmt.Sprintf(serviceJSON, "other", svc.Spec.ClusterIP))
	want := fmt.Sprintf(`spec.clusterIP: Invalid value: %q: provided IP is already allocated`, svc.Spec.ClusterIP)
	if st := r.status(); r.code != 422 || st.Details == nil || len(st.Details.Causes) != 1 || st.Details.Causes[0].Field != "spec.clusterIP" ||
		!strings.Contains(st.Message, want) {
		t.Fatalf("taken address: %d %s; want 422 with %q", r.code, r.body, want)
	}
	if r := c.json("POST", "/api/v1/namespaces/default/services", fmt.Sprintf(serviceJSON, "other", "10.200.0.1")); r.code != 422 ||
		!strings.Contains(string(r.body), "not in the valid range") {
		t.Fatalf("address outside the range: %d %s", r.code, r.body)
	}

	// Updates: at a version, never moving the address.
	upd := svc
	upd.Spec.Selector = map[string]string{"app": "web2"}
	upd.Metadata.ResourceVersion = ""
	if r := c.json("PUT", "/api/v1/namespaces/default/services/web", upd); r.code != 422 || causeFields(r)[0] != "metadata.resourceVersion" {
		t.Fatalf("update without a version: %d %s", r.code, r.body)
	}
	upd.Metadata.ResourceVersion = svc.Metadata.ResourceVersion
	upd.Spec.ClusterIP = "10.96.3.3"
	if r := c.json("PUT", "/api/v1/namespaces/default/services/web", upd); r.code != 422 || causeFields(r)[0] != "spec.clusterIP" ||
		!strings.Contains(string(r.body), "field is immutable") {
		t.Fatalf("moving the address: %d %s", r.code, r.body)
	}
	upd.Spec.ClusterIP = ""
	r = c.json("PUT", "/api/v1/namespaces/default/services/web", upd)
	if got := decodeService(t, r); r.code != 200 || got.Spec.ClusterIP != svc.Spec.ClusterIP || got.Spec.Selector["app"] != "web2" {
		t.Fatalf("update: %d %s", r.code, r.body)
	}
	if r := c.json("PUT", "/api/v1/namespaces/default/services/web", upd); r.code != 409 {
		t.Fatalf("update at a stale version: %d %s", r.code, r.body)
	}

	// Deleting frees the address for another service.
	if r := c.json("DELETE", "/api/v1/namespaces/default/services/web", nil); r.code != 200 {
		t.Fatalf("delete: %d %s", r.code, r.body)
	}
	if r := c.json("GET", "/api/v1/namespaces/default/services/web", nil); r.code != 404 {
		t.Fatalf("get after delete: %d", r.code)
	}
	if r := c.json("POST", "/api/v1/namespaces/default/services", fmt.Sprintf(serviceJSON, "other", svc.Spec.ClusterIP)); r.code != 201 {
		t.Fatalf("the deleted service's address: %d %s", r.code, r.body)
	}
	// A namespace holding a service cannot go.
	if r := c.json("DELETE", "/api/v1/namespaces/default", nil); r.code != 409 {
		t.Fatalf("delete a namespace with a service: %d %s", r.code, r.body)
	}
}

func TestBadServicesAndPortsGetFieldPaths(t *testing.T) {
	c, _ := newServiceAPI(t)
	const svcPath, podPath = "/api/v1/namespaces/default/services", "/api/v1/namespaces/default/pods"
	for _, tc := range []struct {
		name, path, body string
		code             int
		field            string
	}{
		{"no ports", svcPath, `{"metadata":{"name":"s"},"spec":{}}`, 422, "spec.ports"},
		{"port zero", svcPath, `{"metadata":{"name":"s"},"spec":{"ports":[{"port":0}]}}`, 422, "spec.ports[0].port"},
		{"port too big", svcPath, `{"metadata":{"name":"s"},"spec":{"ports":[{"port":70000}]}}`, 422, "spec.ports[0].port"},
		{"unnamed second port", svcPath, `{"metadata":{"name":"s"},"spec":{"ports":[{"name":"a","port":1},{"port":2}]}}`, 422, "spec.ports[1].name"},
		{"duplicate port names", svcPath, `{"metadata":{"name":"s"},"spec":{"ports":[{"name":"a","port":1},{"name":"a","port":2}]}}`, 422, "spec.ports[1].name"},
		{"SCTP", svcPath, `{"metadata":{"name":"s"},"spec":{"ports":[{"port":1,"protocol":"SCTP"}]}}`, 422, "spec.ports[0].protocol"},
		{"bad targetPort name", svcPath, `{"metadata":{"name":"s"},"spec":{"ports":[{"port":1,"targetPort":"Not_A_Name"}]}}`, 422, "spec.ports[0].targetPort"},
		{"targetPort out of range", svcPath, `{"metadata":{"name":"s"},"spec":{"ports":[{"port":1,"targetPort":65536}]}}`, 422, "spec.ports[0].targetPort"},
		{"targetPort a bool", svcPath, `{"metadata":{"name":"s"},"spec":{"ports":[{"port":1,"targetPort":true}]}}`, 400, ""},
		{"clusterIP not an address", svcPath, `{"metadata":{"name":"s"},"spec":{"clusterIP":"ten","ports":[{"port":1}]}}`, 422, "spec.clusterIP"},
		{"affinity unknown", svcPath, `{"metadata":{"name":"s"},"spec":{"sessionAffinity":"Cookie","ports":[{"port":1}]}}`, 422, "spec.sessionAffinity"},
		{"affinity timeout", svcPath, `{"metadata":{"name":"s"},"spec":{"sessionAffinity":"ClientIP","sessionAffinityConfig":{"clientIP":{"timeoutSeconds":90000}},"ports":[{"port":1}]}}`, 422, "spec.sessionAffinityConfig.clientIP.timeoutSeconds"},
		{"headless with affinity", svcPath, `{"metadata":{"name":"s"},"spec":{"clusterIP":"None","sessionAffinity":"ClientIP"}}`, 422, "spec.sessionAffinity"},
		{"NodePort", svcPath, `{"metadata":{"name":"s"},"spec":{"type":"NodePort","ports":[{"port":1}]}}`, 422, "spec.type"},
		{"bad selector", svcPath, `{"metadata":{"name":"s"},"spec":{"selector":{"app":"a b"},"ports":[{"port":1}]}}`, 422, "spec.selector[app]"},
		{"unknown namespace", "/api/v1/namespaces/nowhere/services", `{"metadata":{"name":"s"},"spec":{"ports":[{"port":1}]}}`, 404, ""},
		{"pod port name too long", podPath, `{"metadata":{"name":"p"},"spec":{"containers":[{"name":"a","image":"i","command":["c"],"ports":[{"name":"a-very-long-port-name","containerPort":80}]}]}}`, 422, "spec.containers[0].ports[0].name"},
		{"pod port name only digits", podPath, `{"metadata":{"name":"p"},"spec":{"containers":[{"name":"a","image":"i","command":["c"],"ports":[{"name":"8080","containerPort":80}]}]}}`, 422, "spec.containers[0].ports[0].name"},
		{"pod port names repeat across containers", podPath, `{"metadata":{"name":"p"},"spec":{"containers":[{"name":"a","image":"i","command":["c"],"ports":[{"name":"http","containerPort":80}]},{"name":"b","image":"i","command":["c"],"ports":[{"name":"http","containerPort":81}]}]}}`, 422, "spec.containers[1].ports[0].name"},
		{"pod port zero", podPath, `{"metadata":{"name":"p"},"spec":{"containers":[{"name":"a","image":"i","command":["c"],"ports":[{"name":"http","containerPort":0}]}]}}`, 422, "spec.containers[0].ports[0].containerPort"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := c.json("POST", tc.path, tc.body)
			if r.code != tc.code || r.status().Kind != "Status" {
				t.Fatalf("got %d %s, want %d", r.code, r.body, tc.code)
			}
			if tc.field != "" {
				if fields := causeFields(r); len(fields) == 0 || !contains(fields, tc.field) {
					t.Fatalf("causes name %v, want %s: %s", fields, tc.field, r.body)
				}
			}
		})
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func TestEndpointsAreReadOnlyThroughTheAPI(t *testing.T) {
	c, _ := newServiceAPI(t)
	for _, tc := range []struct{ method, path string }{
		{"POST", "/api/v1/namespaces/default/endpoints"},
		{"PUT", "/api/v1/namespaces/default/endpoints/web"},
		{"PATCH", "/api/v1/namespaces/default/endpoints/web"},
		{"DELETE", "/api/v1/namespaces/default/endpoints/web"},
	} {
		ctype := "application/json"
		if tc.method == "PATCH" {
			ctype = "application/merge-patch+json" // any other type is a 415 first
		}
		r := c.do(tc.method, tc.path, ctype, []byte(`{"metadata":{"name":"web"},"subsets":[]}`))
		if r.code != 405 || r.status().Reason != "MethodNotAllowed" {
			t.Fatalf("%s %s: %d %s, want 405", tc.method, tc.path, r.code, r.body)
		}
	}
	if r := c.json("GET", "/api/v1/namespaces/default/endpoints/web", nil); r.code != 404 {
		t.Fatalf("get missing endpoints: %d %s", r.code, r.body)
	}
	for _, path := range []string{"/api/v1/endpoints", "/api/v1/namespaces/default/endpoints"} {
		if r := c.json("GET", path, nil); r.code != 200 || !strings.Contains(string(r.body), `"kind":"EndpointsList"`) {
			t.Fatalf("list %s: %d %s", path, r.code, r.body)
		}
	}
}

func TestServicesWatch(t *testing.T) {
	c, _ := newServiceAPI(t)
	w := c.watch("/api/v1/namespaces/default/services?watch=true", "")
	c.json("POST", "/api/v1/namespaces/default/services", fmt.Sprintf(serviceJSON, "web", ""))
	ev := w.next(t)
	if ev.Type != "ADDED" || ev.Object.Metadata.Name != "web" {
		t.Fatalf("watch: %+v, want ADDED web", ev)
	}
}

func TestServiceNetLongPoll(t *testing.T) {
	c, h := newServiceAPI(t)
	if r := c.json("GET", "/api/v1/servicenet", nil); r.code != 503 {
		t.Fatalf("before the first snapshot: %d %s, want 503", r.code, r.body)
	}
	h.Store(&servicenet.Snapshot{Generation: 5, Services: []servicenet.Service{{Namespace: "default", Name: "web", ClusterIP: "10.96.1.1"}}})
	r := c.json("GET", "/api/v1/servicenet", nil)
	var snap servicenet.Snapshot
	if err := json.Unmarshal(r.body, &snap); err != nil || r.code != 200 || snap.Generation != 5 || snap.Services[0].ClusterIP != "10.96.1.1" {
		t.Fatalf("current snapshot: %d %s", r.code, r.body)
	}
	start := time.Now()
	if r := c.json("GET", "/api/v1/servicenet?after=5&timeoutSeconds=1", nil); r.code != http.StatusNotModified || time.Since(start) < 900*time.Millisecond {
		t.Fatalf("nothing newer: %d after %s, want 304 after ~1s", r.code, time.Since(start))
	}
	got := make(chan response, 1)
	go func() { got <- c.json("GET", "/api/v1/servicenet?after=5", nil) }()
	time.Sleep(200 * time.Millisecond)
	h.Store(&servicenet.Snapshot{Generation: 6})
	select {
	case r := <-got:
		if err := json.Unmarshal(r.body, &snap); err != nil || r.code != 200 || snap.Generation != 6 {
			t.Fatalf("long poll: %d %s, want generation 6", r.code, r.body)
		}
	case <-time.After(3 * time.Second):
		t.Fatal("a waiting poll was not answered when generation 6 came")
	}
	if r := c.json("GET", "/api/v1/servicenet?after=3", nil); r.code != 200 {
		t.Fatalf("a poll behind the current generation waits: %d", r.code)
	}
	for _, q := range []string{"after=x", "after=-1", "after=1&timeoutSeconds=0", "after=1&timeoutSeconds=31", "after=1&timeoutSeconds=9223372037"} {
		if r := c.json("GET", "/api/v1/servicenet?"+q, nil); r.code != 400 {
			t.Fatalf("?%s: %d %s, want 400", q, r.code, r.body)
		}
	}
}

func TestAFullServiceRangeIsAConflict(t *testing.T) {
	c, _ := newServiceAPIWith(t, "10.96.0.0/28") // 12 addresses to hand out
	for i := range 12 {
		if r := c.json("POST", "/api/v1/namespaces/default/services", fmt.Sprintf(serviceJSON, fmt.Sprintf("s%d", i), "")); r.code != 201 {
			t.Fatalf("service %d: %d %s", i, r.code, r.body)
		}
	}
	r := c.json("POST", "/api/v1/namespaces/default/services", fmt.Sprintf(serviceJSON, "one-too-many", ""))
	if r.code != http.StatusConflict || !strings.Contains(r.status().Message, "service CIDR exhausted") {
		t.Fatalf("13th service: %d %s, want 409 naming the exhausted range", r.code, r.body)
	}
	// A headless service needs no address.
	if r := c.json("POST", "/api/v1/namespaces/default/services", `{"metadata":{"name":"headless"},"spec":{"clusterIP":"None","selector":{"app":"db"}}}`); r.code != 201 {
		t.Fatalf("headless service in a full range: %d %s", r.code, r.body)
	}
}
