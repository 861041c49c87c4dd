package illumos

import (
	"bytes"
	"context"
	"os/exec"
	"strings"
	"testing"
)

func TestShellQuote(t *testing.T) {
	tests := []struct{ in, want string }{
		{"ipadm", "ipadm"},
		{"/usr/sbin/route", "/usr/sbin/route"},
		{"10.0.0.5/24", "10.0.0.5/24"},
		{"", "''"},
		{"a b", "'a b'"},
		{"it's", `'it'\''s'`},
		{"$(reboot)", "'$(reboot)'"},
		{"a;b", "'a;b'"},
		{"~root", "'~root'"},
		{"x=y", "'x=y'"},
		{"#c", "'#c'"},
	}
	for _, tt := range tests {
		if got := ShellQuote(tt.in); got != tt.want {
			t.Errorf("ShellQuote(%q) = %s, want %s", tt.in, got, tt.want)
		}
		if back, ok := shellUnquote(ShellQuote(tt.in)); !ok || back != tt.in {
			t.Errorf("shellUnquote(ShellQuote(%q)) = %q, %v", tt.in, back, ok)
		}
	}
	if _, err := ShellJoin([]string{"a\x00b"}); err == nil {
		t.Error("ShellJoin must refuse NUL")
	}
}

// shellSplit asks a real POSIX shell to parse s the way the zone's shell
// parses zlogin's joined arguments, and returns the words it saw.
func shellSplit(t *testing.T, s string) []string {
	t.Helper()
	cmd := exec.Command("/bin/sh", "-c", `printf '%s\0' `+s)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("sh -c %q: %v: %s", s, err, errb.String())
	}
	words := strings.Split(out.String(), "\x00")
	return words[:len(words)-1]
}

// FuzzShellJoin proves that what zlogin hands the zone's shell parses back
// into exactly the argv that was asked for: no argument can split, expand,
// or add a command.
func FuzzShellJoin(f *testing.F) {
	for _, seed := range [][2]string{
		{"a b", "c"}, {"it's", `"q"`}, {"$(id)", "`id`"}, {"a;reboot", "x|y&z"}, {"~", "*"},
		{"\n", "\t"}, {"", "-n"}, {"\\", "'\\''"}, {"%s", "!x"}, {"a=b", "#c"}, {"\xff\xfe", "é"},
	} {
		f.Add(seed[0], seed[1])
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		if strings.IndexByte(a+b, 0) >= 0 {
			if _, err := ShellJoin([]string{a, b}); err == nil {
				t.Fatal("NUL accepted")
			}
			return
		}
		s, err := ShellJoin([]string{a, b})
		if err != nil {
			t.Fatal(err)
		}
		got := shellSplit(t, s)
		if len(got) != 2 || got[0] != a || got[1] != b {
			t.Fatalf("sh parsed %s as %q, want %q", s, got, []string{a, b})
		}
	})
}

// recorder is an Executor that keeps the last command and runs nothing.
type recorder struct{ last Cmd }

func (r *recorder) Run(_ context.Context, c Cmd) (Result, error) {
	r.last = c
	return Result{}, nil
}

// FuzzZloginArgv does what zlogin does with the words after the zone
// name (join them with spaces) and what the zone does with the result
// (a shell parses it), and checks the command sees exactly its argv.
func FuzzZloginArgv(f *testing.F) {
	f.Add("a b", "c;d")
	f.Add("'", "$HOME")
	f.Add("", "\x00")
	f.Fuzz(func(t *testing.T, a, b string) {
		rec := &recorder{}
		_, err := InZone{Runner: rec, Zone: "z1"}.Exec(context.Background(), []string{"echo", a, b}, nil)
		if strings.IndexByte(a+b, 0) >= 0 {
			if KindOf(err) != KindInvalid || rec.last.Path != "" {
				t.Fatalf("NUL: err %v, ran %q", err, rec.last.Argv())
			}
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		if rec.last.Path != zloginPath || rec.last.Args[0] != "z1" {
			t.Fatalf("argv %q", rec.last.Argv())
		}
		got := shellSplit(t, strings.Join(rec.last.Args[1:], " "))
		if want := []string{"echo", a, b}; strings.Join(got, "\x00") != strings.Join(want, "\x00") || len(got) != 3 {
			t.Fatalf("the zone's shell sees %q, want %q", got, want)
		}
	})
}

// An exec session's zlogin command carries each word shell-quoted after
// its flags and the zone: the zone's shell reads back exactly the argv.
func TestSessionCmdQuotesEveryWord(t *testing.T) {
	argv := []string{"echo", "a b;c", "$(reboot)", "`id`", "it's", "line\nbreak", ""}
	for _, tt := range []struct {
		tty, stdin bool
		flags      []string
	}{{false, true, nil}, {false, false, []string{"-n"}}, {true, true, []string{"-i"}}, {true, false, []string{"-i", "-n"}}} {
		c, err := InZone{Zone: "z1"}.SessionCmd(argv, tt.tty, tt.stdin)
		if err != nil {
			t.Fatal(err)
		}
		if c.Path != zloginPath || strings.Join(c.Args[:len(tt.flags)], " ") != strings.Join(tt.flags, " ") || c.Args[len(tt.flags)] != "z1" {
			t.Fatalf("tty=%t stdin=%t: %v", tt.tty, tt.stdin, c.Argv())
		}
		// zlogin joins the words with spaces for the zone's shell.
		if got := shellSplit(t, strings.Join(c.Args[len(tt.flags)+1:], " ")); strings.Join(got, "\x01") != strings.Join(argv, "\x01") {
			t.Fatalf("the shell read %q, want %q", got, argv)
		}
	}
	if _, err := (InZone{Zone: "z1"}).SessionCmd([]string{"echo", "a\x00b"}, false, true); err == nil {
		t.Fatal("a NUL byte was accepted")
	}
}
