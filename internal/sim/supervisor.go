package sim

import (
	"errors"
	"fmt"
	"io"
	"log"
	"os"
	"os/signal"
	"runtime"
	"runtime/debug"
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
	cred  *syscall.Credential // the method's user; nil: the zone's root
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
	initPID  int         // in isolation mode, PID 1 of the zone's PID namespace (zonepid.go)
	cgroup   *zoneCgroup // the zone's cgroup; nil without caps held (zone_cgroup.go)
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
	if err := sv.capResources(); err != nil {
		notifyReady(ready, err)
		return 1
	}
	if err := sv.register(); err != nil {
		notifyReady(ready, err)
		return 1
	}
	if err := sv.limitProcesses(); err != nil {
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
	if sv.cgroup != nil {
		if err := sv.cgroup.enter(); err != nil {
			started <- err
			return
		}
	}
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
		cred := r.cred
		if cred == nil {
			cred = sv.user.credential()
		}
		attr := &syscall.SysProcAttr{Setpgid: true, Pdeathsig: deathsig, Credential: cred}
		sv.cgroup.intoCgroup(attr)
		pid, err := syscall.ForkExec(r.argv[0], r.argv, &syscall.ProcAttr{Dir: r.dir, Env: r.env, Files: r.files, Sys: attr})
		r.resp <- spawnResp{pid, err}
	}
}

// limitProcesses holds the zone's services and its init's commands to
// its zone.max-processes and zone.max-lwps (limitProcesses in runas.go).
func (sv *supervisor) limitProcesses() error {
	z, err := sv.h.viewZone(sv.zone)
	if err != nil || z == nil {
		return fmt.Errorf("the zone's limits: %w", err)
	}
	if err := limitProcesses(z, sv.user); err != nil {
		return fmt.Errorf("the zone's limits: %w", err)
	}
	return nil
}

// capResources makes the cgroup that holds an isolated zone to its memory
// and CPU caps (zone_cgroup.go), for the spawner to enter. Caps the
// machine cannot hold are logged, not fatal: the zone runs as it would
// have before.
func (sv *supervisor) capResources() error {
	z, err := sv.h.viewZone(sv.zone)
	if err != nil || z == nil {
		return fmt.Errorf("the zone's caps: %w", err)
	}
	if sv.h.nodeNetns() == "" {
		if caps, _ := capsOf(z.Config); !caps.none() {
			sv.logger.Printf("%v: only in isolation mode", errCgroupsUnavailable)
		}
		return nil
	}
	sv.cgroup, err = makeZoneCgroup(z)
	if errors.Is(err, errCgroupsUnavailable) {
		sv.logger.Printf("%v", err)
		return nil
	}
	return err
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
		if sv.cgroup != nil {
			z.Cgroups = sv.cgroup.dirs
		}
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
