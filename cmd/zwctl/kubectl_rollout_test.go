package main

import (
	"fmt"
	"regexp"
	"strings"
	"testing"
)

// rolloutYAML is deployment web with a change-cause and the command its
// pods run: each new command is a new revision.
func rolloutYAML(cause, command string) string {
	return fmt.Sprintf(`apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  annotations:
    kubernetes.io/change-cause: %s
spec:
  replicas: 2
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web, tier: front}
    spec:
      containers:
      - name: main
        image: base
        command: ["/bin/sh", "-c", %q]
`, cause, command)
}

// The machine's kubectl follows a deployment's rollouts through its
// ReplicaSets: get rs, rollout history (with each revision's
// change-cause, and one revision's template), describe's new and old
// ReplicaSets, get all, and rollout status. (Remove the replicasets
// routes to see rollout history fail with "the server could not find
// the requested resource".)
func TestKubectlFollowsRolloutsThroughReplicaSets(t *testing.T) {
	t.Parallel()
	const ns = "krollout"
	namespace(t, ns)
	for i, cause := range []string{"first", "second", "third"} {
		apply(t, rolloutYAML(cause, fmt.Sprintf("sleep %d", 3601+i)), "-n", ns)
		if out, errOut, err := kubectl(t, "rollout", "status", "deploy/web", "-n", ns, "--timeout=120s"); err != nil ||
			!strings.HasSuffix(out, "deployment \"web\" successfully rolled out\n") {
			t.Fatalf("kubectl rollout status after the %s template: %v %q\n%s", cause, err, out, errOut)
		}
	}

	out, errOut, err := kubectl(t, "rollout", "history", "deploy/web", "-n", ns)
	if err != nil || !regexp.MustCompile(`^deployment.apps/web *\nREVISION +CHANGE-CAUSE\n1 +first\n2 +second\n3 +third\n\n?$`).MatchString(out) {
		t.Errorf("kubectl rollout history: %v %q\n%s", err, out, errOut)
	}
	out, errOut, err = kubectl(t, "rollout", "history", "deploy/web", "-n", ns, "--revision=2")
	if err != nil || !strings.HasPrefix(out, "deployment.apps/web with revision #2\nPod Template:\n") ||
		!regexp.MustCompile(`pod-template-hash=\w+`).MatchString(out) || !strings.Contains(out, "sleep 3602") || strings.Contains(out, "sleep 3603") {
		t.Errorf("kubectl rollout history --revision=2: %v %q\n%s", err, out, errOut)
	}
	if out, errOut, err = kubectl(t, "rollout", "history", "deploy/web", "-n", ns, "--revision=7"); err == nil || !strings.Contains(errOut, "unable to find the specified revision") {
		t.Errorf("kubectl rollout history --revision=7: %v %q\n%s", err, out, errOut)
	}

	// Each revision is a ReplicaSet; the newest wants the two pods and
	// has them, the old ones want none and have none left.
	out, errOut, err = kubectl(t, "get", "rs", "-n", ns, "-o", `jsonpath={range .items[*]}{.metadata.annotations.deployment\.kubernetes\.io/revision}={.metadata.name}{"\n"}{end}`)
	names := map[string]string{}
	for _, line := range strings.Fields(out) {
		rev, name, _ := strings.Cut(line, "=")
		names[rev] = name
	}
	if err != nil || len(names) != 3 || names["3"] == "" {
		t.Fatalf("kubectl get rs -o jsonpath: %v %q\n%s", err, out, errOut)
	}
	current := names["3"]
	// The counts are the pods' as they are now: a pod replaced after the
	// rollout completed (a failure under load) is counted again once its
	// replacement is Ready.
	hash := strings.TrimPrefix(current, "web-")
	eventually(t, "kubectl get rs shows the newest ReplicaSet 2/2/2 and the old ones empty", func() bool {
		out, errOut, err := kubectl(t, "get", "rs", "-n", ns)
		if err != nil || !regexp.MustCompile(`^NAME +DESIRED +CURRENT +READY +AGE\n`).MatchString(out) ||
			!regexp.MustCompile(`(?m)^`+current+` +2 +2 +2 +\S+$`).MatchString(out) ||
			len(regexp.MustCompile(`(?m)^web-\w+ +0 +0 +0 +\S+$`).FindAllString(out, -1)) != 2 {
			t.Logf("kubectl get rs: %v %q\n%s", err, out, errOut)
			return false
		}
		out, errOut, err = kubectl(t, "get", "rs", current, "-n", ns, "-o", "wide")
		if err != nil || !regexp.MustCompile(`^NAME +DESIRED +CURRENT +READY +AGE +CONTAINERS +IMAGES +SELECTOR\n`+current+` +2 +2 +2 +\S+ +main +\S+ +app=web,pod-template-hash=`+hash+`\n$`).MatchString(out) {
			t.Logf("kubectl get rs -o wide: %v %q\n%s", err, out, errOut)
			return false
		}
		return true
	})
	// The ReplicaSet's name is its pods' hash.
	eventually(t, "only the newest revision's pods are left", func() bool {
		out, _, err := kubectl(t, "get", "pods", "-n", ns, "-l", "app=web", "-o", "name")
		pods := strings.Fields(out)
		for _, p := range pods {
			if !strings.HasPrefix(p, "pod/"+current+"-") {
				return false
			}
		}
		return err == nil && len(pods) == 2
	})

	out, errOut, err = kubectl(t, "describe", "deploy", "web", "-n", ns)
	if err != nil || !regexp.MustCompile(`(?m)^NewReplicaSet: +`+current+` \(2/2 replicas created\)$`).MatchString(out) ||
		!regexp.MustCompile(`(?m)^OldReplicaSets: +web-\w+ \(0/0 replicas created\), web-\w+ \(0/0 replicas created\)$`).MatchString(out) ||
		!regexp.MustCompile(`(?m)^ +Progressing +True +NewReplicaSetAvailable$`).MatchString(out) {
		t.Errorf("kubectl describe deploy: %v %q\n%s", err, out, errOut)
	}
	if out, errOut, err = kubectl(t, "get", "all", "-n", ns); err != nil || !strings.Contains(out, "replicaset.apps/"+current+" ") ||
		!strings.Contains(out, "deployment.apps/web ") {
		t.Errorf("kubectl get all: %v %q\n%s", err, out, errOut)
	}

	// undo --dry-run=client shows the template it would put back, from
	// the ReplicaSet of that revision.
	out, errOut, err = kubectl(t, "rollout", "undo", "deploy/web", "-n", ns, "--to-revision=1", "--dry-run=client")
	if err != nil || !strings.Contains(out, "sleep 3601") || strings.Contains(out, "sleep 3603") {
		t.Errorf("kubectl rollout undo --dry-run=client: %v %q\n%s", err, out, errOut)
	}
	// Undone (kubectl patches the deployment with the ReplicaSet's
	// template and annotations), revision 1 comes back as revision 4
	// with its change-cause.
	if out, errOut, err = kubectl(t, "rollout", "undo", "deploy/web", "-n", ns, "--to-revision=1"); err != nil || out != "deployment.apps/web rolled back\n" {
		t.Fatalf("kubectl rollout undo: %v %q\n%s", err, out, errOut)
	}
	if out, errOut, err := kubectl(t, "rollout", "status", "deploy/web", "-n", ns, "--timeout=120s"); err != nil ||
		!strings.HasSuffix(out, "deployment \"web\" successfully rolled out\n") {
		t.Fatalf("kubectl rollout status after the undo: %v %q\n%s", err, out, errOut)
	}
	out, errOut, err = kubectl(t, "rollout", "history", "deploy/web", "-n", ns)
	if err != nil || !regexp.MustCompile(`^deployment.apps/web *\nREVISION +CHANGE-CAUSE\n2 +second\n3 +third\n4 +first\n\n?$`).MatchString(out) {
		t.Errorf("kubectl rollout history after the undo: %v %q\n%s", err, out, errOut)
	}
	if out, errOut, err = kubectl(t, "get", "rs", names["1"], "-n", ns, "-o", `jsonpath={.metadata.annotations.deployment\.kubernetes\.io/revision} {.spec.replicas}`); err != nil || out != "4 2" {
		t.Errorf("the first revision's ReplicaSet after the undo: %v %q\n%s", err, out, errOut)
	}

	// A ReplicaSet is its deployment's to change.
	if out, errOut, err = kubectl(t, "delete", "rs", current, "-n", ns); err == nil || !strings.Contains(errOut, "managed by their deployment") {
		t.Errorf("kubectl delete rs: %v %q\n%s", err, out, errOut)
	}
}

