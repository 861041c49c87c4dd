package main

import (
	"errors"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"
)

// exitCode is a finished command's exit status (0 without an error).
func exitCode(err error) int {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	if err != nil {
		return -1
	}
	return 0
}

// kubectlOK runs kubectl and fails the test unless it succeeds.
func kubectlOK(t *testing.T, args ...string) string {
	t.Helper()
	out, errOut, err := kubectl(t, args...)
	if err != nil {
		t.Fatalf("kubectl %s: %v\n%s%s", strings.Join(args, " "), err, out, errOut)
	}
	return out
}

// jsonpathEventually waits until kubectl get … -o jsonpath=path prints
// what the regular expression want matches whole.
func jsonpathEventually(t *testing.T, object, ns, path, want string) {
	t.Helper()
	re := regexp.MustCompile("^(?:" + want + ")$")
	var out string
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		if out, _, _ = kubectl(t, "get", object, "-n", ns, "-o", "jsonpath="+path); re.MatchString(out) {
			return
		}
	}
	t.Fatalf("%s %s: %q, want %q", object, path, out, want)
}

// The machine's kubectl writes as it writes to Kubernetes: its typed
// generators send protobuf (create deployment|secret|service|job|namespace,
// drain's evictions), expose sends a service with an empty status, and
// scale, label, annotate, patch, set image|env and rollout restart|pause|
// resume send merge, JSON and strategic merge patches. (Drop fromProtobuf
// from the engine to see create deployment refused with 415; make
// patchWith take strategic patches as merge patches to see set image drop
// the sidecar.)
func TestKubectlWrites(t *testing.T) {
	t.Parallel()
	const ns = "kwrite"
	kubectlOK(t, "create", "namespace", ns)
	if out := kubectlOK(t, "create", "deployment", "web", "-n", ns, "--image=base", "--replicas=1", "--", "sleep", "600"); out != "deployment.apps/web created\n" {
		t.Errorf("create deployment: %q", out)
	}
	kubectlOK(t, "rollout", "status", "deploy/web", "-n", ns, "--timeout=60s")

	if out := kubectlOK(t, "create", "secret", "generic", "creds", "-n", ns, "--from-literal=user=admin"); out != "secret/creds created\n" {
		t.Errorf("create secret: %q", out)
	}
	jsonpathEventually(t, "secret/creds", ns, "{.data.user}", "YWRtaW4=")
	kubectlOK(t, "create", "service", "clusterip", "plain", "-n", ns, "--tcp=80:8080")
	if out := kubectlOK(t, "expose", "deploy/web", "-n", ns, "--name=websvc", "--port=80", "--target-port=8080"); out != "service/websvc exposed\n" {
		t.Errorf("expose: %q", out)
	}
	if out := kubectlOK(t, "get", "svc", "websvc", "-n", ns, "-o", "jsonpath={.spec.selector.app}:{.spec.clusterIP}"); !regexp.MustCompile(`^web:\d+\.\d+\.\d+\.\d+$`).MatchString(out) {
		t.Errorf("the exposed service: %q", out)
	}
	if out := kubectlOK(t, "create", "job", "once", "-n", ns, "--image=base", "--", "true"); out != "job.batch/once created\n" {
		t.Errorf("create job: %q", out)
	}

	t.Run("run", func(t *testing.T) {
		// kubectl run's pod says dnsPolicy ClusterFirst, the cluster DNS
		// every zone uses; another policy is refused by name.
		if out := kubectlOK(t, "run", "once", "-n", ns, "--image=base", "--restart=Never", "--", "echo", "ran"); out != "pod/once created\n" {
			t.Errorf("kubectl run: %q", out)
		}
		jsonpathEventually(t, "pod/once", ns, "{.status.phase}", "Succeeded")
		if out := kubectlOK(t, "logs", "once", "-n", ns); out != "ran\n" {
			t.Errorf("the run pod's log: %q", out)
		}
		cmd := kubectlCmd(t, "apply", "-n", ns, "-f", "-")
		cmd.Stdin = strings.NewReader(podYAML("nodns", nil, "\n  dnsPolicy: Default"))
		if b, err := cmd.CombinedOutput(); err == nil || !strings.Contains(string(b), "spec.dnsPolicy") {
			t.Errorf("a pod with dnsPolicy Default: %v %s", err, b)
		}
	})
	t.Run("scale", func(t *testing.T) {
		if out := kubectlOK(t, "scale", "deploy/web", "-n", ns, "--replicas=2"); out != "deployment.apps/web scaled\n" {
			t.Errorf("scale: %q", out)
		}
		jsonpathEventually(t, "deploy/web", ns, "{.status.readyReplicas}", "2")
	})
	t.Run("label and annotate", func(t *testing.T) {
		kubectlOK(t, "label", "deploy/web", "-n", ns, "tier=front")
		kubectlOK(t, "annotate", "deploy/web", "-n", ns, "owner=ops")
		if out := kubectlOK(t, "get", "deploy", "-n", ns, "-l", "tier=front", "-o", "jsonpath={.items[*].metadata.annotations.owner}"); out != "ops" {
			t.Errorf("the labelled, annotated deployment: %q", out)
		}
		kubectlOK(t, "label", "deploy/web", "-n", ns, "tier-")
		jsonpathEventually(t, "deploy/web", ns, "{.metadata.labels.tier}", "")
	})
	t.Run("patch", func(t *testing.T) {
		kubectlOK(t, "patch", "deploy/web", "-n", ns, "--type=merge", "-p", `{"spec":{"minReadySeconds":1}}`)
		kubectlOK(t, "patch", "deploy/web", "-n", ns, "--type=json", "-p", `[{"op":"replace","path":"/spec/minReadySeconds","value":2}]`)
		jsonpathEventually(t, "deploy/web", ns, "{.spec.minReadySeconds}", "2")
		if _, errOut, err := kubectl(t, "patch", "deploy/web", "-n", ns, "--type=json", "-p", `[{"op":"test","path":"/spec/minReadySeconds","value":9}]`); err == nil || !strings.Contains(errOut, "does not apply") {
			t.Errorf("a JSON patch whose test fails: %v %s", err, errOut)
		}
		// A strategic merge patch merges containers by name: the
		// sidecar added here survives set image of the first.
		kubectlOK(t, "patch", "deploy/web", "-n", ns, "-p", `{"spec":{"template":{"spec":{"containers":[{"name":"side","image":"base","command":["sleep","600"]}]}}}}`)
		kubectlOK(t, "set", "image", "deploy/web", "-n", ns, "base=omnios")
		kubectlOK(t, "set", "env", "deploy/web", "-n", ns, "-c", "side", "MODE=quiet")
		jsonpathEventually(t, "deploy/web", ns, `{.spec.template.spec.containers[*].name} {.spec.template.spec.containers[?(@.name=="base")].image} {.spec.template.spec.containers[?(@.name=="side")].env[0].value}`,
			`side base omnios\S* quiet`)
	})
	t.Run("rollout", func(t *testing.T) {
		kubectlOK(t, "rollout", "restart", "deploy/web", "-n", ns)
		if out := kubectlOK(t, "get", "deploy/web", "-n", ns, "-o", "jsonpath={.spec.template.metadata.annotations}"); !strings.Contains(out, "kubectl.kubernetes.io/restartedAt") {
			t.Errorf("rollout restart left no restartedAt: %q", out)
		}
		kubectlOK(t, "rollout", "pause", "deploy/web", "-n", ns)
		jsonpathEventually(t, "deploy/web", ns, "{.spec.paused}", "true")
		kubectlOK(t, "rollout", "resume", "deploy/web", "-n", ns)
		jsonpathEventually(t, "deploy/web", ns, "{.spec.paused}", "")
		kubectlOK(t, "rollout", "status", "deploy/web", "-n", ns, "--timeout=90s")
	})
	t.Run("diff", func(t *testing.T) {
		// A server-side dry run: what would change is shown, nothing is.
		// (Make store.write ignore WithDryRun to see the secret created.)
		diff := func(manifest string) (string, error) {
			cmd := kubectlCmd(t, "diff", "-n", ns, "-f", "-")
			cmd.Stdin = strings.NewReader(manifest)
			b, err := cmd.CombinedOutput()
			return string(b), err
		}
		out, err := diff("apiVersion: v1\nkind: Secret\nmetadata:\n  name: shown\nstringData:\n  a: b\n")
		if code := exitCode(err); code != 1 || !strings.Contains(out, "+  name: shown") {
			t.Errorf("kubectl diff of a new secret: exit %d\n%s", code, out)
		}
		if _, _, err := kubectl(t, "get", "secret", "shown", "-n", ns); err == nil {
			t.Errorf("kubectl diff created the secret it only meant to show")
		}
		out, err = diff("apiVersion: v1\nkind: Service\nmetadata:\n  name: plain\nspec:\n  ports:\n  - name: 80-8080\n    port: 80\n    targetPort: 9090\n")
		if code := exitCode(err); code != 1 || !strings.Contains(out, "-    targetPort: 8080") || !strings.Contains(out, "+    targetPort: 9090") {
			t.Errorf("kubectl diff of a changed service: exit %d\n%s", code, out)
		}
		if out := kubectlOK(t, "get", "svc", "plain", "-n", ns, "-o", "jsonpath={.spec.ports[0].targetPort}"); out != "8080" {
			t.Errorf("kubectl diff changed the service: targetPort %s", out)
		}
		// A pod's dry run shows the pod the create would make, and starts
		// nothing: no pod, no lifecycle.
		if out, err := diff(podYAML("dry", nil, "")); exitCode(err) != 1 || !strings.Contains(out, "+  name: dry") {
			t.Errorf("kubectl diff of a pod: %v\n%s", err, out)
		}
		if _, _, err := kubectl(t, "get", "pod", "dry", "-n", ns); err == nil {
			t.Errorf("kubectl diff created the pod it only meant to show")
		}
	})
	t.Run("drain", func(t *testing.T) {
		node := kubectlOK(t, "get", "pods", "-n", ns, "-l", "app=web", "-o", "jsonpath={.items[0].spec.nodeName}")
		defer kubectl(t, "uncordon", node)
		// Only the deployment's pods (a bare pod of another test may carry
		// app=web on the same node, and drain refuses pods with no controller).
		out := kubectlOK(t, "drain", node, "--pod-selector=app=web,pod-template-hash", "--timeout=90s")
		if !strings.Contains(out, "node/"+node+" cordoned\n") || !regexp.MustCompile(`evicting pod `+ns+`/web-`).MatchString(out) || !strings.HasSuffix(out, "node/"+node+" drained\n") {
			t.Errorf("kubectl drain said:\n%s", out)
		}
		if left := kubectlOK(t, "get", "pods", "-n", ns, "-l", "app=web", "--field-selector", "spec.nodeName="+node, "-o", "name"); left != "" {
			t.Errorf("pods left on %s after drain: %s", node, left)
		}
	})
}
