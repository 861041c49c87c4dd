package api_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/zonewright/zonewright/internal/model"
)

func quotaPod(name, cpu string) string {
	res := ""
	if cpu != "" {
		res = fmt.Sprintf(`,"resources":{"requests":{"cpu":%q,"memory":"64Mi"},"limits":{"cpu":%q,"memory":"64Mi"}}`, cpu, cpu)
	}
	return fmt.Sprintf(`{"metadata":{"name":%q},"spec":{"containers":[{"name":"a","image":"omnios","command":["sleep","1"]%s}]}}`, name, res)
}

// A namespace's ResourceQuota refuses, with Kubernetes' 403 and words, a
// create that would pass a bound (pods, requested cpu, services,
// storage), and a pod that does not say a compute bound it sets; its
// status.used is what the namespace holds. (Make admitQuota return nil
// to see every refusal go.)
func TestResourceQuotaRefusesWhatWouldPassItsBounds(t *testing.T) {
	c := newAPI(t)
	const base = "/api/v1/namespaces/default"
	r := c.json("POST", base+"/resourcequotas", `{"metadata":{"name":"q"},"spec":{"hard":{"pods":"2","requests.cpu":"1","services":"1","requests.storage":"1Gi"}}}`)
	if r.code != http.StatusCreated {
		t.Fatalf("create quota: %d %s", r.code, r.body)
	}
	for _, p := range []string{"p1", "p2"} {
		if r := c.json("POST", base+"/pods", quotaPod(p, "500m")); r.code != http.StatusCreated {
			t.Fatalf("pod %s within the quota: %d %s", p, r.code, r.body)
		}
	}
	r = c.json("POST", base+"/pods", quotaPod("p3", "500m"))
	want := `pods "p3" is forbidden: exceeded quota: q, requested: pods=1,requests.cpu=500m, used: pods=2,requests.cpu=1, limited: pods=2,requests.cpu=1`
	if st := r.status(); r.code != http.StatusForbidden || st.Reason != "Forbidden" || st.Message != want {
		t.Fatalf("a third pod: %d %s\nwant message %q", r.code, r.body, want)
	}
	r = c.json("POST", base+"/pods", quotaPod("bare", ""))
	if st := r.status(); r.code != http.StatusForbidden || st.Message != `pods "bare" is forbidden: failed quota: q: must specify requests.cpu for: a` {
		t.Fatalf("a pod without a cpu request: %d %s", r.code, r.body)
	}
	var q model.ResourceQuota
	r = c.json("GET", base+"/resourcequotas/q", nil)
	if err := json.Unmarshal(r.body, &q); err != nil || q.Status.Used["pods"] != "2" || q.Status.Used["requests.cpu"] != "1" || q.Status.Hard["pods"] != "2" {
		t.Fatalf("the quota's status: %d %s", r.code, r.body)
	}
	if r := c.json("POST", base+"/services", `{"metadata":{"name":"s1"},"spec":{"ports":[{"port":80}]}}`); r.code != http.StatusCreated {
		t.Fatalf("a first service: %d %s", r.code, r.body)
	}
	if r := c.json("POST", base+"/services", `{"metadata":{"name":"s2"},"spec":{"ports":[{"port":80}]}}`); r.code != http.StatusForbidden || !strings.Contains(string(r.body), `services \"s2\" is forbidden: exceeded quota: q`) {
		t.Fatalf("a second service: %d %s", r.code, r.body)
	}
	claim := `{"metadata":{"name":"big"},"spec":{"accessModes":["ReadWriteOnce"],"resources":{"requests":{"storage":"2Gi"}}}}`
	if r := c.json("POST", base+"/persistentvolumeclaims", claim); r.code != http.StatusForbidden || !strings.Contains(string(r.body), "requested: requests.storage=2Gi") {
		t.Fatalf("a claim past the storage bound: %d %s", r.code, r.body)
	}
	// A finished pod counts nothing; deleting one frees its share.
	if r := c.json("DELETE", base+"/pods/p1", nil); r.code != http.StatusOK {
		t.Fatalf("delete p1: %d %s", r.code, r.body)
	}
	if r := c.json("POST", base+"/pods", quotaPod("p3", "500m")); r.code != http.StatusCreated {
		t.Fatalf("a pod after one was deleted: %d %s", r.code, r.body)
	}

	for _, bad := range []string{
		`{"metadata":{"name":"x"},"spec":{"hard":{"bananas":"1"}}}`,
		`{"metadata":{"name":"x"},"spec":{"hard":{"pods":"-1"}}}`,
		`{"metadata":{"name":"x"},"spec":{"hard":{"cpu":"lots"}}}`,
	} {
		if r := c.json("POST", base+"/resourcequotas", bad); r.code != http.StatusUnprocessableEntity || !strings.Contains(string(r.body), "spec.hard[") {
			t.Errorf("quota %s: %d %s", bad, r.code, r.body)
		}
	}
}

