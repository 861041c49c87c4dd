package devstack_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	taskqueuepb "go.temporal.io/api/taskqueue/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
	tokenspb "go.temporal.io/server/api/token/v1"
	"go.temporal.io/server/common/tasktoken"

	"github.com/zonewright/zonewright/internal/auth"
	"github.com/zonewright/zonewright/internal/devstack"
	"github.com/zonewright/zonewright/internal/pki"

	"github.com/zonewright/zonewright/internal/syncbuf"
)

// hostWorkflow runs hostActivity on the given node's task queue, as the
// pod lifecycle runs host activities.
func hostWorkflow(ctx workflow.Context, queue string) (string, error) {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{TaskQueue: queue,
		StartToCloseTimeout: 20 * time.Second, HeartbeatTimeout: 10 * time.Second})
	var out string
	err := workflow.ExecuteActivity(ctx, "HostActivity", queue).Get(ctx, &out)
	return out, err
}

// waitWorkflow waits for one signal.
func waitWorkflow(ctx workflow.Context) (string, error) {
	var got string
	workflow.GetSignalChannel(ctx, "report").Receive(ctx, &got)
	return got, nil
}

func hostActivity(ctx context.Context, queue string) (string, error) {
	activity.RecordHeartbeat(ctx, "working")
	return "done on " + queue, nil
}

func mtlsDial(t *testing.T, srv *devstack.Temporal, tlsConf *tls.Config) (client.Client, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	c, err := client.DialContext(ctx, client.Options{HostPort: srv.Address(), Namespace: srv.Namespace(), Logger: quietLogger{},
		ConnectionOptions: client.ConnectionOptions{TLS: tlsConf}})
	if err == nil {
		t.Cleanup(c.Close)
	}
	return c, err
}

func dialAs(t *testing.T, srv *devstack.Temporal, cn string, orgs ...string) client.Client {
	t.Helper()
	conf, err := srv.ClientTLS(cn, orgs...)
	if err != nil {
		t.Fatal(err)
	}
	c, err := mtlsDial(t, srv, conf)
	if err != nil {
		t.Fatalf("dial as %s: %v", cn, err)
	}
	return c
}

func startMutualTLS(t *testing.T) (*devstack.Temporal, *pki.CA, *syncbuf.Buffer) {
	t.Helper()
	ca, err := pki.LoadOrCreateCA(t.TempDir(), "zonewright CA")
	if err != nil {
		t.Fatal(err)
	}
	logs := &syncbuf.Buffer{}
	srv := devstack.StartTestTemporal(t, func(cfg *devstack.TemporalConfig) {
		cfg.CA = ca
		cfg.Logger = slog.New(slog.NewTextHandler(logs, nil))
	})
	return srv, ca, logs
}

func isPermissionDenied(err error) bool {
	var pd *serviceerror.PermissionDenied
	return errors.As(err, &pd)
}

