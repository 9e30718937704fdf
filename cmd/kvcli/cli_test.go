package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvwire/kvwire/client"
	"github.com/kvwire/kvwire/internal/faultnode"
	"github.com/kvwire/kvwire/memdx"
	"github.com/kvwire/kvwire/mockcluster"
)

func TestUsage(t *testing.T) {
	none := map[string]string{}
	cases := []struct {
		args []string
		want string // in stderr
	}{
		{nil, "usage: kvcli"},
		{[]string{"frobnicate"}, `unknown command "frobnicate"`},
		{[]string{"get"}, "get takes KEY..., got 0 argument(s)"},
		{[]string{"get", "a", "b", "--touch", "1m"}, "--touch takes one KEY, got 2"},
		{[]string{"get", "a", strings.Repeat("k", 251)}, "key of 251 bytes: a key has 1 to 250 bytes"},
		{[]string{"set", "a"}, "set takes KEY VALUE"},
		{[]string{"unlock", "a"}, "unlock takes KEY CAS"},
		{[]string{"ping", "extra"}, "ping takes no arguments"},
		{[]string{"get", "--bogus", "a"}, "kvcli: get: unknown flag --bogus (-h lists the flags)\n"},
		{[]string{"--bogus"}, "kvcli: unknown flag --bogus (-h lists the flags)\n"},
		{[]string{"get", "a", "-t", "soon"}, `kvcli: get: -t "soon": want a duration such as 2.5s, 500ms, 1m or 1h30m (units ns, us, ms, s, m, h)` + "\n"},
		{[]string{"get", "a", "--timeout", "1x"}, `kvcli: get: --timeout "1x": want a duration such as 2.5s, 500ms`},
		{[]string{"--timeout=1x", "get", "a"}, `kvcli: --timeout "1x": want a duration such as 2.5s, 500ms`},
		{[]string{"get", "a", "--touch"}, "kvcli: get: --touch needs a value\n"},
		{[]string{"get", "a", "--json=maybe"}, `kvcli: get: --json "maybe": want true or false (--json alone means true)`},
		{[]string{"bench", "--concurrency", "many"}, `kvcli: bench: --concurrency "many": want a whole number, such as 16`},
		{[]string{"get", "a", "-t", "0s"}, "must be positive"},
		{[]string{"get", "a", "-c", "ftp://x"}, `kvcli: invalid connection string "ftp://x": unknown scheme "ftp"`},
		{[]string{"get", "a", "-c", "couchbase://h/b?no_such_option=1"}, `kvcli: invalid connection string "couchbase://h/b?no_such_option=1": unknown option "no_such_option"`},
		{[]string{"get", "a", "-c", "couchbase://h/b?kv_timeout=soon"}, `kvcli: invalid connection string option "kv_timeout=soon": not a duration`},
		// A password in the connection string is masked where it is quoted.
		{[]string{"get", "a", "-c", "couchbase://app:s3cr3t@h/b"}, `kvcli: invalid connection string "couchbase://app:****@h/b": credentials cannot be given in the connection string`},
		{[]string{"get", "a", "-c", "couchbase://h/b?password=s3cr3t"}, `kvcli: invalid connection string "couchbase://h/b?password=****": unknown option "password"`},
		{[]string{"get", "a", "-c", "memcached://h", "-b", "x"}, "memcached:// has no buckets"},
		{[]string{"get", "a", "-c", "memcached://h", "--collection", "s.c"}, "memcached:// has no collections"},
		{[]string{"get", "a", "--collection", ".c"}, "want scope.collection"},
		{[]string{"get", "a", "--cacert", "/no/such/file"}, "--cacert"},
		{[]string{"set", "a", "b", "--cas", "zz"}, `CAS "zz"`},
		{[]string{"set", "a", "b", "--flags", "4294967296"}, "does not fit 32 bits"},
		{[]string{"add", "a", "b", "--cas", "1"}, "unknown flag --cas"},
		{[]string{"bench", "--ratio", "2"}, "--ratio 2"},
		{[]string{"bench", "--concurrency", "0"}, "--concurrency 0"},
		{[]string{"serve", "--nodes", "0"}, "--nodes 0"},
		{[]string{"serve", "--cacert-out", "x"}, "--cacert-out needs --tls"},
		{[]string{"serve", "-c", "x"}, "unknown flag -c"},
		{[]string{"help", "nope"}, `unknown command "nope"`},
		{[]string{"get", ""}, "key of 0 bytes"},
		{[]string{"set", strings.Repeat("k", 251), "v"}, "key of 251 bytes: a key has 1 to 250 bytes"},
	}
	for _, c := range cases {
		// Validation that needs no server runs before connecting; the ones
		// that do connect point at a closed port and must not get there.
		r := runKV(t, with(none, envConnStr, "couchbase://127.0.0.1:1/default"), "", c.args...)
		assert.Equal(t, exitUsage, r.code, "%v: %s", c.args, r)
		assert.Contains(t, r.stderr, c.want, "%v", c.args)
		assert.NotContains(t, r.stderr, "nothing is listening", "%v: usage errors are found before connecting", c.args)
		assert.NotContains(t, r.stderr, "kvwire:", "%v: one prefix, kvcli's", c.args)
	}
	// A connection string from the environment says so.
	r := runKV(t, with(none, envConnStr, "couchbase://h/b?kv_timeout=soon"), "", "get", "a")
	assert.Equal(t, exitUsage, r.code, r)
	assert.Equal(t, `kvcli: invalid connection string option "kv_timeout=soon" (from KVCLI_CONNSTR): not a duration (use e.g. 2500ms or 2500)`+"\n", r.stderr)
}

