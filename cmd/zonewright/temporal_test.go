//go:build !illumos && !nodev

package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/zonewright/zonewright/internal/pgtest"
	"github.com/zonewright/zonewright/internal/pki"
)

// `zonewright temporal` as docker-compose.yml runs it: state in
// PostgreSQL, the control plane's and an operator's certificates issued
// into the state directory (kept across a restart, so serve never reads
// a key of another pair), and the Web UI over HTTPS for the operator's
// certificate only.
func TestTheTemporalCommandServesAsComposeRunsIt(t *testing.T) {
	bin := buildBinary(t)
	dbURL := pgtest.NewDatabase(t)
	stateDir, dataDir := t.TempDir(), t.TempDir()
	addr, uiAddr := freeAddr(t), freeAddr(t)
	run := func() *exec.Cmd {
		p := startTemporalCommand(t, bin, "temporal", dbURL, "--address", addr, "--ui-address", uiAddr, "--state-dir", stateDir,
			"--data-dir", dataDir, "--history-shards", "2", "--tls-san", "temporal")
		if line := p.waitServing(t); strings.Contains(line, "password") || !strings.Contains(line, "ui=https://") {
			t.Errorf("banner: %s", line)
		}
		return p.cmd
	}
	stop := func(cmd *exec.Cmd) {
		cmd.Process.Signal(os.Interrupt)
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			cmd.Process.Kill()
			t.Error("zonewright temporal did not stop on SIGINT within 30s")
		}
	}
	first := run()
	tlsDir := filepath.Join(stateDir, "tls")
	cpCert, err := os.ReadFile(filepath.Join(tlsDir, "temporal-control-plane.crt"))
	if err != nil {
		t.Fatalf("the control plane's certificate: %v", err)
	}
	uiGet := func(cert string) (int, string, error) {
		ca, err := pki.PoolFromFile(filepath.Join(tlsDir, "ca.crt"))
		if err != nil {
			t.Fatal(err)
		}
		pair, err := tls.LoadX509KeyPair(filepath.Join(tlsDir, cert+".crt"), filepath.Join(tlsDir, cert+".key"))
		if err != nil {
			t.Fatal(err)
		}
		hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ca, ServerName: "temporal",
			Certificates: []tls.Certificate{pair}}}}
		resp, err := hc.Get("https://" + uiAddr + "/api/v1/namespaces")
		if err != nil {
			return 0, "", err
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b), nil
	}
	if code, body, err := uiGet("temporal-operator"); err != nil || code != 200 || !strings.Contains(body, `"default"`) {
		t.Errorf("the UI with the operator's certificate: %d %v %.200s", code, err, body)
	}
	stop(first)

	second := run()
	defer stop(second)
	again, err := os.ReadFile(filepath.Join(tlsDir, "temporal-control-plane.crt"))
	if err != nil || string(again) != string(cpCert) {
		t.Errorf("the control plane's certificate was issued again at a restart (%v)", err)
	}
	if code, body, err := uiGet("temporal-operator"); err != nil || code != 200 {
		t.Errorf("the UI after a restart: %d %v %.200s", code, err, body)
	}
}

// The history shards and the task workers are bounded, before anything
// starts. Without a bound the server starts, and the deadline ends it
// with an error that names no flag.
func TestTemporalFlagsAreBounded(t *testing.T) {
	dir := t.TempDir()
	for _, arg := range []string{"--history-shards -1", "--history-shards 99999", "--task-workers -1", "--task-workers 5000"} {
		ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
		err := temporalServer(ctx, append(strings.Fields(arg), "--state-dir", dir, "--data-dir", dir, "--address", freeAddr(t)))
		cancel()
		if err == nil || !strings.Contains(err.Error(), arg) {
			t.Errorf("%s: %v, want a refusal naming the flag", arg, err)
		}
	}
}

// temporalCommand is a `zonewright temporal` process of a test.
type temporalCommand struct {
	cmd     *exec.Cmd
	serving chan string // its "Temporal serving" line, or "exited:" and all it printed
}

// startTemporalCommand starts `zonewright temporal ARGS…` on the database
// dbURL (Temporal's and zonewright's), logs what it prints under name,
// and kills it when t ends.
func startTemporalCommand(t *testing.T, bin, name, dbURL string, args ...string) *temporalCommand {
	t.Helper()
	return startTemporalCommandWith(t, bin, name, []string{"ZW_TEMPORAL_DATABASE_URL=" + dbURL, "ZW_DATABASE_URL=" + dbURL}, args...)
}

// startTemporalCommandWith is startTemporalCommand with env added to
// this process's environment: the databases as an operator sets them.
func startTemporalCommandWith(t *testing.T, bin, name string, env []string, args ...string) *temporalCommand {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"temporal"}, args...)...)
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	p := &temporalCommand{cmd: cmd, serving: make(chan string, 1)}
	go func() {
		var seen strings.Builder
		served := false
		for lines := bufio.NewScanner(out); lines.Scan(); {
			t.Logf("%s: %s", name, lines.Text())
			seen.WriteString(lines.Text() + "\n")
			if !served && strings.Contains(lines.Text(), "Temporal serving") {
				served = true
				p.serving <- lines.Text()
			}
		}
		io.Copy(io.Discard, out)
		if !served {
			p.serving <- "exited:\n" + seen.String()
		}
	}()
	return p
}

// waitServing returns the process's "Temporal serving" line; it fails t
// if the process exits first or does not serve within 2 minutes.
func (p *temporalCommand) waitServing(t *testing.T) string {
	t.Helper()
	select {
	case line := <-p.serving:
		if strings.HasPrefix(line, "exited") {
			t.Fatalf("zonewright temporal %s", line)
		}
		return line
	case <-time.After(2 * time.Minute):
		p.cmd.Process.Kill()
		t.Fatal("zonewright temporal did not serve within 2 minutes")
		return ""
	}
}
