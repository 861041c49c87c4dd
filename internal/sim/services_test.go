package sim_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/zonewright/zonewright/internal/sim"
)

// bootWithService boots a zone and imports one service into it.
func bootWithService(t *testing.T, h *simHost, zone, name, start, stop string) {
	t.Helper()
	h.zoneSetup(zone, "running")
	expect(t, h.runIn(manifest(name, start, stop, true), "zlogin", zone, "svccfg", "import", "/dev/stdin"), 0, "", "")
	fmri := "svc:/site/" + name + ":default"
	waitFor(t, 10*time.Second, fmri+" online", func() bool {
		st, pid, _ := h.service(zone, fmri)
		return st == "online" && pid > 0
	})
}

func TestCrashedServiceRestartsThenGoesToMaintenance(t *testing.T) {
	h := newHost(t)
	fmri := "svc:/site/web:default"
	bootWithService(t, h, "web01", "web", "exec sleep 1000", "")
	expect(t, h.run("zlogin", "web01", "svcs", "-H", "-o", "state,fmri", "web"), 0, "online         "+fmri+"\n", "")

	_, first, _ := h.service("web01", fmri)
	syscall.Kill(first, syscall.SIGKILL)
	var second int
	waitFor(t, 10*time.Second, "restart after a crash", func() bool {
		st, pid, _ := h.service("web01", fmri)
		second = pid
		return st == "online" && pid > 0 && pid != first
	})
	if alive(first) {
		t.Errorf("crashed pid %d still alive", first)
	}
	if _, _, restarts := h.service("web01", fmri); restarts != 1 {
		t.Errorf("restarts = %d, want 1", restarts)
	}
	// Two more quick failures: three exits within the window means
	// maintenance, and no further restart.
	syscall.Kill(second, syscall.SIGKILL)
	var third int
	waitFor(t, 10*time.Second, "second restart", func() bool {
		st, pid, _ := h.service("web01", fmri)
		third = pid
		return st == "online" && pid > 0 && pid != second
	})
	syscall.Kill(third, syscall.SIGKILL)
	waitFor(t, 10*time.Second, "maintenance", func() bool {
		st, _, _ := h.service("web01", fmri)
		return st == "maintenance"
	})
	time.Sleep(300 * time.Millisecond)
	if st, pid, _ := h.service("web01", fmri); st != "maintenance" || pid != 0 {
		t.Errorf("after maintenance: state %s pid %d", st, pid)
	}
	out := h.must("zlogin", "web01", "svcs", "-x")
	if !strings.Contains(out, "Reason: Restarting too quickly.") {
		t.Errorf("svcs -x:\n%s", out)
	}
	// enable does not leave maintenance; clear does.
	h.must("zlogin", "web01", "svcadm", "enable", "web")
	time.Sleep(200 * time.Millisecond)
	if st, _, _ := h.service("web01", fmri); st != "maintenance" {
		t.Errorf("enable left maintenance: %s", st)
	}
	h.must("zlogin", "web01", "svcadm", "clear", "web")
	waitFor(t, 10*time.Second, "online after clear", func() bool {
		st, pid, _ := h.service("web01", fmri)
		return st == "online" && pid > 0
	})
}

func TestFailingStartMethodGoesToMaintenance(t *testing.T) {
	h := newHost(t)
	h.zoneSetup("web01", "running")
	h.runIn(manifest("bad", "exit 3", "", true), "zlogin", "web01", "svccfg", "import", "-")
	waitFor(t, 10*time.Second, "maintenance", func() bool {
		st, _, _ := h.service("web01", "svc:/site/bad:default")
		return st == "maintenance"
	})
	// svcadm -s reports a service that cannot come online.
	h.must("zlogin", "web01", "svcadm", "clear", "bad")
	r := h.run("zlogin", "web01", "svcadm", "enable", "-s", "bad")
	if r.code != 3 || !strings.Contains(r.stderr, "maintenance") {
		t.Errorf("svcadm enable -s of a failing service: %v", r)
	}
}