func TestHelp(t *testing.T) {
	for _, args := range [][]string{{"help"}, {"-h"}, {"--help"}} {
		r := runKV(t, nil, "", args...)
		require.Equal(t, exitOK, r.code, "%v: %s", args, r)
		for _, c := range commands {
			assert.Contains(t, r.stdout, "\n  "+c.name+" ", "%v lists %s", args, c.name)
		}
		for _, s := range []string{"exit status:", "  0    success", "  2    usage", "  3    document not found",
			"  4    conflict", "KVCLI_PASSWORD", "KVCLI_CONNSTR", "@FILE", `"encoding":"base64"`} {
			assert.Contains(t, r.stdout, s, "%v", args)
		}
	}
	for _, c := range commands { // help too: kvcli help lists it as a command
		for _, args := range [][]string{{c.name, "-h"}, {"help", c.name}} {
			r := runKV(t, nil, "", args...)
			assert.Equal(t, exitOK, r.code, "%v: %s", args, r)
			assert.Contains(t, r.stdout, "usage: kvcli "+c.name, "%v", args)
		}
	}
	// Each command's own flags are in its -h (README and kvcli help say so).
	for cmd, flags := range map[string][]string{
		"get":    {"--touch"},
		"set":    {"--expiry", "--flags", "--json-doc", "--cas", "--raw"},
		"add":    {"--expiry", "--flags", "--raw"},
		"delete": {"--cas"},
		"lock":   {"--lock-time"},
		"incr":   {"--delta", "--initial", "--expiry"},
		"decr":   {"--delta", "--initial", "--expiry"},
		"bench":  {"--concurrency", "--ratio", "--value-size", "--keys", "--duration", "--ops", "--preload", "--seed", "--key-prefix"},
		"serve":  {"--nodes", "--vbuckets", "--replicas", "--tls", "--cacert-out"},
	} {
		for _, args := range [][]string{{cmd, "-h"}, {"help", cmd}} {
			r := runKV(t, nil, "", args...)
			for _, f := range flags {
				assert.Contains(t, r.stdout, "\n  "+f+" ", "%v lists %s", args, f)
			}
		}
	}
	r := runKV(t, nil, "", "set", "-h")
	assert.Contains(t, r.stdout, "--expiry", "command flags are listed")
	assert.NotContains(t, r.stdout, "--connstr", "global flags are left to kvcli help")
	r = runKV(t, nil, "", "serve", "-h")
	assert.Contains(t, r.stdout, "--password", "serve lists its own flags, which share global names")
}

