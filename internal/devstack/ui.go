package devstack

import (
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"

	"github.com/labstack/echo/v4"
	"github.com/labstack/echo/v4/middleware"
	uiapi "github.com/temporalio/ui-server/v2/server/api"
	uiauth "github.com/temporalio/ui-server/v2/server/auth"
	uiconfig "github.com/temporalio/ui-server/v2/server/config"
	"github.com/temporalio/ui-server/v2/server/cors"
	"github.com/temporalio/ui-server/v2/server/csrf"
	"github.com/temporalio/ui-server/v2/server/headers"
	"github.com/temporalio/ui-server/v2/server/route"
	"github.com/temporalio/ui-server/v2/ui"

	"github.com/zonewright/zonewright/internal/connbounds"
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
	// PublicOrigins are the origins browsers load the UI from; default
	// its own address. Its cookies are for HTTPS only when they are
	// https (StartAdminUI).
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
	server *http.Server
	url    string

	stopOnce sync.Once
	stopErr  error
}

// StartUI serves the Temporal Web UI on cfg.Address in plain HTTP: whoever
// reaches that address acts with cfg.TLS's identity. The UI connects to
// Temporal lazily: it may start first.
func StartUI(cfg UIConfig) (*UI, error) {
	if cfg.Address == "" {
		cfg.Address = DefaultUIAddress
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
	urlHost := host
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		urlHost = loopback
	}
	url := "http://" + net.JoinHostPort(urlHost, strconv.Itoa(port))
	if len(cfg.PublicOrigins) == 0 {
		cfg.PublicOrigins = []string{url}
		if ip := net.ParseIP(urlHost); ip != nil && ip.IsLoopback() {
			cfg.PublicOrigins = append(cfg.PublicOrigins, "http://"+net.JoinHostPort("localhost", strconv.Itoa(port)))
		}
	}
	h, err := uiHandler(cfg)
	if err != nil {
		return nil, fmt.Errorf("start ui: %w", err)
	}
	lis, err := listenTCP(net.JoinHostPort(host, strconv.Itoa(port)))
	if err != nil {
		return nil, fmt.Errorf("start ui: %w", err)
	}
	u := &UI{server: &http.Server{Handler: h, ReadHeaderTimeout: connbounds.DefaultHeader}, url: url}
	go func() { _ = u.server.Serve(lis) }()
	return u, nil
}

// URL is the address to open in a browser.
func (u *UI) URL() string { return u.url }

// Stop closes the listener and all connections. Safe to call more than once.
func (u *UI) Stop() error {
	u.stopOnce.Do(func() {
		if err := u.server.Close(); err != nil {
			u.stopErr = fmt.Errorf("stop ui: %w", err)
		}
	})
	return u.stopErr
}

// uiHandler is the Temporal Web UI (assets embedded in the ui-server
// module) and its HTTP API, proxied to cfg.TemporalAddress, loaded from
// cfg.PublicOrigins, as uiserver.NewServer builds it. Only the handler:
// the server that serves it decides who reaches it (uiserver.Server would
// listen on a TCP port of its own, open to every local user).
func uiHandler(cfg UIConfig) (http.Handler, error) {
	if cfg.TemporalAddress == "" {
		cfg.TemporalAddress = DefaultTemporalAddress
	}
	if cfg.Namespace == "" {
		cfg.Namespace = DefaultNamespace
	}
	// Cookies are for HTTPS only unless the UI is loaded in plain HTTP
	// (the dev stack on loopback).
	cookieSecure := !strings.HasPrefix(cfg.PublicOrigins[0], "http://")
	var tlsConf uiconfig.TLS
	if cfg.TLS != nil {
		tlsConf = uiconfig.TLS{CertFile: cfg.TLS.CertFile, KeyFile: cfg.TLS.KeyFile, CaFile: cfg.TLS.CAFile,
			ServerName: cfg.TLS.ServerName, EnableHostVerification: true}
	}
	conf := &uiconfig.Config{
		TLS:                 tlsConf,
		TemporalGRPCAddress: cfg.TemporalAddress,
		EnableUI:            true,
		DefaultNamespace:    cfg.Namespace,
		CORS:                uiconfig.CORS{AllowOrigins: cfg.PublicOrigins, CookieInsecure: !cookieSecure},
		HideLogs:            true,
		// A dev stack makes no calls to the internet on its own.
		DisableNewsFetch:   true,
		NotifyOnNewVersion: false,
	}
	if err := conf.Validate(); err != nil {
		return nil, fmt.Errorf("ui config: %w", err)
	}
	provider, err := uiconfig.NewConfigProviderWithRefresh(conf)
	if err != nil {
		return nil, fmt.Errorf("ui config: %w", err)
	}
	assets, err := ui.Assets()
	if err == nil {
		assets, err = fs.Sub(assets, "local")
	}
	if err != nil {
		return nil, fmt.Errorf("ui assets: %w", err)
	}

	e := echo.New()
	e.Use(middleware.Recover(), middleware.Gzip())
	e.Use(cors.CORSMiddleware(cors.CORSConfig{
		AllowHeaders: []string{echo.HeaderOrigin, echo.HeaderContentType, echo.HeaderAccept, echo.HeaderXCSRFToken,
			echo.HeaderAuthorization, uiauth.AuthorizationExtrasHeader, "Caller-Type"},
		AllowCredentials: true,
		ConfigProvider:   provider,
	}))
	e.Use(middleware.Secure())
	e.Use(csrf.EnsureTokenCookie(cookieSecure))
	e.Use(middleware.CSRFWithConfig(csrf.MiddlewareConfig(provider, cookieSecure)))
	route.SetHealthRoute(e)
	forward := headers.WithForwardHeaders([]string{uiauth.AuthorizationExtrasHeader, "Caller-Type"})
	if err := route.SetAPIRoutes(e, provider, []uiapi.Middleware{forward}); err != nil {
		return nil, fmt.Errorf("ui api: %w", err)
	}
	if err := route.SetUIRoutes(e, "", assets, provider); err != nil {
		return nil, fmt.Errorf("ui routes: %w", err)
	}
	route.SetRenderRoute(e, "/")
	return e, nil
}
