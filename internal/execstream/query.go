package execstream

import (
	"fmt"
	"net/url"
	"strconv"
	"strings"
)

// Bounds of a command.
const (
	MaxArgs      = 1024
	MaxArgsBytes = 64 << 10
)

// Options are an exec request's parameters, as Kubernetes names them:
// the command (one "command" parameter per word), the container, and
// which streams to relay.
type Options struct {
	Command                    []string
	Container                  string
	Stdin, Stdout, Stderr, TTY bool
}

// QueryError is a query parameter an exec request cannot take.
type QueryError struct {
	Param, Message string
}

func (e *QueryError) Error() string { return e.Param + ": " + e.Message }

// ParseQuery reads an exec request's query.
func ParseQuery(q url.Values) (Options, error) {
	o := Options{Command: q["command"], Container: q.Get("container")}
	for name, dst := range map[string]*bool{"stdin": &o.Stdin, "stdout": &o.Stdout, "stderr": &o.Stderr, "tty": &o.TTY} {
		if v := q.Get(name); v != "" {
			b, err := strconv.ParseBool(v)
			if err != nil {
				return Options{}, &QueryError{name, fmt.Sprintf("%q is not true or false", v)}
			}
			*dst = b
		}
	}
	if len(o.Command) == 0 || o.Command[0] == "" {
		return Options{}, &QueryError{"command", "a command is required (one command parameter per word)"}
	}
	if len(o.Command) > MaxArgs {
		return Options{}, &QueryError{"command", fmt.Sprintf("%d words; at most %d", len(o.Command), MaxArgs)}
	}
	total := 0
	for i, w := range o.Command {
		if strings.IndexByte(w, 0) >= 0 {
			return Options{}, &QueryError{fmt.Sprintf("command[%d]", i), "contains a NUL byte, which no argument can carry"}
		}
		total += len(w)
	}
	if total > MaxArgsBytes {
		return Options{}, &QueryError{"command", fmt.Sprintf("%d bytes; at most %d", total, MaxArgsBytes)}
	}
	if !o.Stdin && !o.Stdout && !o.Stderr {
		return Options{}, &QueryError{"stdout", "at least one of stdin, stdout and stderr must be true"}
	}
	if o.TTY && o.Stderr {
		return Options{}, &QueryError{"stderr", "a terminal carries stderr on stdout: stderr cannot be true with tty"}
	}
	return o, nil
}

// Values is the query that ParseQuery reads back as o.
func (o Options) Values() url.Values {
	v := url.Values{"command": append([]string(nil), o.Command...)}
	if o.Container != "" {
		v.Set("container", o.Container)
	}
	for name, b := range map[string]bool{"stdin": o.Stdin, "stdout": o.Stdout, "stderr": o.Stderr, "tty": o.TTY} {
		v.Set(name, strconv.FormatBool(b))
	}
	return v
}
