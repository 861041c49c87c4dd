// Package sim is illumos-sim: a simulator of the illumos commands that
// zonewright drives (zonecfg, zoneadm, zlogin, dladm, zfs, zpool, ipadm,
// route, ipnat, the SMF commands and the host-facts commands), so the
// production code can run unchanged on Linux.
//
// The simulator is one multi-call binary. It acts as whichever command its
// argv[0] basename names, keeps each simulated host's state in a directory
// (the "root"), and follows shared/illumos-cli-spec.md for argv, output,
// stderr wording and exit codes. Booted zones are alive: a per-zone
// supervisor process runs the zone's SMF services as real Linux processes.
//
// Production code never imports this package; it is a test and demo tool.
package sim

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// Environment variables the simulator reads.
const (
	EnvRoot   = "ILLUMOS_SIM_ROOT"   // state root of the host
	EnvZone   = "ILLUMOS_SIM_ZONE"   // zone an inside-zone command runs in
	EnvFaults = "ILLUMOS_SIM_FAULTS" // one-off fault JSON
)

// rootMarker is the file, beside the command links, that names the root.
const rootMarker = ".illumos-sim-root"

// commandFunc runs one simulated command and returns its exit status.
type commandFunc func(inv *invocation) int

// commands maps each simulated command name to its implementation.
var commands = map[string]commandFunc{
	"zonecfg":  runZonecfg,
	"zoneadm":  runZoneadm,
	"zlogin":   runZlogin,
	"dladm":    runDladm,
	"zfs":      runZfs,
	"zpool":    runZpool,
	"ipadm":    runIpadm,
	"route":    runRoute,
	"netstat":  runNetstat,
	"ipnat":    runIpnat,
	"svccfg":   runSvccfg,
	"svcadm":   runSvcadm,
	"svcs":     runSvcs,
	"svcprop":  runSvcprop,
	"psrinfo":  runPsrinfo,
	"prtconf":  runPrtconf,
	"hostname": runHostname,
	"uname":    runUname,
	"zonename": runZonename,
}

// zoneCommands are the commands linked into a zone's bin directory: the
// ones that make sense inside a non-global zone.
var zoneCommands = []string{"svccfg", "svcadm", "svcs", "svcprop", "ipadm", "route", "ipnat", "hostname", "uname", "zonename"}

// CommandNames lists every command the simulator answers as, sorted.
func CommandNames() []string {
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// invocation is one run of one simulated command.
type invocation struct {
	name   string   // command name, e.g. "zoneadm"
	args   []string // arguments after the command name
	argv0  string   // argv[0] as given, used to find the root
	stdin  io.Reader
	stdout io.Writer
	stderr io.Writer
	env    map[string]string
	root   string
	zone   string // "global" or the zone an inside-zone command runs in
	h      *host
	faults *faultCall
}

// Main runs the simulator with the process's own argv and stdio and returns
// the exit status.
func Main(args []string) int {
	return Run(args, os.Stdin, os.Stdout, os.Stderr, os.Environ())
}

// Run is Main with explicit stdio and environment.
func Run(args []string, stdin io.Reader, stdout, stderr io.Writer, environ []string) int {
	if len(args) == 0 {
		fmt.Fprintln(stderr, "illumos-sim: empty argv")
		return 1
	}
	env := envMap(environ)
	base := filepath.Base(args[0])
	if _, ok := commands[base]; ok {
		return runCommand(base, args[0], args[1:], stdin, stdout, stderr, env)
	}
	if len(args) < 2 {
		adminUsage(stderr)
		return 2
	}
	sub := args[1]
	if _, ok := commands[sub]; ok {
		return runCommand(sub, args[0], args[2:], stdin, stdout, stderr, env)
	}
	return runAdmin(sub, args[0], args[2:], stdin, stdout, stderr, env)
}

// runCommand resolves the host, applies injected faults and runs the command.
func runCommand(name, argv0 string, args []string, stdin io.Reader, stdout, stderr io.Writer, env map[string]string) int {
	root, err := resolveRoot(argv0, env)
	if err != nil {
		fmt.Fprintf(stderr, "%s: illumos-sim: %v\n", name, err)
		return 1
	}
	h, err := openHost(root)
	if err != nil {
		fmt.Fprintf(stderr, "%s: illumos-sim: %v\n", name, err)
		return 1
	}
	if bufferedStdout[name] {
		w := bufio.NewWriterSize(stdout, 64<<10)
		defer w.Flush()
		stdout = w
	}
	inv := &invocation{
		name: name, args: args, argv0: argv0,
		stdin: stdin, stdout: stdout, stderr: stderr,
		env: env, root: root, h: h, zone: "global",
	}
	if z := env[EnvZone]; z != "" {
		inv.zone = z
	}
	if inv.zone != "global" && !isZoneCommand(name) {
		if name == "zonecfg" {
			inv.errf("zonecfg can only be run from the global zone.")
		} else {
			inv.errf("%s: the simulator runs this command only in the global zone", name)
		}
		return 1
	}
	plan, err := loadFaultPlan(h, env)
	if err != nil {
		fmt.Fprintf(stderr, "%s: illumos-sim: %v\n", name, err)
		return 1
	}
	inv.faults = plan.forCall(name, faultSubcommand(name, args), faultZone(name, args))
	if code, failed := inv.faults.before(inv); failed {
		return code
	}
	code := commands[name](inv)
	inv.realiseNet()
	return code
}

// bufferedStdout are the commands whose output is written at their exit,
// as stdio buffers a real command's stdout that is not a terminal: a
// listing of a node's zones is then one write, not one a line (and one
// wake-up of its reader a line). Not zlogin, zonecfg or zfs, which hand
// their stdout to a zone's process, prompt, or stream.
var bufferedStdout = map[string]bool{
	"svcs": true, "svcprop": true, "zoneadm": true, "zpool": true, "dladm": true,
	"ipadm": true, "ipnat": true, "netstat": true, "route": true,
}

func isZoneCommand(name string) bool {
	for _, c := range zoneCommands {
		if c == name {
			return true
		}
	}
	return false
}

// errf prints one line to stderr, as the command itself would.
func (inv *invocation) errf(format string, a ...any) {
	fmt.Fprintf(inv.stderr, format+"\n", a...)
}

// outf prints one line to stdout.
func (inv *invocation) outf(format string, a ...any) {
	fmt.Fprintf(inv.stdout, format+"\n", a...)
}

// stateErr reports a failure of the simulator's own storage.
func (inv *invocation) stateErr(err error) int {
	fmt.Fprintf(inv.stderr, "%s: illumos-sim: %v\n", inv.name, err)
	return 1
}

func envMap(environ []string) map[string]string {
	m := make(map[string]string, len(environ))
	for _, kv := range environ {
		if i := strings.IndexByte(kv, '='); i > 0 {
			m[kv[:i]] = kv[i+1:]
		}
	}
	return m
}
