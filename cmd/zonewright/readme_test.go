//go:build !illumos && !nodev

package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
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

	"github.com/zonewright/zonewright/internal/fabric"
	"github.com/zonewright/zonewright/internal/model"
)

// The README's quick start, run as a newcomer would run it: its ```sh
// blocks, in order, by bash, in a directory laid out as the repository is
// after `make dev` (.data is the dev stack's data dir, bin holds zwctl,
// examples are the repository's), so `source .data/env` and
// `zwctl apply -f examples/…` are the README's own lines. The one line
// that is not run is `make dev`: the test starts the stack it would start.
// Blocks that use kubectl run in one subtest (skipped where kubectl is not
// installed), those that use zwctl in another, the others in a third, so
// a missing zwctl fails its part clearly and the curl part still runs.
func TestReadmeQuickStartRuns(t *testing.T) {
	runReadmeQuickStart(t, t.TempDir(), nil)
}

// The same quick start as a user who is not root, where isolation mode
// runs in a user namespace of the stack's own (its nodes, zones and
// fabric; each zone one of the user's subordinate ids). As root it runs
// as ZONEWRIGHT_TEST_USER (default zonewright-test), a user with
// subordinate ids (.ci/run makes one); as anyone else the test above was
// this one.
func TestReadmeQuickStartRunsWithoutRoot(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("not root: TestReadmeQuickStartRuns ran as this user")
	}
	cred, name, work := testUser(t)
	d := runReadmeQuickStart(t, work, cred)
	if !strings.Contains(d.output.String(), "in a user namespace of this stack's") {
		t.Errorf("the stack of a user who is not root is not isolated in a user namespace of its own:\n%s", d.output)
	}
	// A zone is a subordinate id, not the stack's user: it cannot read the
	// admin token. Make zoneUser (internal/sim/runas.go) treat a user
	// namespace's root as not root to see it fail.
	runReadmeBlocks(t, work, cred, []readmeBlock{{heading: "a zone's identity", lines: []readmeLine{
		{text: "source .data/env"},
		{text: `export PATH="$PWD/bin:$PATH"`},
		{text: `sed 's/"web"/"nosy"/g' examples/web-pod.json | zwctl apply -f -`},
		{text: "zwctl wait --for=condition=Ready pod/nosy --timeout=60s"},
		{text: `zwctl exec nosy -- id -u | awk '$1 >= 10000 { print "a zone uid" }'`, prints: []string{"a zone uid"}},
		{text: "zwctl exec nosy -- cat " + filepath.Join(work, ".data/admin.token") + " 2>&1 || true", prints: []string{"Permission denied"}},
		{text: "zwctl delete pod nosy"},
	}}})
	// Stopped, it leaves no process of the user's or of its zones'.
	d.stop(t)
	if left := processesOf(t, uint64(cred.Uid), name); len(left) > 0 {
		t.Errorf("after the stack stopped, processes of %s or of its subordinate ids are left: %v", name, left)
	}
}

