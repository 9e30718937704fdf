package client_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestReadmeProgramCompiles builds the complete program README.md shows
// (its first Go block that is a main package), so that the README cannot
// drift from the API: a renamed field or function fails here.
func TestReadmeProgramCompiles(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a program with the go command")
	}
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	var src []byte
	for rest := readme; src == nil; {
		i := bytes.Index(rest, []byte("```go\n"))
		if i < 0 {
			t.Fatal("README.md has no ```go block holding a main package")
		}
		rest = rest[i+len("```go\n"):]
		j := bytes.Index(rest, []byte("\n```"))
		if j < 0 {
			t.Fatal("README.md: a ```go block is not closed")
		}
		if block := rest[:j+1]; bytes.Contains(block, []byte("package main\n")) {
			src = block
		}
		rest = rest[j:]
	}
	// Inside the module, so that it builds against this checkout; a name
	// starting with "." keeps it out of ./... while it exists.
	dir, err := os.MkdirTemp("..", ".readme-program-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.WriteFile(filepath.Join(dir, "main.go"), src, 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("go", "vet", "./"+filepath.Base(dir))
	cmd.Dir = ".."
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("README.md's program does not build: %v\n%s", err, out)
	}
}
