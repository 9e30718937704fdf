package main

import (
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// kvcli is a user of the public API: besides the standard library it
// imports client, and mockcluster for serve and demo. Anything else it
// needs belongs in client's API. Test files may use more (the codec's
// opcodes and statuses to inject faults into the mock).
var allowedImports = []string{
	"github.com/kvwire/kvwire/client",
	"github.com/kvwire/kvwire/mockcluster",
}

func TestKvcliImportsOnlyClient(t *testing.T) {
	entries, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	files := 0
	for _, e := range entries {
		name := e.Name()
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		files++
		f, err := parser.ParseFile(fset, name, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range f.Imports {
			path, err := strconv.Unquote(imp.Path.Value)
			if err != nil {
				t.Fatal(err)
			}
			first, _, _ := strings.Cut(path, "/")
			if !strings.Contains(first, ".") || slices.Contains(allowedImports, path) {
				continue // the standard library, or allowed
			}
			t.Errorf("%s imports %s: kvcli may import only %v and the standard library", name, path, allowedImports)
		}
	}
	if files == 0 {
		t.Fatal("no source files read")
	}
}

// Whatever kvcli reaches of the internal packages, it reaches through client
// or mockcluster: among kvcli's dependencies (go list -deps), only client,
// mockcluster, the internal packages themselves and internal/ ones import
// memdx, conn, vbmap, errmap or retry.
func TestKvcliReachesInternalPackagesOnlyThroughClient(t *testing.T) {
	goCmd, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command on PATH to run go list")
	}
	out, err := exec.Command(goCmd, "list", "-deps", "-test=false", "-f",
		`{{.ImportPath}}{{range .Imports}} {{.}}{{end}}`, ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	const mod = "github.com/kvwire/kvwire/"
	internal := []string{"memdx", "conn", "vbmap", "errmap", "retry"}
	mayImport := append([]string{"client", "mockcluster"}, internal...)
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		pkg, imports := fields[0], fields[1:]
		rel, ok := strings.CutPrefix(pkg, mod)
		if !ok || strings.HasPrefix(rel, "internal/") || slices.Contains(mayImport, rel) {
			continue
		}
		for _, imp := range imports {
			if r, ok := strings.CutPrefix(imp, mod); ok && slices.Contains(internal, r) {
				t.Errorf("%s imports %s: kvcli must reach it only through client", pkg, imp)
			}
		}
	}
}
