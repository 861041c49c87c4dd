package imagestore

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"
)

// DefaultStallTimeout is how long a transfer may deliver nothing before it
// is abandoned, when the request does not say.
const DefaultStallTimeout = 30 * time.Second

// progressInterval is the least time between two Progress calls, so an
// activity can heartbeat on every call without flooding the server.
const progressInterval = 500 * time.Millisecond

// FetchRequest says what to download and how to judge it.
type FetchRequest struct {
	Name         string        // image name (DNS-1123 label): files are <Dir>/<Name>.download(.partial)
	URL          string        // http://, https:// or file://
	SHA256       string        // expected hex digest of the file as downloaded; required
	Size         int64         // expected size if known (0: unknown)
	StallTimeout time.Duration // no byte for this long = stalled (0: DefaultStallTimeout)
	// Progress is called at most every ~500ms and once at the end with the
	// bytes of the file so far (including a resumed partial) and the total
	// (0: unknown). It runs on Fetch's goroutine: keep it short.
	Progress func(done, total int64)
	// Transport, when set, replaces the store's for this request: one
	// built over Store.Transport (a registry's authentication), so every
	// dial stays within Sources.
	Transport http.RoundTripper
}

// FetchResult is a verified download.
type FetchResult struct {
	Path       string // the verified download
	Bytes      int64  // its size
	Downloaded int64  // bytes transferred by this call (less than Bytes after a resume)
	Resumed    bool   // part of the file came from an earlier attempt
}

// partialMeta is the sidecar of a partial download: a partial is only
// continued for the same URL and digest, and only from the same version of
// the source.
type partialMeta struct {
	URL          string `json:"url"`
	SHA256       string `json:"sha256"`
	ETag         string `json:"etag,omitempty"`
	LastModified string `json:"lastModified,omitempty"`
	// file:// sources: the source's size and modification time.
	FileSize    int64 `json:"fileSize,omitempty"`
	FileModTime int64 `json:"fileModTimeNs,omitempty"`
}

// Fetch downloads req.URL into the store and verifies it, continuing a
// partial download left by an earlier call (see the package doc for the
// resume rules). A verified download already in the store with the
// requested digest is returned without a transfer.
func (s *Store) Fetch(ctx context.Context, req FetchRequest) (FetchResult, error) {
	src, err := checkFetch(s, &req)
	if err != nil {
		return FetchResult{}, err
	}
	ctx, end, err := s.begin(ctx, req.Name)
	if err != nil {
		return FetchResult{}, err
	}
	defer end()
	if err := os.MkdirAll(s.Dir, 0o755); err != nil {
		return FetchResult{}, fmt.Errorf("image store %s: %w", s.Dir, err)
	}

	if res, ok, err := s.existingDownload(ctx, req); err != nil || ok {
		return res, err
	}

	t := &transfer{s: s, req: req, src: src, h: sha256.New()}
	defer t.close()
	if err := t.openPartial(ctx); err != nil {
		return FetchResult{}, err
	}
	res, err := t.run(ctx)
	var refusedErr *RefusedSourceError
	if errors.Is(err, ErrTooLarge) || errors.As(err, &refusedErr) {
		t.discard()
	}
	if errors.Is(err, ErrStalled) {
		err = fmt.Errorf("%w: nothing received for %s, %d bytes kept for resume", err, req.StallTimeout, t.have)
	}
	if err != nil {
		return FetchResult{}, fmt.Errorf("fetch image %s from %s: %w", req.Name, src.Redacted(), err)
	}
	return res, nil
}

