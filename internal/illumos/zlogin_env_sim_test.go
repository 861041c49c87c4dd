package illumos_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/zonewright/zonewright/internal/illumos"
)

// A service's method environment is what svcprop reads back, value for
// value, and what a session started with it sees; zlogin's argv holds
// none of the values.
func TestServiceEnvReachesAnExecSession(t *testing.T) {
	ctx := ctxT(t)
	n := newNode(t, "node1")
	z := runningZone(t, ctx, n, "web01")

	env := []illumos.EnvVar{
		{Name: "PLAIN", Value: "hello"},
		{Name: "SPACES", Value: "a b  c "},
		{Name: "QUOTES", Value: `it's "quoted" \ back`},
		{Name: "SHELLISH", Value: "$(echo pwned) `id` $HOME *;|&<>"},
		{Name: "LINES", Value: "-----BEGIN KEY-----\nabc\n-----END KEY-----\n"},
		{Name: "EMPTY", Value: ""},
		{Name: "_zwl", Value: "the preamble's name"},
		{Name: "HOME", Value: "/srv/app"},
	}
	manifest, err := illumos.RenderManifest(illumos.Service{Name: "zonewright/container/app", Start: []string{"sleep", "3600"}, Env: env})
	must(t, "render", err)
	must(t, "import", z.ImportManifest(ctx, manifest))

	got, err := z.ServiceEnv(ctx, "svc:/zonewright/container/app:default")
	must(t, "svcprop", err)
	byName := func(vars []illumos.EnvVar) map[string]string {
		m := map[string]string{}
		for _, e := range vars {
			m[e.Name] = e.Value
		}
		return m
	}
	if g, w := byName(got), byName(env); fmt.Sprint(g) != fmt.Sprint(w) {
		t.Errorf("svcprop read back\n%q\nwant\n%q", g, w)
	}

	// printf shows each value bracketed, newlines and all.
	script := ""
	for _, e := range env {
		script += `printf '%s=[%s]\n' ` + e.Name + ` "$` + e.Name + `"; `
	}
	es, err := z.EnvSessionCmd([]string{"sh", "-c", script + `printf 'LOGNAME=[%s]\n' "$LOGNAME"`}, false, got)
	must(t, "session", err)
	for _, e := range env {
		if len(e.Value) > 3 && slices.ContainsFunc(es.Cmd.Args, func(a string) bool { return strings.Contains(a, e.Value) }) {
			t.Errorf("zlogin's argv holds the value of %s: %q", e.Name, es.Cmd.Args)
		}
	}
	es.Cmd.Stdin = es.Block
	res, err := n.runner.Run(ctx, es.Cmd)
	must(t, "run the session", err)
	want := ""
	for _, e := range env {
		want += e.Name + "=[" + e.Value + "]\n"
	}
	want += "LOGNAME=[root]\n" // zlogin's own stays unless the container sets it
	if string(res.Stdout) != want {
		t.Errorf("the session saw\n%s\nwant\n%s", res.Stdout, want)
	}

	// A service without an environment gives none; a missing one is not
	// found.
	manifest, err = illumos.RenderManifest(illumos.Service{Name: "zonewright/container/bare", Start: []string{"sleep", "3600"}})
	must(t, "render", err)
	must(t, "import", z.ImportManifest(ctx, manifest))
	got, err = z.ServiceEnv(ctx, "svc:/zonewright/container/bare:default")
	if err != nil || len(got) != 0 {
		t.Errorf("a service without environment: %v, %v", got, err)
	}
	_, err = z.ServiceEnv(ctx, "svc:/zonewright/container/nosuch:default")
	wantKind(t, "a missing service", err, illumos.ErrNotFound)
}

func TestParseSvcpropValues(t *testing.T) {
	for _, c := range []struct {
		out  string
		want []string
	}{
		{"", nil},
		{"a=1\n", []string{"a=1"}},
		{"a=1 b=x\\ y\n", []string{"a=1", "b=x y"}},
		{"\"\" a\n", []string{"", "a"}},
		{"\\\"\\\"\n", []string{`""`}},
		{"k=line1\\\nline2\\\n\n", []string{"k=line1\nline2\n"}},
		{"k=\\\\\n", []string{`k=\`}},
	} {
		if got := illumos.ParseSvcpropValues(c.out); fmt.Sprintf("%q", got) != fmt.Sprintf("%q", c.want) {
			t.Errorf("ParseSvcpropValues(%q) = %q, want %q", c.out, got, c.want)
		}
	}
}
