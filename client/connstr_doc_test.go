package client

import (
	"go/ast"
	"go/parser"
	"go/token"
	"strings"
	"testing"
)

// ParseConnStr's documentation lists every option a connection string
// may carry, as the package doc says it does: an option added to the
// parser without a line there would be named nowhere in go doc.
func TestParseConnStrDocListsEveryOption(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), "connstr.go", nil, parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	var doc string
	for _, d := range f.Decls {
		if fn, ok := d.(*ast.FuncDecl); ok && fn.Name.Name == "ParseConnStr" && fn.Recv == nil {
			doc = fn.Doc.Text()
		}
	}
	if doc == "" {
		t.Fatal("ParseConnStr has no doc comment")
	}
	for _, name := range KnownConnStrOptions() {
		if !strings.Contains(doc, name) {
			t.Errorf("ParseConnStr's doc does not list the option %q", name)
		}
	}
}
