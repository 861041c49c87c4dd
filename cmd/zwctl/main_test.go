package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/zonewright/zonewright/internal/simtest"
	"github.com/zonewright/zonewright/internal/syncbuf"
)

// stack is the one dev stack (`zonewright dev`, three simulated nodes)
// every test of this package talks to, through the config it writes.
var stack struct {
	dataDir, config, api string
}

func TestMain(m *testing.M) { os.Exit(testMain(m)) }

func testMain(m *testing.M) int {
	dir, err := os.MkdirTemp("", "zwctl-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	stop, err := startStack(dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, "dev stack:", err)
		return 1
	}
	defer stop()
	return m.Run()
}

func freePort() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

func startStack(dir string) (func(), error) {
	bin := filepath.Join(dir, "bin")
	if err := simtest.BuildBinaries(bin, "zonewright", "illumos-sim"); err != nil {
		return nil, err
	}
	var addrs [4]string
	for i := range addrs {
		a, err := freePort()
		if err != nil {
			return nil, err
		}
		addrs[i] = a
	}
	stack.api, stack.dataDir = addrs[0], filepath.Join(dir, "data")
	stack.config = filepath.Join(stack.dataDir, "zwctl.yaml")
	cmd := exec.Command(filepath.Join(bin, "zonewright"), "dev", "--data-dir", stack.dataDir, "--listen", addrs[0],
		"--temporal-address", addrs[1], "--ui-address", addrs[2], "--dns-listen", addrs[3], "--registry", "", "--log-level", "warn")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	var output bytes.Buffer
	up, exited := make(chan bool, 1), make(chan error, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			output.WriteString(sc.Text() + "\n")
			if strings.Contains(sc.Text(), "Ctrl-C stops everything") {
				up <- true
			}
		}
		exited <- cmd.Wait()
	}()
	stop := func() {
		_ = cmd.Process.Signal(syscall.SIGINT)
		select {
		case <-exited:
		case <-time.After(20 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
	}
	select {
	case <-up:
	case err := <-exited:
		return nil, fmt.Errorf("exited during start: %v\n%s", err, output.String())
	case <-time.After(2 * time.Minute):
		stop()
		return nil, fmt.Errorf("not up within 2 minutes:\n%s", output.String())
	}
	var out, errOut bytes.Buffer
	if code := run(context.Background(), []string{"wait", "node/node-1", "node/node-2", "node/node-3", "--for=condition=Ready", "--timeout=60s"},
		streams{in: strings.NewReader(""), out: &out, errOut: &errOut}, testEnv(nil)); code != 0 {
		stop()
		return nil, fmt.Errorf("nodes not ready: %s%s", out.String(), errOut.String())
	}
	return stop, nil
}

func testEnv(extra map[string]string) func(string) string {
	return func(k string) string {
		if v, ok := extra[k]; ok {
			return v
		}
		if k == "ZWCONFIG" {
			return stack.config
		}
		return ""
	}
}

// result is what one zwctl run printed and its exit code.
type result struct {
	out, err string
	code     int
}

func (r result) String() string {
	return fmt.Sprintf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.out, r.err)
}

// zwctl runs the zwctl command line in-process, as the binary does.
func zwctl(t *testing.T, args ...string) result {
	t.Helper()
	return zwctlWith(t, "", nil, args...)
}

func zwctlWith(t *testing.T, stdin string, env map[string]string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	var out, errOut bytes.Buffer
	code := run(ctx, args, streams{in: strings.NewReader(stdin), out: &out, errOut: &errOut}, testEnv(env))
	return result{out.String(), errOut.String(), code}
}

// must runs zwctl and fails the test unless it exits 0.
func must(t *testing.T, args ...string) string {
	t.Helper()
	r := zwctl(t, args...)
	if r.code != 0 {
		t.Fatalf("zwctl %s: %s", strings.Join(args, " "), r)
	}
	return r.out
}

// apply applies YAML text from standard input.
func apply(t *testing.T, yaml string, args ...string) string {
	t.Helper()
	r := zwctlWith(t, yaml, nil, append([]string{"apply", "-f", "-"}, args...)...)
	if r.code != 0 {
		t.Fatalf("apply: %s\n%s", r, yaml)
	}
	return r.out
}

// namespace makes a namespace of the test's own.
func namespace(t *testing.T, name string) {
	t.Helper()
	apply(t, "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: "+name+"\n")
}

func podYAML(name string, labels map[string]string, extraSpec string) string {
	var l strings.Builder
	for k, v := range labels {
		fmt.Fprintf(&l, "\n    %s: %s", k, v)
	}
	lbl := ""
	if len(labels) > 0 {
		lbl = "\n  labels:" + l.String()
	}
	return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: %s%s
spec:%s
  containers:
  - name: main
    image: base
    command: ["/bin/sh", "-c", "sleep 3600"]
`, name, lbl, extraSpec)
}

func deploymentYAML(name string, replicas int, extraSpec, podSpec string) string {
	return fmt.Sprintf(`apiVersion: apps/v1
kind: Deployment
metadata:
  name: %[1]s
spec:
  replicas: %[2]d%[3]s
  selector:
    matchLabels: {app: %[1]s}
  template:
    metadata:
      labels: {app: %[1]s}
    spec:
      containers:
      - name: main
        image: base
        command: ["/bin/sh", "-c", "sleep 3600"]%[4]s
`, name, replicas, extraSpec, podSpec)
}

// background runs zwctl until the returned stop is called; stop returns
// its exit code.
func background(t *testing.T, out io.Writer, args ...string) (stop func() int) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	var errOut syncbuf.Buffer
	go func() {
		done <- run(ctx, args, streams{in: strings.NewReader(""), out: out, errOut: &errOut}, testEnv(nil))
	}()
	t.Cleanup(cancel)
	return func() int {
		cancel()
		select {
		case code := <-done:
			if code != 0 {
				t.Errorf("zwctl %s: exit %d: %s", strings.Join(args, " "), code, errOut.String())
			}
			return code
		case <-time.After(10 * time.Second):
			t.Fatalf("zwctl %s did not stop", strings.Join(args, " "))
			return -1
		}
	}
}

// eventually retries check until it passes or 60 s have passed.
func eventually(t *testing.T, what string, check func() bool) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !check() {
		if time.Now().After(deadline) {
			t.Fatalf("not within 60s: %s", what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
