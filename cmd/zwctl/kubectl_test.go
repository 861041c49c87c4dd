package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/zonewright/zonewright/internal/syncbuf"
	zw "github.com/zonewright/zonewright/internal/zwclient"
)

// kubectl runs the machine's kubectl against the test stack, as a user
// pointing it at the dev stack would (--server, --certificate-authority,
// --token), with a discovery cache of the test's own.
func kubectl(t *testing.T, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	cmd := kubectlCmd(t, args...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err = cmd.Run()
	return out.String(), errOut.String(), err
}

func kubectlCmd(t *testing.T, args ...string) *exec.Cmd {
	t.Helper()
	path, lookErr := exec.LookPath("kubectl")
	if lookErr != nil {
		t.Skipf("kubectl is not installed here: %v", lookErr)
	}
	s := stackSettings(t)
	home := t.TempDir()
	cmd := exec.Command(path, append([]string{"--server", s.Server, "--certificate-authority", s.CertificateAuthority, "--token", s.Token,
		"--cache-dir", home + "/cache"}, args...)...)
	cmd.Env = append(os.Environ(), "HOME="+home, "KUBECONFIG="+home+"/none")
	return cmd
}

// The machine's kubectl finds zonewright's resources through discovery:
// the versions, the groups, each resource with its kind, short names,
// scope and verbs, and reads them by those names. (Remove the discovery
// routes to see every command stop at "couldn't get current server API
// group list".)
func TestKubectlDiscoversTheResources(t *testing.T) {
	t.Parallel()
	out, errOut, err := kubectl(t, "api-versions")
	if err != nil {
		t.Fatalf("kubectl api-versions: %v\n%s", err, errOut)
	}
	for _, want := range []string{"v1", "apps/v1", "batch/v1", "snapshot.storage.k8s.io/v1"} {
		if !regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(want) + `$`).MatchString(out) {
			t.Errorf("api-versions lacks %s:\n%s", want, out)
		}
	}
	out, errOut, err = kubectl(t, "api-resources")
	if err != nil {
		t.Fatalf("kubectl api-resources: %v\n%s", err, errOut)
	}
	for _, want := range []string{
		`(?m)^pods +po +v1 +true +Pod$`,
		`(?m)^services +svc +v1 +true +Service$`,
		`(?m)^nodes +no +v1 +false +Node$`,
		`(?m)^namespaces +ns +v1 +false +Namespace$`,
		`(?m)^persistentvolumeclaims +pvc +v1 +true +PersistentVolumeClaim$`,
		`(?m)^deployments +deploy +apps/v1 +true +Deployment$`,
		`(?m)^jobs +batch/v1 +true +Job$`,
	} {
		if !regexp.MustCompile(want).MatchString(out) {
			t.Errorf("api-resources does not match %s:\n%s", want, out)
		}
	}
	if strings.Contains(out, "servicenet") || strings.Contains(out, "tokens") {
		t.Errorf("api-resources shows zonewright's own endpoints:\n%s", out)
	}
	out, errOut, err = kubectl(t, "api-resources", "--categories", "all", "-o", "name")
	if err != nil || out != "pods\nservices\ndeployments.apps\nreplicasets.apps\njobs.batch\n" {
		t.Errorf("kubectl api-resources --categories all: %q %v\n%s", out, err, errOut)
	}
	out, errOut, err = kubectl(t, "get", "--raw", "/api/v1/nodes/node-1")
	if err != nil || !strings.Contains(out, `"name":"node-1"`) {
		t.Errorf("kubectl get --raw: %v %.200s\n%s", err, out, errOut)
	}
	if out, errOut, err = kubectl(t, "get", "nodes", "-o", "name"); err != nil || !strings.Contains(out, "node/node-1\n") {
		t.Errorf("kubectl get nodes -o name: %v %q\n%s", err, out, errOut)
	}
	// Tables from the server: the columns zwctl prints (kubectl's own
	// for these kinds), -o wide's too, and NAMESPACE with -A.
	// (A test beside this one may have cordoned a node meanwhile.)
	if out, errOut, err = kubectl(t, "get", "no"); err != nil || !regexp.MustCompile(`^NAME +STATUS +AGE +VERSION\n(node-\d +Ready(,SchedulingDisabled)? +\S+ +\S+\n)+$`).MatchString(out) {
		t.Errorf("kubectl get no: %v %q\n%s", err, out, errOut)
	}
	namespace(t, "kubectl")
	apply(t, podYAML("web", map[string]string{"app": "web"}, ""), "-n", "kubectl")
	must(t, "wait", "pod/web", "-n", "kubectl", "--for=condition=Ready", "--timeout=60s")
	if out, errOut, err = kubectl(t, "get", "po", "-n", "kubectl"); err != nil || !regexp.MustCompile(`^NAME +READY +STATUS +RESTARTS +AGE\nweb +1/1 +Running +0 +\S+\n$`).MatchString(out) {
		t.Errorf("kubectl get po: %v %q\n%s", err, out, errOut)
	}
	if out, errOut, err = kubectl(t, "get", "po", "-A", "-o", "wide", "--field-selector", "metadata.namespace=kubectl"); err != nil ||
		!regexp.MustCompile(`^NAMESPACE +NAME +READY +STATUS +RESTARTS +AGE +IP +NODE\nkubectl +web +1/1 +Running +0 +\S+ +\S+ +node-\d\n$`).MatchString(out) {
		t.Errorf("kubectl get po -A -o wide: %v %q\n%s", err, out, errOut)
	}
	if out, errOut, err = kubectl(t, "get", "pod", "web", "-n", "kubectl", "-o", "jsonpath={.status.phase}"); err != nil || out != "Running" {
		t.Errorf("kubectl get pod -o jsonpath: %v %q\n%s", err, out, errOut)
	}
	if out, errOut, err = kubectl(t, "get", "deploy", "-A", "-o", "json"); err != nil || !strings.Contains(out, `"kind": "List"`) {
		t.Errorf("kubectl get deploy -A -o json: %v %.300s\n%s", err, out, errOut)
	}
	// Watches in Kubernetes' stream (kubectl asks for JSON, not
	// server-sent events): get -w prints each change as a row as it
	// comes, here the pod's deletion. (Make watchFormatOf always choose
	// server-sent events to see no change printed.)
	watchOut := &syncbuf.Buffer{}
	watchErr := &syncbuf.Buffer{}
	w := kubectlCmd(t, "get", "po", "-n", "kubectl", "-w", "--output-watch-events")
	w.Stdout, w.Stderr = watchOut, watchErr
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	defer w.Process.Kill()
	waitFor := func(what string, re *regexp.Regexp) {
		t.Helper()
		for deadline := time.Now().Add(30 * time.Second); !re.MatchString(watchOut.String()); time.Sleep(100 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("kubectl get -w did not print %s:\n%s\n%s", what, watchOut, watchErr)
			}
		}
	}
	waitFor("the pod", regexp.MustCompile(`(?m)^EVENT +NAME +READY +STATUS +RESTARTS +AGE\nADDED +web +1/1 +Running +0 +\S+$`))
	must(t, "delete", "pod", "web", "-n", "kubectl", "--wait=false")
	waitFor("the deletion", regexp.MustCompile(`(?m)^(MODIFIED|DELETED) +web +`))
	must(t, "wait", "pod/web", "-n", "kubectl", "--for=delete", "--timeout=60s")

	// delete, which sends DeleteOptions and waits for the pod to go.
	apply(t, podYAML("web2", nil, ""), "-n", "kubectl")
	if out, errOut, err = kubectl(t, "delete", "pod", "web2", "-n", "kubectl", "--timeout", "60s"); err != nil || out != "pod \"web2\" deleted\n" {
		t.Errorf("kubectl delete pod: %v %q\n%s", err, out, errOut)
	}
	if r := zwctl(t, "get", "pod", "web2", "-n", "kubectl"); r.code == 0 {
		t.Errorf("the pod is still there after kubectl delete returned: %s", r)
	}
	// kubectl sends --grace-period in the DELETE's body (DeleteOptions).
	// (Make deleteOptions ignore the body to see the pod's own 300 s.)
	apply(t, podYAML("slow", nil, "\n  terminationGracePeriodSeconds: 300"), "-n", "kubectl")
	if out, errOut, err = kubectl(t, "delete", "pod", "slow", "-n", "kubectl", "--grace-period", "1", "--wait=false"); err != nil {
		t.Errorf("kubectl delete --grace-period 1: %v %q\n%s", err, out, errOut)
	}
	if r := zwctl(t, "get", "pod", "slow", "-n", "kubectl", "-o", "jsonpath={.metadata.deletionGracePeriodSeconds}"); r.code == 0 && r.out != "1" {
		t.Errorf("the pod's grace period after kubectl delete --grace-period 1: %q, want 1", r.out)
	}

	// The server's version is a semantic version kubectl parses.
	if out, errOut, err = kubectl(t, "version"); err != nil || !regexp.MustCompile(`(?m)^Server Version: v\d+\.\d+\.\d+`).MatchString(out) {
		t.Errorf("kubectl version: %v %q\n%s", err, out, errOut)
	}
}

