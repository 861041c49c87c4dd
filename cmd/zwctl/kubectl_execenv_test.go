package main

import (
	"strings"
	"testing"
	"time"
)

// envLines is the NAME=value lines of env's output that name one of vars.
func envLines(out string, vars ...string) map[string]string {
	got := map[string]string{}
	for _, line := range strings.Split(out, "\n") {
		name, value, ok := strings.Cut(line, "=")
		if !ok {
			continue
		}
		for _, v := range vars {
			if name == v {
				got[name] = value
			}
		}
	}
	return got
}

// kubectl exec and zwctl exec run with the container's environment, as in
// Kubernetes: the same literal values, fields of the pod and secret
// values as the container's own process, which wrote its env to its log;
// another pod's exec sees none of them. (Make the node's envSession hand
// the command no environment to see the exec lack every variable.)
func TestExecSeesTheContainersEnvironment(t *testing.T) {
	t.Parallel()
	namespace(t, "kexecenv")
	const password = `correct horse $battery 'staple' "x"`
	apply(t, `apiVersion: v1
kind: Secret
metadata:
  name: db
stringData:
  password: '`+strings.ReplaceAll(password, "'", "''")+`'
---
apiVersion: v1
kind: Pod
metadata:
  name: app
spec:
  containers:
  - name: main
    image: base
    command: ["/bin/sh", "-c", "env; echo ---; exec sleep 600"]
    env:
    - name: GREETING
      value: hello world
    - name: MY_POD_NAME
      valueFrom:
        fieldRef:
          fieldPath: metadata.name
    - name: MY_POD_IP
      valueFrom:
        fieldRef:
          fieldPath: status.podIP
    - name: DB_PASSWORD
      valueFrom:
        secretKeyRef:
          name: db
          key: password
---
apiVersion: v1
kind: Pod
metadata:
  name: other
spec:
  containers:
  - name: main
    image: base
    command: ["/bin/sh", "-c", "exec sleep 600"]
`, "-n", "kexecenv")
	must(t, "wait", "pod/app", "pod/other", "-n", "kexecenv", "--for=condition=Ready", "--timeout=90s")
	podIP, errOut, err := kubectl(t, "get", "pod", "app", "-n", "kexecenv", "-o", "jsonpath={.status.podIP}")
	if err != nil || podIP == "" {
		t.Fatalf("the pod's IP: %v %q\n%s", err, podIP, errOut)
	}
	vars := []string{"GREETING", "MY_POD_NAME", "MY_POD_IP", "DB_PASSWORD", "POD_NAMESPACE"}
	want := map[string]string{"GREETING": "hello world", "MY_POD_NAME": "app", "MY_POD_IP": podIP, "DB_PASSWORD": password, "POD_NAMESPACE": "kexecenv"}
	same := func(what string, got map[string]string) {
		t.Helper()
		for _, v := range vars {
			if got[v] != want[v] {
				t.Errorf("%s: %s=%q, want %q (saw %q)", what, v, got[v], want[v], got)
			}
		}
	}

	var logs string
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		if logs, errOut, err = kubectl(t, "logs", "app", "-n", "kexecenv"); err == nil && strings.Contains(logs, "---\n") || time.Now().After(deadline) {
			break
		}
	}
	if err != nil {
		t.Fatalf("kubectl logs: %v\n%s", err, errOut)
	}
	own, _, _ := strings.Cut(logs, "---\n")
	same("the container's own process", envLines(own, vars...))

	out, errOut, err := kubectl(t, "exec", "app", "-n", "kexecenv", "--", "env")
	if err != nil {
		t.Fatalf("kubectl exec: %v\n%s", err, errOut)
	}
	same("kubectl exec", envLines(out, vars...))
	if strings.Contains(out, "TERM=") {
		t.Errorf("kubectl exec without -t has a TERM:\n%s", out)
	}

	r := zwctl(t, "exec", "app", "-n", "kexecenv", "--", "env")
	if r.code != 0 {
		t.Fatalf("zwctl exec: %s", r)
	}
	same("zwctl exec", envLines(r.out, vars...))

	// Another pod's exec: its own name, none of this pod's variables.
	out, errOut, err = kubectl(t, "exec", "other", "-n", "kexecenv", "--", "env")
	if err != nil {
		t.Fatalf("kubectl exec other: %v\n%s", err, errOut)
	}
	if strings.Contains(out, "correct horse") || strings.Contains(out, "GREETING") {
		t.Errorf("another pod's exec sees this pod's environment:\n%s", out)
	}
	if got := envLines(out, "POD_NAME"); got["POD_NAME"] != "other" {
		t.Errorf("another pod's exec: POD_NAME=%q\n%s", got["POD_NAME"], out)
	}
}