// closedAddr returns a loopback address nothing listens on, held (bound,
// never listening) until the test ends so that no listener opened later is
// given its port.
func closedAddr(t *testing.T) string {
	t.Helper()
	p, err := faultnode.NewClosedPort()
	require.NoError(t, err)
	t.Cleanup(p.Close)
	return p.Addr()
}

func TestConnectErrors(t *testing.T) {
	const secret = "s3cr3t-Pa55word"
	mc, env := newMock(t, mockcluster.Options{})
	_ = mc

	t.Run("wrong password", func(t *testing.T) {
		for _, args := range [][]string{
			{"get", "k"},
			{"get", "k", "-v"},
			{"get", "k", "--json"},
			{"set", "k", "v", "-v", "--json"},
		} {
			r := runKV(t, with(env, envPassword, secret), "", args...)
			assert.Equal(t, exitError, r.code, "%v: %s", args, r)
			assert.Contains(t, r.stderr, `kvcli: authentication failed for user "Administrator" (from KVCLI_USER): check the user name and password (KVCLI_PASSWORD)`, "%v", args)
			assert.NotContains(t, r.stderr+r.stdout, secret, "%v: the password is never printed", args)
			if strings.Contains(strings.Join(args, " "), "--json") {
				var jr jsonResult
				require.NoError(t, json.Unmarshal([]byte(r.stdout), &jr), r.stdout)
				require.NotNil(t, jr.Error)
				assert.Equal(t, kindAuth, jr.Error.Kind)
				assert.Equal(t, exitError, jr.Error.Exit)
			}
		}
		// -p works, warns, and is not echoed either.
		r := runKV(t, with(env, envPassword, ""), "", "get", "k", "-p", secret, "-v")
		assert.Equal(t, exitError, r.code, r)
		assert.Contains(t, r.stderr, "warning: -p shows the password in the process list; set KVCLI_PASSWORD instead")
		assert.NotContains(t, r.stderr+r.stdout, secret)
		r = runKV(t, with(env, envPassword, ""), "", "set", "k", "v", "-p", mockcluster.DefaultPassword)
		assert.Equal(t, exitOK, r.code, "-p with the right password: %s", r)
	})

	t.Run("wrong user", func(t *testing.T) {
		r := runKV(t, with(env, envUser, "nobody"), "", "get", "k")
		assert.Equal(t, exitError, r.code, r)
		assert.Contains(t, r.stderr, `authentication failed for user "nobody" (from KVCLI_USER)`)
		// -u is the user's own choice: nothing to point at.
		r = runKV(t, with(env, envUser, ""), "", "get", "k", "-u", "nobody")
		assert.Equal(t, exitError, r.code, r)
		assert.Contains(t, r.stderr, `authentication failed for user "nobody": check`)
	})

	t.Run("no user", func(t *testing.T) {
		r := runKV(t, with(env, envUser, "", envPassword, ""), "", "get", "k")
		assert.Equal(t, exitError, r.code, r)
		assert.Contains(t, r.stderr, "set -u (or KVCLI_USER) and KVCLI_PASSWORD")
	})

	t.Run("unknown bucket", func(t *testing.T) {
		r := runKV(t, env, "", "get", "k", "-b", "travel")
		assert.Equal(t, exitError, r.code, r)
		assert.Equal(t, "kvcli: bucket \"travel\" does not exist or user \"Administrator\" may not access it\n", r.stderr)
		r = runKV(t, env, "", "get", "k", "-b", "travel", "--json")
		assert.Contains(t, r.stdout, `"kind":"bucket"`)
	})

	t.Run("nothing listening", func(t *testing.T) {
		a, b := closedAddr(t), closedAddr(t)
		r := runKV(t, with(env, envConnStr, "couchbase://"+a+","+b+"/default"), "", "get", "k")
		assert.Equal(t, exitError, r.code, r)
		assert.Equal(t, "kvcli: nothing is listening at "+a+", "+b+" (is the cluster running? check -c)\n", r.stderr)
		r = runKV(t, with(env, envConnStr, "couchbase://"+a), "", "get", "k", "--json")
		assert.Contains(t, r.stdout, `"kind":"unreachable"`)
	})

	t.Run("default connection string", func(t *testing.T) {
		// Nothing in the environment: couchbase://127.0.0.1/default. (Not
		// dialed: something may listen on 11210 where the tests run.)
		inv := &invocation{env: &env_{getenv: func(string) string { return "" }}}
		inv.g.connStr = defaultConnStr
		tg, err := inv.resolveTarget()
		require.NoError(t, err)
		assert.Equal(t, "couchbase://127.0.0.1:11210/default", tg.connStr)
		inv.g.bucket = "travel"
		tg, err = inv.resolveTarget()
		require.NoError(t, err)
		assert.Equal(t, "couchbase://127.0.0.1:11210/travel", tg.connStr, "-b replaces the path")
		inv.g.bucket, inv.g.connStr = "", "couchbase://h1,h2"
		tg, err = inv.resolveTarget()
		require.NoError(t, err)
		assert.Equal(t, "couchbase://h1:11210,h2:11210/default", tg.connStr, "no path: bucket default")
	})
}

