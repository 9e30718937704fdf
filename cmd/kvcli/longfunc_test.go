package main

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"
)

// maxFuncLines is the longest a function of kvcli may be without its doc
// comment saying why ("It is long because ...").
const maxFuncLines = 80

// TestLongFunctionsSayWhy: a function over maxFuncLines lines (function
// literals counted in the function that holds them) says in its doc
// comment why it is long, so that a long function is a decision, not
// drift.
func TestLongFunctionsSayWhy(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	checked := 0
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Body == nil {
				continue
			}
			checked++
			longest := funcLines(fset, fd, fd.Body)
			ast.Inspect(fd.Body, func(n ast.Node) bool {
				if fl, ok := n.(*ast.FuncLit); ok {
					longest = max(longest, funcLines(fset, fl, fl.Body))
				}
				return true
			})
			if longest > maxFuncLines && !strings.Contains(fd.Doc.Text(), "long because") {
				t.Errorf("%s: %s has %d lines (over %d) and its doc comment does not say why it is long (\"It is long because ...\")",
					fset.Position(fd.Pos()), fd.Name.Name, longest, maxFuncLines)
			}
		}
	}
	if checked < 100 {
		t.Fatalf("checked %d functions: the test no longer sees kvcli's files", checked)
	}
}

func funcLines(fset *token.FileSet, from ast.Node, body *ast.BlockStmt) int {
	return fset.Position(body.Rbrace).Line - fset.Position(from.Pos()).Line + 1
}
