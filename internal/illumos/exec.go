package illumos

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// DefaultTimeout bounds a command whose context has no deadline and whose
// Cmd sets no Timeout.
const DefaultTimeout = 2 * time.Minute

// maxOutput caps what is kept of each of stdout and stderr.
const maxOutput = 32 << 20

// Cmd is one command to run: an absolute illumos path and its arguments.
type Cmd struct {
	// Path is the command's absolute path on illumos, e.g. /usr/sbin/zoneadm.
	// A Runner with a BinDir runs BinDir/<base name of Path> instead.
	Path string
	Args []string
	// Stdin is fed to the command; nil means /dev/null (so that commands that
	// ask for confirmation on a tty never wait for one).
	Stdin []byte
	// StdinReader, when set, streams the command's standard input (zfs
	// receive of an image) instead of Stdin; it is read as the command
	// consumes it, never held whole in memory.
	StdinReader io.Reader
	// Stdout, when set, receives the command's standard output as it is
	// written (zfs send) instead of its being kept in Result.Stdout.
	Stdout io.Writer
	// Timeout applies when the context has no deadline; zero means the
	// executor's default.
	Timeout time.Duration
}

// Argv is Path followed by Args.
func (c Cmd) Argv() []string { return append([]string{c.Path}, c.Args...) }

// Result is what a finished command printed and how it exited.
type Result struct {
	Stdout   []byte
	Stderr   []byte
	ExitCode int
}

// Executor runs commands. Runner is the real one; tests may use a fake
// (see the fakes package). Implementations return a *ExecError when the
// command did not exit 0, together with whatever Result they have.
type Executor interface {
	Run(ctx context.Context, cmd Cmd) (Result, error)
}

// ExecError is a command that did not exit 0: it could not start, exited
// non-zero, was killed by a signal, or ran past its deadline.
type ExecError struct {
	Argv     []string // as executed (after BinDir resolution)
	ExitCode int      // -1 when the process did not exit normally
	Stdout   string
	Stderr   string
	TimedOut bool  // the deadline (or cancellation) ended the command
	Signaled bool  // killed by a signal it did not ask for
	Err      error // start failure or context error, if any
}

func (e *ExecError) Error() string {
	var b strings.Builder
	b.WriteString(strconv.Quote(strings.Join(e.Argv, " ")))
	switch {
	case e.TimedOut:
		b.WriteString(": killed at deadline")
		if e.Err != nil {
			b.WriteString(" (" + e.Err.Error() + ")")
		}
	case e.Signaled:
		b.WriteString(": killed by signal")
	case e.Err != nil:
		b.WriteString(": " + e.Err.Error())
	default:
		b.WriteString(": exit status " + strconv.Itoa(e.ExitCode))
	}
	if msg := firstLines(e.Stderr, 4); msg != "" {
		b.WriteString(": " + msg)
	} else if msg := firstLines(e.Stdout, 2); msg != "" && e.ExitCode > 0 {
		// route and ipadm put some failures on stdout.
		b.WriteString(": " + msg)
	}
	return b.String()
}

func (e *ExecError) Unwrap() error { return e.Err }

func firstLines(s string, n int) string {
	s = strings.TrimSpace(s)
	lines := strings.SplitN(s, "\n", n+1)
	if len(lines) > n {
		lines = append(lines[:n], "...")
	}
	return strings.Join(lines, " / ")
}

// Runner runs commands on this machine. The zero value runs the real illumos
// commands from their standard directories.
//
// Several Runners with different BinDirs in one process address several
// hosts that answer like illumos (for example simulated nodes).
type Runner struct {
	// BinDir, when set, replaces the directory of every command: Cmd.Path
	// /usr/sbin/zoneadm runs BinDir/zoneadm.
	BinDir string
	// Env is added to the environment of every command ("KEY=value").
	// The environment is the process's own plus LC_ALL=C (so messages and
	// number formats are the ones the classifier and parsers know), then Env.
	Env []string
	// Timeout is the default per-command timeout when neither the context
	// nor the Cmd has one; zero means DefaultTimeout.
	Timeout time.Duration
	// WaitDelay is the grace between the interrupt at the deadline and the
	// kill, and how long to wait for the output pipes after the process has
	// exited (a stray grandchild may hold them). Zero means 1s.
	WaitDelay time.Duration
	// Logger, if set, gets one debug record per command.
	Logger *slog.Logger
}

