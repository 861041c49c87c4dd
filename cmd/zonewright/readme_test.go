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
	"path/filepath"
	"strings"
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

	work := t.TempDir()
	examples, err := filepath.Abs("../../examples")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(examples, filepath.Join(work, "examples")); err != nil {
		t.Fatal(err)
	}
	binDir := filepath.Join(work, "bin")
	if err := os.Mkdir(binDir, 0o755); err != nil {
		t.Fatal(err)
	}
	zwctlBuilt := buildZwctl(binDir)
	bin := buildBinary(t)
	d := startDev(t, bin, filepath.Join(work, ".data"), freeAddr(t), freeAddr(t), freeAddr(t))
	defer d.stop(t)
	d.nodesReady(t, 3)
	// A newcomer on this machine gets isolation mode where it can be had.
	if err := fabric.IsolationSupported(); err == nil && !strings.Contains(d.output.String(), "isolation mode: each node a network namespace") {
		t.Fatalf("make dev's stack is not in isolation mode on a machine that allows it:\n%s", d.output)
	} else if err != nil {
		t.Logf("isolation mode unavailable here (%v): the quick start runs on the shared loopback", err)
	}

	t.Run("zwctl", func(t *testing.T) {
		if zwctlBuilt != nil {
			t.Fatalf("the README's walk-through runs zwctl, which does not build: %v", zwctlBuilt)
		}
		runReadmeBlocks(t, work, withZwctl)
	})
	t.Run("kubectl", func(t *testing.T) {
		if _, err := exec.LookPath("kubectl"); err != nil {
			t.Skipf("kubectl is not installed here: %v", err)
		}
		runReadmeBlocks(t, work, withKubectl)
	})
	t.Run("curl", func(t *testing.T) { runReadmeBlocks(t, work, withCurl) })
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

// readmeBlock is one ```sh block of the quick start: its lines, each with
// the output the README says it prints (its "# prints: …" lines).
type readmeBlock struct {
	heading string
	lines   []readmeLine
}

type readmeLine struct {
	number int // in README.md
	text   string
	prints []string
}

func (b readmeBlock) usesZwctl() bool { return b.uses("zwctl") }

func (b readmeBlock) usesKubectl() bool { return b.uses("kubectl") }

func (b readmeBlock) uses(command string) bool {
	for _, l := range b.lines {
		if strings.HasPrefix(strings.TrimSpace(l.text), command+" ") || strings.Contains(l.text, "$("+command+" ") {
			return true
		}
	}
	return false
}

// readmeQuickStart reads the ```sh blocks between "## Quick start" and
// the next "## " heading. `make dev` is left out: the test starts the
// stack itself.
func readmeQuickStart(t *testing.T, path string) []readmeBlock {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var (
		blocks            []readmeBlock
		in, inBlock       bool
		heading           string
		cur               readmeBlock
		n                 int
		sawMakeDev, found bool
	)
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		n++
		line := sc.Text()
		switch {
		case !inBlock && strings.HasPrefix(line, "## "):
			in = line == "## Quick start"
			found = found || in
		case !in:
		case !inBlock && strings.HasPrefix(line, "### "):
			heading = strings.TrimPrefix(line, "### ")
		case !inBlock && line == "```sh":
			inBlock, cur = true, readmeBlock{heading: heading}
		case inBlock && line == "```":
			inBlock = false
			if len(cur.lines) > 0 {
				blocks = append(blocks, cur)
			}
		case inBlock && (line == "make dev" || strings.HasPrefix(line, "make dev ")):
			sawMakeDev = true
		case inBlock && strings.HasPrefix(line, "# prints: "):
			if len(cur.lines) == 0 {
				t.Fatalf("README.md:%d: an expected output before any command", n)
			}
			last := &cur.lines[len(cur.lines)-1]
			last.prints = append(last.prints, strings.TrimPrefix(line, "# prints: "))
		case inBlock:
			cur.lines = append(cur.lines, readmeLine{number: n, text: line})
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if !found || !sawMakeDev || len(blocks) == 0 {
		t.Fatalf("README.md has no quick start that starts with make dev and runs ```sh blocks (section %v, make dev %v, %d blocks)", found, sawMakeDev, len(blocks))
	}
	return blocks
}

// runReadmeBlocks runs the blocks as one bash script in dir (so a
// variable one line sets is there for the next), stopping at the first
// command that fails or does not print what the README says it prints.
func runReadmeBlocks(t *testing.T, dir string, blocks []readmeBlock) {
	t.Helper()
	var script strings.Builder
	script.WriteString("set -eEo pipefail\nPS4='+ README: '\nset -x\ntrap 'echo \"README: this failed: $BASH_COMMAND\" >&2' ERR\n")
	for _, b := range blocks {
		for _, l := range b.lines {
			if len(l.prints) == 0 {
				script.WriteString(l.text + "\n")
				continue
			}
			// The command's output is shown, then searched for each
			// expected piece.
			fmt.Fprintf(&script, "readme_out=$(%s)\nprintf '%%s\\n' \"$readme_out\"\n", l.text)
			for _, want := range l.prints {
				fmt.Fprintf(&script, "grep -qF -- %s <<<\"$readme_out\" || { echo %s >&2; exit 1; }\n",
					shellQuote(want), shellQuote(fmt.Sprintf("README.md:%d (%s): %s did not print %q", l.number, b.heading, l.text, want)))
			}
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-c", script.String())
	cmd.Dir = dir
	cmd.Env = newcomerEnv()
	// A background command the script left (a port-forward) must not keep
	// the output open for ever.
	cmd.WaitDelay = 5 * time.Second
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the README's quick start failed (%v):\n%s", err, out)
	}
	t.Logf("ran:\n%s", out)
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
