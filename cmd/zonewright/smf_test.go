package main

import (
	"bytes"
	"encoding/xml"
	"errors"
	"flag"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	nodeagent "github.com/zonewright/zonewright/internal/agent"
)

// The SMF packaging in deploy/smf: a manifest and a method script per
// command, whose `config` property group must stay in step with the
// command's flags.

// smfBundle is the part of an SMF service_bundle the tests look at.
type smfBundle struct {
	XMLName xml.Name `xml:"service_bundle"`
	Type    string   `xml:"type,attr"`
	Service []struct {
		Name       string `xml:"name,attr"`
		Type       string `xml:"type,attr"`
		Dependency []struct {
			Name      string `xml:"name,attr"`
			Grouping  string `xml:"grouping,attr"`
			RestartOn string `xml:"restart_on,attr"`
			FMRI      []struct {
				Value string `xml:"value,attr"`
			} `xml:"service_fmri"`
		} `xml:"dependency"`
		MethodContext *struct {
			Credential *struct {
				User string `xml:"user,attr"`
			} `xml:"method_credential"`
		} `xml:"method_context"`
		ExecMethod []struct {
			Type    string `xml:"type,attr"`
			Name    string `xml:"name,attr"`
			Exec    string `xml:"exec,attr"`
			Timeout string `xml:"timeout_seconds,attr"`
		} `xml:"exec_method"`
		PropertyGroup []struct {
			Name    string `xml:"name,attr"`
			Type    string `xml:"type,attr"`
			Propval []struct {
				Name  string `xml:"name,attr"`
				Type  string `xml:"type,attr"`
				Value string `xml:"value,attr"`
			} `xml:"propval"`
		} `xml:"property_group"`
		Instance []struct {
			Name    string `xml:"name,attr"`
			Enabled string `xml:"enabled,attr"`
		} `xml:"instance"`
	} `xml:"service"`
}

type smfCase struct {
	command  string // zonewright subcommand
	service  string // SMF service name
	flags    func() *flag.FlagSet
	required []string // properties the method script refuses to start without
	// url is a URL property whose value holds shell metacharacters.
	url, urlValue string
	// urlEnv, when set, is the environment variable the method hands the
	// URL in instead of a flag: it may hold a password, and a command
	// line is every local user's to read.
	urlEnv string
	deps   []string // FMRIs the manifest must depend on
	user   string   // method_credential user
	stop   string   // the stop method's exec
}

func smfCases() []smfCase {
	return []smfCase{
		{
			command:  "agent",
			service:  "site/zonewright/agent",
			flags:    func() *flag.FlagSet { fs, _ := agentFlags(); return fs },
			required: []string{"api_url"},
			url:      "api_url", urlValue: "https://cp.example:8443/?a=1&b=2",
			deps: []string{
				"svc:/milestone/network:default",
				"svc:/system/filesystem/local:default",
				"svc:/system/zones:default",
			},
			user: "root",
			// Only the agent's own process: host commands it runs finish.
			stop: "/opt/zonewright/lib/svc/method/zonewright-agent stop",
		},
		{
			command:  "serve",
			service:  "site/zonewright/serve",
			flags:    func() *flag.FlagSet { fs, _ := serveFlags(); return fs },
			required: []string{"database_url"},
			url:      "database_url", urlValue: "postgres://zw@db.example:5432/zonewright?sslmode=require&passfile=/opt/zonewright/etc/pgpass",
			urlEnv: "ZW_DATABASE_URL",
			deps: []string{
				"svc:/milestone/network:default",
				"svc:/system/filesystem/local:default",
			},
			stop: ":kill -15",
		},
	}
}

func smfPath(name string) string {
	return filepath.Join("..", "..", "deploy", "smf", name)
}

