package api

import (
	"bytes"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/zonewright/zonewright/internal/connbounds"
)

// Default bounds of a request (Config.RequestTimeout, Config.BodyTimeout)
// and of streams (Config.MinRequestTimeout, Config.StreamIdleTimeout).
const (
	DefaultRequestTimeout = 60 * time.Second
	DefaultBodyTimeout    = connbounds.DefaultBody
	// DefaultMinRequestTimeout is kube-apiserver's --min-request-timeout.
	DefaultMinRequestTimeout = 30 * time.Minute
	// DefaultStreamIdleTimeout is kubelet's
	// --streaming-connection-idle-timeout.
	DefaultStreamIdleTimeout = 4 * time.Hour
)

// watchTimeout is how long a watch lasts, as kube-apiserver bounds one:
// the request's timeoutSeconds (at most twice minRequest), else between
// minRequest and twice that, at random, so that watchers started
// together do not all come back together. The client sees the stream end
// and watches again from the last version it saw.
func watchTimeout(q url.Values, minRequest time.Duration) (time.Duration, error) {
	limit := 2 * minRequest
	if t := q.Get("timeoutSeconds"); t != "" {
		n, err := strconv.ParseInt(t, 10, 64)
		if err != nil || n < 0 {
			return 0, badRequestf("timeoutSeconds %q must be a non-negative integer", t)
		}
		switch {
		case n > int64(limit/time.Second):
			return limit, nil
		case n > 0:
			return time.Duration(n) * time.Second, nil
		}
	}
	return minRequest + rand.N(minRequest+1), nil
}

// timeoutBody is the Status a request that ran out of time gets.
const timeoutBody = `{"apiVersion":"v1","kind":"Status","status":"Failure","message":"the request took too long and was stopped; it may or may not have taken effect, check before retrying","reason":"Timeout","code":503}`

// streams reports the requests that stream or wait by design and so are
// not bounded by the request timeout: watches (bounded by watchTimeout),
// the service network long poll (its own bound, ServiceNetWait), volume
// transfers and image artefact downloads (bounded by their stall
// detection on the other end), pods' logs and exec sessions and
// port-forwards (relayed from their node until they fall idle for
// StreamIdleTimeout). A request is told by its route's shape and method, as the
// router will match it, never by a suffix: a pod named "exec" is not an
// exec session, and a PUT of it is bounded as any other; a watch is a GET
// of a list route (lists), not any request that says watch=true. The
// server's read deadline still holds a streaming request until the guard
// has authenticated and authorised it (connbounds.Stream).
func streams(r *http.Request, lists *routeShapes) bool {
	get, post := r.Method == http.MethodGet, r.Method == http.MethodPost
	if w := r.URL.Query().Get("watch"); get && (w == "true" || w == "1") && lists.match(r.URL.Path) {
		return true
	}
	seg := strings.Split(strings.TrimPrefix(r.URL.Path, "/api/v1/"), "/")
	if !strings.HasPrefix(r.URL.Path, "/api/v1/") || slices.Contains(seg, "") {
		return false
	}
	switch {
	case len(seg) == 5 && seg[0] == "namespaces" && seg[2] == "pods":
		// namespaces/{ns}/pods/{name}/{subresource}
		switch seg[4] {
		case "log":
			return get
		case "exec", "portforward":
			return get || post
		}
	case len(seg) == 2 && seg[0] == "volumetransfers":
		return get || r.Method == http.MethodPut
	case len(seg) == 3 && seg[0] == "images" && seg[2] == "artefact":
		return get
	case len(seg) == 1 && seg[0] == "servicenet":
		return get
	}
	return false
}

// bringsNoCredentials: a request with neither a bearer token nor a client
// certificate (probes of /healthz, say).
func bringsNoCredentials(r *http.Request) bool {
	return r.Header.Get("Authorization") == "" && (r.TLS == nil || len(r.TLS.PeerCertificates) == 0)
}

// withTimeouts bounds every request that does not stream: its body must
// arrive within bodyTimeout, so a client that sends headers and stalls
// holds no handler, and its handler's context ends after requestTimeout,
// the client getting a 503 Status.
func withTimeouts(h http.Handler, streams func(*http.Request) bool, requestTimeout, bodyTimeout time.Duration) http.Handler {
	timed := http.TimeoutHandler(h, requestTimeout, timeoutBody)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if bringsNoCredentials(r) {
			// Whoever brings no credentials keeps no idle connection.
			w.Header().Set("Connection", "close")
		}
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
	rc := http.NewResponseController(w)
	if r.Body == nil || r.Body == http.NoBody || r.ContentLength == 0 {
		// Nothing to read: the server's deadline (ReadTimeout) must not
		// end the handler's context before the request's own bound does.
		_ = rc.SetReadDeadline(time.Time{})
		return nil
	}
	if err := rc.SetReadDeadline(time.Now().Add(timeout)); err != nil {
		return nil // not a connection that takes deadlines (a test recorder)
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, bodyLimit(r.URL.Path)+1))
	if err != nil {
		// The deadline stays: the server discards the rest of a body
		// before it closes the connection, and would wait for it forever.
		return err
	}
	_ = rc.SetReadDeadline(time.Time{})
	r.Body = io.NopCloser(bytes.NewReader(body))
	return nil
}

// routeShapes are route paths as the router matches them: a ":param"
// segment stands for any one non-empty segment, the others for
// themselves.
type routeShapes struct{ paths [][]string }

func (rs *routeShapes) add(path string) {
	rs.paths = append(rs.paths, strings.Split(strings.TrimPrefix(path, "/"), "/"))
}

func (rs *routeShapes) match(path string) bool {
	seg := strings.Split(strings.TrimPrefix(path, "/"), "/")
	if slices.Contains(seg, "") {
		return false
	}
	return slices.ContainsFunc(rs.paths, func(shape []string) bool {
		if len(shape) != len(seg) {
			return false
		}
		for i, s := range shape {
			if !strings.HasPrefix(s, ":") && s != seg[i] {
				return false
			}
		}
		return true
	})
}
