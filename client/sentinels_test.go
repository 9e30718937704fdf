package client

import (
	"context"
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/kvwire/kvwire/conn"
	"github.com/kvwire/kvwire/internal/statuspolicy"
	"github.com/kvwire/kvwire/memdx"
	"github.com/kvwire/kvwire/retry"
)

// packageVars returns the package-level vars of the non-test Go files in
// dir whose names start with prefix, with their initializers.
func packageVars(t *testing.T, dir, prefix string) map[string]ast.Expr {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]ast.Expr{}
	fset := token.NewFileSet()
	for _, path := range files {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, decl := range f.Decls {
			gd, ok := decl.(*ast.GenDecl)
			if !ok || gd.Tok != token.VAR {
				continue
			}
			for _, spec := range gd.Specs {
				vs := spec.(*ast.ValueSpec)
				for i, n := range vs.Names {
					if strings.HasPrefix(n.Name, prefix) {
						var v ast.Expr
						if i < len(vs.Values) {
							v = vs.Values[i]
						}
						out[n.Name] = v
					}
				}
			}
		}
	}
	return out
}

// Every exported Err* of the package is the module's sentinel of the same
// name (ErrX = kverr.ErrX: the same value, so errors.Is finds it in an
// error any layer made), and every sentinel of the module is exported here.
func TestEverySentinelIsTheModulesOwn(t *testing.T) {
	kv := packageVars(t, filepath.Join("..", "internal", "kverr"), "Err")
	if len(kv) < 30 {
		t.Fatalf("found %d sentinels in internal/kverr; the scan is not reading it", len(kv))
	}
	mine := packageVars(t, ".", "Err")
	for name, v := range mine {
		sel, ok := v.(*ast.SelectorExpr)
		if !ok {
			t.Errorf("%s is not kverr.%s: declare the sentinel in internal/kverr and re-export it", name, name)
			continue
		}
		pkg, ok := sel.X.(*ast.Ident)
		if !ok || pkg.Name != "kverr" || sel.Sel.Name != name {
			t.Errorf("%s is not kverr.%s: declare the sentinel in internal/kverr and re-export it under its name", name, name)
			continue
		}
		if _, ok := kv[name]; !ok {
			t.Errorf("%s = kverr.%s, which is no sentinel of internal/kverr", name, name)
		}
	}
	for name := range kv {
		if _, ok := mine[name]; !ok {
			t.Errorf("kverr.%s is not re-exported: add %s = kverr.%s with a doc comment", name, name, name)
		}
	}
}

// The lower layers' errors match the client's sentinels themselves, with
// no translation on the way up.
func TestLowerLayerErrorsMatchClientSentinels(t *testing.T) {
	cases := []struct {
		err  error
		want []error
	}{
		{&conn.AuthError{}, []error{ErrAuthenticationFailure, ErrBootstrap}},
		{&conn.AuthError{Err: ErrPlainAuthRefused}, []error{ErrAuthenticationFailure, ErrPlainAuthRefused}},
		{&conn.BucketAccessError{}, []error{ErrBucketNotFound, ErrBootstrap}},
		{&conn.TLSError{Err: errors.New("x509")}, []error{ErrTLS, ErrBootstrap}},
		{&conn.ProtocolError{}, []error{ErrProtocol}},
		{&conn.RequestError{Err: ErrOverloaded}, []error{ErrOverloaded}},
		{&retry.TimeoutError{Ambiguous: true}, []error{ErrTimeout, ErrAmbiguousTimeout, ErrAmbiguous}},
		{&retry.TimeoutError{}, []error{ErrTimeout, ErrUnambiguousTimeout}},
		{&retry.CanceledError{}, []error{ErrRequestCanceled}},
		{&retry.NotRetriedError{Err: ErrScopeNotFound}, []error{ErrNotRetried, ErrScopeNotFound}},
		{&retry.ErrorMapMaxDurationError{}, []error{ErrErrorMapMaxDuration}},
	}
	for _, c := range cases {
		for _, w := range c.want {
			if !errors.Is(c.err, w) {
				t.Errorf("%T %v does not match %v", c.err, c.err, w)
			}
		}
	}
	// A terminal reason fails with the client's sentinel.
	st := &retry.State{}
	st.Init(context.Background(), memdx.OpGet, nil, time.Time{})
	a := retry.DefaultStrategy().RetryAfter(st, retry.ReasonBucketAccessError)
	if !errors.Is(a.Err(), ErrBucketNotFound) {
		t.Errorf("the default strategy fails BUCKET_ACCESS_ERROR with %v; want ErrBucketNotFound", a.Err())
	}
}

