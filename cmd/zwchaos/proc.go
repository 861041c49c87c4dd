package main

import (
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"github.com/zonewright/zonewright/internal/childproc"
)

// proc is a process of the stack restarted whenever it dies, as SMF
// restarts a service: a second after it died, the wait doubling up to
// 10 s while it keeps dying within 30 s of its start.
type proc struct {
	kind string // what it is: temporal, serve
	name string
	args []string
	log  string // its stdout and stderr, appended across restarts
	out  *slog.Logger

	mu       sync.Mutex
	cmd      *exec.Cmd
	done     chan struct{}
	stopped  bool
	restarts int
}

// start runs the process once.
func (p *proc) start() error {
	logf, err := os.OpenFile(p.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	cmd := exec.Command(p.args[0], p.args[1:]...)
	// Its own process group, killed as a whole; it dies with the harness.
	done, err := childproc.Start(cmd, logf, syscall.SIGKILL)
	if err != nil {
		return fmt.Errorf("%s: %w", p.name, err)
	}
	p.mu.Lock()
	p.cmd, p.done = cmd, done
	p.mu.Unlock()
	return nil
}

func (p *proc) current() (*exec.Cmd, chan struct{}) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cmd, p.done
}

// supervise restarts the process each time it exits, until stop.
func (p *proc) supervise() {
	wait := time.Second
	for {
		started := time.Now()
		cmd, done := p.current()
		<-done
		p.mu.Lock()
		stopped := p.stopped
		p.mu.Unlock()
		if stopped {
			return
		}
		if time.Since(started) > 30*time.Second {
			wait = time.Second
		}
		p.out.Warn("process exited; restarting it", "process", p.name, "exit", cmd.ProcessState.String(), "in", wait)
		time.Sleep(wait)
		if err := p.start(); err != nil {
			p.out.Error("restart", "process", p.name, "err", err)
		} else {
			cmd, _ := p.current()
			p.out.Info("process restarted", "process", p.name, "pid", cmd.Process.Pid)
		}
		p.mu.Lock()
		p.restarts++
		p.mu.Unlock()
		wait = min(2*wait, 10*time.Second)
	}
}

// kill ends the process and its group at once, as a crash would.
func (p *proc) kill() {
	cmd, done := p.current()
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	<-done
}

// stop ends the supervision and the process: SIGTERM, SIGKILL after 15 s.
func (p *proc) stop() {
	p.mu.Lock()
	p.stopped = true
	p.mu.Unlock()
	cmd, done := p.current()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-done:
	case <-time.After(15 * time.Second):
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-done
	}
}

// running reports whether the process is up now.
func (p *proc) running() bool {
	_, done := p.current()
	select {
	case <-done:
		return false
	default:
		return true
	}
}
