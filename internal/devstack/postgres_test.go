package devstack_test

import (
	"context"
	"crypto/tls"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"github.com/zonewright/zonewright/internal/devstack"
	"github.com/zonewright/zonewright/internal/pgtest"
	"github.com/zonewright/zonewright/internal/pki"
	"github.com/zonewright/zonewright/internal/syncbuf"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// The production server: state in PostgreSQL (its database and the
// visibility one beside it, made and migrated at start), mutual TLS with
// the cluster CA, and what ran before a restart still there after it.
// (Make StartTemporal ignore DatabaseURL to see the workflow missing, or
// drop the migrate call in postgresStores to see the start fail.)
func TestTemporalOnPostgreSQLKeepsItsStateThere(t *testing.T) {
	dbURL := pgtest.NewDatabase(t)
	visibilityDB := databaseName(t, dbURL) + devstack.VisibilitySuffix
	t.Cleanup(func() { dropDatabase(t, dbURL, visibilityDB) }) // after the server stops
	ca, err := pki.LoadOrCreateCA(t.TempDir(), "zonewright CA")
	if err != nil {
		t.Fatal(err)
	}
	dataDir := t.TempDir()
	cfg := devstack.TemporalConfig{Address: freeAddr(t), DataDir: dataDir, DatabaseURL: dbURL, HistoryShards: 4, CA: ca,
		SearchAttributes: zwAttributes, Logger: slog.New(slog.NewTextHandler(&syncbuf.Buffer{}, nil))}
	first := start(t, cfg)
	if first.DatabasePath() != "" {
		t.Errorf("DatabasePath() = %q on PostgreSQL", first.DatabasePath())
	}
	versions := schemaVersions(t, dbURL, visibilityDB)
	if versions[0] == "" || versions[1] == "" || versions[0] == "0.0" {
		t.Fatalf("schema versions after the first start: %q", versions)
	}

	if _, err := mtlsDial(t, first, nil); err == nil {
		t.Error("a plaintext client connected")
	}
	other, err := pki.LoadOrCreateCA(t.TempDir(), "another CA")
	if err != nil {
		t.Fatal(err)
	}
	certPEM, keyPEM, err := other.ClientCert(devstack.ControlPlaneName, nil)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := tls.X509KeyPair(certPEM, keyPEM)
	if _, err := mtlsDial(t, first, &tls.Config{RootCAs: ca.Pool(), Certificates: []tls.Certificate{cert}}); err == nil {
		t.Error("a certificate from another CA was accepted")
	}

	c := dialAs(t, first, devstack.ControlPlaneName)
	const queue = "devstack-postgres"
	runWorker(t, c, queue)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: "pod/default/web", TaskQueue: queue}, tagPodWorkflow, "web")
	if err != nil {
		t.Fatalf("start workflow: %v", err)
	}
	if err := run.Get(ctx, nil); err != nil {
		t.Fatalf("workflow: %v", err)
	}
	if ids := waitForList(t, c, `ZwPod = "web"`, 1); len(ids) != 1 {
		t.Errorf("ZwPod = \"web\" lists %v", ids)
	}
	if err := first.Stop(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dataDir, devstack.DatabaseFile)); err == nil {
		t.Errorf("a SQLite database was made in %s", dataDir)
	}

	// Another data directory (another host of the same database): the
	// run is there, listed, and the schema was not migrated again.
	cfg.DataDir = t.TempDir()
	second := start(t, cfg)
	c = dialAs(t, second, devstack.ControlPlaneName)
	desc, err := c.DescribeWorkflowExecution(ctx, "pod/default/web", "")
	if err != nil {
		t.Fatalf("the workflow after a restart: %v", err)
	}
	if st := desc.GetWorkflowExecutionInfo().GetStatus(); st != enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED {
		t.Errorf("the workflow after a restart is %v", st)
	}
	if ids := waitForList(t, c, `ZwPod = "web"`, 1); len(ids) != 1 {
		t.Errorf("ZwPod = \"web\" after a restart lists %v", ids)
	}
	if again := schemaVersions(t, dbURL, visibilityDB); again != versions {
		t.Errorf("schema versions changed on a restart: %q, then %q", versions, again)
	}
}

func databaseName(t *testing.T, url string) string {
	t.Helper()
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	return cfg.Database
}

// schemaVersions are the schema versions the main and visibility
// databases record.
func schemaVersions(t *testing.T, url, visibilityDB string) [2]string {
	t.Helper()
	var out [2]string
	for i, db := range []string{databaseName(t, url), visibilityDB} {
		cfg, _ := pgx.ParseConfig(url)
		cfg.Database = db
		conn, err := pgx.ConnectConfig(context.Background(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		err = conn.QueryRow(context.Background(), "SELECT curr_version FROM schema_version WHERE version_partition = 0 AND db_name = $1", db).Scan(&out[i])
		conn.Close(context.Background())
		if err != nil {
			t.Fatalf("schema version of %s: %v", db, err)
		}
	}
	return out
}

func dropDatabase(t *testing.T, url, name string) {
	cfg, _ := pgx.ParseConfig(url)
	cfg.Database = "postgres"
	conn, err := pgx.ConnectConfig(context.Background(), cfg)
	if err != nil {
		return
	}
	defer conn.Close(context.Background())
	_, _ = conn.Exec(context.Background(), "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)")
}
