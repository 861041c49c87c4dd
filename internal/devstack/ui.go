package devstack

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	uiserver "github.com/temporalio/ui-server/v2/server"
	uiconfig "github.com/temporalio/ui-server/v2/server/config"
	uioptions "github.com/temporalio/ui-server/v2/server/server_options"

	"github.com/zonewright/zonewright/internal/retry"
)

// UIConfig configures the Temporal Web UI server.
type UIConfig struct {
	// Address is host:port to serve on; default DefaultUIAddress.
	Address string
	// TemporalAddress is the frontend gRPC address; default
	// DefaultTemporalAddress.
	TemporalAddress string
	// Namespace is the one the UI opens on; default DefaultNamespace.
	Namespace string
	// TLS, when set, is the client certificate the UI presents to a
	// frontend running mutual TLS; every browser user of the UI acts
	// with its identity.
	TLS *ClientTLSFiles
	// PublicOrigins, when set, are the origins browsers load the UI from
	// through an HTTPS front (StartAdminUI) instead of its own address;
	// its cookies are then for HTTPS only.
	PublicOrigins []string
}

// ClientTLSFiles are the PEM files of a Temporal client running TLS.
type ClientTLSFiles struct {
	CertFile, KeyFile string
	CAFile            string // the CA the server's certificate is checked against
	ServerName        string // the name checked in the server's certificate
}

// Args are the flags of `zonewright agent` and `serve` presenting these files.
func (f ClientTLSFiles) Args() []string {
	return []string{"--temporal-tls-cert", f.CertFile, "--temporal-tls-key", f.KeyFile, "--temporal-tls-ca", f.CAFile,
		"--temporal-tls-server-name", f.ServerName}
}

// UI is a running Temporal Web UI server.
type UI struct {
	server *uiserver.Server
	url    string
	done   chan error

	stopOnce sync.Once
	stopErr  error
}

// StartUI serves the Temporal Web UI (assets embedded in the ui-server
// module) and its HTTP API, proxied to the Temporal frontend, and returns once
// it answers. The UI connects to Temporal lazily: it may start first.
func StartUI(ctx context.Context, cfg UIConfig) (*UI, error) {
	if cfg.Address == "" {
		cfg.Address = DefaultUIAddress
	}
	if cfg.TemporalAddress == "" {
		cfg.TemporalAddress = DefaultTemporalAddress
	}
	if cfg.Namespace == "" {
		cfg.Namespace = DefaultNamespace
	}
	host, port, err := splitHostPort(cfg.Address)
	if err != nil {
		return nil, fmt.Errorf("start ui: %w", err)
	}
	if port == 0 {
		return nil, fmt.Errorf("start ui: address %q: the UI needs a fixed port", cfg.Address)
	}
	if host == "" {
		host = loopback
	}
	// The UI server exits the process (echo's Logger.Fatal) when it cannot
	// listen, so this check is the only clean way to report a taken port.
	if err := CheckPortFree(net.JoinHostPort(host, strconv.Itoa(port))); err != nil {
		return nil, err
	}

	urlHost := host
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		urlHost = loopback
	}
	url := "http://" + net.JoinHostPort(urlHost, strconv.Itoa(port))
	origins := []string{url}
	if ip := net.ParseIP(urlHost); ip != nil && ip.IsLoopback() {
		origins = append(origins, "http://"+net.JoinHostPort("localhost", strconv.Itoa(port)))
	}

	cookieInsecure := true // plain HTTP on loopback: the CSRF cookie must not require HTTPS
	if len(cfg.PublicOrigins) > 0 {
		origins, cookieInsecure = cfg.PublicOrigins, false
	}
	var tlsConf uiconfig.TLS
	if cfg.TLS != nil {
		tlsConf = uiconfig.TLS{CertFile: cfg.TLS.CertFile, KeyFile: cfg.TLS.KeyFile, CaFile: cfg.TLS.CAFile,
			ServerName: cfg.TLS.ServerName, EnableHostVerification: true}
	}
	srv, err := newUIServer(&uiconfig.Config{
		TLS:                 tlsConf,
		Host:                host,
		Port:                port,
		TemporalGRPCAddress: cfg.TemporalAddress,
		EnableUI:            true,
		DefaultNamespace:    cfg.Namespace,
		CORS: uiconfig.CORS{
			AllowOrigins:   origins,
			CookieInsecure: cookieInsecure,
		},
		HideLogs: true,
		// A dev stack makes no calls to the internet on its own.
		DisableNewsFetch:   true,
		NotifyOnNewVersion: false,
	})
	if err != nil {
		return nil, fmt.Errorf("start ui: %w", err)
	}
	u := &UI{server: srv, url: url, done: make(chan error, 1)}
	go func() { u.done <- srv.Start() }()

	readyCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := u.waitReady(readyCtx); err != nil {
		_ = u.Stop()
		return nil, fmt.Errorf("start ui on %s: %w", cfg.Address, err)
	}
	return u, nil
}

// URL is the address to open in a browser.
func (u *UI) URL() string { return u.url }

// Stop closes the listener and all connections. Safe to call more than once.
func (u *UI) Stop() error {
	u.stopOnce.Do(func() {
		u.server.Stop()
		select {
		case err := <-u.done:
			if err != nil {
				u.stopErr = fmt.Errorf("stop ui: %w", err)
			}
		case <-time.After(5 * time.Second):
			u.stopErr = errors.New("stop ui: server did not return")
		}
	})
	return u.stopErr
}

// newUIServer turns the panics of uiserver.NewServer (invalid config) into an
// error.
func newUIServer(cfg *uiconfig.Config) (srv *uiserver.Server, err error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("ui config: %w", err)
	}
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("ui server: %v", r)
		}
	}()
	return uiserver.NewServer(uioptions.WithConfigProvider(cfg)), nil
}

func (u *UI) waitReady(ctx context.Context) error {
	hc := &http.Client{Timeout: 2 * time.Second}
	return retry.Do(ctx, startRetry, func(ctx context.Context) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.url+"/healthz", nil)
		if err != nil {
			return err
		}
		resp, err := hc.Do(req)
		if err != nil {
			return err
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("GET /healthz: %s", resp.Status)
		}
		return nil
	})
}
