package agent

import (
	"crypto/tls"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/zonewright/zonewright/internal/pki"
)

// Over HTTP/2, as the API serves it, one connection carries every
// request while a long poll holds it open: a renewed certificate must
// reach the requests made after the renewal all the same. (Make
// renewableTransport.present set the certificate on the transport in use
// and close its idle connections to see the old one presented.)
func TestARenewedCertificateIsPresentedBesideAnOpenStream(t *testing.T) {
	ca, err := pki.LoadOrCreateCA(t.TempDir(), "zonewright CA")
	if err != nil {
		t.Fatal(err)
	}
	held, release := make(chan struct{}), make(chan struct{})
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/poll" {
			w.WriteHeader(200)
			w.(http.Flusher).Flush()
			close(held)
			<-release
			return
		}
		io.WriteString(w, r.TLS.PeerCertificates[0].Subject.CommonName)
	}))
	certPEM, keyPEM, _ := ca.ServerCert([]string{"127.0.0.1"})
	serverCert, _ := tls.X509KeyPair(certPEM, keyPEM)
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{serverCert}, ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: ca.Pool()}
	srv.EnableHTTP2 = true
	srv.StartTLS()
	defer srv.Close()
	defer close(release)

	client := func(cn string) tls.Certificate {
		c, k, _ := ca.ClientCert(cn, nil)
		pair, _ := tls.X509KeyPair(c, k)
		return pair
	}
	base := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ca.Pool()}, ForceAttemptHTTP2: true}
	rt := &renewableTransport{}
	rt.cur.Store(base)
	hc := &http.Client{Transport: rt, Timeout: 10 * time.Second}
	cred := &credential{api: rt}
	cred.set(client("old"), nil)

	resp, err := hc.Get(srv.URL + "/poll")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.ProtoMajor != 2 {
		t.Fatalf("the poll went over %s, want HTTP/2", resp.Proto)
	}
	<-held
	cred.set(client("new"), nil)
	r, err := hc.Get(srv.URL + "/who")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Body.Close()
	if b, _ := io.ReadAll(r.Body); string(b) != "new" {
		t.Errorf("a request after the renewal presented %q, want the renewed certificate", b)
	}
}
