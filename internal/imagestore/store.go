package imagestore

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/zonewright/zonewright/internal/model"
)

// DefaultMaxBytes bounds a download and its decompressed artefact when the
// Store does not say otherwise: far above any real image, low enough to
// stop an endless body or a decompression bomb before it fills the disk.
const DefaultMaxBytes int64 = 20 << 30

// Store is the control plane's image directory. The zero value is not
// usable: Dir is required. A Store must not be copied after first use.
type Store struct {
	Dir string // where downloads and artefacts live
	// Sources says which files and addresses imports may read.
	Sources Sources
	// TLS, when set, is the client TLS configuration of https sources
	// (private CAs); nil: the system's roots.
	TLS *tls.Config
	// MaxBytes bounds both a download and its decompressed artefact; 0
	// means DefaultMaxBytes.
	MaxBytes int64

	mu      sync.Mutex
	running map[string]*operation // per image name

	clientOnce sync.Once
	httpClient *http.Client
}

// operation is a Fetch or Decompress in progress, so that a second one of
// the same image waits and Remove can stop it.
type operation struct {
	cancel context.CancelCauseFunc
	done   chan struct{}
}

// Errors callers classify.
var (
	// ErrStalled: the source sent nothing for StallTimeout. Retryable; the
	// partial is kept for resume.
	ErrStalled = errors.New("transfer stalled")
	// ErrNotFound: the image has no download or artefact in the store.
	ErrNotFound = errors.New("not in the image store")
	// ErrInvalid: the request can never succeed (bad name, URL, digest,
	// compression). Permanent.
	ErrInvalid = errors.New("invalid image request")
	// ErrRemoved: Remove stopped the operation.
	ErrRemoved = errors.New("image removed")
	// ErrCorrupt: the verified download does not decode as its compression
	// says. Permanent.
	ErrCorrupt = errors.New("image does not decompress")
	// ErrTooLarge: the download or its decompressed artefact is larger
	// than the store's MaxBytes. Permanent; nothing of it is kept.
	ErrTooLarge = errors.New("image larger than the store's limit")
)

// DigestMismatchError is a complete download whose content is not the one
// expected. Permanent: the source serves a different file.
type DigestMismatchError struct {
	Name      string
	Want, Got string // hex sha256
	// WantSize is the size the request expected (0: unknown); GotSize what
	// arrived, or WantSize+1 when the source sent more than expected and
	// the transfer was cut there.
	WantSize, GotSize int64
}

// Error describes the mismatch in full, for the control plane's log; what
// a client sees is Reason's, which names neither digest nor size.
func (e *DigestMismatchError) Error() string {
	msg := fmt.Sprintf("image %s: digest mismatch: want sha256 %s, got sha256 %s", e.Name, e.Want, e.Got)
	switch {
	case e.WantSize > 0 && e.GotSize > e.WantSize:
		msg += fmt.Sprintf(" (want %d bytes, source sent more; digest of the first %d)", e.WantSize, e.GotSize)
	case e.WantSize > 0 && e.GotSize != e.WantSize:
		msg += fmt.Sprintf(" (want %d bytes, got %d)", e.WantSize, e.GotSize)
	}
	return msg
}

// SourceError is a source that answered with an HTTP error status, or a
// file:// source that is absent or unreadable.
type SourceError struct {
	URL       string
	Status    int  // HTTP status; 0 for file:// sources
	Permanent bool // 400, 401, 403, 404, 410 and missing files; 5xx and 429 are retryable
	Err       error
}

func (e *SourceError) Error() string {
	if e.Status != 0 {
		return fmt.Sprintf("source %s: HTTP %d %s", e.URL, e.Status, http.StatusText(e.Status))
	}
	return fmt.Sprintf("source %s: %v", e.URL, e.Err)
}

func (e *SourceError) Unwrap() error { return e.Err }

// Permanent reports whether retrying the operation that returned err can
// never help, so an activity should fail without retry.
func Permanent(err error) bool {
	var dm *DigestMismatchError
	var se *SourceError
	switch {
	case errors.As(err, &dm):
		return true
	case errors.As(err, &se):
		return se.Permanent
	}
	var rs *RefusedSourceError
	return errors.Is(err, ErrInvalid) || errors.Is(err, ErrCorrupt) || errors.Is(err, ErrTooLarge) || errors.As(err, &rs)
}

// Paths of an image's files; see the package doc.
func (s *Store) partialPath(name string) string {
	return filepath.Join(s.Dir, name+".download.partial")
}
func (s *Store) metaPath(name string) string {
	return filepath.Join(s.Dir, name+".download.partial.json")
}
func (s *Store) downloadPath(name string) string { return filepath.Join(s.Dir, name+".download") }
func (s *Store) artefactPath(name string) string { return filepath.Join(s.Dir, name+".artefact") }

func (s *Store) maxBytes() int64 {
	if s.MaxBytes > 0 {
		return s.MaxBytes
	}
	return DefaultMaxBytes
}

// SizeLimit is the most a download or artefact may hold.
func (s *Store) SizeLimit() int64 { return s.maxBytes() }

func (s *Store) client() *http.Client {
	s.clientOnce.Do(func() { s.httpClient = s.newClient() })
	return s.httpClient
}

