package layering

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/zonewright/zonewright/"

// graph is what a package compiles, the standard library left out: each
// package and the packages it imports.
type graph map[string][]string

// deps is the graph of what pkg compiles (itself included) for goos.
func deps(t *testing.T, goos, pkg string) graph {
	t.Helper()
	cmd := exec.Command("go", "list", "-deps", "-f",
		`{{if not .Standard}}{{.ImportPath}} {{.Dir}}{{range .Imports}} {{.}}{{end}}{{end}}`, module+pkg)
	cmd.Env = append(os.Environ(), "GOOS="+goos)
	out, err := cmd.Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			t.Fatalf("go list -deps %s: %v\n%s", pkg, err, ee.Stderr)
		}
		t.Fatalf("go list -deps %s: %v", pkg, err)
	}
	g := graph{}
	for line := range strings.Lines(string(out)) {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		g[f[0]] = f[2:]
		if strings.HasPrefix(f[0], module) {
			watch(t, f[1])
		}
	}
	return g
}

// watch reads a package's directory and its Go files' sizes and times, so
// that go test's cache keeps this test's result only while they are
// unchanged: go list's own reads are not seen by the cache, and an import
// added anywhere on the way must run the test again.
func watch(t *testing.T, dir string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".go") {
			if _, err := os.Stat(filepath.Join(dir, e.Name())); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// path is a chain of imports from one package to the first package
// reached for which match holds, or nil.
func (g graph) path(from string, match func(string) bool) []string {
	prev := map[string]string{from: ""}
	queue := []string{from}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		if match(p) {
			var chain []string
			for ; p != ""; p = prev[p] {
				chain = append(chain, strings.TrimPrefix(p, module))
			}
			slices.Reverse(chain)
			return chain
		}
		for _, q := range g[p] {
			if _, seen := prev[q]; !seen && g[q] != nil {
				prev[q] = p
				queue = append(queue, q)
			}
		}
	}
	return nil
}

// under reports whether pkg is prefix or a package beneath it.
func under(pkg, prefix string) bool { return pkg == prefix || strings.HasPrefix(pkg, prefix+"/") }

// The agent runs on illumos hosts, and the tests run it on Linux: both
// builds are held to the rules.
var goosList = []string{"illumos", "linux"}

// A package never reaches what is listed for it, by any path.
func TestPackagesDoNotReachWhatTheyMustNot(t *testing.T) {
	database := []string{module + "internal/store", module + "migrations", "github.com/jackc/pgx"}
	for _, rule := range []struct {
		pkg       string
		forbidden []string
	}{
		// The agent holds no database credential: it reaches the control
		// plane only through the node API.
		{"internal/agent", database},
		// The node worker is the agent's.
		{"worker/nodeworker", database},
		// The workflows are deterministic and do no I/O: they reach the
		// control plane's state only through activities, which they name
		// by controlapi's stand-ins.
		{"workflows", database},
	} {
		for _, goos := range goosList {
			g := deps(t, goos, rule.pkg)
			for _, f := range rule.forbidden {
				if chain := g.path(module+rule.pkg, func(p string) bool { return under(p, f) }); chain != nil {
					t.Errorf("%s (GOOS=%s) reaches %s, which it must not: %s", rule.pkg, goos, f, strings.Join(chain, " → "))
				}
			}
		}
	}
}

// The contract packages are types only: besides the standard library
// they compile nothing but the packages listed for them, so that either
// side can import them without the other's code.
func TestContractsAreTypesOnly(t *testing.T) {
	for _, rule := range []struct {
		pkg     string
		allowed []string
	}{
		{"workflows/podcontract", nil},
		{"workflows/taskqueue", nil},
		// illumos/names for the names derived from a sandbox (not the
		// command wrappers), transfer for a claim transfer's ticket:
		// leaves, which import only the standard library and model.
		{"internal/hostapi", []string{"internal/model", "internal/illumos/names", "internal/transfer"}},
		{"internal/controlapi", []string{"internal/model", "internal/hostapi", "internal/illumos/names", "internal/transfer"}},
	} {
		for _, goos := range goosList {
			self := module + rule.pkg
			g := deps(t, goos, rule.pkg)
			chain := g.path(self, func(p string) bool {
				rel, ours := strings.CutPrefix(p, module)
				return p != self && (!ours || !slices.Contains(rule.allowed, rel))
			})
			if chain != nil {
				t.Errorf("%s (GOOS=%s) compiles %s; a contract package compiles only the standard library and %v: %s",
					rule.pkg, goos, chain[len(chain)-1], rule.allowed, strings.Join(chain, " → "))
			}
		}
	}
}
