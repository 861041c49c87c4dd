package api_test

import (
	"fmt"
	"strings"
	"testing"
)

// TestPodBoundsAre422WithTheFieldPath: durations, sizes and text the host
// cannot carry are refused before they reach a lifecycle.
func TestPodBoundsAre422WithTheFieldPath(t *testing.T) {
	c := newAPI(t)
	pod := func(spec string) string {
		return fmt.Sprintf(`{"metadata":{"name":"x"},"spec":{%s}}`, spec)
	}
	const ctr = `"name":"a","image":"i","command":["c"]`
	pods := "/api/v1/namespaces/default/pods"
	for _, tc := range []struct {
		name, method, path, body, field string
	}{
		{"grace period that overflows a duration", "POST", pods, pod(`"terminationGracePeriodSeconds":9223372036,"containers":[{` + ctr + `}]`), "spec.terminationGracePeriodSeconds"},
		{"env name a-b", "POST", pods, pod(`"containers":[{` + ctr + `,"env":[{"name":"a-b","value":"v"}]}]`), "spec.containers[0].env[0].name"},
		{"env value with ESC", "POST", pods, pod(`"containers":[{` + ctr + `,"env":[{"name":"A","value":"\u001b"}]}]`), "spec.containers[0].env[0].value"},
		{"200 KB of args", "POST", pods, pod(`"containers":[{` + ctr + `,"args":["` + strings.Repeat("a", 200*1024) + `"]}]`), "spec.containers[0].args"},
		{"empty exec probe", "POST", pods, pod(`"containers":[{` + ctr + `,"livenessProbe":{"exec":{"command":[]}}}]`), "spec.containers[0].livenessProbe.exec.command"},
		{"httpGet path with CR LF", "POST", pods, pod(`"containers":[{` + ctr + `,"readinessProbe":{"httpGet":{"path":"/a\r\nb","port":80}}}]`), "spec.containers[0].readinessProbe.httpGet.path"},
		{"probe period of 2^31-1 s", "POST", pods, pod(`"containers":[{` + ctr + `,"readinessProbe":{"tcpSocket":{"port":80},"periodSeconds":2147483647}}]`), "spec.containers[0].readinessProbe.periodSeconds"},
		{"delete grace beyond a day", "DELETE", pods + "/x?gracePeriodSeconds=9223372036", "", "gracePeriodSeconds"},
		{"cancel reason beyond 1 KiB", "POST", pods + "/x/cancel", `{"reason":"` + strings.Repeat("r", 1025) + `"}`, "reason"},
		{"cancel reason of nearly 1 MiB", "POST", pods + "/x/cancel", `{"reason":"` + strings.Repeat("r", 1000*1000) + `"}`, "reason"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctype := "application/json"
			if tc.body == "" {
				ctype = ""
			}
			r := c.do(tc.method, tc.path, ctype, []byte(tc.body))
			st := r.status()
			if r.code != 422 || st.Reason != "Invalid" || len(st.Details.Causes) != 1 || st.Details.Causes[0].Field != tc.field {
				t.Fatalf("got %d %.300s, want 422 naming %s", r.code, r.body, tc.field)
			}
		})
	}
}
