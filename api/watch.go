package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/zonewright/zonewright/internal/model"
	"github.com/zonewright/zonewright/internal/store"
)

// watch streams changes as server-sent events: each event's data is
// {"type":"ADDED|MODIFIED|DELETED","object":…} and its id the object's
// resourceVersion, so a client resumes with ?resourceVersion= or the
// standard Last-Event-ID header. Without a version, or with
// initialEvents, it first sends the current objects as ADDED; with
// initialEvents a bookmark then marks their end. After lasts the stream
// ends cleanly, as Kubernetes' watches do: the client watches again from
// the last version it saw. listRequest has checked o and waited for from.
func (s *Server) watch(c *gin.Context, res watchable, o store.ListOptions, from int64, initialEvents bool, lasts time.Duration) {
	ctx := c.Request.Context()
	var initial []initialObject
	if from == 0 || initialEvents {
		objs, rv, err := res.snapshot(c, o)
		if err != nil {
			s.fail(c, err)
			return
		}
		initial, from = objs, rv
	}
	w, err := res.watch(c, store.WatchOptions{Namespace: o.Namespace, LabelSelector: o.LabelSelector, FieldSelector: o.FieldSelector, ResourceVersion: from})
	if err != nil {
		s.fail(c, err)
		return
	}
	defer w.Stop()

	f := watchFormatOf(c)
	startWatchStream(c, f, initial, from, initialEvents)
	keepalive := time.NewTicker(s.keepalive)
	defer keepalive.Stop()
	end := time.NewTimer(lasts)
	defer end.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.closing:
			return
		case <-end.C:
			return
		case <-keepalive.C:
			if f.sse {
				fmt.Fprint(c.Writer, ": keepalive\n\n")
				c.Writer.Flush()
			}
		case ev, ok := <-w.Events:
			if !ok {
				if err := w.Err(); err != nil {
					s.watchEnded(c, f, err)
				}
				return
			}
			obj, err := res.present(c, ev.Object)
			if err != nil {
				s.log.Error("watch: cannot present a change", "kind", ev.Type, "err", err)
				writeWatchFailure(c, f, http.StatusInternalServerError, "InternalError", "an internal error occurred; it has been logged")
				return
			}
			if obj == nil {
				continue // a change the client's selector leaves out
			}
			f.write(c, ev.Type, obj, ev.ResourceVersion)
			c.Writer.Flush()
		}
	}
}

// startWatchStream answers a watch: its headers, then the initial objects
// (ADDED) and, with initialEvents, the bookmark that marks their end.
func startWatchStream(c *gin.Context, f watchFormat, initial []initialObject, from int64, initialEvents bool) {
	h := c.Writer.Header()
	h.Set("Content-Type", f.contentType())
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	c.Status(http.StatusOK)
	// Only the last of the initial objects carries an id, the list's
	// version: a client cut off halfway has no id and starts over, one that
	// saw them all resumes after the list.
	for i, o := range initial {
		id := int64(0)
		if i == len(initial)-1 {
			id = from
		}
		f.write(c, "ADDED", o.object, id)
	}
	if initialEvents {
		f.write(c, "BOOKMARK", initialEventsEnd(c.FullPath(), from), from)
	}
	c.Writer.Flush()
}

// watchEnded tells the client why the store's watch ended: 410 Expired
// only when it must list again; a watch that merely ended resumes from its
// last version.
func (s *Server) watchEnded(c *gin.Context, f watchFormat, err error) {
	code, reason, msg := http.StatusServiceUnavailable, "ServiceUnavailable", err.Error()
	switch {
	case errors.Is(err, store.ErrExpired):
		code, reason = http.StatusGone, "Expired"
	case !errors.Is(err, store.ErrWatcherTooSlow):
		s.log.Warn("watch ended", "path", c.Request.URL.Path, "err", err)
		msg = "the watch ended; start it again from the last resourceVersion seen"
	}
	writeWatchFailure(c, f, code, reason, msg)
}

// writeWatchFailure ends a watch's stream with an ERROR event carrying a
// failure Status.
func writeWatchFailure(c *gin.Context, f watchFormat, code int, reason, msg string) {
	st := model.Status{TypeMeta: model.TypeMeta{APIVersion: model.APIVersion, Kind: "Status"},
		Status: "Failure", Reason: reason, Code: code, Message: msg}
	b, _ := json.Marshal(st)
	f.write(c, "ERROR", b, 0)
	c.Writer.Flush()
}

