package zwclient

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const twoContexts = `
clusters:
- name: prod
  server: https://prod.example:8443
  certificateAuthority: /etc/zw/ca.crt
- name: dev
  server: https://127.0.0.1:8443
  certificateAuthorityData: PEM
users:
- name: admin
  token: zw_admin
- name: viewer
  token: zw_viewer
contexts:
- name: prod
  cluster: prod
  user: viewer
  namespace: shop
- name: dev
  cluster: dev
  user: admin
currentContext: prod
`

func writeConfig(t *testing.T, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestConfigPathPrefersTheFlagThenTheEnvironment(t *testing.T) {
	env := func(v string) func(string) string {
		return func(k string) string {
			if k == EnvConfig {
				return v
			}
			return ""
		}
	}
	if got := ConfigPath("/flag", env("/env")); got != "/flag" {
		t.Errorf("flag: %s", got)
	}
	if got := ConfigPath("", env("/env")); got != "/env" {
		t.Errorf("env: %s", got)
	}
	if got := ConfigPath("", env("")); !strings.HasSuffix(got, filepath.Join("zonewright", "config.yaml")) {
		t.Errorf("default: %s", got)
	}
}

func TestResolve(t *testing.T) {
	cfg, err := LoadConfig(writeConfig(t, twoContexts))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		o    Overrides
		want Settings
	}{
		{"the current context", Overrides{},
			Settings{Context: "prod", Server: "https://prod.example:8443", CertificateAuthority: "/etc/zw/ca.crt", Token: "zw_viewer", Namespace: "shop"}},
		{"--context, with no namespace, is in default", Overrides{Context: "dev"},
			Settings{Context: "dev", Server: "https://127.0.0.1:8443", CertificateAuthorityData: "PEM", Token: "zw_admin", Namespace: "default"}},
		{"flags win over the context", Overrides{Server: "https://other:1", Token: "zw_t", CertificateAuthority: "/ca", Namespace: "ns"},
			Settings{Context: "prod", Server: "https://other:1", CertificateAuthority: "/ca", Token: "zw_t", Namespace: "ns"}},
		{"--certificate-authority replaces the context's data", Overrides{Context: "dev", CertificateAuthority: "/ca"},
			Settings{Context: "dev", Server: "https://127.0.0.1:8443", CertificateAuthority: "/ca", Token: "zw_admin", Namespace: "default"}},
	} {
		got, err := cfg.Resolve(c.o)
		if err != nil || got != c.want {
			t.Errorf("%s: %+v, %v; want %+v", c.name, got, err, c.want)
		}
	}
	if _, err := cfg.Resolve(Overrides{Context: "nope"}); err == nil || !strings.Contains(err.Error(), `context "nope"`) {
		t.Errorf("a missing context: %v", err)
	}
}

func TestResolveWithoutAConfigFileNeedsAServer(t *testing.T) {
	cfg, err := LoadConfig(filepath.Join(t.TempDir(), "absent.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cfg.Resolve(Overrides{}); err == nil || !strings.Contains(err.Error(), "--server") {
		t.Errorf("no server: %v", err)
	}
	s, err := cfg.Resolve(Overrides{Server: "https://x:1", Token: "t"})
	if err != nil || s.Server != "https://x:1" || s.Token != "t" || s.Namespace != "default" {
		t.Errorf("flags alone: %+v %v", s, err)
	}
}

func TestLoadConfigRefusesUnknownFields(t *testing.T) {
	if _, err := LoadConfig(writeConfig(t, "current-context: dev\n")); err == nil {
		t.Error("a misspelt field was accepted")
	}
}

func TestSingleContextSavesPrivatelyAndResolves(t *testing.T) {
	p := filepath.Join(t.TempDir(), "sub", "zwctl.yaml")
	if err := SingleContext("dev", "https://127.0.0.1:1", "/ca.crt", "zw_x", "default").Save(p); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(p); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("mode: %v %v", fi, err)
	}
	cfg, err := LoadConfig(p)
	if err != nil {
		t.Fatal(err)
	}
	s, err := cfg.Resolve(Overrides{})
	if err != nil || s != (Settings{Context: "dev", Server: "https://127.0.0.1:1", CertificateAuthority: "/ca.crt", Token: "zw_x", Namespace: "default"}) {
		t.Errorf("%+v %v", s, err)
	}
}

func TestLookupResourceByAnyName(t *testing.T) {
	for name, want := range map[string]string{"po": "pods", "Pod": "pods", "pods": "pods", "deploy": "deployments", "svc": "services",
		"pvc": "persistentvolumeclaims", "no": "nodes", "ns": "namespaces", "ep": "endpoints", "ev": "events", "vs": "volumesnapshots",
		"job": "jobs", "controllerrevision": "controllerrevisions", "img": "images", "secret": "secrets", "token": "tokens"} {
		r, err := LookupResource(name)
		if err != nil || r.Name != want {
			t.Errorf("%s: %s %v, want %s", name, r.Name, err, want)
		}
	}
	if _, err := LookupResource("widgets"); err == nil {
		t.Error("widgets found")
	}
	deploy, _ := LookupResource("deploy")
	if got := deploy.ObjectPath("shop", "web"); got != "/apis/apps/v1/namespaces/shop/deployments/web" {
		t.Errorf("deployment path %s", got)
	}
	ns, _ := LookupResource("ns")
	if got := ns.ObjectPath("", "shop"); got != "/api/v1/namespaces/shop" {
		t.Errorf("namespace path %s", got)
	}
	nodes, _ := LookupResource("nodes")
	if got := nodes.CollectionPath("shop"); got != "/api/v1/nodes" {
		t.Errorf("cluster-scoped path %s", got)
	}
}