// flagProperties returns the config property names for a flag set: each
// flag's name with '-' replaced by '_', sorted.
func flagProperties(fs *flag.FlagSet) []string {
	var names []string
	fs.VisitAll(func(f *flag.Flag) { names = append(names, strings.ReplaceAll(f.Name, "-", "_")) })
	sort.Strings(names)
	return names
}

// diff reports the names in a but not in b.
func diff(a, b []string) []string {
	var out []string
	for _, n := range a {
		if !slices.Contains(b, n) {
			out = append(out, n)
		}
	}
	return out
}

// readManifest parses a manifest strictly: every token must decode (the
// file is well-formed XML), and comments must not contain "--", which XML
// forbids but encoding/xml lets through (svccfg's libxml2 does not).
func readManifest(t *testing.T, path string) smfBundle {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	d := xml.NewDecoder(bytes.NewReader(data))
	d.Strict = true
	for {
		tok, err := d.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("%s is not well-formed XML: %v", path, err)
		}
		if c, ok := tok.(xml.Comment); ok && bytes.Contains(c, []byte("--")) {
			t.Errorf("%s: a comment contains \"--\": %q", path, firstLine(string(c)))
		}
	}
	var b smfBundle
	if err := xml.Unmarshal(data, &b); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return b
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

func TestSMFManifests(t *testing.T) {
	for _, c := range smfCases() {
		t.Run(c.command, func(t *testing.T) {
			path := smfPath("zonewright-" + c.command + ".xml")
			b := readManifest(t, path)
			if b.Type != "manifest" {
				t.Errorf("service_bundle type %q, want manifest", b.Type)
			}
			if len(b.Service) != 1 {
				t.Fatalf("%d services, want 1", len(b.Service))
			}
			s := b.Service[0]
			if s.Name != c.service || s.Type != "service" {
				t.Errorf("service %q type %q, want %q type service", s.Name, s.Type, c.service)
			}
			if len(s.Instance) != 1 || s.Instance[0].Name != "default" {
				t.Errorf("instances %+v, want the one instance default", s.Instance)
			}

			// Dependencies.
			deps := map[string]string{} // FMRI -> grouping
			for _, d := range s.Dependency {
				if d.RestartOn == "" {
					t.Errorf("dependency %s has no restart_on", d.Name)
				}
				for _, f := range d.FMRI {
					deps[f.Value] = d.Grouping
				}
			}
			for _, want := range c.deps {
				g, ok := deps[want]
				switch {
				case !ok:
					t.Errorf("no dependency on %s", want)
				case want != "svc:/system/zones:default" && g != "require_all":
					t.Errorf("dependency on %s is %s, want require_all", want, g)
				}
			}

			// Methods: start runs the method script, stop sends SIGTERM
			// with time for the 30 s drain.
			methods := map[string]string{}
			for _, m := range s.ExecMethod {
				methods[m.Name] = m.Exec
				if m.Type != "method" || m.Timeout == "" {
					t.Errorf("exec_method %s: type %q timeout %q", m.Name, m.Type, m.Timeout)
				}
				// The stop method waits for the drain: its timeout must
				// leave room for the default shutdown timeout.
				drain := int(nodeagent.DefaultWorkerStopTimeout / time.Second)
				if n, err := strconv.Atoi(m.Timeout); m.Name == "stop" && (err != nil || n < drain+5) {
					t.Errorf("stop timeout %q s, want at least %d (the drain takes up to %d s)", m.Timeout, drain+5, drain)
				}
			}
			wantStart := "/opt/zonewright/lib/svc/method/zonewright-" + c.command + " start"
			if methods["start"] != wantStart {
				t.Errorf("start method %q, want %q", methods["start"], wantStart)
			}
			if methods["stop"] != c.stop {
				t.Errorf("stop method %q, want %q", methods["stop"], c.stop)
			}
			if c.user != "" && (s.MethodContext == nil || s.MethodContext.Credential == nil || s.MethodContext.Credential.User != c.user) {
				t.Errorf("method_credential user is not %s", c.user)
			}

			// startd/duration=child and the config property group.
			var config []string
			duration := ""
			for _, pg := range s.PropertyGroup {
				switch pg.Name {
				case "startd":
					for _, p := range pg.Propval {
						if p.Name == "duration" {
							duration = p.Value
						}
					}
				case "config":
					if pg.Type != "application" {
						t.Errorf("config property group type %q, want application", pg.Type)
					}
					for _, p := range pg.Propval {
						if p.Type != "astring" {
							t.Errorf("config/%s type %q, want astring", p.Name, p.Type)
						}
						if slices.Contains(config, p.Name) {
							t.Errorf("config/%s twice", p.Name)
						}
						config = append(config, p.Name)
					}
				}
			}
			if duration != "child" {
				t.Errorf("startd/duration %q, want child", duration)
			}
			sort.Strings(config)
			flags := flagProperties(c.flags())
			if missing := diff(flags, config); len(missing) > 0 {
				t.Errorf("flags of zonewright %s without a config property: %v", c.command, missing)
			}
			if extra := diff(config, flags); len(extra) > 0 {
				t.Errorf("config properties that are no flag of zonewright %s: %v", c.command, extra)
			}
		})
	}
}

