package kubeforward

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/zonewright/zonewright/internal/syncbuf"
	"k8s.io/apimachinery/pkg/util/httpstream"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/portforward"
	spdytransport "k8s.io/client-go/transport/spdy"
)

// closedPort is the port nothing listens on in these tests.
const closedPort = 9

// server serves the protocol as the API does (throughGin: behind gin,
// as the API), each connection to a listener that answers one line with
// "pod: " and the line, and port closedPort refused.
func server(t *testing.T, throughGin bool) *httptest.Server {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				line, _ := bufio.NewReader(c).ReadString('\n')
				fmt.Fprintf(c, "pod: %s", line)
			}()
		}
	}()
	dial := func(ctx context.Context, port uint16) (net.Conn, error) {
		if port == closedPort {
			return nil, fmt.Errorf("pod web does not accept connections on port %d: connection refused", port)
		}
		var d net.Dialer
		return d.DialContext(ctx, "tcp", l.Addr().String())
	}
	serve := func(w http.ResponseWriter, r *http.Request) {
		switch {
		case IsTunnel(r):
			_ = ServeTunnel(w, r, dial)
		case IsSPDY(r):
			_ = ServeSPDY(w, r, dial)
		default:
			http.Error(w, "not a port-forward", http.StatusBadRequest)
		}
	}
	var h http.Handler = http.HandlerFunc(serve)
	if throughGin {
		// The API's router, whose writer holds the status until the
		// first write.
		gin.SetMode(gin.ReleaseMode)
		g := gin.New()
		g.Any("/api/v1/namespaces/default/pods/web/portforward", func(c *gin.Context) { serve(c.Writer, c.Request) })
		h = g
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv
}

// dialers are client-go's, as kubectl builds them: SPDY tunnelled in a
// WebSocket, and SPDY upgraded from a POST.
func dialers(t *testing.T, srv *httptest.Server) map[string]httpstream.Dialer {
	t.Helper()
	u, _ := url.Parse(srv.URL + "/api/v1/namespaces/default/pods/web/portforward")
	config := &rest.Config{Host: srv.URL}
	tunnel, err := portforward.NewSPDYOverWebsocketDialer(u, config)
	if err != nil {
		t.Fatal(err)
	}
	transport, upgrader, err := spdytransport.RoundTripperFor(config)
	if err != nil {
		t.Fatal(err)
	}
	return map[string]httpstream.Dialer{
		"websocket tunnel": tunnel,
		"spdy upgrade":     spdytransport.NewDialer(upgrader, &http.Client{Transport: transport}, http.MethodPost, u),
	}
}

// client-go's port forwarder, which kubectl runs, forwards several
// connections at once through one session, tunnelled or upgraded, also
// behind gin. (Pass w rather than upgradeWriter{w} to UpgradeResponse in
// ServeSPDY to see the upgrade behind gin never answered.)
func TestClientGoForwardsConcurrentConnections(t *testing.T) {
	for _, throughGin := range []bool{false, true} {
		srv := server(t, throughGin)
		for name, dialer := range dialers(t, srv) {
			t.Run(fmt.Sprintf("%s gin=%v", name, throughGin), func(t *testing.T) { forwardsConcurrently(t, dialer) })
		}
	}
}

func forwardsConcurrently(t *testing.T, dialer httpstream.Dialer) {
	stop, ready := make(chan struct{}), make(chan struct{})
	var out, errOut syncbuf.Buffer
	fw, err := portforward.New(dialer, []string{"0:8080"}, stop, ready, &out, &errOut)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- fw.ForwardPorts() }()
	t.Cleanup(func() {
		close(stop)
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("ForwardPorts: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Error("ForwardPorts goes on when stopped")
		}
	})
	select {
	case <-ready:
	case err := <-done:
		t.Fatalf("ForwardPorts: %v", err)
	case <-time.After(20 * time.Second):
		t.Fatal("no session within 20 s")
	}
	ports, _ := fw.GetPorts()
	local := net.JoinHostPort("127.0.0.1", strconv.Itoa(int(ports[0].Local)))
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := net.Dial("tcp", local)
			if err != nil {
				t.Error(err)
				return
			}
			defer c.Close()
			c.SetDeadline(time.Now().Add(20 * time.Second))
			fmt.Fprintf(c, "hello %d\n", i)
			b, err := io.ReadAll(c)
			if want := fmt.Sprintf("pod: hello %d\n", i); string(b) != want || err != nil {
				t.Errorf("connection %d read %q, %v; want %q", i, b, err, want)
			}
		}()
	}
	wg.Wait()
}

// streams opens a request's error and data streams for port as
// client-go does.
func streams(t *testing.T, conn httpstream.Connection, id, port string) (errStream, dataStream httpstream.Stream) {
	t.Helper()
	h := http.Header{}
	h.Set(headerStreamType, streamTypeError)
	h.Set(headerPort, port)
	h.Set(headerRequestID, id)
	errStream, err := conn.CreateStream(h)
	if err != nil {
		t.Fatalf("error stream: %v", err)
	}
	errStream.Close()
	h.Set(headerStreamType, streamTypeData)
	dataStream, err = conn.CreateStream(h)
	if err != nil {
		t.Fatalf("data stream: %v", err)
	}
	return errStream, dataStream
}

