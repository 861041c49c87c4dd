package model

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestValidatePodRefusesWhatTheHostCannotCarry: each case changes one
// field of a valid pod and must be refused exactly at that field path.
func TestValidatePodRefusesWhatTheHostCannotCarry(t *testing.T) {
	valid := func() *Pod {
		p := &Pod{Metadata: ObjectMeta{Name: "web", Namespace: "default"}, Spec: PodSpec{Containers: []Container{{
			Name: "app", Image: "base", Command: []string{"/bin/sleep"}, Args: []string{"60"},
			Env:            []EnvVar{{Name: "MODE", Value: "a\tb\nc"}},
			LivenessProbe:  &Probe{Exec: &ExecAction{Command: []string{"/bin/true"}}},
			ReadinessProbe: &Probe{HTTPGet: &HTTPGetAction{Path: "/healthz?full=1", Port: IntValue(80)}},
		}}}}
		DefaultPod(p)
		return p
	}
	if errs := ValidatePod(valid()); len(errs) > 0 {
		t.Fatalf("the valid pod is refused: %v", errs)
	}
	big := strings.Repeat("x", 200*1024)
	for _, tc := range []struct {
		name   string
		change func(*Pod)
		field  string
	}{
		{"a grace period beyond a day", func(p *Pod) { g := int64(9223372036); p.Spec.TerminationGracePeriodSeconds = &g }, "spec.terminationGracePeriodSeconds"},
		{"a negative grace period", func(p *Pod) { g := int64(-1); p.Spec.TerminationGracePeriodSeconds = &g }, "spec.terminationGracePeriodSeconds"},
		{"an env name with a dash", func(p *Pod) { p.Spec.Containers[0].Env[0].Name = "a-b" }, "spec.containers[0].env[0].name"},
		{"an env name with a dot", func(p *Pod) { p.Spec.Containers[0].Env[0].Name = "a.b" }, "spec.containers[0].env[0].name"},
		{"an env value with NUL", func(p *Pod) { p.Spec.Containers[0].Env[0].Value = "a\x00b" }, "spec.containers[0].env[0].value"},
		{"an env value with ESC", func(p *Pod) { p.Spec.Containers[0].Env[0].Value = "\x1b[31m" }, "spec.containers[0].env[0].value"},
		{"an env value not UTF-8", func(p *Pod) { p.Spec.Containers[0].Env[0].Value = "\xff" }, "spec.containers[0].env[0].value"},
		{"an environment of 200 KB", func(p *Pod) { p.Spec.Containers[0].Env[0].Value = big }, "spec.containers[0].env"},
		{"args of 200 KB", func(p *Pod) { p.Spec.Containers[0].Args = []string{big} }, "spec.containers[0].args"},
		{"a command of 200 KB", func(p *Pod) { p.Spec.Containers[0].Command = []string{"/bin/echo", big} }, "spec.containers[0].command"},
		{"an empty program", func(p *Pod) { p.Spec.Containers[0].Command = []string{""} }, "spec.containers[0].command[0]"},
		{"an argument with a control character", func(p *Pod) { p.Spec.Containers[0].Args = []string{"a\x01"} }, "spec.containers[0].args[0]"},
		{"an empty exec probe command", func(p *Pod) { p.Spec.Containers[0].LivenessProbe.Exec.Command = nil }, "spec.containers[0].livenessProbe.exec.command"},
		{"an exec probe of an empty word", func(p *Pod) { p.Spec.Containers[0].LivenessProbe.Exec.Command = []string{""} }, "spec.containers[0].livenessProbe.exec.command"},
		{"an httpGet path with CR LF", func(p *Pod) { p.Spec.Containers[0].ReadinessProbe.HTTPGet.Path = "/x\r\nHost: evil" }, "spec.containers[0].readinessProbe.httpGet.path"},
		{"an httpGet path not starting with /", func(p *Pod) { p.Spec.Containers[0].ReadinessProbe.HTTPGet.Path = "healthz" }, "spec.containers[0].readinessProbe.httpGet.path"},
		{"a probe period of 2^31-1 s", func(p *Pod) { p.Spec.Containers[0].LivenessProbe.PeriodSeconds = 1<<31 - 1 }, "spec.containers[0].livenessProbe.periodSeconds"},
		{"a probe timeout beyond an hour", func(p *Pod) { p.Spec.Containers[0].LivenessProbe.TimeoutSeconds = 3601 }, "spec.containers[0].livenessProbe.timeoutSeconds"},
		{"a probe delay beyond a day", func(p *Pod) { p.Spec.Containers[0].ReadinessProbe.InitialDelaySeconds = 86401 }, "spec.containers[0].readinessProbe.initialDelaySeconds"},
		{"a failure threshold of a million", func(p *Pod) { p.Spec.Containers[0].ReadinessProbe.FailureThreshold = 1000000 }, "spec.containers[0].readinessProbe.failureThreshold"},
		{"a success threshold of a million", func(p *Pod) { p.Spec.Containers[0].ReadinessProbe.SuccessThreshold = 1000000 }, "spec.containers[0].readinessProbe.successThreshold"},
		{"a hostname with a dot", func(p *Pod) { p.Spec.Hostname = "web.0" }, "spec.hostname"},
		{"a hostname of 64 bytes", func(p *Pod) { p.Spec.Hostname = strings.Repeat("h", 64) }, "spec.hostname"},
		{"a subdomain in capitals", func(p *Pod) { p.Spec.Subdomain = "Web" }, "spec.subdomain"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := valid()
			tc.change(p)
			if got := refused(ValidatePod(p)); got != tc.field {
				t.Fatalf("refused %q, want %q", got, tc.field)
			}
		})
	}
}

