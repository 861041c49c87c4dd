package devcluster

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

// Process is a process of the cluster restarted whenever it dies, as SMF
// restarts a service: a second after it died, the wait doubling up to
// 10 s while it keeps dying within 30 s of its start.
type Process struct {
	Name string
	Log  string // its stdout and stderr, appended across restarts
	args []string
	out  *slog.Logger

	mu       sync.Mutex
	cmd      *exec.Cmd
	done     chan struct{}
	stopped  bool
	restarts int
}

// start runs the process once.
func (p *Process) start() error {
	logf, err := os.OpenFile(p.Log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	cmd := exec.Command(p.args[0], p.args[1:]...)
	// Its own process group, killed as a whole; it dies with the program
	// that started it.
	done, err := childproc.Start(cmd, logf, syscall.SIGKILL)
	if err != nil {
		return fmt.Errorf("%s: %w", p.Name, err)
	}
	p.mu.Lock()
	p.cmd, p.done = cmd, done
	p.mu.Unlock()
	return nil
}

func (p *Process) current() (*exec.Cmd, chan struct{}) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cmd, p.done
}

// supervise restarts the process each time it exits, until stop.
func (p *Process) supervise() {
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
		p.out.Warn("process exited; restarting it", "process", p.Name, "exit", cmd.ProcessState.String(), "in", wait)
		time.Sleep(wait)
		if err := p.start(); err != nil {
			p.out.Error("restart", "process", p.Name, "err", err)
		} else {
			cmd, _ := p.current()
			p.out.Info("process restarted", "process", p.Name, "pid", cmd.Process.Pid)
		}
		p.mu.Lock()
		p.restarts++
		p.mu.Unlock()
		wait = min(2*wait, 10*time.Second)
	}
}

// Kill ends the process and its group at once, as a crash would; it is
// restarted.
func (p *Process) Kill() {
	cmd, done := p.current()
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	<-done
}

// stop ends the supervision and the process: SIGTERM, SIGKILL after 15 s.
func (p *Process) stop() {
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

// Pid is the process id of the process running now.
func (p *Process) Pid() int {
	cmd, _ := p.current()
	return cmd.Process.Pid
}

// Running reports whether the process is up now.
func (p *Process) Running() bool {
	_, done := p.current()
	select {
	case <-done:
		return false
	default:
		return true
	}
}
