package main

import (
	"flag"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// composeService is what docker-compose.yml says of a service.
type composeService struct {
	Image       string            `json:"image"`
	Hostname    string            `json:"hostname"`
	Command     []string          `json:"command"`
	Environment map[string]string `json:"environment"`
	Ports       []string          `json:"ports"`
	Volumes     []string          `json:"volumes"`
	Build       struct {
		Context    string `json:"context"`
		Dockerfile string `json:"dockerfile"`
		Target     string `json:"target"`
	} `json:"build"`
	DependsOn map[string]struct {
		Condition string `json:"condition"`
	} `json:"depends_on"`
}

// composeCommandFlags are the flag sets of the commands the file runs,
// the very ones the binary parses.
var composeCommandFlags = map[string]func() *flag.FlagSet{
	"serve":    func() *flag.FlagSet { return first(serveFlags()) },
	"temporal": func() *flag.FlagSet { return first(temporalServerFlags()) },
	"init":     func() *flag.FlagSet { return first(initFlags()) },
}

// setting is what a service gives a flag of its command: the flag's
// value on the command line, else the variable the flag reads.
func (s composeService) setting(t *testing.T, name string) string {
	t.Helper()
	for i, a := range s.Command {
		if v, ok := strings.CutPrefix(a, "--"+name+"="); ok {
			return v
		}
		if a == "--"+name && i+1 < len(s.Command) {
			return s.Command[i+1]
		}
	}
	f := composeCommandFlags[s.Command[0]]().Lookup(name)
	if f == nil {
		t.Fatalf("%s has no flag --%s", s.Command[0], name)
	}
	return s.Environment[flagEnv(f)]
}

// flagEnv is the variable a flag reads, as its usage says: "(env X)".
func flagEnv(f *flag.Flag) string {
	if i := strings.Index(f.Usage, "(env "); i >= 0 {
		return strings.TrimSuffix(f.Usage[i+5:], ")")
	}
	return ""
}

// volumeAt is the volume the service mounts path (a directory or a file)
// from, or "".
func volumeAt(s composeService, path string) string {
	for _, v := range s.Volumes {
		parts := strings.Split(v, ":") // volume:dir[:ro]
		if len(parts) >= 2 && (path == parts[1] || strings.HasPrefix(path, parts[1]+"/")) {
			return parts[0]
		}
	}
	return ""
}

func readCompose(t *testing.T) (map[string]composeService, []byte) {
	t.Helper()
	raw, err := os.ReadFile("../../docker-compose.yml")
	if err != nil {
		t.Fatal(err)
	}
	var compose struct {
		Services map[string]composeService `json:"services"`
	}
	if err := yaml.Unmarshal(raw, &compose); err != nil {
		t.Fatalf("docker-compose.yml does not parse: %v", err)
	}
	return compose.Services, raw
}

// docker-compose.yml cannot run here (no Docker engine), so this checks
// what would break it: its services, the Dockerfile stages they build, and
// that every flag and variable they give a command is one that command
// reads. (Add "--temporal-tls-ca" to temporal's command to see it fail.)
func TestDockerComposeRunsTheRealCommands(t *testing.T) {
	services, _ := readCompose(t)
	var names []string
	for name := range services {
		names = append(names, name)
	}
	slices.Sort(names)
	if want := []string{"init", "postgres", "serve-1", "serve-2", "temporal"}; !slices.Equal(names, want) {
		t.Fatalf("docker-compose.yml runs %v, want %v", names, want)
	}
	for _, name := range names {
		svc := services[name]
		if svc.Build.Dockerfile == "" {
			continue
		}
		dockerfile, err := os.ReadFile(filepath.Join("../..", svc.Build.Context, svc.Build.Dockerfile))
		if err != nil {
			t.Fatalf("%s builds from %s/%s: %v", name, svc.Build.Context, svc.Build.Dockerfile, err)
		}
		if svc.Build.Target == "" || !strings.Contains(string(dockerfile), " AS "+svc.Build.Target+"\n") {
			t.Errorf("%s builds target %q, which is no stage of %s", name, svc.Build.Target, svc.Build.Dockerfile)
		}
		if len(svc.Command) == 0 || composeCommandFlags[svc.Command[0]] == nil {
			t.Errorf("%s runs %v, not one of zonewright's commands this test knows", name, svc.Command)
			continue
		}
		// The serve stage is built -tags nodev: no dev, no temporal.
		if _, embedded := platformCommands()[svc.Command[0]]; embedded && svc.Build.Target == "serve" {
			t.Errorf("%s runs %s from the serve image, whose nodev build lacks it", name, svc.Command[0])
		}
		fs := composeCommandFlags[svc.Command[0]]()
		for args := svc.Command[1:]; len(args) > 0; args = args[1:] {
			flagName, hasValue := strings.CutPrefix(args[0], "--")
			flagName, _, inline := strings.Cut(flagName, "=")
			f := fs.Lookup(flagName)
			if !hasValue || f == nil {
				t.Errorf("%s: zonewright %s has no flag %q", name, svc.Command[0], args[0])
				continue
			}
			if b, ok := f.Value.(interface{ IsBoolFlag() bool }); !inline && !(ok && b.IsBoolFlag()) {
				if len(args) == 1 {
					t.Errorf("%s: %s has no value", name, args[0])
					break
				}
				args = args[1:]
			}
		}
		envs := map[string]bool{}
		fs.VisitAll(func(f *flag.Flag) { envs[flagEnv(f)] = true })
		for k := range svc.Environment {
			if !envs[k] {
				t.Errorf("docker-compose sets %s for %s, which zonewright %s does not read", k, name, svc.Command[0])
			}
		}
	}
}

// The file holds no secret: the database password is the operator's
// variable (required, so an unset one stops compose instead of leaving
// an empty password), and the CA's key and the encryption key are made by
// init into volumes. (Write a password into POSTGRES_PASSWORD or
// ZW_DATABASE_URL to see it fail.)
func TestDockerComposeHoldsNoSecret(t *testing.T) {
	services, raw := readCompose(t)
	if strings.Contains(string(raw), "PRIVATE KEY") {
		t.Error("docker-compose.yml holds a private key")
	}
	interpolated := func(v string) bool { return strings.HasPrefix(v, "${") && strings.Contains(v, ":?") }
	for name, svc := range services {
		values := map[string]string{}
		for k, v := range svc.Environment {
			values[k] = v
		}
		for i, a := range svc.Command {
			values["argument "+strconv.Itoa(i)] = a
		}
		for k, v := range values {
			if u, err := url.Parse(v); err == nil && u.User != nil {
				if pw, set := u.User.Password(); set && !interpolated(pw) {
					t.Errorf("%s: %s carries a password written in the file; want ${VARIABLE:?why}", name, k)
				}
			}
			secretName := strings.Contains(k, "PASSWORD") || strings.Contains(k, "SECRET") || strings.Contains(k, "TOKEN")
			if secretName && !strings.HasSuffix(k, "_FILE") && !interpolated(v) {
				t.Errorf("%s: %s = %q is written in the file; want ${VARIABLE:?why}", name, k, v)
			}
		}
	}

	init := services["init"]
	if len(init.Command) == 0 || init.Command[0] != "init" {
		t.Fatalf("the init service runs %v, want zonewright init", init.Command)
	}
	stateDir, keyFile := init.setting(t, "state-dir"), init.setting(t, "encryption-key-file")
	stateVolume, keyVolume := volumeAt(init, stateDir), volumeAt(init, keyFile)
	if stateVolume == "" || keyVolume == "" || keyVolume == stateVolume {
		t.Fatalf("init must make the CA in a volume (%q) and the key in another (%q): %v", stateVolume, keyVolume, init.Volumes)
	}
	for _, name := range []string{"temporal", "serve-1", "serve-2"} {
		svc := services[name]
		if svc.setting(t, "state-dir") != stateDir || volumeAt(svc, stateDir) != stateVolume {
			t.Errorf("%s keeps its state in %s of %q, not init's %s of %q", name, svc.setting(t, "state-dir"), volumeAt(svc, svc.setting(t, "state-dir")), stateDir, stateVolume)
		}
		if svc.DependsOn["init"].Condition != "service_completed_successfully" {
			t.Errorf("%s must start after init has made the CA and the key", name)
		}
	}
	for _, name := range []string{"serve-1", "serve-2"} {
		svc := services[name]
		if svc.setting(t, "encryption-key-file") != keyFile || volumeAt(svc, keyFile) != keyVolume {
			t.Errorf("%s reads the encryption key %q, not init's %s in %s", name, svc.setting(t, "encryption-key-file"), keyFile, keyVolume)
		}
	}
	if volumeAt(services["temporal"], keyFile) != "" {
		t.Errorf("temporal mounts the secrets' encryption key, which it has no use for")
	}
}

// The shape of docs/running.md: PostgreSQL asking SCRAM passwords and
// reachable only inside the project, zonewright's Temporal server on it
// with mutual TLS, two serve replicas on one database and one state.
// (Drop POSTGRES_HOST_AUTH_METHOD to see it fail.)
func TestDockerComposeHasTheDeploymentsShape(t *testing.T) {
	services, _ := readCompose(t)
	pg := services["postgres"]
	if pg.Environment["POSTGRES_HOST_AUTH_METHOD"] != "scram-sha-256" || !strings.Contains(pg.Environment["POSTGRES_INITDB_ARGS"], "--auth-host=scram-sha-256") {
		t.Errorf("postgres must ask network clients for SCRAM passwords: %v", pg.Environment)
	}
	if len(pg.Ports) > 0 {
		t.Errorf("postgres publishes %v: only the project's services should reach it", pg.Ports)
	}

	tmp := services["temporal"]
	if len(tmp.Command) == 0 || tmp.Command[0] != "temporal" || tmp.Build.Target != "temporal" {
		t.Fatalf("temporal must run zonewright temporal from its stage, runs %v from %q", tmp.Command, tmp.Build.Target)
	}
	if !strings.Contains(tmp.setting(t, "temporal-database-url"), "@postgres:5432/") || !strings.Contains(tmp.setting(t, "database-url"), "@postgres:5432/") {
		t.Errorf("temporal must keep its state in the postgres service and read zonewright's database")
	}
	if tmp.DependsOn["postgres"].Condition != "service_healthy" {
		t.Errorf("temporal should wait for a healthy postgres")
	}
	_, frontendPort, _ := strings.Cut(tmp.setting(t, "address"), ":")
	_, uiPort, _ := strings.Cut(tmp.setting(t, "ui-address"), ":")
	for _, port := range []string{frontendPort, uiPort} {
		if port == "" || !slices.ContainsFunc(tmp.Ports, func(p string) bool { return strings.HasSuffix(p, ":"+port) }) {
			t.Errorf("temporal must publish its frontend and UI ports (%q, %q): %v", frontendPort, uiPort, tmp.Ports)
		}
	}

	one, two := services["serve-1"], services["serve-2"]
	hostPorts := map[string]bool{}
	for _, name := range []string{"serve-1", "serve-2"} {
		svc := services[name]
		if len(svc.Command) == 0 || svc.Command[0] != "serve" {
			t.Fatalf("%s must run serve, runs %v", name, svc.Command)
		}
		for _, f := range []string{"database-url", "temporal-address", "temporal-tls-cert", "temporal-tls-server-name", "tls-san"} {
			if svc.setting(t, f) != one.setting(t, f) {
				t.Errorf("the replicas differ in --%s: %q, %q", f, one.setting(t, f), svc.setting(t, f))
			}
		}
		if !strings.Contains(svc.setting(t, "database-url"), "@postgres:5432/") || svc.setting(t, "temporal-address") != "temporal:"+frontendPort {
			t.Errorf("%s must reach the postgres and temporal services", name)
		}
		for _, f := range []string{"temporal-tls-cert", "temporal-tls-key", "temporal-tls-ca"} {
			if !strings.HasPrefix(svc.setting(t, f), svc.setting(t, "state-dir")+"/tls/") {
				t.Errorf("%s's --%s = %q, want a file the temporal service issues into the shared state", name, f, svc.setting(t, f))
			}
		}
		if !slices.Contains(strings.Split(tmp.setting(t, "tls-san"), ","), svc.setting(t, "temporal-tls-server-name")) {
			t.Errorf("%s checks the name %q, which temporal's certificate must carry (--tls-san %q)", name, svc.setting(t, "temporal-tls-server-name"), tmp.setting(t, "tls-san"))
		}
		if svc.setting(t, "temporal-insecure") != "" {
			t.Errorf("%s reaches Temporal in plaintext", name)
		}
		// One server certificate in the shared state names every host
		// either replica adds (its hostname), or each start issues it again.
		if svc.Hostname == "" || !slices.Contains(strings.Split(svc.setting(t, "tls-san"), ","), svc.Hostname) {
			t.Errorf("%s's hostname %q is not among the shared certificate's names %q", name, svc.Hostname, svc.setting(t, "tls-san"))
		}
		_, listenPort, _ := strings.Cut(svc.setting(t, "listen"), ":")
		published := false
		for _, p := range svc.Ports {
			if i := strings.LastIndex(p, ":"); i >= 0 && p[i+1:] == listenPort {
				published = true
				hostPorts[p[:i]] = true
			}
		}
		if !published {
			t.Errorf("%s listens on %s but publishes %v", name, listenPort, svc.Ports)
		}
		if svc.DependsOn["postgres"].Condition != "service_healthy" {
			t.Errorf("%s should wait for a healthy postgres", name)
		}
	}
	if len(hostPorts) != 2 {
		t.Errorf("the replicas' APIs must be published on two host ports: %v, %v", one.Ports, two.Ports)
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