func TestValidatePodAcceptsTheBounds(t *testing.T) {
	g := MaxGracePeriodSeconds
	p := &Pod{Metadata: ObjectMeta{Name: "web", Namespace: "default"}, Spec: PodSpec{TerminationGracePeriodSeconds: &g, Containers: []Container{{
		Name: "app", Image: "base", Command: []string{"/bin/echo"}, Args: []string{strings.Repeat("x", MaxCommandBytes-len("/bin/echo")-2)},
		Env:           []EnvVar{{Name: "_a1", Value: "x"}, {Name: "_a1", Value: "later wins"}},
		LivenessProbe: &Probe{TCPSocket: &TCPSocketAction{Port: IntValue(80)}, InitialDelaySeconds: MaxProbeDelaySeconds, PeriodSeconds: MaxProbePeriodSeconds, TimeoutSeconds: MaxProbePeriodSeconds, FailureThreshold: MaxProbeThreshold},
	}}}}
	DefaultPod(p)
	if errs := ValidatePod(p); len(errs) > 0 {
		t.Fatalf("refused at the bounds: %v", errs)
	}
}

func TestValidateReason(t *testing.T) {
	for _, tc := range []struct {
		reason string
		ok     bool
	}{
		{"", true},
		{"maintenance window\nticket 42", true},
		{strings.Repeat("r", MaxReasonBytes), true},
		{strings.Repeat("r", MaxReasonBytes+1), false},
		{strings.Repeat("r", 1<<20), false},
		{"bell\a", false},
	} {
		errs := ValidateReason("reason", tc.reason)
		if (len(errs) == 0) != tc.ok || (!tc.ok && refused(errs) != "reason") {
			t.Errorf("reason of %d bytes: refused %q, want ok=%v", len(tc.reason), refused(errs), tc.ok)
		}
	}
}

func TestShortMessage(t *testing.T) {
	if got := ShortMessage("short", 10); got != "short" {
		t.Errorf("short message changed: %q", got)
	}
	long := strings.Repeat("é", 3000) // 2 bytes each
	got := ShortMessage(long, MaxMessageBytes)
	if len(got) > MaxMessageBytes || !strings.HasSuffix(got, "…") || !strings.HasPrefix(long, strings.TrimSuffix(got, "…")) {
		t.Errorf("cut to %d bytes, ending %q", len(got), got[len(got)-8:])
	}
}

func TestATemplatesBoundsNameTheTemplatesField(t *testing.T) {
	g := int64(9223372036)
	d := &Deployment{Metadata: ObjectMeta{Name: "web", Namespace: "default"}, Spec: DeploymentSpec{
		Selector: &LabelSelector{MatchLabels: map[string]string{"app": "web"}},
		Template: PodTemplate{Metadata: TemplateMeta{Labels: map[string]string{"app": "web"}}, Spec: PodSpec{TerminationGracePeriodSeconds: &g,
			Containers: []Container{{Name: "app", Image: "base", Command: []string{"/bin/sleep"}, Env: []EnvVar{{Name: "a-b"}}}}}}}}
	DefaultDeployment(d)
	if got := refused(ValidateDeployment(d)); got != "spec.template.spec.containers[0].env[0].name spec.template.spec.terminationGracePeriodSeconds" {
		t.Fatalf("refused %q", got)
	}
}

