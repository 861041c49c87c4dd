package devcluster

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/zonewright/zonewright/internal/auth"
	"github.com/zonewright/zonewright/internal/controlplane"
	"github.com/zonewright/zonewright/internal/devstack"
)

// temporalProcess runs production's Temporal server, `zonewright
// temporal`: its state in the private PostgreSQL, with HistoryShards
// history shards (0: its default).
func (c *Cluster) temporalProcess(context.Context) error {
	addr, err := devstack.FreeAddr()
	if err != nil {
		return err
	}
	c.TemporalAddress = addr
	p := &Process{Name: "temporal", out: c.log, Log: filepath.Join(c.opts.Dir, "temporal.log"),
		args: []string{c.opts.Zonewright, "temporal", "--data-dir", filepath.Join(c.opts.Dir, "temporal"),
			"--temporal-database-url", c.postgres.URL("temporal"), "--database-url", c.DatabaseURL,
			"--state-dir", c.opts.Dir, "--address", addr, "--log-level", "warn"}}
	if c.opts.HistoryShards > 0 {
		p.args = append(p.args, "--history-shards", strconv.Itoa(c.opts.HistoryShards))
	}
	if c.opts.TemporalTaskWorkers > 0 {
		p.args = append(p.args, "--task-workers", strconv.Itoa(c.opts.TemporalTaskWorkers))
	}
	if err := p.start(); err != nil {
		return err
	}
	go p.supervise()
	c.TemporalProcess = p
	c.onStop(p.stop)
	return nil
}

// replicas runs the control plane as `zonewright serve` processes
// sharing the database, Temporal and the state directory (cluster CA,
// admin token), each with an API and a DNS address of its own, and waits
// until every one is ready.
func (c *Cluster) replicas(ctx context.Context) error {
	c.onStop(c.stopReplicas)
	for i := range c.opts.Replicas {
		p, err := c.startReplica(i)
		if err != nil {
			return err
		}
		// The first replica makes the admin token and the API
		// certificate the others then find in the state directory.
		if i == 0 {
			if err := WaitFor(ctx, 3*time.Minute, func() bool {
				_, err := os.Stat(controlplane.AdminTokenFile(c.opts.Dir))
				return err == nil && healthy(c.APIURLs[0])
			}); err != nil {
				return fmt.Errorf("%s did not come up (see %s): %w", p.Name, p.Log, err)
			}
		}
	}
	tok, err := os.ReadFile(controlplane.AdminTokenFile(c.opts.Dir))
	if err != nil {
		return err
	}
	c.AdminToken = strings.TrimSpace(string(tok))
	client := &http.Client{Timeout: 30 * time.Second, Transport: auth.Bearer{Token: c.AdminToken, Next: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: c.CA.Pool(), MinVersion: tls.VersionTLS12}}}}
	for _, u := range c.APIURLs {
		if err := WaitFor(ctx, 3*time.Minute, func() bool { return Ready(client, u) }); err != nil {
			return fmt.Errorf("API %s not ready: %w", u, err)
		}
	}
	return nil
}

// startReplica starts replica i, serve-<i+1>.
func (c *Cluster) startReplica(i int) (*Process, error) {
	listen, err := devstack.FreeAddr()
	if err != nil {
		return nil, err
	}
	dnsAddr, err := devstack.FreeAddr()
	if err != nil {
		return nil, err
	}
	name := fmt.Sprintf("serve-%d", i+1)
	args := append([]string{c.opts.Zonewright, "serve", "--database-url", c.DatabaseURL, "--listen", listen,
		"--state-dir", c.opts.Dir, "--temporal-address", c.TemporalAddress, "--temporal-namespace", devstack.DefaultNamespace,
		"--dns-listen", dnsAddr}, c.ControlPlaneCert.Args()...)
	p := &Process{Name: name, out: c.log, Log: filepath.Join(c.opts.Dir, name+".log"), args: append(args, c.opts.ServeArgs...)}
	if err := p.start(); err != nil {
		return nil, err
	}
	go p.supervise()
	c.Replicas = append(c.Replicas, p)
	c.APIURLs = append(c.APIURLs, "https://"+listen)
	c.DNSAddrs = append(c.DNSAddrs, dnsAddr)
	return p, nil
}

// stopReplicas stops the replicas side by side.
func (c *Cluster) stopReplicas() {
	var wg sync.WaitGroup
	for _, r := range c.Replicas {
		wg.Go(r.stop)
	}
	wg.Wait()
}

// healthy reports whether the API at base answers /healthz.
func healthy(base string) bool {
	c := &http.Client{Timeout: 3 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // only liveness is asked
	resp, err := c.Get(base + "/healthz")
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// Ready reports whether the API at base says, to client, that it is
// ready (database and Temporal reachable).
func Ready(client *http.Client, base string) bool {
	resp, err := client.Get(base + "/readyz")
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// WaitFor polls cond every half second until it holds or d has passed.
func WaitFor(ctx context.Context, d time.Duration, cond func() bool) error {
	deadline := time.Now().Add(d)
	for {
		if cond() {
			return nil
		}
		if time.Now().After(deadline) {
			return errors.New("timed out")
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// ProcessesNaming are the processes, other than this one, an argument of
// which contains s: those of a cluster name its directory.
func ProcessesNaming(s string) []int {
	var out []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid)); err == nil && strings.Contains(string(b), s) {
			out = append(out, pid)
		}
	}
	return out
}