func TestAClosedPortIsReportedOnTheErrorStreamAndTheSessionGoesOn(t *testing.T) {
	srv := server(t, false)
	for name, dialer := range dialers(t, srv) {
		t.Run(name, func(t *testing.T) {
			conn, protocol, err := dialer.Dial(Protocol)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			if protocol != Protocol {
				t.Fatalf("negotiated %q, want %q", protocol, Protocol)
			}
			errStream, _ := streams(t, conn, "0", strconv.Itoa(closedPort))
			msg, err := io.ReadAll(errStream)
			if want := "error forwarding port 9: pod web does not accept connections on port 9: connection refused"; string(msg) != want || err != nil {
				t.Fatalf("error stream: %q, %v; want %q", msg, err, want)
			}
			// The same session forwards the next connection.
			errStream, dataStream := streams(t, conn, "1", "8080")
			fmt.Fprintf(dataStream, "again\n")
			b, err := io.ReadAll(dataStream)
			if string(b) != "pod: again\n" || err != nil {
				t.Fatalf("data stream: %q, %v", b, err)
			}
			if msg, _ := io.ReadAll(errStream); len(msg) != 0 {
				t.Fatalf("error stream of a good connection: %q", msg)
			}
		})
	}
}

func TestStreamsWithoutAPortOrAKnownTypeAreRefused(t *testing.T) {
	srv := server(t, false)
	dialer := dialers(t, srv)["websocket tunnel"]
	conn, _, err := dialer.Dial(Protocol)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	for _, h := range []http.Header{
		header(headerStreamType, streamTypeData, headerRequestID, "0"),
		header(headerStreamType, streamTypeData, headerPort, "0", headerRequestID, "0"),
		header(headerStreamType, streamTypeData, headerPort, "65536", headerRequestID, "0"),
		header(headerStreamType, "stdin", headerPort, "8080", headerRequestID, "0"),
		header(headerPort, "8080", headerRequestID, "0"),
	} {
		st, err := conn.CreateStream(h)
		if err != nil {
			continue
		}
		// A refused stream is reset: reading it fails at once.
		read := make(chan error, 1)
		go func() { _, err := io.ReadAll(st); read <- err }()
		select {
		case err := <-read:
			if err == nil {
				t.Errorf("stream %v accepted", h)
			}
		case <-time.After(5 * time.Second):
			t.Errorf("stream %v accepted", h)
			st.Reset()
		}
	}
}

func TestRequestIDsWithoutTheHeaderPairByStreamIdentifier(t *testing.T) {
	for _, tc := range []struct {
		typ  string
		id   uint32
		want string
	}{
		{streamTypeError, 1, "1"},
		{streamTypeData, 3, "1"},
		{streamTypeError, 5, "5"},
	} {
		st := fakeStream{h: header(headerStreamType, tc.typ), id: tc.id}
		if got := requestID(st); got != tc.want {
			t.Errorf("%s stream %d: request %s, want %s", tc.typ, tc.id, got, tc.want)
		}
	}
	st := fakeStream{h: header(headerStreamType, streamTypeData, headerRequestID, "7"), id: 3}
	if got := requestID(st); got != "7" {
		t.Errorf("the header's request: %s, want 7", got)
	}
}

// fakeStream is a stream's headers and identifier, for requestID.
type fakeStream struct {
	httpstream.Stream
	h  http.Header
	id uint32
}

func (s fakeStream) Headers() http.Header { return s.h }
func (s fakeStream) Identifier() uint32   { return s.id }

// header is the header of name, value pairs.
func header(kv ...string) http.Header {
	h := http.Header{}
	for i := 0; i+1 < len(kv); i += 2 {
		h.Set(kv[i], kv[i+1])
	}
	return h
}

// A session holds at most maxPairs connections, open or awaiting their
// second stream: the next request is told so on its error stream.
// (Drop the maxPairs check in add to see it accepted.)
func TestASessionHoldsAtMostMaxPairsConnections(t *testing.T) {
	srv := server(t, false)
	conn, _, err := dialers(t, srv)["websocket tunnel"].Dial(Protocol)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	// Error streams alone: each request waits for its data stream.
	for i := range maxPairs {
		if _, err := conn.CreateStream(header(headerStreamType, streamTypeError, headerPort, "8080", headerRequestID, strconv.Itoa(i))); err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
	}
	errStream, err := conn.CreateStream(header(headerStreamType, streamTypeError, headerPort, "8080", headerRequestID, strconv.Itoa(maxPairs)))
	if err != nil {
		t.Fatal(err)
	}
	errStream.Close()
	read := make(chan string, 1)
	go func() { b, _ := io.ReadAll(errStream); read <- string(b) }()
	select {
	case msg := <-read:
		if want := "error processing stream for request 128: the session has 128 connections open or opening, the most it may"; msg != want {
			t.Errorf("error stream: %q, want %q", msg, want)
		}
	case <-time.After(10 * time.Second):
		t.Error("the request beyond the bound was accepted")
	}
}
