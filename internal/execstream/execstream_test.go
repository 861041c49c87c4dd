package execstream

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/zonewright/zonewright/internal/model"
)

// serve runs handle as the server end of every session.
func serve(t *testing.T, handle func(*Server)) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s, err := Accept(w, r)
		if err != nil {
			return
		}
		handle(s)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

func run(t *testing.T, u string, stdin io.Reader, resize <-chan Size) (stdout, stderr string, code int, err error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := Dial(ctx, nil, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	code, err = s.Run(ctx, stdin, &out, &errb, resize)
	return out.String(), errb.String(), code, err
}

// The session relays stdin to the end (its close message), stdout and
// stderr apart, and the exit code.
func TestStreamsAndExitCode(t *testing.T) {
	u := serve(t, func(s *Server) {
		in, _ := io.ReadAll(s.Stdin()) // ends only at the client's close message
		fmt.Fprintf(s.Stdout(), "read %d bytes", len(in))
		fmt.Fprint(s.Stderr(), "to stderr")
		s.Finish(ExitStatus(3))
	})
	big := strings.Repeat("x", 3*MaxData+5) // several messages
	out, errOut, code, err := run(t, u, strings.NewReader(big), nil)
	if err != nil || code != 3 || out != fmt.Sprintf("read %d bytes", len(big)) || errOut != "to stderr" {
		t.Fatalf("out %q err %q code %d: %v", out, errOut, code, err)
	}
}

// Output larger than a message arrives whole, in messages of at most
// MaxData bytes.
func TestLongOutputIsSplit(t *testing.T) {
	want := strings.Repeat("0123456789", MaxData/4)
	u := serve(t, func(s *Server) {
		io.WriteString(s.Stdout(), want)
		s.Finish(ExitStatus(0))
	})
	out, _, code, err := run(t, u, nil, nil)
	if err != nil || code != 0 || out != want {
		t.Fatalf("got %d bytes, code %d: %v", len(out), code, err)
	}
}

func TestResizeReachesTheServer(t *testing.T) {
	got := make(chan Size, 1)
	u := serve(t, func(s *Server) {
		got <- <-s.Resizes()
		s.Finish(ExitStatus(0))
	})
	resize := make(chan Size, 1)
	resize <- Size{Width: 120, Height: 40}
	if _, _, _, err := run(t, u, nil, resize); err != nil {
		t.Fatal(err)
	}
	if sz := <-got; sz != (Size{Width: 120, Height: 40}) {
		t.Fatalf("server saw %+v", sz)
	}
}

// A command that could not run is an error, not an exit code.
func TestFailureIsAnError(t *testing.T) {
	u := serve(t, func(s *Server) { s.Finish(ErrorStatus("zone gone")) })
	if _, _, _, err := run(t, u, nil, nil); err == nil || !strings.Contains(err.Error(), "zone gone") {
		t.Fatalf("err = %v", err)
	}
	u = serve(t, func(s *Server) {}) // closes without a status
	if _, _, _, err := run(t, u, nil, nil); err == nil {
		t.Fatal("a session without an exit status succeeded")
	}
}

// A refused upgrade carries the server's Status message.
func TestRefusalCarriesTheMessage(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusForbidden)
		io.WriteString(w, `{"kind":"Status","message":"no exec for you","code":403}`)
	}))
	defer srv.Close()
	_, err := Dial(context.Background(), nil, srv.URL, nil)
	var re *RefusedError
	if !errors.As(err, &re) || re.Code != 403 || re.Message != "no exec for you" {
		t.Fatalf("err = %v", err)
	}
}

func TestStatusRoundTrip(t *testing.T) {
	for _, code := range []int{0, 1, 3, 127, 255} {
		if got, err := ExitCode(ExitStatus(code)); err != nil || got != code {
			t.Errorf("ExitStatus(%d).ExitCode() = %d, %v", code, got, err)
		}
	}
	bad := model.Status{Status: "Failure", Reason: ReasonNonZeroExitCode, Details: &model.StatusDetails{Causes: []model.StatusCause{{Type: "ExitCode", Message: "x"}}}}
	if _, err := ExitCode(bad); err == nil {
		t.Error("a non-numeric exit code was read")
	}
}

func TestParseQuery(t *testing.T) {
	o, err := ParseQuery(url.Values{"command": {"echo", "a b;c"}, "container": {"app"}, "stdin": {"true"}, "stdout": {"true"}, "tty": {"true"}})
	if err != nil {
		t.Fatal(err)
	}
	back, err := ParseQuery(o.Values())
	if err != nil || fmt.Sprint(back) != fmt.Sprint(o) {
		t.Fatalf("round trip %+v %v, want %+v", back, err, o)
	}
	for name, bad := range map[string]url.Values{
		"no command":         {"stdout": {"true"}},
		"an empty command":   {"command": {""}, "stdout": {"true"}},
		"a NUL byte":         {"command": {"echo", "a\x00b"}, "stdout": {"true"}},
		"no stream":          {"command": {"true"}},
		"stderr with a tty":  {"command": {"sh"}, "stdout": {"true"}, "stderr": {"true"}, "tty": {"true"}},
		"a bad boolean":      {"command": {"true"}, "stdout": {"yes please"}},
		"too long a command": {"command": {strings.Repeat("x", MaxArgsBytes+1)}, "stdout": {"true"}},
		"too many arguments": {"command": make([]string, MaxArgs+1), "stdout": {"true"}},
	} {
		var qe *QueryError
		if _, err := ParseQuery(bad); !errors.As(err, &qe) {
			t.Errorf("%s: err %v, want a QueryError", name, err)
		}
	}
}
