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
// client only. Revert pki.go's SignCSR to add ExtKeyUsageServerAuth and
// the node's name as a DNS name to see this fail.
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
	pair, err := tls.X509KeyPair([]byte(resp.Certificate), keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	for _, name := range []string{"localhost", "127.0.0.1"} {
		c := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: a.ca.Pool(), ServerName: name, MinVersion: tls.VersionTLS12}}}
		r, err := c.Get(srv.URL)
		if err == nil {
			r.Body.Close()
			t.Fatalf("a client trusting the cluster CA took node localhost's certificate for the server at %s", name)
		}
	}
}
