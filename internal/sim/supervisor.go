package sim

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"syscall"
	"time"
)

// A booted zone has a supervisor, like zoneadmd: `illumos-sim zoneadmd
// ROOT ZONE BOOTID`, started by zoneadm boot in its own session. It runs
// the zone's SMF services as Linux processes (cwd the zone root, each in
// its own process group, SIGKILLed if the supervisor dies), restarts them
// when they exit, puts them into maintenance when they fail too quickly,
// stops them gracefully on SIGTERM (zoneadm shutdown) and kills them at
// once on SIGUSR2 (zoneadm halt). SIGUSR1 means "the state changed, look".
//
// An idle zone costs next to nothing: the supervisor sleeps until a signal
// (SIGCHLD, SIGUSR1, shutdown, halt) or a timer that exists for a reason
// (a restart back-off, a stop timeout, the poll of a daemon's process
// group), with a slow safety tick that re-reads the zone in case it was
// halted behind the supervisor's back.
//
// The supervisor is a child subreaper, so processes a service orphans are
// reparented to it and reaped here: nothing of a halted zone is left
// behind, not even a zombie.

const (
	sigReconcile        = syscall.SIGUSR1
	sigHalt             = syscall.SIGUSR2
	sigShutdown         = syscall.SIGTERM
	prSetChildSubreaper = 36
)

// The supervisor's timers.
const (
	// safetyTick bounds the sleep of an idle supervisor: it re-reads the
	// zone and halts if the zone is no longer its boot.
	safetyTick = 30 * time.Second
	// groupPoll is how often the process group of a daemon (a contract
	// service whose start method exited) is checked for emptiness. Its
	// processes are reparented to the supervisor, so their exits usually
	// arrive as SIGCHLD first; the poll catches the rest.
	groupPoll = time.Second
	// minWake keeps a deadline already due from spinning the loop.
	minWake = 10 * time.Millisecond
)

// runDir is the per-zone runtime directory: supervisor log and bin links.
func (h *host) runDir(zone string) string { return filepath.Join(h.root, "run", zone) }

// zoneBinDir holds links to the inside-zone commands; zlogin and services
// put it first on PATH.
func (h *host) zoneBinDir(zone string) string { return filepath.Join(h.runDir(zone), "bin") }

// ensureZoneBin (re)creates the zone's command links and root marker.
func ensureZoneBin(h *host, zone string) error {
	exe, err := selfExe()
	if err != nil {
		return err
	}
	dir := h.zoneBinDir(zone)
	if err := linkCommands(dir, exe, zoneCommands); err != nil {
		return err
	}
	marker, want := filepath.Join(dir, rootMarker), []byte(h.root+"\n")
	if b, err := os.ReadFile(marker); err == nil && bytes.Equal(b, want) {
		return nil // every zlogin checks; only the first writes
	}
	return writeFileAtomic(marker, want)
}

// procInfo is what the simulator reads from /proc/PID/stat.
type procInfo struct {
	state byte
	ppid  int
	pgid  int
}

