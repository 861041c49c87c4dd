package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/zonewright/zonewright/internal/syncbuf"
)

// logs prints what the container wrote, without svc.startd's lines;
// -f follows; exec passes its arguments verbatim, its stdin with -i, and
// the command's exit code is zwctl's.
func TestLogsAndExec(t *testing.T) {
	t.Parallel()
	namespace(t, "podio")
	apply(t, `apiVersion: v1
kind: Pod
metadata:
  name: talker
spec:
  containers:
  - name: main
    image: base
    command: ["/bin/sh", "-c", "echo first line; echo second line; while sleep 0.2; do if [ -f /tmp/more ]; then echo more; rm /tmp/more; fi; done"]
`, "-n", "podio")
	must(t, "wait", "pod/talker", "-n", "podio", "--for=condition=Ready", "--timeout=60s")

	var out string
	deadline := time.Now().Add(10 * time.Second)
	for out = must(t, "logs", "talker", "-n", "podio"); !strings.Contains(out, "second line") && time.Now().Before(deadline); {
		time.Sleep(100 * time.Millisecond)
		out = must(t, "logs", "talker", "-n", "podio")
	}
	if out != "first line\nsecond line\n" {
		t.Fatalf("logs printed %q; want the container's two lines and nothing of svc.startd's", out)
	}
	if got := must(t, "logs", "pod/talker", "-n", "podio", "--tail", "1"); got != "second line\n" {
		t.Errorf("--tail 1 printed %q", got)
	}
	if got := must(t, "logs", "talker", "-n", "podio", "--smf-lines"); !strings.Contains(got, "[ ") || !strings.Contains(got, "Executing start method") {
		t.Errorf("--smf-lines printed %q; want svc.startd's lines too", got)
	}

	// -f: a line written after the request arrives.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var followed syncbuf.Buffer
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"logs", "-f", "talker", "-n", "podio"}, streams{in: strings.NewReader(""), out: &followed, errOut: &followed}, testEnv(nil))
	}()
	for !strings.Contains(followed.String(), "second line") {
		if ctx.Err() != nil {
			t.Fatalf("logs -f printed %q", followed.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	must(t, "exec", "talker", "-n", "podio", "--", "touch", "/tmp/more")
	for !strings.Contains(followed.String(), "more\n") {
		if ctx.Err() != nil {
			t.Fatalf("logs -f never printed the line written after it started: %q", followed.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	cancel()
	<-done

	if got := must(t, "exec", "talker", "-n", "podio", "--", "echo", "a b;c"); got != "a b;c\n" {
		t.Errorf("exec echo 'a b;c' printed %q", got)
	}
	if got := must(t, "exec", "talker", "-n", "podio", "--", "printf", "%s|", "$(id)", "`id`", "it's"); got != "$(id)|`id`|it's|" {
		t.Errorf("exec printed %q; want each argument as given", got)
	}
	if r := zwctl(t, "exec", "talker", "-n", "podio", "--", "sh", "-c", "echo oops >&2; exit 3"); r.code != 3 || r.err != "oops\n" {
		t.Errorf("exec of a command exiting 3: %s", r)
	}
	if r := zwctlWith(t, "through stdin\n", nil, "exec", "-i", "talker", "-n", "podio", "--", "cat"); r.code != 0 || r.out != "through stdin\n" {
		t.Errorf("exec -i cat: %s", r)
	}
	if r := zwctl(t, "exec", "talker", "-n", "podio", "echo", "x"); r.code != 1 || !strings.Contains(r.err, "--") {
		t.Errorf("exec without --: %s", r)
	}
	if r := zwctl(t, "exec", "nobody", "-n", "podio", "--", "true"); r.code != 1 || !strings.HasPrefix(r.err, "Error from server (NotFound): ") || !strings.Contains(r.err, `"nobody"`) {
		t.Errorf("exec in a pod that does not exist: %s", r)
	}
	if got := must(t, "get", "--raw", "/metrics"); !strings.Contains(got, "\nzonewright_pod_startup_duration_seconds_count ") {
		t.Errorf("get --raw /metrics has no startup histogram: %.300q", got)
	}
	if r := zwctl(t, "logs", "talker", "-n", "podio", "--previous"); r.code != 1 || !strings.HasPrefix(r.err, "Error from server (BadRequest): ") {
		t.Errorf("logs --previous of a container that never restarted: %s", r)
	}
}
