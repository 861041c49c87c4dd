package api

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"reflect"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"
)

// The descriptions of the schemas are the Go doc comments of their types
// and fields (what kubectl explain prints). They are read from the source
// when the document is built, by go generate and its staleness test, both
// run in this package's directory, inside the module.

const modulePath = "github.com/zonewright/zonewright"

// goDocs are the doc comments of a module's types, by package path and
// type name, and of their fields, by Go field name.
type goDocs struct {
	root    string
	fset    *token.FileSet
	types   map[string]string            // "pkgpath.Type"
	fields  map[string]map[string]string // "pkgpath.Type" → field → doc
	visited map[string]bool              // packages parsed
}

func newGoDocs() (*goDocs, error) {
	dir, err := os.Getwd()
	if err != nil {
		return nil, err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			break
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return nil, fmt.Errorf("the Go doc comments: no go.mod above the working directory")
		}
		dir = parent
	}
	return &goDocs{root: dir, fset: token.NewFileSet(), types: map[string]string{},
		fields: map[string]map[string]string{}, visited: map[string]bool{}}, nil
}

// load parses the package at pkgPath once, if it is the module's.
func (d *goDocs) load(pkgPath string) error {
	rel, ok := strings.CutPrefix(pkgPath, modulePath)
	if !ok || d.visited[pkgPath] {
		return nil
	}
	d.visited[pkgPath] = true
	pkgs, err := parser.ParseDir(d.fset, filepath.Join(d.root, rel), func(fi os.FileInfo) bool {
		return !strings.HasSuffix(fi.Name(), "_test.go")
	}, parser.ParseComments)
	if err != nil {
		return err
	}
	for _, pkg := range pkgs {
		for _, f := range pkg.Files {
			for _, decl := range f.Decls {
				gd, ok := decl.(*ast.GenDecl)
				if !ok || gd.Tok != token.TYPE {
					continue
				}
				for _, spec := range gd.Specs {
					ts := spec.(*ast.TypeSpec)
					key := pkgPath + "." + ts.Name.Name
					doc := ts.Doc
					if doc == nil && len(gd.Specs) == 1 {
						doc = gd.Doc
					}
					d.types[key] = commentText(doc)
					st, ok := ts.Type.(*ast.StructType)
					if !ok {
						continue
					}
					fields := map[string]string{}
					for _, f := range st.Fields.List {
						text := commentText(f.Doc)
						if text == "" {
							text = commentText(f.Comment)
						}
						for _, n := range f.Names {
							fields[n.Name] = text
						}
					}
					d.fields[key] = fields
				}
			}
		}
	}
	return nil
}

// commentText is a comment as one paragraph of text.
func commentText(g *ast.CommentGroup) string {
	if g == nil {
		return ""
	}
	return strings.Join(strings.Fields(g.Text()), " ")
}

// describe sets the descriptions of s, the schema of the struct type t,
// and of its properties from the doc comments: a property that is a
// reference is wrapped in an allOf, as Kubernetes does, since a
// reference's siblings are ignored in OpenAPI 3.0.
func (d *goDocs) describe(t reflect.Type, s *openapi3.Schema) error {
	if err := d.load(t.PkgPath()); err != nil {
		return err
	}
	key := t.PkgPath() + "." + t.Name()
	if doc := d.types[key]; doc != "" && s.Description == "" {
		s.Description = doc
	}
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		name, _, _ := strings.Cut(tag, ",")
		if tag == "-" || !f.IsExported() {
			continue
		}
		if f.Anonymous && name == "" { // promoted fields: described with their own type
			ft := f.Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				if err := d.load(ft.PkgPath()); err != nil {
					return err
				}
				for j := range ft.NumField() {
					d.describeField(ft, ft.Field(j), s)
				}
				continue
			}
		}
		d.describeField(t, f, s)
	}
	return nil
}

func (d *goDocs) describeField(t reflect.Type, f reflect.StructField, s *openapi3.Schema) {
	name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
	if name == "" {
		name = f.Name
	}
	doc := d.fields[t.PkgPath()+"."+t.Name()][f.Name]
	prop, ok := s.Properties[name]
	if doc == "" || !ok || prop == nil {
		return
	}
	if prop.Ref != "" {
		s.Properties[name] = &openapi3.SchemaRef{Value: &openapi3.Schema{Description: doc,
			AllOf: openapi3.SchemaRefs{openapi3.NewSchemaRef(prop.Ref, nil)}}}
		return
	}
	if prop.Value != nil {
		v := *prop.Value // the generator may share it with another field
		v.Description = doc
		s.Properties[name] = &openapi3.SchemaRef{Value: &v}
	}
}
