package activities

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

	"github.com/zonewright/zonewright/internal/illumos"
)

// defaultProbeTimeout applies to a probe without timeoutSeconds, as in
// Kubernetes.
const defaultProbeTimeout = time.Second

// Probe runs one probe: exec through zlogin, httpGet and tcpSocket against
// the pod's address from this node. A failed probe is a result (Success
// false, Message saying what happened), not an error; the error is for a
// probe that cannot be run as given (non-retryable Invalid) or an activity
// that was cancelled.
func (h *Host) Probe(ctx context.Context, in ProbeInput) (ProbeResult, error) {
	const step = "probe"
	s, p := in.Sandbox, in.Probe
	if err := s.check(); err != nil {
		return ProbeResult{}, h.invalid(ctx, step, s, err)
	}
	timeout := time.Duration(p.TimeoutSeconds) * time.Second
	if timeout <= 0 {
		timeout = defaultProbeTimeout
	}
	var res ProbeResult
	var err error
	switch {
	case p.Exec != nil:
		res, err = h.probeExec(ctx, s, p.Exec.Command, timeout)
	case p.HTTPGet != nil:
		res, err = probeHTTP(ctx, s.IP, p.HTTPGet.Scheme, p.HTTPGet.Port, p.HTTPGet.Path, timeout)
	case p.TCPSocket != nil:
		res, err = probeTCP(ctx, s.IP, p.TCPSocket.Port, timeout)
	default:
		err = errors.New("the probe has no exec, httpGet or tcpSocket action")
	}
	if err != nil {
		if ctx.Err() != nil {
			return ProbeResult{}, h.fail(ctx, step+" of container "+in.Container, s, ctx.Err())
		}
		return ProbeResult{}, h.invalid(ctx, step+" of container "+in.Container, s, err)
	}
	return res, nil
}

// probeExec runs the command in the zone; exit 0 is success.
func (h *Host) probeExec(ctx context.Context, s PodSandbox, argv []string, timeout time.Duration) (ProbeResult, error) {
	if len(argv) == 0 || argv[0] == "" {
		return ProbeResult{}, errors.New("exec probe has no command")
	}
	pctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	res, err := h.Host.Zone(s.ZoneName()).Exec(pctx, argv, nil)
	if err != nil {
		switch {
		case ctx.Err() != nil:
			return ProbeResult{}, ctx.Err()
		case pctx.Err() != nil:
			return ProbeResult{Message: fmt.Sprintf("command %q timed out after %s", argv, timeout)}, nil
		case errors.Is(err, illumos.ErrInvalid):
			return ProbeResult{}, err
		}
		return ProbeResult{Message: fmt.Sprintf("exec probe could not run: %v", err)}, nil
	}
	if res.ExitCode == 0 {
		return ProbeResult{Success: true, Message: fmt.Sprintf("command %q exited with 0", argv)}, nil
	}
	msg := fmt.Sprintf("command %q exited with %d", argv, res.ExitCode)
	if out := probeOutput(res.Stderr, res.Stdout); out != "" {
		msg += ": " + out
	}
	return ProbeResult{Message: msg}, nil
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
func probeHTTP(ctx context.Context, ip, scheme string, port int32, path string, timeout time.Duration) (ProbeResult, error) {
	addr, err := probeAddr(ip, port)
	if err != nil {
		return ProbeResult{}, err
	}
	scheme = strings.ToLower(scheme)
	if scheme == "" {
		scheme = "http"
	}
	if scheme != "http" && scheme != "https" {
		return ProbeResult{}, fmt.Errorf("scheme %q must be HTTP or HTTPS", scheme)
	}
	if !strings.HasPrefix(path, "/") {
		path = "/" + path
	}
	url := scheme + "://" + addr + path
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return ProbeResult{}, fmt.Errorf("probe URL %q: %w", url, err)
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
			return ProbeResult{}, ctx.Err()
		}
		return ProbeResult{Message: err.Error()}, nil
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 10<<10))
	resp.Body.Close()
	if resp.StatusCode >= 200 && resp.StatusCode < 400 {
		return ProbeResult{Success: true, Message: fmt.Sprintf("HTTP probe succeeded with statuscode: %d", resp.StatusCode)}, nil
	}
	return ProbeResult{Message: fmt.Sprintf("HTTP probe failed with statuscode: %d", resp.StatusCode)}, nil
}

// probeTCP opens a connection to ip:port.
func probeTCP(ctx context.Context, ip string, port int32, timeout time.Duration) (ProbeResult, error) {
	addr, err := probeAddr(ip, port)
	if err != nil {
		return ProbeResult{}, err
	}
	d := net.Dialer{Timeout: timeout}
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		if ctx.Err() != nil {
			return ProbeResult{}, ctx.Err()
		}
		return ProbeResult{Message: err.Error()}, nil
	}
	conn.Close()
	return ProbeResult{Success: true, Message: "connected to " + addr}, nil
}
