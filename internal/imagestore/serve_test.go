package imagestore

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"

	"github.com/zonewright/zonewright/internal/model"
)

// serveStore is a store with image "web" decompressed, behind a test
// server that routes /images/{name} to ServeArtefact.
func serveStore(t *testing.T) (*Store, []byte, string) {
	t.Helper()
	s := newStore(t)
	data := payload(300<<10, 30)
	fetched(t, s, "web", compress(t, model.CompressionGzip, data))
	if _, err := s.Decompress(t.Context(), "web", ""); err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /images/{name}", func(w http.ResponseWriter, r *http.Request) {
		s.ServeArtefact(w, r, r.PathValue("name"))
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return s, data, srv.URL + "/images/"
}

func download(t *testing.T, method, url string, header map[string]string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, body
}

// The store serves what the API authorised (a node, by its certificate):
// the artefact whole, or a Status for an image it does not hold.
func TestServeArtefact(t *testing.T) {
	_, data, base := serveStore(t)
	cases := []struct {
		name, image string
		code        int
	}{
		{"an artefact", "web", http.StatusOK},
		{"image without artefact", "db", http.StatusNotFound},
		{"invalid image name", "Bad_Name", http.StatusNotFound},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			resp, body := download(t, http.MethodGet, base+c.image, nil)
			if resp.StatusCode != c.code {
				t.Fatalf("status %d, want %d (%s)", resp.StatusCode, c.code, body)
			}
			if c.code == http.StatusOK {
				if !bytes.Equal(body, data) {
					t.Fatal("body differs from the artefact")
				}
				return
			}
			var st model.Status
			if err := json.Unmarshal(body, &st); err != nil || st.Kind != "Status" || st.Code != c.code {
				t.Fatalf("body %s is not a Status with code %d: %v", body, c.code, err)
			}
		})
	}
}

func TestServeArtefactRangeAndHead(t *testing.T) {
	_, data, base := serveStore(t)

	resp, body := download(t, http.MethodGet, base+"web", map[string]string{"Range": "bytes=1000-1999"})
	if resp.StatusCode != http.StatusPartialContent || !bytes.Equal(body, data[1000:2000]) {
		t.Fatalf("range: status %d, %d bytes; want 206 with bytes 1000-1999", resp.StatusCode, len(body))
	}
	if got := resp.Header.Get("Content-Range"); got != "bytes 1000-1999/"+strconv.Itoa(len(data)) {
		t.Fatalf("Content-Range %q", got)
	}
	etag := resp.Header.Get("ETag")
	if etag == "" {
		t.Fatal("no ETag for If-Range")
	}

	// A resume with the current ETag continues; a stale one gets the whole file.
	resp, body = download(t, http.MethodGet, base+"web", map[string]string{"Range": "bytes=5000-", "If-Range": etag})
	if resp.StatusCode != http.StatusPartialContent || !bytes.Equal(body, data[5000:]) {
		t.Fatalf("If-Range current: status %d, %d bytes", resp.StatusCode, len(body))
	}
	resp, body = download(t, http.MethodGet, base+"web", map[string]string{"Range": "bytes=5000-", "If-Range": `"stale"`})
	if resp.StatusCode != http.StatusOK || !bytes.Equal(body, data) {
		t.Fatalf("If-Range stale: status %d, %d bytes; want the whole file", resp.StatusCode, len(body))
	}

	resp, body = download(t, http.MethodHead, base+"web", nil)
	if resp.StatusCode != http.StatusOK || len(body) != 0 || resp.ContentLength != int64(len(data)) {
		t.Fatalf("HEAD: status %d, body %d bytes, Content-Length %d; want 200, none, %d", resp.StatusCode, len(body), resp.ContentLength, len(data))
	}
}
