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

// Execer runs a command in a zone (zlogin) and returns its exit status.
type Execer interface {
	Exec(ctx context.Context, zone string, argv []string) (exitCode int, output string, err error)
}

// RunProbe runs one probe: exec through the zone, httpGet and tcpSocket
// against the pod's address from this node. An error is a probe that can
// never run as given (no action, a bad port).
func RunProbe(ctx context.Context, ex Execer, zone, ip string, p *model.Probe) (Result, error) {
	timeout := time.Duration(p.TimeoutSeconds) * time.Second
	if timeout <= 0 {
		timeout = defaultProbeTimeout
	}
	switch {
	case p.Exec != nil:
		return probeExec(ctx, ex, zone, p.Exec.Command, timeout)
	case p.HTTPGet != nil:
		return probeHTTP(ctx, ip, p.HTTPGet.Scheme, p.HTTPGet.Port, p.HTTPGet.Path, timeout)
	case p.TCPSocket != nil:
		return probeTCP(ctx, ip, p.TCPSocket.Port, timeout)
	}
	return Result{}, errors.New("the probe has no exec, httpGet or tcpSocket action")
}

// probeExec runs the command in the zone; exit 0 is success.
func probeExec(ctx context.Context, ex Execer, zone string, argv []string, timeout time.Duration) (Result, error) {
	if len(argv) == 0 || argv[0] == "" {
		return Result{}, errors.New("exec probe has no command")
	}
	pctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	code, out, err := ex.Exec(pctx, zone, argv)
	switch {
	case ctx.Err() != nil:
		return Result{}, ctx.Err()
	case pctx.Err() != nil:
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

// probeAddr is ip:port of the pod.
func probeAddr(ip string, port int32) (string, error) {
	if _, err := netip.ParseAddr(ip); err != nil {
		return "", fmt.Errorf("pod IP %q is not an address", ip)
	}
	if port < 1 || port > 65535 {
		return "", fmt.Errorf("port %d is out of range 1-65535", port)
	}
	return net.JoinHostPort(ip, strconv.Itoa(int(port))), nil
}

// probeHTTP GETs scheme://ip:port/path; a status of 200-399 is success.
// Redirects are not followed (a 3xx is already success), proxies are not
// used, and an https server's certificate is not verified, as in
// Kubernetes: the probe asks whether the server answers, not who it is.
func probeHTTP(ctx context.Context, ip, scheme string, port int32, path string, timeout time.Duration) (Result, error) {
	addr, err := probeAddr(ip, port)
	if err != nil {
		return Result{}, err
	}
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

// probeTCP opens a connection to ip:port.
func probeTCP(ctx context.Context, ip string, port int32, timeout time.Duration) (Result, error) {
	addr, err := probeAddr(ip, port)
	if err != nil {
		return Result{}, err
	}
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