func TestStartMethodConfigErrorGoesToMaintenanceWithoutRetry(t *testing.T) {
	h := newHost(t)
	h.zoneSetup("web01", "running")
	root := filepath.Join(h.root, "fs", "zones", "web01", "root")
	// Fails with $SMF_EXIT_ERR_CONFIG until tmp/ok exists.
	start := `echo start >> tmp/starts; [ -f tmp/ok ] && exec sleep 1000; exit 96`
	h.runIn(manifest("cfg", start, "", true), "zlogin", "web01", "svccfg", "import", "/dev/stdin")
	// The other codes svc.startd does not retry, in the child model too.
	child := strings.Replace(manifest("child", "exit 99", "", true), "  </service>",
		"    <property_group name='startd' type='framework'><propval name='duration' type='astring' value='child'/></property_group>\n  </service>", 1)
	h.runIn(child, "zlogin", "web01", "svccfg", "import", "/dev/stdin")
	h.runIn(manifest("fatal", "exit 95", "", true), "zlogin", "web01", "svccfg", "import", "/dev/stdin")

	fmri := "svc:/site/cfg:default"
	for _, f := range []string{fmri, "svc:/site/child:default", "svc:/site/fatal:default"} {
		waitFor(t, 10*time.Second, f+" maintenance", func() bool {
			st, _, _ := h.service("web01", f)
			return st == "maintenance"
		})
	}
	time.Sleep(500 * time.Millisecond) // well past the restart delay
	if st, pid, restarts := h.service("web01", fmri); st != "maintenance" || pid != 0 || restarts != 0 {
		t.Errorf("after exit 96: state %s pid %d restarts %d", st, pid, restarts)
	}
	if b, _ := os.ReadFile(filepath.Join(root, "tmp", "starts")); string(b) != "start\n" {
		t.Errorf("start method ran %q, want once", b)
	}
	logPath := filepath.Join(root, "var", "svc", "log", "site-cfg:default.log")
	if b, _ := os.ReadFile(logPath); strings.Count(string(b), " Method \"start\" exited with status 96. ]\n") != 1 {
		t.Errorf("log:\n%s", b)
	}
	out := h.must("zlogin", "web01", "svcs", "-x")
	for _, want := range []string{
		"svc:/site/cfg:default (?)\n State: maintenance since ",
		"Reason: Start method exited with $SMF_EXIT_ERR_CONFIG.\n   See: http://illumos.org/msg/SMF-8000-KS\n   See: /var/svc/log/site-cfg:default.log\nImpact: This service is not running.\n",
		"Reason: Start method exited with status 99.\n",
		"Reason: Start method exited with $SMF_EXIT_ERR_FATAL.\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("svcs -x lacks %q:\n%s", want, out)
		}
	}
	out = h.must("svcs", "-z", "web01", "-x", "cfg")
	if !strings.Contains(out, "\n  Zone: web01\n") || !strings.Contains(out, "   See: /zones/web01/root/var/svc/log/site-cfg:default.log\n") {
		t.Errorf("svcs -z web01 -x cfg:\n%s", out)
	}

	// Once the configuration is fixed, clear starts it again.
	os.WriteFile(filepath.Join(root, "tmp", "ok"), nil, 0o644)
	h.must("zlogin", "web01", "svcadm", "clear", "cfg")
	waitFor(t, 10*time.Second, "online after clear", func() bool {
		st, pid, _ := h.service("web01", fmri)
		return st == "online" && pid > 0
	})
	if b, _ := os.ReadFile(logPath); !strings.Contains(string(b), " Leaving maintenance because clear requested. ]\n") {
		t.Errorf("log:\n%s", b)
	}
}

