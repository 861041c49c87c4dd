package supervisor

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/zonewright/zonewright/internal/model"
)

// defaultProbeTimeout applies to a probe without timeoutSeconds, as in
// Kubernetes.
const defaultProbeTimeout = time.Second

// Result is one probe's verdict; a failed probe is a result, not an error.
type Result struct {
	Success bool
	Message string
}

// Execer runs a command in a zone (zlogin) as the zone's user (empty:
// its root) and returns its exit status.
type Execer interface {
	Exec(ctx context.Context, zone, user string, argv []string) (exitCode int, output string, err error)
}

// RunProbe runs one probe of a container with the given ports: exec
// through the zone; httpGet, tcpSocket and grpc against the pod's address
// (or the probe's host) from this node. An error is a probe that can
// never run as given (no action, a bad port, a port name the container
// does not have).
func RunProbe(ctx context.Context, ex Execer, zone, user, ip string, ports []model.ContainerPort, p *model.Probe) (Result, error) {
	timeout := time.Duration(p.TimeoutSeconds) * time.Second
	if timeout <= 0 {
		timeout = defaultProbeTimeout
	}
	switch {
	case p.Exec != nil:
		return probeExec(ctx, ex, zone, user, p.Exec.Command, timeout)
	case p.HTTPGet != nil:
		h := p.HTTPGet
		addr, err := probeAddr(h.Host, ip, h.Port, ports)
		if err != nil {
			return Result{}, err
		}
		return probeHTTP(ctx, addr, h.Scheme, h.Path, h.HTTPHeaders, timeout)
	case p.TCPSocket != nil:
		addr, err := probeAddr(p.TCPSocket.Host, ip, p.TCPSocket.Port, ports)
		if err != nil {
			return Result{}, err
		}
		return probeTCP(ctx, addr, timeout)
	case p.GRPC != nil:
		addr, err := probeAddr("", ip, model.IntValue(p.GRPC.Port), nil)
		if err != nil {
			return Result{}, err
		}
		service := ""
		if p.GRPC.Service != nil {
			service = *p.GRPC.Service
		}
		return probeGRPC(ctx, addr, service, timeout)
	}
	return Result{}, errors.New("the probe has no exec, httpGet, tcpSocket or grpc action")
}

// execKillGrace is how long past an exec probe's timeout zlogin is
// waited for before it is interrupted: long enough for the command's own
// deadline in the zone (probeCommand) to end it, so zlogin returns by
// itself.
const execKillGrace = 2 * time.Second

// probeCommand wraps an exec probe's argv so that the command, and
// everything it started, is killed inside the zone once timeout has
// passed. Interrupting zlogin at the deadline reaches only the command's
// own process (zlogin passes SIGINT on to it): a command that ignores
// SIGINT, or its children, would run on in the zone, one more with every
// probe period. The wrapper shell starts a sleep for the timeout and the
// command beside it, and waits for the sleep: the command's end kills the
// sleep, so the wait returns its signal status and the command's status
// is returned; the sleep's own end (status 0) kills the zone process
// group zlogin made for the command (the command, its children, the
// wrapper) with SIGKILL. Nothing but the sleep's end decides, so no
// signal can slip between a check and the wait (a trap set by the
// command's end, tested before waiting, could be taken after the test
// and before the wait, which then waited the whole timeout).
func probeCommand(argv []string, timeout time.Duration) []string {
	secs := strconv.Itoa(max(int((timeout+time.Second-1)/time.Second), 1))
	script := `sleep ` + secs + ` </dev/null >/dev/null 2>&1 & t=$!; ` +
		`("$@"; s=$?; kill $t 2>/dev/null; exit $s) & c=$!; ` +
		`wait $t && kill -KILL 0; wait $c`
	return append([]string{"/bin/sh", "-c", script, "sh"}, argv...)
}

// probeExec runs the command in the zone; exit 0 is success. The command
// dies in the zone at the timeout (probeCommand); zlogin is interrupted
// only if it has not returned execKillGrace later.
func probeExec(ctx context.Context, ex Execer, zone, user string, argv []string, timeout time.Duration) (Result, error) {
	if len(argv) == 0 || argv[0] == "" {
		return Result{}, errors.New("exec probe has no command")
	}
	pctx, cancel := context.WithTimeout(ctx, timeout+execKillGrace)
	defer cancel()
	start := time.Now()
	code, out, err := ex.Exec(pctx, zone, user, probeCommand(argv, timeout))
	timedOut := pctx.Err() != nil || (code != 0 && time.Since(start) >= timeout)
	switch {
	case ctx.Err() != nil:
		return Result{}, ctx.Err()
	case timedOut:
		return Result{Message: fmt.Sprintf("command %q timed out after %s", argv, timeout)}, nil
	case err != nil:
		return Result{Message: fmt.Sprintf("exec probe could not run: %v", err)}, nil
	case code == 0:
		return Result{Success: true, Message: fmt.Sprintf("command %q exited with 0", argv)}, nil
	}
	msg := fmt.Sprintf("command %q exited with %d", argv, code)
	if out := probeOutput([]byte(out)); out != "" {
		msg += ": " + out
	}
	return Result{Message: msg}, nil
}

