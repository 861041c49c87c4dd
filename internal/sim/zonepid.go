package sim

import (
	"bufio"
	"fmt"
	"io/fs"
	"net"
	"os"
	"os/signal"
	"runtime/debug"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// In isolation mode a zone also has a PID namespace of its own, so that
// its processes see only each other, as on illumos. The supervisor stays
// in the host's: every pid it records, and every pid the host's commands
// signal, is a host pid, as outside isolation mode. At boot its spawner
// thread starts the zone's init (`illumos-sim zoneinit`) as PID 1 of a new
// PID namespace, and joins that namespace for the children it forks
// afterwards (setns(CLONE_NEWPID) changes only where a thread's children
// are born): the services are born in the zone's namespace, while fork
// still returns their host pids. The init mounts the zone's /proc over
// the host's in the zone's mount namespace and reaps the zone's orphans;
// the supervisor reads the host's /proc through a descriptor opened
// before (hostProc). When the init dies (the zone halts, the supervisor
// dies and the parent death signal kills it), the kernel kills every
// process left in the namespace.

// hostProc is the host's /proc, where every pid the simulator records is
// found. A zone's supervisor opens it before its zone's /proc covers it.
var hostProc fs.FS = os.DirFS("/proc")

// runZoneInit is `illumos-sim zoneinit`, PID 1 of a zone's PID namespace:
// it mounts the namespace's /proc, tells the supervisor (fd 3), starts
// zlogin's commands (asked on fd 4, zoneinit_spawn.go) and reaps them and
// the orphans of the zone for as long as the zone runs.
func runZoneInit() int {
	debug.SetGCPercent(25) // as the supervisor: an idle init holds little
	ready := os.NewFile(3, "ready")
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGCHLD)
	if err := unix.Mount("proc", "/proc", "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		notifyReady(ready, fmt.Errorf("mount the zone's /proc: %w", err))
		return 1
	}
	l, err := net.FileListener(os.NewFile(4, "zlogin"))
	if err != nil {
		notifyReady(ready, fmt.Errorf("the zlogin socket: %w", err))
		return 1
	}
	spawner := &initSpawner{waiting: map[int]chan syscall.WaitStatus{}}
	go spawner.serve(l)
	notifyReady(ready, nil)
	for {
		spawner.reap()
		<-sigs
	}
}

// startZoneInit runs on the spawner's thread: it starts the zone's init,
// which dies with that thread (Pdeathsig), and moves the thread into the
// init's PID namespace.
func (sv *supervisor) startZoneInit() error {
	proc, err := os.OpenRoot("/proc")
	if err != nil {
		return fmt.Errorf("open the host's /proc: %w", err)
	}
	hostProc = proc.FS()
	exe, err := selfExe()
	if err != nil {
		return err
	}
	r, w, err := os.Pipe()
	if err != nil {
		return fmt.Errorf("pipe: %w", err)
	}
	defer r.Close()
	devnull, err := os.Open(os.DevNull)
	if err != nil {
		w.Close()
		return err
	}
	defer devnull.Close()
	zlogin, err := sv.h.listenForZlogin(sv.zone)
	if err != nil {
		w.Close()
		return err
	}
	defer zlogin.Close()
	// Go's check, after setting Pdeathsig, that the parent still lives
	// sees getppid 0 (the parent is outside the namespace) and the init
	// SIGKILLs itself, which PID 1 of a namespace ignores: the parent
	// death signal stays set, with no window before it is.
	pidfd := -1
	attr := &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWPID, Pdeathsig: syscall.SIGKILL, PidFD: &pidfd}
	sv.cgroup.intoCgroup(attr)
	pid, err := syscall.ForkExec(exe, []string{exe, "zoneinit"}, &syscall.ProcAttr{
		Dir: sv.root, Env: []string{"GOMAXPROCS=1"},
		Files: []uintptr{devnull.Fd(), os.Stderr.Fd(), os.Stderr.Fd(), w.Fd(), zlogin.Fd()},
		Sys:   attr,
	})
	w.Close()
	if err != nil {
		return fmt.Errorf("start the zone's init: %w", err)
	}
	defer unix.Close(pidfd)
	r.SetReadDeadline(time.Now().Add(10 * time.Second))
	line, _ := bufio.NewReader(r).ReadString('\n')
	if line = strings.TrimSpace(line); line != "ok" {
		syscall.Kill(pid, syscall.SIGKILL)
		if line == "" {
			line = "exited before it was ready"
		}
		return fmt.Errorf("the zone's init: %s", strings.TrimPrefix(line, "error: "))
	}
	if err := unix.Setns(pidfd, unix.CLONE_NEWPID); err != nil {
		syscall.Kill(pid, syscall.SIGKILL)
		return fmt.Errorf("enter the zone's PID namespace: %w", err)
	}
	sv.initPID = pid
	return nil
}

// recordInit names the zone's init in its state, for zlogin.
func (sv *supervisor) recordInit() error {
	return sv.h.updateZone(sv.zone, func(z *Zone) bool {
		if z == nil || z.BootID != sv.bootID {
			return false
		}
		z.InitPID = sv.initPID
		return true
	})
}
