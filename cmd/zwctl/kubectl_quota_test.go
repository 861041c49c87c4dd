package main

import (
	"regexp"
	"strings"
	"testing"
)

// The machine's kubectl bounds a namespace with a ResourceQuota: a pod
// past it is refused with Kubernetes' Forbidden answer, get and describe
// show used against hard, and a deployment whose pods would pass it says
// so in its ReplicaFailure condition while it keeps what fits. (Make
// admitQuota return nil to see the second pod made.)
func TestKubectlResourceQuota(t *testing.T) {
	t.Parallel()
	const ns = "kquota"
	namespace(t, ns)
	if out, errOut, err := kubectl(t, "create", "quota", "q", "--hard=pods=2,services=0", "-n", ns); err != nil || out != "resourcequota/q created\n" {
		t.Fatalf("kubectl create quota: %v %q\n%s", err, out, errOut)
	}
	if out, errOut, err := kubectl(t, "run", "one", "--image=base", "-n", ns, "--", "sleep", "3600"); err != nil {
		t.Fatalf("kubectl run within the quota: %v %q\n%s", err, out, errOut)
	}
	_, errOut, err := kubectl(t, "create", "service", "clusterip", "web", "--tcp=80:8080", "-n", ns)
	if err == nil || !strings.Contains(errOut, `services "web" is forbidden: exceeded quota: q, requested: services=1, used: services=0, limited: services=0`) {
		t.Fatalf("a service past services=0: %v\n%s", err, errOut)
	}
	out, errOut, err := kubectl(t, "get", "quota", "-n", ns)
	if err != nil || !strings.Contains(out, "pods: 1/2, services: 0/0") {
		t.Fatalf("kubectl get quota: %v %q\n%s", err, out, errOut)
	}
	// A deployment of 3 gets the one pod that fits, and says why not more.
	if out, errOut, err := kubectl(t, "create", "deployment", "many", "--image=base", "--replicas=3", "-n", ns, "--", "sleep", "3600"); err != nil {
		t.Fatalf("kubectl create deployment: %v %q\n%s", err, out, errOut)
	}
	eventually(t, "the deployment's ReplicaFailure names the quota", func() bool {
		out, _, err := kubectl(t, "get", "deploy", "many", "-n", ns, "-o", `jsonpath={.status.conditions[?(@.type=="ReplicaFailure")].message}`)
		return err == nil && strings.Contains(out, "is forbidden: exceeded quota: q, requested: pods=1, used: pods=2, limited: pods=2")
	})
	out, errOut, err = kubectl(t, "describe", "quota", "q", "-n", ns)
	if err != nil || !regexp.MustCompile(`(?m)^Resource +Used +Hard\n(.*\n)*pods +2 +2\nservices +0 +0$`).MatchString(out) {
		t.Fatalf("kubectl describe quota: %v %q\n%s", err, out, errOut)
	}
}
