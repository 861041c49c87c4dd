package imagestore

import (
	"bytes"
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestFetchDownloadsAndVerifies(t *testing.T) {
	data := payload(3<<20+17, 1)
	src, srv := newSource(t, data)
	s := newStore(t)

	var calls [][2]int64
	res, err := s.Fetch(t.Context(), FetchRequest{Name: "web", URL: srv.URL + "/web.img", SHA256: sum(data),
		Progress: func(done, total int64) { calls = append(calls, [2]int64{done, total}) }})
	if err != nil {
		t.Fatal(err)
	}
	if res.Bytes != int64(len(data)) || res.Downloaded != int64(len(data)) || res.Resumed {
		t.Fatalf("result %+v, want %d bytes downloaded in one go", res, len(data))
	}
	if !bytes.Equal(readFile(t, res.Path), data) {
		t.Fatal("download differs from the source")
	}
	if got := storeFiles(t, s); !slices.Equal(got, []string{"web.download"}) {
		t.Fatalf("store holds %v, want only web.download", got)
	}
	if len(calls) == 0 || calls[len(calls)-1] != [2]int64{int64(len(data)), int64(len(data))} {
		t.Fatalf("progress calls %v, want the last to be (size, size) with the total from Content-Length", calls)
	}

	// A repeated call (a retried activity) finds the verified download.
	again, err := s.Fetch(t.Context(), FetchRequest{Name: "web", URL: srv.URL + "/web.img", SHA256: sum(data)})
	if err != nil {
		t.Fatal(err)
	}
	if again.Downloaded != 0 || again.Bytes != int64(len(data)) {
		t.Fatalf("repeat %+v, want no transfer", again)
	}
	if reqs, _ := src.seen(); len(reqs) != 1 {
		t.Fatalf("source saw %d requests, want 1", len(reqs))
	}
}

func TestFetchDigestMismatchRemovesThePartial(t *testing.T) {
	data := payload(1<<20, 2)
	_, srv := newSource(t, data)
	s := newStore(t)
	want := sum([]byte("some other file"))

	_, err := s.Fetch(t.Context(), FetchRequest{Name: "bad", URL: srv.URL, SHA256: want})
	var mismatch *DigestMismatchError
	if !errors.As(err, &mismatch) {
		t.Fatalf("err = %v, want a *DigestMismatchError", err)
	}
	if mismatch.Want != want || mismatch.Got != sum(data) {
		t.Fatalf("mismatch %+v, want Want=%s Got=%s", mismatch, want, sum(data))
	}
	if !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), sum(data)) {
		t.Fatalf("message %q lacks one of the digests", err)
	}
	if !Permanent(err) {
		t.Fatal("a digest mismatch must be permanent")
	}
	if got := storeFiles(t, s); len(got) != 0 {
		t.Fatalf("store holds %v after a mismatch, want nothing", got)
	}
}

func TestFetchSizeMismatchIsADigestMismatch(t *testing.T) {
	data := payload(200<<10, 3)
	_, srv := newSource(t, data)
	s := newStore(t)
	_, err := s.Fetch(t.Context(), FetchRequest{Name: "small", URL: srv.URL, SHA256: sum(data), Size: 100 << 10})
	var mismatch *DigestMismatchError
	if !errors.As(err, &mismatch) || mismatch.WantSize != 100<<10 || mismatch.GotSize <= 100<<10 {
		t.Fatalf("err = %v, want a size mismatch that stopped just past the declared size", err)
	}
	if got := storeFiles(t, s); len(got) != 0 {
		t.Fatalf("store holds %v, want nothing", got)
	}
}

