package e2e_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"go.temporal.io/api/workflowservice/v1"
	tclient "go.temporal.io/sdk/client"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/zonewright/zonewright/internal/controlplane"
	"github.com/zonewright/zonewright/internal/encryption"
	"github.com/zonewright/zonewright/internal/model"

	"github.com/zonewright/zonewright/internal/syncbuf"
)

// A secret's value reaches its container's environment on the node and
// nowhere else: not a workflow history, not a log of the control plane
// or an agent, not the events, and not PostgreSQL in plain text.
func TestSecretValuesReachTheContainerAndNoHistoryLogOrEvent(t *testing.T) {
	t.Parallel()
	key, err := encryption.NewKey([]byte(strings.Repeat("k", encryption.KeySize)))
	if err != nil {
		t.Fatal(err)
	}
	var cpLog syncbuf.Buffer
	c := newClusterWith(t, 1, func(cfg *controlplane.Config) {
		cfg.EncryptionKey = key
		cfg.Logger = slog.New(slog.NewJSONHandler(&cpLog, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}, "--log-level", "debug")

	marker := "zw-marker-" + rand.Text()
	markers := append([]string{marker}, base64Forms(marker)...)
	if code, b := c.do("POST", "/api/v1/namespaces/default/secrets", map[string]any{
		"metadata": map[string]any{"name": "db"}, "stringData": map[string]string{"password": marker}}); code != 201 {
		t.Fatalf("create secret: %d %s", code, b)
	}
	// The container writes what it was given into its zone's root.
	c.createPod(`{"metadata":{"name":"reader"},"spec":{"containers":[{"name":"app","image":"base",
	  "command":["sh","-c","printf '%s|%s' \"$PASSWORD\" \"${OPTIONAL-unset}\" > secret-env.txt; exec sleep 3600"],
	  "env":[{"name":"PASSWORD","valueFrom":{"secretKeyRef":{"name":"db","key":"password"}}},
	         {"name":"OPTIONAL","valueFrom":{"secretKeyRef":{"name":"absent","key":"k","optional":true}}}]}]}}`)
	c.waitPhase("reader", model.PodRunning, false, 2*time.Minute)
	var got string
	c.eventually(30*time.Second, "the container's environment file", func() bool {
		got = readFileNamed(t, c.nodes.Nodes[0].Root, "secret-env.txt")
		return got != ""
	})
	if got != marker+"|unset" {
		t.Fatalf("the container saw %q, want %q", got, marker+"|unset")
	}
	// An exec into the container sees the value too, and leaves it in
	// none of the places scanned below.
	if out, errOut, code := c.podExec(t, "/api/v1/namespaces/default/pods/reader", nil, "sh", "-c", `printf '%s|%s' "$PASSWORD" "${OPTIONAL-unset}"`); code != 0 || out != marker+"|unset" {
		t.Fatalf("exec saw %q (exit %d, %s), want %q", out, code, errOut, marker+"|unset")
	}

	// A pod naming a secret that is not there yet does not start; the
	// node tries again and starts it once the secret is created.
	c.createPod(`{"metadata":{"name":"early"},"spec":{"containers":[{"name":"app","image":"base","command":["sleep","3600"],
	  "env":[{"name":"TOKEN","valueFrom":{"secretKeyRef":{"name":"late","key":"token"}}}]}]}}`)
	agentLog := filepath.Join(filepath.Dir(c.nodes.Nodes[0].Root), "agent.log")
	c.eventually(time.Minute, "the node to report the missing secret", func() bool {
		b, _ := os.ReadFile(agentLog)
		return strings.Contains(string(b), "CreateContainerConfigError") && strings.Contains(string(b), `secret \"late\" not found`)
	})
	if p, _ := c.pod("early"); p.Status.Phase == model.PodRunning {
		t.Fatalf("a pod whose secret is missing runs: %+v", p.Status)
	}
	if code, b := c.do("POST", "/api/v1/namespaces/default/secrets", map[string]any{
		"metadata": map[string]any{"name": "late"}, "stringData": map[string]string{"token": marker}}); code != 201 {
		t.Fatalf("create the late secret: %d %s", code, b)
	}
	c.waitPhase("early", model.PodRunning, false, 2*time.Minute)

	// Now look everywhere the value must not be.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	histories := scanHistories(ctx, t, c.temporal, markers)
	if histories < 2 {
		t.Fatalf("scanned %d workflow histories; want at least the two pods'", histories)
	}
	for _, m := range markers {
		if strings.Contains(cpLog.String(), m) {
			t.Errorf("the control plane's log holds the secret value (%q)", m)
		}
		for _, n := range c.nodes.Nodes {
			b, err := os.ReadFile(filepath.Join(filepath.Dir(n.Root), "agent.log"))
			if err != nil {
				t.Fatal(err)
			}
			if bytes.Contains(b, []byte(m)) {
				t.Errorf("agent %s's log holds the secret value (%q)", n.Name, m)
			}
		}
	}
	if cpLog.String() == "" {
		t.Error("the control plane logged nothing: the log scan looked at nothing")
	}
	conn, err := pgx.Connect(ctx, c.url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	rows := 0
	for _, table := range []string{"events", "pods", "secrets", "changes"} {
		r, err := conn.Query(ctx, "SELECT row_to_json(t)::text FROM "+table+" t")
		if err != nil {
			t.Fatal(err)
		}
		for r.Next() {
			var text string
			if err := r.Scan(&text); err != nil {
				t.Fatal(err)
			}
			rows++
			for _, m := range markers {
				if strings.Contains(text, m) {
					t.Errorf("table %s holds the secret value (%q): %.200s", table, m, text)
				}
			}
		}
		r.Close()
	}
	if rows == 0 {
		t.Error("the database scan read no rows")
	}
	t.Logf("scanned %d workflow histories, %d bytes of control plane log, %d database rows", histories, len(cpLog.String()), rows)

	// A control plane without the key refuses to start over these secrets.
	start := c.stopControlPlane()
	noKey := c.cpConfig
	noKey.EncryptionKey = nil
	if cp, err := controlplane.Start(context.Background(), noKey); err == nil || !strings.Contains(err.Error(), "--encryption-key-file") {
		if cp != nil {
			_ = cp.Stop(ctx)
		}
		t.Fatalf("a control plane without the encryption key started over stored secrets: %v", err)
	}
	start()
}

// scanHistories reads the history of every workflow run in the
// namespace and fails t for each that holds one of the markers; it
// returns how many it read.
func scanHistories(ctx context.Context, t *testing.T, tc tclient.Client, markers []string) int {
	t.Helper()
	n := 0
	var token []byte
	for {
		resp, err := tc.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{PageSize: 100, NextPageToken: token})
		if err != nil {
			t.Fatalf("list workflows: %v", err)
		}
		for _, ex := range resp.Executions {
			id, run := ex.Execution.WorkflowId, ex.Execution.RunId
			it := tc.GetWorkflowHistory(ctx, id, run, false, 0)
			var all bytes.Buffer
			for it.HasNext() {
				ev, err := it.Next()
				if err != nil {
					t.Fatalf("history of %s: %v", id, err)
				}
				b, err := protojson.Marshal(ev)
				if err != nil {
					t.Fatal(err)
				}
				all.Write(b)
			}
			n++
			for _, m := range markers {
				if bytes.Contains(all.Bytes(), []byte(m)) {
					t.Errorf("workflow %s (run %s) holds the secret value (%q) in its history", id, run, m)
				}
			}
		}
		token = resp.NextPageToken
		if len(token) == 0 {
			return n
		}
	}
}

// readFileNamed finds a file by name under root and returns its content
// ("" when there is none yet).
func readFileNamed(t *testing.T, root, name string) string {
	t.Helper()
	var content string
	_ = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || d.Name() != name {
			return nil
		}
		b, err := os.ReadFile(path)
		if err == nil {
			content = string(b)
		}
		return fs.SkipAll
	})
	return content
}

// base64Forms are the runs of base64 that marker's bytes become wherever
// they sit in a longer base64 text (a Temporal payload's data, a secret's
// data): one per alignment, without the characters that depend on the
// bytes around it.
func base64Forms(marker string) []string {
	var forms []string
	for k := 0; k < 3; k++ {
		enc := base64.StdEncoding.EncodeToString(append(make([]byte, k), marker...))
		start := 0
		if k > 0 {
			start = 4
		}
		forms = append(forms, enc[start:4*((k+len(marker))/3)])
	}
	return forms
}
