package sim

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/creack/pty"
	"golang.org/x/term"
)

// zlogin ZONE [utility [args...]]: the words after the zone are joined with
// spaces and run by "sh -c" in the zone's root directory (the shell
// re-parses them, as the zone's shell does); stdin, stdout and stderr pass
// through and the exit status is the command's (spec §6). With -i and a
// terminal on stdin, the command gets a new pseudo-terminal of its own
// (interactive mode, man zlogin.1 on OmniOS): zlogin puts its own terminal
// in raw mode, relays both ways and passes window size changes on.

const zloginUsage = "zlogin: usage: zlogin [ -dnQCEINS ] [ -e cmdchar ] [-l user] zonename [command [arg ...]]"

func runZlogin(inv *invocation) int {
	opts, rest, _, ok := getopt(inv.args, "dinCEINQSe:l:")
	if !ok || len(rest) == 0 {
		inv.errf("%s", zloginUsage)
		return 2
	}
	var console, failsafe, noStdin, interactive bool
	user := ""
	for _, o := range opts {
		switch o.c {
		case 'C':
			console = true
		case 'S':
			failsafe = true
		case 'n':
			noStdin = true
		case 'i':
			interactive = true
		case 'l':
			user = o.val
		}
	}
	if user != "" && failsafe {
		inv.errf("zlogin: -l may not be specified for failsafe login")
		return 2
	}
	zone := rest[0]
	if zone == "global" {
		inv.errf("zlogin: 'zlogin' not applicable to the global zone")
		return 1
	}
	// A zone's own file, read without a lock: a probe costs the same
	// however many zones the host has.
	z, err := inv.h.viewZone(zone)
	if err != nil {
		return inv.stateErr(err)
	}
	switch {
	case z == nil:
		inv.errf("zlogin: zone '%s' unknown", zone)
		return 1
	case stateRank(z.State) < stateRank(stateInstalled):
		inv.errf("zlogin: cannot login to a zone which is '%s'", z.State)
		return 1
	case console:
		inv.errf("zlogin: console login is not supported by illumos-sim")
		return 1
	case z.State != stateRunning:
		inv.errf("zlogin: login allowed only to running zones (%s is '%s').", zone, z.State)
		return 1
	}
	if err := ensureZoneBin(inv.h, zone); err != nil {
		inv.errf("zlogin: %v", err)
		return 1
	}
	u, err := inv.h.zoneLogin(z, user, "")
	if err != nil {
		inv.errf("zlogin: %v", err)
		return 1
	}
	argv, asZone := []string{"/bin/sh"}, true
	if len(rest) > 1 {
		var b strings.Builder
		for _, w := range rest[1:] {
			b.WriteString(w)
			b.WriteByte(' ')
		}
		if words, ok := zoneCommandLine(b.String(), inv.h.zoneBinDir(zone)); ok {
			// The simulator's own command acting on the zone (ipadm,
			// svccfg...): it needs the simulator's access to the state,
			// and runs without a shell, so nothing else can come along.
			// A file it names is still the zone's (readZoneFile).
			argv, asZone = words, false
		} else {
			argv = append(argv, "-c", rewriteIllumosPaths(b.String(), inv.h.zoneBinDir(zone)))
		}
	}
	if f, ok := inv.stdin.(*os.File); interactive && !noStdin && ok && term.IsTerminal(int(f.Fd())) {
		return inv.runOnTerminal(z, u, argv, f, asZone)
	}
	return inv.runInZone(z, u, argv, noStdin, asZone)
}

// zoneCmd is argv as a process of the zone: in its root, with the
// environment zlogin gives (the zone's PATH, TERM, the login variables of
// the zone's user).
func (inv *invocation) zoneCmd(z *Zone, u zoneUser, argv []string) *exec.Cmd {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = inv.h.zoneRoot(z)
	cmd.Env = append(inv.h.zoneEnv(z.Name), u.loginEnv()...)
	cmd.Env = append(cmd.Env, "SHELL=/bin/sh", "MAIL=/var/mail/"+u.name)
	if term, ok := inv.env["TERM"]; ok {
		cmd.Env = append(cmd.Env, "TERM="+term)
	}
	return cmd
}

