package nodeserver

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/zonewright/zonewright/internal/execstream"
	"github.com/zonewright/zonewright/internal/hostops"
	"github.com/zonewright/zonewright/internal/illumos"
)

// envReadTimeout bounds reading a container's environment from its
// zone's SMF repository.
const envReadTimeout = 10 * time.Second

// envSession is the zlogin command of an exec session into the target
// container: the command runs with the environment SMF gives the
// container's own process (its service's method environment: the pod's
// env, secret values included, and POD_IP, POD_NAME, POD_NAMESPACE), as
// kubectl exec's process gets its container's in Kubernetes, and as the
// container's user. A container
// without a service (not started yet), or a zone that is not running,
// gets the zone's login environment: zlogin then says why, if it must.
// So does a zone without SMF.
func (s *Server) envSession(w http.ResponseWriter, r *http.Request, t target, opts execstream.Options) (illumos.EnvSession, bool) {
	ctx, cancel := context.WithTimeout(r.Context(), envReadTimeout)
	defer cancel()
	z := illumos.InZone{Runner: s.cfg.Runner, Zone: t.zone}
	env, err := z.ServiceEnv(ctx, hostops.ContainerFMRI(t.container))
	if err != nil && !errors.Is(err, illumos.ErrNotFound) && !errors.Is(err, illumos.ErrWrongState) && !noSMF(err) {
		s.cfg.Log.Warn("exec: the container's environment could not be read", "zone", t.zone, "container", t.container, "err", err)
		fail(w, http.StatusServiceUnavailable, "ServiceUnavailable", "the container's environment could not be read; retry shortly")
		return illumos.EnvSession{}, false
	}
	// The session is the container's user's, as kubectl exec's process
	// is its container's.
	user := ""
	if err == nil {
		if user, err = z.ServiceUser(ctx, hostops.ContainerFMRI(t.container)); err != nil && !errors.Is(err, illumos.ErrNotFound) && !errors.Is(err, illumos.ErrWrongState) {
			s.cfg.Log.Warn("exec: the container's user could not be read", "zone", t.zone, "container", t.container, "err", err)
			fail(w, http.StatusServiceUnavailable, "ServiceUnavailable", "the container's user could not be read; retry shortly")
			return illumos.EnvSession{}, false
		}
	}
	z.User = user
	es, err := z.EnvSessionCmd(opts.Command, opts.TTY, env)
	if err != nil {
		// Not the error's text: it may quote a value.
		s.cfg.Log.Warn("exec: the container's environment cannot be passed on", "zone", t.zone, "container", t.container)
		fail(w, http.StatusUnprocessableEntity, "Invalid", "the container's environment cannot be passed to the command")
		return illumos.EnvSession{}, false
	}
	return es, true
}

// noSMF reports a zone without svcprop (exit 127, the shell's "not
// found"): a zone without SMF runs no container service either.
func noSMF(err error) bool {
	var ee *illumos.ExecError
	return errors.As(err, &ee) && ee.ExitCode == 127
}

// handOverEnv writes the environment to a session on a terminal once the
// zone's side is ready for it, passing on to the terminal's reader
// nothing of what came before the ready line, which is the preamble's.
func handOverEnv(ptmx *os.File, es illumos.EnvSession) error {
	if es.Ready == "" {
		_, err := ptmx.Write(es.Block)
		return err
	}
	_ = ptmx.SetReadDeadline(time.Now().Add(envReadTimeout))
	defer ptmx.SetReadDeadline(time.Time{})
	// Byte by byte: a byte past the line would be the command's. The
	// line ends in "\n", or "\r\n" where the terminal still maps it.
	var seen []byte
	one := make([]byte, 1)
	for !(bytes.HasSuffix(seen, []byte(es.Ready+"\n")) || bytes.HasSuffix(seen, []byte(es.Ready+"\r\n"))) {
		if len(seen) > 64<<10 {
			return errors.New("the zone's shell did not take the environment")
		}
		k, err := ptmx.Read(one)
		seen = append(seen, one[:k]...)
		if err != nil {
			if errors.Is(err, io.EOF) || errors.Is(err, os.ErrDeadlineExceeded) {
				return fmt.Errorf("the zone's shell did not take the environment (%d bytes before it gave up)", len(seen))
			}
			return err
		}
	}
	_, err := ptmx.Write(es.Block)
	return err
}

// sessionEnv is zlogin's environment for a session: the agent's, in the C
// locale; TERM, which zlogin passes into the zone, only on a terminal and
// then xterm, as a container runtime gives kubectl exec -t.
func sessionEnv(environ []string, tty bool) []string {
	env := make([]string, 0, len(environ)+2)
	for _, kv := range environ {
		if !strings.HasPrefix(kv, "TERM=") {
			env = append(env, kv)
		}
	}
	env = append(env, "LC_ALL=C")
	if tty {
		env = append(env, "TERM=xterm")
	}
	return env
}