// watchFormat is how a watch's events are written: server-sent events
// (zwctl, browsers, curl) or Kubernetes' stream of JSON events, one per
// line, which kubectl and client-go read; there each object may be a
// Table of its row, when the client asked for tables.
type watchFormat struct {
	sse      bool
	resource string // tabulate objects of this resource; "" for none
	include  string // includeObject, for tables
}

// watchFormatOf chooses by the Accept header's first type it knows:
// text/event-stream, */* or none gives server-sent events; JSON (a Table
// too) or protobuf, the Kubernetes stream.
func watchFormatOf(c *gin.Context) watchFormat {
	accept := c.GetHeader("Accept")
	for part := range strings.SplitSeq(accept, ",") {
		mt, _, err := mime.ParseMediaType(strings.TrimSpace(part))
		if err != nil {
			continue
		}
		switch mt {
		case "text/event-stream", "*/*":
			return watchFormat{sse: true}
		case "application/json", mediaProtobuf:
			f := watchFormat{include: c.Query("includeObject")}
			if wantsTable(accept) {
				f.resource = c.GetString(tableResourceKey)
			}
			return f
		}
	}
	return watchFormat{sse: true}
}

func (f watchFormat) contentType() string {
	if f.sse {
		return "text/event-stream"
	}
	return "application/json"
}

// write sends one event; rv is its id among server-sent events.
func (f watchFormat) write(c *gin.Context, typ string, object json.RawMessage, rv int64) {
	var obj any = object
	if f.resource != "" && typ != "ERROR" && typ != "BOOKMARK" {
		if t, ok := asTable(f.resource, object, f.include, time.Now()); ok {
			obj = t
		}
	}
	data, _ := json.Marshal(struct {
		Type   string `json:"type"`
		Object any    `json:"object"`
	}{typ, obj})
	if !f.sse {
		fmt.Fprintf(c.Writer, "%s\n", data)
		return
	}
	if rv > 0 {
		fmt.Fprintf(c.Writer, "id: %d\n", rv)
	}
	fmt.Fprintf(c.Writer, "data: %s\n\n", data)
}

type initialObject struct{ object json.RawMessage }

// initialEventsEnd is the bookmark that ends a streaming list's initial
// events: an object of the collection's kind (listPath names it) holding
// only the list's resourceVersion and Kubernetes' annotation.
func initialEventsEnd(listPath string, rv int64) json.RawMessage {
	gv, rest, _ := groupVersionOf(listPath)
	resource := rest[strings.LastIndex(rest, "/")+1:]
	b, _ := json.Marshal(map[string]any{"apiVersion": gv, "kind": discoverable[resource].kind,
		"metadata": map[string]any{"resourceVersion": strconv.FormatInt(rv, 10),
			"annotations": map[string]string{"k8s.io/initial-events-end": "true"}}})
	return b
}

// watchable is what the watch handler needs of a typed resource.
type watchable interface {
	// fieldSelectors are the fields a selector may name.
	fieldSelectors() map[string]string
	snapshot(c *gin.Context, o store.ListOptions) ([]initialObject, int64, error)
	watch(c *gin.Context, o store.WatchOptions) (*store.Watch, error)
	// present turns a change's object, as the feed carries it, into what
	// this caller is sent; nil for nothing.
	present(c *gin.Context, object json.RawMessage) (json.RawMessage, error)
}

type typedWatch[T any, PT store.ObjectPtr[T]] struct{ res store.Resource[T, PT] }

func (t typedWatch[T, PT]) fieldSelectors() map[string]string { return t.res.FieldSelectors() }

func (t typedWatch[T, PT]) snapshot(c *gin.Context, o store.ListOptions) ([]initialObject, int64, error) {
	list, err := t.res.List(c.Request.Context(), o)
	if err != nil {
		return nil, 0, err
	}
	rv, _ := strconv.ParseInt(list.Metadata.ResourceVersion, 10, 64)
	out := make([]initialObject, 0, len(list.Items))
	for i := range list.Items {
		obj := PT(&list.Items[i])
		b, err := json.Marshal(obj)
		if err != nil {
			return nil, 0, err
		}
		out = append(out, initialObject{b})
	}
	return out, rv, nil
}

func (t typedWatch[T, PT]) watch(c *gin.Context, o store.WatchOptions) (*store.Watch, error) {
	return t.res.Watch(c.Request.Context(), o)
}

func (t typedWatch[T, PT]) present(_ *gin.Context, object json.RawMessage) (json.RawMessage, error) {
	return object, nil
}
