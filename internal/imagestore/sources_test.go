package imagestore

import (
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

var loopback = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")}

func fileURL(path string) string { return (&url.URL{Scheme: "file", Path: path}).String() }

func wantRefused(t *testing.T, err error) {
	t.Helper()
	var rs *RefusedSourceError
	if !errors.As(err, &rs) || !Permanent(err) {
		t.Fatalf("err = %v, want a permanent RefusedSourceError", err)
	}
}

func TestCheckURLRefusesAddressesOffThePublicInternet(t *testing.T) {
	p := &Sources{}
	refusedURLs := []string{
		"http://127.0.0.1:7233/", "http://[::1]/", "http://localhost:5432/", "http://db.localhost/",
		"http://10.1.2.3/", "http://172.16.0.1/", "http://192.168.1.1/", "http://[fd12::1]/",
		"http://169.254.169.254/latest/meta-data/", "http://[fd00:ec2::254]/", "http://[fe80::1]/",
		"http://0.0.0.0/", "http://[::]/", "http://224.0.0.1/", "http://100.64.0.1/",
		"http://[::ffff:127.0.0.1]/", "http://[64:ff9b::a9fe:a9fe]/", "http://255.255.255.255/",
		"https://user:secret@images.example.org/x.tar", "https://token@images.example.org/x.tar",
		"ftp://images.example.org/x", "gopher://images.example.org/x",
	}
	for _, u := range refusedURLs {
		err := p.CheckURL(u)
		wantRefused(t, err)
		if strings.Contains(err.Error(), "secret") {
			t.Fatalf("%q: the refusal repeats the password: %v", u, err)
		}
	}
	for _, u := range []string{"https://images.example.org/x.tar", "http://93.184.216.34/x", "http://[2606:2800:220:1::1]/x"} {
		if err := p.CheckURL(u); err != nil {
			t.Fatalf("%q refused: %v", u, err)
		}
	}
	allowed := &Sources{AllowPrivate: loopback}
	for _, u := range []string{"http://127.0.0.1:8000/x", "http://localhost:8000/x", "http://[::1]/x"} {
		if err := allowed.CheckURL(u); err != nil {
			t.Fatalf("%q refused with loopback allowed: %v", u, err)
		}
	}
	if err := allowed.CheckURL("http://10.0.0.1/"); err == nil {
		t.Fatal("allowing loopback allowed a private address")
	}
}

func TestParsePrefixes(t *testing.T) {
	got, err := ParsePrefixes(" 127.0.0.0/8, ::1 ,10.1.2.3/16,")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"127.0.0.0/8", "::1/128", "10.1.0.0/16"}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for i := range want {
		if got[i].String() != want[i] {
			t.Fatalf("got %v, want %v", got, want)
		}
	}
	if _, err := ParsePrefixes("10.0.0.0/33"); err == nil {
		t.Fatal("a bad CIDR parsed")
	}
}