// checkFetch validates and normalises the request; every failure is
// permanent.
func checkFetch(s *Store, req *FetchRequest) (*url.URL, error) {
	if s.Dir == "" {
		return nil, fmt.Errorf("%w: image store has no directory", ErrInvalid)
	}
	if err := validName(req.Name); err != nil {
		return nil, err
	}
	req.SHA256 = strings.ToLower(req.SHA256)
	if b, err := hex.DecodeString(req.SHA256); err != nil || len(b) != sha256.Size {
		return nil, fmt.Errorf("%w: image %s: sha256 %q is not 64 hex digits", ErrInvalid, req.Name, req.SHA256)
	}
	if req.Size < 0 {
		return nil, fmt.Errorf("%w: image %s: negative size %d", ErrInvalid, req.Name, req.Size)
	}
	if req.Size > s.maxBytes() {
		return nil, fmt.Errorf("%w: image %s: size %d is above %d bytes", ErrTooLarge, req.Name, req.Size, s.maxBytes())
	}
	if req.StallTimeout <= 0 {
		req.StallTimeout = DefaultStallTimeout
	}
	u, err := url.Parse(req.URL)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // without the URL, which may carry credentials
		}
		return nil, fmt.Errorf("%w: image %s: source URL: %v", ErrInvalid, req.Name, err)
	}
	switch u.Scheme {
	case "http", "https":
		if u.Host == "" {
			return nil, fmt.Errorf("%w: image %s: source URL %q has no host", ErrInvalid, req.Name, u.Redacted())
		}
	case "file":
		if (u.Host != "" && u.Host != "localhost") || u.Path == "" {
			return nil, fmt.Errorf("%w: image %s: source URL %q is not a local absolute file", ErrInvalid, req.Name, u.Redacted())
		}
	default:
		return nil, fmt.Errorf("%w: image %s: source URL %q: scheme must be http, https or file", ErrInvalid, req.Name, u.Redacted())
	}
	if err := s.Sources.CheckURL(req.URL); err != nil {
		return nil, fmt.Errorf("image %s: %w", req.Name, err)
	}
	return u, nil
}

// existingDownload returns a verified download an earlier call left, so a
// retried activity does not transfer again. One that no longer matches the
// request is removed.
func (s *Store) existingDownload(ctx context.Context, req FetchRequest) (FetchResult, bool, error) {
	path := s.downloadPath(req.Name)
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return FetchResult{}, false, nil
	}
	if err != nil {
		return FetchResult{}, false, fmt.Errorf("image %s: %w", req.Name, err)
	}
	var size int64
	if fi, err := f.Stat(); err == nil {
		size = fi.Size()
	}
	h := sha256.New()
	n, err := copyCtx(ctx, h, &progressReader{r: f, report: throttle(req.Progress, size)})
	f.Close()
	if err != nil {
		return FetchResult{}, false, fmt.Errorf("image %s: hash %s: %w", req.Name, path, err)
	}
	if hex.EncodeToString(h.Sum(nil)) == req.SHA256 && (req.Size == 0 || req.Size == n) {
		if req.Progress != nil {
			req.Progress(n, n)
		}
		return FetchResult{Path: path, Bytes: n}, true, nil
	}
	if err := os.Remove(path); err != nil {
		return FetchResult{}, false, fmt.Errorf("image %s: remove stale download: %w", req.Name, err)
	}
	return FetchResult{}, false, nil
}

// transfer is one Fetch's state: the partial file and the hash of its bytes.
type transfer struct {
	s    *Store
	req  FetchRequest
	src  *url.URL
	meta partialMeta

	f          *os.File
	h          hash.Hash
	have       int64 // bytes in the partial, all hashed into h
	carried    int64 // of those, bytes an earlier call left
	downloaded int64 // bytes transferred by this call
	total      int64 // the source's size as it announced it (0: unknown)

	lastProgress time.Time
}

func (t *transfer) close() {
	if t.f != nil {
		t.f.Close()
	}
}

// discard removes the partial and its sidecar: what they hold can never
// become the image.
func (t *transfer) discard() {
	t.close()
	t.f = nil
	os.Remove(t.s.partialPath(t.req.Name))
	os.Remove(t.s.metaPath(t.req.Name))
}

// openPartial opens the partial download and hashes what it holds, or
// starts a new one when the sidecar does not match the request.
func (t *transfer) openPartial(ctx context.Context) error {
	name := t.req.Name
	f, err := os.OpenFile(t.s.partialPath(name), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return fmt.Errorf("image %s: open partial download: %w", name, err)
	}
	t.f = f
	old, err := readMeta(t.s.metaPath(name))
	if err != nil || old.URL != t.req.URL || old.SHA256 != t.req.SHA256 {
		t.meta = partialMeta{URL: t.req.URL, SHA256: t.req.SHA256}
		return t.restart()
	}
	t.meta = old
	// Re-hashing a large partial takes a while: report it as progress so
	// a heartbeating caller stays alive.
	n, err := copyCtx(ctx, t.h, &progressReader{r: f, report: throttle(t.req.Progress, t.req.Size)})
	if err != nil {
		return fmt.Errorf("image %s: hash partial download: %w", name, err)
	}
	if t.req.Size > 0 && n > t.req.Size {
		return t.restart()
	}
	t.have, t.carried = n, n
	return nil
}

