package api

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/zonewright/zonewright/internal/auth"
	"github.com/zonewright/zonewright/internal/model"
	"github.com/zonewright/zonewright/internal/version"
)

// route is one endpoint and what a request to it does, for the authorizer:
// adding an endpoint is adding one line to routes.
type route struct {
	method, path string
	handler      gin.HandlerFunc
	// does is "verb resource[/subresource]", or one of the accesses below.
	does string
}

const (
	// open routes need no credentials (health checks).
	open = "open"
)

// routes is every endpoint of the API. The namespace of a request is its
// :ns parameter, the name its :name parameter.
func (s *Server) routes() []route {
	const v1, apps, batch = "/api/v1", "/apis/apps/v1", "/apis/batch/v1"
	snap := "/apis/" + model.APIVersionSnapshot
	const get, post, put, patch, del = http.MethodGet, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete
	rs := []route{
		{get, "/healthz", func(c *gin.Context) { c.JSON(http.StatusOK, HealthStatus{Status: "ok"}) }, open},
		{get, "/readyz", s.readyz, open},
		{get, "/version", func(c *gin.Context) { respond(c, http.StatusOK, version.Get()) }, open},
		// Whether the caller may do something (kubectl auth can-i): any
		// identity may ask about itself.
		{post, "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", s.selfSubjectAccessReview, "create selfsubjectaccessreviews"},
		// Prometheus scrapes with a cluster-admin's token or certificate:
		// the metrics name nodes and routes, and count every namespace's pods.
		{get, "/metrics", s.serveMetrics, "get metrics"},

		{get, v1 + "/namespaces", s.listNamespaces, "list namespaces"},
		{post, v1 + "/namespaces", s.createNamespace, "create namespaces"},
		{get, v1 + "/namespaces/:ns", s.getNamespace, "get namespaces"},
		{del, v1 + "/namespaces/:ns", s.deleteNamespace, "delete namespaces"},

		{get, v1 + "/pods", s.listPods, "list pods"},
		{get, v1 + "/namespaces/:ns/pods", s.listPods, "list pods"},
		{post, v1 + "/namespaces/:ns/pods", s.createPod, "create pods"},
		{get, v1 + "/namespaces/:ns/pods/:name", s.getPod, "get pods"},
		{put, v1 + "/namespaces/:ns/pods/:name", s.updatePod, "update pods"},
		{patch, v1 + "/namespaces/:ns/pods/:name", s.patchPod, "patch pods"},
		{get, v1 + "/namespaces/:ns/pods/:name/secretenv", s.podSecretEnv, "get pods/secretenv"},
		{del, v1 + "/namespaces/:ns/pods/:name", s.deletePod, "delete pods"},
		// An eviction deletes the pod (kubectl drain); whoever may delete
		// a pod may evict it.
		{post, v1 + "/namespaces/:ns/pods/:name/eviction", s.evictPod, "create pods/eviction"},
		{post, v1 + "/namespaces/:ns/pods/:name/finalize", s.finalizePod, "create pods/finalize"},
		{post, v1 + "/namespaces/:ns/pods/:name/cancel", s.cancelPod, "create pods/cancel"},
		{post, v1 + "/namespaces/:ns/pods/:name/report", s.reportPod, "create pods/report"},
		{get, v1 + "/namespaces/:ns/pods/:name/log", s.podLog, "get pods/log"},
		// An exec session is a write whatever its method: it runs a command.
		{get, v1 + "/namespaces/:ns/pods/:name/exec", s.podExec, "create pods/exec"},
		{post, v1 + "/namespaces/:ns/pods/:name/exec", s.podExec, "create pods/exec"},
		{get, v1 + "/namespaces/:ns/pods/:name/portforward", s.podPortForward, "create pods/portforward"},
		// kubectl's fallback when its WebSocket is refused: SPDY upgraded from a POST.
		{post, v1 + "/namespaces/:ns/pods/:name/portforward", s.podPortForward, "create pods/portforward"},

		{get, v1 + "/nodes", s.listNodes, "list nodes"},
		{post, v1 + "/nodes", s.createNode, "create nodes"},
		{get, v1 + "/nodes/:name", s.getNode, "get nodes"},
		{put, v1 + "/nodes/:name", s.updateNode, "update nodes"},
		{patch, v1 + "/nodes/:name", s.patchNode, "patch nodes"},
		{del, v1 + "/nodes/:name", s.deleteNode, "delete nodes"},
		{post, v1 + "/nodes/:name/cordon", s.cordonNode, "create nodes/cordon"},
		{post, v1 + "/nodes/:name/uncordon", s.uncordonNode, "create nodes/uncordon"},
		{post, v1 + "/nodes/:name/drain", s.drainNode, "create nodes/drain"},
		{post, v1 + "/nodes/:name/join", s.joinNode, "create nodes/join"},
		{post, v1 + "/nodes/:name/certificate", s.renewNodeCertificate, "create nodes/certificate"},
		{put, v1 + "/nodes/:name/status", s.putNodeStatus, "update nodes/status"},
		{get, v1 + "/nodes/:name/lease", s.getNodeLease, "get nodes/lease"},
		{put, v1 + "/nodes/:name/lease", s.putNodeLease, "update nodes/lease"},
		{post, v1 + "/nodes/:name/events", s.createNodeEvent, "create nodes/events"},
		{post, v1 + "/nodes/:name/reconcile", s.reconcileNode, "create nodes/reconcile"},
		{post, v1 + "/nodes/:name/orphanremovals", s.createOrphanRemoval, "create nodes/orphanremovals"},
		{post, v1 + "/nodejointokens", s.createJoinToken, "create nodejointokens"},

		{get, v1 + "/images", s.listImages, "list images"},
		{post, v1 + "/images", s.createImage, "create images"},
		{get, v1 + "/images/:name", s.getImage, "get images"},
		{del, v1 + "/images/:name", s.deleteImage, "delete images"},
		{get, v1 + "/images/:name/artefact", s.imageArtefact, "get images/artefact"},

		{put, v1 + "/volumetransfers/:name", s.uploadTransfer, "update volumetransfers"},
		{get, v1 + "/volumetransfers/:name", s.downloadTransfer, "get volumetransfers"},

		{get, v1 + "/services", s.listServices, "list services"},
		{get, v1 + "/namespaces/:ns/services", s.listServices, "list services"},
		{post, v1 + "/namespaces/:ns/services", s.createService, "create services"},
		{get, v1 + "/namespaces/:ns/services/:name", s.getService, "get services"},
		{put, v1 + "/namespaces/:ns/services/:name", s.updateService, "update services"},
		{patch, v1 + "/namespaces/:ns/services/:name", s.patchService, "patch services"},
		{del, v1 + "/namespaces/:ns/services/:name", s.deleteService, "delete services"},

		// Secrets' values are shown only to who may see them (maySeeSecretValues).
		{get, v1 + "/secrets", s.listSecrets, "list secrets"},
		{get, v1 + "/namespaces/:ns/secrets", s.listSecrets, "list secrets"},
		{post, v1 + "/namespaces/:ns/secrets", s.createSecret, "create secrets"},
		{get, v1 + "/namespaces/:ns/secrets/:name", s.getSecret, "get secrets"},
		{put, v1 + "/namespaces/:ns/secrets/:name", s.updateSecret, "update secrets"},
		{patch, v1 + "/namespaces/:ns/secrets/:name", s.patchSecret, "patch secrets"},
		{del, v1 + "/namespaces/:ns/secrets/:name", s.deleteSecret, "delete secrets"},

		{get, v1 + "/persistentvolumeclaims", s.listClaims, "list persistentvolumeclaims"},
		{get, v1 + "/namespaces/:ns/persistentvolumeclaims", s.listClaims, "list persistentvolumeclaims"},
		{post, v1 + "/namespaces/:ns/persistentvolumeclaims", s.createClaim, "create persistentvolumeclaims"},
		{get, v1 + "/namespaces/:ns/persistentvolumeclaims/:name", s.getClaim, "get persistentvolumeclaims"},
		{put, v1 + "/namespaces/:ns/persistentvolumeclaims/:name", s.updateClaim, "update persistentvolumeclaims"},
		{patch, v1 + "/namespaces/:ns/persistentvolumeclaims/:name", s.patchClaim, "patch persistentvolumeclaims"},
		{del, v1 + "/namespaces/:ns/persistentvolumeclaims/:name", s.deleteClaim, "delete persistentvolumeclaims"},
		{post, v1 + "/namespaces/:ns/persistentvolumeclaims/:name/move", s.moveClaim, "create persistentvolumeclaims/move"},

		{get, v1 + "/resourcequotas", s.listQuotas, "list resourcequotas"},
		{get, v1 + "/namespaces/:ns/resourcequotas", s.listQuotas, "list resourcequotas"},
		{post, v1 + "/namespaces/:ns/resourcequotas", s.createQuota, "create resourcequotas"},
		{get, v1 + "/namespaces/:ns/resourcequotas/:name", s.getQuota, "get resourcequotas"},
		{put, v1 + "/namespaces/:ns/resourcequotas/:name", s.updateQuota, "update resourcequotas"},
		{patch, v1 + "/namespaces/:ns/resourcequotas/:name", s.patchQuota, "patch resourcequotas"},
		{del, v1 + "/namespaces/:ns/resourcequotas/:name", s.deleteQuota, "delete resourcequotas"},

		{get, v1 + "/limitranges", s.listLimitRanges, "list limitranges"},
		{get, v1 + "/namespaces/:ns/limitranges", s.listLimitRanges, "list limitranges"},
		{post, v1 + "/namespaces/:ns/limitranges", s.createLimitRange, "create limitranges"},
		{get, v1 + "/namespaces/:ns/limitranges/:name", s.getLimitRange, "get limitranges"},
		{put, v1 + "/namespaces/:ns/limitranges/:name", s.updateLimitRange, "update limitranges"},
		{patch, v1 + "/namespaces/:ns/limitranges/:name", s.patchLimitRange, "patch limitranges"},
		{del, v1 + "/namespaces/:ns/limitranges/:name", s.deleteLimitRange, "delete limitranges"},

		{get, v1 + "/endpoints", s.listEndpoints, "list endpoints"},
		{get, v1 + "/namespaces/:ns/endpoints", s.listEndpoints, "list endpoints"},
		{get, v1 + "/namespaces/:ns/endpoints/:name", s.getEndpoints, "get endpoints"},

		{get, v1 + "/servicenet", s.serviceNet, "get servicenet"},

		{get, v1 + "/tokens", s.listTokens, "list tokens"},
		{post, v1 + "/tokens", s.createToken, "create tokens"},
		{del, v1 + "/tokens/:name", s.revokeToken, "delete tokens"},
		{get, v1 + "/namespaces/:ns/tokens", s.listTokens, "list tokens"},
		{post, v1 + "/namespaces/:ns/tokens", s.createToken, "create tokens"},
		{del, v1 + "/namespaces/:ns/tokens/:name", s.revokeToken, "delete tokens"},

		{get, apps + "/deployments", s.listDeployments, "list deployments"},
		{get, apps + "/namespaces/:ns/deployments", s.listDeployments, "list deployments"},
		{post, apps + "/namespaces/:ns/deployments", s.createDeployment, "create deployments"},
		{get, apps + "/namespaces/:ns/deployments/:name", s.getDeployment, "get deployments"},
		{put, apps + "/namespaces/:ns/deployments/:name", s.updateDeployment, "update deployments"},
		{patch, apps + "/namespaces/:ns/deployments/:name", s.patchDeployment, "patch deployments"},
		{del, apps + "/namespaces/:ns/deployments/:name", s.deleteDeployment, "delete deployments"},
		{get, apps + "/namespaces/:ns/deployments/:name/scale", s.getDeploymentScale, "get deployments/scale"},
		{put, apps + "/namespaces/:ns/deployments/:name/scale", s.putDeploymentScale, "update deployments/scale"},
		{patch, apps + "/namespaces/:ns/deployments/:name/scale", s.patchDeploymentScale, "patch deployments/scale"},
		{post, apps + "/namespaces/:ns/deployments/:name/rollback", s.rollbackDeployment, "create deployments/rollback"},
		{post, apps + "/namespaces/:ns/deployments/:name/pause", s.pauseDeployment, "create deployments/pause"},
		{post, apps + "/namespaces/:ns/deployments/:name/resume", s.resumeDeployment, "create deployments/resume"},
		{post, apps + "/namespaces/:ns/deployments/:name/restart", s.restartDeployment, "create deployments/restart"},
		{get, apps + "/controllerrevisions", s.listControllerRevisions, "list controllerrevisions"},
		{get, apps + "/namespaces/:ns/controllerrevisions", s.listControllerRevisions, "list controllerrevisions"},
		{get, apps + "/namespaces/:ns/controllerrevisions/:name", s.getControllerRevision, "get controllerrevisions"},
		// ReplicaSets are derived from the revisions, for kubectl rollout.
		{get, apps + "/replicasets", s.listReplicaSets, "list replicasets"},
		{get, apps + "/namespaces/:ns/replicasets", s.listReplicaSets, "list replicasets"},
		{get, apps + "/namespaces/:ns/replicasets/:name", s.getReplicaSet, "get replicasets"},

		{get, batch + "/jobs", s.listJobs, "list jobs"},
		{get, batch + "/namespaces/:ns/jobs", s.listJobs, "list jobs"},
		{post, batch + "/namespaces/:ns/jobs", s.createJob, "create jobs"},
		{get, batch + "/namespaces/:ns/jobs/:name", s.getJob, "get jobs"},
		{del, batch + "/namespaces/:ns/jobs/:name", s.deleteJob, "delete jobs"},

		{get, v1 + "/events", s.listEvents, "list events"},
		{get, v1 + "/namespaces/:ns/events", s.listEvents, "list events"},

		{get, snap + "/volumesnapshots", s.listSnapshots, "list volumesnapshots"},
		{get, snap + "/namespaces/:ns/volumesnapshots", s.listSnapshots, "list volumesnapshots"},
		{post, snap + "/namespaces/:ns/volumesnapshots", s.createSnapshot, "create volumesnapshots"},
		{get, snap + "/namespaces/:ns/volumesnapshots/:name", s.getSnapshot, "get volumesnapshots"},
		{del, snap + "/namespaces/:ns/volumesnapshots/:name", s.deleteSnapshot, "delete volumesnapshots"},
	}
	// Endpoints are the endpoints controller's, ReplicaSets their
	// deployments': every write is refused, after the same authorisation
	// as a write of any other resource.
	writes := map[string]string{post: "create", put: "update", patch: "patch", del: "delete"}
	for _, m := range []string{post, put, patch, del} {
		rs = append(rs,
			route{m, v1 + "/namespaces/:ns/endpoints", s.refuseEndpointsWrite, writes[m] + " endpoints"},
			route{m, v1 + "/namespaces/:ns/endpoints/:name", s.refuseEndpointsWrite, writes[m] + " endpoints"},
			route{m, apps + "/namespaces/:ns/replicasets", s.refuseReplicaSetWrite, writes[m] + " replicasets"},
			route{m, apps + "/namespaces/:ns/replicasets/:name", s.refuseReplicaSetWrite, writes[m] + " replicasets"})
	}
	rs = append(rs, s.discoveryRoutes("v1", model.APIVersionApps, model.APIVersionBatch, model.APIVersionSnapshot, "authorization.k8s.io/v1")...)
	return append(rs, s.openAPIRoutes(rs)...)
}

// attributes parses a route's "verb resource[/subresource]"; ok is false
// for the open routes.
func (rt route) attributes() (a auth.Attributes, ok bool) {
	if rt.does == open {
		return a, false
	}
	verb, res, found := strings.Cut(rt.does, " ")
	if !found || verb == "" || res == "" {
		panic(fmt.Sprintf("route %s %s: %q is not \"verb resource[/subresource]\"", rt.method, rt.path, rt.does))
	}
	a.Verb = verb
	a.Resource, a.Subresource, _ = strings.Cut(res, "/")
	return a, true
}
