// Package conformance locates the shared conformance corpus (real configs,
// error maps and packets, kept outside the repository) for the tests that
// read it, and decides what a missing corpus means.
//
// On a developer's machine the corpus may be absent: the tests that need it
// skip, saying where they looked. With KVWIRE_REQUIRE_CONFORMANCE=1 (.ci/run
// sets it: CI always has the corpus) a missing corpus fails those tests
// instead, so that a run cannot pass by checking nothing.
package conformance

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

// EnvRequire names the environment variable that, set to 1, turns a missing
// corpus from a skip into a failure.
const EnvRequire = "KVWIRE_REQUIRE_CONFORMANCE"

// Dir is the corpus as seen from a package directory of the root module
// (the tests run there): ../shared/conformance next to the repository.
var Dir = filepath.Join("..", "..", "shared", "conformance")

// Required reports whether a missing corpus fails the tests.
func Required() bool { return os.Getenv(EnvRequire) == "1" }

// Path returns the corpus path of rel (slash-separated).
func Path(rel string) string { return filepath.Join(Dir, filepath.FromSlash(rel)) }

// Missing ends tb because the corpus data at path is missing (err says how):
// a skip, or a failure when Required.
func Missing(tb testing.TB, path string, err error) {
	tb.Helper()
	if Required() {
		tb.Fatalf("conformance data %s is missing (%v); %s=1 requires the shared corpus at %s", path, err, EnvRequire, Dir)
	}
	tb.Skipf("conformance data %s is absent (%v); these checks need the shared corpus at %s", path, err, Dir)
}

// Read returns the corpus file rel. An absent file ends tb through Missing;
// any other error fails it.
func Read(tb testing.TB, rel string) []byte {
	tb.Helper()
	p := Path(rel)
	b, err := os.ReadFile(p)
	if errors.Is(err, fs.ErrNotExist) {
		Missing(tb, p, err)
	}
	if err != nil {
		tb.Fatalf("reading conformance data %s: %v", p, err)
	}
	return b
}

// Glob returns the corpus files matching pattern (relative to the corpus,
// slash-separated). No match ends tb through Missing: every pattern the
// tests use matches files of the corpus.
func Glob(tb testing.TB, pattern string) []string {
	tb.Helper()
	p := Path(pattern)
	files, err := filepath.Glob(p)
	if err != nil {
		tb.Fatalf("conformance pattern %s: %v", p, err)
	}
	if len(files) == 0 {
		Missing(tb, p, fs.ErrNotExist)
	}
	return files
}

// Seeds returns the contents of the corpus files matching pattern, for a
// fuzz target's seed corpus. Without the corpus it returns nil (the target
// runs on its other seeds) unless Required, when it fails tb.
func Seeds(tb testing.TB, pattern string) [][]byte {
	tb.Helper()
	p := Path(pattern)
	files, err := filepath.Glob(p)
	if err != nil {
		tb.Fatalf("conformance pattern %s: %v", p, err)
	}
	if len(files) == 0 && Required() {
		Missing(tb, p, fs.ErrNotExist)
	}
	var out [][]byte
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			tb.Fatalf("reading conformance data %s: %v", f, err)
		}
		out = append(out, b)
	}
	return out
}
