// Package conformance locates the shared conformance corpus (real configs,
// error maps and packets, kept outside the repository) for the tests that
// read it, and decides what a missing corpus means.
//
// On a developer's machine the corpus may be absent: the tests that need it
// skip, saying where they looked, and when KVWIRE_CONFORMANCE_SKIPS names a
// file each skip is added to it as a line, so that scripts/test.sh can say
// how many were skipped and why (go test shows skips only with -v). With
// KVWIRE_REQUIRE_CONFORMANCE=1 (.ci/run sets it: CI always has the corpus)
// a missing corpus fails those tests instead, so that a run cannot pass by
// checking nothing.
package conformance

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

// EnvRequire names the environment variable that, set to 1, turns a missing
// corpus from a skip into a failure.
const EnvRequire = "KVWIRE_REQUIRE_CONFORMANCE"

// EnvSkips names the environment variable holding the file that every
// skip for a missing corpus is appended to, a line each: "skip", the
// package (the directory the test runs in), the test and the path,
// tab-separated ("seeds" instead of "skip" for a fuzz target that ran
// without the corpus's seeds).
const EnvSkips = "KVWIRE_CONFORMANCE_SKIPS"

// EnvDir names the environment variable that puts the corpus elsewhere
// (an absolute path), for a clone that is not next to it.
const EnvDir = "KVWIRE_CONFORMANCE_DIR"

// Dir is the corpus as seen from a package directory of the root module
// (the tests run there, at any depth: client, internal/statuspolicy):
// ../shared/conformance next to the repository, or $KVWIRE_CONFORMANCE_DIR.
var Dir = dir()

func dir() string {
	if d := os.Getenv(EnvDir); d != "" {
		return d
	}
	up := ".."
	if wd, err := os.Getwd(); err == nil {
		// The repository's root is the nearest directory with a go.mod.
		for rel, d := ".", wd; filepath.Dir(d) != d; rel, d = filepath.Join(rel, ".."), filepath.Dir(d) {
			if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
				up = rel
				break
			}
		}
	}
	return filepath.Join(up, "..", "shared", "conformance")
}

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
	record("skip", tb.Name(), path)
	tb.Skipf("conformance data %s is absent (%v); these checks need the shared corpus at %s (README.md: The conformance corpus)", path, err, Dir)
}

// record adds a line to the file EnvSkips names, if any. Test processes
// of several packages append to it at once: each line is one write to a
// file opened with O_APPEND, which the kernel does not interleave.
func record(kind, test, path string) {
	name := os.Getenv(EnvSkips)
	if name == "" {
		return
	}
	f, err := os.OpenFile(name, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return // the skip itself still says why
	}
	defer f.Close()
	pkg := "?"
	if wd, err := os.Getwd(); err == nil {
		pkg = filepath.Base(wd)
	}
	_, _ = fmt.Fprintf(f, "%s\t%s\t%s\t%s\n", kind, pkg, test, path)
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
	if len(files) == 0 {
		if Required() {
			Missing(tb, p, fs.ErrNotExist)
		}
		record("seeds", tb.Name(), p)
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
