package e2e_test

import (
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/zonewright/zonewright/internal/controlplane"
	"github.com/zonewright/zonewright/internal/execstream"
	"github.com/zonewright/zonewright/internal/model"
	"github.com/zonewright/zonewright/internal/portforward"
	"github.com/zonewright/zonewright/internal/syncbuf"
)

// An exec session or a port-forward that carries nothing either way for
// --streaming-connection-idle-timeout is closed, as kubelet closes them;
// one that keeps talking is not, however long it lasts.
//
// Make relay (api/podio.go) serve the proxy c.Writer and c.Request, not
// the idle ones, to see the idle session and forward held until the test
// gives up; drop the touch in idleConn.Read and idleConn.Write
// (internal/connbounds/idle.go) to see the active session cut.
func TestIdleStreamsAreClosedActiveOnesAreNot(t *testing.T) {
	t.Parallel()
	const idle = 2 * time.Second
	c := newClusterWith(t, 1, func(cfg *controlplane.Config) { cfg.StreamIdleTimeout = idle })
	c.createPod(`{"metadata":{"name":"web"},"spec":{"terminationGracePeriodSeconds":1,
	  "containers":[{"name":"http","image":"base","command":["sh","-c","exec python3 -m http.server --bind $POD_IP 8080"],
	    "readinessProbe":{"tcpSocket":{"port":8080},"periodSeconds":1}}]}}`)
	c.waitPhase("web", model.PodRunning, true, 90*time.Second)
	const base = "/api/v1/namespaces/default/pods/web"
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cat := func() *execstream.Session {
		q := execstream.Options{Command: []string{"cat"}, Stdin: true, Stdout: true}.Values()
		s, err := execstream.Dial(ctx, c.http, c.api+base+"/exec?"+q.Encode(), nil)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}

	// Idle: stdin open, nothing sent, nothing printed.
	quiet, quietStdin := io.Pipe()
	defer quietStdin.Close()
	if _, err := cat().Run(ctx, quiet, io.Discard, io.Discard, nil); err == nil || ctx.Err() != nil {
		t.Fatalf("an idle exec session: %v; want it closed by the server (the test's context: %v)", err, ctx.Err())
	}

	// Active: a line every idle/4, for three idle periods, each echoed.
	talk, talkStdin := io.Pipe()
	var out syncbuf.Buffer
	ran := make(chan error, 1)
	go func() {
		code, err := cat().Run(ctx, talk, &out, io.Discard, nil)
		talk.Close() // the writes below fail once the session is over
		if err == nil && code != 0 {
			err = io.ErrUnexpectedEOF
		}
		ran <- err
	}()
	const lines = 12
	for range lines {
		if _, err := io.WriteString(talkStdin, "tick\n"); err != nil {
			t.Fatalf("an active exec session was closed: %v, %v (after %q)", err, <-ran, out.String())
		}
		time.Sleep(idle / 4)
	}
	talkStdin.Close()
	if err := <-ran; err != nil || out.String() != strings.Repeat("tick\n", lines) {
		t.Fatalf("an active exec session: %v, echoed %q", err, out.String())
	}

	// A port-forward's connection left idle is closed as well.
	conn, err := portforward.Dial(ctx, c.http, c.api+base+"/portforward?port=8080")
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetReadDeadline(time.Now().Add(60 * time.Second))
	if n, err := conn.Read(make([]byte, 1)); err == nil || strings.Contains(err.Error(), "timeout") {
		t.Fatalf("an idle port-forward: read %d, %v; want it closed by the server", n, err)
	}
}