// probeOutput is the start of what a failed command said.
func probeOutput(outs ...[]byte) string {
	for _, o := range outs {
		if s := strings.TrimSpace(string(o)); s != "" {
			if len(s) > 512 {
				s = s[:512] + "..."
			}
			return s
		}
	}
	return ""
}

// probeAddr is host:port to probe: the probe's host, else the pod's
// address; the port a number or the name of one of the container's ports.
func probeAddr(host, podIP string, port model.IntOrString, ports []model.ContainerPort) (string, error) {
	if host == "" {
		if _, err := netip.ParseAddr(podIP); err != nil {
			return "", fmt.Errorf("pod IP %q is not an address", podIP)
		}
		host = podIP
	}
	n, ok := model.ProbePort(port, ports)
	if !ok {
		return "", fmt.Errorf("the container has no port named %q", port.StrVal)
	}
	if n < 1 || n > 65535 {
		return "", fmt.Errorf("port %d is out of range 1-65535", n)
	}
	return net.JoinHostPort(host, strconv.Itoa(int(n))), nil
}

// probeHTTP GETs scheme://addr/path with the probe's headers (a Host
// header names the host asked for); a status of 200-399 is success.
// Redirects are not followed (a 3xx is already success), proxies are not
// used, and an https server's certificate is not verified, as in
// Kubernetes: the probe asks whether the server answers, not who it is.
func probeHTTP(ctx context.Context, addr, scheme, path string, headers []model.HTTPHeader, timeout time.Duration) (Result, error) {
	scheme = strings.ToLower(scheme)
	if scheme == "" {
		scheme = "http"
	}
	if scheme != "http" && scheme != "https" {
		return Result{}, fmt.Errorf("scheme %q must be HTTP or HTTPS", scheme)
	}
	if !strings.HasPrefix(path, "/") {
		path = "/" + path
	}
	url := scheme + "://" + addr + path
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return Result{}, fmt.Errorf("probe URL %q: %w", url, err)
	}
	req.Header.Set("User-Agent", "zonewright-probe/1.0")
	req.Header.Set("Accept", "*/*")
	// The probe's own headers replace these defaults, as kubelet's do.
	for _, h := range headers {
		req.Header.Del(h.Name)
	}
	for _, h := range headers {
		if http.CanonicalHeaderKey(h.Name) == "Host" {
			req.Host = h.Value
			continue
		}
		req.Header.Add(h.Name, h.Value)
	}
	client := &http.Client{
		Timeout: timeout,
		Transport: &http.Transport{
			Proxy:             nil,
			DisableKeepAlives: true,
			TLSClientConfig:   &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // a health check, as Kubernetes does
		},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	resp, err := client.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return Result{}, ctx.Err()
		}
		return Result{Message: err.Error()}, nil
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 10<<10))
	resp.Body.Close()
	if resp.StatusCode >= 200 && resp.StatusCode < 400 {
		return Result{Success: true, Message: fmt.Sprintf("HTTP probe succeeded with statuscode: %d", resp.StatusCode)}, nil
	}
	return Result{Message: fmt.Sprintf("HTTP probe failed with statuscode: %d", resp.StatusCode)}, nil
}

// probeTCP opens a connection to addr.
func probeTCP(ctx context.Context, addr string, timeout time.Duration) (Result, error) {
	d := net.Dialer{Timeout: timeout}
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		if ctx.Err() != nil {
			return Result{}, ctx.Err()
		}
		return Result{Message: err.Error()}, nil
	}
	conn.Close()
	return Result{Success: true, Message: "connected to " + addr}, nil
}

// probeGRPC asks addr's standard health service (grpc.health.v1
// Health/Check) about service, over plaintext as kubelet does; SERVING
// is success.
func probeGRPC(ctx context.Context, addr, service string, timeout time.Duration) (Result, error) {
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithUserAgent("zonewright-probe/1.0"))
	if err != nil {
		return Result{}, fmt.Errorf("gRPC probe of %s: %w", addr, err)
	}
	defer conn.Close()
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	resp, err := healthpb.NewHealthClient(conn).Check(cctx, &healthpb.HealthCheckRequest{Service: service})
	switch {
	case ctx.Err() != nil:
		return Result{}, ctx.Err()
	case status.Code(err) == codes.Unimplemented:
		return Result{Message: fmt.Sprintf("gRPC probe: %s does not implement the grpc.health.v1.Health service", addr)}, nil
	case status.Code(err) == codes.DeadlineExceeded:
		return Result{Message: fmt.Sprintf("gRPC probe: %s did not answer within %s", addr, timeout)}, nil
	case err != nil:
		return Result{Message: fmt.Sprintf("gRPC probe: %v", err)}, nil
	case resp.GetStatus() != healthpb.HealthCheckResponse_SERVING:
		return Result{Message: fmt.Sprintf("service unhealthy (responded with %q)", resp.GetStatus())}, nil
	}
	return Result{Success: true, Message: "gRPC health check answered SERVING"}, nil
}
