package devstack

import (
	"context"
	"crypto/x509/pkix"
	"errors"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	taskqueuepb "go.temporal.io/api/taskqueue/v1"
	"go.temporal.io/api/workflowservice/v1"
	tokenspb "go.temporal.io/server/api/token/v1"
	"go.temporal.io/server/common/authorization"
	"go.temporal.io/server/common/tasktoken"

	"github.com/zonewright/zonewright/workflows/podcontract"
)

func TestClaimsFollowTheCertificateSubject(t *testing.T) {
	for _, c := range []struct {
		subject pkix.Name
		admin   bool
		node    string
	}{
		{pkix.Name{CommonName: ControlPlaneName}, true, ""},
		{pkix.Name{CommonName: "alice", Organization: []string{AdminOrg}}, true, ""},
		{pkix.Name{CommonName: "node:n1", Organization: []string{NodeOrg}}, false, "n1"},
		// A node name without the nodes' organisation, or the reverse, is
		// nobody.
		{pkix.Name{CommonName: "node:n1"}, false, ""},
		{pkix.Name{CommonName: "n1", Organization: []string{NodeOrg}}, false, ""},
		{pkix.Name{CommonName: "node:", Organization: []string{NodeOrg}}, false, ""},
		{pkix.Name{CommonName: "zonewright:control-plane-2"}, false, ""},
	} {
		claims := claimsOf(c.subject)
		node, _ := claims.Extensions.(nodeClaim)
		if admin := claims.System&authorization.RoleAdmin != 0; admin != c.admin || node.name != c.node {
			t.Errorf("%v: admin %t, node %q; want %t, %q", c.subject, admin, node.name, c.admin, c.node)
		}
	}
}

