package sim

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// In isolation mode zlogin's commands are born of the zone's init, which
// is already in every namespace of the zone: zlogin sends it the command
// line, the zone user's credential and its own stdin, stdout and stderr
// over a socket only root can reach, and the init forks the command as
// its child, reports its wait status and kills it if zlogin goes away.
// Entering the four namespaces from outside (nsenter, then setpriv to
// drop to the zone's user) cost two more execs a command: about 40% of a
// probe's CPU.

// zloginSocketDir holds the zone's init socket; root's alone (0700), so
// no zone's process can ask for a command.
func (h *host) zloginSocketDir(zone string) string {
	return filepath.Join(h.runDir(zone), "init")
}

// zloginSocket is the socket's name in zloginSocketDir.
const zloginSocket = "zlogin.sock"

// spawnRequest is what zlogin asks of the zone's init, with the
// command's stdin, stdout and stderr passed beside it.
type spawnRequest struct {
	Path string   `json:"path"`
	Argv []string `json:"argv"`
	Env  []string `json:"env"`
	Dir  string   `json:"dir"`
	// Cred is the zone user's, when the command drops to it.
	Cred *syscall.Credential `json:"cred,omitempty"`
	// Group puts the command in a process group of its own; Terminal in a
	// session whose controlling terminal is its stdin.
	Group    bool `json:"group,omitempty"`
	Terminal bool `json:"terminal,omitempty"`
}

// The init's answers and zlogin's signals are one line each.
const (
	spawnExit   = "exit "   // the wait status, as a number
	spawnError  = "error "  // the command could not start
	spawnSignal = "signal " // zlogin relays a signal it got
)

// onShortPath calls f with a path to name in dir that fits in a socket's
// address (108 bytes, less than a zone's run directory can take), made
// through a descriptor of dir. It needs the host's /proc at /proc.
func onShortPath(dir, name string, f func(path string) error) error {
	fd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	return f(fmt.Sprintf("/proc/self/fd/%d/%s", fd, name))
}

// listenForZlogin makes the socket the zone's init serves zlogin on; the
// supervisor makes it before the init covers /proc.
func (h *host) listenForZlogin(zone string) (*os.File, error) {
	dir := h.zloginSocketDir(zone)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return nil, err
	}
	var f *os.File
	err := onShortPath(dir, zloginSocket, func(path string) error {
		os.Remove(path) // a halted boot's
		l, err := net.ListenUnix("unixpacket", &net.UnixAddr{Name: path, Net: "unixpacket"})
		if err != nil {
			return err
		}
		l.SetUnlinkOnClose(false) // the init serves it from now on
		defer l.Close()
		f, err = l.File()
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("the zone's zlogin socket: %w", err)
	}
	return f, nil
}

// initSpawner is the zone's init's side: it starts the commands zlogin
// asks for and hands their wait status back when it reaps them.
type initSpawner struct {
	mu      sync.Mutex // held across fork and reap: a child is known before it can be reaped
	waiting map[int]chan syscall.WaitStatus
}

func (s *initSpawner) serve(l net.Listener) {
	for {
		c, err := l.Accept()
		if err != nil {
			return
		}
		go s.session(c.(*net.UnixConn))
	}
}

// reap takes the status of every child that has exited; a command's goes
// to its zlogin, an orphan's nowhere.
func (s *initSpawner) reap() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
		if pid <= 0 || err != nil {
			return
		}
		if ch, ok := s.waiting[pid]; ok {
			ch <- ws
			delete(s.waiting, pid)
		}
	}
}

// maxSpawnRequest bounds a request: a command line and environment as
// long as Linux's execve takes (ARG_MAX, 2 MiB), with room for JSON.
const maxSpawnRequest = 4 << 20

// packetSize is the length of the packet waiting on c, left unread, so
// that an init, which lives as long as its zone, holds no buffer sized
// for the longest request between requests.
func packetSize(c *net.UnixConn) (int, error) {
	raw, err := c.SyscallConn()
	if err != nil {
		return 0, err
	}
	var n int
	var rerr error
	err = raw.Read(func(fd uintptr) bool {
		n, _, rerr = unix.Recvfrom(int(fd), nil, unix.MSG_PEEK|unix.MSG_TRUNC)
		return rerr != unix.EAGAIN
	})
	if err == nil {
		err = rerr
	}
	if err == nil && n == 0 {
		err = io.EOF
	}
	return n, err
}

