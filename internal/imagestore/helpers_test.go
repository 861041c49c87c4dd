package imagestore

import (
	"crypto/sha256"
	"encoding/hex"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"sort"
	"sync"
	"testing"
	"time"
)

// newStore is a store that reads any file and the test servers on
// loopback; the tests of the source policy narrow it.
func newStore(t *testing.T) *Store {
	t.Helper()
	return &Store{Dir: t.TempDir(),
		Sources: Sources{FileDir: "/", AllowPrivate: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")}}}
}

func sum(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// payload is n bytes that compress somewhat, like a real root file system.
func payload(n int, seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, seed+1))
	b := make([]byte, n)
	for i := range b {
		if i%4 == 0 {
			b[i] = byte(r.IntN(256))
		} else {
			b[i] = byte('a' + i%7)
		}
	}
	return b
}

// storeFiles lists the names of the files in the store's directory.
func storeFiles(t *testing.T, s *Store) []string {
	t.Helper()
	entries, err := os.ReadDir(s.Dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	sort.Strings(names)
	return names
}

// source is a test HTTP server for one file. It counts the body bytes it
// sends and records each request's range headers; it can drop the
// connection, ignore ranges, trickle or stall.
type source struct {
	t *testing.T

	mu          sync.Mutex
	data        []byte
	etag        string
	lastMod     time.Time
	ignoreRange bool
	dropAfter   int64         // >0: the next response breaks off after this many body bytes
	stallAfter  int64         // >0: every response sends this many bytes, then nothing
	trickle     int           // >0: send the body in chunks of this size …
	trickleGap  time.Duration // … this far apart
	requests    []seenRequest
	served      int64
}

type seenRequest struct {
	Range, IfRange string
	Status         int
}

func newSource(t *testing.T, data []byte) (*source, *httptest.Server) {
	t.Helper()
	src := &source{t: t, data: data, etag: `"v1"`}
	srv := httptest.NewServer(src)
	t.Cleanup(srv.Close)
	return src, srv
}

func (s *source) set(f func(s *source)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f(s)
}

func (s *source) seen() ([]seenRequest, int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]seenRequest(nil), s.requests...), s.served
}

func (s *source) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	data, etag, lastMod := s.data, s.etag, s.lastMod
	ignore, drop, stall := s.ignoreRange, s.dropAfter, s.stallAfter
	trickle, gap := s.trickle, s.trickleGap
	s.dropAfter = 0
	s.requests = append(s.requests, seenRequest{Range: r.Header.Get("Range"), IfRange: r.Header.Get("If-Range")})
	idx := len(s.requests) - 1
	s.mu.Unlock()

	if ignore {
		r.Header.Del("Range")
	}
	if etag != "" {
		w.Header().Set("ETag", etag)
	}
	cw := &countingWriter{ResponseWriter: w, src: s, idx: idx, drop: drop, stall: stall, trickle: trickle, gap: gap, done: r.Context().Done()}
	http.ServeContent(cw, r, "", lastMod, &readSeeker{data: data})
}

// readSeeker is bytes.Reader without WriterTo, so ServeContent writes
// through countingWriter in ordinary chunks.
type readSeeker struct {
	data []byte
	off  int64
}

func (r *readSeeker) Read(p []byte) (int, error) {
	if r.off >= int64(len(r.data)) {
		return 0, io.EOF
	}
	n := copy(p, r.data[r.off:])
	r.off += int64(n)
	return n, nil
}

func (r *readSeeker) Seek(off int64, whence int) (int64, error) {
	switch whence {
	case 0:
		r.off = off
	case 1:
		r.off += off
	case 2:
		r.off = int64(len(r.data)) + off
	}
	return r.off, nil
}

type countingWriter struct {
	http.ResponseWriter
	src     *source
	idx     int
	drop    int64
	stall   int64
	trickle int
	gap     time.Duration
	done    <-chan struct{}
	sent    int64
}

func (c *countingWriter) WriteHeader(code int) {
	c.src.mu.Lock()
	c.src.requests[c.idx].Status = code
	c.src.mu.Unlock()
	c.ResponseWriter.WriteHeader(code)
}

func (c *countingWriter) Write(p []byte) (int, error) {
	written := 0
	for len(p) > 0 {
		if c.trickle > 0 && c.sent > 0 && c.sent%int64(c.trickle) == 0 {
			select {
			case <-time.After(c.gap):
			case <-c.done:
				return written, io.EOF
			}
		}
		chunk := p
		if c.trickle > 0 {
			chunk = chunk[:min(int64(len(chunk)), int64(c.trickle)-c.sent%int64(c.trickle))]
		}
		if c.drop > 0 && c.sent+int64(len(chunk)) > c.drop {
			chunk = chunk[:c.drop-c.sent]
		}
		if c.stall > 0 && c.sent+int64(len(chunk)) > c.stall {
			chunk = chunk[:c.stall-c.sent]
		}
		if len(chunk) > 0 {
			n, err := c.ResponseWriter.Write(chunk)
			c.sent += int64(n)
			written += n
			c.src.mu.Lock()
			if c.src.requests[c.idx].Status == 0 {
				c.src.requests[c.idx].Status = http.StatusOK
			}
			if st := c.src.requests[c.idx].Status; st == http.StatusOK || st == http.StatusPartialContent {
				c.src.served += int64(n) // file bytes only, not error pages
			}
			c.src.mu.Unlock()
			if err != nil {
				return written, err
			}
			p = p[n:]
		}
		c.ResponseWriter.(http.Flusher).Flush()
		switch {
		case c.drop > 0 && c.sent >= c.drop:
			panic(http.ErrAbortHandler) // closes the connection mid-body
		case c.stall > 0 && c.sent >= c.stall:
			<-c.done // nothing more until the client gives up
			return written, io.EOF
		}
	}
	return written, nil
}
