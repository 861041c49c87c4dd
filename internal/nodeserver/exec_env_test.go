package nodeserver_test

import (
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/zonewright/zonewright/internal/execstream"
	"github.com/zonewright/zonewright/internal/hostops"
	"github.com/zonewright/zonewright/internal/illumos"
	"github.com/zonewright/zonewright/internal/nodeclient"
)

// An exec into a container runs with the container's environment (its
// SMF service's), on a terminal or not; a container without a service
// gets none of another's.
func TestExecSeesTheContainersEnvironment(t *testing.T) {
	e := newEndpoint(t, 0)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	z := illumos.InZone{Runner: e.runner, Zone: e.zone}
	manifest, err := illumos.RenderManifest(illumos.Service{Name: hostops.ContainerService("app"), Start: []string{"sleep", "3600"},
		Env: []illumos.EnvVar{{Name: "GREETING", Value: "hello world"}, {Name: "DB_PASSWORD", Value: "s3cr$t 'x'\nline2"}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := z.ImportManifest(ctx, manifest); err != nil {
		t.Fatal(err)
	}
	show := []string{"sh", "-c", `printf '%s|%s|%s' "$GREETING" "$DB_PASSWORD" "${TERM-}"`}
	out, code, err := e.exec(t, ctx, nil, show...)
	if err != nil || code != 0 || out != "hello world|s3cr$t 'x'\nline2|" {
		t.Errorf("exec: %q, exit %d, %v", out, code, err)
	}
	// With stdin, the command reads the client's, not the environment's.
	out, code, err = e.exec(t, ctx, strings.NewReader("from the client\n"), "sh", "-c", `cat; printf '%s' "$GREETING"`)
	if err != nil || code != 0 || out != "from the client\nhello world" {
		t.Errorf("exec with stdin: %q, exit %d, %v", out, code, err)
	}

	// On a terminal (kubectl exec -t): the same, and TERM.
	q := execstream.Options{Command: show, Stdout: true, Stdin: true, TTY: true}.Values()
	s, err := execstream.Dial(ctx, e.client(), e.base+nodeclient.ExecPath(ns, pod, uid, "app")+"?"+q.Encode(), nil)
	if err != nil {
		t.Fatal(err)
	}
	pr, pw := io.Pipe()
	defer pw.Close()
	var tty strings.Builder
	code, err = s.Run(ctx, pr, &tty, nil, nil)
	if got := strings.ReplaceAll(tty.String(), "\r\n", "\n"); err != nil || code != 0 || got != "hello world|s3cr$t 'x'\nline2|xterm" {
		t.Errorf("exec -t: %q, exit %d, %v", tty.String(), code, err)
	}

	// Another container of the pod has its own environment (none here).
	q = execstream.Options{Command: show, Stdout: true}.Values()
	s, err = execstream.Dial(ctx, e.client(), e.base+nodeclient.ExecPath(ns, pod, uid, "other")+"?"+q.Encode(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var other strings.Builder
	code, err = s.Run(ctx, nil, &other, nil, nil)
	if err != nil || code != 0 || other.String() != "||" {
		t.Errorf("exec into a container without a service: %q, exit %d, %v", other.String(), code, err)
	}
}
