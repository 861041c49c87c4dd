package fabric

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Without root the fabric lives in a user namespace of the stack's own
// (user-namespace mode): unshare(1) maps the caller to its root and the
// caller's subordinate ids (/etc/subuid, /etc/subgid, through newuidmap)
// to 1…, so each zone still gets a uid of its own. The keeper is the
// first process there: it has a mount namespace (a /run of its own, where
// ip keeps the namespaces' names) and a network namespace, which stands
// for the control plane host's link to the fabric. Everything else enters
// them through nsenter(1) (Fabric.Command). The stack's process cannot
// enter them itself (it has no rights over the host's network namespace
// to come back to, and a multithreaded process cannot change its user
// namespace), so the keeper makes its sockets for it: a listener inside
// a node's namespace (the relays to the control plane) and a connection
// from its own (the control plane's dials to the nodes' endpoints).
// Each is passed over a Unix socket in a directory only the stack's user
// can enter.

// keeperEnv, set in a process's environment, makes it the keeper
// listening at the socket the variable names.
const keeperEnv = "ZONEWRIGHT_FABRIC_KEEPER"

func init() {
	if sock := os.Getenv(keeperEnv); sock != "" {
		if err := keep(sock); err != nil {
			fmt.Fprintln(os.Stderr, "fabric keeper:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
}

// userNamespaceCmd starts argv as the root of a new user namespace with
// mount and network namespaces of its own.
func userNamespaceCmd(argv ...string) *exec.Cmd {
	return exec.Command("unshare", append([]string{"--user", "--map-root-user", "--map-auto",
		"--mount", "--net", "--propagation", "private", "--"}, argv...)...)
}

// userNamespaceSupported says why a non-root stack cannot make its user
// namespace, or nil.
func userNamespaceSupported() error {
	for _, tool := range []string{"unshare", "newuidmap", "newgidmap"} {
		if _, err := exec.LookPath(tool); err != nil {
			return fmt.Errorf("isolation mode without root needs %s (the uidmap package): %w", tool, err)
		}
	}
	if out, err := userNamespaceCmd("true").CombinedOutput(); err != nil {
		return fmt.Errorf("isolation mode without root needs a user namespace with subordinate ids (/etc/subuid and /etc/subgid entries for this user, e.g. usermod --add-subuids 100000-165535 --add-subgids 100000-165535): %s", strings.TrimSpace(string(out)))
	}
	return nil
}

// keeper is the running keeper, seen from the stack's process.
type keeper struct {
	cmd  *exec.Cmd
	dir  string // holds the socket; the stack's user's alone
	sock string
	done chan struct{}
}

// startKeeper starts the keeper (this program again, which init turns
// into it) and waits until it serves.
func startKeeper() (*keeper, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "zwfabric")
	if err != nil {
		return nil, err
	}
	k := &keeper{dir: dir, sock: filepath.Join(dir, "keeper.sock"), done: make(chan struct{})}
	k.cmd = userNamespaceCmd(self)
	k.cmd.Env = append(os.Environ(), keeperEnv+"="+k.sock)
	// It ends with the stack: at the stack's death, or when its stdin,
	// the stack's end of a pipe, closes.
	k.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	stdin, err := k.cmd.StdinPipe()
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	_ = stdin // kept open for the keeper's life, closed by Wait
	out, err := k.cmd.StdoutPipe()
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	var stderr strings.Builder
	k.cmd.Stderr = &stderr
	if err := k.cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("start the fabric's user namespace: %w", err)
	}
	ready := make(chan error, 1)
	go func() {
		line, err := bufio.NewReader(out).ReadString('\n')
		if err == nil && line != "ready\n" {
			err = fmt.Errorf("said %q", line)
		}
		ready <- err
	}()
	go func() { _ = k.cmd.Wait(); close(k.done) }()
	select {
	case err = <-ready:
	case <-time.After(30 * time.Second):
		err = errors.New("not ready after 30s")
	}
	if err != nil {
		k.stop()
		return nil, fmt.Errorf("the fabric's user namespace: %v: %s", err, strings.TrimSpace(stderr.String()))
	}
	return k, nil
}

// stop ends the keeper. Namespaces still held by processes that entered
// them outlive it until those end.
func (k *keeper) stop() {
	_ = k.cmd.Process.Kill()
	<-k.done
	os.RemoveAll(k.dir)
}

// enter is the command line prefix that runs a program in the keeper's
// namespaces, as their root.
func (k *keeper) enter() []string {
	return []string{"nsenter", "--target", strconv.Itoa(k.cmd.Process.Pid), "--user", "--mount", "--net", "--preserve-credentials", "--"}
}

// ask sends the keeper one request and returns the socket it made.
func (k *keeper) ask(ctx context.Context, request string) (*os.File, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "unix", k.sock)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	uc := c.(*net.UnixConn)
	if dl, ok := ctx.Deadline(); ok {
		_ = uc.SetDeadline(dl)
	}
	if _, err := uc.Write([]byte(request + "\n")); err != nil {
		return nil, err
	}
	buf, oob := make([]byte, 512), make([]byte, unix.CmsgSpace(4))
	n, oobn, _, _, err := uc.ReadMsgUnix(buf, oob)
	if err != nil {
		return nil, err
	}
	if reply := string(buf[:n]); reply != "ok" {
		return nil, errors.New(strings.TrimPrefix(reply, "error: "))
	}
	msgs, err := unix.ParseSocketControlMessage(oob[:oobn])
	if err != nil || len(msgs) != 1 {
		return nil, errors.New("the fabric keeper passed no socket")
	}
	fds, err := unix.ParseUnixRights(&msgs[0])
	if err != nil || len(fds) != 1 {
		return nil, errors.New("the fabric keeper passed no socket")
	}
	return os.NewFile(uintptr(fds[0]), "fabric socket"), nil
}

