package nodeserver_test

import (
	"bufio"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/zonewright/zonewright/internal/connbounds"
	"github.com/zonewright/zonewright/internal/connbounds/connboundstest"
	"github.com/zonewright/zonewright/internal/pki"
)

// adminConn is a TLS connection to the endpoint with a cluster-admin's
// certificate, which may GET /metrics.
func (e *endpoint) adminConn(t *testing.T) *tls.Conn {
	t.Helper()
	certPEM, keyPEM, err := e.ca.ClientCert("alice", []string{pki.ClusterAdminsOrg})
	if err != nil {
		t.Fatal(err)
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	c, err := tls.Dial("tcp", strings.TrimPrefix(e.base, "https://"), &tls.Config{InsecureSkipVerify: true, Certificates: []tls.Certificate{cert}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// closedWithin says whether the server closes c (having sent what it
// would) before the generous wait runs out.
func closedWithin(c net.Conn, wait time.Duration) error {
	_ = c.SetReadDeadline(time.Now().Add(wait))
	_, err := io.Copy(io.Discard, c)
	return err
}

// A client of the endpoint that stalls its request's body, or keeps its
// connection idle, is closed after the body and idle timeouts: a
// certificate the endpoint takes is no licence to hold a connection.
// (Give the endpoint an http.Server with only ReadHeaderTimeout, as it
// had, to see both held until this test gives up.)
func TestTheEndpointTimesOutStalledAndIdleConnections(t *testing.T) {
	e := newEndpointWith(t, 0, nil, connbounds.Bounds{Header: time.Second, Body: time.Second, Idle: time.Second})

	stalled := e.adminConn(t)
	if _, err := io.WriteString(stalled, "GET /metrics HTTP/1.1\r\nHost: n1\r\nContent-Length: 100\r\n\r\nab"); err != nil {
		t.Fatal(err)
	}
	if err := closedWithin(stalled, 30*time.Second); err != nil {
		t.Errorf("a request whose body stalled: its connection is still open after 30 s: %v", err)
	}

	idle := e.adminConn(t)
	if _, err := io.WriteString(idle, "GET /metrics HTTP/1.1\r\nHost: n1\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(idle)
	resp, err := http.ReadResponse(r, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics: %d", resp.StatusCode)
	}
	_ = idle.SetReadDeadline(time.Now().Add(30 * time.Second))
	if _, err := r.ReadByte(); err != io.EOF {
		t.Errorf("an idle connection after its answer: still open after 30 s, or not closed cleanly: %v", err)
	}
}

// Clients that connect and never finish their handshake hold at most
// MaxConnections of the endpoint's descriptors, and the control plane
// still gets through: those past MaxUnauthenticated close the ones that
// waited longest. (Serve the endpoint on its bare listener, as it was, to
// see every stalled client hold a descriptor.)
func TestTheEndpointCapsConnections(t *testing.T) {
	const limit, stalled = 8, 64
	e := newEndpointWith(t, 0, nil, connbounds.Bounds{Header: time.Minute, MaxConnections: limit})
	if code, _ := e.get(t, "/metrics"); code != http.StatusOK {
		t.Fatalf("GET /metrics: %d", code)
	}
	e.client().CloseIdleConnections()
	connboundstest.StalledClientsAreCapped(t, strings.TrimPrefix(e.base, "https://"), limit, stalled, func() {
		if code, _ := e.get(t, "/metrics"); code != http.StatusOK {
			t.Fatalf("GET /metrics behind %d stalled connections: %d", stalled, code)
		}
	})
}