func TestSvcadmEnableDisableRestart(t *testing.T) {
	h := newHost(t)
	fmri := "svc:/site/web:default"
	bootWithService(t, h, "web01", "web", "exec sleep 1000", "")
	_, pid1, _ := h.service("web01", fmri)
	h.must("zlogin", "web01", "svcadm", "restart", "site/web")
	waitFor(t, 10*time.Second, "restart", func() bool {
		st, pid, _ := h.service("web01", fmri)
		return st == "online" && pid > 0 && pid != pid1
	})
	if alive(pid1) {
		t.Errorf("old pid %d survived restart", pid1)
	}
	expect(t, h.run("zlogin", "web01", "svcadm", "disable", "-s", fmri), 0, "", "")
	expect(t, h.run("zlogin", "web01", "svcs", "-H", "-o", "state", "web"), 0, "disabled\n", "")
	// Disabled instances are hidden without -a or an operand.
	if out := h.must("zlogin", "web01", "svcs", "-H", "-o", "fmri"); strings.Contains(out, fmri) {
		t.Errorf("svcs lists a disabled instance:\n%s", out)
	}
	expect(t, h.run("zlogin", "web01", "svcadm", "enable", "-s", "web"), 0, "", "")
	expect(t, h.run("zlogin", "web01", "svcs", "-H", "-o", "state", "web"), 0, "online\n", "")
	expect(t, h.run("zlogin", "web01", "svcadm", "enable", "nosuch"), 1, "", "svcadm: Pattern 'nosuch' doesn't match any instances\n")
	// svcs still prints its header, as the real one does.
	expect(t, h.run("zlogin", "web01", "svcs", "nosuch"), 1, "STATE          STIME    FMRI\n", "svcs: Pattern 'nosuch' doesn't match any instances\n")
	// The milestones a provisioner waits for are online.
	expect(t, h.run("zlogin", "web01", "svcs", "-H", "-o", "state", "milestone/multi-user-server"), 0, "online\n", "")
}

func TestShutdownIsGracefulHaltIsNot(t *testing.T) {
	h := newHost(t)
	fmri := "svc:/site/trap:default"
	start := `trap "echo graceful > tmp/termed; exit 0" TERM; setsid sleep 1000 & echo $! > tmp/escaped; while :; do sleep 0.05; done`
	bootWithService(t, h, "web01", "trap", start, "")
	termed := filepath.Join(h.root, "fs", "zones", "web01", "root", "tmp", "termed")
	escapedPID := func() int {
		var pid int
		waitFor(t, 5*time.Second, "escaped pid", func() bool {
			b, _ := os.ReadFile(filepath.Join(h.root, "fs", "zones", "web01", "root", "tmp", "escaped"))
			pid, _ = strconv.Atoi(strings.TrimSpace(string(b)))
			return pid > 0
		})
		return pid
	}

	// shutdown: the TERM handler runs, and nothing survives.
	_, pid, _ := h.service("web01", fmri)
	escaped := escapedPID()
	expect(t, h.run("zoneadm", "-z", "web01", "shutdown"), 0, "", "")
	if b, err := os.ReadFile(termed); err != nil || string(b) != "graceful\n" {
		t.Errorf("TERM handler did not run on shutdown: %q %v", b, err)
	}
	for _, p := range []int{pid, escaped} {
		if alive(p) {
			t.Errorf("pid %d survived shutdown", p)
		}
	}
	if got := h.zoneState("web01"); got != "installed" {
		t.Errorf("after shutdown: %s", got)
	}

	// halt: processes die at once, no handler runs, nothing survives.
	os.Remove(termed)
	os.Remove(filepath.Join(h.root, "fs", "zones", "web01", "root", "tmp", "escaped"))
	h.must("zoneadm", "-z", "web01", "boot")
	waitFor(t, 10*time.Second, "online after boot", func() bool {
		st, p, _ := h.service("web01", fmri)
		return st == "online" && p > 0
	})
	_, pid, _ = h.service("web01", fmri)
	escaped = escapedPID()
	var supervisor int
	for _, z := range h.state().Zones {
		if z.Name == "web01" {
			supervisor = z.SupervisorPID
		}
	}
	expect(t, h.run("zoneadm", "-z", "web01", "halt"), 0, "", "")
	for _, p := range []int{pid, escaped, supervisor} {
		if alive(p) {
			t.Errorf("pid %d survived halt", p)
		}
	}
	if _, err := os.Stat(termed); err == nil {
		t.Errorf("halt ran the TERM handler")
	}
	if st, p, _ := h.service("web01", fmri); p != 0 || st != "offline" {
		t.Errorf("service after halt: %s pid %d", st, p)
	}
}

func TestServiceRunsLinuxProgramInZoneRoot(t *testing.T) {
	if _, err := os.Stat("/usr/bin/python3"); err != nil {
		t.Skip("python3 not installed")
	}
	h := newHost(t)
	h.zoneSetup("web01", "running")
	root := filepath.Join(h.root, "fs", "zones", "web01", "root")
	os.WriteFile(filepath.Join(root, "hello.txt"), []byte("from the zone\n"), 0o644)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	start := fmt.Sprintf("exec /usr/bin/python3 -m http.server --bind 127.0.0.1 %d", port)
	h.runIn(manifest("http", start, ":kill", true), "zlogin", "web01", "svccfg", "import", "/dev/stdin")
	var body []byte
	waitFor(t, 20*time.Second, "http server", func() bool {
		resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/hello.txt", port))
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		body, _ = io.ReadAll(resp.Body)
		return resp.StatusCode == 200
	})
	if string(body) != "from the zone\n" {
		t.Errorf("served %q", body)
	}
	h.must("zoneadm", "-z", "web01", "halt")
	if _, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/hello.txt", port)); err == nil {
		t.Errorf("server still answers after halt")
	}
}

