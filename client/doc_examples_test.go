package client_test

import (
	"bytes"
	"context"
	"fmt"
	"go/ast"
	"go/doc/comment"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvwire/kvwire/client"
	"github.com/kvwire/kvwire/mockcluster"
)

// docExample is a Go code example of README.md or of a package's
// documentation.
type docExample struct {
	where string // file:line
	code  string
	env   string // what it runs against: "client" or "mockcluster"
}

// The placeholder hosts of the examples, and the credentials, bucket and
// collection they use: the test's mock cluster has them.
const (
	exampleHosts  = "10.0.0.1,10.0.0.2"
	exampleUser   = "app"
	examplePass   = "secret"
	exampleBucket = "travel-sample"
)

// TestDocExamplesRun runs every Go code example of README.md and of the
// documentation of the packages a user imports (client, mockcluster)
// against the mock cluster, as written: README's program with go run,
// every other example as the body of a test function whose variables are
// the ones examples use (ctx, c, users, col, pw, png, t; c is the mock
// cluster for mockcluster's). The only change made is the host list
// 10.0.0.1,10.0.0.2, which becomes the mock's. An example that declares a
// variable only to show it is given a use (_ = v). A block of a doc comment
// is Go code when it looks like Go (a ":=", a call such as client.Connect(
// or c.Close(), a composite literal); one that does not then parse as
// statements fails the test.
func TestDocExamplesRun(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the examples with the go command")
	}
	program, fragments := readmeExamples(t)
	for _, pkg := range []string{"client", "mockcluster"} {
		fragments = append(fragments, packageDocExamples(t, filepath.Join("..", pkg), pkg)...)
	}
	// Connect, the package doc, GetMany, LookupIn, RetryStrategy, Scan
	// (twice), GetJSON; mockcluster's doc, AddFault, Clock; README's Scan,
	// GetMany and mock cluster.
	require.GreaterOrEqual(t, len(fragments), 14, "examples found: %v", fragments)

	mc := exampleCluster(t)
	hosts := strings.TrimPrefix(mc.ConnString(), "couchbase://")
	dir, err := os.MkdirTemp("..", ".doc-examples-")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	env := append(os.Environ(), "DOCEX_CONNSTR="+mc.ConnString()+"/"+exampleBucket, "CB_PASSWORD="+examplePass)

	var src bytes.Buffer
	src.WriteString(examplesPrelude)
	for i, ex := range fragments {
		writeExampleTest(t, &src, i, ex, hosts)
	}
	require.NoError(t, os.WriteFile(filepath.Join(dir, "examples_test.go"), src.Bytes(), 0o644))
	out, err := goCommand(env, "test", "-count=1", "-v", "./"+filepath.Base(dir))
	require.NoError(t, err, "the examples do not all run:\n%s", out)
	require.Equal(t, len(fragments), strings.Count(out, "--- PASS: TestExample"), "every example ran and passed:\n%s", out)
	for _, ex := range fragments {
		t.Logf("ran %s", ex.where)
	}

	// README's program, with the mock's hosts.
	require.Contains(t, program, `"couchbase://`+exampleHosts+`/`+exampleBucket+`"`)
	prog := filepath.Join(dir, "readme")
	require.NoError(t, os.Mkdir(prog, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(prog, "main.go"), []byte(strings.ReplaceAll(program, exampleHosts, hosts)), 0o644))
	out, err = goCommand(env, "run", "./"+filepath.Base(dir)+"/readme")
	require.NoError(t, err, "README.md's program fails:\n%s", out)
	require.Regexp(t, `Ada \d+\n$`, out, "it prints the user it read back and the CAS")
}

