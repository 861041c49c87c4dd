package workflows

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// Every change ID a workflow asks workflow.GetVersion for is listed in
// docs/compatibility.md, so a reader of that page knows every path a
// running workflow may take, and which change a history replays around.
func TestEveryVersionIsListed(t *testing.T) {
	ids := versionIDs(t)
	if len(ids) < 10 {
		t.Fatalf("found only %d change IDs in the workflows: %v", len(ids), ids)
	}
	doc, err := os.ReadFile("../docs/compatibility.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		if !strings.Contains(string(doc), "| `"+id+"` |") {
			t.Errorf("change ID %q is asked by the workflows but not listed in docs/compatibility.md", id)
		}
	}
}

// versionIDs reads the change IDs of every GetVersion call in the
// package's code: string literals, or string constants of the package.
func versionIDs(t *testing.T) []string {
	t.Helper()
	fset := token.NewFileSet()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	consts := map[string]string{}
	var args []ast.Expr
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.ValueSpec:
				for i, id := range n.Names {
					if i < len(n.Values) {
						if lit, ok := n.Values[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
							consts[id.Name], _ = strconv.Unquote(lit.Value)
						}
					}
				}
			case *ast.CallExpr:
				if sel, ok := n.Fun.(*ast.SelectorExpr); ok && sel.Sel.Name == "GetVersion" && len(n.Args) > 1 {
					args = append(args, n.Args[1])
				}
			}
			return true
		})
	}
	seen := map[string]bool{}
	var ids []string
	for _, a := range args {
		var id string
		switch a := a.(type) {
		case *ast.BasicLit:
			id, _ = strconv.Unquote(a.Value)
		case *ast.Ident:
			id = consts[a.Name]
		}
		if id == "" {
			t.Fatalf("a GetVersion call at %s names its change ID in a way this test cannot read", fset.Position(a.Pos()))
		}
		if !seen[id] {
			seen[id] = true
			ids = append(ids, id)
		}
	}
	return ids
}