// runOnTerminal runs argv on a new pseudo-terminal, in a session of its
// own whose controlling terminal it is, relaying it to zlogin's terminal
// (stdin, in raw mode meanwhile) and its size changes.
func (inv *invocation) runOnTerminal(z *Zone, u zoneUser, argv []string, tty *os.File, asZone bool) int {
	// Listen for size changes before reading the size: a change between
	// the two would otherwise be lost (SIGWINCH is ignored until then).
	winch := make(chan os.Signal, 1)
	signal.Notify(winch, syscall.SIGWINCH)
	defer signal.Stop(winch)
	ptmx, pts, err := pty.Open()
	if err != nil {
		inv.errf("zlogin: could not allocate a terminal: %v", err)
		return 1
	}
	defer ptmx.Close()
	if size, err := pty.GetsizeFull(tty); err == nil {
		_ = pty.Setsize(ptmx, size)
	}
	runtime.LockOSThread() // Pdeathsig follows the forking thread
	defer runtime.UnlockOSThread()
	proc, err := inv.startInZone(z, u, argv, [3]*os.File{pts, pts, pts}, onTerminal, asZone)
	pts.Close()
	if err != nil {
		inv.errf("zlogin: %v", err)
		return 1
	}
	if old, err := term.MakeRaw(int(tty.Fd())); err == nil {
		defer term.Restore(int(tty.Fd()), old)
	}
	done := make(chan struct{})
	defer close(done)
	go func() {
		for {
			select {
			case <-winch:
				_ = pty.InheritSize(tty, ptmx)
			case <-done:
				return
			}
		}
	}()
	go func() { _, _ = io.Copy(ptmx, tty) }()
	copied := make(chan struct{})
	go func() {
		_, _ = io.Copy(inv.stdout, ptmx) // EIO once the terminal has no user left
		close(copied)
	}()
	ws, err := proc.wait()
	select {
	case <-copied:
	case <-time.After(time.Second):
	}
	return commandStatus(inv, ws, err)
}

// commandStatus is zlogin's exit status for the command's end: its own
// status, 128+n when a signal killed it.
func commandStatus(inv *invocation, ws syscall.WaitStatus, err error) int {
	switch {
	case err != nil:
		inv.errf("zlogin: %v", err)
		return 1
	case ws.Signaled():
		return 128 + int(ws.Signal())
	}
	return ws.ExitStatus()
}

// runInZone runs argv with the zone's root as cwd, relaying stdio,
// signals and the exit status. The environment is reset as zlogin does:
// the zone's PATH, TERM, and the login variables of the zone's user, whom
// a command runs as (asZone) when the simulator runs as root.
func (inv *invocation) runInZone(z *Zone, u zoneUser, argv []string, noStdin, asZone bool) int {
	stdio, finish, err := inv.stdioFiles(noStdin)
	if err != nil {
		inv.errf("zlogin: %v", err)
		return 1
	}
	interactive := term.IsTerminal(int(stdio[0].Fd()))
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT)
	defer signal.Stop(sigs)
	// Pdeathsig is tied to the forking thread: keep this goroutine on it
	// for as long as the child runs.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	how := inGroup
	if interactive {
		how = inForeground
	}
	proc, err := inv.startInZone(z, u, argv, stdio, how, asZone)
	finish()
	if err != nil {
		inv.errf("zlogin: %v", err)
		return 1
	}
	done := make(chan struct{})
	go func() {
		for {
			select {
			case s := <-sigs:
				proc.signal(s.(syscall.Signal))
			case <-done:
				return
			}
		}
	}()
	ws, err := proc.wait()
	close(done)
	return commandStatus(inv, ws, err)
}

// zoneProcess is a command started in a zone.
type zoneProcess interface {
	signal(syscall.Signal)
	wait() (syscall.WaitStatus, error)
}

// How a command stands to zlogin's job control: in a process group of its
// own, in zlogin's (it reads zlogin's terminal), or in a session whose
// controlling terminal is its stdin.
type startMode int

const (
	inGroup startMode = iota
	inForeground
	onTerminal
)

// startInZone starts argv as a process of zone z with stdio as its stdin,
// stdout and stderr, as how says. A command of
// an isolated zone (asZone) is born of the zone's init, in every namespace
// of the zone, as its user; the simulator's own in-zone commands join its
// network and UTS namespaces only (enterZone).
func (inv *invocation) startInZone(z *Zone, u zoneUser, argv []string, stdio [3]*os.File, how startMode, asZone bool) (zoneProcess, error) {
	cmd := inv.zoneCmd(z, u, argv)
	group, terminal := how == inGroup, how == onTerminal
	if asZone && inv.h.zoneNetnsOf(z) != "" {
		if cmd.Err != nil {
			return nil, fmt.Errorf("could not execute in zone %s: %w", z.Name, cmd.Err)
		}
		s, err := inv.h.spawnThroughInit(z.Name, spawnRequest{Path: cmd.Path, Argv: cmd.Args, Env: cmd.Env, Dir: cmd.Dir,
			Cred: u.credential(), Group: group, Terminal: terminal}, stdio)
		if err != nil {
			return nil, fmt.Errorf("could not enter zone %s: %w", z.Name, err)
		}
		return s, nil
	}
	cred, err := inv.enterZone(z, u, cmd, asZone)
	if err != nil {
		return nil, fmt.Errorf("could not enter zone %s: %w", z.Name, err)
	}
	if asZone {
		if err := limitProcesses(z, u); err != nil {
			return nil, fmt.Errorf("could not enter zone %s: %w", z.Name, err)
		}
	}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdio[0], stdio[1], stdio[2]
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Credential: cred,
		Setpgid: group && !terminal, Setsid: terminal, Setctty: terminal}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("could not execute in zone %s: %w", z.Name, err)
	}
	return &childProcess{cmd: cmd, group: group || terminal}, nil
}

