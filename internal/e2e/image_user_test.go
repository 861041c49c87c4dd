package e2e_test

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	ggtarball "github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/zonewright/zonewright/internal/model"
)

// An image's USER is who its command runs as, a user of the pod's zone:
// its uid is the zone's 1000 (the machine's id at that place in the
// zone's block), it writes the home the image gives it and not the zone
// root's /etc, and an exec into it and its exec probe run as that user
// too; and a command
// in a working directory of its own still has its exit code reported.
//
// Make withImageConfig (workflows/pod_host.go) leave User out to see the
// first pod run as the zone's root; pass no user to EnvSessionCmd
// (internal/nodeserver) to see the exec run as root, or none to the
// supervisor's Container (hostops.SupervisedPod) to see the pod never
// become Ready; start the wrapper in the command's
// directory (internal/supervisor ExitStatusWrapper) to see the exit code
// of the second go missing.
func TestARegistryImageRunsAsItsUser(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("zones own ids of their own only when the simulator runs as root")
	}
	host := startRegistry(t, func(h http.Handler) http.Handler { return h })
	type entry struct {
		name, body string
		mode       int64
		uid        int
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range []entry{
		{"etc/", "", 0o755, 0},
		{"etc/passwd", "root:x:0:0:root:/root:/bin/sh\napp:x:1000:1000:app:/home/app:/bin/sh\n", 0o644, 0},
		{"etc/group", "root::0:\napp::1000:\n", 0o644, 0},
		{"home/", "", 0o755, 0},
		{"home/app/", "", 0o755, 1000},
	} {
		h := &tar.Header{Name: e.name, Mode: e.mode, Uid: e.uid, Gid: e.uid, Size: int64(len(e.body)), Typeflag: tar.TypeReg, ModTime: time.Unix(1e9, 0)}
		if strings.HasSuffix(e.name, "/") {
			h.Typeflag = tar.TypeDir
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if _, err := io.WriteString(tw, e.body); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	l, err := ggtarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(buf.Bytes())), nil })
	if err != nil {
		t.Fatal(err)
	}
	amd64 := v1.Platform{OS: "linux", Architecture: "amd64"}
	push(t, host, "demo/user:1", ociImage(t, v1.Config{User: "app", WorkingDir: "/home/app", Entrypoint: []string{"/bin/sh", "-c"},
		Cmd: []string{`id -u; touch mine && echo wrote-home; touch ../../etc/not-mine 2>/dev/null && echo wrote-etc; echo done; exec sleep 3600`}}, amd64, l))
	push(t, host, "demo/exit:1", ociImage(t, v1.Config{WorkingDir: "/home/app", Entrypoint: []string{"/bin/sh", "-c"},
		Cmd: []string{`sleep 1; exit 3`}}, amd64, l))

	c := newCluster(t, 1)
	// Its readiness probe writes where only app may: the pod is Ready
	// only if the probe runs as app.
	c.createPod(fmt.Sprintf(`{"metadata":{"name":"as-user"},"spec":{"runtimeClassName":"lx",
	  "containers":[{"name":"app","image":%q,
	    "readinessProbe":{"exec":{"command":["sh","-c","id -u > home/app/probe-uid"]},"periodSeconds":1}}]}}`, host+"/demo/user:1"))
	c.createPod(fmt.Sprintf(`{"metadata":{"name":"exits-in-its-dir"},"spec":{"runtimeClassName":"lx","restartPolicy":"Never",
	  "containers":[{"name":"app","image":%q}]}}`, host+"/demo/exit:1"))

	c.waitPhase("as-user", model.PodRunning, true, 3*time.Minute)
	var log string
	c.eventually(time.Minute, "the command's log", func() bool {
		_, b := c.do("GET", "/api/v1/namespaces/default/pods/as-user/log", nil)
		log = string(b)
		return strings.Contains(log, "done\n")
	})
	lines := strings.Split(log, "\n")
	uid, err := strconv.Atoi(strings.TrimSpace(lines[0]))
	if err != nil || uid%65536 != 1000 || uid < 65536 {
		t.Errorf("the command runs as uid %q, want the zone's 1000 (the block's 1000th id); log:\n%s", lines[0], log)
	}
	if !strings.Contains(log, "wrote-home") || strings.Contains(log, "wrote-etc") {
		t.Errorf("as the zone's app the command writes its home and not /etc; log:\n%s", log)
	}
	if out, _, code := c.podExec(t, "/api/v1/namespaces/default/pods/as-user", nil, "cat", "home/app/probe-uid"); code != 0 || strings.TrimSpace(out) != strconv.Itoa(uid) {
		t.Errorf("the exec probe ran as uid %q (exit %d), want the container's %d", out, code, uid)
	}
	// An exec into the container is the container's user's too.
	if out, _, code := c.podExec(t, "/api/v1/namespaces/default/pods/as-user", nil, "id", "-u"); code != 0 || strings.TrimSpace(out) != strconv.Itoa(uid) {
		t.Errorf("exec into the container: id -u = %q (exit %d), want the container's %d", out, code, uid)
	}

	p := c.waitPhase("exits-in-its-dir", model.PodFailed, false, 3*time.Minute)
	if term := containerStatus(p).State.Terminated; term == nil || term.ExitCode != 3 {
		t.Errorf("a command in its own working directory that exited 3: %+v", p.Status)
	}
}
