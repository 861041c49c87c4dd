package api_test

import (
	"crypto/tls"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/zonewright/zonewright/api"
	"github.com/zonewright/zonewright/internal/pki"
)

// Whoever holds a join token names the node; a node called localhost must
// not get a certificate that clients trusting the cluster CA take for the
// server at localhost (the API's, say). A node certificate authenticates a
// client only, and the node's serving certificate serves only under
// <node>.node.zonewright.invalid. Revert pki.go's SignCSR to add
// ExtKeyUsageServerAuth and the node's name as a DNS name (as it did), or
// make SignServingCSR name dnsName's node alone, to see this fail.
func TestAJoinedNodeCertificateServesNoClient(t *testing.T) {
	a := newAuthzAPI(t, 0)
	a.seed()
	var join api.IssuedToken
	if err := json.Unmarshal([]byte(a.asAdmin("POST", "/api/v1/nodejointokens", `{"ttlSeconds":600}`, 201)), &join); err != nil {
		t.Fatal(err)
	}
	keyPEM, csr, err := pki.NewCSR("node:localhost")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := json.Marshal(api.JoinRequest{CSR: csr})
	code, b := a.do(caller{bearer: join.Token}, "POST", "/api/v1/nodes/localhost/join", string(body))
	if code != 200 {
		t.Fatalf("join as localhost: %d %s", code, b)
	}
	var resp api.JoinResponse
	if err := json.Unmarshal([]byte(b), &resp); err != nil {
		t.Fatal(err)
	}
	get := func(certPEM, serverName string) error {
		pair, err := tls.X509KeyPair([]byte(certPEM), keyPEM)
		if err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewUnstartedServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
		srv.TLS = &tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12}
		srv.StartTLS()
		defer srv.Close()
		c := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: a.ca.Pool(), ServerName: serverName, MinVersion: tls.VersionTLS12}}}
		r, err := c.Get(srv.URL)
		if err == nil {
			r.Body.Close()
		}
		return err
	}
	for name, certPEM := range map[string]string{"node": resp.Certificate, "serving": resp.ServingCertificate} {
		for _, server := range []string{"localhost", "127.0.0.1"} {
			if err := get(certPEM, server); err == nil {
				t.Errorf("a client trusting the cluster CA took node localhost's %s certificate for the server at %s", name, server)
			}
		}
	}
	// Where it serves, it is verified as any server.
	if err := get(resp.ServingCertificate, "localhost.node.zonewright.invalid"); err != nil {
		t.Errorf("the node's endpoint under its serving name: %v", err)
	}
}