// scriptProps returns the property names listed in a method script's
// PROPS='...' block.
func scriptProps(t *testing.T, script string) []string {
	t.Helper()
	m := regexp.MustCompile(`(?m)^PROPS='([^']*)'$`).FindStringSubmatch(script)
	if m == nil {
		t.Fatal("no PROPS='...' block in the method script")
	}
	props := strings.Fields(m[1])
	sort.Strings(props)
	return props
}

func TestSMFMethodScripts(t *testing.T) {
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh:", err)
	}
	for _, c := range smfCases() {
		t.Run(c.command, func(t *testing.T) {
			path := smfPath("zonewright-" + c.command + ".sh")
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			script := string(data)
			if !strings.HasPrefix(script, "#!/sbin/sh\n") {
				t.Error("the method script does not start with #!/sbin/sh")
			}
			if !strings.Contains(script, ". /lib/svc/share/smf_include.sh") {
				t.Error("the method script does not source smf_include.sh")
			}
			if fi, err := os.Stat(path); err == nil && fi.Mode()&0o111 == 0 {
				t.Error("the method script is not executable")
			}

			props := scriptProps(t, script)
			flags := flagProperties(c.flags())
			if missing := diff(flags, props); len(missing) > 0 {
				t.Errorf("flags of zonewright %s the method script does not read: %v", c.command, missing)
			}
			if extra := diff(props, flags); len(extra) > 0 {
				t.Errorf("properties the method script reads that are no flag: %v", extra)
			}
			// Any property named outside PROPS must be one of them too.
			for _, m := range regexp.MustCompile(`config/([a-z0-9_]+)`).FindAllStringSubmatch(script, -1) {
				if !slices.Contains(flags, m[1]) {
					t.Errorf("the method script names config/%s, which is no flag", m[1])
				}
			}

			out, err := exec.Command(sh, "-n", path).CombinedOutput()
			if err != nil {
				t.Errorf("sh -n %s: %v\n%s", path, err, out)
			}
		})
	}
}

