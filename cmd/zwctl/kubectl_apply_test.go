package main

import (
	"fmt"
	"strings"
	"testing"
)

func serverSideYAML(replicas int, image string) string {
	return fmt.Sprintf(`apiVersion: apps/v1
kind: Deployment
metadata:
  name: ssa
  labels: {app: ssa}
spec:
  replicas: %d
  selector:
    matchLabels: {app: ssa}
  template:
    metadata:
      labels: {app: ssa}
    spec:
      containers:
      - name: main
        image: %s
        command: ["/bin/sh", "-c", "exec sleep 3600"]
`, replicas, image)
}

// The machine's kubectl applies server-side: the first apply creates,
// another manager's apply of a field kubectl owns is refused with
// Kubernetes' conflict message until forced, a dry run changes nothing,
// and managedFields name both managers. (Make patchWith refuse
// application/apply-patch+yaml again to see the first apply fail.)
func TestKubectlServerSideApply(t *testing.T) {
	t.Parallel()
	const ns = "kssa"
	namespace(t, ns)
	out, errOut, err := kubectlIn(t, serverSideYAML(1, "base"), "apply", "--server-side", "-n", ns, "-f", "-")
	if err != nil || out != "deployment.apps/ssa serverside-applied\n" {
		t.Fatalf("kubectl apply --server-side: %v %q\n%s", err, out, errOut)
	}
	out, errOut, err = kubectlIn(t, serverSideYAML(1, "base"), "apply", "--server-side", "-n", ns, "-f", "-")
	if err != nil || out != "deployment.apps/ssa serverside-applied\n" {
		t.Fatalf("the same apply again: %v %q\n%s", err, out, errOut)
	}
	out, errOut, err = kubectlIn(t, serverSideYAML(3, "base"), "apply", "--server-side", "--field-manager=ops", "-n", ns, "-f", "-")
	if err == nil || !strings.Contains(errOut, `Apply failed with 1 conflict: conflict with "kubectl": .spec.replicas`) {
		t.Fatalf("another manager's apply of replicas: %v %q\n%s", err, out, errOut)
	}
	out, errOut, err = kubectlIn(t, serverSideYAML(5, "base"), "apply", "--server-side", "--dry-run=server", "--force-conflicts", "--field-manager=ops", "-n", ns, "-f", "-")
	if err != nil || !strings.Contains(out, "serverside-applied (server dry run)") {
		t.Fatalf("a dry run: %v %q\n%s", err, out, errOut)
	}
	if out, _, err := kubectl(t, "get", "deploy", "ssa", "-n", ns, "-o", "jsonpath={.spec.replicas}"); err != nil || out != "1" {
		t.Fatalf("replicas after the conflict and the dry run: %v %q", err, out)
	}
	out, errOut, err = kubectlIn(t, serverSideYAML(3, "base"), "apply", "--server-side", "--force-conflicts", "--field-manager=ops", "-n", ns, "-f", "-")
	if err != nil || out != "deployment.apps/ssa serverside-applied\n" {
		t.Fatalf("the forced apply: %v %q\n%s", err, out, errOut)
	}
	out, errOut, err = kubectl(t, "get", "deploy", "ssa", "-n", ns, "--show-managed-fields", "-o",
		`jsonpath={.spec.replicas}{range .metadata.managedFields[*]} {.manager}:{.operation}{end}`)
	if err != nil || out != "3 kubectl:Apply ops:Apply" {
		t.Fatalf("replicas and managers after the forced apply: %v %q\n%s", err, out, errOut)
	}
	// kubectl's other writes are recorded too, as Updates by "kubectl"
	// (its User-Agent): after kubectl scale, the replicas are its.
	if out, errOut, err := kubectl(t, "scale", "deploy/ssa", "-n", ns, "--replicas=2"); err != nil {
		t.Fatalf("kubectl scale: %v %q\n%s", err, out, errOut)
	}
	out, errOut, err = kubectlIn(t, serverSideYAML(3, "base"), "apply", "--server-side", "--field-manager=ops", "-n", ns, "-f", "-")
	if err == nil || !strings.Contains(errOut, `conflict with "kubectl" using apps/v1: .spec.replicas`) {
		t.Fatalf("an apply of replicas after kubectl scale: %v %q\n%s", err, out, errOut)
	}
}