func TestZlogin(t *testing.T) {
	h := newHost(t)
	h.zoneSetup("web01", "running")
	expect(t, h.run("zlogin", "web01", "exit 7"), 7, "", "")
	expect(t, h.run("zlogin", "web01", "exit", "3"), 3, "", "")
	expect(t, h.runIn("hello\nworld\n", "zlogin", "web01", "cat"), 0, "hello\nworld\n", "")
	// argv is joined with spaces and re-parsed by the shell.
	expect(t, h.run("zlogin", "web01", "echo", "a;", "echo", "b"), 0, "a\nb\n", "")
	expect(t, h.run("zlogin", "web01", "echo a >&2"), 0, "", "a\n")
	expect(t, h.run("zlogin", "web01", "pwd"), 0, filepath.Join(h.root, "fs", "zones", "web01", "root")+"\n", "")
	// A zone's command alone is run by the simulator, by its illumos path
	// too, with its arguments as the shell would split them.
	expect(t, h.run("zlogin", "web01", "zonename"), 0, "web01\n", "")
	expect(t, h.run("zlogin", "web01", "/usr/sbin/ipadm", "show-addr", "-p", "-o", "'addrobj'", "lo0/v4"), 0, "lo0/v4\n", "")
	if os.Geteuid() != 0 {
		// The zone's user may run them from its own shell, which a root
		// simulator's zone user cannot: the state is not theirs to read.
		expect(t, h.run("zlogin", "web01", "zonename; hostname"), 0, "web01\nweb01\n", "")
		expect(t, h.run("zlogin", "web01", "/usr/bin/zonename;/usr/bin/zonename", "&&", "/usr/sbin/ipadm", "show-addr", "-p", "-o", "addrobj", "lo0/v4"), 0,
			"web01\nweb01\nlo0/v4\n", "")
		// Commands piped to a zlogin without a command run in the zone shell.
		expect(t, h.runIn("zonename\n", "zlogin", "web01"), 0, "web01\n", "")
	}
	expect(t, h.runIn("echo $0\n", "zlogin", "web01"), 0, "/bin/sh\n", "")
	expect(t, h.run("zlogin", "web01", "kill -9 $$"), 137, "", "")

	h.zoneSetup("web02", "installed")
	expect(t, h.run("zlogin", "web02", "true"), 1, "", "zlogin: login allowed only to running zones (web02 is 'installed').\n")
	h.must("zoneadm", "-z", "web02", "ready")
	expect(t, h.run("zlogin", "web02", "true"), 1, "", "zlogin: login allowed only to running zones (web02 is 'ready').\n")
	h.zoneSetup("web03", "configured")
	expect(t, h.run("zlogin", "web03", "true"), 1, "", "zlogin: cannot login to a zone which is 'configured'\n")
	expect(t, h.run("zlogin", "nope", "true"), 1, "", "zlogin: zone 'nope' unknown\n")
	expect(t, h.run("zlogin", "global", "true"), 1, "", "zlogin: 'zlogin' not applicable to the global zone\n")
	if r := h.run("zlogin"); r.code != 2 {
		t.Errorf("zlogin without a zone: %v", r)
	}
}