// sourceDir is an image source directory holding one good image, a
// secret file beside it, and the ways out of the directory an attacker
// would try.
func sourceDir(t *testing.T) (dir, secret string, data []byte) {
	t.Helper()
	base := t.TempDir()
	dir = filepath.Join(base, "sources")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	data = payload(64<<10, 40)
	if err := os.WriteFile(filepath.Join(dir, "good.raw"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	secret = filepath.Join(base, "shadow")
	if err := os.WriteFile(secret, []byte("root:$6$secret:19000:0:99999:7:::\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(secret, filepath.Join(dir, "link-out")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("good.raw", filepath.Join(dir, "link-in")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("..", filepath.Join(dir, "up")); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(dir, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "subdir"), 0o755); err != nil {
		t.Fatal(err)
	}
	return dir, secret, data
}

func TestFileSourcesOnlyBeneathTheSourceDirectory(t *testing.T) {
	dir, secret, data := sourceDir(t)
	s := newStore(t)
	s.Sources = Sources{FileDir: dir}
	fetch := func(path, digest string) error {
		_, err := s.Fetch(t.Context(), FetchRequest{Name: "img", URL: fileURL(path), SHA256: digest})
		return err
	}
	for name, path := range map[string]string{
		"a file outside":                   secret,
		"the system's shadow file":         "/etc/shadow",
		"a climb out with ..":              dir + "/../shadow",
		"a symlink out of the directory":   filepath.Join(dir, "link-out"),
		"a path through a symlink to ..":   filepath.Join(dir, "up", "shadow"),
		"a fifo":                           filepath.Join(dir, "fifo"),
		"a directory":                      filepath.Join(dir, "subdir"),
		"the directory itself":             dir,
		"a sibling sharing the dir prefix": dir + "-other/x",
	} {
		t.Run(name, func(t *testing.T) {
			err := fetch(path, sum([]byte("anything")))
			wantRefused(t, err)
			if strings.Contains(Reason(err), "secret") || strings.Contains(Reason(err), sum([]byte("root"))) {
				t.Fatalf("reason %q tells about the file", Reason(err))
			}
			if path != filepath.Join(dir, "fifo") && path != filepath.Join(dir, "subdir") {
				wantRefused(t, s.Sources.CheckURL(fileURL(path)))
			}
		})
	}
	if got := storeFiles(t, s); len(got) > 0 {
		t.Fatalf("refused sources left %v in the store", got)
	}
	for _, name := range []string{"good.raw", "link-in"} {
		s := newStore(t)
		s.Sources = Sources{FileDir: dir}
		if err := s.Sources.CheckURL(fileURL(filepath.Join(dir, name))); err != nil {
			t.Fatalf("%s refused at create: %v", name, err)
		}
		if _, err := s.Fetch(t.Context(), FetchRequest{Name: "img", URL: fileURL(filepath.Join(dir, name)), SHA256: sum(data)}); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
}

func TestFileSourcesAreRefusedWithoutASourceDirectory(t *testing.T) {
	dir, _, data := sourceDir(t)
	s := newStore(t)
	s.Sources = Sources{AllowPrivate: loopback}
	_, err := s.Fetch(t.Context(), FetchRequest{Name: "img", URL: fileURL(filepath.Join(dir, "good.raw")), SHA256: sum(data)})
	wantRefused(t, err)
}

// A symlink that appears after the URL was accepted (a swap between the
// API's check and the fetch) is refused when the file is opened.
func TestFileSourceSwappedForASymlinkIsRefusedAtFetch(t *testing.T) {
	dir, secret, _ := sourceDir(t)
	p := &Sources{FileDir: dir}
	path := filepath.Join(dir, "later.raw")
	if err := p.CheckURL(fileURL(path)); err != nil {
		t.Fatalf("a file not there yet refused: %v", err)
	}
	if err := os.Symlink(secret, path); err != nil {
		t.Fatal(err)
	}
	f, err := p.openFile(path)
	if err == nil {
		f.Close()
		t.Fatal("opened a symlink leading out of the directory")
	}
	wantRefused(t, err)
}

// The dial check runs on the address actually connected to, so a name
// that resolves to a private address, now or after a rebinding, gets no
// further than a literal one.
func TestHTTPSourcesDialOnlyAllowedAddresses(t *testing.T) {
	data := payload(4<<10, 41)
	_, srv := newSource(t, data)
	s := newStore(t)
	s.Sources = Sources{}
	_, err := s.client().Get(srv.URL) // past the URL check, as a rebinding would be
	wantRefused(t, err)
	_, err = s.Fetch(t.Context(), FetchRequest{Name: "img", URL: srv.URL, SHA256: sum(data)})
	wantRefused(t, err)

	s = newStore(t)
	s.Sources = Sources{AllowPrivate: loopback}
	if _, err := s.Fetch(t.Context(), FetchRequest{Name: "img", URL: srv.URL, SHA256: sum(data)}); err != nil {
		t.Fatalf("allowed loopback source: %v", err)
	}
}

func TestRedirectsAreCheckedAndBounded(t *testing.T) {
	data := payload(4<<10, 42)
	_, target := newSource(t, data)
	// The target listens on 127.0.0.1; the redirect names it as 127.0.0.2's
	// neighbour the policy does not allow.
	forbidden := strings.Replace(target.URL, "127.0.0.1", "127.0.0.2", 1)
	redirect := func(to string) string {
		srv := httptest.NewServer(http.RedirectHandler(to, http.StatusFound))
		t.Cleanup(srv.Close)
		return srv.URL
	}
	s := newStore(t)
	s.Sources = Sources{AllowPrivate: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}}
	_, err := s.Fetch(t.Context(), FetchRequest{Name: "img", URL: redirect(forbidden), SHA256: sum(data)})
	wantRefused(t, err)
	_, err = s.Fetch(t.Context(), FetchRequest{Name: "img", URL: redirect("file:///etc/shadow"), SHA256: sum(data)})
	wantRefused(t, err)

	var loop string
	loopSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, loop, http.StatusFound) }))
	t.Cleanup(loopSrv.Close)
	loop = loopSrv.URL + "/again"
	_, err = s.Fetch(t.Context(), FetchRequest{Name: "img", URL: loop, SHA256: sum(data)})
	wantRefused(t, err)

	if _, err := s.Fetch(t.Context(), FetchRequest{Name: "img", URL: redirect(target.URL), SHA256: sum(data)}); err != nil {
		t.Fatalf("an allowed redirect failed: %v", err)
	}
}