// Resolve returns the path Run executes for an illumos command path.
func (r *Runner) Resolve(path string) string {
	if r.BinDir == "" {
		return path
	}
	return filepath.Join(r.BinDir, filepath.Base(path))
}

// Run runs cmd and waits for it. When the context (or the default timeout)
// expires, the command's whole process group is interrupted, then killed
// WaitDelay later; the error is then an *ExecError with TimedOut set.
func (r *Runner) Run(ctx context.Context, c Cmd) (Result, error) {
	argv := append([]string{r.Resolve(c.Path)}, c.Args...)
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, r.timeout(c))
		defer cancel()
	}

	cmd := r.command(ctx, argv, c)
	var stdout, stderr cappedBuffer
	cmd.Stdout = &stdout
	cmd.Stderr = &stderr

	start := time.Now()
	var err error
	if c.StdinReader != nil || c.Stdout != nil {
		err = runStreaming(ctx, cmd, c.StdinReader, c.Stdout)
	} else {
		err = cmd.Run()
	}
	res := Result{Stdout: stdout.Bytes(), Stderr: stderr.Bytes(), ExitCode: -1}
	if cmd.ProcessState != nil {
		res.ExitCode = cmd.ProcessState.ExitCode()
	}
	if r.Logger != nil {
		r.Logger.LogAttrs(ctx, slog.LevelDebug, "illumos command",
			slog.Any("argv", argv), slog.Int("exit", res.ExitCode),
			slog.Duration("took", time.Since(start)))
	}

	if err == nil || (errors.Is(err, exec.ErrWaitDelay) && res.ExitCode == 0 && ctx.Err() == nil) {
		// ErrWaitDelay with a clean exit: the command succeeded and left a
		// child holding its output open; its answer is complete.
		return res, nil
	}
	return res, execError(ctx, cmd, argv, res, err)
}

// timeout is c's timeout, else the Runner's, else DefaultTimeout.
func (r *Runner) timeout(c Cmd) time.Duration {
	if c.Timeout > 0 {
		return c.Timeout
	}
	if r.Timeout > 0 {
		return r.Timeout
	}
	return DefaultTimeout
}

// command is argv to run in a process group of its own, with the
// environment and stdin c gives.
func (r *Runner) command(ctx context.Context, argv []string, c Cmd) *exec.Cmd {
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Env = append(append(os.Environ(), "LC_ALL=C"), r.Env...)
	if c.Stdin != nil && c.StdinReader == nil {
		cmd.Stdin = bytes.NewReader(c.Stdin)
	}
	// A process group of its own, so that the deadline reaches the command
	// and everything it started (a hung brand hook, a shell's children),
	// not just the direct child. At the deadline the group first gets
	// SIGINT: zlogin forwards SIGINT to the command it runs in the zone,
	// which zone_enter put in a process group of its own that no signal to
	// this group reaches. WaitDelay later, whatever is left of the group
	// gets SIGKILL (in execError, once Wait returns).
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error {
		return syscall.Kill(-cmd.Process.Pid, syscall.SIGINT)
	}
	cmd.WaitDelay = r.WaitDelay
	if cmd.WaitDelay <= 0 {
		cmd.WaitDelay = time.Second
	}
	return cmd
}

// execError says how cmd failed with err: timed out (then what is left of
// its process group is killed), did not start, was signaled, or exited 0
// while its input failed.
func execError(ctx context.Context, cmd *exec.Cmd, argv []string, res Result, err error) *ExecError {
	ee := &ExecError{
		Argv:     argv,
		ExitCode: res.ExitCode,
		Stdout:   string(res.Stdout),
		Stderr:   string(res.Stderr),
	}
	if ctxErr := ctx.Err(); ctxErr != nil {
		ee.TimedOut = true
		ee.Err = ctxErr
		// Kill what is left of the group: the direct child was killed by
		// WaitDelay if SIGINT did not end it, but its children may remain.
		if cmd.Process != nil {
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		}
	} else if cmd.ProcessState == nil {
		ee.Err = err // could not start
	} else if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		ee.Signaled = true
	} else if res.ExitCode == 0 {
		ee.Err = err // exited 0, but its input failed
	}
	return ee
}

