package api

import (
	"net/http"

	"github.com/zonewright/zonewright/internal/execstream"
	"github.com/zonewright/zonewright/internal/kubeforward"
	"github.com/zonewright/zonewright/internal/model"
	"github.com/zonewright/zonewright/internal/nodeapi"
	"github.com/zonewright/zonewright/internal/portforward"
	"github.com/zonewright/zonewright/internal/servicenet"
	"github.com/zonewright/zonewright/internal/transfer"
	"github.com/zonewright/zonewright/internal/version"
	"github.com/zonewright/zonewright/workflows/podcontract"
)

// This file is what the OpenAPI document says of each route beyond what
// the route table says. A route whose "does" is a plain verb (list, get,
// create, update, patch, delete) on a resource of resourceTypes needs
// nothing here; any other route needs an entry in operations, keyed by
// its "does" (by "METHOD path" for the open routes). Then run
// `go generate ./api/` to rewrite openapi.json.

// resourceTypes is the Go type of each resource's objects: its schema,
// and with the verb alone the shape of the plain routes on it.
func resourceTypes() map[string]any {
	return map[string]any{
		"namespaces":             model.Namespace{},
		"pods":                   model.Pod{},
		"nodes":                  model.Node{},
		"images":                 model.Image{},
		"services":               model.Service{},
		"secrets":                model.Secret{},
		"persistentvolumeclaims": model.PersistentVolumeClaim{},
		"resourcequotas":         model.ResourceQuota{},
		"limitranges":            model.LimitRange{},
		"endpoints":              model.Endpoints{},
		"deployments":            model.Deployment{},
		"controllerrevisions":    model.ControllerRevision{},
		// Derived from the revisions on every read, never stored.
		"replicasets":     model.ReplicaSet{},
		"jobs":            model.Job{},
		"events":          model.Event{},
		"volumesnapshots": model.VolumeSnapshot{},
		// Asked and answered, never stored: kubectl auth can-i.
		"selfsubjectaccessreviews": SelfSubjectAccessReview{},
	}
}

// operation describes one kind of request for the document.
type operation struct {
	summary string
	// query names the query parameters the handler reads (queryParams).
	query []string
	// body is a value of the request body's Go type (binary: a byte
	// stream); nil: the request has none.
	body         any
	optionalBody bool
	// returns maps each success code to a value of its body's Go type
	// (binary, noBody, statusBody, or for a list route listOf).
	returns map[int]any
	// errors are the failure codes beyond those the request's shape
	// implies (errorCodes); each answers a Status.
	errors []int
}

// Body markers of operation.body and operation.returns.
type (
	binaryStream struct{}
	// textStream is text/plain, streamed (a container's log).
	textStream struct{}
	emptyBody  struct{}
	// listOf is a list of the resource's objects, or with ?watch=true a
	// stream of their changes.
	listOf struct{ item any }
	// openAPIDocument is an OpenAPI document.
	openAPIDocument struct{}
	// eitherBody is a body of any of these types.
	eitherBody []any
)

var (
	binary     = binaryStream{}
	text       = textStream{}
	noBody     = emptyBody{}
	statusBody = model.Status{}
)

// plainOperation is the operation of a plain verb on a resource of
// resourceTypes; ok false for any other verb.
func plainOperation(verb string, obj any) (op operation, ok bool) {
	switch verb {
	case "list":
		return operation{query: []string{"labelSelector", "fieldSelector", "limit", "continue", "watch", "resourceVersion", "sendInitialEvents", "resourceVersionMatch", "allowWatchBookmarks", "timeoutSeconds"},
			returns: map[int]any{http.StatusOK: listOf{obj}}, errors: []int{http.StatusGone, http.StatusTooManyRequests, http.StatusGatewayTimeout}}, true
	case "get":
		return operation{returns: map[int]any{http.StatusOK: obj}}, true
	case "create":
		return operation{body: obj, returns: map[int]any{http.StatusCreated: obj}}, true
	case "update":
		return operation{body: obj, returns: map[int]any{http.StatusOK: obj}}, true
	case "patch":
		return operation{summary: "apply a patch (merge, JSON, strategic merge) or a server-side apply configuration; it is validated and conflict-checked as the equivalent PUT, and an apply of an object that does not exist creates it",
			query: []string{"fieldManager", "force"}, body: applyPatchBody{}, returns: map[int]any{http.StatusOK: obj, http.StatusCreated: obj}}, true
	case "delete":
		return operation{query: []string{"resourceVersion"}, returns: map[int]any{http.StatusOK: obj}}, true
	}
	return op, false
}

// mergePatchBody is a JSON merge patch (RFC 7386) of an object.
type mergePatchBody struct{}

