package agent

import (
	"crypto/tls"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"

	"github.com/zonewright/zonewright/internal/illumos"
	"github.com/zonewright/zonewright/internal/nodeserver"
	"github.com/zonewright/zonewright/internal/pki"
)

// serveEndpoint starts the node's endpoint (logs and exec for the control
// plane) with the node's serving certificate (ServingCertificate: the
// node's key, under pki.NodeServingName), and settles the address it is
// reported at. Without Config.Listen there is none.
func (a *Agent) serveEndpoint(cred *credential) (*nodeserver.Server, error) {
	cfg := a.cfg
	if cfg.Listen == "" {
		return nil, nil
	}
	if cred == nil {
		c, err := tls.LoadX509KeyPair(filepath.Join(cfg.StateDir, NodeCertFile), filepath.Join(cfg.StateDir, NodeKeyFile))
		if err != nil {
			return nil, fmt.Errorf("the agent endpoint serves with the node's key: %w", err)
		}
		cred = &credential{}
		s, err := ServingCertificate(cfg.StateDir, c)
		if err == nil {
			cred.set(c, &s)
		} else {
			cred.set(c, nil)
		}
	}
	if _, err := cred.servingCertificate(nil); err != nil {
		a.log.Warn("the node has no certificate to serve its endpoint with: logs and exec fail on this node until it joins again (--join-token-file)")
	}
	caFile := NodeCAPath(cfg.StateDir)
	if _, err := os.Stat(caFile); err != nil {
		caFile = cfg.APICAFile
	}
	pool, err := pki.PoolFromFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("the agent endpoint trusts the cluster CA: %w", err)
	}
	zonesDir := cfg.ZonesDir
	if zonesDir == "" {
		zonesDir = cfg.ZonesPath
	}
	srv, err := nodeserver.Listen(cfg.Listen, nodeserver.Config{GetCertificate: cred.servingCertificate, ClientCAs: pool, ZonesDir: zonesDir, KeptLogs: a.keptLogs,
		Runner: &illumos.Runner{BinDir: cfg.BinDir}, Metrics: a.MetricsHandler(), Log: a.log.With("component", "endpoint"),
		PodNetwork: func() netip.Prefix {
			if p := a.podNetwork.Load(); p != nil {
				return *p
			}
			return netip.Prefix{}
		}})
	if err != nil {
		return nil, err
	}
	a.endpointPort = srv.Port()
	a.endpointIP = advertiseAddress(cfg)
	if a.endpointIP == "" {
		a.log.Warn("no address found for the agent endpoint: the control plane cannot reach it until --advertise-address names one")
	}
	a.log.Info("agent endpoint serving", "listen", cfg.Listen, "address", a.endpointIP, "port", a.endpointPort)
	return srv, nil
}

// advertiseAddress is the IP the control plane reaches the endpoint at:
// the one configured, else the listen address's host, else the address
// this host reaches the API from (no packet is sent to find it).
func advertiseAddress(cfg Config) string {
	if cfg.AdvertiseAddress != "" {
		return cfg.AdvertiseAddress
	}
	if host, _, err := net.SplitHostPort(cfg.Listen); err == nil {
		if ip := net.ParseIP(host); ip != nil && !ip.IsUnspecified() {
			return ip.String()
		}
	}
	u, err := url.Parse(cfg.APIURL)
	if err != nil {
		return ""
	}
	port := u.Port()
	if port == "" {
		port = "443"
	}
	conn, err := net.Dial("udp", net.JoinHostPort(u.Hostname(), port))
	if err != nil {
		return ""
	}
	defer conn.Close()
	return conn.LocalAddr().(*net.UDPAddr).IP.String()
}
