//go:build !illumos && !nodev

package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/miekg/dns"
	"go.temporal.io/sdk/client"

	"github.com/zonewright/zonewright/internal/auth"
	"github.com/zonewright/zonewright/internal/devnodes"
	"github.com/zonewright/zonewright/internal/model"
	"github.com/zonewright/zonewright/internal/pki"
	"github.com/zonewright/zonewright/internal/zwclient"
	"github.com/zonewright/zonewright/workflows"

	"github.com/zonewright/zonewright/internal/syncbuf"
)

// freeAddr is a free TCP port on 127.0.0.1.
func freeAddr(t *testing.T) string {
	t.Helper()
	return freeAddrOn(t, "127.0.0.1")
}

// freeAddrOn is a free TCP port on the loopback address ip.
func freeAddrOn(t *testing.T, ip string) string {
	t.Helper()
	// Below Linux's ephemeral range (32768 up): a port the kernel picked
	// there may be another connection's source port by the time the stack
	// binds it, seconds later.
	for range 1000 {
		addr := net.JoinHostPort(ip, strconv.Itoa(10000+rand.IntN(22000)))
		if l, err := net.Listen("tcp", addr); err == nil {
			l.Close()
			return addr
		}
	}
	t.Fatal("no free loopback port from 10000 to 32000 in 1000 tries")
	return ""
}

// freeDNSAddr is a loopback address whose port is free for both UDP and
// TCP, as the cluster DNS needs (a TCP port alone may be some client's
// UDP port).
func freeDNSAddr(t *testing.T) string {
	t.Helper()
	for range 100 {
		addr := freeAddr(t)
		if c, err := net.ListenPacket("udp", addr); err == nil {
			c.Close()
			return addr
		}
	}
	t.Fatal("no loopback port free for both UDP and TCP in 100 tries")
	return ""
}

type devStack struct {
	cmd               *exec.Cmd
	api, temporal, ui string
	dns               string
	dataDir           string
	output            *syncbuf.Buffer
	exited            chan error
	// http trusts the CA the stack wrote to <data-dir>/tls/ca.crt and
	// sends its admin token.
	http    *http.Client
	token   string
	stopped bool
}

// built holds zonewright, illumos-sim and zwctl, built once for the tests
// that run them (a zonewright with the dev stack links for seconds);
// TestMain removes it.
var built struct {
	once sync.Once
	dir  string
	err  error
}

// buildBinary builds zonewright, and illumos-sim beside it where the dev
// stack looks for it, on its first call.
func buildBinary(t *testing.T) string {
	t.Helper()
	built.once.Do(func() {
		if built.dir, built.err = os.MkdirTemp("", "zw-cmd-bin-"); built.err != nil {
			return
		}
		for _, pkg := range []string{".", "../illumos-sim", "../zwctl"} {
			if out, err := exec.Command("go", "build", "-o", built.dir, pkg).CombinedOutput(); err != nil {
				built.err = fmt.Errorf("build %s: %v\n%s", pkg, err, out)
				return
			}
		}
	})
	if built.err != nil {
		t.Fatal(built.err)
	}
	return filepath.Join(built.dir, "zonewright")
}

func startDev(t *testing.T, bin, dataDir string, api, temporal, ui string, extra ...string) *devStack {
	t.Helper()
	return startDevAs(t, nil, bin, dataDir, api, temporal, ui, extra...)
}

