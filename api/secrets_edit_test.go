package api_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/zonewright/zonewright/api"
	"github.com/zonewright/zonewright/internal/auth"
	"github.com/zonewright/zonewright/internal/encryption"
	"github.com/zonewright/zonewright/internal/imagemap"
	"github.com/zonewright/zonewright/internal/model"
	"github.com/zonewright/zonewright/internal/pgtest"
	"github.com/zonewright/zonewright/internal/store"
)

// newSecretsAuthzAPI is newAuthzAPI with an encryption key, so that the
// secrets routes answer with the real roles.
func newSecretsAuthzAPI(t *testing.T) *authzAPI {
	t.Helper()
	url := pgtest.NewDatabase(t)
	ctx := context.Background()
	if err := store.MigrateUp(ctx, url, slog.New(slog.DiscardHandler)); err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	key, err := encryption.NewKey(bytes.Repeat([]byte{5}, encryption.KeySize))
	if err != nil {
		t.Fatal(err)
	}
	a := &authzAPI{t: t, st: st, audit: &bytes.Buffer{}, tokens: &auth.Tokens{Pool: st.Pool()}}
	srv := api.New(api.Config{Store: st, EncryptionKey: key, AuditLog: a.audit, Logger: slog.New(slog.DiscardHandler),
		ImageMap: &imagemap.Map{}, WatchKeepalive: 50 * time.Millisecond})
	t.Cleanup(srv.CloseWatches)
	a.h = validated(t, srv.Handler())
	a.admin = issue(t, st, auth.RoleClusterAdmin, "")
	return a
}

// An edit token sees a secret's keys without their values; writing back
// what it read (to change a label, add a key or drop one) must not wipe
// the values it could not see. Remove the keepRedactedValues call in
// api/secrets.go updateSecret to see this fail.
func TestAnEditRoundTripKeepsTheSecretsValues(t *testing.T) {
	a := newSecretsAuthzAPI(t)
	a.asAdmin("POST", "/api/v1/namespaces", `{"metadata":{"name":"a"}}`, 201)
	a.asAdmin("POST", "/api/v1/namespaces/a/secrets", `{"metadata":{"name":"db"},"stringData":{"password":"s3cret","user":"admin","old":"x"}}`, 201)
	a.asAdmin("POST", "/api/v1/namespaces/a/secrets", `{"metadata":{"name":"fixed"},"immutable":true,"stringData":{"k":"v"}}`, 201)
	edit := caller{bearer: issue(t, a.st, auth.RoleEdit, "a")}

	get := func(who caller, name string) model.Secret {
		t.Helper()
		code, b := a.do(who, "GET", "/api/v1/namespaces/a/secrets/"+name, "")
		if code != 200 {
			t.Fatalf("GET %s: %d %s", name, code, b)
		}
		var sec model.Secret
		if err := json.Unmarshal([]byte(b), &sec); err != nil {
			t.Fatal(err)
		}
		return sec
	}
	sec := get(edit, "db")
	if len(sec.Data["password"]) != 0 || len(sec.Data) != 3 {
		t.Fatalf("edit reads the keys without values: %v", sec.Data)
	}
	sec.Metadata.Labels = map[string]string{"tier": "db"}
	delete(sec.Data, "old")
	sec.Data["host"] = []byte("db.local")
	body, _ := json.Marshal(sec)
	if code, b := a.do(edit, "PUT", "/api/v1/namespaces/a/secrets/db", string(body)); code != 200 || strings.Contains(b, base64.StdEncoding.EncodeToString([]byte("s3cret"))) {
		t.Fatalf("edit PUT of what it read: %d %s", code, b)
	}
	got := get(caller{bearer: a.admin}, "db")
	if string(got.Data["password"]) != "s3cret" || string(got.Data["user"]) != "admin" || string(got.Data["host"]) != "db.local" ||
		len(got.Data) != 3 || got.Metadata.Labels["tier"] != "db" {
		t.Fatalf("after edit's round trip: data %q labels %v (want password and user kept, host added, old removed)", got.Data, got.Metadata.Labels)
	}

	// An immutable secret takes the same round trip for its labels.
	fixed := get(edit, "fixed")
	fixed.Metadata.Labels = map[string]string{"seen": "yes"}
	body, _ = json.Marshal(fixed)
	if code, b := a.do(edit, "PUT", "/api/v1/namespaces/a/secrets/fixed", string(body)); code != 200 {
		t.Fatalf("edit PUT of an immutable secret it read: %d %s", code, b)
	}
	if got := get(caller{bearer: a.admin}, "fixed"); string(got.Data["k"]) != "v" {
		t.Fatalf("immutable secret after edit's round trip: %q", got.Data)
	}
}

// The audit log records who read secrets, not only who wrote them, with
// the address each request came from and an exec's command line. Make
// auditedRead return false, or drop SourceIP or Command from record, to
// see this fail.
func TestAuditLogRecordsSecretReadsAddressesAndExecCommands(t *testing.T) {
	a := newSecretsAuthzAPI(t)
	a.asAdmin("POST", "/api/v1/namespaces", `{"metadata":{"name":"a"}}`, 201)
	a.asAdmin("POST", "/api/v1/namespaces/a/secrets", `{"metadata":{"name":"db"},"stringData":{"password":"s3cret"}}`, 201)
	a.audit.Reset()
	a.asAdmin("GET", "/api/v1/namespaces/a/secrets/db", "", 200)
	a.asAdmin("GET", "/api/v1/namespaces/a/pods", "", 200)
	a.do(caller{bearer: a.admin}, "POST", "/api/v1/namespaces/a/pods/web/exec?command=cat&command=/etc/shadow&stdout=true", "")

	type entry struct {
		Identity, Verb, Resource, Name, SourceIP string
		Command                                  []string
	}
	var got []entry
	for _, l := range strings.Split(strings.TrimSpace(a.audit.String()), "\n") {
		var e entry
		if err := json.Unmarshal([]byte(l), &e); err != nil {
			t.Fatalf("audit line %q: %v", l, err)
		}
		got = append(got, e)
	}
	if len(got) != 2 {
		t.Fatalf("want 2 audit lines (the secret's read, the exec), not the pods' list:\n%s", a.audit)
	}
	if g := got[0]; g.Verb != "get" || g.Resource != "secrets" || g.Name != "db" || g.SourceIP != "192.0.2.1" {
		t.Errorf("secret read: %+v", g)
	}
	if g := got[1]; g.Resource != "pods/exec" || !slices.Equal(g.Command, []string{"cat", "/etc/shadow"}) || g.SourceIP == "" {
		t.Errorf("exec: %+v", g)
	}
	if strings.Contains(a.audit.String(), "s3cret") {
		t.Errorf("the audit log holds a secret's value:\n%s", a.audit)
	}
}
