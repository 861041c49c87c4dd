package api

import (
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/zonewright/zonewright/internal/connbounds"
)

// The server's read deadline bounds every request's body; a streaming
// route freed of it (through gin's writer, as the guard does) reads a body
// that takes longer, one that is not stays bound. Drop the
// connbounds.Stream call to see the upload cut.
func TestAStreamFreedOfTheReadDeadlineOutlastsIt(t *testing.T) {
	gin.SetMode(gin.ReleaseMode)
	r := gin.New()
	read := func(c *gin.Context) {
		if streams(c.Request, &routeShapes{}) {
			connbounds.Stream(c.Writer) // as the guard does
		}
		n, err := io.Copy(io.Discard, c.Request.Body)
		if err != nil {
			c.String(http.StatusRequestTimeout, "read %d bytes: %v", n, err)
			return
		}
		c.String(http.StatusOK, "read %d bytes", n)
	}
	r.PUT(transfersPath+":name", read)
	r.POST("/api/v1/namespaces", read)
	srv := httptest.NewUnstartedServer(r)
	srv.Config.ReadTimeout = 300 * time.Millisecond
	srv.Start()
	t.Cleanup(srv.Close)

	slowPut := func(path string) (int, string) {
		t.Helper()
		pr, pw := io.Pipe()
		go func() {
			for range 10 {
				time.Sleep(100 * time.Millisecond)
				if _, err := pw.Write([]byte("0123456789")); err != nil {
					return
				}
			}
			pw.Close()
		}()
		method := http.MethodPut
		if !strings.HasPrefix(path, transfersPath) {
			method = http.MethodPost
		}
		req, _ := http.NewRequest(method, srv.URL+path, pr)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := slowPut(transfersPath + "x"); code != http.StatusOK || body != "read 100 bytes" {
		t.Errorf("a transfer upload over 1 s, read deadline 300 ms: %d %s", code, body)
	}
	if code, body := slowPut("/api/v1/namespaces"); code == http.StatusOK {
		t.Errorf("a request that does not stream read its body past the read deadline: %d %s", code, body)
	}
}

// A watch's time: the client's, capped, or a random one between the
// minimum and twice it, so that watches started together end apart. Make
// watchTimeout return minRequest without timeoutSeconds to see the
// defaults all alike.
func TestWatchTimeout(t *testing.T) {
	const minRequest = 30 * time.Minute
	for query, want := range map[string]time.Duration{"timeoutSeconds=5": 5 * time.Second,
		"timeoutSeconds=7200": time.Hour, "timeoutSeconds=99999999999999999": time.Hour} {
		q, _ := url.ParseQuery(query)
		if got, err := watchTimeout(q, minRequest); err != nil || got != want {
			t.Errorf("%s: %s, %v; want %s", query, got, err, want)
		}
	}
	seen := map[time.Duration]bool{}
	for _, query := range []string{"", "timeoutSeconds=0", "", "", "", ""} {
		q, _ := url.ParseQuery(query)
		got, err := watchTimeout(q, minRequest)
		if err != nil || got < minRequest || got > 2*minRequest {
			t.Fatalf("%q: %s, %v; want between %s and %s", query, got, err, minRequest, 2*minRequest)
		}
		seen[got] = true
	}
	if len(seen) < 2 {
		t.Errorf("six default watch times all %v: not spread", seen)
	}
}