// stop-all halts every zone, more of them than it halts at once (here 3,
// --at-once) included, and leaves no process of theirs; a bound that is
// not a number of zones is refused before anything is halted.
func TestStopAllKillsEverything(t *testing.T) {
	h := newHost(t)
	const zones = 20
	for i := range zones {
		bootWithService(t, h, fmt.Sprintf("a%02d", i), "s", "exec sleep 1000", "")
	}
	var pids []int
	for _, z := range h.state().Zones {
		if z.SupervisorPID > 0 {
			pids = append(pids, z.SupervisorPID)
		}
		for _, s := range z.Services {
			pids = append(pids, s.PID)
		}
	}
	if len(pids) != 2*zones {
		t.Fatalf("pids %v", pids)
	}
	for _, bad := range []string{"0", "x"} {
		out, err := runBare(t, "stop-all", "--root", h.root, "--at-once", bad)
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 2 || !strings.Contains(out, "--at-once") {
			t.Errorf("stop-all --at-once %s: %v %q, want exit 2 naming --at-once", bad, err, out)
		}
	}
	for _, p := range pids {
		if !alive(p) {
			t.Fatalf("pid %d gone after a refused stop-all", p)
		}
	}
	out, err := runBare(t, "stop-all", "--root", h.root, "--at-once", "3")
	if err != nil {
		t.Fatalf("stop-all: %v %s", err, out)
	}
	for _, p := range pids {
		if alive(p) {
			t.Errorf("pid %d survived stop-all", p)
		}
	}
	for _, z := range h.state().Zones {
		if z.Name != "global" && z.State != "installed" {
			t.Errorf("%s is %s after stop-all", z.Name, z.State)
		}
	}
}

// A contract service whose start method leaves a daemon behind stays online
// as long as its process group lives; the daemon's exit restarts it, and a
// stop waits for the group to empty.
func TestDaemonServiceIsWatchedThroughItsProcessGroup(t *testing.T) {
	h := newHost(t)
	fmri := "svc:/site/daemon:default"
	h.zoneSetup("web01", "running")
	pidFile := filepath.Join(h.root, "fs", "zones", "web01", "root", "tmp", "daemon")
	daemonPID := func() int {
		b, _ := os.ReadFile(pidFile)
		pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
		return pid
	}
	h.runIn(manifest("daemon", "sleep 1000 & echo $! > tmp/daemon.new; mv tmp/daemon.new tmp/daemon", "", true),
		"zlogin", "web01", "svccfg", "import", "/dev/stdin")
	var first int
	waitFor(t, 10*time.Second, "the daemon", func() bool {
		first = daemonPID()
		return first > 0 && alive(first)
	})
	time.Sleep(300 * time.Millisecond) // the start method has exited
	if st, _, _ := h.service("web01", fmri); st != "online" {
		t.Fatalf("with its daemon running: %s", st)
	}
	syscall.Kill(first, syscall.SIGKILL)
	waitFor(t, 5*time.Second, "a new daemon", func() bool {
		pid := daemonPID()
		return pid != first && pid > 0 && alive(pid)
	})
	if _, _, restarts := h.service("web01", fmri); restarts != 1 {
		t.Errorf("restarts = %d, want 1", restarts)
	}
	second := daemonPID()
	expect(t, h.run("zlogin", "web01", "svcadm", "disable", "-s", "daemon"), 0, "", "")
	if alive(second) {
		t.Errorf("daemon %d survived disable", second)
	}
}

// A service that ignores SIGTERM is killed when its stop method's timeout
// passes, not before.
func TestStopTimeoutKillsTheService(t *testing.T) {
	h := newHost(t)
	fmri := "svc:/site/stubborn:default"
	m := strings.Replace(manifest("stubborn", `trap "" TERM; exec sleep 1000`, ":kill", true),
		"timeout_seconds='10'", "timeout_seconds='1'", 1)
	h.zoneSetup("web01", "running")
	h.runIn(m, "zlogin", "web01", "svccfg", "import", "/dev/stdin")
	waitFor(t, 10*time.Second, fmri+" online", func() bool {
		st, pid, _ := h.service("web01", fmri)
		return st == "online" && pid > 0
	})
	_, pid, _ := h.service("web01", fmri)
	start := time.Now()
	expect(t, h.run("zlogin", "web01", "svcadm", "disable", "-s", "stubborn"), 0, "", "")
	if took := time.Since(start); took < 900*time.Millisecond || took > 5*time.Second {
		t.Errorf("disable took %v, want about the 1 s stop timeout", took)
	}
	if alive(pid) {
		t.Errorf("pid %d survived its stop timeout", pid)
	}
}

