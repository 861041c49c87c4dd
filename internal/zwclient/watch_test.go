package zwclient

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestReadEventsJoinsDataLinesAndDropsACutEvent(t *testing.T) {
	in := ": keepalive\n\nid: 5\ndata: {\"a\":\ndata: 1}\n\ndata: {\"b\":2}\n\nid: 9\ndata: {\"cut\""
	var got []string
	err := readEvents(strings.NewReader(in), func(id string, data []byte) error {
		got = append(got, id+"="+string(data))
		return nil
	})
	if err != nil || strings.Join(got, "|") != "5={\"a\":\n1}|={\"b\":2}" {
		t.Errorf("%q %v", got, err)
	}
}

// sseServer serves a pod watch as the API does, from a fixed history of
// versions 1..n, and cuts the nth connection after cuts[n] events.
type sseServer struct {
	mu      sync.Mutex
	history []string // event data by version-1
	list    int      // versions 1..list are the initial list
	cuts    []int
	asked   []string // resourceVersion each connection asked for
}

func (s *sseServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	from := r.Header.Get("Last-Event-ID")
	if from == "" {
		from = r.URL.Query().Get("resourceVersion")
	}
	s.asked = append(s.asked, from)
	perConn := 1 << 30
	if n := len(s.asked) - 1; n < len(s.cuts) {
		perConn = s.cuts[n]
	}
	s.mu.Unlock()
	w.Header().Set("Content-Type", "text/event-stream")
	var start int
	sent := 0
	if from == "" {
		// The list: ids only on its last object.
		for i := 0; i < s.list; i++ {
			if sent == perConn {
				return
			}
			if i == s.list-1 {
				fmt.Fprintf(w, "id: %d\n", i+1)
			}
			fmt.Fprintf(w, "data: %s\n\n", s.history[i])
			sent++
		}
		start = s.list
	} else {
		fmt.Sscan(from, &start)
	}
	for v := start; v < len(s.history); v++ {
		if sent == perConn {
			w.(http.Flusher).Flush()
			return
		}
		fmt.Fprintf(w, "id: %d\ndata: %s\n\n", v+1, s.history[v])
		sent++
	}
	w.(http.Flusher).Flush()
	<-r.Context().Done()
}

func TestWatchResumesAfterEachCutWithoutLosingOrRepeatingAnEvent(t *testing.T) {
	s := &sseServer{list: 3, cuts: []int{2, 4, 2, 0}}
	for v := 1; v <= 8; v++ {
		typ := "MODIFIED"
		if v <= 4 {
			typ = "ADDED"
		}
		s.history = append(s.history, fmt.Sprintf(`{"type":%q,"object":{"metadata":{"name":"p%d","resourceVersion":"%d"}}}`, typ, min(v, 4), v))
	}
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	c, err := New(Settings{Server: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	pods, _ := LookupResource("pods")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var got []string
	err = c.Watch(ctx, pods, "default", ListOptions{}, "", func(ev Event) error {
		got = append(got, ev.Type+" "+NestedString(ev.Object, "metadata", "resourceVersion"))
		if len(got) == 8 {
			cancel()
		}
		return nil
	})
	want := "ADDED 1,ADDED 2,ADDED 3,ADDED 4,MODIFIED 5,MODIFIED 6,MODIFIED 7,MODIFIED 8"
	if err != nil || strings.Join(got, ",") != want {
		t.Errorf("events %v (%v), want %s", got, err, want)
	}
	// The list was cut after two of its three objects: the second
	// connection started over (asking for no version), the third resumed
	// after the list and an event, the fourth got nothing.
	if a := strings.Join(s.asked, ","); a != ",,4,6,6" {
		t.Errorf("connections asked for versions %q", a)
	}
}

func TestWatchStopsOnAnExpiredVersion(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, `data: {"type":"ERROR","object":{"kind":"Status","code":410,"reason":"Expired","message":"too old"}}`+"\n\n")
	}))
	t.Cleanup(srv.Close)
	c, _ := New(Settings{Server: srv.URL})
	pods, _ := LookupResource("pods")
	err := c.Watch(context.Background(), pods, "", ListOptions{}, "3", func(Event) error { return nil })
	if err == nil || err.Error() != "Error from server (Expired): too old" {
		t.Errorf("got %v", err)
	}
}

func TestAPIErrorsReadAsKubectlsDo(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusNotFound)
		fmt.Fprint(w, `{"kind":"Status","status":"Failure","reason":"NotFound","code":404,"message":"pods \"x\" not found"}`)
	}))
	t.Cleanup(srv.Close)
	c, _ := New(Settings{Server: srv.URL, Token: "zw_t"})
	pods, _ := LookupResource("pods")
	_, err := c.Get(context.Background(), pods, "default", "x")
	if err == nil || err.Error() != `Error from server (NotFound): pods "x" not found` || !IsNotFound(err) {
		t.Errorf("got %v", err)
	}
}

func TestEveryRequestCarriesTheToken(t *testing.T) {
	var got string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r.Header.Get("Authorization")
		fmt.Fprint(w, `{}`)
	}))
	t.Cleanup(srv.Close)
	c, _ := New(Settings{Server: srv.URL, Token: "zw_t"})
	rc, err := c.Stream(context.Background(), http.MethodGet, "/x", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	rc.Close()
	if got != "Bearer zw_t" {
		t.Errorf("Authorization %q", got)
	}
}
