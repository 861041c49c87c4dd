package main

import (
	"fmt"
	"strings"
	"testing"
)

func revertingDeployment(command string) string {
	return fmt.Sprintf(`apiVersion: apps/v1
kind: Deployment
metadata:
  name: flaky
spec:
  replicas: 2
  autoRevert: true
  progressDeadlineSeconds: 10
  # A pod that exits is Ready for a moment before its exit is seen; 5 s
  # of readiness are asked before a pod counts as available.
  minReadySeconds: 5
  selector:
    matchLabels: {app: flaky}
  template:
    metadata:
      labels: {app: flaky}
    spec:
      containers:
      - name: main
        image: base
        command: ["/bin/sh", "-c", %q]
`, command)
}

// zwctl rollout status follows a rollout that autoRevert undoes and exits
// 1 saying so, though the reverted revision is soon available again and
// the condition that said it is gone. (Drop the revertedSince check in
// the status loop to see it print "successfully rolled out".)
func TestRolloutStatusFailsWhenAutoRevertUndoesIt(t *testing.T) {
	t.Parallel()
	const ns = "krevert"
	namespace(t, ns)
	apply(t, revertingDeployment("exec sleep 3600"), "-n", ns)
	must(t, "rollout", "status", "deploy/flaky", "-n", ns, "--timeout=90s")
	apply(t, revertingDeployment("exit 3"), "-n", ns)
	r := zwctl(t, "rollout", "status", "deploy/flaky", "-n", ns, "--timeout=120s")
	if r.code != 1 {
		d := zwctl(t, "get", "deploy", "flaky", "-n", ns, "-o", "yaml")
		p := zwctl(t, "get", "pods", "-n", ns, "-o", "wide")
		t.Logf("the deployment:\n%s\n%s", d.out, p.out)
	}
	if r.code != 1 || !strings.Contains(r.out, `deployment "flaky" rolled back: `) || !strings.Contains(r.out, "reverted to revision ") {
		t.Fatalf("rollout status of a rollout autoRevert undid: %s", r)
	}
	// The reverted revision runs again, and a rollout status asked now
	// follows it to the end.
	if out := must(t, "get", "deploy", "flaky", "-n", ns, "-o", "jsonpath={.spec.template.spec.containers[0].command[2]}"); out != "exec sleep 3600" {
		t.Fatalf("the template after the revert: %q", out)
	}
	if r := zwctl(t, "rollout", "status", "deploy/flaky", "-n", ns, "--timeout=90s"); r.code != 0 {
		d := zwctl(t, "get", "deploy", "flaky", "-n", ns, "-o", "yaml")
		p := zwctl(t, "get", "pods", "-n", ns, "-o", "wide")
		t.Fatalf("rollout status after the revert: %s\n%s\n%s", r, d.out, p.out)
	}
}
