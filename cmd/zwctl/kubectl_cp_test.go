package main

import (
	"bytes"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/creack/pty"
)

// kubectl cp copies into and out of a container through exec (tar in the
// container), and exec -it runs the command on a terminal with its exit
// code. (Make execstream.ParseQuery drop tty to see exec -it fail.)
func TestKubectlCopyAndTerminal(t *testing.T) {
	t.Parallel()
	const ns = "kcp"
	namespace(t, ns)
	apply(t, `apiVersion: v1
kind: Pod
metadata:
  name: box
spec:
  containers:
  - name: main
    image: base
    command: ["/bin/sh", "-c", "exec sleep 600"]
`, "-n", ns)
	must(t, "wait", "pod/box", "-n", ns, "--for=condition=Ready", "--timeout=60s")

	dir := t.TempDir()
	in := filepath.Join(dir, "in.txt")
	content := "copied through tar\n" + strings.Repeat("x", 100000) + "\n"
	if err := os.WriteFile(in, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, errOut, err := kubectl(t, "cp", in, ns+"/box:in.txt"); err != nil {
		t.Fatalf("kubectl cp into the pod: %v %q\n%s", err, out, errOut)
	}
	if out, errOut, err := kubectl(t, "exec", "box", "-n", ns, "--", "head", "-n", "1", "in.txt"); err != nil || out != "copied through tar\n" {
		t.Fatalf("the copied file in the pod: %v %q\n%s", err, out, errOut)
	}
	back := filepath.Join(dir, "back.txt")
	if out, errOut, err := kubectl(t, "cp", ns+"/box:in.txt", back); err != nil {
		t.Fatalf("kubectl cp out of the pod: %v %q\n%s", err, out, errOut)
	}
	if b, err := os.ReadFile(back); err != nil || string(b) != content {
		t.Fatalf("the file copied back: %v, %d bytes (want %d)", err, len(b), len(content))
	}

	cmd := kubectlCmd(t, "exec", "-it", "box", "-n", ns, "--", "sh", "-c", "test -t 0 && test -t 1 && echo on-a-terminal; exit 4")
	term, err := pty.Start(cmd)
	if err != nil {
		t.Fatal(err)
	}
	defer term.Close()
	var out bytes.Buffer
	read := make(chan struct{})
	go func() { _, _ = io.Copy(&out, term); close(read) }()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err = <-done:
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatalf("kubectl exec -it did not end: %q", out.String())
	}
	select {
	case <-read:
	case <-time.After(2 * time.Second):
	}
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 4 || !strings.Contains(out.String(), "on-a-terminal") {
		t.Fatalf("kubectl exec -it: %v %q", err, out.String())
	}
}