// A zone's processes get an environment of their own, never the caller's,
// and, when the simulator runs as root, run as the zone's own uid and gid
// (the zone's root) without supplementary groups; otherwise they stay the
// caller's user.
func TestZoneProcessesGetTheirOwnEnvironmentAndUser(t *testing.T) {
	h := newHost(t)
	h.zoneSetup("e1", "installed")
	callerEnv := []string{"ZW_TEST_SECRET=leaked", "GOMAXPROCS=3", "TERM=vt100"}
	if r := h.runEnv("", callerEnv, "zoneadm", "-z", "e1", "boot"); r.code != 0 {
		t.Fatalf("boot: %v", r)
	}
	h.runIn(manifest("env", `{ id -u; id -G; env; } > tmp/m.tmp && mv tmp/m.tmp tmp/method; exec sleep 1000`, "", true),
		"zlogin", "e1", "svccfg", "import", "/dev/stdin")
	out := filepath.Join(h.root, "fs", "zones", "e1", "root", "tmp", "method")
	waitFor(t, 10*time.Second, "the method's report", func() bool { _, err := os.Stat(out); return err == nil })
	method, _ := os.ReadFile(out)
	login := h.runEnv("", callerEnv, "zlogin", "e1", "id -u; id -G; env")
	if login.code != 0 {
		t.Fatalf("zlogin: %v", login)
	}

	uid, gid, name := os.Getuid(), os.Getgid(), ""
	if cur, err := user.Current(); err == nil {
		name = cur.Username
	}
	if os.Geteuid() == 0 {
		for _, z := range h.state().Zones {
			if z.Name == "e1" {
				uid, gid = int(z.UID), int(z.UID)
			}
		}
		if uid < 2000000 {
			t.Fatalf("zone e1's uid is %d, want one of its own", uid)
		}
		name = "root"
	}
	binDir := filepath.Join(h.root, "run", "e1", "bin")
	for what, report := range map[string]string{"method": string(method), "zlogin": login.stdout} {
		lines := strings.Split(report, "\n")
		if len(lines) < 3 || lines[0] != strconv.Itoa(uid) {
			t.Errorf("%s: uid line %q, want %d", what, lines[0], uid)
			continue
		}
		if wantGroups := groupsOf(h, "e1", gid); os.Geteuid() == 0 && lines[1] != wantGroups {
			t.Errorf("%s: groups %q, want only %q", what, lines[1], wantGroups)
		}
		env := map[string]string{}
		for _, kv := range lines[2:] {
			if k, v, ok := strings.Cut(kv, "="); ok {
				env[k] = v
			}
		}
		for _, leaked := range []string{"ZW_TEST_SECRET", "GOMAXPROCS", "ILLUMOS_SIM_FAULTS"} {
			if v, ok := env[leaked]; ok {
				t.Errorf("%s: the caller's %s=%s reached the zone", what, leaked, v)
			}
		}
		want := map[string]string{"ILLUMOS_SIM_ROOT": h.root, "ILLUMOS_SIM_ZONE": "e1", "USER": name, "LOGNAME": name}
		if what == "method" {
			want["SMF_FMRI"], want["SMF_METHOD"], want["SMF_ZONENAME"] = "svc:/site/env:default", "start", "e1"
		} else {
			want["TERM"], want["SHELL"] = "vt100", "/bin/sh"
		}
		for k, v := range want {
			if env[k] != v {
				t.Errorf("%s: %s=%q, want %q", what, k, env[k], v)
			}
		}
		if !strings.HasPrefix(env["PATH"], binDir+":") {
			t.Errorf("%s: PATH=%q, want the zone's commands first", what, env["PATH"])
		}
	}

	// The zone's own commands alone on a zlogin line are the simulator's:
	// they act on the state, whatever the zone's user may do.
	expect(t, h.run("zlogin", "e1", "svcs", "-H", "-o", "fmri", "'svc:/site/env:default'"), 0, "svc:/site/env:default\n", "")
	if os.Geteuid() == 0 {
		// The simulator's state is not the zone user's to read or write.
		if r := h.run("zlogin", "e1", "cat "+filepath.Join(h.root, "zones", "e1.json")); r.code == 0 {
			t.Errorf("the zone's user read the zone's state: %v", r)
		}
		if r := h.run("zlogin", "e1", "echo x >> "+filepath.Join(h.root, "state.json")); r.code == 0 {
			t.Errorf("the zone's user wrote the host's state: %v", r)
		}
	}
}

