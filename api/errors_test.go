package api_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/zonewright/zonewright/internal/pgtest"
)

// internalWords are what the database, the driver and the network say;
// none of it may reach a client.
var internalWords = []string{"SQLSTATE", "relation", "duplicate key", "constraint", "Key (", "dial tcp", "connect:", "pgx", "rpc error", "127.0.0.1"}

func assertNoInternals(t *testing.T, what string, r response) {
	t.Helper()
	for _, w := range internalWords {
		if strings.Contains(string(r.body), w) {
			t.Fatalf("%s: the answer carries %q: %d %s", what, w, r.code, r.body)
		}
	}
}

func TestInternalFailuresAnswerWithoutTheirDetail(t *testing.T) {
	url := pgtest.NewDatabase(t)
	c := serveStore(t, url)

	// A duplicate the database refuses: 409, in the API's words.
	body := fmt.Sprintf(`{"metadata":{"name":"dup"},"spec":{"kind":"lx-tarball","source":"https://example.org/a.tar","sha256":%q}}`, digest)
	if r := c.json("POST", "/api/v1/images", body); r.code != http.StatusCreated {
		t.Fatalf("create: %d %s", r.code, r.body)
	}
	r := c.json("POST", "/api/v1/images", body)
	if r.code != http.StatusConflict || r.status().Reason != "AlreadyExists" {
		t.Fatalf("duplicate: %d %s", r.code, r.body)
	}
	assertNoInternals(t, "duplicate", r)

	// A failure the API has no name for: 500, and the SQL stays in the log.
	conn, err := pgx.Connect(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(context.Background(), `ALTER TABLE pods RENAME TO pods_gone`); err != nil {
		t.Fatal(err)
	}
	r = c.json("GET", "/api/v1/namespaces/default/pods", nil)
	if r.code != http.StatusInternalServerError || r.status().Reason != "InternalError" {
		t.Fatalf("a broken table: %d %s", r.code, r.body)
	}
	assertNoInternals(t, "broken table", r)
	r = c.json("POST", "/api/v1/namespaces/default/pods", fmt.Sprintf(podJSON, "web"))
	if r.code < 500 {
		t.Fatalf("create on a broken table: %d %s", r.code, r.body)
	}
	assertNoInternals(t, "create on a broken table", r)
}