// applyPatchBody is a merge patch, or a server-side apply configuration.
type applyPatchBody struct{}

// operations are the routes whose shape their verb does not say.
func operations() map[string]operation {
	ok := http.StatusOK
	status202 := map[int]any{http.StatusAccepted: statusBody}
	node := map[int]any{ok: model.Node{}}
	deployment := map[int]any{ok: model.Deployment{}}
	refused := operation{summary: "refused: endpoints are written only by zonewright (a body is checked as any other's first)",
		returns: map[int]any{}, errors: []int{http.StatusMethodNotAllowed, http.StatusRequestEntityTooLarge, http.StatusUnsupportedMediaType}}
	refusedReplicaSets := refused
	refusedReplicaSets.summary = "refused: ReplicaSets are managed by their deployment, each one of its revisions (a body is checked as any other's first)"
	return map[string]operation{
		"GET /healthz": {summary: "liveness", returns: map[int]any{ok: HealthStatus{}}},
		"GET /readyz": {summary: "readiness: whether each dependency answers (503: which does not; a Status if the check itself timed out)",
			returns: map[int]any{ok: HealthStatus{}, http.StatusServiceUnavailable: eitherBody{HealthStatus{}, statusBody}}},
		"GET /openapi/v3": {summary: "the index of the OpenAPI documents: one per group version (api/v1, apis/apps/v1…) and one per other top-level path, as Kubernetes serves them",
			returns: map[int]any{ok: OpenAPIV3Index{}, http.StatusNotModified: noBody}},
		openAPIDocumentOp: {summary: "the OpenAPI 3.0 document of a group version or top-level path; with the index's ?hash= it never changes " +
			"(Cache-Control: public, immutable), with an older hash it is a redirect to the current one",
			query: []string{"hash"}, returns: map[int]any{ok: openAPIDocument{}, http.StatusNotModified: noBody, http.StatusMovedPermanently: noBody}},
		"GET /version":            {summary: "the server's build", returns: map[int]any{ok: version.Info{}}},
		"get discovery/versions":  {summary: "the core API's versions (Kubernetes' legacy discovery)", returns: map[int]any{ok: APIVersions{}}},
		"get discovery/groups":    {summary: "the API groups and their versions (Kubernetes' legacy discovery)", returns: map[int]any{ok: APIGroupList{}}},
		"get discovery/resources": {summary: "the resources of a group version, their kinds and verbs (Kubernetes' legacy discovery)", returns: map[int]any{ok: APIResourceList{}}},
		"get metrics": {summary: "the control plane's metrics in the Prometheus text format (404 where none are collected)",
			returns: map[int]any{ok: text}, errors: []int{http.StatusNotFound}},

		"delete pods": {summary: "stop the pod within its grace period (?gracePeriodSeconds=, or the body's DeleteOptions as kubectl sends them; at most 86400; 0 forces), then remove it",
			query: []string{"gracePeriodSeconds", "resourceVersion"}, body: DeleteOptions{}, optionalBody: true,
			returns: map[int]any{ok: model.Pod{}}, errors: []int{http.StatusUnprocessableEntity}},
		"create pods/eviction": {summary: "delete the pod as its deleteOptions say (kubectl drain); zonewright has no disruption budgets",
			body: Eviction{}, returns: map[int]any{ok: model.Pod{}}, errors: []int{http.StatusUnprocessableEntity}},
		"get pods/secretenv": {summary: "the secret values of the pod's environment, for the pod's node only",
			query: []string{"uid"}, returns: map[int]any{ok: model.PodSecretEnv{}}},
		"create pods/finalize": {summary: "end the grace period of a terminating pod now", returns: status202},
		"create pods/cancel": {summary: "abort the pod's provision and roll it back (a reason of at most 1024 bytes)",
			body: podcontract.CancelSignal{}, optionalBody: true, returns: status202},
		"get pods/log": {summary: "the container's output: its SMF service log in the zone, without svc.startd's lines unless smfLines",
			query:   []string{"container", "follow", "previous", "tailLines", "sinceSeconds", "sinceTime", "timestamps", "smfLines"},
			returns: map[int]any{ok: text}, errors: []int{http.StatusTooManyRequests}},
		"create pods/exec": {summary: "run a command in the container's zone over a WebSocket (subprotocol " + execstream.Subprotocol +
			"; channels 0 stdin, 1 stdout, 2 stderr, 3 status with the exit code, 4 resize, 255 close)",
			query:   []string{"command", "container", "stdin", "stdout", "stderr", "tty"},
			returns: map[int]any{http.StatusSwitchingProtocols: noBody}, errors: []int{http.StatusTooManyRequests}},
		"create pods/portforward": {summary: "a TCP connection to the pod's port, made by its node, over a WebSocket (subprotocol " + portforward.Subprotocol +
			"; binary messages carry the bytes either way); or kubectl's port-forward session (" + kubeforward.Protocol + ": SPDY streams in a WebSocket of subprotocol " +
			kubeforward.TunnelProtocol + ", or upgraded from a POST), whose streams name the ports",
			query: []string{"port"}, returns: map[int]any{http.StatusSwitchingProtocols: noBody}, errors: []int{http.StatusTooManyRequests, http.StatusBadGateway}},
		"create pods/report": {summary: "the pod's node reports a transition", body: model.PodReport{}, returns: status202},

		"delete nodes": {summary: "remove a node with no pods; ?force=true evicts them first",
			query: []string{"force", "resourceVersion"}, returns: node},
		"create nodes/cordon":   {summary: "mark the node unschedulable", returns: node},
		"create nodes/uncordon": {summary: "mark the node schedulable", returns: node},
		"create nodes/drain":    {summary: "cordon the node and move its pods and claims away", returns: node},
		"create nodes/join": {summary: "a joining node trades its join token and a CSR for its certificate",
			body: JoinRequest{}, returns: map[int]any{ok: JoinResponse{}}},
		"create nodes/certificate": {summary: "a node renews its certificates over its current one, before they expire",
			body: JoinRequest{}, returns: map[int]any{ok: JoinResponse{}}},
		"update nodes/status": {summary: "the node registers itself or reports its status",
			body: model.Node{}, returns: map[int]any{ok: model.Node{}, http.StatusCreated: model.Node{}}},
		"get nodes/lease":    {summary: "the node's liveness lease", returns: map[int]any{ok: model.Lease{}}},
		"update nodes/lease": {summary: "renew the node's liveness lease", body: model.Lease{}, returns: map[int]any{ok: model.Lease{}}},
		"create nodes/events": {summary: "record an event about the node or one of its pods",
			body: model.Event{}, returns: map[int]any{http.StatusCreated: statusBody}},
		"create nodes/reconcile": {summary: "compare the node's host inventory with the pods bound to it",
			body: nodeapi.ReconcileRequest{}, returns: map[int]any{ok: nodeapi.ReconcileResponse{}}},
		"create nodes/orphanremovals": {summary: "the node reports an orphan it removed",
			body: nodeapi.OrphanRemoval{}, returns: map[int]any{http.StatusCreated: statusBody}},
		"create nodejointokens": {summary: "issue a token a new node joins with",
			body: TokenRequest{}, returns: map[int]any{http.StatusCreated: IssuedToken{}}},

		"delete images": {summary: "delete the image from the catalog and its nodes (202 while nodes still hold it)",
			query: []string{"resourceVersion"}, returns: map[int]any{ok: model.Image{}, http.StatusAccepted: model.Image{}}},
		"get images/artefact": {summary: "the image's artefact, for nodes; Range requests resume a download",
			returns: map[int]any{ok: binary, http.StatusPartialContent: binary, http.StatusNotModified: noBody},
			errors:  []int{http.StatusRequestedRangeNotSatisfiable}},

		"update volumetransfers": {summary: "the source node uploads a moving claim's stream",
			body: binary, returns: map[int]any{http.StatusCreated: transfer.Uploaded{}}},
		"get volumetransfers": {summary: "the destination node downloads a moving claim's stream; Range requests resume",
			returns: map[int]any{ok: binary, http.StatusPartialContent: binary, http.StatusNotModified: noBody},
			errors:  []int{http.StatusRequestedRangeNotSatisfiable}},

		"get servicenet": {summary: "the service network snapshot; with ?after= wait for a newer one (304 if none came)",
			query: []string{"after", "timeoutSeconds"}, returns: map[int]any{ok: servicenet.Snapshot{}, http.StatusNotModified: noBody}},

		"list tokens":   {summary: "the tokens' metadata, never their secrets", returns: map[int]any{ok: TokenList{}}},
		"create tokens": {summary: "issue a token", body: TokenRequest{}, returns: map[int]any{http.StatusCreated: IssuedToken{}}},
		"delete tokens": {summary: "revoke a token", returns: map[int]any{ok: statusBody}},

		"create persistentvolumeclaims/move": {summary: "move the claim's data, then its pods, off its node",
			body: ClaimMoveRequest{}, optionalBody: true, returns: map[int]any{http.StatusAccepted: model.PersistentVolumeClaim{}}},

		"get deployments/scale":    {summary: "the deployment's replicas", returns: map[int]any{ok: model.Scale{}}},
		"update deployments/scale": {summary: "set the deployment's replicas", body: model.Scale{}, returns: map[int]any{ok: model.Scale{}}},
		"patch deployments/scale":  {summary: "patch the deployment's Scale (kubectl scale)", body: mergePatchBody{}, returns: map[int]any{ok: model.Scale{}}},
		"create deployments/rollback": {summary: "put an earlier revision's template back (0 or none: the previous one)",
			body: RollbackRequest{}, optionalBody: true, returns: deployment},
		"create deployments/pause":   {summary: "pause the rollout", returns: deployment},
		"create deployments/resume":  {summary: "resume the rollout", returns: deployment},
		"create deployments/restart": {summary: "roll every pod anew", returns: deployment},

		"create endpoints": refused,
		"update endpoints": refused,
		"patch endpoints":  refused,
		"delete endpoints": refused,

		"create replicasets": refusedReplicaSets,
		"update replicasets": refusedReplicaSets,
		"patch replicasets":  refusedReplicaSets,
		"delete replicasets": refusedReplicaSets,
	}
}