// A request that arrives while svc.startd is stopping an instance is
// acted on once the stop ends: a disable during a restart's stop leaves
// the instance disabled, an enable during a disable's stop starts it
// again. The stop method waits for a gate file, so the second request
// always arrives mid-stop.
func TestRequestDuringAStopIsActedOnWhenTheStopEnds(t *testing.T) {
	h := newHost(t)
	fmri := "svc:/site/web:default"
	bootWithService(t, h, "web01", "web", "exec sleep 1000", "while [ ! -e tmp/gate ]; do sleep 0.02; done")
	zoneRoot := filepath.Join(h.root, "fs", "zones", "web01", "root")
	gate := filepath.Join(zoneRoot, "tmp", "gate")
	logPath := filepath.Join(zoneRoot, "var", "svc", "log", "site-web:default.log")
	stopMethods := func() int {
		b, _ := os.ReadFile(logPath)
		return strings.Count(string(b), "Executing stop method")
	}
	// midStop sends the first request, waits for its stop method to run,
	// sends the second, gives the supervisor time to read it, and lets
	// the stop finish.
	midStop := func(first, second string) {
		t.Helper()
		os.Remove(gate)
		stops := stopMethods()
		h.must("zlogin", "web01", "svcadm", first, "web")
		waitFor(t, 10*time.Second, first+"'s stop method", func() bool { return stopMethods() > stops })
		h.must("zlogin", "web01", "svcadm", second, "web")
		time.Sleep(500 * time.Millisecond)
		if err := os.WriteFile(gate, nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}

	_, pid1, _ := h.service("web01", fmri)
	midStop("restart", "disable")
	waitFor(t, 10*time.Second, "disabled after a disable during a restart", func() bool {
		st, pid, _ := h.service("web01", fmri)
		return st == "disabled" && pid == 0
	})
	if alive(pid1) {
		t.Errorf("pid %d survived the stop", pid1)
	}

	h.must("zlogin", "web01", "svcadm", "enable", "web")
	var pid2 int
	waitFor(t, 10*time.Second, "online after enable", func() bool {
		st, pid, _ := h.service("web01", fmri)
		pid2 = pid
		return st == "online" && pid > 0
	})
	midStop("disable", "enable")
	waitFor(t, 10*time.Second, "online after an enable during a disable", func() bool {
		st, pid, _ := h.service("web01", fmri)
		return st == "online" && pid > 0 && pid != pid2
	})
	if alive(pid2) {
		t.Errorf("pid %d survived the stop", pid2)
	}

	// The zone still shuts down.
	expect(t, h.run("zoneadm", "-z", "web01", "shutdown"), 0, "", "")
	if got := h.zoneState("web01"); got != "installed" {
		t.Errorf("after shutdown: %s", got)
	}
}

// groupsOf is what `id -G` prints for the root of a zone whose gid is
// gid: that, and the zone's access group when it owns a block of ids.
func groupsOf(h *simHost, zone string, gid int) string {
	for _, z := range h.state().Zones {
		if z.Name == zone && z.UIDs > 1 {
			return fmt.Sprintf("%d %d", gid, z.UID+z.UIDs-1)
		}
	}
	return strconv.Itoa(gid)
}

// writeCounter counts the writes a command makes to its stdout.
type writeCounter struct {
	bytes.Buffer
	writes int
}

func (w *writeCounter) Write(p []byte) (int, error) {
	w.writes++
	return w.Buffer.Write(p)
}

// A listing reaches its reader in one write, as stdio buffers a real
// command's stdout into a pipe: svcs -Z over a node's zones, which the
// agent runs every 2 s, is not a write (and a wake-up of the agent) a line.
func TestAListingIsWrittenAtOnce(t *testing.T) {
	h := newHost(t)
	for _, zone := range []string{"z1", "z2"} {
		h.zoneSetup(zone, "running")
	}
	var out writeCounter
	var errb bytes.Buffer
	argv := []string{filepath.Join(h.bin, "svcs"), "-Z", "-H", "-o", "zone,state,fmri"}
	code := sim.Run(argv, strings.NewReader(""), &out, &errb, cleanEnv())
	if lines := strings.Count(out.String(), "\n"); code != 0 || lines < 8 || out.writes != 1 {
		t.Fatalf("svcs -Z: exit %d, %d lines in %d writes (want 1)\n%s%s", code, lines, out.writes, out.String(), errb.String())
	}
}
