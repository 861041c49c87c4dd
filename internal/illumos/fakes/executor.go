// Package fakes holds test doubles for package illumos.
package fakes

import (
	"context"
	"path/filepath"
	"strings"
	"sync"

	"github.com/zonewright/zonewright/internal/illumos"
)

// Reply is what the fake answers to one command.
type Reply struct {
	Stdout   string
	Stderr   string
	ExitCode int
}

// Executor records the commands it is asked to run and answers each with
// the reply of the first matching handler (by command base name), or with
// an empty success.
type Executor struct {
	mu       sync.Mutex
	calls    []illumos.Cmd
	handlers map[string]func(illumos.Cmd) Reply
}

// On makes the fake answer commands whose base name is name (e.g.
// "zoneadm") with reply.
func (e *Executor) On(name string, reply func(cmd illumos.Cmd) Reply) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.handlers == nil {
		e.handlers = map[string]func(illumos.Cmd) Reply{}
	}
	e.handlers[name] = reply
}

// Calls returns the commands run so far.
func (e *Executor) Calls() []illumos.Cmd {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]illumos.Cmd(nil), e.calls...)
}

// Argvs returns the argv of every command run so far, joined with spaces.
func (e *Executor) Argvs() []string {
	var out []string
	for _, c := range e.Calls() {
		out = append(out, strings.Join(c.Argv(), " "))
	}
	return out
}

// Run implements illumos.Executor. A non-zero ExitCode comes back as an
// *illumos.ExecError, as from the real Runner.
func (e *Executor) Run(ctx context.Context, cmd illumos.Cmd) (illumos.Result, error) {
	e.mu.Lock()
	e.calls = append(e.calls, cmd)
	h := e.handlers[filepath.Base(cmd.Path)]
	e.mu.Unlock()
	if err := ctx.Err(); err != nil {
		return illumos.Result{ExitCode: -1}, &illumos.ExecError{Argv: cmd.Argv(), ExitCode: -1, TimedOut: true, Err: err}
	}
	var r Reply
	if h != nil {
		r = h(cmd)
	}
	res := illumos.Result{Stdout: []byte(r.Stdout), Stderr: []byte(r.Stderr), ExitCode: r.ExitCode}
	if r.ExitCode != 0 {
		return res, &illumos.ExecError{Argv: cmd.Argv(), ExitCode: r.ExitCode, Stdout: r.Stdout, Stderr: r.Stderr}
	}
	return res, nil
}