func TestMutualTLSKeepsANodeToItsOwnTaskQueue(t *testing.T) {
	srv, _, logs := startMutualTLS(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	control := dialAs(t, srv, devstack.ControlPlaneName)
	cw := worker.New(control, "control", worker.Options{})
	cw.RegisterWorkflow(hostWorkflow)
	cw.RegisterWorkflow(waitWorkflow)
	if err := cw.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cw.Stop)

	cn, orgs := devstack.NodeSubject("n1")
	n1 := dialAs(t, srv, cn, orgs...)
	nw := worker.New(n1, "node/n1", worker.Options{DisableWorkflowWorker: true})
	nw.RegisterActivityWithOptions(hostActivity, activity.RegisterOptions{Name: "HostActivity"})
	if err := nw.Start(); err != nil {
		t.Fatalf("node n1 starts its worker on node/n1: %v", err)
	}

	// End to end: the control plane's workflow runs an activity on node/n1,
	// which n1 polls, heartbeats and completes.
	run, err := control.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: "host-n1", TaskQueue: "control"}, hostWorkflow, "node/n1")
	if err != nil {
		t.Fatal(err)
	}
	var out string
	if err := run.Get(ctx, &out); err != nil || out != "done on node/n1" {
		t.Fatalf("workflow on node/n1: %q, %v", out, err)
	}
	nw.Stop()
	// Everything the node's worker called, from start to stop, was allowed.
	if strings.Contains(logs.String(), "denied") {
		t.Errorf("calls of n1's worker were denied:\n%s", logs.String())
	}

	// n1 may not poll another node's queue.
	_, err = n1.WorkflowService().PollActivityTaskQueue(ctx, &workflowservice.PollActivityTaskQueueRequest{
		Namespace: srv.Namespace(), TaskQueue: &taskqueuepb.TaskQueue{Name: "node/n2"}, Identity: "n1"})
	if !isPermissionDenied(err) {
		t.Errorf("n1 polls node/n2: %v, want PermissionDenied", err)
	}
	// Nor start, list or describe workflows.
	if _, err := n1.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: "by-n1", TaskQueue: "control"}, waitWorkflow); !isPermissionDenied(err) {
		t.Errorf("n1 starts a workflow: %v, want PermissionDenied", err)
	}
	if _, err := n1.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Namespace: srv.Namespace()}); !isPermissionDenied(err) {
		t.Errorf("n1 lists workflows: %v, want PermissionDenied", err)
	}
	if _, err := n1.DescribeWorkflowExecution(ctx, "host-n1", ""); !isPermissionDenied(err) {
		t.Errorf("n1 describes a workflow: %v, want PermissionDenied", err)
	}
	// A task token without a run ID would let the server pick the current
	// run of any workflow: refused.
	if err := n1.CompleteActivityByID(ctx, srv.Namespace(), "host-n1", "", "1", "forged", nil); !isPermissionDenied(err) {
		t.Errorf("n1 completes an activity by ID: %v, want PermissionDenied", err)
	}
	// It may signal no workflow, not even a pod's lifecycle: its
	// supervisor reports through the API, which checks the pod is bound
	// to it.
	if _, err := control.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: "pod/default/web", TaskQueue: "control"}, waitWorkflow); err != nil {
		t.Fatal(err)
	}
	if err := n1.SignalWorkflow(ctx, "pod/default/web", "", "report", "running"); !isPermissionDenied(err) {
		t.Errorf("n1 signals a pod lifecycle: %v, want PermissionDenied", err)
	}
	if err := n1.SignalWorkflow(ctx, "host-n1", "", "report", "x"); !isPermissionDenied(err) {
		t.Errorf("n1 signals another workflow: %v, want PermissionDenied", err)
	}
	if !strings.Contains(logs.String(), "Temporal call denied") {
		t.Errorf("denied calls are not logged:\n%s", logs.String())
	}
}

func TestMutualTLSAdmitsOnlyTheClusterCAsClients(t *testing.T) {
	srv, ca, _ := startMutualTLS(t)

	if _, err := mtlsDial(t, srv, nil); err == nil {
		t.Error("a plaintext client connected")
	}
	if _, err := mtlsDial(t, srv, &tls.Config{RootCAs: ca.Pool()}); err == nil {
		t.Error("a client without a certificate connected")
	}
	other, err := pki.LoadOrCreateCA(t.TempDir(), "another CA")
	if err != nil {
		t.Fatal(err)
	}
	certPEM, keyPEM, err := other.ClientCert(devstack.ControlPlaneName, nil)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := mtlsDial(t, srv, &tls.Config{RootCAs: ca.Pool(), Certificates: []tls.Certificate{cert}}); err == nil {
		t.Error("a certificate from another CA was accepted")
	}

	// A certificate of the CA naming no known identity gets nothing.
	stranger := dialAs(t, srv, "stranger")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := stranger.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Namespace: srv.Namespace()}); !isPermissionDenied(err) {
		t.Errorf("an unknown identity lists workflows: %v, want PermissionDenied", err)
	}

	// An operator lists and signals.
	control := dialAs(t, srv, devstack.ControlPlaneName)
	cw := worker.New(control, "control", worker.Options{})
	cw.RegisterWorkflow(waitWorkflow)
	if err := cw.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cw.Stop)
	run, err := control.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: "job/default/wait", TaskQueue: "control"}, waitWorkflow)
	if err != nil {
		t.Fatal(err)
	}
	operator := dialAs(t, srv, "alice", devstack.AdminOrg)
	if ids := waitForList(t, operator, "", 1); len(ids) != 1 || ids[0] != "job/default/wait" {
		t.Fatalf("operator lists workflows: %v", ids)
	}
	if err := operator.SignalWorkflow(ctx, "job/default/wait", "", "report", "from alice"); err != nil {
		t.Fatalf("operator signals: %v", err)
	}
	var got string
	if err := run.Get(ctx, &got); err != nil || got != "from alice" {
		t.Errorf("signalled workflow returned %q, %v", got, err)
	}

	// The Web UI reaches the server with an operator certificate.
	dir := t.TempDir()
	certPEM, keyPEM, err = ca.ClientCert("ui", []string{devstack.AdminOrg})
	if err != nil {
		t.Fatal(err)
	}
	files := devstack.ClientTLSFiles{CertFile: filepath.Join(dir, "ui.crt"), KeyFile: filepath.Join(dir, "ui.key"),
		CAFile: filepath.Join(dir, "ca.crt"), ServerName: "localhost"}
	for path, data := range map[string][]byte{files.CertFile: certPEM, files.KeyFile: keyPEM, files.CAFile: ca.CertPEM} {
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	ui, err := devstack.StartUI(devstack.UIConfig{Address: freeAddr(t), TemporalAddress: srv.Address(), TLS: &files})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ui.Stop() })
	status, _, body := get(t, ui.URL()+"/api/v1/namespaces/default/workflows")
	if status != 200 || !strings.Contains(body, "job/default/wait") {
		t.Errorf("UI lists workflows: %d %.300s", status, body)
	}
}