// stackSettings are the test stack's server, token and CA, as its
// config file names them.
func stackSettings(t *testing.T) zw.Settings {
	t.Helper()
	cfg, err := zw.LoadConfig(stack.config)
	if err != nil {
		t.Fatal(err)
	}
	s, err := cfg.Resolve(zw.Overrides{})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// The machine's kubectl reads a container's log and runs commands in it:
// exec speaks Kubernetes' channel protocol (v5.channel.k8s.io) over the
// same route, with its arguments verbatim, stdin to its end, and the
// command's exit code as kubectl's. (Drop KubernetesSubprotocol from
// execstream's accepted subprotocols to see kubectl exec refused.)
func TestKubectlExecAndLogs(t *testing.T) {
	t.Parallel()
	namespace(t, "kexec")
	apply(t, `apiVersion: v1
kind: Pod
metadata:
  name: shell
spec:
  containers:
  - name: main
    image: base
    command: ["/bin/sh", "-c", "echo started; exec sleep 600"]
`, "-n", "kexec")
	must(t, "wait", "pod/shell", "-n", "kexec", "--for=condition=Ready", "--timeout=60s")

	var out, errOut string
	var err error
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if out, errOut, err = kubectl(t, "logs", "shell", "-n", "kexec"); err == nil && out == "started\n" || time.Now().After(deadline) {
			break
		}
	}
	if err != nil || out != "started\n" {
		t.Errorf("kubectl logs: %v %q\n%s", err, out, errOut)
	}
	if out, errOut, err = kubectl(t, "exec", "shell", "-n", "kexec", "--", "echo", "a b;c", "$HOME"); err != nil || out != "a b;c $HOME\n" {
		t.Errorf("kubectl exec: %v %q\n%s", err, out, errOut)
	}
	cmd := kubectlCmd(t, "exec", "-i", "shell", "-n", "kexec", "--", "sh", "-c", "cat; echo done")
	cmd.Stdin = strings.NewReader("through stdin\n")
	if b, err := cmd.CombinedOutput(); err != nil || string(b) != "through stdin\ndone\n" {
		t.Errorf("kubectl exec -i: %v %q", err, b)
	}
	_, errOut, err = kubectl(t, "exec", "shell", "-n", "kexec", "--", "sh", "-c", "echo oops >&2; exit 3")
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 3 || !strings.Contains(errOut, "oops\n") || !strings.Contains(errOut, "command terminated with exit code 3") {
		t.Errorf("kubectl exec of a command that exits 3: %v %q", err, errOut)
	}
}