// restart empties the partial: what it holds cannot be continued.
func (t *transfer) restart() error {
	if err := t.f.Truncate(0); err != nil {
		return fmt.Errorf("image %s: truncate partial download: %w", t.req.Name, err)
	}
	if _, err := t.f.Seek(0, io.SeekStart); err != nil {
		return fmt.Errorf("image %s: rewind partial download: %w", t.req.Name, err)
	}
	t.h.Reset()
	t.have, t.carried = 0, 0
	return t.saveMeta()
}

func (t *transfer) saveMeta() error {
	b, err := json.Marshal(t.meta)
	if err != nil {
		return fmt.Errorf("image %s: encode partial sidecar: %w", t.req.Name, err)
	}
	path := t.s.metaPath(t.req.Name)
	tmp := path + ".tmp"
	// The URL may carry credentials.
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return fmt.Errorf("image %s: write partial sidecar: %w", t.req.Name, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("image %s: write partial sidecar: %w", t.req.Name, err)
	}
	return nil
}

func readMeta(path string) (partialMeta, error) {
	var m partialMeta
	b, err := os.ReadFile(path)
	if err != nil {
		return m, err
	}
	return m, json.Unmarshal(b, &m)
}

// maxRounds bounds the requests of one Fetch: a resume, a restart the
// source forces, and one clean restart after a resumed download mismatched.
const maxRounds = 4

// run transfers until the partial is complete, then verifies and installs it.
func (t *transfer) run(ctx context.Context) (FetchResult, error) {
	for round := 0; round < maxRounds; round++ {
		complete := t.req.Size > 0 && t.have == t.req.Size
		if !complete {
			var err error
			if t.src.Scheme == "file" {
				complete, err = t.fromFile(ctx)
			} else {
				complete, err = t.fromHTTP(ctx)
			}
			if err != nil {
				return FetchResult{}, err
			}
		}
		if !complete {
			continue
		}
		t.progress(true)
		res, err := t.finish()
		var mismatch *DigestMismatchError
		if errors.As(err, &mismatch) && t.carried > 0 {
			// Bytes of an earlier attempt may be what is wrong: one clean try.
			if err := t.restart(); err != nil {
				return FetchResult{}, err
			}
			continue
		}
		return res, err
	}
	return FetchResult{}, fmt.Errorf("source kept refusing to resume after %d requests", maxRounds)
}

// finish verifies the complete partial; a good one becomes the download,
// a bad one is removed.
func (t *transfer) finish() (FetchResult, error) {
	name := t.req.Name
	got := hex.EncodeToString(t.h.Sum(nil))
	if got != t.req.SHA256 || (t.req.Size > 0 && t.have != t.req.Size) {
		mismatch := &DigestMismatchError{Name: name, Want: t.req.SHA256, Got: got, WantSize: t.req.Size, GotSize: t.have}
		if t.carried > 0 {
			return FetchResult{}, mismatch // run restarts; keep the file open
		}
		t.f.Close()
		t.f = nil
		errs := []error{os.Remove(t.s.partialPath(name)), os.Remove(t.s.metaPath(name))}
		if err := errors.Join(errs...); err != nil {
			return FetchResult{}, fmt.Errorf("%w (and removing the partial: %v)", mismatch, err)
		}
		return FetchResult{}, mismatch
	}
	if err := t.f.Sync(); err != nil {
		return FetchResult{}, fmt.Errorf("image %s: sync download: %w", name, err)
	}
	if err := t.f.Close(); err != nil {
		return FetchResult{}, fmt.Errorf("image %s: close download: %w", name, err)
	}
	t.f = nil
	if err := os.Rename(t.s.partialPath(name), t.s.downloadPath(name)); err != nil {
		return FetchResult{}, fmt.Errorf("image %s: install download: %w", name, err)
	}
	if err := os.Remove(t.s.metaPath(name)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return FetchResult{}, fmt.Errorf("image %s: remove partial sidecar: %w", name, err)
	}
	if err := syncDir(t.s.Dir); err != nil {
		return FetchResult{}, fmt.Errorf("image %s: sync store directory: %w", name, err)
	}
	return FetchResult{Path: t.s.downloadPath(name), Bytes: t.have, Downloaded: t.downloaded, Resumed: t.carried > 0}, nil
}

