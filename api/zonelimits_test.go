package api_test

import "testing"

// A pod's zone limits that zonecfg would refuse are refused at the API,
// 422 naming the field, never accepted to fail on the node.
func TestZoneLimitsAreRefusedWithTheirFields(t *testing.T) {
	c := newAPI(t)
	for field, body := range map[string]string{
		"metadata.annotations[zonewright.io/max-processes]": `{"metadata":{"name":"a","annotations":{"zonewright.io/max-processes":"10"}},
			"spec":{"containers":[{"name":"app","image":"omnios","command":["sleep","1"]}]}}`,
		"spec.containers[0].resources.limits.ephemeral-storage": `{"metadata":{"name":"b"},
			"spec":{"containers":[{"name":"app","image":"omnios","command":["sleep","1"],"resources":{"limits":{"ephemeral-storage":"lots"}}}]}}`,
	} {
		r := c.json("POST", "/api/v1/namespaces/default/pods", body)
		if r.code != 422 || !hasCause(r, field) {
			t.Errorf("%s: %d %s", field, r.code, r.body)
		}
	}
	ok := `{"metadata":{"name":"c","annotations":{"zonewright.io/max-processes":"500","zonewright.io/max-lwps":"2000"}},
		"spec":{"containers":[{"name":"app","image":"omnios","command":["sleep","1"],"resources":{"limits":{"ephemeral-storage":"1Gi"}}}]}}`
	if r := c.json("POST", "/api/v1/namespaces/default/pods", ok); r.code != 201 {
		t.Errorf("a pod with its zone limits: %d %s", r.code, r.body)
	}
}
