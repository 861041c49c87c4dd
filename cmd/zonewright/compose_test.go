package main

import (
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// docker-compose.yml cannot run here (no Docker engine), so this checks
// what would break it: services, ports, the build, and that every variable
// it sets is one serve reads.
func TestDockerComposeMatchesTheServeCommand(t *testing.T) {
	raw, err := os.ReadFile("../../docker-compose.yml")
	if err != nil {
		t.Fatal(err)
	}
	var compose struct {
		Services map[string]struct {
			Image       string            `json:"image"`
			Command     []string          `json:"command"`
			Environment map[string]string `json:"environment"`
			Ports       []string          `json:"ports"`
			Build       struct {
				Context    string `json:"context"`
				Dockerfile string `json:"dockerfile"`
				Target     string `json:"target"`
			} `json:"build"`
			DependsOn map[string]struct {
				Condition string `json:"condition"`
			} `json:"depends_on"`
		} `json:"services"`
	}
	if err := yaml.Unmarshal(raw, &compose); err != nil {
		t.Fatalf("docker-compose.yml does not parse: %v", err)
	}
	for _, name := range []string{"postgres", "temporal", "zonewright"} {
		if _, ok := compose.Services[name]; !ok {
			t.Fatalf("docker-compose.yml lacks service %q", name)
		}
	}
	zw := compose.Services["zonewright"]
	dockerfile, err := os.ReadFile(filepath.Join("../..", zw.Build.Context, zw.Build.Dockerfile))
	if err != nil {
		t.Fatalf("zonewright builds from %s/%s: %v", zw.Build.Context, zw.Build.Dockerfile, err)
	}
	if len(zw.Command) == 0 || zw.Command[0] != "serve" {
		t.Fatalf("zonewright service must run serve, runs %v", zw.Command)
	}
	tmp := compose.Services["temporal"]
	if len(tmp.Command) == 0 || tmp.Command[0] != "temporal" {
		t.Fatalf("temporal service must run zonewright temporal, runs %v", tmp.Command)
	}
	for _, svc := range []struct {
		name, target string
		flags        *flag.FlagSet
	}{{"zonewright", "serve", first(serveFlags())}, {"temporal", "temporal", first(temporalServerFlags())}} {
		c := compose.Services[svc.name]
		if c.Build.Target != svc.target || !strings.Contains(string(dockerfile), " AS "+svc.target+"\n") {
			t.Errorf("%s builds target %q, want the Dockerfile's %q stage", svc.name, c.Build.Target, svc.target)
		}
		envs := map[string]bool{}
		svc.flags.VisitAll(func(f *flag.Flag) {
			if i := strings.Index(f.Usage, "(env "); i >= 0 {
				envs[strings.TrimSuffix(f.Usage[i+5:], ")")] = true
			}
		})
		for k := range c.Environment {
			if !envs[k] {
				t.Errorf("docker-compose sets %s for %s, which does not read it (it reads %v)", k, svc.name, envs)
			}
		}
	}
	// Temporal on PostgreSQL with mutual TLS, serve presenting the
	// control plane's certificate the temporal service issues.
	if !strings.Contains(tmp.Environment["ZW_TEMPORAL_DATABASE_URL"], "@postgres:5432/") || !strings.Contains(tmp.Environment["ZW_DATABASE_URL"], "@postgres:5432/") {
		t.Errorf("temporal must keep its state in the postgres service and read zonewright's: %v", tmp.Environment)
	}
	if tmp.DependsOn["postgres"].Condition != "service_healthy" {
		t.Errorf("temporal should wait for a healthy postgres")
	}
	for _, k := range []string{"ZW_TEMPORAL_TLS_CERT", "ZW_TEMPORAL_TLS_KEY", "ZW_TEMPORAL_TLS_CA"} {
		if !strings.HasPrefix(zw.Environment[k], "/var/lib/zonewright/state/tls/") {
			t.Errorf("serve's %s = %q, want a file of the shared state volume", k, zw.Environment[k])
		}
	}
	if zw.Environment["ZW_TEMPORAL_TLS_SERVER_NAME"] == "" || !strings.Contains(tmp.Environment["ZW_TEMPORAL_TLS_SAN"], zw.Environment["ZW_TEMPORAL_TLS_SERVER_NAME"]) {
		t.Errorf("serve checks the name %q, which the temporal certificate must carry (ZW_TEMPORAL_TLS_SAN %q)",
			zw.Environment["ZW_TEMPORAL_TLS_SERVER_NAME"], tmp.Environment["ZW_TEMPORAL_TLS_SAN"])
	}
	if zw.Environment["ZW_TEMPORAL_INSECURE"] != "" {
		t.Errorf("serve reaches Temporal in plaintext")
	}
	for _, required := range []string{"ZW_DATABASE_URL", "ZW_TEMPORAL_ADDRESS", "ZW_LISTEN"} {
		if zw.Environment[required] == "" {
			t.Errorf("docker-compose does not set %s", required)
		}
	}
	if !strings.Contains(zw.Environment["ZW_DATABASE_URL"], "@postgres:5432/") || !strings.HasPrefix(zw.Environment["ZW_TEMPORAL_ADDRESS"], "temporal:7233") {
		t.Errorf("zonewright must reach the postgres and temporal services: %v", zw.Environment)
	}
	listenPort := zw.Environment["ZW_LISTEN"][strings.LastIndex(zw.Environment["ZW_LISTEN"], ":")+1:]
	if !slices.ContainsFunc(zw.Ports, func(p string) bool { return strings.HasSuffix(p, ":"+listenPort) }) {
		t.Errorf("zonewright listens on %s but publishes %v", listenPort, zw.Ports)
	}
	for _, want := range []string{"7233:7233", "8233:8233"} {
		if !slices.ContainsFunc(tmp.Ports, func(p string) bool { return strings.HasSuffix(p, want) }) {
			t.Errorf("temporal must publish %s (frontend and UI): %v", want, tmp.Ports)
		}
	}
	if zw.DependsOn["postgres"].Condition != "service_healthy" {
		t.Errorf("zonewright should wait for a healthy postgres")
	}
}

// The container image is built with -tags nodev and must stay free of the
// embedded Temporal server, like the illumos build.
func TestNodevBuildLeavesOutTheTemporalServer(t *testing.T) {
	out, err := exec.Command("go", "list", "-tags", "nodev", "-deps", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	if strings.Contains(string(out), "go.temporal.io/server") {
		t.Fatal("zonewright built with -tags nodev still imports go.temporal.io/server")
	}
	if !strings.Contains(string(out), "github.com/zonewright/zonewright/internal/controlplane") {
		t.Fatal("go list output does not look like zonewright's dependencies")
	}
}

func first[T, U any](t T, _ U) T { return t }
