//go:build !illumos && !nodev

package main

import (
	"context"
	"crypto/tls"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/zonewright/zonewright/internal/pgtest"
	"github.com/zonewright/zonewright/internal/pki"
)

// `zonewright temporal --services …` runs the server's services as
// separate processes on one PostgreSQL database, as an operator scales a
// Temporal cluster: a frontend, two history processes, a matching and a
// worker, started at once. Workflows run through them; with both history
// processes killed no workflow starts (the frontend holds no history of
// its own), and a history process started again serves them all. (Make
// newServer keep its static hosts for a split server to see the
// processes never find each other.)
func TestTemporalServicesRunAsSeparateProcesses(t *testing.T) {
	t.Parallel()
	bin := buildBinary(t)
	dbURL := pgtest.NewDatabase(t)
	stateDir, dataDir := t.TempDir(), t.TempDir()
	addr := freeAddr(t)
	start := func(services string) *exec.Cmd {
		return startTemporalCommand(t, bin, services, dbURL, "--services", services, "--address", addr, "--state-dir", stateDir,
			"--data-dir", dataDir, "--history-shards", "4", "--log-level", "warn").cmd
	}
	start("frontend")
	history := []*exec.Cmd{start("history"), start("history")}
	start("matching")
	start("worker")

	c := dialOperator(t, addr, filepath.Join(stateDir, "tls"))
	const queue = "split-server"
	w := worker.New(c, queue, worker.Options{})
	w.RegisterWorkflowWithOptions(func(ctx workflow.Context, n int) (int, error) {
		ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: time.Minute})
		var out int
		err := workflow.ExecuteActivity(ctx, "double", n).Get(ctx, &out)
		return out, err
	}, workflow.RegisterOptions{Name: "twice"})
	w.RegisterActivityWithOptions(func(_ context.Context, n int) (int, error) { return 2 * n, nil }, activity.RegisterOptions{Name: "double"})
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	run := func(id string, within time.Duration) (int, error) {
		ctx, cancel := context.WithTimeout(context.Background(), within)
		defer cancel()
		r, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: queue}, "twice", 21)
		if err != nil {
			return 0, err
		}
		var out int
		return out, r.Get(ctx, &out)
	}
	// The cluster forms within its join time (30 s) and a little.
	var out int
	var err error
	for i := range 12 {
		if out, err = run(fmt.Sprintf("first-%d", i), 10*time.Second); err == nil {
			break
		}
	}
	if err != nil || out != 42 {
		t.Fatalf("a workflow on the split server: %d, %v", out, err)
	}

	for _, h := range history {
		h.Process.Kill()
		h.Wait()
	}
	if out, err := run("without-history", 10*time.Second); err == nil {
		t.Fatalf("a workflow ran (%d) with every history process killed: the frontend serves history itself", out)
	}
	start("history")
	for i := range 12 {
		if out, err = run(fmt.Sprintf("again-%d", i), 10*time.Second); err == nil {
			break
		}
	}
	if err != nil || out != 42 {
		t.Fatalf("a workflow after history started again: %d, %v", out, err)
	}
}

// dialOperator connects to the Temporal frontend at addr with the operator
// certificate `zonewright temporal` issued into tlsDir.
func dialOperator(t *testing.T, addr, tlsDir string) client.Client {
	t.Helper()
	var pair tls.Certificate
	deadline := time.Now().Add(time.Minute)
	for {
		var err error
		if pair, err = tls.LoadX509KeyPair(filepath.Join(tlsDir, "temporal-operator.crt"), filepath.Join(tlsDir, "temporal-operator.key")); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the operator's certificate: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	ca, err := pki.PoolFromFile(filepath.Join(tlsDir, "ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	opts := client.Options{HostPort: addr, Namespace: "default",
		ConnectionOptions: client.ConnectionOptions{TLS: &tls.Config{RootCAs: ca, ServerName: "localhost", Certificates: []tls.Certificate{pair}}}}
	for {
		c, err := client.Dial(opts)
		if err == nil {
			t.Cleanup(c.Close)
			return c
		}
		if time.Now().After(deadline) {
			t.Fatalf("dial the frontend: %v", err)
		}
		time.Sleep(time.Second)
	}
}

// A split server's flags are checked before anything starts: a part
// without PostgreSQL, or a service Temporal does not have.
func TestTemporalServicesAreChecked(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--services", "history"}, "--temporal-database-url"},
		{[]string{"--services", "history,histroy", "--temporal-database-url", "postgres://u@127.0.0.1:1/t"}, `service "histroy"`},
		{[]string{"--services", "matching", "--broadcast-address", "0.0.0.0", "--temporal-database-url", "postgres://u@127.0.0.1:1/t"}, "broadcast address"},
	} {
		err := temporalServer(t.Context(), append(c.args, "--state-dir", dir, "--data-dir", dir, "--address", freeAddr(t)))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v; want a refusal naming %s", c.args, err, c.want)
		}
	}
}
