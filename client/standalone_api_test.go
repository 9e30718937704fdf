package client

import (
	"fmt"
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
)

// The packages a user of client must never need: client's exported API
// is made of client's own types and the standard library's.
var internalPackages = []string{"memdx", "conn", "vbmap", "errmap", "retry"}

const modulePath = "github.com/kvwire/kvwire"

// apiLeaksOwnedElsewhere are leaks of internal types that another branch of
// the same change removes. Each entry must still be present (a stale entry
// fails the tests), so the list empties as it lands.
var apiLeaksOwnedElsewhere = map[string]bool{}

var docLeaksOwnedElsewhere = []string{}

// TestExportedAPIUsesNoInternalType type-checks the package and walks every
// exported constant, variable, function, type, field and method: no type in
// them may come from another kvwire package (internal/ ones excepted: a user
// cannot name them, and client re-exports what they define).
func TestExportedAPIUsesNoInternalType(t *testing.T) {
	t.Parallel()
	pkg := typeCheckClient(t)
	leaks := map[string]string{}
	var w apiWalker
	w.leak = func(where string, n *types.Named) { leaks[where] = n.String() }
	scope := pkg.Scope()
	for _, name := range scope.Names() {
		obj := scope.Lookup(name)
		if !obj.Exported() {
			continue
		}
		switch obj := obj.(type) {
		case *types.TypeName:
			w.typeName(obj)
		default:
			w.check(name, obj.Type())
		}
	}
	for where := range apiLeaksOwnedElsewhere {
		if _, ok := leaks[where]; !ok {
			t.Errorf("%s no longer leaks an internal type: remove it from apiLeaksOwnedElsewhere", where)
		}
		delete(leaks, where)
	}
	for where, typ := range leaks {
		t.Errorf("exported %s has internal type %s: give client its own type (convert.go converts)", where, typ)
	}
}

// TestDocNamesNoInternalPackage reads `go doc -all` of the package: its
// text (package doc, declarations, comments) names no internal package, so
// that the documentation describes behaviour a user can rely on.
func TestDocNamesNoInternalPackage(t *testing.T) {
	t.Parallel()
	goCmd, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command on PATH to run go doc")
	}
	out, err := exec.Command(goCmd, "doc", "-all", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go doc -all: %v\n%s", err, out)
	}
	text := string(out)
	for _, allowed := range docLeaksOwnedElsewhere {
		if !strings.Contains(text, allowed) {
			t.Errorf("go doc no longer shows %q: remove it from docLeaksOwnedElsewhere", allowed)
		}
		text = strings.ReplaceAll(text, allowed, "")
	}
	names := strings.Join(internalPackages, "|")
	leak := regexp.MustCompile(`\b(` + names + `)\.[A-Z]\w*|\bpackage (` + names + `)\b|kvwire/(` + names + `)\b`)
	for i, line := range strings.Split(text, "\n") {
		if m := leak.FindString(line); m != "" {
			t.Errorf("go doc line %d names %q: %s", i+1, m, strings.TrimSpace(line))
		}
	}
}

// typeCheckClient type-checks the package's non-test files, importing
// its dependencies from their export data (go list -export).
func typeCheckClient(t *testing.T) *types.Package {
	t.Helper()
	goCmd, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command on PATH to list export data")
	}
	out, err := exec.Command(goCmd, "list", "-export", "-deps", "-f", "{{.ImportPath}}={{.Export}}", ".").Output()
	if err != nil {
		t.Fatalf("go list -export: %v", err)
	}
	exports := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if path, file, ok := strings.Cut(line, "="); ok && file != "" {
			exports[path] = file
		}
	}
	fset := token.NewFileSet()
	entries, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	var files []*ast.File
	for _, e := range entries {
		name := e.Name()
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	lookup := func(path string) (io.ReadCloser, error) {
		file, ok := exports[path]
		if !ok {
			return nil, fmt.Errorf("no export data for %s", path)
		}
		return os.Open(file)
	}
	conf := types.Config{Importer: importer.ForCompiler(fset, "gc", lookup)}
	pkg, err := conf.Check(modulePath+"/client", fset, files, nil)
	if err != nil {
		t.Fatalf("type-checking client: %v", err)
	}
	return pkg
}

// apiWalker finds named types from internal packages in what a user sees
// of a type.
type apiWalker struct {
	leak func(where string, n *types.Named)
	seen map[types.Type]bool
}

// typeName checks a client type: its definition (exported fields and
// interface methods) and its exported methods.
func (w *apiWalker) typeName(obj *types.TypeName) {
	name := obj.Name()
	if obj.IsAlias() {
		w.check(name, obj.Type())
		return
	}
	named, ok := obj.Type().(*types.Named)
	if !ok {
		return
	}
	w.structure(name, named.Underlying())
	for m := range named.Methods() {
		if m.Exported() {
			w.check(name+"."+m.Name(), m.Type())
		}
	}
}

// structure checks the parts of a type's definition a user sees.
func (w *apiWalker) structure(where string, u types.Type) {
	switch u := u.(type) {
	case *types.Struct:
		for f := range u.Fields() {
			if f.Exported() {
				w.check(where+"."+f.Name(), f.Type())
			}
		}
	case *types.Interface:
		for m := range u.Methods() {
			if m.Exported() {
				w.check(where+"."+m.Name(), m.Type())
			}
		}
	default:
		w.check(where, u)
	}
}

// check reports an internal named type anywhere in typ. Client's own
// named types are checked where they are declared, not again here.
func (w *apiWalker) check(where string, typ types.Type) {
	if w.seen == nil {
		w.seen = map[types.Type]bool{}
	}
	switch typ := types.Unalias(typ).(type) {
	case *types.Named:
		if p := typ.Obj().Pkg(); p != nil {
			path := p.Path()
			if path == modulePath+"/client" {
				return
			}
			if internal(path) {
				w.leak(where, typ)
				return
			}
		}
		for a := range typ.TypeArgs().Types() {
			w.check(where, a)
		}
		// A standard-library type is not walked into.
	case *types.Pointer:
		w.check(where, typ.Elem())
	case *types.Slice:
		w.check(where, typ.Elem())
	case *types.Array:
		w.check(where, typ.Elem())
	case *types.Map:
		w.check(where, typ.Key())
		w.check(where, typ.Elem())
	case *types.Chan:
		w.check(where, typ.Elem())
	case *types.Signature:
		for v := range typ.Params().Variables() {
			w.check(where, v.Type())
		}
		for v := range typ.Results().Variables() {
			w.check(where, v.Type())
		}
	case *types.Struct, *types.Interface:
		if w.seen[typ] {
			return
		}
		w.seen[typ] = true
		w.structure(where, typ)
	}
}

// internal reports whether path is a kvwire package a user must not need:
// any but client itself and those under internal/, which no user can
// import.
func internal(path string) bool {
	rest, ok := strings.CutPrefix(path, modulePath+"/")
	if !ok {
		return false
	}
	first, _, _ := strings.Cut(rest, "/")
	return first != "internal" && first != "client"
}

// TestInternalPackagesListIsTheRule keeps internalPackages, which the doc
// test searches for, in step with the rule the type walk applies.
func TestInternalPackagesListIsTheRule(t *testing.T) {
	for _, p := range internalPackages {
		if !internal(modulePath + "/" + p) {
			t.Errorf("%s is not internal by the type walk's rule", p)
		}
	}
	if internal(modulePath+"/internal/kverr") || internal(modulePath+"/client") || internal("strings") {
		t.Error("the type walk's rule refuses a package a user may see")
	}
}
