package nodeserver

import (
	"io"
	"net/http"
	"os"
	"os/exec"
	"syscall"
	"time"

	"github.com/creack/pty"

	"github.com/zonewright/zonewright/internal/execstream"
	"github.com/zonewright/zonewright/internal/illumos"
)

// exec runs a command in the pod's zone through zlogin and relays its
// streams over an execstream session.
func (s *Server) exec(w http.ResponseWriter, r *http.Request) {
	t, ok := s.target(w, r)
	if !ok {
		return
	}
	opts, err := execstream.ParseQuery(r.URL.Query())
	if err != nil {
		fail(w, http.StatusBadRequest, "BadRequest", err.Error())
		return
	}
	// A command zlogin cannot carry is refused before a slot is taken
	// or the zone asked anything.
	if _, err := (illumos.InZone{Zone: t.zone}).SessionCmd(opts.Command, opts.TTY, opts.Stdin); err != nil {
		fail(w, http.StatusBadRequest, "BadRequest", "the command cannot be run: "+err.Error())
		return
	}
	// The slot is given back before the session's status is sent: a
	// client that saw its session end may start another at once.
	free, why, ok := s.execs.take(t.ns)
	if !ok {
		fail(w, http.StatusTooManyRequests, "TooManyRequests", slotsFull("exec sessions", why, s.execs))
		return
	}
	defer free()
	if _, err := os.Stat(s.zoneRootDir(t.zone)); err != nil {
		fail(w, http.StatusNotFound, "NotFound", "the pod has no zone on this node")
		return
	}
	es, ok := s.envSession(w, r, t, opts)
	if !ok {
		return
	}
	sess, err := execstream.Accept(w, r)
	if err != nil {
		return // Accept answered
	}
	zc := es.Cmd
	cmd := exec.CommandContext(sess.Context(), s.cfg.Runner.Resolve(zc.Path), zc.Args...)
	cmd.Env = sessionEnv(os.Environ(), opts.TTY)
	// A client that goes away interrupts zlogin, which passes SIGINT to
	// the command in the zone; WaitDelay later it is killed.
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGINT) }
	cmd.WaitDelay = time.Second
	var code int
	if opts.TTY {
		code, err = runTTY(cmd, sess, opts, es)
	} else {
		code, err = runPipes(cmd, sess, opts, es)
	}
	free()
	if err != nil {
		s.cfg.Log.Warn("exec session failed", "zone", t.zone, "container", t.container, "err", err)
		sess.Finish(execstream.ErrorStatus("the command could not be run in the container"))
		return
	}
	sess.Finish(execstream.ExitStatus(code))
}

// runPipes runs cmd with pipes: stdin copied from the session (and closed
// when the client closes it), stdout and stderr sent as they come.
func runPipes(cmd *exec.Cmd, sess *execstream.Server, opts execstream.Options, es illumos.EnvSession) (int, error) {
	if opts.Stdout {
		cmd.Stdout = sess.Stdout()
	}
	if opts.Stderr {
		cmd.Stderr = sess.Stderr()
	}
	// The container's environment comes first on stdin, then the
	// client's, if it sends any.
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return 0, err
	}
	if err := cmd.Start(); err != nil {
		return 0, err
	}
	// Not cmd.Stdin = reader: Wait would wait for a client that never
	// closes its stdin.
	go func() {
		defer stdin.Close()
		if _, err := stdin.Write(es.Block); err != nil || !opts.Stdin {
			return
		}
		_, _ = io.Copy(stdin, sess.Stdin())
	}()
	return exitCode(cmd, cmd.Wait())
}

// runTTY runs cmd on a pseudo-terminal: zlogin -i sees a terminal on its
// stdin and gives the command one in the zone, resized as the client asks.
func runTTY(cmd *exec.Cmd, sess *execstream.Server, opts execstream.Options, es illumos.EnvSession) (int, error) {
	size := &pty.Winsize{Cols: 80, Rows: 24}
	select {
	case sz := <-sess.Resizes():
		size = &pty.Winsize{Cols: sz.Width, Rows: sz.Height}
	default:
	}
	ptmx, err := pty.StartWithSize(cmd, size)
	if err != nil {
		return 0, err
	}
	defer ptmx.Close()
	if err := handOverEnv(ptmx, es); err != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return 0, err
	}
	go func() {
		for {
			select {
			case <-sess.Context().Done():
				return
			case sz := <-sess.Resizes():
				_ = pty.Setsize(ptmx, &pty.Winsize{Cols: sz.Width, Rows: sz.Height})
			}
		}
	}()
	if opts.Stdin {
		go func() {
			// The client's close of stdin reaches the command as the
			// terminal's end-of-file character, as a user's ^D would.
			if _, err := io.Copy(ptmx, sess.Stdin()); err == nil {
				_, _ = ptmx.Write([]byte{4})
			}
		}()
	}
	copied := make(chan struct{})
	go func() {
		defer close(copied)
		out := io.Discard
		if opts.Stdout {
			out = sess.Stdout()
		}
		_, _ = io.Copy(out, ptmx) // ends with EIO once the terminal's last user exits
	}()
	code, err := exitCode(cmd, cmd.Wait())
	select {
	case <-copied:
	case <-time.After(time.Second):
	}
	return code, err
}

// exitCode is the exit status of a finished command (128+n for a signal);
// an error when it could not be waited for.
func exitCode(cmd *exec.Cmd, err error) (int, error) {
	if err != nil && cmd.ProcessState == nil {
		return 0, err
	}
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal()), nil
	}
	return cmd.ProcessState.ExitCode(), nil
}