// fromHTTP makes one request for what the partial lacks and appends the
// answer. complete=false with no error means: ask again (the partial was
// emptied because the source cannot continue it).
func (t *transfer) fromHTTP(ctx context.Context) (complete bool, err error) {
	xctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	stall := time.AfterFunc(t.req.StallTimeout, func() { cancel(ErrStalled) })
	defer stall.Stop()

	hreq, err := http.NewRequestWithContext(xctx, http.MethodGet, t.req.URL, nil)
	if err != nil {
		return false, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	// The digest is of the bytes as served: no transparent decompression.
	hreq.Header.Set("Accept-Encoding", "identity")
	hreq.Header.Set("User-Agent", "zonewright-imagestore")
	resuming := t.have > 0
	if resuming {
		hreq.Header.Set("Range", fmt.Sprintf("bytes=%d-", t.have))
		switch {
		case t.meta.ETag != "":
			hreq.Header.Set("If-Range", t.meta.ETag)
		case t.meta.LastModified != "":
			hreq.Header.Set("If-Range", t.meta.LastModified)
		}
	}
	client := t.s.client()
	if t.req.Transport != nil {
		own := *client
		own.Transport = t.req.Transport
		client = &own
	}
	resp, err := client.Do(hreq)
	if err != nil {
		return false, &noResponseError{ctxErr(xctx, err)}
	}
	defer resp.Body.Close()

	switch resp.StatusCode {
	case http.StatusOK:
		if resuming {
			if err := t.restart(); err != nil {
				return false, err
			}
		}
		t.meta.ETag, t.meta.LastModified = validators(resp)
		if err := t.saveMeta(); err != nil {
			return false, err
		}
		t.total = max(resp.ContentLength, 0)
	case http.StatusPartialContent:
		start, size, ok := parseContentRange(resp.Header.Get("Content-Range"))
		etag, lastMod := validators(resp)
		changed := (etag != "" && t.meta.ETag != "" && etag != t.meta.ETag) ||
			(lastMod != "" && t.meta.LastModified != "" && lastMod != t.meta.LastModified)
		if !ok || start != t.have || changed {
			return false, t.restart()
		}
		t.total = max(size, 0)
	case http.StatusRequestedRangeNotSatisfiable:
		if !resuming {
			return false, &SourceError{URL: t.src.Redacted(), Status: resp.StatusCode}
		}
		// "bytes */<size>": the partial holds all of it when the sizes agree.
		if _, size, ok := parseContentRange(resp.Header.Get("Content-Range")); ok && size >= 0 && size != t.have {
			return false, t.restart()
		}
		return true, nil
	default:
		return false, &SourceError{URL: t.src.Redacted(), Status: resp.StatusCode, Permanent: permanentStatus(resp.StatusCode)}
	}

	if err := t.copy(xctx, resp.Body, stall); err != nil {
		return false, err
	}
	if resp.ContentLength < 0 && t.req.Size > 0 && t.have < t.req.Size {
		// A response delimited by closing the connection cannot tell a
		// dropped connection from the end: the expected size can.
		return false, fmt.Errorf("transfer ended after %d of %d bytes", t.have, t.req.Size)
	}
	return true, nil
}

// noResponseError is a request that got no HTTP response: whatever
// happened at the address (refused, reset, another protocol, silence) is
// one class for a client, so an import cannot map a network.
type noResponseError struct{ err error }

func (e *noResponseError) Error() string { return e.err.Error() }
func (e *noResponseError) Unwrap() error { return e.err }

// fromFile appends what the partial lacks from a local source file.
func (t *transfer) fromFile(ctx context.Context) (complete bool, err error) {
	src, err := t.s.Sources.openFile(t.src.Path)
	var refusedErr *RefusedSourceError
	if errors.As(err, &refusedErr) {
		return false, err
	}
	if err != nil {
		return false, &SourceError{URL: t.src.Redacted(), Permanent: errors.Is(err, os.ErrNotExist) || errors.Is(err, os.ErrPermission), Err: err}
	}
	defer src.Close()
	fi, err := src.Stat()
	if err != nil {
		return false, &SourceError{URL: t.src.Redacted(), Err: err}
	}
	size, mod := fi.Size(), fi.ModTime().UnixNano()
	if t.have > 0 && (t.meta.FileSize != size || t.meta.FileModTime != mod || t.have > size) {
		if err := t.restart(); err != nil {
			return false, err
		}
	}
	if t.meta.FileSize != size || t.meta.FileModTime != mod {
		t.meta.FileSize, t.meta.FileModTime = size, mod
		if err := t.saveMeta(); err != nil {
			return false, err
		}
	}
	t.total = size
	if _, err := src.Seek(t.have, io.SeekStart); err != nil {
		return false, &SourceError{URL: t.src.Redacted(), Err: err}
	}
	xctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	stall := time.AfterFunc(t.req.StallTimeout, func() { cancel(ErrStalled) })
	defer stall.Stop()
	if err := t.copy(xctx, src, stall); err != nil {
		return false, err
	}
	return true, nil
}

// copy appends r to the partial and its hash until EOF, re-arming the stall
// timer on every read that delivers. It stops one byte past the expected
// size, enough for verification to call the source too long, and with no
// expected size one byte past the store's limit (ErrTooLarge).
func (t *transfer) copy(ctx context.Context, r io.Reader, stall *time.Timer) error {
	limit := t.s.maxBytes()
	if t.req.Size > 0 {
		limit = t.req.Size
	}
	r = io.LimitReader(r, max(limit-t.have+1, 0))
	buf := make([]byte, 256<<10)
	for {
		n, rerr := r.Read(buf)
		if n > 0 {
			stall.Reset(t.req.StallTimeout)
			if _, err := t.f.Write(buf[:n]); err != nil {
				return fmt.Errorf("image %s: write partial download: %w", t.req.Name, err)
			}
			t.h.Write(buf[:n])
			t.have += int64(n)
			t.downloaded += int64(n)
			t.progress(false)
		}
		if rerr == io.EOF {
			if t.req.Size == 0 && t.have > limit {
				return fmt.Errorf("%w: image %s: the source sent more than %d bytes", ErrTooLarge, t.req.Name, limit)
			}
			return ctxErr(ctx, nil)
		}
		if rerr != nil {
			return ctxErr(ctx, fmt.Errorf("read source after %d bytes: %w", t.have, rerr))
		}
		if ctx.Err() != nil {
			return context.Cause(ctx)
		}
	}
}

func (t *transfer) progress(final bool) {
	if t.req.Progress == nil {
		return
	}
	now := time.Now()
	if !final && now.Sub(t.lastProgress) < progressInterval {
		return
	}
	t.lastProgress = now
	total := t.req.Size
	if total == 0 {
		total = t.total
	}
	t.req.Progress(t.have, total)
}

// validators are what If-Range may carry: a strong ETag (weak ones are not
// allowed there) and Last-Modified.
func validators(resp *http.Response) (etag, lastModified string) {
	etag = resp.Header.Get("ETag")
	if strings.HasPrefix(etag, "W/") {
		etag = ""
	}
	return etag, resp.Header.Get("Last-Modified")
}

// parseContentRange reads "bytes <start>-<end>/<size>" or "bytes */<size>";
// start is -1 for the latter and size -1 when "*".
func parseContentRange(v string) (start, size int64, ok bool) {
	rest, found := strings.CutPrefix(v, "bytes ")
	if !found {
		return 0, 0, false
	}
	rng, total, found := strings.Cut(rest, "/")
	if !found {
		return 0, 0, false
	}
	size = -1
	if total != "*" {
		n, err := strconv.ParseInt(total, 10, 64)
		if err != nil || n < 0 {
			return 0, 0, false
		}
		size = n
	}
	if rng == "*" {
		return -1, size, true
	}
	first, _, found := strings.Cut(rng, "-")
	if !found {
		return 0, 0, false
	}
	n, err := strconv.ParseInt(first, 10, 64)
	if err != nil || n < 0 {
		return 0, 0, false
	}
	return n, size, true
}

// permanentStatus says which answers a retry cannot change.
func permanentStatus(code int) bool {
	switch {
	case code == http.StatusRequestTimeout, code == http.StatusTooManyRequests:
		return false
	case code >= 400 && code < 500:
		return true
	}
	return false
}

// throttle turns a Progress callback into one that reports at most every
// progressInterval how far a read of a file with the given total has got.
func throttle(progress func(done, total int64), total int64) func(int64) {
	if progress == nil {
		return func(int64) {}
	}
	var last time.Time
	return func(done int64) {
		if now := time.Now(); now.Sub(last) >= progressInterval {
			last = now
			progress(done, total)
		}
	}
}

// progressReader reports the bytes read so far after every read.
type progressReader struct {
	r      io.Reader
	report func(int64)
	n      int64
}

func (p *progressReader) Read(b []byte) (int, error) {
	n, err := p.r.Read(b)
	p.n += int64(n)
	p.report(p.n)
	return n, err
}

// copyCtx is io.Copy that stops between reads when ctx ends.
func copyCtx(ctx context.Context, dst io.Writer, src io.Reader) (int64, error) {
	return io.Copy(dst, ctxReader{ctx: ctx, r: src})
}

type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, context.Cause(c.ctx)
	}
	return c.r.Read(p)
}