// openAPIDocumentOp is the entry in operations of every
// GET /openapi/v3/<document>.
const openAPIDocumentOp = "GET /openapi/v3/{document}"

// queryParams are the query parameters of the API, by name.
func queryParams() map[string]queryParam {
	return map[string]queryParam{
		"labelSelector": {"string", "only objects whose labels match: key=value, key!=value, key in (a,b), key, !key; comma-separated, at most 100 terms and 8 KiB"},
		"fieldSelector": {"string", "only objects whose fields match: metadata.name=, metadata.namespace=, spec.nodeName=, status.phase=…; at most 100 terms and 8 KiB"},
		"limit":         {"integer", "at most this many objects (at most 1000 a page); the list's metadata.continue fetches the next page"},
		"continue":      {"string", "the metadata.continue of the previous page"},
		"hash":          {"string", "the hash the index gives the document"},
		"watch":         {"boolean", "stream changes as server-sent events instead of answering a list"},
		"resourceVersion": {"string", "on a watch: the version to resume after (or the Last-Event-ID header); " +
			"on a list: a version the answer is at least as new as; on either, one the server has not reached within 3 s is a 504 (ResourceVersionTooLarge); " +
			"on a delete: the object's version, a precondition (409 if it changed)"},
		"sendInitialEvents": {"boolean", "a streaming list (client-go's informers): on a watch, the objects as of at least resourceVersion, " +
			"then a BOOKMARK annotated k8s.io/initial-events-end, then the changes; needs resourceVersionMatch=NotOlderThan and allowWatchBookmarks=true"},
		"resourceVersionMatch": {"string", "NotOlderThan, with sendInitialEvents"},
		"allowWatchBookmarks":  {"boolean", "the client takes BOOKMARK events (only a streaming list's end is sent)"},
		"gracePeriodSeconds":   {"integer", "seconds the pod has to stop; 0 forces it off now"},
		"force":                {"boolean", "deleting a node: evict its pods (as lost) before removing it; server-side apply: take the fields other managers set instead of refusing with 409"},
		"fieldManager":         {"string", "who makes the write, recorded in metadata.managedFields (the User-Agent's program when absent); required with server-side apply"},
		"uid":                  {"string", "the pod's uid, a precondition (409 if the pod was recreated)"},
		"after":                {"integer", "a generation: answer with the first snapshot above it, waiting for it"},
		"timeoutSeconds": {"integer", "on a watch: end it after this many seconds (0 or none: between --min-request-timeout and twice that, at random; " +
			"at most twice --min-request-timeout); on the servicenet long poll: wait at most this long (1 to 30 seconds) for a newer snapshot"},
		"container":    {"string", "the container (optional when the pod has one)"},
		"follow":       {"boolean", "keep streaming what the container writes until it stops or the client leaves"},
		"previous":     {"boolean", "the container's previous run (400 if it has none)"},
		"tailLines":    {"integer", "only the last N lines"},
		"sinceSeconds": {"integer", "only lines written in the last N seconds"},
		"sinceTime":    {"string", "only lines written after this RFC 3339 time"},
		"timestamps":   {"boolean", "prefix each line with its RFC 3339 time"},
		"smfLines":     {"boolean", "include svc.startd's own [ ... ] lines"},
		"command":      {"array", "the command and its arguments, one parameter each, passed verbatim (every word shell-quoted for zlogin)"},
		"stdin":        {"boolean", "send the client's stdin (channel 0)"},
		"stdout":       {"boolean", "stream the command's stdout (channel 1)"},
		"stderr":       {"boolean", "stream the command's stderr (channel 2)"},
		"tty":          {"boolean", "run the command on a terminal (stderr then comes on stdout)"},
		"port":         {"integer", "the pod's TCP port to connect to (1 to 65535)"},
	}
}

type queryParam struct{ typ, description string }