func TestFetchResumesAfterADroppedConnection(t *testing.T) {
	data := payload(4<<20, 4)
	src, srv := newSource(t, data)
	half := int64(len(data) / 2)
	src.set(func(s *source) { s.dropAfter = half })
	s := newStore(t)
	req := FetchRequest{Name: "resume", URL: srv.URL, SHA256: sum(data), Size: int64(len(data))}

	_, err := s.Fetch(t.Context(), req)
	if err == nil || Permanent(err) {
		t.Fatalf("first attempt: err = %v, want a retryable error", err)
	}
	fi, err := os.Stat(s.partialPath("resume"))
	if err != nil || fi.Size() != half {
		t.Fatalf("partial after the drop: %v, %v; want %d bytes kept", fi, err, half)
	}

	res, err := s.Fetch(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Resumed || res.Downloaded != int64(len(data))-half || res.Bytes != int64(len(data)) {
		t.Fatalf("result %+v, want a resume that transferred the second half", res)
	}
	if !bytes.Equal(readFile(t, res.Path), data) {
		t.Fatal("resumed download differs from the source")
	}
	reqs, served := src.seen()
	if served != int64(len(data)) {
		t.Fatalf("source sent %d bytes in all, want exactly the file's %d", served, len(data))
	}
	if len(reqs) != 2 || reqs[1].Range != "bytes=2097152-" || reqs[1].IfRange != `"v1"` || reqs[1].Status != 206 {
		t.Fatalf("requests %+v, want a second one with Range from the half and If-Range the ETag, answered 206", reqs)
	}
	if got := storeFiles(t, s); !slices.Equal(got, []string{"resume.download"}) {
		t.Fatalf("store holds %v, want only the download", got)
	}
}

func TestFetchRestartsWhenTheServerIgnoresRange(t *testing.T) {
	data := payload(2<<20, 5)
	src, srv := newSource(t, data)
	src.set(func(s *source) { s.dropAfter = 1 << 20; s.ignoreRange = true })
	s := newStore(t)
	req := FetchRequest{Name: "norange", URL: srv.URL, SHA256: sum(data)}

	if _, err := s.Fetch(t.Context(), req); err == nil {
		t.Fatal("first attempt succeeded despite the dropped connection")
	}
	res, err := s.Fetch(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	if res.Resumed || res.Downloaded != int64(len(data)) {
		t.Fatalf("result %+v, want a clean restart of the whole file", res)
	}
	if !bytes.Equal(readFile(t, res.Path), data) {
		t.Fatal("download differs from the source")
	}
	reqs, _ := src.seen()
	if len(reqs) != 2 || reqs[1].Range == "" || reqs[1].Status != 200 {
		t.Fatalf("requests %+v, want a Range request answered 200", reqs)
	}
}

func TestFetchRestartsWhenTheSourceChanged(t *testing.T) {
	stale := payload(2<<20, 6)
	fresh := payload(2<<20, 7)
	src, srv := newSource(t, stale)
	src.set(func(s *source) { s.etag = `"old"`; s.dropAfter = 1 << 20 })
	s := newStore(t)
	req := FetchRequest{Name: "changed", URL: srv.URL, SHA256: sum(fresh)}

	if _, err := s.Fetch(t.Context(), req); err == nil {
		t.Fatal("first attempt succeeded despite the dropped connection")
	}
	src.set(func(s *source) { s.data, s.etag = fresh, `"new"` })
	res, err := s.Fetch(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	if res.Resumed || res.Downloaded != int64(len(fresh)) || !bytes.Equal(readFile(t, res.Path), fresh) {
		t.Fatalf("result %+v, want the whole new file and nothing of the old", res)
	}
	reqs, _ := src.seen()
	if len(reqs) != 2 || reqs[1].IfRange != `"old"` || reqs[1].Status != 200 {
		t.Fatalf("requests %+v, want exactly one more, If-Range the old ETag, answered 200 (no splice, no second restart)", reqs)
	}
}

func TestFetchVerifiesACompletePartialOn416(t *testing.T) {
	data := payload(300<<10, 8)
	src, srv := newSource(t, data)
	s := newStore(t)
	req := FetchRequest{Name: "done", URL: srv.URL, SHA256: sum(data)}
	// A crash between the last byte and the rename: the partial is whole.
	if err := os.WriteFile(s.partialPath("done"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	meta := `{"url":"` + srv.URL + `","sha256":"` + sum(data) + `","etag":"\"v1\""}`
	if err := os.WriteFile(s.metaPath("done"), []byte(meta), 0o644); err != nil {
		t.Fatal(err)
	}

	res, err := s.Fetch(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	if res.Downloaded != 0 || !res.Resumed || res.Bytes != int64(len(data)) {
		t.Fatalf("result %+v, want the partial verified without a transfer", res)
	}
	reqs, served := src.seen()
	if len(reqs) != 1 || reqs[0].Status != 416 || served != 0 {
		t.Fatalf("requests %+v, %d bytes served; want one Range request answered 416", reqs, served)
	}
}

func TestFetchResumedMismatchRetriesCleanOnce(t *testing.T) {
	data := payload(512<<10, 9)
	src, srv := newSource(t, data)
	src.set(func(s *source) { s.etag = "" }) // no validator: the splice is only caught by the digest
	s := newStore(t)
	req := FetchRequest{Name: "splice", URL: srv.URL, SHA256: sum(data)}
	junk := bytes.Repeat([]byte{'x'}, 100<<10)
	if err := os.WriteFile(s.partialPath("splice"), junk, 0o644); err != nil {
		t.Fatal(err)
	}
	meta := `{"url":"` + srv.URL + `","sha256":"` + sum(data) + `"}`
	if err := os.WriteFile(s.metaPath("splice"), []byte(meta), 0o644); err != nil {
		t.Fatal(err)
	}

	res, err := s.Fetch(t.Context(), req)
	if err != nil {
		t.Fatalf("a bad partial must not fail the image: %v", err)
	}
	// Downloaded counts both transfers: the tail after the junk, then the whole.
	if wantBytes := int64(len(data)-len(junk)) + int64(len(data)); res.Resumed || res.Downloaded != wantBytes || !bytes.Equal(readFile(t, res.Path), data) {
		t.Fatalf("result %+v, want a clean second download (%d bytes transferred in all)", res, wantBytes)
	}
	reqs, _ := src.seen()
	if len(reqs) != 2 || reqs[0].Status != 206 || reqs[1].Range != "" {
		t.Fatalf("requests %+v, want a resume then one request from the start", reqs)
	}
}

func TestFetchSlowButSteadySourceSucceeds(t *testing.T) {
	data := payload(20*64<<10, 10) // 20 chunks of 64 KiB, 200 ms apart: ~4 s
	src, srv := newSource(t, data)
	src.set(func(s *source) { s.trickle, s.trickleGap = 64<<10, 200*time.Millisecond })
	s := newStore(t)

	var calls int
	start := time.Now()
	res, err := s.Fetch(t.Context(), FetchRequest{Name: "slow", URL: srv.URL, SHA256: sum(data),
		StallTimeout: time.Second, Progress: func(done, total int64) { calls++ }})
	if err != nil {
		t.Fatalf("slow transfer failed after %v: %v", time.Since(start), err)
	}
	took := time.Since(start)
	if took < 3*time.Second {
		t.Fatalf("transfer took %v; the source should have needed about 4 s, so the test proves nothing", took)
	}
	if res.Bytes != int64(len(data)) {
		t.Fatalf("result %+v", res)
	}
	// At most one call per 500 ms, plus the first and the last.
	if maxCalls := int(took/(500*time.Millisecond)) + 2; calls < 3 || calls > maxCalls {
		t.Fatalf("%d progress calls in %v, want between 3 and %d", calls, took, maxCalls)
	}
}

func TestFetchStalledSourceFailsWithErrStalled(t *testing.T) {
	data := payload(1<<20, 11)
	src, srv := newSource(t, data)
	half := int64(len(data) / 2)
	src.set(func(s *source) { s.stallAfter = half })
	s := newStore(t)
	req := FetchRequest{Name: "stall", URL: srv.URL, SHA256: sum(data), StallTimeout: time.Second}

	start := time.Now()
	_, err := s.Fetch(t.Context(), req)
	took := time.Since(start)
	if !errors.Is(err, ErrStalled) || Permanent(err) {
		t.Fatalf("err = %v, want ErrStalled, retryable", err)
	}
	if took < time.Second || took > 10*time.Second {
		t.Fatalf("gave up after %v, want about the 1 s stall timeout", took)
	}
	if fi, err := os.Stat(s.partialPath("stall")); err != nil || fi.Size() != half {
		t.Fatalf("partial %v, %v; want the %d bytes received kept", fi, err, half)
	}

	// The source recovers: the next call continues where the stall left off.
	src.set(func(s *source) { s.stallAfter = 0 })
	res, err := s.Fetch(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Resumed || res.Downloaded != int64(len(data))-half {
		t.Fatalf("result %+v, want a resume from the stall point", res)
	}
}

func TestFetchStallsWaitingForHeaders(t *testing.T) {
	s := newStore(t)
	// A server that accepts the connection and never answers.
	ln := listenSilently(t)
	start := time.Now()
	_, err := s.Fetch(t.Context(), FetchRequest{Name: "mute", URL: "http://" + ln + "/x", SHA256: sum(nil), StallTimeout: 500 * time.Millisecond})
	if !errors.Is(err, ErrStalled) || time.Since(start) > 10*time.Second {
		t.Fatalf("err = %v after %v, want ErrStalled after about 0.5 s", err, time.Since(start))
	}
}

func TestFetchCancelStopsPromptlyAndRemoveCleansUp(t *testing.T) {
	data := payload(4<<20, 12)
	src, srv := newSource(t, data)
	src.set(func(s *source) { s.trickle, s.trickleGap = 64<<10, 100*time.Millisecond })
	s := newStore(t)

	ctx, cancel := context.WithCancel(t.Context())
	var cancelled time.Time
	_, err := s.Fetch(ctx, FetchRequest{Name: "cancel", URL: srv.URL, SHA256: sum(data), Progress: func(done, total int64) {
		if done >= 256<<10 && cancelled.IsZero() {
			cancelled = time.Now()
			cancel()
		}
	}})
	if cancelled.IsZero() {
		t.Fatal("the transfer never got far enough to cancel")
	}
	if !errors.Is(err, context.Canceled) || Permanent(err) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	if took := time.Since(cancelled); took > 2*time.Second {
		t.Fatalf("Fetch returned %v after the cancel, want promptly", took)
	}
	if got := storeFiles(t, s); len(got) == 0 {
		t.Fatal("the partial was not kept for resume")
	}
	if err := s.Remove("cancel"); err != nil {
		t.Fatal(err)
	}
	if got := storeFiles(t, s); len(got) != 0 {
		t.Fatalf("store holds %v after Remove, want nothing", got)
	}
}

func TestRemoveStopsARunningFetch(t *testing.T) {
	data := payload(4<<20, 13)
	src, srv := newSource(t, data)
	src.set(func(s *source) { s.trickle, s.trickleGap = 64<<10, 100*time.Millisecond })
	s := newStore(t)

	started := make(chan struct{})
	var once sync.Once
	errc := make(chan error, 1)
	go func() {
		_, err := s.Fetch(t.Context(), FetchRequest{Name: "gone", URL: srv.URL, SHA256: sum(data),
			Progress: func(done, total int64) { once.Do(func() { close(started) }) }})
		errc <- err
	}()
	select {
	case <-started:
	case <-time.After(30 * time.Second):
		t.Fatal("fetch never started")
	}
	if err := s.Remove("gone"); err != nil {
		t.Fatal(err)
	}
	if err := <-errc; !errors.Is(err, ErrRemoved) {
		t.Fatalf("fetch err = %v, want ErrRemoved", err)
	}
	if got := storeFiles(t, s); len(got) != 0 {
		t.Fatalf("store holds %v after Remove, want nothing", got)
	}
}

func TestFetchFileSourceResumesBySeeking(t *testing.T) {
	data := payload(1<<20+5, 14)
	path := filepath.Join(t.TempDir(), "image.raw")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	s := newStore(t)
	u := (&url.URL{Scheme: "file", Path: path}).String()

	// Interrupt after the first chunk, as a crash or cancel would.
	ctx, cancel := context.WithCancel(t.Context())
	_, err := s.Fetch(ctx, FetchRequest{Name: "local", URL: u, SHA256: sum(data), Progress: func(done, total int64) { cancel() }})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	fi, err := os.Stat(s.partialPath("local"))
	if err != nil || fi.Size() == 0 || fi.Size() >= int64(len(data)) {
		t.Fatalf("partial %v, %v; want part of the file", fi, err)
	}
	kept := fi.Size()

	res, err := s.Fetch(t.Context(), FetchRequest{Name: "local", URL: u, SHA256: sum(data)})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Resumed || res.Downloaded != int64(len(data))-kept || !bytes.Equal(readFile(t, res.Path), data) {
		t.Fatalf("result %+v, want a resume after %d bytes", res, kept)
	}
}

func TestFetchMissingSourcesArePermanent(t *testing.T) {
	s := newStore(t)
	cases := []struct {
		name, url string
		status    int
		permanent bool
	}{
		{"http 404 is permanent", newStatusServer(t, 404) + "/image", 404, true},
		{"http 403 is permanent", newStatusServer(t, 403) + "/image", 403, true},
		{"http 503 is retryable", newStatusServer(t, 503) + "/image", 503, false},
		{"absent file is permanent", "file:///no/such/image.tar", 0, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := s.Fetch(t.Context(), FetchRequest{Name: "missing", URL: c.url, SHA256: sum(nil)})
			var se *SourceError
			if !errors.As(err, &se) || se.Permanent != c.permanent || se.Status != c.status || Permanent(err) != c.permanent {
				t.Fatalf("err = %v, want a SourceError with status %d, permanent %v", err, c.status, c.permanent)
			}
		})
	}
}

func TestFetchRefusesBadRequests(t *testing.T) {
	s := newStore(t)
	good := FetchRequest{Name: "ok", URL: "http://example.invalid/x", SHA256: sum(nil)}
	cases := map[string]func(r *FetchRequest){
		"no digest":      func(r *FetchRequest) { r.SHA256 = "" },
		"short digest":   func(r *FetchRequest) { r.SHA256 = "abc" },
		"bad name":       func(r *FetchRequest) { r.Name = "../etc" },
		"ftp source":     func(r *FetchRequest) { r.URL = "ftp://example.invalid/x" },
		"remote file":    func(r *FetchRequest) { r.URL = "file://otherhost/x" },
		"negative size":  func(r *FetchRequest) { r.Size = -1 },
		"no source host": func(r *FetchRequest) { r.URL = "http:///x" },
	}
	for name, mutate := range cases {
		t.Run(name, func(t *testing.T) {
			r := good
			mutate(&r)
			_, err := s.Fetch(t.Context(), r)
			if !errors.Is(err, ErrInvalid) || !Permanent(err) {
				t.Fatalf("err = %v, want ErrInvalid", err)
			}
		})
	}
}

func newStatusServer(t *testing.T, code int) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, http.StatusText(code), code)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// listenSilently accepts connections and never answers; it returns the
// address.
func listenSilently(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	return ln.Addr().String()
}

func TestFetchResumeUsesLastModifiedWithoutETag(t *testing.T) {
	data := payload(1<<20, 15)
	src, srv := newSource(t, data)
	modified := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	src.set(func(s *source) { s.etag, s.lastMod, s.dropAfter = "", modified, 300<<10 })
	s := newStore(t)
	req := FetchRequest{Name: "dated", URL: srv.URL, SHA256: sum(data)}
	if _, err := s.Fetch(t.Context(), req); err == nil {
		t.Fatal("first attempt succeeded despite the dropped connection")
	}
	res, err := s.Fetch(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	reqs, served := src.seen()
	if !res.Resumed || served != int64(len(data)) || len(reqs) != 2 || reqs[1].IfRange != modified.Format(http.TimeFormat) || reqs[1].Status != 206 {
		t.Fatalf("result %+v, requests %+v, %d bytes served; want a resume with If-Range the Last-Modified date", res, reqs, served)
	}
}

func TestFetchOverHTTPSUsesTheStoresTLSConfig(t *testing.T) {
	data := payload(100<<10, 16)
	srv := httptest.NewTLSServer(&source{t: t, data: data, etag: `"v1"`})
	t.Cleanup(srv.Close)
	s := newStore(t)
	req := FetchRequest{Name: "tls", URL: srv.URL, SHA256: sum(data)}
	if _, err := s.Fetch(t.Context(), req); err == nil {
		t.Fatal("the default client trusted the test server's certificate")
	}
	s = newStore(t) // the client is built on first use
	s.TLS = srv.Client().Transport.(*http.Transport).TLSClientConfig
	res, err := s.Fetch(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(readFile(t, res.Path), data) {
		t.Fatal("download differs from the source")
	}
}

func TestFetchErrorsDoNotShowURLCredentials(t *testing.T) {
	s := newStore(t)
	u, err := url.Parse(newStatusServer(t, 404))
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.UserPassword("puller", "hunter2")
	for _, raw := range []string{u.String() + "/image", "http://puller:hunter2@bad host/x"} {
		_, err := s.Fetch(t.Context(), FetchRequest{Name: "secret", URL: raw, SHA256: sum(nil)})
		if err == nil || strings.Contains(err.Error(), "hunter2") {
			t.Fatalf("err = %v, want an error without the password", err)
		}
	}
}

func TestConcurrentFetchesOfOneImageTransferOnce(t *testing.T) {
	data := payload(1<<20, 17)
	src, srv := newSource(t, data)
	src.set(func(s *source) { s.trickle, s.trickleGap = 128<<10, 20*time.Millisecond })
	s := newStore(t)
	req := FetchRequest{Name: "twice", URL: srv.URL, SHA256: sum(data)}

	results := make(chan FetchResult, 2)
	errc := make(chan error, 2)
	for range 2 {
		go func() {
			res, err := s.Fetch(t.Context(), req)
			results <- res
			errc <- err
		}()
	}
	var downloaded []int64
	for range 2 {
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
		downloaded = append(downloaded, (<-results).Downloaded)
	}
	slices.Sort(downloaded)
	if reqs, served := src.seen(); len(reqs) != 1 || served != int64(len(data)) || !slices.Equal(downloaded, []int64{0, int64(len(data))}) {
		t.Fatalf("%d requests, %d bytes served, downloaded %v; want one transfer and one reuse", len(reqs), served, downloaded)
	}
}