// A node that learns the run ID of a workflow (image pulls share theirs)
// can forge the task token of any of its activities: the other fields are
// counters. The token names no task queue, so the authorizer looks the
// activity's queue up: n2 may not answer n1's task, nor a node the
// control plane's. The same forged token from n1 is accepted, so what
// refuses n2 is the rule, not the forgery. Make activityToken return true
// once the token decodes to see n2's answer land.
func TestANodeAnswersOnlyTheTasksOfItsOwnQueue(t *testing.T) {
	srv, _, _ := startMutualTLS(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	control := dialAs(t, srv, devstack.ControlPlaneName)
	cw := worker.New(control, "control", worker.Options{})
	cw.RegisterWorkflow(hostWorkflow)
	release := make(chan struct{})
	blocking := func(ctx context.Context, queue string) (string, error) {
		select {
		case <-release:
		case <-ctx.Done():
		}
		return "done on " + queue, nil
	}
	cw.RegisterActivityWithOptions(blocking, activity.RegisterOptions{Name: "HostActivity"})
	if err := cw.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cw.Stop)
	defer close(release)

	cn, orgs := devstack.NodeSubject("n1")
	n1 := dialAs(t, srv, cn, orgs...)
	nw := worker.New(n1, "node/n1", worker.Options{DisableWorkflowWorker: true})
	nw.RegisterActivityWithOptions(blocking, activity.RegisterOptions{Name: "HostActivity"})
	if err := nw.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nw.Stop)
	cn, orgs = devstack.NodeSubject("n2")
	n2 := dialAs(t, srv, cn, orgs...)

	ns, err := control.WorkflowService().DescribeNamespace(ctx, &workflowservice.DescribeNamespaceRequest{Namespace: srv.Namespace()})
	if err != nil {
		t.Fatal(err)
	}
	// forge builds the token of the workflow's running activity from its
	// run ID, reading the counters from its history.
	forge := func(id, runID string) []byte {
		t.Helper()
		var task *tokenspb.Task
		for started := false; !started; {
			if ctx.Err() != nil {
				t.Fatalf("%s: its activity never started", id)
			}
			time.Sleep(50 * time.Millisecond)
			// A started activity's event is written when it ends: wait
			// for the attempt to show in the pending activity instead.
			d, err := control.DescribeWorkflowExecution(ctx, id, runID)
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range d.GetPendingActivities() {
				started = p.GetState() == enumspb.PENDING_ACTIVITY_STATE_STARTED
			}
		}
		iter := control.GetWorkflowHistory(ctx, id, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		for iter.HasNext() {
			e, err := iter.Next()
			if err != nil {
				t.Fatal(err)
			}
			if a := e.GetActivityTaskScheduledEventAttributes(); a != nil {
				task = &tokenspb.Task{NamespaceId: ns.GetNamespaceInfo().GetId(), WorkflowId: id, RunId: runID,
					ScheduledEventId: e.GetEventId(), Attempt: 1, ActivityId: a.GetActivityId(),
					ActivityType: a.GetActivityType().GetName(), WorkflowType: "hostWorkflow"}
			}
		}
		token, err := tasktoken.NewSerializer().Serialize(task)
		if err != nil {
			t.Fatal(err)
		}
		return token
	}
	answer := func(c client.Client, token []byte, from string) error {
		result, err := converter.GetDefaultDataConverter().ToPayloads("forged by " + from)
		if err != nil {
			t.Fatal(err)
		}
		_, err = c.WorkflowService().RespondActivityTaskCompleted(ctx, &workflowservice.RespondActivityTaskCompletedRequest{
			Namespace: srv.Namespace(), TaskToken: token, Result: result, Identity: from})
		return err
	}

	onN1, err := control.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: "pull/n1", TaskQueue: "control"}, hostWorkflow, "node/n1")
	if err != nil {
		t.Fatal(err)
	}
	token := forge(onN1.GetID(), onN1.GetRunID())
	if err := answer(n2, token, "n2"); !isPermissionDenied(err) {
		t.Errorf("n2 answers n1's task with a forged token: %v, want PermissionDenied", err)
	}
	if err := answer(n1, token, "n1"); err != nil {
		t.Fatalf("n1 answers its own task with the same token: %v", err)
	}
	var out string
	if err := onN1.Get(ctx, &out); err != nil || out != "forged by n1" {
		t.Errorf("n1's task answered %q, %v; want n1's answer", out, err)
	}

	onControl, err := control.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: "control-step", TaskQueue: "control"}, hostWorkflow, "control")
	if err != nil {
		t.Fatal(err)
	}
	token = forge(onControl.GetID(), onControl.GetRunID())
	if err := answer(n1, token, "n1"); !isPermissionDenied(err) {
		t.Errorf("n1 answers a control plane task with a forged token: %v, want PermissionDenied", err)
	}
	if _, err := n1.WorkflowService().RecordActivityTaskHeartbeat(ctx, &workflowservice.RecordActivityTaskHeartbeatRequest{
		Namespace: srv.Namespace(), TaskToken: token, Identity: "n1"}); !isPermissionDenied(err) {
		t.Errorf("n1 heartbeats a control plane task with a forged token: %v, want PermissionDenied", err)
	}
}

