package model

import (
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
			ReadinessProbe: &Probe{HTTPGet: &HTTPGetAction{Path: "/healthz?full=1", Port: 80}},
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
		LivenessProbe: &Probe{TCPSocket: &TCPSocketAction{Port: 80}, InitialDelaySeconds: MaxProbeDelaySeconds, PeriodSeconds: MaxProbePeriodSeconds, TimeoutSeconds: MaxProbePeriodSeconds, FailureThreshold: MaxProbeThreshold},
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
