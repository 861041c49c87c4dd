package sim

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// Running a service's methods: launching start and stop, reaping exits,
// and svc.startd's restart and maintenance rules (spec §15.6).

// methodEnv is the environment of a method, built from scratch as
// svc.startd does: the zone's PATH and the simulator's zone variables, the
// method user's HOME, LOGNAME and USER, the SMF variables, then the
// manifest's method_environment. Nothing of the caller's environment.
func (sv *supervisor) methodEnv(p *svcProc, method string, u zoneUser) []string {
	env := append(sv.h.zoneEnv(sv.zone), u.loginEnv()...)
	env = append(env,
		"SMF_FMRI="+p.fmri,
		"SMF_METHOD="+method,
		"SMF_RESTARTER=svc:/system/svc/restarter:default",
		"SMF_ZONENAME="+sv.zone,
	)
	return append(env, p.def.Env...)
}

// expandMethod substitutes the SMF method tokens %f %s %i %m %r %%.
func expandMethod(exec, fmri, method string) string {
	f := strings.TrimPrefix(fmri, "svc:/")
	svc, inst, _ := strings.Cut(f, ":")
	r := strings.NewReplacer("%%", "%", "%f", fmri, "%s", svc, "%i", inst, "%m", method,
		"%r", "svc.startd")
	return r.Replace(exec)
}

// launch forks `/bin/sh -c EXEC` for a method of a service.
func (sv *supervisor) launch(p *svcProc, method, execLine string) (int, error) {
	dir := sv.root
	if p.def.WorkDir != "" && p.def.WorkDir != ":default" {
		dir = filepath.Join(sv.root, filepath.Clean("/"+p.def.WorkDir))
	}
	logf, err := sv.openServiceLog(p.fmri)
	if err != nil {
		return 0, err
	}
	defer logf.Close()
	devnull, err := os.Open(os.DevNull)
	if err != nil {
		return 0, err
	}
	defer devnull.Close()
	u, err := sv.methodUser(p)
	if err != nil {
		writeStartdLine(logf, fmt.Sprintf("%s method: %v", method, err))
		return 0, err
	}
	writeStartdLine(logf, fmt.Sprintf("Executing %s method (\"%s\").", method, execLine))
	resp := make(chan spawnResp, 1)
	sv.spawnCh <- spawnReq{
		argv:  []string{"/bin/sh", "-c", rewriteIllumosPaths(expandMethod(execLine, p.fmri, method), sv.h.zoneBinDir(sv.zone))},
		env:   sv.methodEnv(p, method, u),
		dir:   dir,
		files: []uintptr{devnull.Fd(), logf.Fd(), logf.Fd()},
		cred:  u.credential(),
		resp:  resp,
	}
	r := <-resp
	return r.pid, r.err
}

// methodUser is the user a service's methods run as: its
// method_credential's, read from the zone's files when the method
// starts, or the zone's root.
func (sv *supervisor) methodUser(p *svcProc) (zoneUser, error) {
	if p.def.User == "" && p.def.Group == "" {
		return sv.user, nil
	}
	z, err := sv.h.viewZone(sv.zone)
	if err != nil || z == nil {
		return zoneUser{}, fmt.Errorf("method_credential: the zone: %v", err)
	}
	u, err := sv.h.zoneLogin(z, p.def.User, p.def.Group)
	if err != nil {
		return zoneUser{}, fmt.Errorf("method_credential: %w", err)
	}
	return u, nil
}

func (sv *supervisor) start(p *svcProc) {
	pid, err := sv.launch(p, "start", p.def.Start.Exec)
	if err != nil {
		sv.logger.Printf("%s: start failed: %v", p.fmri, err)
		sv.serviceExited(p, 1, false)
		return
	}
	sv.logger.Printf("%s: started pid %d", p.fmri, pid)
	p.pid, p.groupOnly, p.stopping, p.member = pid, false, false, 0
	sv.record(stateChange{fmri: p.fmri, state: "online", pid: pid})
}

// stop runs the stop method: ":kill" (the default) signals the process
// group; ":true" does nothing; a command runs, and whatever is left of the
// service once it finishes is killed, as SMF empties the contract.
func (sv *supervisor) stop(p *svcProc) {
	if p.pid == 0 {
		p.transient = false
		sv.record(stateChange{fmri: p.fmri, state: "disabled"})
		return
	}
	p.stopping = true
	method := SvcMethod{Exec: ":kill", Timeout: 60}
	if p.def != nil && p.def.Stop != nil {
		method = *p.def.Stop
	}
	p.stopUntil = time.Now().Add(time.Duration(method.Timeout) * time.Second)
	// svc.startd says why it stops a running service and which stop
	// method it runs (spec 15.7); a command method's line is launch's.
	why := "service disabled"
	if p.restartNext {
		why = "service restarting"
	}
	sv.startdLog(p.fmri, "Stopping because %s.", why)
	switch {
	case strings.HasPrefix(method.Exec, ":kill"):
		sv.startdLog(p.fmri, "Executing stop method (%s).", method.Exec)
	case method.Exec == ":true":
		sv.startdLog(p.fmri, "Executing stop method (null).")
	}
	switch {
	case strings.HasPrefix(method.Exec, ":kill"):
		sig := syscall.SIGTERM
		if f := strings.Fields(method.Exec); len(f) == 2 {
			sig = signalByName(f[1])
		}
		syscall.Kill(-p.pid, sig)
	case method.Exec == ":true":
		syscall.Kill(-p.pid, syscall.SIGKILL)
	default:
		pid, err := sv.launch(p, "stop", method.Exec)
		if err != nil {
			syscall.Kill(-p.pid, syscall.SIGKILL)
		} else {
			p.stopHelper = pid
		}
	}
}

