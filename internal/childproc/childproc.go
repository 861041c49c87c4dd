// Package childproc starts the processes of the stacks a program runs for
// itself (the dev stack's agents, the chaos harness's servers) so that
// they die with it, even when it is killed.
package childproc

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"syscall"
)

// Start starts cmd in a process group of its own, with its output going
// to log, and sends it sig when this process dies. done is closed once
// cmd has exited and log is closed.
func Start(cmd *exec.Cmd, log *os.File, sig syscall.Signal) (done chan struct{}, err error) {
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: sig}
	done = make(chan struct{})
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // Pdeathsig follows the thread that started it
		err := cmd.Start()
		started <- err
		if err == nil {
			_ = cmd.Wait()
		}
		log.Close()
		close(done)
	}()
	if err := <-started; err != nil {
		return nil, fmt.Errorf("start %s: %w", cmd.Path, err)
	}
	return done, nil
}
