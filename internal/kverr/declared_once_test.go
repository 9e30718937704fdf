package kverr

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// sentinel is a package-level error of the module made by errors.New or
// fmt.Errorf from a constant text.
type sentinel struct {
	pos  string // file:line
	dir  string // package directory, relative to the module root
	name string
	text string
}

// key is what two sentinels share when they say the same thing: the text
// without a package prefix ("conn: ", "retry: ") and case.
func (s sentinel) key() string {
	t := strings.ToLower(s.text)
	if i := strings.Index(t, ": "); i > 0 && !strings.ContainsAny(t[:i], " %") {
		t = t[i+2:]
	}
	return t
}

// moduleSentinels parses every non-test Go file of the module rooted at
// root (nested modules, testdata and hidden directories excluded) and
// returns its package-level errors.New and fmt.Errorf declarations.
func moduleSentinels(t *testing.T, root string) []sentinel {
	t.Helper()
	var out []sentinel
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			name := d.Name()
			if path != root && (name == "testdata" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_")) {
				return filepath.SkipDir
			}
			if path != root {
				if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil {
					return filepath.SkipDir // a nested module
				}
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, filepath.Dir(path))
		for _, decl := range f.Decls {
			gd, ok := decl.(*ast.GenDecl)
			if !ok || gd.Tok != token.VAR {
				continue
			}
			for _, spec := range gd.Specs {
				vs := spec.(*ast.ValueSpec)
				for i, v := range vs.Values {
					if i >= len(vs.Names) {
						break
					}
					if text, ok := errorText(v); ok {
						p := fset.Position(vs.Names[i].Pos())
						out = append(out, sentinel{
							pos:  filepath.ToSlash(filepath.Join(rel, filepath.Base(p.Filename))) + ":" + strconv.Itoa(p.Line),
							dir:  filepath.ToSlash(rel),
							name: vs.Names[i].Name,
							text: text,
						})
					}
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// errorText returns the constant text of errors.New("...") or
// fmt.Errorf("...", ...).
func errorText(e ast.Expr) (string, bool) {
	call, ok := e.(*ast.CallExpr)
	if !ok || len(call.Args) == 0 {
		return "", false
	}
	sel, ok := call.Fun.(*ast.SelectorExpr)
	if !ok {
		return "", false
	}
	pkg, ok := sel.X.(*ast.Ident)
	if !ok || !(pkg.Name == "errors" && sel.Sel.Name == "New" || pkg.Name == "fmt" && sel.Sel.Name == "Errorf") {
		return "", false
	}
	lit, ok := call.Args[0].(*ast.BasicLit)
	if !ok || lit.Kind != token.STRING {
		return "", false
	}
	s, err := strconv.Unquote(lit.Value)
	return s, err == nil
}

const kverrDir = "internal/kverr"

// checkDeclaredOnce reports every sentinel that says what another says:
// two package-level errors of the module with the same text (package
// prefix and case aside), and an Err* outside internal/kverr whose text is
// a kverr sentinel's.
func checkDeclaredOnce(all []sentinel) []string {
	var problems []string
	kv := map[string]sentinel{}
	for _, s := range all {
		if s.dir == kverrDir {
			kv[s.key()] = s
		}
	}
	seen := map[string]sentinel{}
	for _, s := range all {
		if k, ok := kv[s.key()]; ok && s.dir != kverrDir && strings.HasPrefix(s.name, "Err") {
			problems = append(problems, s.pos+": "+s.name+" duplicates kverr."+k.name+" ("+strconv.Quote(k.text)+"): use the kverr sentinel")
			continue
		}
		if first, ok := seen[s.key()]; ok {
			problems = append(problems, s.pos+": "+s.name+" "+strconv.Quote(s.text)+" says what "+first.pos+": "+first.name+" says")
			continue
		}
		seen[s.key()] = s
	}
	return problems
}

func TestSentinelsDeclaredOnce(t *testing.T) {
	all := moduleSentinels(t, filepath.Join("..", ".."))
	var n int
	for _, s := range all {
		if s.dir == kverrDir {
			n++
		}
	}
	if n < 30 {
		t.Fatalf("found %d sentinels in %s (of %d in the module); the scan is not reading the module", n, kverrDir, len(all))
	}
	for _, p := range checkDeclaredOnce(all) {
		t.Error(p)
	}
}

// The check finds both kinds of duplicate, a copy with a package prefix
// included.
func TestDeclaredOnceCheckFindsDuplicates(t *testing.T) {
	all := []sentinel{
		{pos: "internal/kverr/kverr.go:1", dir: kverrDir, name: "ErrTLS", text: "TLS handshake failed"},
		{pos: "conn/errors.go:1", dir: "conn", name: "ErrTLS", text: "conn: TLS handshake failed"},
		{pos: "vbmap/a.go:1", dir: "vbmap", name: "errA", text: "vbmap: same thing"},
		{pos: "vbmap/b.go:1", dir: "vbmap", name: "errB", text: "Same thing"},
		{pos: "vbmap/c.go:1", dir: "vbmap", name: "ErrOwn", text: "vbmap: a thing of its own"},
	}
	got := checkDeclaredOnce(all)
	if len(got) != 2 || !strings.HasPrefix(got[0], "conn/errors.go:1: ErrTLS duplicates kverr.ErrTLS") ||
		!strings.HasPrefix(got[1], "vbmap/b.go:1: errB") {
		t.Fatalf("problems %q; want conn's ErrTLS and vbmap's errB", got)
	}
}