// kubectl auth can-i asks zonewright's roles (a SelfSubjectAccessReview):
// the admin may create pods; a view token of a namespace may read its
// pods but not create them, nor read another namespace's. (Drop the
// selfsubjectaccessreviews route to see can-i refused.)
func TestKubectlAuthCanI(t *testing.T) {
	t.Parallel()
	namespace(t, "cani")
	r := zwctl(t, "token", "create", "-n", "cani", "--role", "view", "--ttl", "1h")
	if r.code != 0 {
		t.Fatalf("token create: %s", r)
	}
	view := strings.TrimSpace(r.out)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"create", "pods", "-n", "cani"}, "yes"},
		{[]string{"get", "pods", "-n", "cani", "--token", view}, "yes"},
		{[]string{"create", "pods", "-n", "cani", "--token", view}, "no"},
		{[]string{"get", "pods", "-n", "default", "--token", view}, "no"},
		{[]string{"create", "pods/exec", "-n", "cani", "--token", view}, "no"},
	} {
		out, errOut, err := kubectl(t, append([]string{"auth", "can-i"}, c.args...)...)
		// A denial says why after the no, as zonewright's 403 would.
		if answer, _, _ := strings.Cut(strings.TrimSpace(out), " "); answer != c.want || (err == nil) != (c.want == "yes") {
			t.Errorf("kubectl auth can-i %v: %q (%v)\n%s", c.args, out, err, errOut)
		}
	}
}