func signalByName(s string) syscall.Signal {
	s = strings.TrimPrefix(strings.TrimPrefix(s, "-"), "SIG")
	switch s {
	case "HUP", "1":
		return syscall.SIGHUP
	case "INT", "2":
		return syscall.SIGINT
	case "KILL", "9":
		return syscall.SIGKILL
	case "USR1":
		return syscall.SIGUSR1
	case "USR2":
		return syscall.SIGUSR2
	}
	return syscall.SIGTERM
}

// reap collects every exited child (services, stop methods and orphans
// reparented to us) and reacts to the services' exits.
func (sv *supervisor) reap() {
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
		if pid <= 0 || err != nil {
			return
		}
		if pid == sv.initPID {
			// Every process of the zone died with it.
			sv.logger.Printf("the zone's init exited (%v)", ws)
			sv.orphaned = true
		}
		for _, p := range sv.procs {
			switch pid {
			case p.stopHelper:
				p.stopHelper = 0
				if p.pid != 0 {
					syscall.Kill(-p.pid, syscall.SIGKILL)
				}
			case p.pid:
				if p.groupOnly {
					continue
				}
				if p.stopping {
					syscall.Kill(-p.pid, syscall.SIGKILL)
					sv.stopped(p)
					continue
				}
				status := ws.ExitStatus()
				if ws.Signaled() {
					status = 128 + int(ws.Signal())
				}
				sv.logMethodExit(p, ws)
				sv.serviceExited(p, status, true)
			}
		}
	}
}

// stopped finishes a stop. The service is recorded offline (a restart,
// or enabled again meanwhile) or disabled, and reconcile decides from the
// zone's current requests whether it starts again: the restart's start
// is reconcile's start of an enabled service that does not run.
func (sv *supervisor) stopped(p *svcProc) {
	sv.logger.Printf("%s: stopped", p.fmri)
	state := "disabled"
	if p.restartNext {
		state = "offline"
	}
	p.pid, p.stopping, p.groupOnly, p.stopHelper = 0, false, false, 0
	p.stopUntil = time.Time{}
	p.transient, p.restartNext = false, false
	sv.record(stateChange{fmri: p.fmri, state: state})
	sv.recheck = true
}

// serviceExited handles a service process that ended on its own.
func (sv *supervisor) serviceExited(p *svcProc, status int, fromWait bool) {
	pgid := p.pid
	duration := "contract"
	if p.def != nil {
		duration = p.def.Duration
	}
	if fromWait && status == 0 {
		switch {
		case duration == "transient":
			p.pid, p.transient = 0, true
			sv.record(stateChange{fmri: p.fmri, state: "online"})
			return
		case duration == "contract" && p.groupAlive():
			// The start method daemonised: the service lives on in its
			// process group, as in an SMF contract.
			p.groupOnly = true
			return
		}
	}
	if pgid > 0 {
		syscall.Kill(-pgid, syscall.SIGKILL)
	}
	p.pid, p.groupOnly, p.member = 0, false, 0
	if fromWait && noRetryExit(status) {
		// The method said retrying cannot help: svc.startd goes straight
		// to maintenance and waits for svcadm clear.
		p.exits = nil
		sv.logger.Printf("%s: exited with status %d; maintenance", p.fmri, status)
		sv.record(stateChange{fmri: p.fmri, state: "maintenance", reason: methodFailedReason(status), aux: "method_failed"})
		return
	}
	now := time.Now()
	var recent []time.Time
	for _, t := range p.exits {
		if now.Sub(t) < sv.window {
			recent = append(recent, t)
		}
	}
	p.exits = append(recent, now)
	sv.logger.Printf("%s: exited with status %d (%d exits within %s)", p.fmri, status, len(p.exits), sv.window)
	if len(p.exits) >= sv.limit {
		p.exits = nil
		sv.startdLog(p.fmri, "Restarting too quickly, changing state to maintenance.")
		sv.record(stateChange{fmri: p.fmri, state: "maintenance", reason: "Restarting too quickly.", aux: "restarting_too_quickly"})
		return
	}
	p.restartAt = now.Add(sv.delay)
	sv.record(stateChange{fmri: p.fmri, state: "offline", reason: "restarting"})
}

// The exit codes of smf_method(7) that svc.startd does not retry.
const (
	smfExitErrFatal  = 95
	smfExitErrConfig = 96
	smfExitErrNoSMF  = 99
	smfExitErrPerm   = 100
)

func noRetryExit(status int) bool {
	switch status {
	case smfExitErrFatal, smfExitErrConfig, smfExitErrNoSMF, smfExitErrPerm:
		return true
	}
	return false
}

// methodFailedReason is what svcs -x says of a method_failed instance.
func methodFailedReason(status int) string {
	switch status {
	case smfExitErrConfig:
		return "Start method exited with $SMF_EXIT_ERR_CONFIG."
	case smfExitErrFatal:
		return "Start method exited with $SMF_EXIT_ERR_FATAL."
	}
	return fmt.Sprintf("Start method exited with status %d.", status)
}
