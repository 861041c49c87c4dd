package sim

import (
	"errors"
	"io/fs"
	"strings"
	"syscall"
)

// strerror renders an error the way libc's strerror would for its errno.
func strerror(err error) string {
	var errno syscall.Errno
	if errors.As(err, &errno) {
		return errnoText(errno)
	}
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "No such file or directory"
	case errors.Is(err, fs.ErrPermission):
		return "Permission denied"
	case errors.Is(err, fs.ErrExist):
		return "File exists"
	}
	return err.Error()
}

// errnoText capitalises Go's errno text as illumos' strerror does.
func errnoText(e syscall.Errno) string {
	s := e.Error()
	if s == "" {
		return s
	}
	b := []byte(s)
	if b[0] >= 'a' && b[0] <= 'z' {
		b[0] -= 'a' - 'A'
	}
	return string(b)
}

// opt is one parsed command-line option.
type opt struct {
	c   byte
	val string
}

// getopt parses POSIX-style options (combined flags, "x:" takes a value,
// "--" ends options, the first operand ends options). It returns the
// options in order, the operands, and the offending option on error
// (missing value or unknown letter).
func getopt(args []string, spec string) ([]opt, []string, byte, bool) {
	var out []opt
	rest, bad, ok := eachOpt(args, spec, func(o opt) bool {
		out = append(out, o)
		return true
	})
	if !ok {
		return nil, nil, bad, false
	}
	return out, rest, 0, true
}

// eachOpt is getopt handing each option to fn as soon as it is parsed, as
// a C getopt loop does, so that a command's complaint about one option
// comes before any about a later one. When fn returns false, eachOpt stops
// and fails with bad 0.
func eachOpt(args []string, spec string, fn func(opt) bool) (rest []string, bad byte, ok bool) {
	i := 0
	for ; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			i++
			break
		}
		if len(a) < 2 || a[0] != '-' {
			break
		}
		for j := 1; j < len(a); j++ {
			c := a[j]
			k := strings.IndexByte(spec, c)
			if k < 0 || c == ':' {
				return nil, c, false
			}
			if k+1 < len(spec) && spec[k+1] == ':' {
				val := a[j+1:]
				if val == "" {
					if i+1 >= len(args) {
						return nil, c, false
					}
					i++
					val = args[i]
				}
				if !fn(opt{c, val}) {
					return nil, 0, false
				}
				break
			}
			if !fn(opt{c, ""}) {
				return nil, 0, false
			}
		}
	}
	return args[i:], 0, true
}
