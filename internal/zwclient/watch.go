package zwclient

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// Event is one change a watch reports.
type Event struct {
	Type   string // ADDED, MODIFIED, DELETED
	Object Object
}

// errStop ends a watch from inside the event callback.
type fatal struct{ err error }

func (f fatal) Error() string { return f.err.Error() }
func (f fatal) Unwrap() error { return f.err }

// Watch calls fn for every change of r's objects in ns after
// resourceVersion rv; with rv empty it first reports the current objects
// as ADDED. The API's watch is a stream of server-sent events whose ids
// are resourceVersions: when the connection drops, Watch connects again
// from the last id it saw (Last-Event-ID), so fn sees every change once.
// It returns when ctx ends (nil), when fn returns an error, or when the
// server ends the watch for good (410 Expired, or refusing the request).
func (c *Client) Watch(ctx context.Context, r Resource, ns string, o ListOptions, rv string, fn func(Event) error) error {
	last := rv
	// Objects of a first list arrive without ids until the last one; if
	// the connection drops halfway the list starts over, and those already
	// reported are not reported twice.
	fromList := map[string]string{}
	backoff := 100 * time.Millisecond
	for {
		q := o.query()
		q.Set("watch", "true")
		// Server-sent events: asked for JSON, the API streams Kubernetes'
		// watch events, for kubectl.
		header := http.Header{"Accept": {"text/event-stream"}}
		if last != "" {
			q.Set("resourceVersion", last)
			header.Set("Last-Event-Id", last)
		}
		resp, err := c.send(ctx, http.MethodGet, r.CollectionPath(ns), q, nil, header)
		if ctx.Err() != nil {
			return nil
		}
		var apiErr *APIError
		if errors.As(err, &apiErr) && apiErr.Code != http.StatusServiceUnavailable && apiErr.Code != http.StatusTooManyRequests {
			return err
		}
		if err == nil {
			backoff = 100 * time.Millisecond
			err = readEvents(resp.Body, func(id string, data []byte) error {
				var ev struct {
					Type   string          `json:"type"`
					Object json.RawMessage `json:"object"`
				}
				if err := json.Unmarshal(data, &ev); err != nil {
					return fatal{fmt.Errorf("watch: an event is not JSON: %w", err)}
				}
				if ev.Type == "ERROR" {
					st := &APIError{}
					_ = json.Unmarshal(ev.Object, st)
					return fatal{st}
				}
				var obj Object
				if err := json.Unmarshal(ev.Object, &obj); err != nil {
					return fatal{fmt.Errorf("watch: an object is not JSON: %w", err)}
				}
				if last == "" {
					key, version := objectKey(obj), objectVersion(obj)
					if fromList[key] == version && id == "" {
						return nil
					}
					fromList[key] = version
				}
				if id != "" {
					last = id
					clear(fromList)
				}
				if err := fn(Event{Type: ev.Type, Object: obj}); err != nil {
					return fatal{err}
				}
				return nil
			})
			resp.Body.Close()
			if ctx.Err() != nil {
				return nil
			}
			var f fatal
			if errors.As(err, &f) {
				return f.err
			}
		}
		// The stream ended or broke: connect again from the last version.
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 2*time.Second)
	}
}

// readEvents parses a server-sent event stream, calling fn with each
// complete event's id and data; a partial event at a cut is dropped.
func readEvents(r io.Reader, fn func(id string, data []byte) error) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	var id string
	var data []byte
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if len(data) > 0 {
				if err := fn(id, data); err != nil {
					return err
				}
			}
			id, data = "", nil
		case strings.HasPrefix(line, ":"):
		case strings.HasPrefix(line, "id:"):
			id = strings.TrimSpace(strings.TrimPrefix(line, "id:"))
		case strings.HasPrefix(line, "data:"):
			if len(data) > 0 {
				data = append(data, '\n')
			}
			data = append(data, strings.TrimPrefix(strings.TrimPrefix(line, "data:"), " ")...)
		}
	}
	return sc.Err()
}

func objectKey(o Object) string {
	return NestedString(o, "metadata", "namespace") + "/" + NestedString(o, "metadata", "name")
}

func objectVersion(o Object) string { return NestedString(o, "metadata", "resourceVersion") }

// Nested walks maps by keys.
func Nested(o any, keys ...string) any {
	for _, k := range keys {
		m, ok := o.(map[string]any)
		if !ok {
			return nil
		}
		o = m[k]
	}
	return o
}

// NestedString is Nested as a string ("" when absent); numbers and bools
// are formatted.
func NestedString(o any, keys ...string) string {
	switch v := Nested(o, keys...).(type) {
	case string:
		return v
	case float64:
		return fmt.Sprint(int64(v))
	case bool:
		return fmt.Sprint(v)
	case nil:
		return ""
	default:
		b, _ := json.Marshal(v)
		return string(b)
	}
}

// NestedInt is Nested as an integer (0 when absent).
func NestedInt(o any, keys ...string) int64 {
	if v, ok := Nested(o, keys...).(float64); ok {
		return int64(v)
	}
	return 0
}

// NestedSlice is Nested as a list.
func NestedSlice(o any, keys ...string) []any {
	v, _ := Nested(o, keys...).([]any)
	return v
}

// NestedMap is Nested as a map.
func NestedMap(o any, keys ...string) map[string]any {
	v, _ := Nested(o, keys...).(map[string]any)
	return v
}
