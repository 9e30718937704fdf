package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvwire/kvwire/internal/memcachedtest"
	"github.com/kvwire/kvwire/mockcluster"
)

// requireOneJSONDocument checks that out is exactly one JSON document
// (what python3 -m json.tool and jq accept) and decodes it into v.
func requireOneJSONDocument(t *testing.T, out string, v any) {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(out))
	require.NoError(t, dec.Decode(v), "not a JSON document: %q", out)
	_, err := dec.Token()
	require.True(t, errors.Is(err, io.EOF), "more than one JSON document (then %v): %q", err, out)
}

// TestEveryCommandJSONIsOneDocument runs every command with --json, in
// success and in failure, and checks that stdout is one JSON document:
// --json means one document per command, never JSON Lines (get of
// several keys and scan hold their items in an array). help prints text
// and is the one command without --json. With python3 on the machine,
// python3 -m json.tool must accept every output too.
func TestEveryCommandJSONIsOneDocument(t *testing.T) {
	_, env := newMock(t, mockcluster.Options{})
	seed := func(args ...string) {
		t.Helper()
		r := runKV(t, env, "", args...)
		require.Equal(t, exitOK, r.code, r)
	}
	seed("set", "a", "1")
	seed("set", "u:1", `{"name":"Ada"}`, "--json-doc")
	seed("incr", "n", "--initial", "1")

	// The CAS that unlocks "locked".
	seed("set", "locked", "v")
	r := runKV(t, env, "", "lock", "locked", "--json")
	var lock jsonResult
	requireOneJSONDocument(t, r.stdout, &lock)

	runs := []struct {
		name string
		env  map[string]string
		args []string
		code int
	}{
		// First, while the lock above holds (15 s).
		{"unlock", env, []string{"unlock", "locked", lock.Cas}, exitOK},
		{"get", env, []string{"get", "a"}, exitOK},
		{"get", env, []string{"get", "missing"}, exitNotFound},
		{"get", env, []string{"get", "a", "missing", "u:1"}, exitNotFound},
		{"set", env, []string{"set", "b", "2"}, exitOK},
		{"add", env, []string{"add", "a", "x"}, exitConflict},
		{"add", env, []string{"add", "c", "x"}, exitOK},
		{"replace", env, []string{"replace", "missing", "x"}, exitNotFound},
		{"append", env, []string{"append", "a", "x"}, exitOK},
		{"prepend", env, []string{"prepend", "a", "x"}, exitOK},
		{"touch", env, []string{"touch", "a", "1h"}, exitOK},
		{"exists", env, []string{"exists", "a"}, exitOK},
		{"exists", env, []string{"exists", "missing"}, exitNotFound},
		{"incr", env, []string{"incr", "n"}, exitOK},
		{"decr", env, []string{"decr", "n"}, exitOK},
		{"lock", env, []string{"lock", "a"}, exitOK},
		{"unlock", env, []string{"unlock", "b", "0x1"}, exitConflict},
		{"delete", env, []string{"delete", "c"}, exitOK},
		{"lookup", env, []string{"lookup", "u:1", "name", "nope", "--xattr", "$document.CAS"}, exitNotFound},
		{"mutate", env, []string{"mutate", "u:1", "upsert", "age", "36", "incr", "logins", "1"}, exitOK},
		{"ping", env, []string{"ping"}, exitOK},
		{"diag", env, []string{"diag"}, exitOK},
		{"diag", env, []string{"diag", "--wait", "10s"}, exitOK},
		{"route", env, []string{"route", "a"}, exitOK},
		{"scan", env, []string{"scan"}, exitOK},
		{"scan", env, []string{"scan", "--keys-only", "--prefix", "u:"}, exitOK},
		{"stats", env, []string{"stats"}, exitOK},
		{"flush", env, []string{"flush", "--yes"}, exitError}, // Couchbase buckets flush over REST
		{"bench", env, []string{"bench", "--ops", "200", "--keys", "20", "--concurrency", "2"}, exitOK},
		{"demo", nil, []string{"demo"}, exitOK},
		{"get", with(env, envPassword, "wrong"), []string{"get", "a"}, exitError},
		{"bench", with(env, envPassword, "wrong"), []string{"bench", "--ops", "10"}, exitError},
		{"scan", with(env, envPassword, "wrong"), []string{"scan"}, exitError},
	}
	python, _ := exec.LookPath("python3")
	covered := map[string]bool{"help": true, "serve": true} // serve: below
	for _, run := range runs {
		covered[run.name] = true
		r := runKV(t, run.env, "", append(run.args, "--json")...)
		assert.Equal(t, run.code, r.code, "%v: %s", run.args, r)
		var v any
		requireOneJSONDocument(t, r.stdout, &v)
		if python != "" {
			checkJSONTool(t, python, r.stdout, run.args)
		}
	}

	// serve prints one object, then runs until interrupted.
	ctx, cancel := context.WithCancel(context.Background())
	bg := startKvcli(ctx, []string{"serve", "--json", "--nodes", "1"}, nil)
	waitFor(t, 20e9, "serve's JSON", func() bool { return strings.HasSuffix(bg.stdout.String(), "}\n") })
	cancel()
	require.Equal(t, exitOK, <-bg.done, bg.stderr.String())
	var v any
	requireOneJSONDocument(t, bg.stdout.String(), &v)
	if python != "" {
		checkJSONTool(t, python, bg.stdout.String(), []string{"serve"})
	}

	for _, c := range commands {
		assert.True(t, covered[c.name], "command %s has no --json check here", c.name)
	}

	// flush and stats of memcached servers: one server of the test's own
	// (a flush must not touch the instances other test runs share).
	t.Run("memcached", func(t *testing.T) {
		env := map[string]string{envConnStr: "memcached://" + memcachedtest.Start(t)}
		for _, args := range [][]string{{"flush", "--yes"}, {"stats", "settings"}, {"get", "a", "b"}} {
			r := runKV(t, env, "", append(args, "--json")...)
			var v any
			requireOneJSONDocument(t, r.stdout, &v)
			if python != "" {
				checkJSONTool(t, python, r.stdout, args)
			}
		}
	})
}

// checkJSONTool runs python3 -m json.tool on out.
func checkJSONTool(t *testing.T, python, out string, args []string) {
	t.Helper()
	cmd := exec.Command(python, "-m", "json.tool")
	cmd.Stdin = strings.NewReader(out)
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = io.Discard, &stderr
	assert.NoError(t, cmd.Run(), "%v: python3 -m json.tool: %s", args, stderr.String())
}

// A usage error prints nothing on stdout, with --json too (doc.go:
// "A usage error (exit 2) prints nothing on stdout"), also when it is a
// connection string option that only connecting reads.
func TestJSONUsageErrorPrintsNothingOnStdout(t *testing.T) {
	for _, args := range [][]string{
		{"get", "a", "--bogus"},
		{"get", "a", "-c", "ftp://x"},
		{"get", "a", "-c", "couchbase://127.0.0.1:1/b?kv_timeout=soon"},
		{"set", "a", "b", "-c", "memcached://127.0.0.1:1?connect_timeout=soon"},
	} {
		r := runKV(t, map[string]string{}, "", append(args, "--json")...)
		assert.Equal(t, exitUsage, r.code, "%v: %s", args, r)
		assert.Empty(t, r.stdout, "%v", args)
		assert.Contains(t, r.stderr, "kvcli: ", "%v", args)
	}
}