// session serves one zlogin: one command, its signals, its status.
func (s *initSpawner) session(c *net.UnixConn) {
	defer c.Close()
	size, err := packetSize(c)
	if err != nil {
		return
	}
	buf, oob := make([]byte, min(size, maxSpawnRequest)), make([]byte, unix.CmsgSpace(3*4))
	n, oobn, flags, _, err := c.ReadMsgUnix(buf, oob)
	if err != nil {
		return
	}
	files, err := receivedFiles(oob[:oobn])
	defer func() {
		for _, f := range files {
			f.Close()
		}
	}()
	var req spawnRequest
	if err == nil && len(files) != 3 {
		err = errors.New("want stdin, stdout and stderr")
	}
	if err == nil && flags&unix.MSG_TRUNC != 0 {
		err = fmt.Errorf("the command and its environment are longer than %d bytes", maxSpawnRequest)
	}
	if err == nil {
		err = json.Unmarshal(buf[:n], &req)
	}
	if err == nil && (req.Path == "" || len(req.Argv) == 0) {
		err = errors.New("no command")
	}
	if err != nil {
		fmt.Fprintf(c, "%s%v\n", spawnError, err)
		return
	}
	attr := &syscall.SysProcAttr{Credential: req.Cred, Setpgid: req.Group && !req.Terminal,
		Setsid: req.Terminal, Setctty: req.Terminal}
	fds := []uintptr{files[0].Fd(), files[1].Fd(), files[2].Fd()}
	done := make(chan syscall.WaitStatus, 1)
	s.mu.Lock()
	pid, err := syscall.ForkExec(req.Path, req.Argv, &syscall.ProcAttr{Dir: req.Dir, Env: req.Env, Files: fds, Sys: attr})
	if err == nil {
		s.waiting[pid] = done
	}
	s.mu.Unlock()
	for _, f := range files {
		f.Close()
	}
	files = nil
	if err != nil {
		fmt.Fprintf(c, "%s%v\n", spawnError, err)
		return
	}
	target := pid
	if req.Group || req.Terminal {
		target = -pid
	}
	// Signals from zlogin, and its end: a command outlives no zlogin, as
	// the parent death signal saw to before.
	go func() {
		line := make([]byte, 64)
		for {
			n, err := c.Read(line)
			sig := syscall.SIGKILL
			if err == nil {
				v, perr := strconv.Atoi(strings.TrimPrefix(strings.TrimSpace(string(line[:n])), spawnSignal))
				if perr != nil {
					continue
				}
				sig = syscall.Signal(v)
			}
			s.signal(pid, target, sig)
			if err != nil {
				return
			}
		}
	}()
	ws := <-done
	fmt.Fprintf(c, "%s%d\n", spawnExit, uint32(ws))
}

// signal sends sig to target, the command pid's process or group, while
// pid is not yet reaped (a reaped pid may be another process's by now).
func (s *initSpawner) signal(pid, target int, sig syscall.Signal) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.waiting[pid]; ok {
		syscall.Kill(target, sig)
	}
}

// receivedFiles are the descriptors a control message carries.
func receivedFiles(oob []byte) ([]*os.File, error) {
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return nil, err
	}
	var files []*os.File
	for _, m := range msgs {
		fds, err := unix.ParseUnixRights(&m)
		if err != nil {
			continue
		}
		for _, fd := range fds {
			files = append(files, os.NewFile(uintptr(fd), "received"))
		}
	}
	return files, nil
}

// initSession is zlogin's side: a command the zone's init runs.
type initSession struct {
	c *net.UnixConn
}

// spawnThroughInit asks zone's init to run req with stdio as its stdin,
// stdout and stderr.
func (h *host) spawnThroughInit(zone string, req spawnRequest, stdio [3]*os.File) (*initSession, error) {
	var c *net.UnixConn
	err := onShortPath(h.zloginSocketDir(zone), zloginSocket, func(path string) error {
		var err error
		c, err = net.DialUnix("unixpacket", nil, &net.UnixAddr{Name: path, Net: "unixpacket"})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("reach the zone's init: %w", err)
	}
	b, err := json.Marshal(req)
	if err == nil {
		rights := unix.UnixRights(int(stdio[0].Fd()), int(stdio[1].Fd()), int(stdio[2].Fd()))
		_, _, err = c.WriteMsgUnix(b, rights, nil)
	}
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("ask the zone's init: %w", err)
	}
	return &initSession{c: c}, nil
}

// signal relays sig to the command.
func (s *initSession) signal(sig syscall.Signal) {
	fmt.Fprintf(s.c, "%s%d\n", spawnSignal, int(sig))
}

// wait is the command's wait status. The init's end without one is the
// zone's: its halt killed the command.
func (s *initSession) wait() (syscall.WaitStatus, error) {
	defer s.c.Close()
	line := make([]byte, 4096)
	n, err := s.c.Read(line)
	if err != nil {
		if errors.Is(err, io.EOF) {
			return syscall.WaitStatus(syscall.SIGKILL), nil
		}
		return 0, err
	}
	msg := strings.TrimSpace(string(line[:n]))
	if rest, ok := strings.CutPrefix(msg, spawnError); ok {
		return 0, errors.New(rest)
	}
	v, err := strconv.ParseUint(strings.TrimPrefix(msg, spawnExit), 10, 32)
	if err != nil {
		return 0, fmt.Errorf("the zone's init answered %q", msg)
	}
	return syscall.WaitStatus(v), nil
}