// docErrorTable returns the rows of the package doc's error table: the
// text of each sentinel's row, continuation lines included.
func docErrorTable(t *testing.T) map[string]string {
	t.Helper()
	doc, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string]string{}
	cur := ""
	for _, line := range strings.Split(string(doc), "\n") {
		body, ok := strings.CutPrefix(line, "//\t")
		switch {
		case ok && strings.HasPrefix(body, "Err"):
			name, rest, _ := strings.Cut(body, " ")
			cur = name
			rows[cur] = rest
		case ok && cur != "" && strings.HasPrefix(body, " "):
			rows[cur] += " " + strings.TrimSpace(body)
		default:
			cur = ""
		}
	}
	return rows
}

// The package doc's error table names, for each sentinel, every status the
// status policy (statuspolicy.Table()) ends an operation with it for, and
// no status the policy gives another sentinel (the default's row, "any
// other status", aside; and those named below, which are not the policy's).
func TestDocErrorTableAgreesWithStatusPolicy(t *testing.T) {
	rows := docErrorTable(t)
	mine := packageVars(t, ".", "Err")
	for name := range mine {
		if _, ok := rows[name]; !ok {
			t.Errorf("the package doc's error table has no row for %s", name)
		}
	}
	// A sentinel's name, by its text (unique: TestSentinelsDeclaredOnce).
	byText := map[string]string{}
	for name, v := range packageVars(t, filepath.Join("..", "internal", "kverr"), "Err") {
		if call, ok := v.(*ast.CallExpr); ok && len(call.Args) == 1 {
			if lit, ok := call.Args[0].(*ast.BasicLit); ok {
				byText[strings.Trim(lit.Value, `"`)] = name
			}
		}
	}
	for _, r := range statuspolicy.Table() {
		name := byText[r.Rule.Sentinel.Error()]
		if !strings.Contains(rows[name], r.Status.String()) {
			t.Errorf("the status policy gives %s for %s (ops %v), but the doc's row for %s does not name it: %q",
				name, r.Status, r.Ops, name, rows[name])
		}
	}
	def := byText[statuspolicy.Default.Sentinel.Error()]
	if !strings.Contains(rows[def], "any other status") {
		t.Errorf("the status policy's default is %s, whose doc row does not say \"any other status\"", def)
	}

	gives := map[string]map[memdx.Status]bool{
		// SELECT_BUCKET's refusal at bootstrap, not an operation's status.
		"ErrBucketNotFound": {memdx.StatusKeyNotFound: true, memdx.StatusNoAccess: true},
	}
	give := func(name string, st memdx.Status) {
		if gives[name] == nil {
			gives[name] = map[memdx.Status]bool{}
		}
		gives[name][st] = true
	}
	for _, r := range statuspolicy.Table() {
		give(byText[r.Rule.Sentinel.Error()], r.Status)
		if r.Rule.Ambiguous {
			give("ErrAmbiguous", r.Status)
		}
	}
	for name, row := range rows {
		if name == def {
			continue
		}
		for _, st := range memdx.KnownStatuses() {
			named := regexp.MustCompile(`\b` + regexp.QuoteMeta(st.String()) + `\b`).MatchString(row)
			if named && !gives[name][st] {
				t.Errorf("the doc's row for %s names %s, which the status policy never ends an operation with %s for: %q",
					name, st, name, row)
			}
		}
	}
}