func TestTimeoutExplained(t *testing.T) {
	mc, env := newMock(t, mockcluster.Options{})
	require.Equal(t, exitOK, runKV(t, env, "", "set", "k", "v").code)

	// TMPFAIL on every SET: retried until the timeout, and the line says
	// what was retried and why.
	h := mc.AddFault(mockcluster.Fault{
		Match:  mockcluster.Match{Key: "k", OpCodes: []memdx.OpCode{memdx.OpSet}},
		Action: mockcluster.Action{Status: memdx.StatusTmpFail},
	})
	defer h.Remove()
	r := runKV(t, env, "", "set", "k", "v2", "-t", "250ms")
	assert.Equal(t, exitError, r.code, r)
	assert.Regexp(t, `^kvcli: timed out after 250ms; retried \d+ times? for KV_TEMPORARY_FAILURE: the server kept answering TMPFAIL`, r.stderr)
	assert.Equal(t, "v", value(t, mc, "k"))

	// The connection string's kv_timeout applies unless -t is given.
	r = runKV(t, with(env, envConnStr, env[envConnStr]+"?kv_timeout=150ms"), "", "set", "k", "v2")
	assert.Contains(t, r.stderr, "timed out after 150ms", r)
	r = runKV(t, with(env, envConnStr, env[envConnStr]+"?kv_timeout=150ms"), "", "set", "k", "v2", "-t", "200ms")
	assert.Contains(t, r.stderr, "timed out after 200ms", r)

	r = runKV(t, env, "", "set", "k", "v2", "-t", "200ms", "--json")
	var jr jsonResult
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &jr), r.stdout)
	require.NotNil(t, jr.Error)
	assert.Equal(t, kindTimeout, jr.Error.Kind)
	assert.Greater(t, jr.Retries, 0)
	assert.Equal(t, []string{"KV_TEMPORARY_FAILURE"}, jr.RetryReasons)
}