// runReadmeQuickStart starts the dev stack in work, as cred (nil: as this
// process), and runs the README's quick start there, as the same user.
func runReadmeQuickStart(t *testing.T, work string, cred *syscall.Credential) *devStack {
	steps := readmeQuickStart(t, "../../README.md")
	var withZwctl, withKubectl, withCurl []readmeBlock
	for _, b := range steps {
		switch {
		case b.usesKubectl():
			withKubectl = append(withKubectl, b)
		case b.usesZwctl():
			withZwctl = append(withZwctl, b)
		default:
			withCurl = append(withCurl, b)
		}
	}
	if len(withZwctl) == 0 || len(withKubectl) == 0 || len(withCurl) == 0 {
		t.Fatalf("the README's quick start has %d zwctl blocks, %d kubectl blocks and %d others; want each", len(withZwctl), len(withKubectl), len(withCurl))
	}

	if err := os.CopyFS(filepath.Join(work, "examples"), os.DirFS("../../examples")); err != nil {
		t.Fatal(err)
	}
	binDir := filepath.Join(work, "bin")
	if err := os.Mkdir(binDir, 0o755); err != nil {
		t.Fatal(err)
	}
	zwctlBuilt := buildZwctl(binDir)
	bin := buildBinary(t)
	d := startDevAs(t, cred, bin, filepath.Join(work, ".data"), freeAddr(t), freeAddr(t), freeAddr(t))
	t.Cleanup(func() { d.stop(t) })
	d.nodesReady(t, 3)
	// A newcomer on this machine gets isolation mode where it can be had.
	if cred == nil {
		if err := fabric.IsolationSupported(); err == nil && !strings.Contains(d.output.String(), "isolation mode: each node a network namespace") {
			t.Fatalf("make dev's stack is not in isolation mode on a machine that allows it:\n%s", d.output)
		} else if err != nil {
			t.Logf("isolation mode unavailable here (%v): the quick start runs on the shared loopback", err)
		}
	} else if !strings.Contains(d.output.String(), "isolation mode: each node a network namespace") {
		t.Fatalf("the stack of a user who is not root is not in isolation mode:\n%s", d.output)
	}

	t.Run("zwctl", func(t *testing.T) {
		if zwctlBuilt != nil {
			t.Fatalf("the README's walk-through runs zwctl, which does not build: %v", zwctlBuilt)
		}
		runReadmeBlocks(t, work, cred, withZwctl)
	})
	t.Run("kubectl", func(t *testing.T) {
		if _, err := exec.LookPath("kubectl"); err != nil {
			t.Skipf("kubectl is not installed here: %v", err)
		}
		runReadmeBlocks(t, work, cred, withKubectl)
	})
	t.Run("curl", func(t *testing.T) { runReadmeBlocks(t, work, cred, withCurl) })
	return d
}

// processesOf lists the processes running as uid or as one of name's
// subordinate uids (/etc/subuid), but for zombies (ended, not yet reaped
// by init: a zone's first process outlives its parent, the agent).
func processesOf(t *testing.T, uid uint64, name string) []string {
	t.Helper()
	type span struct{ lo, hi uint64 }
	spans := []span{{uid, uid + 1}}
	if b, err := os.ReadFile("/etc/subuid"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			f := strings.Split(line, ":")
			if len(f) == 3 && (f[0] == name || f[0] == strconv.FormatUint(uid, 10)) {
				lo, _ := strconv.ParseUint(f[1], 10, 32)
				n, _ := strconv.ParseUint(f[2], 10, 32)
				spans = append(spans, span{lo, lo + n})
			}
		}
	}
	var out []string
	procs, _ := filepath.Glob("/proc/[0-9]*/status")
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		if strings.Contains(string(b), "\nState:\tZ") {
			continue
		}
		for _, line := range strings.Split(string(b), "\n") {
			if f := strings.Fields(line); len(f) > 1 && f[0] == "Uid:" {
				u, _ := strconv.ParseUint(f[1], 10, 32)
				for _, s := range spans {
					if u >= s.lo && u < s.hi {
						cmdline, _ := os.ReadFile(filepath.Join(filepath.Dir(p), "cmdline"))
						out = append(out, fmt.Sprintf("%s (uid %d): %s", filepath.Base(filepath.Dir(p)), u, strings.ReplaceAll(string(cmdline), "\x00", " ")))
					}
				}
			}
		}
	}
	return out
}

