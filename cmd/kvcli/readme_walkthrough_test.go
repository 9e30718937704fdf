package main

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// readmeWalkthrough returns the lines of README.md's kvcli walkthrough:
// the indented block that starts with "make build" under "## kvcli".
func readmeWalkthrough(t *testing.T) []string {
	t.Helper()
	readme, err := os.ReadFile("../../README.md")
	require.NoError(t, err)
	_, section, ok := strings.Cut(string(readme), "\n## kvcli\n")
	require.True(t, ok, "README.md has no \"## kvcli\" section")
	var lines []string
	started := false
	for _, l := range strings.Split(section, "\n") {
		code, indented := strings.CutPrefix(l, "    ")
		switch {
		case !started && strings.HasPrefix(code, "make build"):
			started = true
		case !started:
			continue
		case !indented:
			return lines
		}
		lines = append(lines, strings.TrimSpace(code))
	}
	t.Fatal("README.md's kvcli walkthrough (an indented block starting with make build) was not found")
	return nil
}

// TestReadmeWalkthrough runs README.md's kvcli walkthrough as a new user
// would: make build, then kvcli serve in the foreground, then every other
// line in a shell of its own into which the exports serve printed are
// pasted. Every line must succeed; so must the bench examples, run for 300
// operations over 100 keys. The memcached lines run against the
// memcached scripts/memcached.sh starts, its address put in place of the
// README's 127.0.0.1:11211; the exports' KVCLI_USER is still set there, as
// it would be in the user's shell.
func TestReadmeWalkthrough(t *testing.T) {
	if testing.Short() {
		t.Skip("builds kvcli and runs the walkthrough, bench included")
	}
	lines := readmeWalkthrough(t)
	require.Greater(t, len(lines), 10, "%q", lines)
	require.True(t, strings.HasPrefix(lines[0], "make build"), lines[0])

	// make build: bin/kvcli, here in a directory of the test's own.
	dir := t.TempDir()
	require.NoError(t, os.Mkdir(filepath.Join(dir, "bin"), 0o755))
	require.NoError(t, os.Symlink(kvcliBinary(t), filepath.Join(dir, "bin", "kvcli")))

	var serve string
	var rest []string
	for _, l := range lines[1:] {
		switch {
		case strings.HasPrefix(l, "#"):
		case strings.HasPrefix(l, "bin/kvcli serve"):
			serve = l
		default:
			rest = append(rest, l)
		}
	}
	require.NotEmpty(t, serve, "the walkthrough starts kvcli serve")
	exports := startReadmeServe(t, dir, serve)

	memcachedAddr := os.Getenv("KV_MEMCACHED_ADDR")
	for _, l := range rest {
		line := l
		if strings.Contains(line, "memcached://127.0.0.1:11211") {
			if memcachedAddr == "" {
				memcachedSASL(t) // skips, or fails in CI
			}
			line = strings.ReplaceAll(line, "127.0.0.1:11211", memcachedAddr)
		}
		out, errOut, err := shell(t, dir, exports+"\n"+line)
		require.NoError(t, err, "README line %q\nstdout: %s\nstderr: %s", l, out, errOut)
		switch {
		case strings.HasSuffix(line, "get greeting") && strings.Contains(line, "memcached://"):
			assert.Equal(t, "hi", out, l)
		case line == "bin/kvcli get greeting":
			assert.Equal(t, "hello", out, l)
		case strings.Contains(line, "--json"):
			var doc map[string]any
			requireOneJSONDocument(t, out, &doc)
		case strings.HasPrefix(line, "bin/kvcli lookup"):
			assert.Contains(t, out, "name\t\"Ada\"", l)
		case strings.HasPrefix(line, "bin/kvcli bench"):
			assert.Contains(t, out, "errors     0\n", l)
		}
	}

	// The shapes of load "### kvcli bench" shows, shortened: the flags
	// given later on a command line win.
	benchLines := readmeBenchExamples(t)
	require.GreaterOrEqual(t, len(benchLines), 5)
	for _, l := range benchLines {
		out, errOut, err := shell(t, dir, exports+"\n"+l+" --ops 300 --keys 100")
		require.NoError(t, err, "README line %q\nstdout: %s\nstderr: %s", l, out, errOut)
		assert.Contains(t, out, "errors     0\n", l)
	}
}

// readmeBenchExamples returns the bench command lines under README.md's
// "### kvcli bench".
func readmeBenchExamples(t *testing.T) []string {
	t.Helper()
	readme, err := os.ReadFile("../../README.md")
	require.NoError(t, err)
	_, section, ok := strings.Cut(string(readme), "\n### kvcli bench\n")
	require.True(t, ok)
	section, _, _ = strings.Cut(section, "\n## ")
	var out []string
	for _, l := range strings.Split(section, "\n") {
		if code, ok := strings.CutPrefix(l, "    bin/kvcli bench "); ok {
			code, _, _ = strings.Cut(code, "#")
			out = append(out, "bin/kvcli bench "+strings.TrimSpace(code))
		}
	}
	return out
}

// startReadmeServe runs the README's serve line in dir and returns the export
// lines it printed; the server is interrupted (Ctrl-C) when the test ends.
func startReadmeServe(t *testing.T, dir, line string) string {
	t.Helper()
	cmd := exec.Command("bash", "-c", "exec "+line)
	cmd.Dir, cmd.Env = dir, walkthroughEnv()
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	var stderr syncBuffer
	cmd.Stderr = &stderr
	require.NoError(t, cmd.Start())
	drained := make(chan struct{})
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGINT)
		<-drained
		_ = cmd.Wait()
	})
	var exports []string
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		l := sc.Text()
		if strings.HasPrefix(l, "export ") {
			exports = append(exports, l)
		}
		if strings.HasPrefix(l, "# Ctrl-C") {
			break
		}
	}
	go func() {
		defer close(drained)
		_, _ = io.Copy(io.Discard, stdout)
	}()
	require.Len(t, exports, 3, "serve's exports; stderr: %s", stderr.String())
	return strings.Join(exports, "\n")
}

// shell runs script in a new bash in dir, as a user's shell would.
func shell(t *testing.T, dir, script string) (stdout, stderr string, err error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-c", script)
	cmd.Dir, cmd.Env = dir, walkthroughEnv()
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err = cmd.Run()
	return o.String(), e.String(), err
}

// walkthroughEnv is a new user's environment: no KVCLI_ variables of the
// test's own, nothing else of kvwire's.
func walkthroughEnv() []string {
	var env []string
	for _, k := range []string{"PATH", "HOME", "TMPDIR"} {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	return env
}