func TestANodeMayOnlyWorkItsOwnQueue(t *testing.T) {
	// Run 0190-run's activity is on n1's queue, 0190-control's on the
	// control plane's.
	queueOf := func(_ context.Context, _, _, runID, _ string, _ int64) (string, error) {
		return map[string]string{"0190-run": "node/n1", "0190-control": "control"}[runID], nil
	}
	a := &nodeAuthorizer{namespace: "default", tokens: tasktoken.NewSerializer(), queueOf: queueOf, log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	token := func(runID string) []byte {
		b, err := a.tokens.Serialize(&tokenspb.Task{NamespaceId: "ns-id", WorkflowId: "pod/default/web", RunId: runID, ActivityId: "5"})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	queue := func(name string) *taskqueuepb.TaskQueue { return &taskqueuepb.TaskQueue{Name: name} }
	const svc = "/temporal.api.workflowservice.v1.WorkflowService/"
	for _, c := range []struct {
		api   string
		req   any
		allow bool
	}{
		{"PollActivityTaskQueue", &workflowservice.PollActivityTaskQueueRequest{Namespace: "default", TaskQueue: queue("node/n1")}, true},
		{"PollActivityTaskQueue", &workflowservice.PollActivityTaskQueueRequest{Namespace: "default", TaskQueue: queue("node/n2")}, false},
		{"PollActivityTaskQueue", &workflowservice.PollActivityTaskQueueRequest{Namespace: "other", TaskQueue: queue("node/n1")}, false},
		{"PollWorkflowTaskQueue", &workflowservice.PollWorkflowTaskQueueRequest{Namespace: "default", TaskQueue: queue("node/n1")}, false},
		{"RespondActivityTaskCompleted", &workflowservice.RespondActivityTaskCompletedRequest{Namespace: "default", TaskToken: token("0190-run")}, true},
		{"RespondActivityTaskCompleted", &workflowservice.RespondActivityTaskCompletedRequest{Namespace: "default", TaskToken: token("")}, false},
		{"RespondActivityTaskCompleted", &workflowservice.RespondActivityTaskCompletedRequest{Namespace: "default", TaskToken: token("0190-control")}, false},
		{"RecordActivityTaskHeartbeat", &workflowservice.RecordActivityTaskHeartbeatRequest{Namespace: "default", TaskToken: token("0190-control")}, false},
		{"RespondActivityTaskCompleted", &workflowservice.RespondActivityTaskCompletedRequest{Namespace: "default", TaskToken: []byte("not a token")}, false},
		{"RespondActivityTaskFailed", &workflowservice.RespondActivityTaskFailedRequest{Namespace: "default", TaskToken: token("0190-run")}, true},
		{"RespondActivityTaskCanceled", &workflowservice.RespondActivityTaskCanceledRequest{Namespace: "default", TaskToken: token("")}, false},
		{"RecordActivityTaskHeartbeat", &workflowservice.RecordActivityTaskHeartbeatRequest{Namespace: "default", TaskToken: token("0190-run")}, true},
		{"RespondActivityTaskCompletedById", &workflowservice.RespondActivityTaskCompletedByIdRequest{Namespace: "default", WorkflowId: "pod/default/web", ActivityId: "5"}, false},
		{"DescribeNamespace", &workflowservice.DescribeNamespaceRequest{Namespace: "default"}, true},
		{"DescribeNamespace", &workflowservice.DescribeNamespaceRequest{Namespace: "other"}, false},
		{"ShutdownWorker", &workflowservice.ShutdownWorkerRequest{Namespace: "default"}, true},
		{"ShutdownWorker", &workflowservice.ShutdownWorkerRequest{Namespace: "default", StickyTaskQueue: "someone's sticky queue"}, false},
		{"SignalWorkflowExecution", &workflowservice.SignalWorkflowExecutionRequest{Namespace: "default",
			WorkflowExecution: &commonpb.WorkflowExecution{WorkflowId: "pod/default/web"}, SignalName: podcontract.SignalReport}, false},
		{"SignalWorkflowExecution", &workflowservice.SignalWorkflowExecutionRequest{Namespace: "default",
			WorkflowExecution: &commonpb.WorkflowExecution{WorkflowId: "pod/default/web"}, SignalName: "cancel"}, false},
		{"SignalWorkflowExecution", &workflowservice.SignalWorkflowExecutionRequest{Namespace: "default",
			WorkflowExecution: &commonpb.WorkflowExecution{WorkflowId: "image/base"}, SignalName: podcontract.SignalReport}, false},
		{"StartWorkflowExecution", &workflowservice.StartWorkflowExecutionRequest{Namespace: "default", WorkflowId: "pod/default/web"}, false},
		{"DescribeWorkflowExecution", &workflowservice.DescribeWorkflowExecutionRequest{Namespace: "default"}, false},
		{"ListWorkflowExecutions", &workflowservice.ListWorkflowExecutionsRequest{Namespace: "default"}, false},
		{"GetWorkflowExecutionHistory", &workflowservice.GetWorkflowExecutionHistoryRequest{Namespace: "default"}, false},
	} {
		claims := claimsOf(pkix.Name{CommonName: "node:n1", Organization: []string{NodeOrg}})
		res, err := a.Authorize(t.Context(), claims, &authorization.CallTarget{APIName: svc + c.api, Request: c.req})
		if err != nil {
			t.Fatal(err)
		}
		if got := res.Decision == authorization.DecisionAllow; got != c.allow {
			t.Errorf("n1 calls %s %v: allowed %t, want %t", c.api, c.req, got, c.allow)
		}
	}
	// Nobody, and a certificate naming no one, may call nothing but the
	// health check.
	for _, claims := range []*authorization.Claims{nil, claimsOf(pkix.Name{CommonName: "stranger"})} {
		res, _ := a.Authorize(t.Context(), claims, &authorization.CallTarget{APIName: svc + "DescribeNamespace",
			Request: &workflowservice.DescribeNamespaceRequest{Namespace: "default"}})
		if res.Decision != authorization.DecisionDeny {
			t.Errorf("%+v describes the namespace", claims)
		}
	}
}

// A node's call made while the database restarts waits for the revocation
// check instead of being denied: a denial is PermissionDenied, which the
// SDK does not retry, so the node's answer to a finished task was dropped
// and the task's workflow waited out its whole StartToClose (a pod being
// deleted stayed two minutes with its VNIC and dataset, zwchaos --seed 3).
func TestANodesCallWaitsForTheRevocationCheck(t *testing.T) {
	var mu sync.Mutex
	failing := 0 // lookups the database fails before it answers again
	a := &nodeAuthorizer{namespace: "default", tokens: tasktoken.NewSerializer(), log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		revoked: func(_ context.Context, serial string) (bool, error) {
			mu.Lock()
			defer mu.Unlock()
			if failing > 0 {
				failing--
				return false, errors.New("dial tcp: connect: connection refused")
			}
			return serial == "revoked", nil
		}}
	down := func(n int) {
		mu.Lock()
		failing = n
		mu.Unlock()
	}
	allowed := func(ctx context.Context, serial string) bool {
		claims := &authorization.Claims{Subject: "node:n1", Extensions: nodeClaim{name: "n1", serial: serial}}
		res, err := a.Authorize(ctx, claims, &authorization.CallTarget{APIName: workflowServicePrefix + "DescribeNamespace",
			Request: &workflowservice.DescribeNamespaceRequest{Namespace: "default"}})
		if err != nil {
			t.Fatal(err)
		}
		return res.Decision == authorization.DecisionAllow
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	down(3)
	if !allowed(ctx, "good") {
		t.Error("a node whose certificate is good was denied while the database restarted")
	}
	down(3)
	if allowed(ctx, "revoked") {
		t.Error("a revoked certificate was let through once the database answered")
	}
	// A database that stays away: a certificate found good within the
	// second is still good; one not asked about is denied when the
	// caller gives up.
	if !allowed(ctx, "fresh") {
		t.Error("a good certificate was denied")
	}
	down(1 << 30)
	if !allowed(ctx, "fresh") {
		t.Error("a certificate found good just now was denied")
	}
	short, cancelShort := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancelShort()
	start := time.Now()
	if allowed(short, "unchecked") {
		t.Error("a call was let through without an answer from the database")
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("the check outlived its caller: %s", took)
	}
}
