package api_test

import "testing"

// A DELETE may carry Kubernetes' DeleteOptions, as kubectl sends them:
// they are read and checked, not ignored. (Make deleteOptions return
// before decoding to see the bad ones accepted.)
func TestADeleteReadsItsDeleteOptions(t *testing.T) {
	a := newAuthzAPI(t, 0)
	a.seed()
	a.asAdmin("POST", "/api/v1/namespaces/a/pods", `{"metadata":{"name":"opts"},"spec":{"containers":[{"name":"c","image":"i","command":["c"]}]}}`, 201)
	for body, want := range map[string]int{
		`{"kind":"DeleteOptions","apiVersion":"v1","gracePeriodSeconds":-1}`: 422,
		`{"kind":"DeleteOptions","apiVersion":"v1","dryRun":["All"]}`:        400,
		`{"gracePeriod":3}`: 400,
	} {
		if code, b := a.do(caller{bearer: a.admin}, "DELETE", "/api/v1/namespaces/a/pods/opts", body); code != want {
			t.Errorf("DELETE with %s: %d %s, want %d", body, code, b, want)
		}
	}
	if code, b := a.do(caller{bearer: a.admin}, "DELETE", "/api/v1/namespaces/a/pods/opts", `{"kind":"DeleteOptions","apiVersion":"v1","propagationPolicy":"Background","gracePeriodSeconds":5}`); code != 200 {
		t.Errorf("DELETE with kubectl's options: %d %s", code, b)
	}
}