func TestAnEndlessBodyStopsAtTheLimitAndLeavesNothing(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		buf := make([]byte, 32<<10)
		for {
			if _, err := w.Write(buf); err != nil {
				return
			}
		}
	}))
	t.Cleanup(srv.Close)
	s := newStore(t)
	s.MaxBytes = 1 << 20
	_, err := s.Fetch(t.Context(), FetchRequest{Name: "endless", URL: srv.URL, SHA256: sum(nil)})
	if !errors.Is(err, ErrTooLarge) || !Permanent(err) {
		t.Fatalf("err = %v, want ErrTooLarge", err)
	}
	if got := storeFiles(t, s); len(got) > 0 {
		t.Fatalf("store holds %v, want nothing", got)
	}
	_, err = s.Fetch(t.Context(), FetchRequest{Name: "big", URL: srv.URL, SHA256: sum(nil), Size: 2 << 20})
	if !errors.Is(err, ErrTooLarge) {
		t.Fatalf("a declared size above the limit: err = %v, want ErrTooLarge", err)
	}
}

// What answers at an address must not be told apart by the reason a
// client sees: a closed port, a service speaking another protocol (as
// PostgreSQL or Temporal's gRPC would), and one that hangs up.
func TestReasonsDoNotDescribeWhatAnswered(t *testing.T) {
	closed := func() string {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := ln.Addr().String()
		ln.Close()
		return "http://" + addr + "/"
	}
	speaking := func(reply []byte) string {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ln.Close() })
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				go func() {
					defer c.Close()
					_, _ = c.Write(reply)
					_, _ = io.Copy(io.Discard, io.LimitReader(c, 1<<10))
				}()
			}
		}()
		return "http://" + ln.Addr().String() + "/"
	}
	s := newStore(t)
	var reasons []string
	for _, u := range []string{
		closed(),
		speaking([]byte("\x00\x00\x12\x04\x00\x00\x00\x00\x00")), // an HTTP/2 SETTINGS frame
		speaking([]byte("E\x00\x00\x00\x6aSFATAL\x00C08P01\x00Minvalid length of startup packet\x00\x00")),
		speaking(nil),
	} {
		_, err := s.Fetch(t.Context(), FetchRequest{Name: "probe", URL: u, SHA256: sum(nil), StallTimeout: time.Second})
		if err == nil {
			t.Fatalf("%s: fetched", u)
		}
		reasons = append(reasons, Reason(err))
	}
	for _, r := range reasons {
		if r != reasons[0] || strings.Contains(r, "startup") || strings.Contains(r, "malformed") {
			t.Fatalf("reasons %q differ or describe the answer", reasons)
		}
	}
}

func TestADigestMismatchReasonNamesNeitherDigestNorSize(t *testing.T) {
	data := payload(12345, 43)
	_, srv := newSource(t, data)
	s := newStore(t)
	_, err := s.Fetch(t.Context(), FetchRequest{Name: "img", URL: srv.URL, SHA256: sum([]byte("other"))})
	var mismatch *DigestMismatchError
	if !errors.As(err, &mismatch) {
		t.Fatalf("err = %v, want a DigestMismatchError", err)
	}
	r := Reason(err)
	if strings.Contains(r, sum(data)) || strings.Contains(r, "12345") || strings.Contains(r, sum([]byte("other"))) {
		t.Fatalf("reason %q reveals what was read", r)
	}
}