// A node whose certificate was revoked (its Node deleted) is denied every
// call within a second, though the certificate is still within its dates
// and of the cluster CA; the database is asked about a certificate at most
// once a second, not at every call. Drop isRevoked from Authorize to see
// n1 still answered; drop the fresh answer's return in isRevoked to see
// every call ask.
func TestARevokedNodeCertificateIsDenied(t *testing.T) {
	ca, err := pki.LoadOrCreateCA(t.TempDir(), "zonewright CA")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	revoked, asked := map[string]bool{}, 0
	srv := devstack.StartTestTemporal(t, func(cfg *devstack.TemporalConfig) {
		cfg.CA = ca
		cfg.NodeCertRevoked = func(_ context.Context, serial string) (bool, error) {
			mu.Lock()
			defer mu.Unlock()
			asked++
			return revoked[serial], nil
		}
	})
	cn, orgs := devstack.NodeSubject("n1")
	conf, err := srv.ClientTLS(cn, orgs...)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(conf.Certificates[0].Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	n1, err := mtlsDial(t, srv, conf)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	describe := func() error {
		_, err := n1.WorkflowService().DescribeNamespace(ctx, &workflowservice.DescribeNamespaceRequest{Namespace: srv.Namespace()})
		return err
	}
	began := time.Now()
	for range 20 {
		if err := describe(); err != nil {
			t.Fatalf("n1 before its certificate is revoked: %v", err)
		}
	}
	mu.Lock()
	most := 1 + int(time.Since(began)/time.Second)
	if asked > most {
		t.Errorf("20 calls in %s asked the database %d times, want at most %d", time.Since(began).Round(time.Millisecond), asked, most)
	}
	revoked[auth.CertSerial(leaf)] = true
	mu.Unlock()
	revokedAt := time.Now()
	for err := describe(); !isPermissionDenied(err); err = describe() {
		if err != nil || time.Since(revokedAt) > 3*time.Second {
			t.Fatalf("n1 %s after its certificate was revoked: %v, want PermissionDenied within a second (3 s allowed)", time.Since(revokedAt).Round(time.Millisecond), err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := describe(); !isPermissionDenied(err) {
		t.Errorf("n1 with a revoked certificate, again: %v, want PermissionDenied", err)
	}
}