// A server's answer with extended error information (XERROR: its context
// and ref) that an operation kept getting until it timed out: the line
// says what the server said, and --json has it too.
func TestTimeoutShowsTheServersErrorContext(t *testing.T) {
	mc, env := newMock(t, mockcluster.Options{})
	require.Equal(t, exitOK, runKV(t, env, "", "set", "k", "v").code)

	h := mc.AddFault(mockcluster.Fault{
		Match: mockcluster.Match{Key: "k", OpCodes: []memdx.OpCode{memdx.OpSet}},
		Action: mockcluster.Action{Status: memdx.StatusTmpFail,
			Value: []byte(`{"error":{"context":"vbucket warming up","ref":"9e1a7c52-0d4b"}}`)},
	})
	defer h.Remove()
	r := runKV(t, env, "", "set", "k", "v2", "-t", "150ms")
	assert.Equal(t, exitError, r.code, r)
	assert.Regexp(t, `^kvcli: timed out after 150ms; retried \d+ times? for KV_TEMPORARY_FAILURE: .*; the server said "vbucket warming up" \(ref 9e1a7c52-0d4b\)\n$`, r.stderr)
	assert.Equal(t, 1, strings.Count(r.stderr, "9e1a7c52-0d4b"), "the ref once: %s", r.stderr)

	// -v adds the client's full error, which says the server's words once
	// too (its cause, the last answer's status error, says them as well).
	r = runKV(t, env, "", "set", "k", "v2", "-t", "150ms", "-v")
	assert.Equal(t, exitError, r.code, r)
	var detail string
	for _, l := range strings.Split(r.stderr, "\n") {
		if d, ok := strings.CutPrefix(l, "kvcli: detail: "); ok {
			detail = d
		}
	}
	require.NotEmpty(t, detail, "-v's detail line: %s", r.stderr)
	assert.Contains(t, detail, `[server: vbucket warming up; ref 9e1a7c52-0d4b]`)
	assert.Equal(t, 1, strings.Count(detail, "vbucket warming up"), "the context once: %s", detail)
	assert.Equal(t, 1, strings.Count(detail, "9e1a7c52-0d4b"), "the ref once: %s", detail)

	r = runKV(t, env, "", "set", "k", "v2", "-t", "150ms", "--json")
	var jr jsonResult
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &jr), r.stdout)
	require.NotNil(t, jr.Error)
	assert.Equal(t, "vbucket warming up", jr.Error.ServerContext)
	assert.Equal(t, "9e1a7c52-0d4b", jr.Error.ServerRef)
}

// TestInterrupted: Ctrl-C (the context canceled) while an operation waits
// on a lock ends it with exit status 130 and the word "interrupted". The
// cancel comes after a LOCKED answer, in a retry's wait or while the next
// attempt is on the wire, as the scheduler has it: the second says the write
// may have been applied (TestInterruptedWriteInFlight pins that case down).
func TestInterrupted(t *testing.T) {
	_, env := newMock(t, mockcluster.Options{})
	require.Equal(t, exitOK, runKV(t, env, "", "set", "k", "v").code)
	require.Equal(t, exitOK, runKV(t, env, "", "lock", "k").code)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stdout, stderr syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"set", "k", "w", "-v", "-t", "20s"}, &env_{
			stdin: strings.NewReader(""), stdout: &stdout, stderr: &stderr,
			getenv: func(k string) string { return env[k] },
		})
	}()
	waitFor(t, 10*time.Second, "a LOCKED retry", func() bool { return strings.Contains(stderr.String(), "(retry: KV_LOCKED)") })
	cancel()
	select {
	case code := <-done:
		assert.Equal(t, exitInterrupted, code, stderr.String())
	case <-time.After(10 * time.Second):
		t.Fatal("the operation did not end on interrupt")
	}
	assert.Regexp(t, `(?m)^kvcli: interrupted(| after the request was sent: it may have been applied \(read "k" to see\))$`, stderr.String())
	assert.Empty(t, stdout.String())

	// Canceled before connecting: nothing was sent.
	r := runKVCtx(ctx, env, "", "get", "k")
	assert.Equal(t, exitInterrupted, r.code, r)
	assert.Equal(t, "kvcli: interrupted\n", r.stderr)
}

// TestExitCodesDocumented: kvcli help and the package doc list every exit
// status with the value the code uses.
func TestExitCodesDocumented(t *testing.T) {
	src, err := os.ReadFile("doc.go")
	require.NoError(t, err)
	var help strings.Builder
	printUsage(&help)
	for code, word := range map[int]string{
		exitOK: "success", exitError: "the operation failed", exitUsage: "usage",
		exitNotFound: "document not found", exitConflict: "conflict", exitInterrupted: "interrupted",
	} {
		line := fmt.Sprintf("%-4d %s", code, word)
		assert.Contains(t, help.String(), "  "+line, "kvcli help")
		assert.Contains(t, string(src), "//\t"+line, "doc.go")
	}
}