// TestSMFMethodScriptRun runs each method script with stand-ins for
// smf_include.sh, svcprop and the zonewright binary, and checks the
// command line it execs: every non-empty property becomes --flag value,
// one word each, whatever the value holds.
func TestSMFMethodScriptRun(t *testing.T) {
	if _, err := exec.LookPath("sh"); err != nil {
		t.Skip("no sh:", err)
	}
	for _, c := range smfCases() {
		t.Run(c.command, func(t *testing.T) {
			m := newStubbedMethod(t, c)
			run, setProp := m.run, m.setProp
			if out, code := run("refresh"); code != 96 {
				t.Errorf("method refresh: exit %d, want 96 (SMF_EXIT_ERR_CONFIG)\n%s", code, out)
			}
			// Every property present and empty, as after svccfg import.
			for _, p := range flagProperties(c.flags()) {
				setProp(p, `""`)
			}
			for _, req := range c.required {
				out, code := run("start")
				if code != 96 || !strings.Contains(out, "config/"+req) {
					t.Errorf("start without %s: exit %d, want 96 and a message naming it\n%s", req, code, out)
				}
				setProp(req, "x")
			}

			// svcprop escapes metacharacters with a backslash.
			setProp(c.url, strings.ReplaceAll(c.urlValue, "&", `\&`))
			setProp("temporal_tls_ca", `/opt/zonewright/etc/my\ ca.pem`)
			setProp("log_level", "debug")
			want := []string{c.command}
			for _, p := range flagProperties(c.flags()) {
				switch p {
				case c.url:
					if c.urlEnv == "" {
						want = append(want, "--"+strings.ReplaceAll(c.url, "_", "-"), c.urlValue)
					}
				case "temporal_tls_ca":
					want = append(want, "--temporal-tls-ca", "/opt/zonewright/etc/my ca.pem")
				case "log_level":
					want = append(want, "--log-level", "debug")
				default:
					if slices.Contains(c.required, p) {
						want = append(want, "--"+strings.ReplaceAll(p, "_", "-"), "x")
					}
				}
			}
			out, code := run("start")
			if code != 0 {
				t.Fatalf("start: exit %d\n%s", code, out)
			}
			if strings.Contains(out, "env SMF_") {
				t.Errorf("the SMF_ variables reach zonewright (smf_clear_env):\n%s", out)
			}
			if c.urlEnv != "" {
				env := "env " + c.urlEnv + "=" + c.urlValue + "\n"
				if !strings.Contains(out, env) {
					t.Errorf("start did not hand the URL in %s:\n%s", c.urlEnv, out)
				}
				out = strings.Replace(out, env, "", 1)
				if strings.Contains(out, "db.example") {
					t.Errorf("the database URL is on the command line, every local user's to read:\n%s", out)
				}
			}
			got := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
			// Arguments come in PROPS order; compare as flag/value pairs.
			if len(got) == 0 || got[0] != c.command {
				t.Fatalf("start ran %q, want the %s command", got, c.command)
			}
			if pairs(got[1:]) != pairs(want[1:]) {
				t.Errorf("start ran zonewright with\n%q\nwant\n%q", got, want)
			}
			// The flags the script passes are the command's own.
			fs := c.flags()
			fs.Init(c.command, flag.ContinueOnError)
			fs.SetOutput(io.Discard)
			if err := fs.Parse(got[1:]); err != nil || fs.NArg() != 0 {
				t.Errorf("zonewright %s would not parse %q: %v", c.command, got[1:], err)
			}
			// A boolean flag takes its value in the same word, or the
			// value would end the flags.
			var bools []string
			c.flags().VisitAll(func(f *flag.Flag) {
				if b, ok := f.Value.(interface{ IsBoolFlag() bool }); ok && b.IsBoolFlag() {
					bools = append(bools, f.Name)
				}
			})
			for _, name := range bools {
				prop := strings.ReplaceAll(name, "-", "_")
				setProp(prop, "true")
				out, _ := run("start")
				setProp(prop, `""`)
				var args []string
				for _, a := range strings.Split(strings.TrimSuffix(out, "\n"), "\n")[1:] {
					if !strings.HasPrefix(a, "env ") {
						args = append(args, a)
					}
				}
				fs := c.flags()
				fs.Init(c.command, flag.ContinueOnError)
				fs.SetOutput(io.Discard)
				if err := fs.Parse(args); err != nil || fs.NArg() != 0 || fs.Lookup(name).Value.String() != "true" {
					t.Errorf("config/%s=true: zonewright %s would not parse %q: %v", prop, c.command, args, err)
				}
			}
		})
	}
}