// startDevAs starts the dev stack as cred's user (nil: as this process),
// at home in dataDir's parent.
func startDevAs(t *testing.T, cred *syscall.Credential, bin, dataDir string, api, temporal, ui string, extra ...string) *devStack {
	t.Helper()
	d := &devStack{api: api, temporal: temporal, ui: ui, dns: freeDNSAddr(t), dataDir: dataDir, output: &syncbuf.Buffer{}, exited: make(chan error, 1)}
	// A relative --data-dir, as make dev gives: what the stack writes
	// and shows must hold from any directory (ZWCONFIG was relative).
	d.cmd = exec.Command(bin, "dev", "--data-dir", filepath.Base(dataDir), "--listen", api, "--temporal-address", temporal, "--ui-address", ui,
		"--dns-listen", d.dns, "--registry", freeAddr(t), "--log-level", "warn")
	d.cmd.Args = append(d.cmd.Args, extra...)
	d.cmd.Dir = filepath.Dir(dataDir)
	if cred != nil {
		d.cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
		d.cmd.Env = append(os.Environ(), "HOME="+d.cmd.Dir)
	}
	stdout, _ := d.cmd.StdoutPipe()
	d.cmd.Stderr = d.cmd.Stdout
	if err := d.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = d.cmd.Process.Kill()
	})
	up := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			d.output.WriteString(sc.Text() + "\n")
			// The banner's last line: everything it shows is in.
			if strings.Contains(sc.Text(), "Ctrl-C stops everything") {
				up <- true
			}
		}
		d.exited <- d.cmd.Wait()
	}()
	select {
	case <-up:
	case err := <-d.exited:
		t.Fatalf("dev stack exited during start: %v\n%s", err, d.output)
	case <-time.After(2 * time.Minute):
		t.Fatalf("dev stack did not come up within 2 minutes:\n%s", d.output)
	}
	tlsConfig, err := pki.ClientTLS(filepath.Join(dataDir, "tls", "ca.crt"), "", "")
	if err != nil {
		t.Fatalf("the dev stack's CA: %v", err)
	}
	tokenFile := filepath.Join(dataDir, "admin.token")
	fi, err := os.Stat(tokenFile)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("admin token file: %v %v", fi, err)
	}
	b, _ := os.ReadFile(tokenFile)
	d.token = strings.TrimSpace(string(b))
	if !strings.HasPrefix(d.token, "zw_") || strings.Contains(d.output.String(), d.token) {
		t.Fatalf("the admin token is missing or printed: %q", d.token)
	}
	if env, _ := os.ReadFile(filepath.Join(dataDir, "env")); !strings.Contains(string(env), "export ZW_TOKEN='"+d.token+"'") {
		t.Fatalf("env file without the admin token: %s", env)
	}
	d.http = &http.Client{Transport: auth.Bearer{Token: d.token, Next: &http.Transport{TLSClientConfig: tlsConfig}}}
	return d
}

func (d *devStack) stop(t *testing.T) {
	t.Helper()
	if d.stopped {
		return
	}
	d.stopped = true
	_ = d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-d.exited:
		if err != nil {
			t.Fatalf("dev stack exited with %v after SIGTERM:\n%s", err, d.output)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("dev stack did not stop within 30s of SIGTERM")
	}
}

