package api_test

import (
	"fmt"
	"testing"
)

// Every number and amount a body carries past its bound is a 422 naming
// its field, for every kind (internal/model's TestEveryNumberHasABound
// holds the bounds themselves).
func TestNumbersPastTheirBoundsAre422WithTheFieldPath(t *testing.T) {
	c := newAPI(t)
	const ctr = `{"name":"a","image":"i","command":["c"]%s}`
	deployment := func(spec, container string) string {
		return fmt.Sprintf(`{"metadata":{"name":"web"},"spec":{"selector":{"matchLabels":{"app":"web"}},%s"template":{"metadata":{"labels":{"app":"web"}},"spec":{"containers":[`+ctr+`]}}}}`, spec, container)
	}
	job := func(spec string) string {
		return fmt.Sprintf(`{"metadata":{"name":"sum"},"spec":{%s"template":{"spec":{"containers":[`+ctr+`]}}}}`, spec, "")
	}
	pod := func(container, volumes string) string {
		return fmt.Sprintf(`{"metadata":{"name":"x"},"spec":{%s"containers":[`+ctr+`]}}`, volumes, container)
	}
	service := func(port string) string {
		return fmt.Sprintf(`{"metadata":{"name":"web"},"spec":{%s}}`, port)
	}
	claim := func(size string) string {
		return fmt.Sprintf(`{"metadata":{"name":"db"},"spec":{"resources":{"requests":{"storage":%q}}}}`, size)
	}
	const (
		deployments = "/apis/apps/v1/namespaces/default/deployments"
		jobs        = "/apis/batch/v1/namespaces/default/jobs"
		pods        = "/api/v1/namespaces/default/pods"
		services    = "/api/v1/namespaces/default/services"
		claims      = "/api/v1/namespaces/default/persistentvolumeclaims"
	)
	for _, tc := range []struct {
		name, method, path, body, field string
	}{
		{"replicas", "POST", deployments, deployment(`"replicas":10001,`, ""), "spec.replicas"},
		{"scaled replicas", "PUT", deployments + "/web/scale", `{"spec":{"replicas":2147483647}}`, "spec.replicas"},
		{"minReadySeconds", "POST", deployments, deployment(`"minReadySeconds":2147483647,`, ""), "spec.minReadySeconds"},
		{"revisionHistoryLimit", "POST", deployments, deployment(`"revisionHistoryLimit":1001,`, ""), "spec.revisionHistoryLimit"},
		{"progressDeadlineSeconds", "POST", deployments, deployment(`"progressDeadlineSeconds":2147483647,`, ""), "spec.progressDeadlineSeconds"},
		{"maxSurge as a number", "POST", deployments, deployment(`"strategy":{"rollingUpdate":{"maxSurge":2147483647}},`, ""), "spec.strategy.rollingUpdate.maxSurge"},
		{"maxSurge as a percentage", "POST", deployments, deployment(`"strategy":{"rollingUpdate":{"maxSurge":"5000000%"}},`, ""), "spec.strategy.rollingUpdate.maxSurge"},
		{"maxUnavailable as a number", "POST", deployments, deployment(`"strategy":{"rollingUpdate":{"maxUnavailable":10001}},`, ""), "spec.strategy.rollingUpdate.maxUnavailable"},
		{"maxUnavailable as a percentage", "POST", deployments, deployment(`"strategy":{"rollingUpdate":{"maxUnavailable":"101%"}},`, ""), "spec.strategy.rollingUpdate.maxUnavailable"},
		{"healthyDeadlineSeconds", "POST", deployments, deployment(`"strategy":{"rollingUpdate":{"healthyDeadlineSeconds":86401}},`, ""), "spec.strategy.rollingUpdate.healthyDeadlineSeconds"},
		{"a template's memory", "POST", deployments, deployment("", `,"resources":{"limits":{"memory":"2Pi"}}`), "spec.template.spec.containers[0].resources.limits.memory"},

		{"parallelism", "POST", jobs, job(`"parallelism":10001,`), "spec.parallelism"},
		{"completions", "POST", jobs, job(`"completions":100001,`), "spec.completions"},
		{"backoffLimit", "POST", jobs, job(`"backoffLimit":2147483647,`), "spec.backoffLimit"},
		{"activeDeadlineSeconds", "POST", jobs, job(`"activeDeadlineSeconds":9223372036854775807,`), "spec.activeDeadlineSeconds"},
		{"ttlSecondsAfterFinished", "POST", jobs, job(`"ttlSecondsAfterFinished":2147483647,`), "spec.ttlSecondsAfterFinished"},

		{"cpu", "POST", pods, pod(`,"resources":{"requests":{"cpu":"1000001"}}`, ""), "spec.containers[0].resources.requests.cpu"},
		{"cpu past int64", "POST", pods, pod(`,"resources":{"requests":{"cpu":"1e30"}}`, ""), "spec.containers[0].resources.requests.cpu"},
		{"memory that does not parse", "POST", pods, pod(`,"resources":{"limits":{"memory":"lots"}}`, ""), "spec.containers[0].resources.limits.memory"},
		{"containerPort", "POST", pods, pod(`,"ports":[{"containerPort":65536}]`, ""), "spec.containers[0].ports[0].containerPort"},
		{"an emptyDir's sizeLimit", "POST", pods, pod("", `"volumes":[{"name":"s","emptyDir":{"sizeLimit":"8Ei"}}],`), "spec.volumes[0].emptyDir.sizeLimit"},

		{"a service's port", "POST", services, service(`"ports":[{"port":65536,"targetPort":80}]`), "spec.ports[0].port"},
		{"a service's targetPort", "POST", services, service(`"ports":[{"port":80,"targetPort":65536}]`), "spec.ports[0].targetPort"},
		{"clientIP timeoutSeconds", "POST", services, service(`"ports":[{"port":80}],"sessionAffinity":"ClientIP","sessionAffinityConfig":{"clientIP":{"timeoutSeconds":86401}}`),
			"spec.sessionAffinityConfig.clientIP.timeoutSeconds"},

		{"a claim's size", "POST", claims, claim("1025Ti"), "spec.resources.requests.storage"},
		{"a claim of 2^63 bytes", "POST", claims, claim("8Ei"), "spec.resources.requests.storage"},

		{"an image's size", "POST", "/api/v1/images", `{"metadata":{"name":"big"},"spec":{"kind":"zone-template","size":9223372036854775807}}`, "spec.size"},
		{"an image's cpu", "POST", "/api/v1/images", `{"metadata":{"name":"big"},"spec":{"kind":"zone-template","resources":{"cpu":"2000000"}}}`, "spec.resources.cpu"},

		{"a node's agent port", "PUT", "/api/v1/nodes/n1/status", `{"status":{"daemonEndpoints":{"agentEndpoint":{"Port":65536}}}}`, "status.daemonEndpoints.agentEndpoint.Port"},
		{"a node's negative memory", "PUT", "/api/v1/nodes/n1/status", `{"status":{"capacity":{"memory":"-1Gi"}}}`, "status.capacity.memory"},

		{"a token's ttlSeconds", "POST", "/api/v1/tokens", `{"ttlSeconds":9223372036854775807}`, "ttlSeconds"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := c.do(tc.method, tc.path, "application/json", []byte(tc.body))
			st := r.status()
			if r.code != 422 || st.Reason != "Invalid" || st.Details == nil || len(st.Details.Causes) != 1 || st.Details.Causes[0].Field != tc.field {
				t.Fatalf("got %d %.400s, want 422 naming %s", r.code, r.body, tc.field)
			}
		})
	}
}