// TestAmbiguousWrite: a connection that dies after the server applied a
// set and before it answered. The write is not retried, and the line says
// it may have been applied.
func TestAmbiguousWrite(t *testing.T) {
	mc, env := newMock(t, mockcluster.Options{})
	h := mc.AddFault(mockcluster.Fault{
		Match:  mockcluster.Match{Key: "k", OpCodes: []memdx.OpCode{memdx.OpSet}},
		Action: mockcluster.Action{Close: mockcluster.CloseAfterApply},
		Times:  1,
	})
	defer h.Remove()
	r := runKV(t, env, "", "set", "k", "v", "--json")
	assert.Equal(t, exitError, r.code, r)
	assert.Regexp(t, `^kvcli: no answer from 127\.0\.0\.1:\d+ after the request was sent: it may have been applied \(read "k" to see\)`, r.stderr)
	assert.Contains(t, r.stdout, `"kind":"ambiguous"`)
	assert.Equal(t, "v", value(t, mc, "k"), "it was applied")
	assert.Equal(t, uint64(1), mc.Bucket(mockcluster.DefaultBucket).MutationCount("_default", "_default", "k"), "once")
}

// TestInterruptedWriteInFlight: Ctrl-C while a set is on the wire (the
// server applied it and holds the answer) keeps exit 130 but says the
// write may have been applied, on stderr and in --json.
func TestInterruptedWriteInFlight(t *testing.T) {
	mc, env := newMock(t, mockcluster.Options{})
	b := mc.Bucket(mockcluster.DefaultBucket)
	for _, jsonOut := range []bool{false, true} {
		key := fmt.Sprintf("w-%v", jsonOut)
		// The mock applies the set at once and holds its answer; closing
		// the mock at cleanup releases the held connection.
		h := mc.AddFault(mockcluster.Fault{
			Match:  mockcluster.Match{Key: key, OpCodes: []memdx.OpCode{memdx.OpSet}},
			Action: mockcluster.Action{Delay: time.Minute},
			Times:  1,
		})
		defer h.Remove()
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		args := []string{"set", key, "v", "-t", "30s"}
		if jsonOut {
			args = append(args, "--json")
		}
		bg := startKvcli(ctx, args, env)
		done, stdout, stderr := bg.done, &bg.stdout, &bg.stderr
		waitFor(t, 10*time.Second, "the set applied", func() bool {
			return b.MutationCount(client.DefaultScope, client.DefaultCollection, key) == 1
		})
		cancel()
		var code int
		select {
		case code = <-done:
		case <-time.After(10 * time.Second):
			t.Fatal("the set did not end on interrupt")
		}
		assert.Equal(t, exitInterrupted, code, stderr.String())
		assert.Equal(t, "kvcli: interrupted after the request was sent: it may have been applied (read \""+key+"\" to see)\n", stderr.String())
		if jsonOut {
			var jr jsonResult
			require.NoError(t, json.Unmarshal([]byte(stdout.String()), &jr), stdout.String())
			require.NotNil(t, jr.Error)
			assert.Equal(t, kindInterrupted, jr.Error.Kind)
			assert.Equal(t, exitInterrupted, jr.Error.Exit)
			assert.True(t, jr.Error.Ambiguous, "--json marks the write as possibly applied: %s", stdout.String())
			assert.Contains(t, jr.Error.Message, "may have been applied")
		} else {
			assert.Empty(t, stdout.String())
		}
	}

	// Interrupted before anything was sent: not ambiguous.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	r := runKVCtx(ctx, env, "", "set", "k", "v", "--json")
	assert.Equal(t, exitInterrupted, r.code, r)
	assert.Equal(t, "kvcli: interrupted\n", r.stderr)
	assert.NotContains(t, r.stdout, `"ambiguous"`)
}