// Creates that race for a quota's last units take turns: of 12 pods
// created at once under pods=3, exactly 3 are made. (Drop FOR UPDATE in
// admitQuota to see more made.)
func TestResourceQuotaHoldsUnderConcurrentCreates(t *testing.T) {
	c := newAPI(t)
	if r := c.json("POST", "/api/v1/namespaces", `{"metadata":{"name":"race"}}`); r.code != http.StatusCreated {
		t.Fatalf("namespace: %d %s", r.code, r.body)
	}
	if r := c.json("POST", "/api/v1/namespaces/race/resourcequotas", `{"metadata":{"name":"q"},"spec":{"hard":{"count/pods":"3"}}}`); r.code != http.StatusCreated {
		t.Fatalf("create quota: %d %s", r.code, r.body)
	}
	var made, refused atomic.Int32
	var wg sync.WaitGroup
	for i := range 12 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := c.json("POST", "/api/v1/namespaces/race/pods", quotaPod(fmt.Sprintf("p%d", i), "100m"))
			switch r.code {
			case http.StatusCreated:
				made.Add(1)
			case http.StatusForbidden:
				refused.Add(1)
			default:
				t.Errorf("pod %d: %d %s", i, r.code, r.body)
			}
		}()
	}
	wg.Wait()
	if made.Load() != 3 || refused.Load() != 9 {
		t.Fatalf("%d pods made, %d refused; want 3 and 9", made.Load(), refused.Load())
	}
}

// A LimitRange gives a pod's containers the requests and limits they
// leave out, before its quota counts them, and refuses, in Kubernetes'
// words, a container above its max and a claim above its storage max.
// (Make admitLimits return nil to see the defaults missing and the big
// pod made.)
func TestLimitRangeDefaultsAndBounds(t *testing.T) {
	c := newAPI(t)
	const base = "/api/v1/namespaces/default"
	r := c.json("POST", base+"/limitranges", `{"metadata":{"name":"l"},"spec":{"limits":[
	  {"type":"Container","default":{"cpu":"200m","memory":"128Mi"},"defaultRequest":{"cpu":"100m","memory":"64Mi"},"max":{"cpu":"1"}},
	  {"type":"PersistentVolumeClaim","max":{"storage":"2Gi"}}]}}`)
	if r.code != http.StatusCreated {
		t.Fatalf("create limit range: %d %s", r.code, r.body)
	}
	if r := c.json("POST", base+"/resourcequotas", `{"metadata":{"name":"q"},"spec":{"hard":{"requests.cpu":"1","limits.memory":"1Gi"}}}`); r.code != http.StatusCreated {
		t.Fatalf("create quota: %d %s", r.code, r.body)
	}
	var p model.Pod
	r = c.json("POST", base+"/pods", quotaPod("plain", ""))
	if err := json.Unmarshal(r.body, &p); r.code != http.StatusCreated || err != nil {
		t.Fatalf("a pod without resources: %d %s", r.code, r.body)
	}
	if res := p.Spec.Containers[0].Resources; res.Requests["cpu"] != "100m" || res.Limits["cpu"] != "200m" || res.Requests["memory"] != "64Mi" || res.Limits["memory"] != "128Mi" {
		t.Fatalf("the defaults given: %+v", res)
	}
	var q model.ResourceQuota
	if r := c.json("GET", base+"/resourcequotas/q", nil); json.Unmarshal(r.body, &q) != nil || q.Status.Used["requests.cpu"] != "100m" || q.Status.Used["limits.memory"] != "128Mi" {
		t.Fatalf("the quota counts the defaults: %s", r.body)
	}
	r = c.json("POST", base+"/pods", quotaPod("big", "2"))
	if st := r.status(); r.code != http.StatusForbidden || st.Message != `pods "big" is forbidden: maximum cpu usage per Container is 1, but limit is 2` {
		t.Fatalf("a pod above the max: %d %s", r.code, r.body)
	}
	claim := `{"metadata":{"name":"c"},"spec":{"accessModes":["ReadWriteOnce"],"resources":{"requests":{"storage":"5Gi"}}}}`
	if r := c.json("POST", base+"/persistentvolumeclaims", claim); r.code != http.StatusForbidden ||
		r.status().Message != `persistentvolumeclaims "c" is forbidden: maximum storage usage per PersistentVolumeClaim is 2Gi, but request is 5Gi` {
		t.Fatalf("a claim above the max: %d %s", r.code, r.body)
	}
	for _, bad := range []string{
		`{"metadata":{"name":"x"},"spec":{"limits":[{"type":"Pod","max":{"cpu":"1"}}]}}`,
		`{"metadata":{"name":"x"},"spec":{"limits":[{"type":"Container","min":{"cpu":"2"},"max":{"cpu":"1"}}]}}`,
		`{"metadata":{"name":"x"},"spec":{"limits":[{"type":"Container","max":{"storage":"1Gi"}}]}}`,
	} {
		if r := c.json("POST", base+"/limitranges", bad); r.code != http.StatusUnprocessableEntity || !strings.Contains(string(r.body), "spec.limits[0]") {
			t.Errorf("limit range %s: %d %s", bad, r.code, r.body)
		}
	}
}
