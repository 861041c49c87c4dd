//go:build !illumos && !nodev

package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The walkthroughs of docs/*.md, run as a reader runs them against
// `make dev`: one stack for every page, the pages in name order, each
// page's ```sh blocks in order in one bash session (so `source .data/env`
// and the variables a page sets hold to its end), in a directory laid out
// as the README's test lays it out. A page deletes what it made, so the
// next one finds the stack as it was. A block that cannot run against one
// machine's dev stack says so in the page, on the line before it:
// `<!-- not run: why -->`; every other block runs. A page that needs a
// tool this machine lacks (kubectl, dig, the Temporal CLI of `make
// tools`) is skipped, saying which.
func TestDocsWalkthroughsRun(t *testing.T) {
	type page struct {
		name   string
		blocks []readmeBlock
	}
	paths, err := filepath.Glob("../../docs/*.md")
	if err != nil || len(paths) == 0 {
		t.Fatalf("no docs/*.md: %v", err)
	}
	var pages []page
	for _, path := range paths {
		p := page{name: filepath.Base(path)}
		for _, b := range shBlocks(t, path, "docs/"+p.name) {
			if b.notRun != "" {
				t.Logf("docs/%s:%d (%s) is not run: %s", p.name, b.lines[0].number, b.heading, b.notRun)
				continue
			}
			p.blocks = append(p.blocks, b)
		}
		if len(p.blocks) > 0 {
			pages = append(pages, p)
		}
	}

	work := t.TempDir()
	if err := os.CopyFS(filepath.Join(work, "examples"), os.DirFS("../../examples")); err != nil {
		t.Fatal(err)
	}
	binDir := filepath.Join(work, "bin")
	if err := os.Mkdir(binDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := buildZwctl(binDir); err != nil {
		t.Fatal(err)
	}
	// The Temporal CLI of `make tools` (bin/temporal), else one on PATH,
	// where a reader's page finds it.
	temporalCLI, temporalErr := filepath.Abs("../../bin/temporal")
	if _, err := os.Stat(temporalCLI); err != nil {
		temporalCLI, temporalErr = exec.LookPath("temporal")
	}
	if temporalErr == nil {
		if err := os.Symlink(temporalCLI, filepath.Join(binDir, "temporal")); err != nil {
			t.Fatal(err)
		}
	}
	d := startDev(t, buildBinary(t), filepath.Join(work, ".data"), freeAddr(t), freeAddr(t), freeAddr(t))
	t.Cleanup(func() { d.stop(t) })
	d.nodesReady(t, 3)

	for _, p := range pages {
		t.Run(strings.TrimSuffix(p.name, ".md"), func(t *testing.T) {
			for _, tool := range []string{"kubectl", "dig", "temporal"} {
				for _, b := range p.blocks {
					if !b.uses(tool) {
						continue
					}
					if tool == "temporal" {
						if temporalErr != nil {
							t.Skipf("%s runs the Temporal CLI (make tools), which is not installed here: %v", p.name, temporalErr)
						}
					} else if _, err := exec.LookPath(tool); err != nil {
						t.Skipf("%s runs %s, which is not installed here: %v", p.name, tool, err)
					}
				}
			}
			start := time.Now()
			runBlocksWithin(t, work, nil, p.blocks, 5*time.Minute)
			t.Logf("%s ran in %s", p.name, time.Since(start).Round(time.Second))
		})
	}
}