// TestConnectTimeoutNamed: a server that accepts and never answers. The
// line names the connect timeout actually used and where it came from;
// --connect-timeout wins over the connection string's connect_timeout, as
// -t wins over kv_timeout.
func TestConnectTimeoutNamed(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	var mu sync.Mutex
	var conns []net.Conn
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c) // held open, never read
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		l.Close()
		<-done
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	addr := l.Addr().String()
	env := map[string]string{envConnStr: "couchbase://" + addr + "/default", envUser: "u", envPassword: "pw-silent"}
	for _, tc := range []struct {
		connOpt string
		args    []string
		want    string
	}{
		{"?connect_timeout=200ms", nil, "within 200ms (connect_timeout in the connection string)"},
		{"?connect_timeout=30s", []string{"--connect-timeout", "150ms"}, "within 150ms (--connect-timeout)"},
		{"", []string{"--connect-timeout", "100ms"}, "within 100ms (--connect-timeout)"},
	} {
		start := time.Now()
		r := runKV(t, with(env, envConnStr, env[envConnStr]+tc.connOpt), "", append([]string{"get", "k"}, tc.args...)...)
		elapsed := time.Since(start)
		assert.Equal(t, exitError, r.code, r)
		assert.Equal(t, "kvcli: no answer from "+addr+" "+tc.want+": firewall, wrong port, or a server that is not Couchbase/memcached?\n", r.stderr)
		assert.Less(t, elapsed, 10*time.Second, "%s %v: the timeout named is the one used", tc.connOpt, tc.args)
	}
}

// profile=wan_development gives kvcli the profile's timeouts where -t,
// --connect-timeout, kv_timeout and connect_timeout say nothing.
func TestProfileTimeouts(t *testing.T) {
	for _, c := range []struct {
		connStr     string
		flags       []string
		op, connect time.Duration
		from        string
	}{
		{"couchbases://h/b", nil, 2500 * time.Millisecond, 10 * time.Second, "the default --connect-timeout"},
		{"couchbases://h/b?profile=wan_development", nil, 20 * time.Second, 20 * time.Second, "the connection string's profile"},
		{"couchbases://h/b?profile=wan_development&kv_timeout=4s", nil, 4 * time.Second, 20 * time.Second, "the connection string's profile"},
		{"couchbases://h/b?profile=wan_development&connect_timeout=7s", nil, 20 * time.Second, 7 * time.Second, "connect_timeout in the connection string"},
		{"couchbases://h/b?profile=wan_development", []string{"-t", "1s", "--connect-timeout", "3s"}, time.Second, 3 * time.Second, "--connect-timeout"},
	} {
		inv := &invocation{env: &env_{getenv: func(string) string { return "" }}}
		inv.g = globals{connStr: c.connStr, timeout: 2500 * time.Millisecond, connectTimeout: 10 * time.Second}
		fs := inv.newFlagSet("get")
		require.NoError(t, fs.Parse(c.flags))
		inv.noteFlags(fs)
		tg, err := inv.resolveTarget()
		require.NoError(t, err)
		inv.resolveTimeouts(tg)
		assert.Equal(t, c.op, inv.opTimeout, "%s %v", c.connStr, c.flags)
		assert.Equal(t, c.connect, inv.connectTimeout, "%s %v", c.connStr, c.flags)
		assert.Equal(t, c.from, inv.connectTimeoutFrom, "%s %v", c.connStr, c.flags)
	}
	// An unknown profile is the client's to refuse, as a usage error.
	r := runKV(t, map[string]string{envConnStr: "couchbase://127.0.0.1:1/b?profile=lan"}, "", "get", "k")
	assert.Equal(t, exitUsage, r.code, r)
	assert.Equal(t, `kvcli: invalid connection string option "profile=lan" (from KVCLI_CONNSTR): unknown configuration profile (known: wan_development)`+"\n", r.stderr)
}