// nodesReady waits for the stack's nodes to register and be Ready, as
// they are by the time a reader has opened a second terminal (the banner
// comes a moment before they have registered).
func (d *devStack) nodesReady(t *testing.T, want int) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		var list struct {
			Items []model.Node `json:"items"`
		}
		code, body := get(t, d.http, "https://"+d.api+"/api/v1/nodes")
		if code == http.StatusOK && json.Unmarshal([]byte(body), &list) == nil {
			ready := 0
			for i := range list.Items {
				n := &list.Items[i]
				if c := n.Condition(model.NodeReady); c != nil && c.Status == model.ConditionTrue {
					ready++
				}
			}
			if ready == want {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the dev stack's %d nodes were not Ready within a minute: %d %s", want, code, body)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// buildZwctl builds cmd/zwctl into dir; an error says why there is none.
func buildZwctl(dir string) error {
	if _, err := os.Stat("../zwctl"); err != nil {
		return fmt.Errorf("cmd/zwctl does not exist: %w", err)
	}
	if out, err := exec.Command("go", "build", "-o", dir, "../zwctl").CombinedOutput(); err != nil {
		return fmt.Errorf("go build ./cmd/zwctl: %v\n%s", err, out)
	}
	return nil
}

// readmeBlock is one ```sh block of a Markdown file: its commands, each
// with the output the file says it prints (its "# prints: …" lines).
type readmeBlock struct {
	file    string // as failures name it: README.md, docs/pods.md
	section string // the "## " heading it is under
	heading string // the nearest heading above it
	// notRun is why the file says the block is not run, from a line
	// `<!-- not run: why -->` just before it; "" for a block that runs.
	notRun string
	lines  []readmeLine
}

// readmeLine is one command: a line, or several when quotes, a trailing
// backslash or a here-document carry it on.
type readmeLine struct {
	number int // of its first line in the file
	text   string
	prints []string
}

func (b readmeBlock) usesZwctl() bool { return b.uses("zwctl") }

func (b readmeBlock) usesKubectl() bool { return b.uses("kubectl") }

func (b readmeBlock) uses(command string) bool {
	for _, l := range b.lines {
		for _, line := range strings.Split(l.text, "\n") {
			line = strings.TrimSpace(line)
			if strings.HasPrefix(line, command+" ") || strings.HasPrefix(line, "./bin/"+command+" ") ||
				strings.Contains(line, "$("+command+" ") || strings.Contains(line, " -- "+command+" ") ||
				strings.Contains(line, "=./bin/"+command) {
				return true
			}
		}
	}
	return false
}

// readmeQuickStart reads the ```sh blocks between "## Quick start" and
// the next "## " heading. `make dev` is left out: the test starts the
// stack itself.
func readmeQuickStart(t *testing.T, path string) []readmeBlock {
	t.Helper()
	var blocks []readmeBlock
	sawMakeDev := false
	for _, b := range shBlocks(t, path, "README.md") {
		if b.section != "Quick start" {
			continue
		}
		var lines []readmeLine
		for _, l := range b.lines {
			if l.text == "make dev" || strings.HasPrefix(l.text, "make dev ") {
				sawMakeDev = true
				continue
			}
			lines = append(lines, l)
		}
		if len(lines) > 0 {
			b.lines = lines
			blocks = append(blocks, b)
		}
	}
	if !sawMakeDev || len(blocks) == 0 {
		t.Fatalf("README.md has no quick start that starts with make dev and runs ```sh blocks (make dev %v, %d blocks)", sawMakeDev, len(blocks))
	}
	return blocks
}

// shBlocks reads every ```sh block of the Markdown file at path, those
// indented in a list too, naming it name in failures.
func shBlocks(t *testing.T, path, name string) []readmeBlock {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var (
		blocks           []readmeBlock
		inBlock          bool
		section, heading string
		indent, lastText string
		cur              readmeBlock
		n                int
	)
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		n++
		line := sc.Text()
		trimmed := strings.TrimSpace(line)
		switch {
		case !inBlock && trimmed == "```sh":
			inBlock, indent = true, line[:len(line)-len(strings.TrimLeft(line, " "))]
			cur = readmeBlock{file: name, section: section, heading: heading}
			if why, ok := strings.CutPrefix(lastText, "<!-- not run:"); ok {
				cur.notRun = strings.TrimSpace(strings.TrimSuffix(why, "-->"))
				if cur.notRun == "" {
					t.Fatalf("%s:%d: a block not run without a reason", name, n)
				}
			}
		case !inBlock && strings.HasPrefix(line, "#"):
			heading = strings.TrimSpace(strings.TrimLeft(line, "#"))
			if strings.HasPrefix(line, "## ") {
				section = heading
			}
		case !inBlock:
		case trimmed == "```":
			inBlock = false
			if len(cur.lines) > 0 {
				blocks = append(blocks, cur)
			}
		default:
			line = strings.TrimPrefix(line, indent)
			last := len(cur.lines) - 1
			switch {
			case last >= 0 && commandGoesOn(cur.lines[last].text):
				cur.lines[last].text += "\n" + line
			case last >= 0 && strings.HasPrefix(line, "#") && !strings.HasPrefix(line, "# prints: "):
				// A comment (an answer shown, say): what the command
				// above prints is still that command's.
				cur.lines[last].text += "\n" + line
			case strings.HasPrefix(line, "# prints: "):
				if last < 0 {
					t.Fatalf("%s:%d: an expected output before any command", name, n)
				}
				cur.lines[last].prints = append(cur.lines[last].prints, strings.TrimPrefix(line, "# prints: "))
			default:
				cur.lines = append(cur.lines, readmeLine{number: n, text: line})
			}
		}
		if trimmed != "" {
			lastText = trimmed
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if inBlock {
		t.Fatalf("%s: a ```sh block that does not end", name)
	}
	return blocks
}

// commandGoesOn says whether a command, as far as it has been read, goes
// on to the next line: it ends in an open quote, after a backslash or in
// a here-document.
func commandGoesOn(command string) bool {
	var single, double bool
	var hereDoc string
	lines := strings.Split(command, "\n")
	for _, line := range lines {
		if hereDoc != "" {
			if strings.TrimLeft(line, "\t") == hereDoc {
				hereDoc = ""
			}
			continue
		}
	scan:
		for i := 0; i < len(line); i++ {
			c := line[i]
			switch {
			case single:
				single = c != '\''
			case c == '\\':
				i++
			case double:
				double = c != '"'
			case c == '\'':
				single = true
			case c == '"':
				double = true
			case c == '#' && (i == 0 || line[i-1] == ' ' || line[i-1] == '\t'):
				break scan
			case strings.HasPrefix(line[i:], "<<") && !strings.HasPrefix(line[i:], "<<<"):
				rest := strings.TrimLeft(strings.TrimPrefix(line[i+2:], "-"), " ")
				word := rest
				if end := strings.IndexAny(word, " ;|&)"); end >= 0 {
					word = word[:end]
				}
				hereDoc = strings.Trim(word, `'"`)
				i = len(line) - len(rest) + len(word) - 1
			}
		}
	}
	last := lines[len(lines)-1]
	return single || double || hereDoc != "" || (strings.HasSuffix(last, "\\") && !strings.HasPrefix(strings.TrimSpace(last), "#"))
}

// runReadmeBlocks runs the blocks as one bash script in dir (so a
// variable one line sets is there for the next), stopping at the first
// command that fails or does not print what its file says it prints.
func runReadmeBlocks(t *testing.T, dir string, cred *syscall.Credential, blocks []readmeBlock) {
	t.Helper()
	runBlocksWithin(t, dir, cred, blocks, 2*time.Minute)
}

// runBlocksWithin is runReadmeBlocks with a longer or shorter bound on
// the whole script (a page's walkthrough may wait out a rollout).
func runBlocksWithin(t *testing.T, dir string, cred *syscall.Credential, blocks []readmeBlock, timeout time.Duration) {
	t.Helper()
	script := walkthroughScript(blocks)
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-c", script)
	cmd.Dir = dir
	cmd.Env = newcomerEnv()
	// A process group of its own: what the script started in the
	// background (a web server, a port-forward) ends with it, passed or
	// failed, and holds no port for a later run.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if cred != nil {
		// Another user: at home in the directory (kubectl keeps its cache
		// there).
		cmd.SysProcAttr.Credential = cred
		cmd.Env = append(cmd.Env, "HOME="+dir)
	}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	// A background command the script left must not keep the output open
	// for ever.
	cmd.WaitDelay = 5 * time.Second
	out, err := cmd.CombinedOutput()
	if cmd.Process != nil {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
	if err != nil {
		// What failed first, then everything: a log cut in the middle
		// still says what failed.
		t.Fatalf("the walkthrough failed (%v): %s\n%s", err, walkthroughFailure(out), out)
	}
	t.Logf("ran:\n%s", out)
}

// walkthroughFailure is what a failed walkthrough said of its failure:
// the command that failed, or the output it lacked.
func walkthroughFailure(out []byte) string {
	var why []string
	for _, l := range strings.Split(string(out), "\n") {
		if strings.HasPrefix(l, "walkthrough: this failed: ") || !strings.HasPrefix(l, "+") && strings.Contains(l, " did not print ") {
			why = append(why, l)
		}
	}
	return strings.Join(why, "; ")
}

// walkthroughScript is the blocks as one bash script that stops at the
// first command that fails or does not print what its file says.
func walkthroughScript(blocks []readmeBlock) string {
	var script strings.Builder
	script.WriteString("set -eEo pipefail\nPS4='+ walkthrough ${SECONDS}s: '\nset -x\ntrap 'echo \"walkthrough: this failed: $BASH_COMMAND\" >&2' ERR\n")
	for _, b := range blocks {
		for _, l := range b.lines {
			if len(l.prints) == 0 {
				script.WriteString(l.text + "\n")
				continue
			}
			// The command's output is shown, then searched for each
			// expected piece. The newline ends a comment on its line.
			fmt.Fprintf(&script, "readme_out=$(%s\n)\nprintf '%%s\\n' \"$readme_out\"\n", l.text)
			for _, want := range l.prints {
				fmt.Fprintf(&script, "grep -qF -- %s <<<\"$readme_out\" || { echo %s >&2; exit 1; }\n",
					shellQuote(want), shellQuote(fmt.Sprintf("%s:%d (%s): %s did not print %q", b.file, l.number, b.heading, l.text, want)))
			}
		}
	}
	return script.String()
}

// testUser is ZONEWRIGHT_TEST_USER (default zonewright-test, a user with
// subordinate ids .ci/run makes) and a directory of its own, with the
// tests' binaries open to it; the test is skipped without such a user.
func testUser(t *testing.T) (cred *syscall.Credential, name, work string) {
	t.Helper()
	name = os.Getenv("ZONEWRIGHT_TEST_USER")
	if name == "" {
		name = "zonewright-test"
	}
	u, err := user.Lookup(name)
	if err != nil {
		t.Skipf("no user %s to run the stack as (ZONEWRIGHT_TEST_USER; .ci/run makes one with subordinate ids): %v", name, err)
	}
	uid, _ := strconv.ParseUint(u.Uid, 10, 32)
	gid, _ := strconv.ParseUint(u.Gid, 10, 32)
	work, err = os.MkdirTemp("", "zw-nonroot-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(work) })
	if err := os.Chown(work, int(uid), int(gid)); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Dir(buildBinary(t)), 0o755); err != nil {
		t.Fatal(err)
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), Groups: []uint32{}}, name, work
}

// newcomerEnv is this process's environment without anything the
// README's `source .data/env` is meant to set.
func newcomerEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(name, "ZW_") || name == "ZWCONFIG" || strings.HasPrefix(name, "TEMPORAL_") {
			continue
		}
		env = append(env, kv)
	}
	return env
}