// childProcess is a command zlogin started itself.
type childProcess struct {
	cmd   *exec.Cmd
	group bool
}

func (p *childProcess) signal(sig syscall.Signal) {
	target := p.cmd.Process.Pid
	if p.group {
		target = -target
	}
	syscall.Kill(target, sig)
}

func (p *childProcess) wait() (syscall.WaitStatus, error) {
	err := p.cmd.Wait()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		return 0, err
	}
	return p.cmd.ProcessState.Sys().(syscall.WaitStatus), nil
}

// stdioFiles are zlogin's stdin, stdout and stderr, handed to the command
// as they are (/dev/null for stdin with -n); finish closes what zlogin
// opened for it once the command has it. zlogin runs as a process of its
// own (Main), whose stdio are files.
func (inv *invocation) stdioFiles(noStdin bool) ([3]*os.File, func(), error) {
	var files [3]*os.File
	finish := func() {}
	for i, stream := range []any{inv.stdin, inv.stdout, inv.stderr} {
		f, ok := stream.(*os.File)
		if !ok {
			return files, finish, fmt.Errorf("zlogin needs files for stdin, stdout and stderr, not %T", stream)
		}
		files[i] = f
	}
	if noStdin {
		devnull, err := os.Open(os.DevNull)
		if err != nil {
			return files, finish, err
		}
		files[0], finish = devnull, func() { devnull.Close() }
	}
	return files, finish, nil
}

// illumosPathRE finds absolute illumos paths of the inside-zone commands
// (/usr/sbin/ipadm, /usr/bin/svcs, ...) as whole words of a command line.
var illumosPathRE = regexp.MustCompile("(^|[\\s;&|(`])(?:/usr/sbin/|/usr/bin/|/sbin/|/bin/)(" +
	strings.Join(zoneCommands, "|") + ")([\\s;&|)`]|$)")

// rewriteIllumosPaths points absolute illumos command paths at the zone's
// command directory: callers write "zlogin Z /usr/sbin/ipadm ...", and
// those paths do not exist on Linux.
func rewriteIllumosPaths(line, binDir string) string {
	for {
		next := illumosPathRE.ReplaceAllString(line, "${1}"+binDir+"/${2}${3}")
		if next == line {
			return line
		}
		line = next
	}
}

// zoneCommandLine recognises a zlogin command line that is one of the
// zone's commands with plain arguments (unquoted safe words and
// single-quoted strings, as callers quote them) and returns it as argv,
// the command resolved in the zone's command directory. Anything a shell
// would interpret further (variables, globs, redirections, several
// commands) is not one.
func zoneCommandLine(line, binDir string) ([]string, bool) {
	var words []string
	var w strings.Builder
	inWord := false
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case c == ' ' || c == '\t':
			if inWord {
				words = append(words, w.String())
				w.Reset()
				inWord = false
			}
		case c == '\'':
			end := strings.IndexByte(line[i+1:], '\'')
			if end < 0 {
				return nil, false
			}
			w.WriteString(line[i+1 : i+1+end])
			i += end + 1
			inWord = true
		case c == '\\' && i+1 < len(line) && line[i+1] == '\'':
			w.WriteByte('\'')
			i++
			inWord = true
		case plainShellByte(c):
			w.WriteByte(c)
			inWord = true
		default:
			return nil, false
		}
	}
	if inWord {
		words = append(words, w.String())
	}
	if len(words) == 0 {
		return nil, false
	}
	name := words[0]
	for _, dir := range []string{"/usr/sbin/", "/usr/bin/", "/sbin/", "/bin/"} {
		name = strings.TrimPrefix(name, dir)
	}
	if !slices.Contains(zoneCommands, name) {
		return nil, false
	}
	words[0] = filepath.Join(binDir, name)
	return words, true
}

// plainShellByte is a byte the shell takes literally outside quotes.
func plainShellByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
		strings.IndexByte("_@%+=:,./-", c) >= 0
}

// enterZone makes the simulator's own in-zone command cmd start in the
// zone's network and UTS namespaces in isolation mode (through nsenter)
// and returns the credential the process must start with: the zone
// user's for a command of the zone outside isolation mode.
func (inv *invocation) enterZone(z *Zone, u zoneUser, cmd *exec.Cmd, asZone bool) (*syscall.Credential, error) {
	if inv.h.zoneNetnsOf(z) == "" {
		if !asZone {
			return nil, nil
		}
		return u.credential(), nil
	}
	argv, err := nsenterArgv(z, cmd.Args)
	if err != nil {
		return nil, err
	}
	cmd.Path, cmd.Args, cmd.Err = argv[0], argv, nil
	return nil, nil
}