// runStreaming runs cmd with its stdin fed from in and its stdout copied
// to out (either may be nil), each through a pipe of our own. exec's own
// copiers would make Wait wait for them, so a Read that never returns (a
// stalled download) or a Write that never returns (a consumer that
// stopped) would hold Run past its deadline. Here Run returns once the
// command has exited and its output is delivered, or at the deadline; a
// copier still blocked in the caller's reader or writer is left to end
// with it (its pipe is closed under it).
func runStreaming(ctx context.Context, cmd *exec.Cmd, in io.Reader, out io.Writer) error {
	stdinW, stdoutR, childEnds, err := streamPipes(cmd, in, out)
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		closeFiles(childEnds...)
		closeFiles(stdinW, stdoutR)
		return err
	}
	// The command has its copies; ours would keep its reads and writes
	// from ever failing.
	closeFiles(childEnds...)
	copied := make(chan error, 1)
	if in != nil {
		go func() {
			_, err := io.Copy(stdinW, in)
			stdinW.Close()
			copied <- err
		}()
	}
	delivered := make(chan error, 1)
	if out != nil {
		go func() {
			_, err := io.Copy(out, stdoutR)
			if err != nil {
				stdoutR.Close() // the command gets EPIPE instead of blocking
			}
			delivered <- err
		}()
	}
	err = cmd.Wait()
	if in != nil {
		stdinW.Close()
	}
	if out != nil {
		select {
		case derr := <-delivered:
			if err == nil && derr != nil {
				err = fmt.Errorf("stdout: %w", derr)
			}
		case <-ctx.Done():
			if err == nil {
				err = ctx.Err()
			}
		}
		stdoutR.Close()
	}
	if err == nil && in != nil {
		// The command succeeded; a reader that failed before its end is
		// still a failure (the command took a short input as complete).
		select {
		case cerr := <-copied:
			if cerr != nil && !errors.Is(cerr, syscall.EPIPE) && !errors.Is(cerr, os.ErrClosed) {
				return fmt.Errorf("stdin: %w", cerr)
			}
		default:
		}
	}
	return err
}

// streamPipes gives cmd a pipe from stdinW when in is set and one to
// stdoutR when out is: stdinW and stdoutR are our ends, childEnds the
// command's, ours to close once it started.
func streamPipes(cmd *exec.Cmd, in io.Reader, out io.Writer) (stdinW, stdoutR *os.File, childEnds []*os.File, err error) {
	if in != nil {
		pr, pw, err := os.Pipe()
		if err != nil {
			return nil, nil, nil, fmt.Errorf("stdin pipe: %w", err)
		}
		cmd.Stdin, stdinW = pr, pw
		childEnds = append(childEnds, pr)
	}
	if out != nil {
		pr, pw, err := os.Pipe()
		if err != nil {
			closeFiles(childEnds...)
			closeFiles(stdinW)
			return nil, nil, nil, fmt.Errorf("stdout pipe: %w", err)
		}
		cmd.Stdout, stdoutR = pw, pr
		childEnds = append(childEnds, pw)
	}
	return stdinW, stdoutR, childEnds, nil
}

// closeFiles closes those of fs that are open (not nil).
func closeFiles(fs ...*os.File) {
	for _, f := range fs {
		if f != nil {
			f.Close()
		}
	}
}

// cappedBuffer keeps at most maxOutput bytes and discards the rest, so that
// a runaway command cannot exhaust memory.
type cappedBuffer struct {
	buf       bytes.Buffer
	truncated bool
}

func (b *cappedBuffer) Write(p []byte) (int, error) {
	n := len(p)
	if room := maxOutput - b.buf.Len(); room < len(p) {
		b.truncated = true
		if room < 0 {
			room = 0
		}
		p = p[:room]
	}
	b.buf.Write(p)
	return n, nil
}

func (b *cappedBuffer) Bytes() []byte {
	if b.truncated {
		return append(b.buf.Bytes(), "\n[output truncated]\n"...)
	}
	return b.buf.Bytes()
}

// run runs cmd with ex and wraps a failure as an *Error of op on subject.
func run(ctx context.Context, ex Executor, op, subject string, c Cmd) (Result, error) {
	res, err := ex.Run(ctx, c)
	if err != nil {
		return res, opError(op, subject, err)
	}
	return res, nil
}
