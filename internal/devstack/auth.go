package devstack

import (
	"context"
	"crypto/x509/pkix"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/server/common/authorization"
	"go.temporal.io/server/common/tasktoken"

	"github.com/zonewright/zonewright/internal/auth"
	"github.com/zonewright/zonewright/internal/pki"
	"github.com/zonewright/zonewright/workflows/taskqueue"
)

// Identities in client certificates of the cluster CA: the API's own
// (internal/auth), so a certificate means the same to both.
const (
	// NodeOrg is the organisation of node certificates, whose common name
	// is NodePrefix + the node's name.
	NodeOrg    = pki.NodesOrg
	NodePrefix = pki.NodeCNPrefix
	// ControlPlaneName is the common name of the control plane's own
	// client certificate.
	ControlPlaneName = pki.ControlPlaneCN
	// AdminOrg is the organisation of operators' certificates (the
	// Temporal CLI, the Web UI) and of the server's own system worker.
	AdminOrg = pki.ClusterAdminsOrg
)

// NodeSubject is the certificate subject of node name.
func NodeSubject(name string) (commonName string, orgs []string) {
	return NodePrefix + name, []string{NodeOrg}
}

const (
	workflowServicePrefix = "/temporal.api.workflowservice.v1.WorkflowService/"
)

// nodeClaim marks the claims of a node identity (Claims.Extensions).
type nodeClaim struct{ name, serial string }

// claimMapper turns the verified client certificate's subject into claims:
// the control plane and operators are system admins, a node is a node
// claim with no role (the authorizer decides what it may call), anyone
// else gets nothing.
type claimMapper struct{}

func (claimMapper) GetClaims(ai *authorization.AuthInfo) (*authorization.Claims, error) {
	if ai == nil || ai.TLSSubject == nil {
		return &authorization.Claims{}, nil
	}
	c := claimsOf(*ai.TLSSubject)
	if node, ok := c.Extensions.(nodeClaim); ok && ai.TLSConnection != nil && len(ai.TLSConnection.State.PeerCertificates) > 0 {
		node.serial = auth.CertSerial(ai.TLSConnection.State.PeerCertificates[0])
		c.Extensions = node
	}
	return c, nil
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
	// queueOf finds the task queue of a workflow run's pending activity
	// (activityQueues.of).
	queueOf func(ctx context.Context, namespace, workflowID, runID, activityID string, scheduled int64) (string, error)
	// revoked says whether a node certificate was revoked; nil: none is.
	revoked func(ctx context.Context, serial string) (bool, error)
	log     *slog.Logger

	mu sync.Mutex
	// answers are the database's last answers, by certificate serial.
	answers map[string]revocation
}

// revocation is an answer about one certificate: revoked, or not revoked
// as of at.
type revocation struct {
	revoked bool
	at      time.Time
}

// revocationFresh is how long a certificate found not revoked is taken as
// still not revoked: a node's calls (every poll, answer and heartbeat of
// its activities) ask the database at most once in it, and a revocation
// reaches the node's calls within it.
const revocationFresh = time.Second

// maxCheckedCerts bounds the answers kept; past it they are dropped.
const maxCheckedCerts = 10000

var (
	allow = authorization.Result{Decision: authorization.DecisionAllow}
	deny  = authorization.Result{Decision: authorization.DecisionDeny}
)

func (a *nodeAuthorizer) Authorize(ctx context.Context, claims *authorization.Claims, target *authorization.CallTarget) (authorization.Result, error) {
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
	if !ok || a.isRevoked(ctx, node) || !a.nodeMay(ctx, node.name, target) {
		return a.denied(claims.Subject, target), nil
	}
	return authorization.Result{Decision: authorization.DecisionAllow, Principal: principal(claims)}, nil
}

// revocationWait bounds how long a call waits for the database to answer
// whether its certificate was revoked; the caller's own deadline, usually
// shorter, ends the wait first.
const revocationWait = 30 * time.Second

// isRevoked: the node's certificate was revoked with its Node, or cannot
// be checked (denied rather than let through). A database that does not
// answer (a restart) is asked again until the caller's deadline: a denial
// is PermissionDenied, which the SDK does not retry, so a node's answer
// to a finished task would be dropped and the task would wait out its
// whole StartToClose. An answer is kept: not revoked for revocationFresh,
// revoked for good (a revoked serial is never valid again).
func (a *nodeAuthorizer) isRevoked(ctx context.Context, node nodeClaim) bool {
	if a.revoked == nil {
		return false
	}
	a.mu.Lock()
	known, ok := a.answers[node.serial]
	a.mu.Unlock()
	if ok && (known.revoked || time.Since(known.at) < revocationFresh) {
		return known.revoked
	}
	ctx, cancel := context.WithTimeout(ctx, revocationWait)
	defer cancel()
	for wait := 50 * time.Millisecond; ; wait = min(2*wait, time.Second) {
		asked := time.Now()
		revoked, err := a.revoked(ctx, node.serial)
		if err == nil {
			a.remember(node.serial, revoked, asked)
			return revoked
		}
		select {
		case <-ctx.Done():
			a.log.Warn("Temporal call denied: cannot check the node's certificate", "node", node.name, "error", err)
			return true
		case <-time.After(wait):
		}
	}
}