// A failed walkthrough's message begins with what failed: the command,
// or the output a command lacked, whatever follows it in the log.
func TestAWalkthroughFailureSaysWhatFailed(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		lines []readmeLine
		want  string
	}{
		{[]readmeLine{{number: 3, text: "echo one", prints: []string{"two"}}, {number: 4, text: "echo after"}},
			`docs/x.md:3 (X): echo one did not print "two"`},
		{[]readmeLine{{number: 3, text: "false"}, {number: 4, text: "echo after"}},
			"walkthrough: this failed: false"},
	} {
		out, err := exec.Command("bash", "-c", walkthroughScript([]readmeBlock{{file: "docs/x.md", heading: "X", lines: c.lines}})).CombinedOutput()
		if got := walkthroughFailure(out); err == nil || got != c.want {
			t.Errorf("a walkthrough of %+v: %v, says %q; want a failure saying %q\n%s", c.lines, err, got, c.want, out)
		}
	}
}

// What a walkthrough started in the background ends with it: a web server
// a page left (its cleanup block never reached when an earlier one
// failed) held its port and failed every later run. (Remove the kill of
// the group after the script in runBlocksWithin to see it outlive it.)
func TestAWalkthroughLeavesNothingRunning(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	runBlocksWithin(t, dir, nil, []readmeBlock{{file: "docs/x.md", heading: "X",
		lines: []readmeLine{{number: 3, text: "sleep 300 >/dev/null 2>&1 & echo $! > bg.pid"}}}}, time.Minute)
	b, err := os.ReadFile(filepath.Join(dir, "bg.pid"))
	if err != nil {
		t.Fatal(err)
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	for range 40 {
		if st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); err != nil || strings.Contains(string(st), ") Z ") {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	_ = syscall.Kill(pid, syscall.SIGKILL)
	t.Fatalf("the walkthrough's background command (pid %d) outlived it", pid)
}
