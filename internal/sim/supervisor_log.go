package sim

import (
	"fmt"
	"io"
	"os"
	"syscall"
	"time"
)

// The services' logs in the zone, written as svc.startd writes them (spec §15.7).

// openServiceLog opens an instance's log in the zone for appending, as
// the zone's svc.startd does: looked up inside the zone, as the zone's
// user, so a link the zone made in /var/svc/log leads nowhere outside it,
// and what it creates is the zone user's. Non-blocking: a FIFO the zone
// put there must not hang the supervisor; anything but a plain file is
// refused.
func (sv *supervisor) openServiceLog(fmri string) (*os.File, error) {
	fsys := zoneFS{root: sv.root, user: sv.user}
	f, err := fsys.openFile(svcLogPath(fmri), os.O_CREATE|os.O_WRONLY|os.O_APPEND|syscall.O_NONBLOCK, 0o644, true)
	if err != nil {
		return nil, err
	}
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("%s is not a plain file", svcLogPath(fmri))
	}
	return f, nil
}

// writeStartdLine writes one of svc.startd's own lines: "[ Jan  5 10:12:30 MSG ]".
func writeStartdLine(w io.Writer, msg string) {
	fmt.Fprintf(w, "[ %s %s ]\n", time.Now().Format("Jan _2 15:04:05"), msg)
}

// startdLog appends one of svc.startd's lines to an instance's log.
func (sv *supervisor) startdLog(fmri, format string, a ...any) {
	f, err := sv.openServiceLog(fmri)
	if err != nil {
		sv.logger.Printf("%s: log: %v", fmri, err)
		return
	}
	defer f.Close()
	writeStartdLine(f, fmt.Sprintf(format, a...))
}

// logMethodExit logs a start method that failed, as svc.startd does.
func (sv *supervisor) logMethodExit(p *svcProc, ws syscall.WaitStatus) {
	switch {
	case ws.Signaled():
		sv.startdLog(p.fmri, "Method \"start\" failed due to signal %s.", signalShortName(ws.Signal()))
	case ws.ExitStatus() != 0:
		sv.startdLog(p.fmri, "Method \"start\" exited with status %d.", ws.ExitStatus())
	}
}

// signalShortName is the name illumos gives a signal without "SIG".
func signalShortName(sig syscall.Signal) string {
	names := map[syscall.Signal]string{
		syscall.SIGHUP: "HUP", syscall.SIGINT: "INT", syscall.SIGQUIT: "QUIT", syscall.SIGABRT: "ABRT",
		syscall.SIGKILL: "KILL", syscall.SIGSEGV: "SEGV", syscall.SIGPIPE: "PIPE", syscall.SIGTERM: "TERM",
		syscall.SIGUSR1: "USR1", syscall.SIGUSR2: "USR2",
	}
	if n, ok := names[sig]; ok {
		return n
	}
	return fmt.Sprint(int(sig))
}