func procStat(pid int) (procInfo, bool) {
	b, err := fs.ReadFile(hostProc, fmt.Sprintf("%d/stat", pid))
	if err != nil {
		return procInfo{}, false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 || i+2 >= len(s) {
		return procInfo{}, false
	}
	var st procInfo
	if _, err := fmt.Sscanf(s[i+2:], "%c %d %d", &st.state, &st.ppid, &st.pgid); err != nil {
		return procInfo{}, false
	}
	return st, true
}

// processAlive treats a zombie as dead: on hosts whose init does not reap
// orphans, a finished process can linger as a zombie forever.
func processAlive(pid int) bool {
	if pid <= 0 {
		return false
	}
	if err := syscall.Kill(pid, 0); err != nil && !errors.Is(err, syscall.EPERM) {
		return false
	}
	st, ok := procStat(pid)
	return ok && st.state != 'Z'
}

// groupAlive reports a process group with a live (non-zombie) member.
func groupAlive(pgid int) bool {
	if pgid <= 0 || syscall.Kill(-pgid, 0) != nil {
		return false
	}
	return len(groupMembers(pgid)) > 0
}

// isSupervisorOf checks, before signalling a recorded pid, that it is still
// the supervisor of that zone and not a recycled pid.
func isSupervisorOf(pid int, root, zone string) bool {
	b, err := fs.ReadFile(hostProc, fmt.Sprintf("%d/cmdline", pid))
	if err != nil {
		return false
	}
	args := strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
	return len(args) >= 4 && args[1] == "zoneadmd" && args[2] == root && args[3] == zone
}

// startSupervisor launches the zone's supervisor and waits until it has
// taken the zone to running.
func startSupervisor(h *host, zone, bootID string) error {
	exe, err := selfExe()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(h.runDir(zone), 0o755); err != nil {
		return fmt.Errorf("create run dir: %w", err)
	}
	// The supervisor's log names every service and pid of the zone:
	// the host's to read, not the zones'.
	logf, err := os.OpenFile(filepath.Join(h.runDir(zone), "zoneadmd.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("open zoneadmd log: %w", err)
	}
	defer logf.Close()
	if err := logf.Chmod(0o600); err != nil {
		return fmt.Errorf("open zoneadmd log: %w", err)
	}
	r, w, err := os.Pipe()
	if err != nil {
		return fmt.Errorf("pipe: %w", err)
	}
	defer r.Close()
	cmd := exec.Command(exe, "zoneadmd", h.root, zone, bootID)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.ExtraFiles = []*os.File{w}
	cmd.Env = supervisorEnv(os.Environ())
	// Its own session: the supervisor must outlive this zoneadm and must
	// not get the terminal's signals.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if h.nodeNetns() != "" {
		// The zone's network, mount and UTS namespaces, which end with
		// the zone.
		cmd.SysProcAttr.Cloneflags = zoneCloneflags
	}
	if err := cmd.Start(); err != nil {
		w.Close()
		return fmt.Errorf("could not start zoneadmd: %w", err)
	}
	w.Close()
	cmd.Process.Release()
	r.SetReadDeadline(time.Now().Add(30 * time.Second))
	line, err := bufio.NewReader(r).ReadString('\n')
	line = strings.TrimSpace(line)
	switch {
	case line == "ok":
		return nil
	case line != "":
		return errors.New(strings.TrimPrefix(line, "error: "))
	}
	return fmt.Errorf("zoneadmd exited during boot (%v); see %s", err, filepath.Join(h.runDir(zone), "zoneadmd.log"))
}

// supervisorEnv is the environment a supervisor starts with: the caller's,
// without one-off faults, and GOMAXPROCS=1 (one thread fewer, less memory
// per zone). Its services do not inherit it (methodEnv).
func supervisorEnv(env []string) []string {
	return append(envWithout(env, EnvFaults, "GOMAXPROCS"), "GOMAXPROCS=1")
}

func envWithout(env []string, keys ...string) []string {
	var out []string
	for _, kv := range env {
		skip := false
		for _, k := range keys {
			if strings.HasPrefix(kv, k+"=") {
				skip = true
			}
		}
		if !skip {
			out = append(out, kv)
		}
	}
	return out
}

// stopSupervisor asks a supervisor to shut its zone down (gracefully or at
// once) and waits for it to exit, killing it if it does not.
func stopSupervisor(h *host, zone string, pid int, graceful bool) {
	if pid <= 0 || !isSupervisorOf(pid, h.root, zone) {
		return
	}
	sig, wait := sigHalt, 5*time.Second
	if graceful {
		sig, wait = sigShutdown, 10*time.Minute
	}
	syscall.Kill(pid, sig)
	deadline := time.Now().Add(wait)
	for processAlive(pid) && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if processAlive(pid) {
		syscall.Kill(pid, syscall.SIGKILL)
	}
}

// killServiceGroups is the last resort when a supervisor died without
// cleaning up: kill the recorded process groups of the zone's services.
func killServiceGroups(z *Zone) {
	for _, s := range z.Services {
		if s.PID > 0 && groupAlive(s.PID) {
			syscall.Kill(-s.PID, syscall.SIGKILL)
		}
	}
}

// stopAll halts every zone of the host and kills what is left.
func stopAll(h *host) error {
	stopNatd(h)
	h.clearKernelNAT()
	all, err := h.listZones()
	if err != nil {
		return err
	}
	var zones []*Zone
	for _, z := range all {
		if z.Name != "global" && inKernel(z.State) {
			zones = append(zones, z)
		}
	}
	done := make(chan struct{}, len(zones))
	for _, z := range zones {
		go func(z *Zone) {
			stopSupervisor(h, z.Name, z.SupervisorPID, false)
			killServiceGroups(z)
			done <- struct{}{}
		}(z)
	}
	for range zones {
		<-done
	}
	err = h.update(func(st *State) bool {
		for _, z := range st.zones() {
			if z.Name == "global" || !inKernel(z.State) {
				continue
			}
			if z = st.zone(z.Name); z != nil && inKernel(z.State) {
				leaveKernel(st, z)
			}
		}
		return true
	})
	if err != nil {
		return err
	}
	// A zone's link may vanish with its namespace meanwhile: what could
	// not be removed is logged, not fatal.
	if err := h.clearNodeNet(); err != nil {
		h.netLog("stop-all: %v", err)
	}
	return nil
}

// svcProc is the supervisor's view of one service instance.
type svcProc struct {
	fmri        string
	def         *SvcDef
	pid         int // main process and process-group id; 0 when not running
	groupOnly   bool
	member      int // a live member of the process group, last seen
	stopping    bool
	stopHelper  int
	stopUntil   time.Time
	restartNext bool // start again once stopped (svcadm restart)
	restartAt   time.Time
	exits       []time.Time
	transient   bool // a transient service whose start method succeeded
	seenRestart int
	seenClear   int
	known       bool
}

type spawnReq struct {
	argv  []string
	env   []string
	dir   string
	files []uintptr
	resp  chan spawnResp
}

type spawnResp struct {
	pid int
	err error
}

type supervisor struct {
	h        *host
	zone     string
	bootID   string
	root     string // the zone's root directory
	user     zoneUser
	logger   *log.Logger
	spawnCh  chan spawnReq
	initPID  int // in isolation mode, PID 1 of the zone's PID namespace (zonepid.go)
	procs    map[string]*svcProc
	limit    int
	window   time.Duration
	delay    time.Duration
	orphaned bool
	// recheck is set when a stop ends: whether the service runs next is
	// decided from the zone as it is then, since a request that came
	// while it was stopping (a disable during a restart, an enable during
	// a disable) could not be acted on when it was read.
	recheck bool
}

// runSupervisor is the entry point of `illumos-sim zoneadmd ROOT ZONE BOOTID`.
func runSupervisor(args []string, stderr io.Writer) int {
	if len(args) != 3 {
		fmt.Fprintln(stderr, "usage: illumos-sim zoneadmd ROOT ZONE BOOTID")
		return 2
	}
	// An idle supervisor's heap is a few hundred KiB; without this it
	// would hold up to the default 4 MiB of garbage between collections.
	debug.SetGCPercent(25)
	ready := os.NewFile(3, "ready")
	h, err := openHost(args[0])
	if err != nil {
		notifyReady(ready, err)
		return 1
	}
	sv := &supervisor{
		h: h, zone: args[1], bootID: args[2],
		logger:  log.New(stderr, "zoneadmd["+args[1]+"] ", log.LstdFlags|log.Lmicroseconds),
		spawnCh: make(chan spawnReq),
		procs:   map[string]*svcProc{},
		limit:   h.facts.SMF.RestartLimit,
		window:  time.Duration(h.facts.SMF.RestartWindow),
		delay:   time.Duration(h.facts.SMF.RestartDelay),
	}
	if sv.limit <= 0 {
		sv.limit = 3
	}
	return sv.run(ready)
}

func notifyReady(f *os.File, err error) {
	if f == nil {
		return
	}
	if err != nil {
		fmt.Fprintf(f, "error: %v\n", err)
	} else {
		fmt.Fprintln(f, "ok")
	}
	f.Close()
}

func (sv *supervisor) run(ready *os.File) int {
	syscall.RawSyscall(syscall.SYS_PRCTL, prSetChildSubreaper, 1, 0)
	sigs := make(chan os.Signal, 32)
	signal.Notify(sigs, syscall.SIGCHLD, sigReconcile, sigHalt, sigShutdown, syscall.SIGHUP, syscall.SIGINT)
	if err := ensureZoneBin(sv.h, sv.zone); err != nil {
		notifyReady(ready, err)
		return 1
	}
	if err := sv.register(); err != nil {
		notifyReady(ready, err)
		return 1
	}
	if sv.h.nodeNetns() != "" {
		if err := sv.h.plumbZoneNet(sv.zone, os.Getpid()); err != nil {
			notifyReady(ready, fmt.Errorf("plumb the zone's network: %w", err))
			return 1
		}
		if err := sv.setupView(); err != nil {
			notifyReady(ready, err)
			return 1
		}
	}
	if err := sv.startSpawner(); err != nil {
		notifyReady(ready, err)
		return 1
	}
	if sv.initPID != 0 {
		if err := sv.recordInit(); err != nil {
			notifyReady(ready, err)
			return 1
		}
	}
	notifyReady(ready, nil)
	sv.logger.Printf("zone booted")
	sv.reconcile()
	timer := time.NewTimer(sv.untilNextWake())
	defer timer.Stop()
	for {
		select {
		case s := <-sigs:
			switch s {
			case syscall.SIGCHLD:
				// Exits are handled as they are reaped: the zone's file is
				// read only when there is something to record.
				sv.reap()
				sv.checkGroups()
			case sigShutdown:
				sv.logger.Printf("shutdown requested")
				sv.shutdown(sigs)
				return 0
			case sigHalt, syscall.SIGINT:
				sv.logger.Printf("halt requested")
				sv.halt()
				return 0
			default:
				sv.reconcile()
			}
		case <-timer.C:
			sv.reap()
			sv.reconcile()
		}
		for sv.recheck && !sv.orphaned {
			sv.reconcile()
		}
		if sv.orphaned {
			// The zone was halted or rebooted behind our back (stop-all,
			// a crashed zoneadm): nothing here may outlive that.
			sv.logger.Printf("zone no longer ours; halting")
			sv.halt()
			return 0
		}
		timer.Reset(sv.untilNextWake())
	}
}

// untilNextWake is the time to the earliest deadline the supervisor has a
// reason to wake for: a restart back-off ending, a stop timeout, the next
// poll of a daemon's process group; at most safetyTick.
func (sv *supervisor) untilNextWake() time.Duration {
	now := time.Now()
	next := now.Add(safetyTick)
	for _, p := range sv.procs {
		if !p.restartAt.IsZero() && p.restartAt.Before(next) {
			next = p.restartAt
		}
		if p.stopping && !p.stopUntil.IsZero() && p.stopUntil.Before(next) {
			next = p.stopUntil
		}
		if p.groupOnly {
			if t := now.Add(groupPoll); t.Before(next) {
				next = t
			}
		}
	}
	return max(next.Sub(now), minWake)
}

// startSpawner starts the spawner and waits until it is ready to fork.
func (sv *supervisor) startSpawner() error {
	started := make(chan error)
	go sv.spawner(started)
	return <-started
}

// spawner forks every child from one locked OS thread, because Linux ties
// Pdeathsig to the thread that forked: were that thread to exit, the
// children would be killed with it. In isolation mode the thread starts
// the zone's init first and forks into its PID namespace from then on.
func (sv *supervisor) spawner(started chan<- error) {
	runtime.LockOSThread()
	if sv.h.nodeNetns() != "" {
		if err := sv.startZoneInit(); err != nil {
			started <- err
			return
		}
	}
	close(started)
	// In the zone's PID namespace a child's parent is outside it: its
	// getppid is 0, and Go's check that the parent still lives would kill
	// it at once. The init's death kills it instead.
	deathsig := syscall.SIGKILL
	if sv.initPID != 0 {
		deathsig = 0
	}
	for r := range sv.spawnCh {
		pid, err := syscall.ForkExec(r.argv[0], r.argv, &syscall.ProcAttr{
			Dir: r.dir, Env: r.env, Files: r.files,
			Sys: &syscall.SysProcAttr{Setpgid: true, Pdeathsig: deathsig, Credential: sv.user.credential()},
		})
		r.resp <- spawnResp{pid, err}
	}
}

// register moves the zone from ready to running under our boot id.
func (sv *supervisor) register() error {
	var regErr error
	err := sv.h.updateZone(sv.zone, func(z *Zone) bool {
		switch {
		case z == nil:
			regErr = fmt.Errorf("zone %s does not exist", sv.zone)
			return false
		case z.BootID != sv.bootID || z.State != stateReady:
			regErr = fmt.Errorf("zone %s is %s, not ready for this boot", sv.zone, z.State)
			return false
		}
		user, err := sv.h.zoneUser(z)
		if err != nil {
			regErr = err
			return false
		}
		z.State = stateRunning
		z.SupervisorPID = os.Getpid()
		z.Booted = time.Now().UTC()
		sv.root, sv.user = sv.h.zoneRoot(z), user
		z.Nodename = bootNodename(sv.root, z.Config.Brand)
		for _, s := range z.Services {
			if s.State == "online" || s.State == "uninitialized" {
				s.State = "offline"
			}
			s.PID = 0
		}
		return true
	})
	if err != nil {
		return err
	}
	return regErr
}

// stateChange is a service state the supervisor records after acting.
type stateChange struct {
	fmri   string
	state  string
	pid    int
	reason string
	aux    string
}

// reconcile compares what the administrator wants with what runs and acts.
// The zone's lock is held only to read requests and to record results,
// never while processes start or stop.
func (sv *supervisor) reconcile() {
	var starts, stops []*svcProc
	var cleared []string
	now := time.Now()
	sv.recheck = false
	err := sv.h.updateZone(sv.zone, func(z *Zone) bool {
		if z == nil || z.BootID != sv.bootID {
			sv.orphaned = true
			return false
		}
		changed := false
		present := map[string]bool{}
		for _, s := range z.Services {
			present[s.FMRI] = true
			p := sv.procs[s.FMRI]
			if p == nil {
				p = &svcProc{fmri: s.FMRI, seenRestart: s.RestartReq, seenClear: s.ClearReq}
				sv.procs[s.FMRI] = p
			}
			p.def = s.Manifest
			if s.ClearReq != p.seenClear {
				p.seenClear = s.ClearReq
				if s.State == "maintenance" {
					setState(s, "offline", "")
					p.exits = nil
					cleared = append(cleared, s.FMRI)
					changed = true
				}
			}
			if s.RestartReq != p.seenRestart {
				p.seenRestart = s.RestartReq
				if p.pid != 0 && !p.stopping {
					p.restartNext = true
					stops = append(stops, p)
					continue
				}
			}
			want := s.Enabled && s.State != "maintenance"
			if !want {
				// A pending restart is moot; it must not keep a timer.
				p.restartAt = time.Time{}
			}
			switch {
			case !want && (p.pid != 0 || p.transient) && !p.stopping:
				p.restartNext = false
				stops = append(stops, p)
			case !want && p.pid == 0 && !s.Enabled && s.State != "disabled" && s.State != "maintenance":
				setState(s, "disabled", "")
				changed = true
			case want && p.pid == 0 && !p.stopping && !p.transient && !now.Before(p.restartAt):
				p.restartAt = time.Time{}
				starts = append(starts, p)
				if s.State != "offline" {
					setState(s, "offline", "")
					changed = true
				}
			}
			if p.stopping && !p.stopUntil.IsZero() && !now.Before(p.stopUntil) && p.pid != 0 {
				sv.logger.Printf("%s: stop timed out; killing", p.fmri)
				syscall.Kill(-p.pid, syscall.SIGKILL)
				p.stopUntil = time.Time{} // killed: its exit ends the stop
			}
		}
		for fmri, p := range sv.procs {
			if !present[fmri] {
				if p.pid != 0 && !p.stopping {
					stops = append(stops, p)
				} else if p.pid == 0 {
					delete(sv.procs, fmri)
				}
			}
		}
		return changed
	})
	if err != nil {
		sv.logger.Printf("reconcile: %v", err)
		return
	}
	for _, fmri := range cleared {
		sv.startdLog(fmri, "Leaving maintenance because clear requested.")
	}
	sv.checkGroups()
	for _, p := range stops {
		sv.stop(p)
	}
	for _, p := range starts {
		sv.start(p)
	}
}

// checkGroups finishes the daemons (contract services whose start method
// exited) whose process group is empty: a stop completes, a running
// service has exited.
func (sv *supervisor) checkGroups() {
	for _, p := range sv.procs {
		if !p.groupOnly || p.groupAlive() {
			continue
		}
		if p.stopping {
			sv.stopped(p)
		} else {
			sv.serviceExited(p, 0, false)
		}
	}
}

// groupAlive reports whether the service's process group has a live
// member. It remembers one, so a daemon that lives on is confirmed with a
// single /proc read rather than a scan of every process.
func (p *svcProc) groupAlive() bool {
	if p.pid <= 0 || syscall.Kill(-p.pid, 0) != nil {
		return false
	}
	if p.member > 0 {
		if st, ok := procStat(p.member); ok && st.pgid == p.pid && st.state != 'Z' {
			return true
		}
	}
	members := groupMembers(p.pid)
	if len(members) == 0 {
		p.member = 0
		return false
	}
	p.member = members[0]
	return true
}

func setState(s *Service, state, reason string) {
	s.State = state
	s.Reason = reason
	s.Aux = ""
	s.STime = time.Now().UTC()
}

// record writes service states into the zone's state.
func (sv *supervisor) record(changes ...stateChange) {
	err := sv.h.updateZone(sv.zone, func(z *Zone) bool {
		if z == nil || z.BootID != sv.bootID {
			return false
		}
		for _, c := range changes {
			for _, s := range z.Services {
				if s.FMRI != c.fmri {
					continue
				}
				if c.state == "disabled" && s.Enabled {
					c.state = "offline"
				}
				if s.State != c.state || s.Reason != c.reason || s.Aux != c.aux {
					setState(s, c.state, c.reason)
					s.Aux = c.aux
				}
				s.PID = c.pid
				if c.reason == "restarting" {
					s.Restarts++
					s.Reason = ""
				}
			}
		}
		return true
	})
	if err != nil {
		sv.logger.Printf("record: %v", err)
	}
}

// methodEnv is the environment of a method, built from scratch as
// svc.startd does: the zone's PATH and the simulator's zone variables, the
// method user's HOME, LOGNAME and USER, the SMF variables, then the
// manifest's method_environment. Nothing of the caller's environment.
func (sv *supervisor) methodEnv(p *svcProc, method string) []string {
	env := append(sv.h.zoneEnv(sv.zone), sv.user.loginEnv()...)
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
	writeStartdLine(logf, fmt.Sprintf("Executing %s method (\"%s\").", method, execLine))
	resp := make(chan spawnResp, 1)
	sv.spawnCh <- spawnReq{
		argv:  []string{"/bin/sh", "-c", rewriteIllumosPaths(expandMethod(execLine, p.fmri, method), sv.h.zoneBinDir(sv.zone))},
		env:   sv.methodEnv(p, method),
		dir:   dir,
		files: []uintptr{devnull.Fd(), logf.Fd(), logf.Fd()},
		resp:  resp,
	}
	r := <-resp
	return r.pid, r.err
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

// shutdown stops every service with its stop method and waits for all of
// them (killing those past their stop timeout), then exits.
func (sv *supervisor) shutdown(sigs chan os.Signal) {
	for _, p := range sv.procs {
		p.restartNext = false
		p.restartAt = time.Time{}
		if p.pid != 0 && !p.stopping {
			sv.stop(p)
		}
	}
	for {
		running := false
		for _, p := range sv.procs {
			if p.pid == 0 {
				continue
			}
			if p.groupOnly && !p.groupAlive() {
				p.pid = 0
				continue
			}
			running = true
			if time.Now().After(p.stopUntil) {
				syscall.Kill(-p.pid, syscall.SIGKILL)
			}
		}
		if !running {
			break
		}
		select {
		case s := <-sigs:
			if s == sigHalt || s == syscall.SIGINT {
				sv.halt()
				return
			}
		case <-time.After(20 * time.Millisecond):
		}
		sv.reapQuiet()
	}
	sv.killEverything()
}

// reapQuiet reaps children and clears the pids of services that ended.
func (sv *supervisor) reapQuiet() {
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
		if pid <= 0 || err != nil {
			return
		}
		for _, p := range sv.procs {
			if p.pid == pid && !p.groupOnly {
				if groupAlive(pid) {
					syscall.Kill(-pid, syscall.SIGKILL)
				}
				p.pid = 0
			}
			if p.stopHelper == pid {
				p.stopHelper = 0
				if p.pid != 0 {
					syscall.Kill(-p.pid, syscall.SIGKILL)
				}
			}
		}
	}
}

// halt kills every process of the zone at once.
func (sv *supervisor) halt() {
	for _, p := range sv.procs {
		if p.pid != 0 {
			syscall.Kill(-p.pid, syscall.SIGKILL)
		}
		if p.stopHelper != 0 {
			syscall.Kill(-p.stopHelper, syscall.SIGKILL)
		}
	}
	sv.killEverything()
}

// killEverything kills any child left (a daemon that left its process
// group is still our child, being reparented to us; in isolation mode the
// zone's init, whose death kills every process of the zone) and reaps
// them all, so no process and no zombie of the zone survives the
// supervisor.
func (sv *supervisor) killEverything() {
	deadline := time.Now().Add(3 * time.Second)
	self := os.Getpid()
	for time.Now().Before(deadline) {
		for _, pid := range childrenOf(self) {
			syscall.Kill(pid, syscall.SIGKILL)
		}
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
		if errors.Is(err, syscall.ECHILD) {
			return
		}
		if pid <= 0 {
			time.Sleep(5 * time.Millisecond)
		}
	}
	sv.logger.Printf("some processes did not exit")
}

// childrenOf lists the live processes whose parent is pid.
func childrenOf(pid int) []int {
	entries, err := fs.ReadDir(hostProc, ".")
	if err != nil {
		return nil
	}
	var out []int
	for _, e := range entries {
		var p int
		if _, err := fmt.Sscan(e.Name(), &p); err != nil {
			continue
		}
		if st, ok := procStat(p); ok && st.ppid == pid && st.state != 'Z' {
			out = append(out, p)
		}
	}
	return out
}