// Transport is the store's transport: it dials only what Sources allows,
// through no proxy. Other fetchers of image sources (a registry's
// manifests) use it so the same limits hold.
func (s *Store) Transport() http.RoundTripper { return s.client().Transport }

// BlobName is the store name of a content-addressed blob (an oci layer,
// shared by every image that has it): "blob-" and the first 58 hex digits
// of its sha256, a DNS label no catalog image may take (see ValidName's
// caller in the API). The download is still verified against the whole
// digest.
func BlobName(sha256Hex string) string {
	if len(sha256Hex) > 58 {
		sha256Hex = sha256Hex[:58]
	}
	return model.ReservedImagePrefix + sha256Hex
}

// maxRedirects bounds the redirects one request follows.
const maxRedirects = 5

// newClient bounds connecting, not transferring: stalls are detected by
// the copy loop, and slow transfers must be allowed to finish. It dials
// only what Sources allows, through no proxy (a proxy would dial for it),
// and checks every redirect as it checks a source.
func (s *Store) newClient() *http.Client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.Proxy = nil
	t.DialContext = s.Sources.guardedDialer(&net.Dialer{Timeout: 15 * time.Second, KeepAlive: 30 * time.Second})
	t.TLSHandshakeTimeout = 15 * time.Second
	t.TLSClientConfig = s.TLS
	t.DisableCompression = true // the digest is of the bytes as served
	return &http.Client{Transport: t, CheckRedirect: func(req *http.Request, via []*http.Request) error {
		if len(via) >= maxRedirects {
			return refused("more than %d redirects", maxRedirects)
		}
		if req.URL.Scheme != "http" && req.URL.Scheme != "https" {
			return refused("a redirect left http(s)")
		}
		return s.Sources.CheckURL(req.URL.String())
	}}
}

func validName(name string) error {
	if errs := model.ValidateName("name", name); len(errs) > 0 {
		return fmt.Errorf("%w: %s", ErrInvalid, errs.Error())
	}
	return nil
}

// claim registers an operation on name if none is running; otherwise it
// returns the running one.
func (s *Store) claim(ctx context.Context, name string) (context.Context, func(), *operation) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if cur := s.running[name]; cur != nil {
		return nil, nil, cur
	}
	if s.running == nil {
		s.running = map[string]*operation{}
	}
	opCtx, cancel := context.WithCancelCause(ctx)
	op := &operation{cancel: cancel, done: make(chan struct{})}
	s.running[name] = op
	end := func() {
		s.mu.Lock()
		delete(s.running, name)
		s.mu.Unlock()
		cancel(nil)
		close(op.done)
	}
	return opCtx, end, nil
}

// begin registers an operation on name, first waiting for one already
// running. The returned context ends when ctx does or Remove stops it.
func (s *Store) begin(ctx context.Context, name string) (context.Context, func(), error) {
	for {
		opCtx, end, cur := s.claim(ctx, name)
		if cur == nil {
			return opCtx, end, nil
		}
		select {
		case <-cur.done:
		case <-ctx.Done():
			return nil, nil, fmt.Errorf("image %s: wait for a running operation: %w", name, ctx.Err())
		}
	}
}

// Names lists the names beginning prefix that have files in the store.
func (s *Store) Names(prefix string) ([]string, error) {
	entries, err := os.ReadDir(s.Dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range entries {
		name, _, ok := strings.Cut(e.Name(), ".")
		if ok && strings.HasPrefix(name, prefix) && !slices.Contains(out, name) {
			out = append(out, name)
		}
	}
	return out, nil
}

// Remove deletes every file of the image (partial, download, artefact and
// temporaries), first stopping a Fetch or Decompress of it that is running;
// one that starts meanwhile waits until the files are gone. An image with
// no files is not an error.
func (s *Store) Remove(name string) error {
	if err := validName(name); err != nil {
		return err
	}
	for {
		_, end, cur := s.claim(context.Background(), name)
		if cur == nil {
			defer end()
			break
		}
		cur.cancel(ErrRemoved)
		<-cur.done
	}
	files := []string{s.partialPath(name), s.metaPath(name), s.metaPath(name) + ".tmp", s.downloadPath(name), s.artefactPath(name)}
	tmps, err := filepath.Glob(filepath.Join(s.Dir, name+".artefact.tmp-*"))
	if err != nil {
		return fmt.Errorf("remove image %s: %w", name, err)
	}
	files = append(files, tmps...)
	var errs []error
	for _, f := range files {
		if err := os.Remove(f); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("remove image %s: %w", name, err)
	}
	return nil
}

// ctxErr turns an error seen after ctx ended into the reason it ended (the
// caller's cancellation or deadline, a stall, a Remove), so callers can
// classify it; other errors pass through.
func ctxErr(ctx context.Context, err error) error {
	if ctx.Err() == nil {
		return err
	}
	return context.Cause(ctx)
}

// syncDir makes a rename in dir durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	// Some file systems cannot sync a directory; the rename stands anyway.
	if err := d.Sync(); err != nil && !errors.Is(err, syscall.EINVAL) {
		return err
	}
	return nil
}
