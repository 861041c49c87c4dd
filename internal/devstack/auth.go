package devstack

import (
	"context"
	"crypto/x509/pkix"
	"log/slog"
	"slices"
	"strings"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/server/common/authorization"
	"go.temporal.io/server/common/tasktoken"

	"github.com/zonewright/zonewright/internal/auth"
	"github.com/zonewright/zonewright/workflows"
)

// Identities in client certificates of the cluster CA: the API's own
// (internal/auth), so a certificate means the same to both.
const (
	// NodeOrg is the organisation of node certificates, whose common name
	// is NodePrefix + the node's name.
	NodeOrg    = auth.NodesOrg
	NodePrefix = auth.NodeCNPrefix
	// ControlPlaneName is the common name of the control plane's own
	// client certificate.
	ControlPlaneName = auth.ControlPlaneCN
	// AdminOrg is the organisation of operators' certificates (the
	// Temporal CLI, the Web UI) and of the server's own system worker.
	AdminOrg = auth.ClusterAdminsOrg
)

// NodeSubject is the certificate subject of node name.
func NodeSubject(name string) (commonName string, orgs []string) {
	return NodePrefix + name, []string{NodeOrg}
}

const (
	workflowServicePrefix = "/temporal.api.workflowservice.v1.WorkflowService/"
)

// nodeClaim marks the claims of a node identity (Claims.Extensions).
type nodeClaim struct{ name string }

// claimMapper turns the verified client certificate's subject into claims:
// the control plane and operators are system admins, a node is a node
// claim with no role (the authorizer decides what it may call), anyone
// else gets nothing.
type claimMapper struct{}

func (claimMapper) GetClaims(ai *authorization.AuthInfo) (*authorization.Claims, error) {
	if ai == nil || ai.TLSSubject == nil {
		return &authorization.Claims{}, nil
	}
	return claimsOf(*ai.TLSSubject), nil
}

func claimsOf(s pkix.Name) *authorization.Claims {
	c := &authorization.Claims{Subject: s.CommonName, AuthType: "mtls"}
	switch {
	case s.CommonName == ControlPlaneName || slices.Contains(s.Organization, AdminOrg):
		c.System = authorization.RoleAdmin
	case strings.HasPrefix(s.CommonName, NodePrefix) && slices.Contains(s.Organization, NodeOrg):
		if name := strings.TrimPrefix(s.CommonName, NodePrefix); name != "" {
			c.Extensions = nodeClaim{name: name}
		}
	}
	return c
}

// nodeAuthorizer lets system admins call everything and a node only what
// its activity worker needs, on its own task queue, in the cluster's
// namespace.
type nodeAuthorizer struct {
	namespace string
	tokens    *tasktoken.Serializer
	log       *slog.Logger
}

var (
	allow = authorization.Result{Decision: authorization.DecisionAllow}
	deny  = authorization.Result{Decision: authorization.DecisionDeny}
)

func (a *nodeAuthorizer) Authorize(_ context.Context, claims *authorization.Claims, target *authorization.CallTarget) (authorization.Result, error) {
	if authorization.IsHealthCheckAPI(target.APIName) {
		return allow, nil
	}
	if claims == nil {
		return a.denied("", target), nil
	}
	if claims.System&authorization.RoleAdmin != 0 {
		return authorization.Result{Decision: authorization.DecisionAllow,
			Principal: principal(claims)}, nil
	}
	node, ok := claims.Extensions.(nodeClaim)
	if !ok || !a.nodeMay(node.name, target) {
		return a.denied(claims.Subject, target), nil
	}
	return authorization.Result{Decision: authorization.DecisionAllow, Principal: principal(claims)}, nil
}

func (a *nodeAuthorizer) denied(subject string, target *authorization.CallTarget) authorization.Result {
	a.log.Info("Temporal call denied", "subject", subject, "api", target.APIName, "namespace", target.Namespace)
	return deny
}

// nodeMay is the list of what a node's activity worker calls.
func (a *nodeAuthorizer) nodeMay(node string, target *authorization.CallTarget) bool {
	if !strings.HasPrefix(target.APIName, workflowServicePrefix) {
		return false
	}
	switch req := target.Request.(type) {
	case *workflowservice.GetClusterInfoRequest:
		// Server version and capabilities: what every SDK client asks first.
		return true
	case *workflowservice.DescribeNamespaceRequest:
		return req.GetNamespace() == a.namespace
	case *workflowservice.PollActivityTaskQueueRequest:
		return req.GetNamespace() == a.namespace && req.GetTaskQueue().GetName() == workflows.NodeTaskQueue(node)
	case *workflowservice.RespondActivityTaskCompletedRequest:
		return req.GetNamespace() == a.namespace && a.activityToken(req.GetTaskToken())
	case *workflowservice.RespondActivityTaskFailedRequest:
		return req.GetNamespace() == a.namespace && a.activityToken(req.GetTaskToken())
	case *workflowservice.RespondActivityTaskCanceledRequest:
		return req.GetNamespace() == a.namespace && a.activityToken(req.GetTaskToken())
	case *workflowservice.RecordActivityTaskHeartbeatRequest:
		return req.GetNamespace() == a.namespace && a.activityToken(req.GetTaskToken())
	case *workflowservice.RecordWorkerHeartbeatRequest:
		// The worker's own status, shown in worker listings.
		if req.GetNamespace() != a.namespace {
			return false
		}
		for _, h := range req.GetWorkerHeartbeat() {
			if h.GetTaskQueue() != workflows.NodeTaskQueue(node) {
				return false
			}
		}
		return true
	case *workflowservice.ShutdownWorkerRequest:
		// A worker says goodbye on stop; an activity worker has no sticky
		// queue to hand back, and another worker's is not its to drop.
		return req.GetNamespace() == a.namespace && req.GetStickyTaskQueue() == "" &&
			(req.GetWorkerHeartbeat() == nil || req.GetWorkerHeartbeat().GetTaskQueue() == workflows.NodeTaskQueue(node))
	}
	return false
}

// activityToken accepts the task token of an activity task. Temporal's
// task token does not name the task queue, so the queue cannot be checked
// here; what keeps a node to its own tasks is that a token must name the
// run ID of the workflow (a UUID with 74 random bits; with an empty one
// the server would pick the current run) and a node learns run IDs only
// from the tasks it polled on its own queue, as it may not list, describe
// or read the history of workflows.
func (a *nodeAuthorizer) activityToken(token []byte) bool {
	t, err := a.tokens.Deserialize(token)
	if err != nil {
		return false
	}
	return t.GetRunId() != "" && t.GetWorkflowId() != "" && t.GetActivityId() != ""
}

// principal names the caller in the server's records of the call.
func principal(c *authorization.Claims) *commonpb.Principal {
	return &commonpb.Principal{Type: c.AuthType, Name: c.Subject}
}