// Credentials in the connection string are refused; the line says how a
// shell user gives them (the client's reason names its Go options).
func TestConnStrCredentialsSaysHowToGiveThem(t *testing.T) {
	for _, cs := range []string{"couchbase://app:s3cr3t@h/b", "memcached://app:s3cr3t@h"} {
		r := runKV(t, map[string]string{}, "", "get", "a", "-c", cs)
		assert.Equal(t, exitUsage, r.code, r)
		assert.Contains(t, r.stderr, "credentials cannot be given in the connection string: use -u (or KVCLI_USER) and KVCLI_PASSWORD", cs)
		assert.NotContains(t, r.stderr, "Options.", cs)
		assert.NotContains(t, r.stderr, "s3cr3t", cs)
	}
}

// A wrong password given with -p: the line points at -p, where the
// password came from, not at KVCLI_PASSWORD, which was not used.
func TestWrongPasswordFromFlagNamesTheFlag(t *testing.T) {
	_, env := newMock(t, mockcluster.Options{})
	r := runKV(t, with(env, envPassword, ""), "", "get", "k", "-p", "s3cr3t-wrong")
	assert.Equal(t, exitError, r.code, r)
	assert.Contains(t, r.stderr, `kvcli: authentication failed for user "Administrator" (from KVCLI_USER): check the user name and the password given with -p`+"\n")
	assert.NotContains(t, r.stderr, "s3cr3t-wrong")
	// -p wins over KVCLI_PASSWORD: the line names -p then too.
	r = runKV(t, with(env, envPassword, "password"), "", "get", "k", "-p", "s3cr3t-wrong")
	assert.Contains(t, r.stderr, `check the user name and the password given with -p`)
}

// A negative number as an argument reads as a flag to the flag parser:
// the error says how to pass it (after --), as the manual does, rather
// than only that -5 is not a flag.
func TestNegativeNumberArgumentSaysToUseDashDash(t *testing.T) {
	for _, args := range [][]string{
		{"set", "k", "-5"},
		{"mutate", "k", "incr", "n", "-1"},
	} {
		r := runKV(t, map[string]string{envConnStr: "couchbase://127.0.0.1:1/default"}, "", args...)
		assert.Equal(t, exitUsage, r.code, "%v: %s", args, r)
		n := args[len(args)-1]
		assert.Contains(t, r.stderr, "unknown flag "+n+" (-h lists the flags; an argument that starts with - goes after --, as in kvcli "+args[0]+" -- ", "%v", args)
	}
	// It works that way.
	_, env := newMock(t, mockcluster.Options{})
	r := runKV(t, env, "", "set", "--", "k", "-5")
	require.Equal(t, exitOK, r.code, r)
	r = runKV(t, env, "", "get", "k")
	assert.Equal(t, "-5", r.stdout)
}

// A status retried because the node's error map says so (EBUSY: "temp",
// "retry-now") is retried for KV_ERROR_MAP_RETRY_INDICATED: the line names
// the status the server kept answering, and does not call the last EBUSY
// an answer no retry was made for (its reason is the retries' reason).
func TestTimeoutExplainedForAnErrorMapRetry(t *testing.T) {
	mc, env := newMock(t, mockcluster.Options{})
	require.Equal(t, exitOK, runKV(t, env, "", "set", "k", "v").code)
	h := mc.AddFault(mockcluster.Fault{
		Match:  mockcluster.Match{Key: "k", OpCodes: []memdx.OpCode{memdx.OpSet}},
		Action: mockcluster.Action{Status: memdx.StatusBusy},
	})
	defer h.Remove()
	r := runKV(t, env, "", "set", "k", "v2", "-t", "250ms")
	assert.Equal(t, exitError, r.code, r)
	assert.Regexp(t, `^kvcli: timed out after 250ms; retried \d+ times? for KV_ERROR_MAP_RETRY_INDICATED: the server kept answering EBUSY, a status its error map says to retry(; the server said "[^"]*")?\n$`, r.stderr)
	assert.Equal(t, "v", value(t, mc, "k"))
}