// remember keeps an answer about serial, asked for at asked.
func (a *nodeAuthorizer) remember(serial string, revoked bool, asked time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.answers == nil || len(a.answers) >= maxCheckedCerts {
		a.answers = map[string]revocation{}
	}
	if known := a.answers[serial]; known.revoked || asked.Before(known.at) {
		return // revoked for good, or a newer answer is kept
	}
	a.answers[serial] = revocation{revoked, asked}
}

func (a *nodeAuthorizer) denied(subject string, target *authorization.CallTarget) authorization.Result {
	a.log.Info("Temporal call denied", "subject", subject, "api", target.APIName, "namespace", target.Namespace)
	return deny
}

// nodeMay is the list of what a node's activity worker calls.
func (a *nodeAuthorizer) nodeMay(ctx context.Context, node string, target *authorization.CallTarget) bool {
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
		return req.GetNamespace() == a.namespace && req.GetTaskQueue().GetName() == taskqueue.Node(node)
	case *workflowservice.RespondActivityTaskCompletedRequest:
		return req.GetNamespace() == a.namespace && a.activityToken(ctx, node, req.GetTaskToken())
	case *workflowservice.RespondActivityTaskFailedRequest:
		return req.GetNamespace() == a.namespace && a.activityToken(ctx, node, req.GetTaskToken())
	case *workflowservice.RespondActivityTaskCanceledRequest:
		return req.GetNamespace() == a.namespace && a.activityToken(ctx, node, req.GetTaskToken())
	case *workflowservice.RecordActivityTaskHeartbeatRequest:
		return req.GetNamespace() == a.namespace && a.activityToken(ctx, node, req.GetTaskToken())
	case *workflowservice.RecordWorkerHeartbeatRequest:
		// The worker's own status, shown in worker listings.
		if req.GetNamespace() != a.namespace {
			return false
		}
		for _, h := range req.GetWorkerHeartbeat() {
			if h.GetTaskQueue() != taskqueue.Node(node) {
				return false
			}
		}
		return true
	case *workflowservice.ShutdownWorkerRequest:
		// A worker says goodbye on stop; an activity worker has no sticky
		// queue to hand back, and another worker's is not its to drop.
		return req.GetNamespace() == a.namespace && req.GetStickyTaskQueue() == "" &&
			(req.GetWorkerHeartbeat() == nil || req.GetWorkerHeartbeat().GetTaskQueue() == taskqueue.Node(node))
	}
	return false
}

// activityToken accepts the task token of an activity on node's queue.
// A token names the workflow run and the activity but not the queue, and
// a node that learns a run ID (image pulls share theirs) can forge the
// rest, which are counters: so the activity's queue is looked up. Without
// a run ID the server would pick the current run: refused as well.
func (a *nodeAuthorizer) activityToken(ctx context.Context, node string, token []byte) bool {
	t, err := a.tokens.Deserialize(token)
	if err != nil || t.GetRunId() == "" || t.GetWorkflowId() == "" || t.GetActivityId() == "" {
		return false
	}
	queue, err := a.queueOf(ctx, a.namespace, t.GetWorkflowId(), t.GetRunId(), t.GetActivityId(), t.GetScheduledEventId())
	if err != nil {
		a.log.Warn("Temporal call denied: no task queue for the task token", "node", node,
			"workflow", t.GetWorkflowId(), "activity", t.GetActivityId(), "error", err)
		return false
	}
	return queue == taskqueue.Node(node)
}

// activityQueues finds the task queue of a pending activity by asking the
// frontend as the server's own admin. An activity keeps its queue, so
// answers are kept (per run and scheduling event, up to a bound).
type activityQueues struct {
	dial func(context.Context) (client.Client, error)

	mu     sync.Mutex
	client client.Client
	known  map[activityKey]string
}

type activityKey struct {
	runID     string
	scheduled int64
}

// maxKnownQueues bounds the kept answers; past it they are dropped at once.
const maxKnownQueues = 10000

func (q *activityQueues) of(ctx context.Context, namespace, workflowID, runID, activityID string, scheduled int64) (string, error) {
	key := activityKey{runID, scheduled}
	q.mu.Lock()
	queue, ok := q.known[key]
	c := q.client
	q.mu.Unlock()
	if ok {
		return queue, nil
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if c == nil {
		var err error
		if c, err = q.dial(ctx); err != nil {
			return "", err
		}
		q.mu.Lock()
		if q.client == nil {
			q.client = c
		} else {
			c.Close()
			c = q.client
		}
		q.mu.Unlock()
	}
	d, err := c.WorkflowService().DescribeWorkflowExecution(ctx, &workflowservice.DescribeWorkflowExecutionRequest{
		Namespace: namespace, Execution: &commonpb.WorkflowExecution{WorkflowId: workflowID, RunId: runID}})
	if err != nil {
		return "", err
	}
	for _, p := range d.GetPendingActivities() {
		if p.GetActivityId() == activityID {
			queue = p.GetActivityOptions().GetTaskQueue().GetName()
		}
	}
	if queue == "" {
		return "", errors.New("no such pending activity")
	}
	q.mu.Lock()
	if len(q.known) >= maxKnownQueues {
		q.known = nil
	}
	if q.known == nil {
		q.known = map[activityKey]string{}
	}
	q.known[key] = queue
	q.mu.Unlock()
	return queue, nil
}

func (q *activityQueues) close() {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.client != nil {
		q.client.Close()
		q.client = nil
	}
}

// principal names the caller in the server's records of the call.
func principal(c *authorization.Claims) *commonpb.Principal {
	return &commonpb.Principal{Type: c.AuthType, Name: c.Subject}
}