// A Kubernetes pod whose probes use httpHeaders, host, named ports, grpc
// and a probe's own terminationGracePeriodSeconds decodes strictly and is
// valid; each of those fields is refused at its path when it is wrong.
func TestProbesTakeKubernetesFields(t *testing.T) {
	const manifest = `{"metadata":{"name":"web","namespace":"default"},"spec":{"containers":[{
	  "name":"app","image":"base","command":["/bin/server"],
	  "ports":[{"name":"http","containerPort":8080},{"name":"grpc","containerPort":9090}],
	  "livenessProbe":{"httpGet":{"path":"/healthz","port":"http","host":"127.0.0.1",
	    "httpHeaders":[{"name":"X-Probe","value":"liveness"},{"name":"Host","value":"app.example"}]},
	    "terminationGracePeriodSeconds":5},
	  "readinessProbe":{"grpc":{"port":9090,"service":"ready"}},
	  "startupProbe":{"tcpSocket":{"port":"grpc","host":"db.internal"},"failureThreshold":30,"terminationGracePeriodSeconds":10}}]}}`
	valid := func() *Pod {
		t.Helper()
		dec := json.NewDecoder(strings.NewReader(manifest))
		dec.DisallowUnknownFields()
		var p Pod
		if err := dec.Decode(&p); err != nil {
			t.Fatalf("strict decoding: %v", err)
		}
		DefaultPod(&p)
		return &p
	}
	p := valid()
	if errs := ValidatePod(p); len(errs) > 0 {
		t.Fatalf("the Kubernetes pod is refused: %v", errs)
	}
	c := &p.Spec.Containers[0]
	if port, ok := ProbePort(c.LivenessProbe.HTTPGet.Port, c.Ports); !ok || port != 8080 {
		t.Errorf("port \"http\" resolves to %d, %v; want 8080", port, ok)
	}
	if g := c.KillGraceSeconds(&p.Spec); g != 5 {
		t.Errorf("kill grace %d, want the liveness probe's 5", g)
	}
	c.LivenessProbe.TerminationGracePeriodSeconds = nil
	if g := c.KillGraceSeconds(&p.Spec); g != 10 {
		t.Errorf("kill grace %d, want the startup probe's 10", g)
	}
	c.StartupProbe.TerminationGracePeriodSeconds = nil
	if g := c.KillGraceSeconds(&p.Spec); g != DefaultTerminationGracePeriodSeconds {
		t.Errorf("kill grace %d, want the pod's %d", g, DefaultTerminationGracePeriodSeconds)
	}

	const f = "spec.containers[0]."
	for _, tc := range []struct {
		name   string
		change func(c *Container)
		field  string
	}{
		{"a port name the container lacks", func(c *Container) { c.LivenessProbe.HTTPGet.Port = StrValue("admin") }, f + "livenessProbe.httpGet.port"},
		{"a tcp port name the container lacks", func(c *Container) { c.StartupProbe.TCPSocket.Port = StrValue("db") }, f + "startupProbe.tcpSocket.port"},
		{"a port name that is no IANA name", func(c *Container) { c.LivenessProbe.HTTPGet.Port = StrValue("HTTP_PORT") }, f + "livenessProbe.httpGet.port"},
		{"a port number out of range", func(c *Container) { c.LivenessProbe.HTTPGet.Port = IntValue(70000) }, f + "livenessProbe.httpGet.port"},
		{"a host with a blank", func(c *Container) { c.LivenessProbe.HTTPGet.Host = "a b" }, f + "livenessProbe.httpGet.host"},
		{"a tcp host with a path", func(c *Container) { c.StartupProbe.TCPSocket.Host = "db/x" }, f + "startupProbe.tcpSocket.host"},
		{"a header name with a colon", func(c *Container) { c.LivenessProbe.HTTPGet.HTTPHeaders[0].Name = "X:Y" }, f + "livenessProbe.httpGet.httpHeaders[0].name"},
		{"a header without a name", func(c *Container) { c.LivenessProbe.HTTPGet.HTTPHeaders[0].Name = "" }, f + "livenessProbe.httpGet.httpHeaders[0].name"},
		{"a header value with CR LF", func(c *Container) { c.LivenessProbe.HTTPGet.HTTPHeaders[1].Value = "a\r\nX-Evil: 1" }, f + "livenessProbe.httpGet.httpHeaders[1].value"},
		{"headers of 10 KB", func(c *Container) { c.LivenessProbe.HTTPGet.HTTPHeaders[0].Value = strings.Repeat("v", 10<<10) }, f + "livenessProbe.httpGet.httpHeaders"},
		{"a grpc port of 0", func(c *Container) { c.ReadinessProbe.GRPC.Port = 0 }, f + "readinessProbe.grpc.port"},
		{"grpc and exec together", func(c *Container) { c.ReadinessProbe.Exec = &ExecAction{Command: []string{"true"}} }, f + "readinessProbe"},
		{"a probe grace period of 0", func(c *Container) { g := int64(0); c.LivenessProbe.TerminationGracePeriodSeconds = &g }, f + "livenessProbe.terminationGracePeriodSeconds"},
		{"a probe grace period beyond a day", func(c *Container) { g := MaxGracePeriodSeconds + 1; c.StartupProbe.TerminationGracePeriodSeconds = &g }, f + "startupProbe.terminationGracePeriodSeconds"},
		{"a readiness probe's grace period", func(c *Container) { g := int64(5); c.ReadinessProbe.TerminationGracePeriodSeconds = &g }, f + "readinessProbe.terminationGracePeriodSeconds"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := valid()
			tc.change(&p.Spec.Containers[0])
			if got := refused(ValidatePod(p)); got != tc.field {
				t.Fatalf("refused %q, want %q", got, tc.field)
			}
		})
	}
}
