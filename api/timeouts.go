package api

import (
	"bytes"
	"io"
	"net/http"
	"strings"
	"time"
)

// Default bounds of a request (Config.RequestTimeout, Config.BodyTimeout).
const (
	DefaultRequestTimeout = 60 * time.Second
	DefaultBodyTimeout    = 30 * time.Second
)

// timeoutBody is the Status a request that ran out of time gets.
const timeoutBody = `{"apiVersion":"v1","kind":"Status","status":"Failure","message":"the request took too long and was stopped; it may or may not have taken effect, check before retrying","reason":"Timeout","code":503}`

// streams reports the requests that stream or wait by design and so are
// not bounded as a whole: watches, the service network long poll (its own
// bound, ServiceNetWait), volume transfers and image artefact downloads
// (bounded by their stall detection on the other end), pods' logs and
// exec sessions (relayed from their node for as long as they last).
func streams(r *http.Request) bool {
	p := r.URL.Path
	if w := r.URL.Query().Get("watch"); w == "true" || w == "1" {
		return true
	}
	if strings.HasPrefix(p, "/api/v1/namespaces/") && (strings.HasSuffix(p, "/log") || strings.HasSuffix(p, "/exec")) {
		return true
	}
	return p == "/api/v1/servicenet" || strings.HasPrefix(p, transfersPath) ||
		(strings.HasPrefix(p, "/api/v1/images/") && strings.HasSuffix(p, "/artefact"))
}

// withTimeouts bounds every request that does not stream: its body must
// arrive within bodyTimeout, so a client that sends headers and stalls
// holds no handler, and its handler's context ends after requestTimeout,
// the client getting a 503 Status.
func withTimeouts(h http.Handler, requestTimeout, bodyTimeout time.Duration) http.Handler {
	timed := http.TimeoutHandler(h, requestTimeout, timeoutBody)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if streams(r) {
			h.ServeHTTP(w, r)
			return
		}
		if err := readBody(w, r, bodyTimeout); err != nil {
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Connection", "close")
			w.WriteHeader(http.StatusRequestTimeout)
			_, _ = io.WriteString(w, bodyTimeoutBody)
			return
		}
		// The timeout's Status is written with the headers set here; a
		// handler that answers sets its own.
		w.Header().Set("Content-Type", "application/json")
		timed.ServeHTTP(w, r)
	})
}

const bodyTimeoutBody = `{"apiVersion":"v1","kind":"Status","status":"Failure","message":"the request body did not arrive in time","reason":"Timeout","code":408}`

// readBody reads a bounded body (one byte past bodyLimit, enough for
// the handler to refuse it) within timeout, then hands the handler the
// bytes. The read deadline is lifted once the body is in: the server
// keeps reading the connection in the background to notice a client going
// away, and a deadline left behind would end the handler's context.
func readBody(w http.ResponseWriter, r *http.Request, timeout time.Duration) error {
	if r.Body == nil || r.Body == http.NoBody || r.ContentLength == 0 {
		return nil
	}
	rc := http.NewResponseController(w)
	if err := rc.SetReadDeadline(time.Now().Add(timeout)); err != nil {
		return nil // not a connection that takes deadlines (a test recorder)
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, bodyLimit(r.URL.Path)+1))
	_ = rc.SetReadDeadline(time.Time{})
	if err != nil {
		return err
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	return nil
}