// exampleCluster is a mock cluster with what the examples expect: the
// bucket travel-sample with a scope app holding users, a user app, and a
// few documents.
func exampleCluster(t *testing.T) *mockcluster.Cluster {
	t.Helper()
	mc, err := mockcluster.New(mockcluster.Options{
		Buckets: []mockcluster.BucketOptions{{Name: exampleBucket}},
		Users:   []mockcluster.User{{Name: exampleUser, Password: examplePass, Buckets: []string{"*"}}},
	})
	require.NoError(t, err)
	t.Cleanup(mc.Close)
	b := mc.Bucket(exampleBucket)
	_, err = b.AddScope("app")
	require.NoError(t, err)
	_, err = b.AddCollection("app", "users")
	require.NoError(t, err)
	for i := 1; i <= 3; i++ {
		doc := []byte(fmt.Sprintf(`{"name":"user %d"}`, i))
		_, err = b.Set("app", "users", fmt.Sprintf("u:%d", i), doc, client.CommonFlagsJSON, 0)
		require.NoError(t, err)
		_, err = b.Set(client.DefaultScope, client.DefaultCollection, fmt.Sprintf("user:%d", i), doc, client.CommonFlagsJSON, 0)
		require.NoError(t, err)
	}
	return mc
}

// examplesPrelude starts the generated test file: the variables examples
// use, and the imports they need.
const examplesPrelude = `package docexamples_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"testing"
	"time"

	"github.com/kvwire/kvwire/client"
	"github.com/kvwire/kvwire/memdx"
	"github.com/kvwire/kvwire/mockcluster"
)

var (
	_ = errors.Is
	_ = fmt.Println
	_ = log.Fatal
	_ = os.Getenv
	_ = time.Second
	_ = memdx.OpSet
)

type User struct {
	Name  string   ` + "`json:\"name\"`" + `
	Langs []string ` + "`json:\"langs\"`" + `
}

// clientEnv is what a client example runs with: a client of the mock's
// travel-sample bucket, its app.users and default collections, the
// password and a value.
func clientEnv(t *testing.T) (context.Context, *client.Client, *client.Collection, *client.Collection, string, []byte) {
	ctx := context.Background()
	c, err := client.Connect(ctx, os.Getenv("DOCEX_CONNSTR"), &client.Options{Username: "app", Password: "secret",
		HealthCheck: client.HealthCheckOptions{ProbeTimeout: time.Minute}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return ctx, c, c.Scope("app").Collection("users"), c.DefaultCollection(), "secret", []byte{0x89, 'P', 'N', 'G'}
}

// mockEnv is what a mockcluster example runs with: a cluster.
func mockEnv(t *testing.T) (context.Context, *mockcluster.Cluster) {
	c, err := mockcluster.New(mockcluster.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return context.Background(), c
}
`

// writeExampleTest writes ex as a test function.
func writeExampleTest(t *testing.T, w *bytes.Buffer, i int, ex docExample, hosts string) {
	t.Helper()
	code := strings.ReplaceAll(ex.code, exampleHosts, hosts)
	fmt.Fprintf(w, "\n// %s\nfunc TestExample%02d(t *testing.T) {\n", ex.where, i)
	switch ex.env {
	case "client":
		w.WriteString("\tctx, c, users, col, pw, png := clientEnv(t)\n\t_, _, _, _, _, _ = ctx, c, users, col, pw, png\n")
	default:
		w.WriteString("\tctx, c := mockEnv(t)\n\t_, _ = ctx, c\n")
	}
	w.WriteString("\tif err := func() error {\n")
	w.WriteString(code)
	for _, v := range declared(t, ex) {
		fmt.Fprintf(w, "\t\t_ = %s\n", v)
	}
	fmt.Fprintf(w, "\t\treturn nil\n\t}(); err != nil {\n\t\tt.Fatalf(\"%%s: %%v\", %q, err)\n\t}\n}\n", ex.where)
}

