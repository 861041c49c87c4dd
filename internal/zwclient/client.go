package zwclient

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"
)

// Object is an API object as JSON decodes it: zwctl passes objects through
// unchanged, so a field the client does not know survives a round trip.
type Object = map[string]any

// Client talks to one API server with one credential.
type Client struct {
	base *url.URL
	http *http.Client
	// http1 never negotiates HTTP/2: an exec's WebSocket upgrade needs
	// HTTP/1.1.
	http1 *http.Client
}

// New makes a client for the resolved settings.
func New(s Settings) (*Client, error) {
	base, err := url.Parse(strings.TrimRight(s.Server, "/"))
	if err != nil || base.Host == "" || (base.Scheme != "https" && base.Scheme != "http") {
		return nil, fmt.Errorf("server %q is not an http(s) URL", s.Server)
	}
	tlsConfig := &tls.Config{MinVersion: tls.VersionTLS12}
	pem := []byte(s.CertificateAuthorityData)
	if s.CertificateAuthority != "" {
		if pem, err = os.ReadFile(s.CertificateAuthority); err != nil {
			return nil, fmt.Errorf("certificate authority: %w", err)
		}
	}
	if len(pem) > 0 {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, errors.New("certificate authority: no PEM certificate in it")
		}
		tlsConfig.RootCAs = pool
	}
	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.TLSClientConfig = tlsConfig
	transport1 := transport.Clone()
	transport1.ForceAttemptHTTP2 = false
	transport1.TLSClientConfig.NextProtos = []string{"http/1.1"}
	withToken := func(t *http.Transport) http.RoundTripper {
		if s.Token == "" {
			return t
		}
		return bearer{token: s.Token, next: t}
	}
	return &Client{base: base, http: &http.Client{Transport: withToken(transport)},
		http1: &http.Client{Transport: withToken(transport1)}}, nil
}

// bearer adds the token to every request.
type bearer struct {
	token string
	next  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.next.RoundTrip(r)
}

// HTTPClient is the client's *http.Client, TLS and token ready, for
// endpoints this package has no method for (logs, exec).
func (c *Client) HTTPClient() *http.Client { return c.http }

// HTTP1Client is HTTPClient speaking HTTP/1.1 only, for upgrades.
func (c *Client) HTTP1Client() *http.Client { return c.http1 }

// BaseURL is the server's URL.
func (c *Client) BaseURL() *url.URL { u := *c.base; return &u }

// URL is the full URL of path with query.
func (c *Client) URL(path string, query url.Values) string {
	u := c.BaseURL()
	u.Path += path
	u.RawQuery = query.Encode()
	return u.String()
}

// APIError is a response of the API that is not a success, as its Status.
type APIError struct {
	Code    int    `json:"code"`
	Reason  string `json:"reason"`
	Message string `json:"message"`
}

func (e *APIError) Error() string {
	reason := e.Reason
	if reason == "" {
		reason = http.StatusText(e.Code)
	}
	return fmt.Sprintf("Error from server (%s): %s", reason, e.Message)
}

// IsNotFound says whether err is the API's 404.
func IsNotFound(err error) bool {
	var e *APIError
	return errors.As(err, &e) && e.Code == http.StatusNotFound
}

// Stream sends a request and returns the body of a successful answer; the
// caller closes it. body may be nil, an io.Reader or a value sent as JSON.
func (c *Client) Stream(ctx context.Context, method, path string, query url.Values, body any) (io.ReadCloser, error) {
	resp, err := c.send(ctx, method, path, query, body, nil)
	if err != nil {
		return nil, err
	}
	return resp.Body, nil
}