// listen is a listener on addr inside the namespace at path.
func (k *keeper) listen(path, addr string) (net.Listener, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	f, err := k.ask(ctx, "listen "+path+" "+addr)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return net.FileListener(f)
}

// dial connects to addr from the keeper's network namespace.
func (k *keeper) dial(ctx context.Context, addr string) (net.Conn, error) {
	f, err := k.ask(ctx, "dial "+addr)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return net.FileConn(f)
}

// keep is the keeper's life: it gives itself a /run of its own (ip names
// namespaces in /run/netns, which only the host's root may write), its
// loopback, then serves requests until the stack closes its stdin.
func keep(sock string) error {
	if err := unix.Mount("tmpfs", "/run", "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=755"); err != nil {
		return fmt.Errorf("mount a /run of its own: %w", err)
	}
	if err := os.Mkdir("/run/netns", 0o755); err != nil {
		return err
	}
	if err := ipCmd("link", "set", "lo", "up"); err != nil {
		return err
	}
	l, err := net.Listen("unix", sock)
	if err != nil {
		return err
	}
	go func() {
		_, _ = bufio.NewReader(os.Stdin).ReadString(0) // EOF: the stack is gone
		os.Exit(0)
	}()
	fmt.Println("ready")
	for {
		c, err := l.Accept()
		if err != nil {
			return err
		}
		go serve(c.(*net.UnixConn))
	}
}

// serve answers one request: "listen <namespace path> <addr>" or
// "dial <addr>", with "ok" and the socket, or "error: …".
func serve(c *net.UnixConn) {
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(30 * time.Second))
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return
	}
	f, err := socketFor(strings.Fields(line))
	if err != nil {
		_, _ = c.Write([]byte("error: " + err.Error()))
		return
	}
	defer f.Close()
	_, _, _ = c.WriteMsgUnix([]byte("ok"), unix.UnixRights(int(f.Fd())), nil)
}

// socketFor makes the socket a request asks for.
func socketFor(req []string) (*os.File, error) {
	switch {
	case len(req) == 3 && req[0] == "listen":
		l, err := listenIn(req[1], req[2])
		if err != nil {
			return nil, err
		}
		defer l.Close()
		return l.(*net.TCPListener).File()
	case len(req) == 2 && req[0] == "dial":
		c, err := net.DialTimeout("tcp", req[1], 10*time.Second)
		if err != nil {
			return nil, err
		}
		defer c.Close()
		return c.(*net.TCPConn).File()
	}
	return nil, fmt.Errorf("no such request %q", strings.Join(req, " "))
}