// serviceResolves creates a service and finds its ClusterIP through the
// stack's cluster DNS, as the README's dig does.
func (d *devStack) serviceResolves(t *testing.T) {
	t.Helper()
	resp, err := d.http.Post("https://"+d.api+"/api/v1/namespaces/default/services", "application/json",
		strings.NewReader(`{"metadata":{"name":"echo"},"spec":{"selector":{"app":"echo"},"ports":[{"port":80,"targetPort":8080}]}}`))
	if err != nil {
		t.Fatal(err)
	}
	var svc model.Service
	err = json.NewDecoder(resp.Body).Decode(&svc)
	resp.Body.Close()
	if err != nil || resp.StatusCode != 201 {
		t.Fatalf("create service: %d %v", resp.StatusCode, err)
	}
	q := new(dns.Msg)
	q.SetQuestion("echo.default.svc.cluster.local.", dns.TypeA)
	deadline := time.Now().Add(5 * time.Second)
	for {
		r, _, err := new(dns.Client).Exchange(q, d.dns)
		if err == nil && len(r.Answer) == 1 && r.Answer[0].(*dns.A).A.String() == svc.Spec.ClusterIP {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("echo.default.svc.cluster.local did not resolve to %s: %v %v", svc.Spec.ClusterIP, r, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func get(t *testing.T, c *http.Client, url string) (int, string) {
	t.Helper()
	resp, err := c.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// envFileSays checks the stack's env file, as a shell sources it: only
// its owner reads it, and it exports want.
// killedAgentIsRestarted kills a node's agent (SIGKILL) and waits for the
// stack to start another, named by the node's pid file, as SMF would.
func (d *devStack) killedAgentIsRestarted(t *testing.T, node string) {
	t.Helper()
	pidFile := filepath.Join(d.dataDir, "nodes", node, "agent.pid")
	pidIn := func() int {
		b, err := os.ReadFile(pidFile)
		if err != nil {
			t.Fatalf("the agent's pid file: %v", err)
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil {
			t.Fatalf("the agent's pid file holds %q", b)
		}
		return pid
	}
	old := pidIn()
	if !strings.Contains(d.output.String(), fmt.Sprintf("agent pid %d (%s)", old, pidFile)) {
		t.Fatalf("the banner does not show %s's agent pid %d and its pid file:\n%s", node, old, d.output)
	}
	if err := syscall.Kill(old, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		if pid := pidIn(); pid != old && syscall.Kill(pid, 0) == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s's agent was not restarted within 20 s of its kill", node)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (d *devStack) envFileSays(t *testing.T, want map[string]string) {
	t.Helper()
	path := filepath.Join(d.dataDir, "env")
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("env file %s: %v %v, want mode 0600", path, fi, err)
	}
	script := ". " + path + "; env"
	out, err := exec.Command("sh", "-c", script).Output()
	if err != nil {
		t.Fatalf("source %s: %v", path, err)
	}
	got := map[string]string{}
	for _, l := range strings.Split(string(out), "\n") {
		if k, v, ok := strings.Cut(l, "="); ok {
			got[k] = v
		}
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("env file exports %s=%q, want %q", k, got[k], v)
		}
	}
}

// postgresOf lists postgres processes serving a data directory.
func postgresOf(dataDir string) []string {
	var pids []string
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		args := strings.Split(string(cmdline), "\x00")
		if strings.HasSuffix(args[0], "postgres") && strings.Contains(string(cmdline), dataDir) {
			pids = append(pids, e.Name())
		}
	}
	return pids
}

// TestDevStack is the newcomer's path: one command starts everything, a pod
// created with curl reads back and shows on a watch, the UI answers, the
// control-plane worker runs workflows, Ctrl-C leaves no process behind and
// a second start resumes the same data.
func TestDevStack(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the whole dev stack")
	}
	bin := buildBinary(t)
	dataDir := filepath.Join(t.TempDir(), "data")
	api, temporal, ui := freeAddr(t), freeAddr(t), freeAddr(t)
	d := startDev(t, bin, dataDir, api, temporal, ui, "--isolation=false")
	// The pod range is the data dir's own, clear of the service range.
	podCIDR := devnodes.ClusterCIDROf(dataDir, netip.MustParsePrefix("127.96.0.0/16"))
	podNet := strings.TrimSuffix(podCIDR, "0.0/16")
	for _, want := range []string{"https://" + api, "http://" + ui, temporal, "source " + filepath.Join(dataDir, "env"), "127.96.0.0/16 (cluster DNS 127.96.0.10)", d.dns + ", domain cluster.local", "pod CIDRs assigned from " + podCIDR} {
		if !strings.Contains(d.output.String(), want) {
			t.Fatalf("banner does not show %s:\n%s", want, d.output)
		}
	}

	zwctlConfig := filepath.Join(dataDir, "zwctl.yaml")
	d.envFileSays(t, map[string]string{"ZW_API_URL": "https://" + api, "ZW_CACERT": filepath.Join(dataDir, "tls", "ca.crt"), "ZWCONFIG": zwctlConfig})
	if fi, err := os.Stat(zwctlConfig); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("zwctl config %s: %v %v, want mode 0600", zwctlConfig, fi, err)
	}
	cfg, err := zwclient.LoadConfig(zwctlConfig)
	if err != nil {
		t.Fatal(err)
	}
	if s, err := cfg.Resolve(zwclient.Overrides{}); err != nil || s.Context != "dev" || s.Server != "https://"+api || s.Token != d.token ||
		s.CertificateAuthority != filepath.Join(dataDir, "tls", "ca.crt") || s.Namespace != "default" {
		t.Fatalf("zwctl config resolves to %+v, %v", s, err)
	}
	// After sourcing the env file, zwctl (built beside zonewright) is on
	// PATH and talks to this stack.
	if out, err := exec.Command("sh", "-c", `. "$1" && zwctl get namespaces -o name`, "sh", filepath.Join(dataDir, "env")).CombinedOutput(); err != nil || string(out) != "namespace/default\n" {
		t.Fatalf("zwctl after sourcing the env file: %v %s", err, out)
	}
	if resp, err := http.Get("http://" + api + "/readyz"); err == nil {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if strings.Contains(string(b), "postgres") {
			t.Fatalf("the API answers plain HTTP: %d %s", resp.StatusCode, b)
		}
	}
	if code, body := get(t, d.http, "https://"+api+"/readyz"); code != 200 || !strings.Contains(body, `"temporal":"ok"`) {
		t.Fatalf("readyz: %d %s", code, body)
	}
	// Secrets are encrypted with a key the stack generated in its data dir.
	if fi, err := os.Stat(filepath.Join(dataDir, "encryption.key")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("the dev stack's encryption key: %v, %v", fi, err)
	}
	if resp, err := d.http.Post("https://"+api+"/api/v1/namespaces/default/secrets", "application/json",
		strings.NewReader(`{"metadata":{"name":"dev-secret"},"stringData":{"k":"v"}}`)); err != nil || resp.StatusCode != http.StatusCreated {
		t.Fatalf("create a secret on the dev stack: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}
	if code, body := get(t, http.DefaultClient, "http://"+ui+"/"); code != 200 || !strings.Contains(body, "<html") {
		t.Fatalf("Temporal Web UI: %d %.200s", code, body)
	}
	d.serviceResolves(t)
	d.killedAgentIsRestarted(t, "node-1")

	anonymous := &http.Client{Transport: d.http.Transport.(auth.Bearer).Next}
	if code, _ := get(t, anonymous, "https://"+api+"/api/v1/namespaces/default/pods"); code != 401 {
		t.Fatalf("the API answered without a token: %d", code)
	}
	watch, err := d.http.Get("https://" + api + "/api/v1/namespaces/default/pods?watch=true")
	if err != nil {
		t.Fatal(err)
	}
	defer watch.Body.Close()
	pod := `{"metadata":{"name":"hello","labels":{"app":"hello"}},"spec":{"terminationGracePeriodSeconds":3,"containers":[{"name":"web","image":"base",
	  "command":["sh","-c","exec python3 -m http.server --bind $POD_IP 8080"],
	  "readinessProbe":{"httpGet":{"port":8080},"periodSeconds":1}}]}}`
	resp, err := d.http.Post("https://"+api+"/api/v1/namespaces/default/pods", "application/json", strings.NewReader(pod))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 201 {
		t.Fatalf("create pod: %d", resp.StatusCode)
	}
	line := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(watch.Body)
		for sc.Scan() {
			if strings.HasPrefix(sc.Text(), "data: ") {
				line <- sc.Text()
				return
			}
		}
	}()
	select {
	case l := <-line:
		if !strings.Contains(l, `"type":"ADDED"`) || !strings.Contains(l, `"name":"hello"`) {
			t.Fatalf("watch event: %s", l)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no watch event for the created pod")
	}

	// The pod runs on a simulated node and turns Ready through a real
	// HTTP probe against its address.
	deadline := time.Now().Add(90 * time.Second)
	for {
		_, body := get(t, d.http, "https://"+api+"/api/v1/namespaces/default/pods/hello")
		if strings.Contains(body, `"phase":"Running"`) && strings.Contains(body, `"type":"Ready","status":"True"`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("pod not Running and Ready: %s", body)
		}
		time.Sleep(200 * time.Millisecond)
	}

	// A service over it gets an address of the dev range (loopback, so it
	// is reachable on Linux) and the pod as its endpoint.
	resp, err = d.http.Post("https://"+api+"/api/v1/namespaces/default/services", "application/json",
		strings.NewReader(`{"metadata":{"name":"hello"},"spec":{"selector":{"app":"hello"},"ports":[{"port":80,"targetPort":8080}]}}`))
	if err != nil {
		t.Fatal(err)
	}
	var svc struct {
		Spec struct{ ClusterIP string } `json:"spec"`
	}
	_ = json.NewDecoder(resp.Body).Decode(&svc)
	resp.Body.Close()
	if resp.StatusCode != 201 || !strings.HasPrefix(svc.Spec.ClusterIP, "127.96.") {
		t.Fatalf("create service: %d, clusterIP %q; want one from 127.96.0.0/16", resp.StatusCode, svc.Spec.ClusterIP)
	}
	deadline = time.Now().Add(10 * time.Second)
	for {
		_, body := get(t, d.http, "https://"+api+"/api/v1/namespaces/default/endpoints/hello")
		if strings.Contains(body, `"addresses":[{"ip":"`+podNet) && strings.Contains(body, `"port":8080`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the Ready pod is not the service's endpoint: %s", body)
		}
		time.Sleep(200 * time.Millisecond)
	}
	// The nodes' NAT rules make the ClusterIP reach the pod.
	deadline = time.Now().Add(10 * time.Second)
	for {
		r, err := (&http.Client{Timeout: 2 * time.Second}).Get("http://" + svc.Spec.ClusterIP + "/")
		if err == nil {
			r.Body.Close()
			if r.StatusCode == 200 {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the ClusterIP %s does not reach the pod: %v", svc.Spec.ClusterIP, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	req, _ := http.NewRequest("DELETE", "https://"+api+"/api/v1/namespaces/default/services/hello", nil)
	if resp, err := d.http.Do(req); err != nil || resp.StatusCode != 200 {
		t.Fatalf("delete service: %v %v", resp, err)
	}

	// Temporal runs mutual TLS: a client without a certificate is
	// refused, the operator's certificate from the env file (what the
	// temporal CLI reads) is admitted.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	plainCtx, plainCancel := context.WithTimeout(ctx, 5*time.Second)
	if c, err := client.DialContext(plainCtx, client.Options{HostPort: temporal, Namespace: "default"}); err == nil {
		c.Close()
		t.Error("a plaintext Temporal client connected to the dev stack")
	}
	plainCancel()
	env := devEnv(t, filepath.Join(dataDir, "env"))
	if env["TEMPORAL_ADDRESS"] != temporal || env["TEMPORAL_NAMESPACE"] != "default" {
		t.Errorf("env file: TEMPORAL_ADDRESS %q, TEMPORAL_NAMESPACE %q", env["TEMPORAL_ADDRESS"], env["TEMPORAL_NAMESPACE"])
	}
	operator, err := pki.ClientTLS(env["TEMPORAL_TLS_CA"], env["TEMPORAL_TLS_CERT"], env["TEMPORAL_TLS_KEY"])
	if err != nil {
		t.Fatalf("the env file's Temporal TLS files: %v", err)
	}
	operator.ServerName = env["TEMPORAL_TLS_SERVER_NAME"]

	// The control-plane worker polls zonewright-control: the housekeeping
	// schedule exists and a triggered run completes.
	c, err := client.Dial(client.Options{HostPort: env["TEMPORAL_ADDRESS"], Namespace: env["TEMPORAL_NAMESPACE"],
		ConnectionOptions: client.ConnectionOptions{TLS: operator}})
	if err != nil {
		t.Fatal(err)
	}
	sched := c.ScheduleClient().GetHandle(ctx, workflows.HousekeepingScheduleID)
	if err := sched.Trigger(ctx, client.ScheduleTriggerOptions{}); err != nil {
		t.Fatalf("trigger housekeeping schedule: %v", err)
	}
	for {
		desc, err := sched.Describe(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if n := len(desc.Info.RecentActions); n > 0 {
			run := c.GetWorkflow(ctx, desc.Info.RecentActions[n-1].StartWorkflowResult.WorkflowID, desc.Info.RecentActions[n-1].StartWorkflowResult.FirstExecutionRunID)
			var res workflows.HousekeepingResult
			if err := run.Get(ctx, &res); err != nil {
				t.Fatalf("housekeeping run failed: %v", err)
			}
			break
		}
		select {
		case <-ctx.Done():
			t.Fatal("the triggered housekeeping run never started")
		case <-time.After(200 * time.Millisecond):
		}
	}
	c.Close()

	// A second dev stack on the same ports is refused clearly.
	out, err := exec.Command(bin, "dev", "--data-dir", filepath.Join(t.TempDir(), "other"), "--listen", api, "--temporal-address", freeAddr(t), "--ui-address", freeAddr(t),
		"--dns-listen", freeAddr(t)).CombinedOutput()
	if err == nil || !strings.Contains(string(out), api+" is already in use") {
		t.Fatalf("second dev stack on a taken port: %v\n%s", err, out)
	}

	d.stop(t)
	if pids := postgresOf(dataDir); len(pids) > 0 {
		t.Fatalf("postgres processes outlived the dev stack: %v", pids)
	}

	// The restarted stack keeps its CA: the first stack's client trusts it.
	d2 := startDev(t, bin, dataDir, api, temporal, ui, "--isolation=false")
	if d2.token != d.token {
		t.Fatalf("a restart made a new admin token instead of reusing the valid one")
	}
	if code, body := get(t, d.http, "https://"+api+"/api/v1/namespaces/default/pods/hello"); code != 200 {
		t.Fatalf("the pod did not survive a restart: %d %s", code, body)
	}
	// Its zone was halted with the stack; the lifecycle boots it again, and
	// a delete removes it gracefully.
	req, _ = http.NewRequest("DELETE", "https://"+api+"/api/v1/namespaces/default/pods/hello", nil)
	if resp, err := d.http.Do(req); err != nil || resp.StatusCode != 200 {
		t.Fatalf("delete: %v %v", resp, err)
	}
	deadline = time.Now().Add(60 * time.Second)
	for {
		if code, _ := get(t, d.http, "https://"+api+"/api/v1/namespaces/default/pods/hello"); code == 404 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("pod not removed after delete")
		}
		time.Sleep(200 * time.Millisecond)
	}
	// A hard kill must not orphan PostgreSQL either.
	_ = d2.cmd.Process.Kill()
	<-d2.exited
	// Zones outlive a killed control plane, as workloads should; halt them
	// so the test leaves nothing behind.
	roots, _ := filepath.Glob(filepath.Join(dataDir, "nodes", "*", "state"))
	for _, root := range roots {
		_ = exec.Command(filepath.Join(filepath.Dir(bin), "illumos-sim"), "stop-all", "--root", root).Run()
	}
	deadline = time.Now().Add(15 * time.Second)
	for len(postgresOf(dataDir)) > 0 && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	if pids := postgresOf(dataDir); len(pids) > 0 {
		t.Fatalf("postgres outlived a killed dev stack: %v", pids)
	}
}

// devEnv reads the dev stack's env file (export KEY='value' lines) as a
// shell would.
func devEnv(t *testing.T, path string) map[string]string {
	t.Helper()
	out, err := exec.Command("sh", "-c", ". \"$1\" && env", "sh", path).Output()
	if err != nil {
		t.Fatalf("source %s: %v", path, err)
	}
	env := map[string]string{}
	for _, line := range strings.Split(string(out), "\n") {
		if k, v, ok := strings.Cut(line, "="); ok {
			env[k] = v
		}
	}
	return env
}