func (c *Client) send(ctx context.Context, method, path string, query url.Values, body any, header http.Header) (*http.Response, error) {
	var r io.Reader
	contentType := ""
	switch b := body.(type) {
	case nil:
	case io.Reader:
		r = b
	default:
		data, err := json.Marshal(b)
		if err != nil {
			return nil, err
		}
		r, contentType = bytes.NewReader(data), "application/json"
	}
	req, err := http.NewRequestWithContext(ctx, method, c.URL(path, query), r)
	if err != nil {
		return nil, err
	}
	for k, v := range header {
		req.Header[k] = v
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	if req.Header.Get("Accept") == "" {
		req.Header.Set("Accept", "application/json")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, fmt.Errorf("cannot reach the server %s: %w", c.base.Host, err)
	}
	if resp.StatusCode >= 300 {
		defer resp.Body.Close()
		return nil, decodeError(resp)
	}
	return resp, nil
}

func decodeError(resp *http.Response) error {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	e := &APIError{}
	if json.Unmarshal(b, e) != nil || e.Message == "" {
		e.Message = strings.TrimSpace(string(b))
		if e.Message == "" {
			e.Message = http.StatusText(resp.StatusCode)
		}
	}
	e.Code = resp.StatusCode
	return e
}

// Do sends a request and decodes a successful answer into out (if not nil).
func (c *Client) Do(ctx context.Context, method, path string, query url.Values, body, out any) error {
	resp, err := c.send(ctx, method, path, query, body, nil)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if out == nil {
		_, _ = io.Copy(io.Discard, resp.Body)
		return nil
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("%s %s: the answer is not JSON: %w", method, path, err)
	}
	return nil
}

// Get reads one object.
func (c *Client) Get(ctx context.Context, r Resource, ns, name string) (Object, error) {
	var o Object
	return o, c.Do(ctx, http.MethodGet, r.ObjectPath(ns, name), nil, nil, &o)
}

// ListOptions narrow a list or watch.
type ListOptions struct {
	LabelSelector, FieldSelector string
}

func (o ListOptions) query() url.Values {
	q := url.Values{}
	if o.LabelSelector != "" {
		q.Set("labelSelector", o.LabelSelector)
	}
	if o.FieldSelector != "" {
		q.Set("fieldSelector", o.FieldSelector)
	}
	return q
}

// List reads every object of r in ns (all namespaces when ns is empty),
// following the pages, and the list's resourceVersion to watch from.
func (c *Client) List(ctx context.Context, r Resource, ns string, o ListOptions) ([]Object, string, error) {
	var items []Object
	q := o.query()
	for {
		var page struct {
			Metadata struct {
				ResourceVersion string `json:"resourceVersion"`
				Continue        string `json:"continue"`
			} `json:"metadata"`
			Items []Object `json:"items"`
		}
		if err := c.Do(ctx, http.MethodGet, r.CollectionPath(ns), q, nil, &page); err != nil {
			return nil, "", err
		}
		items = append(items, page.Items...)
		if page.Metadata.Continue == "" {
			return items, page.Metadata.ResourceVersion, nil
		}
		q.Set("continue", page.Metadata.Continue)
	}
}

// Create posts a new object.
func (c *Client) Create(ctx context.Context, r Resource, ns string, obj Object) (Object, error) {
	var out Object
	return out, c.Do(ctx, http.MethodPost, r.CollectionPath(ns), nil, obj, &out)
}

// Update replaces an object; obj carries the resourceVersion it replaces.
func (c *Client) Update(ctx context.Context, r Resource, ns, name string, obj Object) (Object, error) {
	var out Object
	return out, c.Do(ctx, http.MethodPut, r.ObjectPath(ns, name), nil, obj, &out)
}

// Delete asks for an object's removal; query may carry gracePeriodSeconds.
func (c *Client) Delete(ctx context.Context, r Resource, ns, name string, query url.Values) error {
	return c.Do(ctx, http.MethodDelete, r.ObjectPath(ns, name), query, nil, nil)
}

// Post sends a body to a subresource (finalize, cordon, rollback, ...).
func (c *Client) Post(ctx context.Context, r Resource, ns, name, sub string, body, out any) error {
	return c.Do(ctx, http.MethodPost, r.ObjectPath(ns, name)+"/"+sub, nil, body, out)
}

// WaitUntil calls check every interval until it says done, returns an
// error, or ctx ends.
func WaitUntil(ctx context.Context, interval time.Duration, check func() (bool, error)) error {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		done, err := check()
		if err != nil || done {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}
