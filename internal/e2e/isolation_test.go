package e2e_test

import (
	"crypto/rand"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/zonewright/zonewright/internal/controlplane"
	"github.com/zonewright/zonewright/internal/encryption"
	"github.com/zonewright/zonewright/internal/model"
)

// A pod of one namespace cannot read the secret values another
// namespace's pod holds in its environment, even on the same node: its
// exec finds the other zone's processes in /proc but cannot read their
// environment. A zone's processes have a user of their own only when
// illumos-sim runs as root.
func TestPodCannotReadAnotherNamespacesSecretFromProc(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("zones are isolated only when illumos-sim runs as root: without it every zone's processes are the caller's")
	}
	t.Parallel()
	key, err := encryption.NewKey([]byte(strings.Repeat("k", encryption.KeySize)))
	if err != nil {
		t.Fatal(err)
	}
	c := newClusterWith(t, 1, func(cfg *controlplane.Config) { cfg.EncryptionKey = key })
	for _, ns := range []string{"bank", "mallory"} {
		if code, b := c.do("POST", "/api/v1/namespaces", map[string]any{"metadata": map[string]any{"name": ns}}); code != 201 {
			t.Fatalf("create namespace %s: %d %s", ns, code, b)
		}
	}
	marker := "zw-vault-" + rand.Text()
	if code, b := c.do("POST", "/api/v1/namespaces/bank/secrets", map[string]any{
		"metadata": map[string]any{"name": "vault"}, "stringData": map[string]string{"password": marker}}); code != 201 {
		t.Fatalf("create secret: %d %s", code, b)
	}
	for ns, body := range map[string]string{
		"bank": `{"metadata":{"name":"vault"},"spec":{"containers":[{"name":"app","image":"base","command":["sleep","3600"],
		  "env":[{"name":"VAULT_PASSWORD","valueFrom":{"secretKeyRef":{"name":"vault","key":"password"}}}]}]}}`,
		"mallory": `{"metadata":{"name":"snoop"},"spec":{"containers":[{"name":"app","image":"base","command":["sleep","3600"]}]}}`,
	} {
		if code, b := c.do("POST", "/api/v1/namespaces/"+ns+"/pods", body); code != 201 {
			t.Fatalf("create pod in %s: %d %s", ns, code, b)
		}
	}
	for ns, name := range map[string]string{"bank": "vault", "mallory": "snoop"} {
		c.eventually(2*time.Minute, ns+"/"+name+" running", func() bool {
			var p model.Pod
			return c.get("/api/v1/namespaces/"+ns+"/pods/"+name, &p) == 200 && p.Status.Phase == model.PodRunning
		})
	}

	// Every process whose environment names the secret's variable, and
	// what that environment holds: what a pod can learn of the others.
	const scan = `for f in /proc/[0-9]*/environ; do ` +
		`if grep -q -a VAULT_PASSWORD= "$f" 2>/dev/null; then echo "$f"; tr '\0' '\n' < "$f" 2>&1; fi; done; true`
	// The control: the secret's owner finds its own value this way.
	if out, errOut, code := c.podExec(t, "/api/v1/namespaces/bank/pods/vault", nil, "sh", "-c", scan); code != 0 || !strings.Contains(out, "VAULT_PASSWORD="+marker) {
		t.Fatalf("the vault pod cannot find its own secret in /proc (exit %d): %q %q", code, out, errOut)
	}
	out, errOut, code := c.podExec(t, "/api/v1/namespaces/mallory/pods/snoop", nil, "sh", "-c", scan)
	if code != 0 {
		t.Fatalf("scan from the other namespace: exit %d: %q %q", code, out, errOut)
	}
	if strings.Contains(out+errOut, marker) {
		t.Fatalf("a pod of namespace mallory read namespace bank's secret from /proc: %q", out)
	}
	// The value is there to be found: the vault's process holds it.
	if !procEnvironHolds("VAULT_PASSWORD=" + marker) {
		t.Fatal("no process on this machine holds the secret: the scan proved nothing")
	}
}

// procEnvironHolds reports whether a process's environment holds kv, as
// root sees /proc.
func procEnvironHolds(kv string) bool {
	dirs, _ := os.ReadDir("/proc")
	for _, d := range dirs {
		b, err := os.ReadFile("/proc/" + d.Name() + "/environ")
		if err != nil {
			continue
		}
		for _, v := range strings.Split(string(b), "\x00") {
			if v == kv {
				return true
			}
		}
	}
	return false
}