// kubectl rollout status fails as kubectl's does against Kubernetes when
// a rollout exceeds its progress deadline: here pods that never get
// Ready. (Make writeStatus never set ProgressDeadlineExceeded to see
// kubectl wait until its timeout.)
func TestKubectlRolloutStatusFailsOnTheProgressDeadline(t *testing.T) {
	t.Parallel()
	const ns = "kdeadline"
	namespace(t, ns)
	never := `
        readinessProbe:
          exec:
            command: ["/bin/false"]
          periodSeconds: 1`
	apply(t, deploymentYAML("stuck", 1, "\n  progressDeadlineSeconds: 2", never), "-n", ns)
	out, errOut, err := kubectl(t, "rollout", "status", "deploy/stuck", "-n", ns, "--timeout=90s")
	if err == nil || !strings.Contains(errOut, `error: deployment "stuck" exceeded its progress deadline`) {
		t.Errorf("kubectl rollout status of a stuck deployment: %v %q\n%s", err, out, errOut)
	}
	out, errOut, err = kubectl(t, "get", "rs", "-n", ns, "-l", "app=stuck")
	if err != nil || !regexp.MustCompile(`(?m)^stuck-\w+ +1 +1 +0 +\S+$`).MatchString(out) {
		t.Errorf("kubectl get rs of a stuck deployment: %v %q\n%s", err, out, errOut)
	}
}
