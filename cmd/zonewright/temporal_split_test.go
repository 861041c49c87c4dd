//go:build !illumos && !nodev

package main

import (
	"context"
	"crypto/tls"
	"fmt"
	"maps"
	"math/rand/v2"
	"net"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
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

// --membership-port fixes the ports a process's services gossip on, so
// a firewall can let them through: its history and matching services
// take the port given and the next, as the membership table (Temporal's
// record of who gossips where) shows. (Drop the MembershipPort
// assignment of the operator's ports in devstack's serverConfig to see
// ports drawn at random instead.)
func TestTemporalMembershipPortIsTheOperators(t *testing.T) {
	t.Parallel()
	bin := buildBinary(t)
	dbURL := pgtest.NewDatabase(t)
	stateDir, dataDir := t.TempDir(), t.TempDir()
	port := freeConsecutivePorts(t)
	startTemporalCommand(t, bin, "history,matching", dbURL, "--services", "history,matching", "--membership-port", strconv.Itoa(port),
		"--address", freeAddr(t), "--state-dir", stateDir, "--data-dir", dataDir, "--history-shards", "4", "--log-level", "warn")

	pool, err := pgxpool.New(t.Context(), dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	// Temporal's roles: 2 history, 3 matching.
	want := map[int]int{2: port, 3: port + 1}
	got := map[int]int{}
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(time.Second) {
		rows, err := pool.Query(t.Context(), "SELECT role, rpc_port FROM cluster_membership")
		if err == nil {
			for rows.Next() {
				var role, p int
				if rows.Scan(&role, &p) == nil {
					got[role] = p
				}
			}
			rows.Close()
		}
		if len(got) >= len(want) || time.Now().After(deadline) {
			break
		}
	}
	if !maps.Equal(got, want) {
		t.Errorf("membership ports by role: %v, want %v", got, want)
	}
}

// freeConsecutivePorts is the first of two free loopback ports in a row
// in the membership range (20000 to 32767).
func freeConsecutivePorts(t *testing.T) int {
	t.Helper()
	for range 1000 {
		p := 20000 + rand.IntN(12000)
		free := true
		for _, q := range []int{p, p + 1} {
			l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(q)))
			if err != nil {
				free = false
				break
			}
			l.Close()
		}
		if free {
			return p
		}
	}
	t.Fatal("no two free loopback ports in a row from 20000 to 32000 in 1000 tries")
	return 0
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
// without PostgreSQL, a service Temporal does not have, membership ports
// past what Temporal's membership table keeps, or for a whole server.
func TestTemporalServicesAreChecked(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--services", "history"}, "--temporal-database-url"},
		{[]string{"--services", "history,histroy", "--temporal-database-url", "postgres://u@127.0.0.1:1/t"}, `service "histroy"`},
		{[]string{"--services", "matching", "--broadcast-address", "0.0.0.0", "--temporal-database-url", "postgres://u@127.0.0.1:1/t"}, "broadcast address"},
		{[]string{"--services", "history,matching", "--membership-port", "32767", "--temporal-database-url", "postgres://u@127.0.0.1:1/t"}, "membership port 32767"},
		{[]string{"--services", "history", "--membership-port", "-1", "--temporal-database-url", "postgres://u@127.0.0.1:1/t"}, "membership port -1"},
		{[]string{"--membership-port", "7000"}, "membership port is for a server split"},
	} {
		err := temporalServer(t.Context(), append(c.args, "--state-dir", dir, "--data-dir", dir, "--address", freeAddr(t)))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v; want a refusal naming %s", c.args, err, c.want)
		}
	}
}
