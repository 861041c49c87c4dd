package illumos

import (
	"context"
	"errors"
	"path"
	"strings"

	"github.com/zonewright/zonewright/internal/illumos/names"
)

const zloginPath = "/usr/sbin/zlogin"

// InZone runs commands inside one running zone through zlogin.
//
// zlogin joins its arguments with spaces and has the zone's shell parse the
// result again, so every word is shell-quoted here (ShellQuote): an argument
// like "a b; rm -rf /" reaches the command as that one argument.
type InZone struct {
	Runner Executor
	Zone   string
	// Here runs the commands in this zone (the global zone's own IP
	// stack) instead of through zlogin; Zone only names it in errors.
	Here bool
	// User is the zone's user the commands run as (zlogin -l); empty:
	// the zone's root.
	User string
}

// GlobalZone runs the IP commands (ipadm, route) on the host's own stack.
func (h Host) GlobalZone() InZone { return InZone{Runner: h.Runner, Zone: "global", Here: true} }

// ExecResult is how a command run in a zone ended.
type ExecResult struct {
	ExitCode int
	Stdout   []byte
	Stderr   []byte
}

// Exec runs argv in the zone, with stdin if not nil. A command that runs
// and exits non-zero is a result, not an error (exec probes judge the exit
// status themselves); an error means the command could not be run: zlogin
// refused (no such zone: ErrNotFound; zone not running: ErrWrongState), or
// the deadline struck (ErrTransient).
func (z InZone) Exec(ctx context.Context, argv []string, stdin []byte) (ExecResult, error) {
	const op = "zlogin"
	cmd, err := z.cmd(op, argv, stdin)
	if err != nil {
		return ExecResult{}, err
	}
	res, err := z.Runner.Run(ctx, cmd)
	out := ExecResult{ExitCode: res.ExitCode, Stdout: res.Stdout, Stderr: res.Stderr}
	if err == nil {
		return out, nil
	}
	var ee *ExecError
	if errors.As(err, &ee) && !ee.TimedOut && !ee.Signaled && ee.Err == nil && ee.ExitCode > 0 && !zloginFailed(ee) {
		return out, nil
	}
	return out, opError(op, z.Zone, err)
}

// run runs argv in the zone; any non-zero exit is an error, classified by
// what the inner command printed.
func (z InZone) run(ctx context.Context, op, subject string, argv []string, stdin []byte) (Result, error) {
	cmd, err := z.cmd(op, argv, stdin)
	if err != nil {
		return Result{}, err
	}
	if subject == "" {
		subject = z.Zone
	} else {
		subject = z.Zone + ":" + subject
	}
	return run(ctx, z.Runner, op, subject, cmd)
}

func (z InZone) cmd(op string, argv []string, stdin []byte) (Cmd, error) {
	if z.Here {
		if len(argv) == 0 || argv[0] == "" {
			return Cmd{}, invalidf(op, z.Zone, "empty command")
		}
		// The zone's commands are named by base name (inZone); here they
		// are the host's, where the IP commands live in /usr/sbin.
		return Cmd{Path: path.Join("/usr/sbin", argv[0]), Args: argv[1:], Stdin: stdin}, nil
	}
	if !names.ValidZoneName(z.Zone) {
		return Cmd{}, invalidf(op, z.Zone, "invalid zone name %q", z.Zone)
	}
	if len(argv) == 0 || argv[0] == "" {
		return Cmd{}, invalidf(op, z.Zone, "empty command")
	}
	args := make([]string, 0, len(argv)+3)
	if z.User != "" {
		if !validLoginName(z.User) {
			return Cmd{}, invalidf(op, z.Zone, "invalid user %q", z.User)
		}
		args = append(args, "-l", z.User)
	}
	args = append(args, z.Zone)
	for _, a := range argv {
		if strings.IndexByte(a, 0) >= 0 {
			return Cmd{}, invalidf(op, z.Zone, "argument %q contains a NUL byte", a)
		}
		args = append(args, ShellQuote(a))
	}
	return Cmd{Path: zloginPath, Args: args, Stdin: stdin}, nil
}

// inZone names a command of the zone for zlogin: by its base name.
// zlogin resets PATH to /usr/sbin:/usr/bin (spec 6.2), so "ipadm" runs the
// zone's own /usr/sbin/ipadm, exactly as the absolute path would, and the
// name stays valid wherever the zone keeps its commands on that PATH.
func inZone(commandPath string) string { return path.Base(commandPath) }

// zloginFailed tells zlogin's own refusals (exit 1 or 2, a "zlogin: "
// message: unknown zone, zone not running, usage) from a non-zero exit of
// the command it ran.
func zloginFailed(ee *ExecError) bool {
	if ee.ExitCode != 1 && ee.ExitCode != 2 {
		return false
	}
	return strings.HasPrefix(strings.TrimLeft(ee.Stderr, "\n"), "zlogin: ")
}

// SessionCmd is the zlogin command of an exec session, which the caller
// runs with streams of its own for as long as the session lasts: argv
// shell-quoted word by word, as for Exec; with tty, -i, so that zlogin
// gives the command a pseudo-terminal in the zone (its own stdin must then
// be a terminal); without stdin, -n (stdin from /dev/null).
func (z InZone) SessionCmd(argv []string, tty, stdin bool) (Cmd, error) {
	if z.Here {
		return Cmd{}, invalidf("zlogin", z.Zone, "an exec session needs a zone")
	}
	c, err := z.cmd("zlogin", argv, nil)
	if err != nil {
		return Cmd{}, err
	}
	var flags []string
	if tty {
		flags = append(flags, "-i")
	}
	if !stdin {
		flags = append(flags, "-n")
	}
	c.Args = append(flags, c.Args...)
	return c, nil
}
