package transfer_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/zonewright/zonewright/internal/transfer"
)

// relayLimit bounds the test relay's streams.
const relayLimit = 4 << 20

func newRelay(t *testing.T) (*transfer.Relay, *httptest.Server) {
	t.Helper()
	r := &transfer.Relay{Dir: filepath.Join(t.TempDir(), "transfers")}
	mux := http.NewServeMux()
	mux.HandleFunc("PUT /api/v1/volumetransfers/{id}", func(w http.ResponseWriter, req *http.Request) { r.ServeUpload(w, req, req.PathValue("id"), relayLimit) })
	mux.HandleFunc("GET /api/v1/volumetransfers/{id}", func(w http.ResponseWriter, req *http.Request) { r.ServeDownload(w, req, req.PathValue("id")) })
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return r, srv
}

func TestAStreamGoesUpAndComesDownWhole(t *testing.T) {
	r, srv := newRelay(t)
	ctx := context.Background()
	data := make([]byte, 3<<20)
	rand.Read(data)
	id := "c0ffee-move-1"
	up := transfer.Ticket{ID: id, URL: transfer.URL(srv.URL, id)}
	down := transfer.Ticket{ID: id, URL: up.URL}

	if _, _, err := transfer.Get(ctx, nil, down); err == nil || !strings.Contains(err.Error(), "404") {
		t.Fatalf("download before the upload: %v, want 404", err)
	}
	if err := transfer.Put(ctx, nil, up, bytes.NewReader(data)); err != nil {
		t.Fatal(err)
	}
	body, n, err := transfer.Get(ctx, nil, down)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(body)
	body.Close()
	if n != int64(len(data)) || !bytes.Equal(got, data) {
		t.Fatalf("downloaded %d bytes (length %d), want the %d uploaded", len(got), n, len(data))
	}
	if err := r.Remove(id); err != nil {
		t.Fatal(err)
	}
	if left, _ := os.ReadDir(r.Dir); len(left) != 0 {
		t.Errorf("files left after Remove: %v", left)
	}
	if err := r.Remove(id); err != nil {
		t.Errorf("removing again: %v", err)
	}
}

// An ID that is no file name is no transfer.
func TestAnIDThatIsNoFileNameIsNotFound(t *testing.T) {
	_, srv := newRelay(t)
	_, _, err := transfer.Get(context.Background(), nil, transfer.Ticket{ID: "..", URL: srv.URL + "/api/v1/volumetransfers/..%2Fx"})
	if err == nil || !strings.Contains(err.Error(), "404") {
		t.Errorf("got %v, want 404", err)
	}
}

// An upload cut short leaves no stream a download could take for whole.
func TestAnUploadCutShortLeavesNoStream(t *testing.T) {
	r, srv := newRelay(t)
	ctx := context.Background()
	id := "abc-move-1"
	up := transfer.Ticket{ID: id, URL: transfer.URL(srv.URL, id)}
	broken := io.MultiReader(strings.NewReader(strings.Repeat("x", 1<<20)), errReader{})
	if err := transfer.Put(ctx, nil, up, broken); err == nil {
		t.Fatal("an upload whose source failed succeeded")
	}
	down := transfer.Ticket{ID: id, URL: up.URL}
	deadline := time.Now().Add(5 * time.Second)
	for {
		_, _, err := transfer.Get(ctx, nil, down)
		if err != nil && strings.Contains(err.Error(), "404") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("download after a broken upload: %v, want 404", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	// The relay drops the partial file once it sees the body end.
	for time.Now().Before(deadline) {
		if parts, _ := filepath.Glob(filepath.Join(r.Dir, "*.part-*")); len(parts) == 0 {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Error("a partial upload file stayed")
}

type errReader struct{}

func (errReader) Read([]byte) (int, error) { return 0, errors.New("the source node died") }

// A stream longer than its bound is refused, whether its length is
// declared or only found while it arrives, and nothing of it is kept; a
// stream of the bound's length is kept. (Delete ServeUpload's n > limit
// check to see the streamed one kept.)
func TestAStreamLongerThanItsBoundIsRefused(t *testing.T) {
	r, srv := newRelay(t)
	ctx := context.Background()
	id := "b0und-move-1"
	up := transfer.Ticket{ID: id, URL: transfer.URL(srv.URL, id)}
	over := bytes.Repeat([]byte("x"), relayLimit+1)
	for _, tc := range []struct {
		what string
		body io.Reader
	}{
		{"declared", bytes.NewReader(over)},
		{"streamed", struct{ io.Reader }{bytes.NewReader(over)}}, // no length known to the client
	} {
		err := transfer.Put(ctx, nil, up, tc.body)
		if err == nil || !strings.Contains(err.Error(), "413") {
			t.Errorf("a %s stream of %d bytes under a bound of %d: %v; want 413", tc.what, len(over), relayLimit, err)
		}
		if left, _ := os.ReadDir(r.Dir); len(left) != 0 {
			t.Errorf("after the %s stream was refused, the relay keeps %v", tc.what, left)
		}
	}
	if err := transfer.Put(ctx, nil, up, struct{ io.Reader }{bytes.NewReader(over[:relayLimit])}); err != nil {
		t.Fatalf("a stream of the bound's length: %v", err)
	}
}