// pairs renders a --flag value list as sorted "flag=value" lines, or the
// list itself if it is not made of pairs.
func pairs(args []string) string {
	if len(args)%2 != 0 {
		return strings.Join(args, "\n")
	}
	var out []string
	for i := 0; i < len(args); i += 2 {
		out = append(out, args[i]+"="+args[i+1])
	}
	sort.Strings(out)
	return strings.Join(out, "\n")
}

// The agent's stop method sends SIGTERM to the agent's process alone
// (restarter/start_pid) and returns only once it has exited, so the
// agent's drain completes and host commands it runs are not signalled.
func TestSMFAgentStopMethod(t *testing.T) {
	m := newStubbedMethod(t, smfCases()[0])
	if out, code := m.run("stop"); code != 0 {
		t.Fatalf("stop with no start_pid: exit %d, want 0\n%s", code, out)
	}

	dir := t.TempDir()
	drained := filepath.Join(dir, "drained")
	// The agent: on SIGTERM it takes a second to drain, then exits 0.
	agentProc := exec.Command("sh", "-c", `trap 'sleep 1; echo yes > "$0"; exit 0' TERM; while :; do sleep 0.1; done`, drained)
	// A host command the agent runs: it must not be signalled.
	signalled := filepath.Join(dir, "signalled")
	command := exec.Command("sh", "-c", `trap 'echo yes > "$0"; exit 1' TERM; while :; do sleep 0.1; done`, signalled)
	exited := map[*exec.Cmd]chan struct{}{}
	for _, p := range []*exec.Cmd{agentProc, command} {
		if err := p.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan struct{})
		exited[p] = done
		go func() { _ = p.Wait(); close(done) }() // reaped at once, as svc.startd does
	}
	t.Cleanup(func() { _ = command.Process.Kill(); <-exited[command] })
	time.Sleep(300 * time.Millisecond) // the traps are set

	if err := os.MkdirAll(filepath.Join(m.props, "restarter"), 0o755); err != nil {
		t.Fatal(err)
	}
	m.setProp("restarter/start_pid", strconv.Itoa(agentProc.Process.Pid))
	start := time.Now()
	out, code := m.run("stop")
	took := time.Since(start)
	if code != 0 {
		t.Fatalf("stop: exit %d, want 0\n%s", code, out)
	}
	select {
	case <-exited[agentProc]:
	default:
		t.Fatalf("stop returned after %s while the agent still runs", took)
	}
	if b, err := os.ReadFile(drained); err != nil || strings.TrimSpace(string(b)) != "yes" {
		t.Errorf("the agent did not drain before stop returned (took %s): %v", took, err)
	}
	select {
	case <-exited[command]:
		t.Error("the stop method signalled a process other than the agent")
	default:
	}
	if _, err := os.Stat(signalled); err == nil {
		t.Error("a host command of the agent got SIGTERM")
	}
}

// stubbedMethod is a method script rewritten to use stand-ins for
// smf_include.sh, svcprop and the zonewright binary.
type stubbedMethod struct {
	props   string // props/NAME holds config/NAME as svcprop prints it
	run     func(args ...string) (string, int)
	setProp func(name, printed string)
}