// declared returns the names ex declares at its top level, in order.
func declared(t *testing.T, ex docExample) []string {
	t.Helper()
	body, err := parseStatements(ex.code)
	require.NoError(t, err, ex.where)
	var names []string
	seen := map[string]bool{"_": true}
	add := func(id *ast.Ident) {
		if !seen[id.Name] {
			seen[id.Name] = true
			names = append(names, id.Name)
		}
	}
	for _, st := range body.List {
		switch s := st.(type) {
		case *ast.AssignStmt:
			if s.Tok == token.DEFINE {
				for _, e := range s.Lhs {
					if id, ok := e.(*ast.Ident); ok {
						add(id)
					}
				}
			}
		case *ast.DeclStmt:
			if g, ok := s.Decl.(*ast.GenDecl); ok && g.Tok == token.VAR {
				for _, sp := range g.Specs {
					for _, id := range sp.(*ast.ValueSpec).Names {
						add(id)
					}
				}
			}
		}
	}
	return names
}

// parseStatements parses code as the body of a function.
func parseStatements(code string) (*ast.BlockStmt, error) {
	f, err := parser.ParseFile(token.NewFileSet(), "", "package p\nfunc _() {\n"+code+"\n}\n", 0)
	if err != nil {
		return nil, err
	}
	return f.Decls[0].(*ast.FuncDecl).Body, nil
}

// looksLikeGo tells a block meant as Go code (a declaration, a call of a
// package's function or a method) from a table, a diagram or a list of
// connection strings, some of which parse as Go (labels and comments).
var looksLikeGo = regexp.MustCompile(`:=|\b[a-z]\w*\.[A-Z]\w*[({\[]`)

// packageDocExamples returns the Go code blocks of the doc comments of
// the package in dir.
func packageDocExamples(t *testing.T, dir, env string) []docExample {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	require.NoError(t, err)
	var out []docExample
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, name, nil, parser.ParseComments)
		require.NoError(t, err)
		for _, cg := range f.Comments {
			for _, b := range new(comment.Parser).Parse(cg.Text()).Content {
				code, ok := b.(*comment.Code)
				if !ok {
					continue
				}
				where := fmt.Sprintf("%s:%d", filepath.Join(env, filepath.Base(name)), codeLine(fset, cg, code.Text))
				if !looksLikeGo.MatchString(code.Text) {
					continue
				}
				_, err := parseStatements(code.Text)
				require.NoError(t, err, "%s: a Go example that does not parse:\n%s", where, code.Text)
				out = append(out, docExample{where: where, code: code.Text, env: env})
			}
		}
	}
	return out
}

// codeLine is the line of the comment group cg where the code block
// starting with code's first line is.
func codeLine(fset *token.FileSet, cg *ast.CommentGroup, code string) int {
	first, _, _ := strings.Cut(code, "\n")
	for _, c := range cg.List {
		if strings.TrimPrefix(strings.TrimPrefix(c.Text, "//"), "\t") == first {
			return fset.Position(c.Pos()).Line
		}
	}
	return fset.Position(cg.Pos()).Line
}

// readmeExamples returns README.md's Go program (the block that is a main
// package) and its other Go blocks, but the program that imports kvotel
// (kvotel/example's test runs that one).
func readmeExamples(t *testing.T) (program string, fragments []docExample) {
	t.Helper()
	readme, err := os.ReadFile("../README.md")
	require.NoError(t, err)
	lines := strings.Split(string(readme), "\n")
	for i := 0; i < len(lines); i++ {
		if lines[i] != "```go" {
			continue
		}
		start := i + 1
		for i++; i < len(lines) && lines[i] != "```"; i++ {
		}
		require.Less(t, i, len(lines), "README.md: a ```go block is not closed")
		code := strings.Join(lines[start:i], "\n") + "\n"
		if strings.Contains(code, `"github.com/kvwire/kvwire/kvotel"`) {
			// It needs OpenTelemetry, which this module does not
			// require: kvotel/example's test runs it.
			continue
		}
		if strings.HasPrefix(code, "package main\n") {
			program = code
			continue
		}
		fragments = append(fragments, docExample{where: fmt.Sprintf("README.md:%d", start), code: code, env: "client"})
	}
	require.NotEmpty(t, program, "README.md has no Go program")
	return program, fragments
}

// goCommand runs the go command in the module's root.
func goCommand(env []string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir, cmd.Env = "..", env
	out, err := cmd.CombinedOutput()
	return string(out), err
}