func newStubbedMethod(t *testing.T, c smfCase) *stubbedMethod {
	t.Helper()
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Fatal("no sh:", err)
	}
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o755); err != nil {
			t.Fatal(err)
		}
		return p
	}
	include := write("smf_include.sh", `
SMF_EXIT_OK=0; SMF_EXIT_ERR_FATAL=95; SMF_EXIT_ERR_CONFIG=96; SMF_EXIT_ERR_NOSMF=99
smf_is_globalzone() { return 0; }
smf_clear_env() { unset SMF_FMRI SMF_METHOD SMF_RESTARTER SMF_ZONENAME; }
`)
	props := filepath.Join(dir, "props")
	if err := os.Mkdir(props, 0o755); err != nil {
		t.Fatal(err)
	}
	// svcprop -p config/NAME FMRI: the file props/NAME holds the
	// value as svcprop prints it; no file, no property.
	svcprop := write("svcprop", `#!/bin/sh
f="`+props+`/${2#config/}"
[ -f "$f" ] || { echo "svcprop: no property $2" >&2; exit 1; }
cat "$f"
`)
	zw := write("zonewright", "#!/bin/sh\nprintf '%s\\n' \"$@\"\nenv | sed -n 's/^SMF_/env SMF_/p; s/^ZW_DATABASE_URL=/env ZW_DATABASE_URL=/p'\n")
	data, err := os.ReadFile(smfPath("zonewright-" + c.command + ".sh"))
	if err != nil {
		t.Fatal(err)
	}
	script := strings.NewReplacer(
		"/lib/svc/share/smf_include.sh", include,
		"/usr/bin/svcprop", svcprop,
		"/opt/zonewright/bin/zonewright", zw,
		"/usr/bin/sed", "sed",
		"/usr/bin/tr", "tr",
	).Replace(string(data))
	method := write("method", script)
	run := func(args ...string) (string, int) {
		cmd := exec.Command(sh, append([]string{method}, args...)...)
		cmd.Env = append(os.Environ(), "SMF_FMRI=svc:/"+c.service+":default", "SMF_METHOD=start")
		out, err := cmd.CombinedOutput()
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return string(out), ee.ExitCode()
		}
		if err != nil {
			t.Fatal(err)
		}
		return string(out), 0
	}
	setProp := func(name, printed string) {
		if err := os.WriteFile(filepath.Join(props, name), []byte(printed+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}

	return &stubbedMethod{props: props, run: run, setProp: setProp}
}

// TestAgentTakesNoDatabaseURL: an agent reaches the control plane through
// its API only; no flag may hand it the database.
func TestAgentTakesNoDatabaseURL(t *testing.T) {
	fs, _ := agentFlags()
	fs.VisitAll(func(f *flag.Flag) {
		if strings.Contains(f.Name, "database") || strings.Contains(f.Usage, "ZW_DATABASE_URL") {
			t.Errorf("zonewright agent has flag --%s (%s)", f.Name, f.Usage)
		}
	})
	if fs.Lookup("api-url") == nil {
		t.Error("zonewright agent has no --api-url")
	}
}

// Every property the docs tell an operator to set exists in the
// service's manifest with the type they give, so a walk through
// docs/running.md never sets a property the method script ignores.
// (Write config/api_address for config/api_url in docs/running.md to see
// it fail.)
func TestSMFPropertiesTheDocsSetExist(t *testing.T) {
	setprop := regexp.MustCompile(`svccfg\s+-s\s+site/zonewright/(\w+)\s+setprop\s+(\w+)/(\w+)\s+=\s+(\w+):`)
	docs, err := filepath.Glob("../../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	seen := 0
	for _, doc := range append(docs, "../../README.md") {
		text, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range setprop.FindAllStringSubmatch(string(text), -1) {
			seen++
			service, group, name, typ := m[1], m[2], m[3], m[4]
			b := readManifest(t, smfPath("zonewright-"+service+".xml"))
			found := false
			for _, s := range b.Service {
				for _, g := range s.PropertyGroup {
					for _, p := range g.Propval {
						found = found || g.Name == group && p.Name == name && p.Type == typ
					}
				}
				for _, e := range s.ExecMethod { // stop/timeout_seconds
					found = found || e.Name == group && name == "timeout_seconds" && typ == "count"
				}
			}
			if !found {
				t.Errorf("%s sets %s/%s (%s) of site/zonewright/%s, which its manifest has not", filepath.Base(doc), group, name, typ, service)
			}
		}
	}
	if seen == 0 {
		t.Fatal("no svccfg setprop in the docs: the pattern no longer matches them")
	}
}
