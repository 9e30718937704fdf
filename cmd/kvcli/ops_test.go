package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvwire/kvwire/client"
	"github.com/kvwire/kvwire/memdx"
	"github.com/kvwire/kvwire/mockcluster"
)

// doc reads a document straight from the mock.
func doc(t *testing.T, mc *mockcluster.Cluster, key string) (mockcluster.Document, bool) {
	t.Helper()
	return mc.Bucket(mockcluster.DefaultBucket).Get(client.DefaultScope, client.DefaultCollection, key)
}

func value(t *testing.T, mc *mockcluster.Cluster, key string) string {
	t.Helper()
	d, ok := doc(t, mc, key)
	require.True(t, ok, "document %q should exist", key)
	return string(d.Value)
}

var casRE = regexp.MustCompile(`cas=(0x[0-9a-f]{16})`)

func TestStoreGetDelete(t *testing.T) {
	mc, env := newMock(t, mockcluster.Options{})

	r := runKV(t, env, "", "set", "k", "v1")
	require.Equal(t, exitOK, r.code, r)
	assert.Regexp(t, `^stored "k" cas=0x[0-9a-f]{16}\n$`, r.stdout)
	assert.Equal(t, "v1", value(t, mc, "k"))

	r = runKV(t, env, "", "get", "k")
	require.Equal(t, exitOK, r.code, r)
	assert.Equal(t, "v1", r.stdout, "the value exactly, no newline when stdout is not a terminal")
	d, _ := doc(t, mc, "k")
	assert.Contains(t, r.stderr, `"k" cas=`+fmtCas(d.Cas)+" flags=0x03000000", "a value set on a Couchbase bucket has the binary common flags")

	r = runKV(t, env, "", "get", "missing")
	assert.Equal(t, exitNotFound, r.code, r)
	assert.Equal(t, "", r.stdout)
	assert.Equal(t, "kvcli: document \"missing\" not found\n", r.stderr)

	r = runKV(t, env, "", "add", "k", "v")
	assert.Equal(t, exitConflict, r.code, r)
	assert.Contains(t, r.stderr, `document "k" already exists`)
	r = runKV(t, env, "", "add", "k2", "fresh", "--expiry", "1h", "--flags", "7")
	require.Equal(t, exitOK, r.code, r)
	d, _ = doc(t, mc, "k2")
	assert.Equal(t, uint32(7), d.Flags)
	assert.False(t, d.Expiry.IsZero(), "--expiry sets an expiry")

	r = runKV(t, env, "", "replace", "nothere", "v")
	assert.Equal(t, exitNotFound, r.code, r)
	r = runKV(t, env, "", "replace", "k", "v2", "--cas", "0x1")
	assert.Equal(t, exitConflict, r.code, r)
	assert.Contains(t, r.stderr, `CAS mismatch on "k"`)
	assert.Equal(t, "v1", value(t, mc, "k"), "a CAS mismatch writes nothing")
	d, _ = doc(t, mc, "k")
	r = runKV(t, env, "", "replace", "k", "v2", "--cas", fmtCas(d.Cas))
	require.Equal(t, exitOK, r.code, r)
	assert.Equal(t, "v2", value(t, mc, "k"))

	r = runKV(t, env, "", "append", "k", "--", "-post") // -- : a value starting with a dash
	require.Equal(t, exitOK, r.code, r)
	assert.Contains(t, r.stdout, `appended to "k" cas=`)
	r = runKV(t, env, "", "prepend", "k", "pre-")
	require.Equal(t, exitOK, r.code, r)
	assert.Equal(t, "pre-v2-post", value(t, mc, "k"))
	r = runKV(t, env, "", "append", "nothere", "x")
	assert.Equal(t, exitNotFound, r.code, r)

	r = runKV(t, env, "", "delete", "k")
	require.Equal(t, exitOK, r.code, r)
	assert.Equal(t, "deleted \"k\"\n", r.stdout)
	_, ok := doc(t, mc, "k")
	assert.False(t, ok)
	r = runKV(t, env, "", "delete", "k")
	assert.Equal(t, exitNotFound, r.code, r)
}

func TestCountersTouchExists(t *testing.T) {
	mc, env := newMock(t, mockcluster.Options{})

	r := runKV(t, env, "", "incr", "ctr")
	assert.Equal(t, exitNotFound, r.code, "no --initial: a missing counter is not found\n%s", r)
	r = runKV(t, env, "", "incr", "ctr", "--initial", "10")
	require.Equal(t, exitOK, r.code, r)
	assert.Equal(t, "10\n", r.stdout, "the initial value, without the delta")
	r = runKV(t, env, "", "incr", "ctr", "--delta", "5")
	assert.Equal(t, "15\n", r.stdout, r)
	r = runKV(t, env, "", "decr", "ctr")
	assert.Equal(t, "14\n", r.stdout, r)
	r = runKV(t, env, "", "decr", "ctr", "--delta", "100")
	assert.Equal(t, "0\n", r.stdout, "decrements stop at 0: %s", r)
	r = runKV(t, env, "", "set", "word", "abc")
	require.Equal(t, exitOK, r.code)
	r = runKV(t, env, "", "incr", "word")
	assert.Equal(t, exitError, r.code, r)
	assert.Contains(t, r.stderr, `document "word" is not a number`)
	r = runKV(t, env, "", "incr", "ctr", "--initial", "x")
	assert.Equal(t, exitUsage, r.code, r)

	r = runKV(t, env, "", "touch", "word", "1h")
	require.Equal(t, exitOK, r.code, r)
	d, _ := doc(t, mc, "word")
	assert.WithinDuration(t, time.Now().Add(time.Hour), d.Expiry, time.Minute)
	r = runKV(t, env, "", "touch", "word", "0")
	require.Equal(t, exitOK, r.code, r)
	d, _ = doc(t, mc, "word")
	assert.True(t, d.Expiry.IsZero(), "touch 0 removes the expiry")
	r = runKV(t, env, "", "touch", "nothere", "1h")
	assert.Equal(t, exitNotFound, r.code, r)
	r = runKV(t, env, "", "touch", "word", "soon")
	assert.Equal(t, exitUsage, r.code, r)

	r = runKV(t, env, "", "exists", "word")
	assert.Equal(t, exitOK, r.code, r)
	assert.Equal(t, "true\n", r.stdout)
	r = runKV(t, env, "", "exists", "nothere")
	assert.Equal(t, exitNotFound, r.code, r)
	assert.Equal(t, "false\n", r.stdout)
	r = runKV(t, env, "", "--json", "exists", "nothere")
	assert.Equal(t, exitNotFound, r.code, r)
	assert.JSONEq(t, `{"op":"exists","key":"nothere","ok":true,"exists":false,"retries":0}`, r.stdout)
}

func TestLockUnlock(t *testing.T) {
	mc, env := newMock(t, mockcluster.Options{})
	require.Equal(t, exitOK, runKV(t, env, "", "set", "doc", "locked value").code)

	r := runKV(t, env, "", "lock", "doc", "--lock-time", "20s")
	require.Equal(t, exitOK, r.code, r)
	assert.Equal(t, "locked value", r.stdout)
	m := casRE.FindStringSubmatch(r.stderr)
	require.NotNil(t, m, r.stderr)
	lockCas := m[1]
	assert.Contains(t, r.stderr, "locked for 20s; unlock with: kvcli unlock doc "+lockCas)
	d, _ := doc(t, mc, "doc")
	assert.True(t, d.Locked)
	assert.Equal(t, lockCas, fmtCas(d.Cas))

	// A write waits for the lock until its timeout, and says so.
	r = runKV(t, env, "", "set", "doc", "other", "-t", "300ms")
	assert.Equal(t, exitError, r.code, r)
	assert.Regexp(t, `^kvcli: timed out after 300ms; retried \d+ times? for KV_LOCKED: the document stayed locked\n$`, r.stderr)
	assert.Equal(t, "locked value", value(t, mc, "doc"))

	r = runKV(t, env, "", "unlock", "doc", "0x1234")
	assert.Equal(t, exitConflict, r.code, r)
	assert.Contains(t, r.stderr, `CAS mismatch on "doc": that CAS is not the lock's`)
	r = runKV(t, env, "", "unlock", "doc", "nonsense")
	assert.Equal(t, exitUsage, r.code, r)

	r = runKV(t, env, "", "unlock", "doc", lockCas)
	require.Equal(t, exitOK, r.code, r)
	assert.Equal(t, "unlocked \"doc\"\n", r.stdout)
	d, _ = doc(t, mc, "doc")
	assert.False(t, d.Locked)

	r = runKV(t, env, "", "unlock", "doc", lockCas)
	assert.Equal(t, exitConflict, r.code, r)
	assert.Contains(t, r.stderr, `document "doc" is not locked`)

	r = runKV(t, env, "", "set", "doc", "other")
	require.Equal(t, exitOK, r.code, r)

	// The CAS from --json unlocks too (decimal or hex both parse).
	r = runKV(t, env, "", "lock", "doc", "--json")
	require.Equal(t, exitOK, r.code, r)
	var jr struct {
		Cas      string  `json:"cas"`
		Value    string  `json:"value"`
		LockTime float64 `json:"lock_time_s"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &jr))
	assert.Equal(t, "other", jr.Value)
	assert.Equal(t, 15.0, jr.LockTime)
	cas, err := parseCas(jr.Cas)
	require.NoError(t, err)
	r = runKV(t, env, "", "unlock", "doc", strconv.FormatUint(cas, 10))
	require.Equal(t, exitOK, r.code, "decimal CAS: %s", r)

	r = runKV(t, env, "", "lock", "doc", "--lock-time", "31s")
	assert.Equal(t, exitUsage, r.code, r)
	r = runKV(t, env, "", "lock", "nothere")
	assert.Equal(t, exitNotFound, r.code, r)
}

func TestValueSources(t *testing.T) {
	mc, env := newMock(t, mockcluster.Options{})
	dir := t.TempDir()
	file := filepath.Join(dir, "v.bin")
	bin := []byte{0xff, 0x00, 0xfe, 'x', '\n'}
	require.NoError(t, os.WriteFile(file, bin, 0o600))

	r := runKV(t, env, "from stdin\n", "set", "in", "-")
	require.Equal(t, exitOK, r.code, r)
	assert.Equal(t, "from stdin\n", value(t, mc, "in"))

	r = runKV(t, env, "", "set", "file", "@"+file)
	require.Equal(t, exitOK, r.code, r)
	assert.Equal(t, string(bin), value(t, mc, "file"))

	r = runKV(t, env, "", "get", "file")
	assert.Equal(t, string(bin), r.stdout, "binary values are written as they are")

	r = runKV(t, env, "", "get", "file", "--json")
	require.Equal(t, exitOK, r.code, r)
	var jr jsonResult
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &jr))
	assert.Equal(t, "base64", jr.Encoding)
	require.NotNil(t, jr.Value)
	got, err := base64.StdEncoding.DecodeString(*jr.Value)
	require.NoError(t, err)
	assert.Equal(t, bin, got)

	r = runKV(t, env, "", "set", "raw", "@"+file, "--raw")
	require.Equal(t, exitOK, r.code, r)
	assert.Equal(t, "@"+file, value(t, mc, "raw"))
	r = runKV(t, env, "", "set", "dash", "-", "--raw")
	require.Equal(t, exitOK, r.code, r)
	assert.Equal(t, "-", value(t, mc, "dash"))

	r = runKV(t, env, "", "set", "nofile", "@"+filepath.Join(dir, "absent"))
	assert.Equal(t, exitUsage, r.code, r)
	assert.Contains(t, r.stderr, "use --raw")
	_, ok := doc(t, mc, "nofile")
	assert.False(t, ok)
}

func TestJSONOutput(t *testing.T) {
	_, env := newMock(t, mockcluster.Options{})

	r := runKV(t, env, "", "--json", "set", "j", `{"a":1}`)
	require.Equal(t, exitOK, r.code, r)
	var set map[string]any
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &set))
	assert.Equal(t, "set", set["op"])
	assert.Equal(t, true, set["ok"])
	assert.Regexp(t, `^0x[0-9a-f]{16}$`, set["cas"])
	tok, ok := set["mutation_token"].(map[string]any)
	require.True(t, ok, "mutation token: %v", set)
	assert.Equal(t, "default", tok["bucket"])
	assert.NotZero(t, tok["seqno"])

	r = runKV(t, env, "", "get", "j", "--json")
	require.Equal(t, exitOK, r.code, r)
	var get map[string]any
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &get))
	assert.Equal(t, `{"a":1}`, get["value"])
	assert.Equal(t, "utf8", get["encoding"])
	assert.Equal(t, set["cas"], get["cas"])
	assert.Equal(t, "json", get["datatype"])
	assert.Equal(t, 1, strings.Count(r.stdout, "\n"), "one object, one line")

	r = runKV(t, env, "", "get", "nothere", "--json")
	assert.Equal(t, exitNotFound, r.code)
	assert.JSONEq(t, `{"op":"get","key":"nothere","ok":false,"retries":0,
		"error":{"kind":"not_found","message":"document \"nothere\" not found","exit":3,"status":"KEY_ENOENT"}}`, r.stdout)
	assert.Contains(t, r.stderr, "not found", "the human line still goes to stderr")

	r = runKV(t, env, "", "incr", "n", "--initial", "3", "--json")
	require.Equal(t, exitOK, r.code, r)
	assert.Contains(t, r.stdout, `"counter":3`)
}

func TestFlagPlacement(t *testing.T) {
	mc, env := newMock(t, mockcluster.Options{})
	connStr := env[envConnStr]
	noConn := with(env, envConnStr, "couchbase://127.0.0.1:1/default")

	// The environment points nowhere; -c before or after the command (and
	// between its arguments) points at the mock.
	for _, args := range [][]string{
		{"-c", connStr, "set", "a", "1"},
		{"set", "-c", connStr, "a", "1"},
		{"set", "a", "-c", connStr, "1"},
		{"set", "a", "1", "-c", connStr},
		{"--connstr=" + connStr, "set", "a", "1"},
	} {
		r := runKV(t, noConn, "", args...)
		assert.Equal(t, exitOK, r.code, "%v: %s", args, r)
	}
	// A flag after the command wins over the same flag before it.
	r := runKV(t, noConn, "", "-c", "couchbase://127.0.0.1:1/default", "get", "a", "-c", connStr)
	assert.Equal(t, exitOK, r.code, r)
	assert.Equal(t, "1", r.stdout)

	// -- ends the flags: a key may start with a dash.
	r = runKV(t, env, "", "set", "--", "-dash", "v")
	require.Equal(t, exitOK, r.code, r)
	assert.Equal(t, "v", value(t, mc, "-dash"))
	r = runKV(t, env, "", "get", "--json", "--", "-dash")
	require.Equal(t, exitOK, r.code, r)
	assert.Contains(t, r.stdout, `"key":"-dash"`)

	// -b replaces the connection string's bucket.
	r = runKV(t, env, "", "get", "a", "-b", "other")
	assert.Equal(t, exitError, r.code, r)
	assert.Contains(t, r.stderr, `bucket "other" does not exist`)
}

func TestCollections(t *testing.T) {
	mc, env := newMock(t, mockcluster.Options{})
	b := mc.Bucket(mockcluster.DefaultBucket)
	_, err := b.AddScope("app")
	require.NoError(t, err)
	_, err = b.AddCollection("app", "users")
	require.NoError(t, err)

	r := runKV(t, env, "", "--collection", "app.users", "set", "u1", "ada")
	require.Equal(t, exitOK, r.code, r)
	d, ok := b.Get("app", "users", "u1")
	require.True(t, ok)
	assert.Equal(t, "ada", string(d.Value))
	_, ok = doc(t, mc, "u1")
	assert.False(t, ok, "not in the default collection")

	r = runKV(t, env, "", "get", "u1")
	assert.Equal(t, exitNotFound, r.code, r)
	r = runKV(t, env, "", "get", "u1", "--collection", "app.users")
	assert.Equal(t, "ada", r.stdout, r)
	r = runKV(t, env, "", "get", "u2", "--collection", "app.users")
	assert.Equal(t, "kvcli: document \"u2\" not found in app.users\n", r.stderr)

	r = runKV(t, env, "", "get", "u1", "--collection", "app.nope", "-t", "1s")
	assert.Equal(t, exitError, r.code, r)
	assert.Contains(t, r.stderr, `collection "app.nope" does not exist in bucket "default"`)

	r = runKV(t, env, "", "get", "u1", "--collection", "a.b.c")
	assert.Equal(t, exitUsage, r.code, r)
}

func TestPing(t *testing.T) {
	mc, env := newMock(t, mockcluster.Options{Nodes: 2})
	r := runKV(t, env, "", "ping")
	require.Equal(t, exitOK, r.code, r)
	for _, a := range mc.Addrs() {
		assert.Regexp(t, regexp.QuoteMeta(a)+`\s+ok\s+\S+`, r.stdout)
	}
	r = runKV(t, env, "", "ping", "--json")
	require.Equal(t, exitOK, r.code, r)
	var jr jsonResult
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &jr))
	require.Len(t, jr.Ping, 2)
	for _, p := range jr.Ping {
		assert.True(t, p.OK)
		require.NotNil(t, p.LatencyUS)
	}
	// latency_us is RFC 0034's: an integer of microseconds, as in the
	// report beside it (not 1234.567).
	var raw struct {
		Ping []map[string]json.RawMessage `json:"ping"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &raw))
	for _, p := range raw.Ping {
		var us uint64
		assert.NoError(t, json.Unmarshal(p["latency_us"], &us), "latency_us %s is no whole number", p["latency_us"])
	}

	// A stopped node: ping says which and exits 1.
	mc.Node(1).Stop()
	r = runKV(t, env, "", "ping", "-t", "500ms")
	assert.Equal(t, exitError, r.code, r)
	assert.Regexp(t, regexp.QuoteMeta(mc.Node(1).Addr())+`\s+FAILED`, r.stdout)
}

// TestVerboseTrace checks -v on single commands; TestDemo checks the
// forward-map lines of the trace.
func TestVerboseTrace(t *testing.T) {
	_, env := newMock(t, mockcluster.Options{})
	r := runKV(t, env, "", "-v", "set", "k", "v")
	require.Equal(t, exitOK, r.code, r)
	assert.Regexp(t, `kvcli: Upsert "k" attempt 1 -> 127\.0\.0\.1:\d+ vb \d+ by current map \(rev \d+\): SUCCESS in \S+\n`, r.stderr)
	assert.Contains(t, r.stderr, "level=DEBUG", "the client's slog debug output")
	assert.Contains(t, r.stderr, `msg="kvwire: connected"`)

	// Retries show their reason.
	lock := runKV(t, env, "", "lock", "k")
	require.Equal(t, exitOK, lock.code, lock)
	r = runKV(t, env, "", "set", "k", "w", "-v", "-t", "200ms")
	assert.Equal(t, exitError, r.code, r)
	assert.Regexp(t, `Upsert "k" attempt 1 -> \S+ vb \d+ by current map \(rev \d+\): LOCKED`, r.stderr)
	assert.Regexp(t, `Upsert "k" attempt 2 \(retry: KV_LOCKED\) -> \S+ vb \d+ by current map \(rev \d+\): LOCKED`, r.stderr)
	assert.Contains(t, r.stderr, "kvcli: detail: ", "-v adds the full error")

}

// get with several keys reads them in one batch: one line per key found,
// each failure on stderr, and the exit code of get: 0 when every key was
// read, 3 when only documents were missing, else the other failure's.
func TestGetSeveralKeys(t *testing.T) {
	mc, env := newMock(t, mockcluster.Options{})
	for _, kv := range [][2]string{{"a", "1"}, {"b", "two\tparts"}, {"c", `{"x":1}`}} {
		require.Equal(t, exitOK, runKV(t, env, "", "set", kv[0], kv[1]).code)
	}

	r := runKV(t, env, "", "get", "a", "b", "c", "a")
	require.Equal(t, exitOK, r.code, r)
	assert.Equal(t, "a\t1\nb\t\"two\\tparts\"\nc\t{\"x\":1}\na\t1\n", r.stdout)

	r = runKV(t, env, "", "get", "a", "missing", "c")
	assert.Equal(t, exitNotFound, r.code, r)
	assert.Equal(t, "a\t1\nc\t{\"x\":1}\n", r.stdout)
	assert.Equal(t, "kvcli: document \"missing\" not found\n", r.stderr)

	r = runKV(t, env, "", "get", "--json", "missing", "a")
	assert.Equal(t, exitNotFound, r.code, r)
	var doc struct {
		Op      string            `json:"op"`
		OK      bool              `json:"ok"`
		Results []json.RawMessage `json:"results"`
	}
	requireOneJSONDocument(t, r.stdout, &doc)
	assert.Equal(t, "get", doc.Op)
	assert.False(t, doc.OK)
	require.Len(t, doc.Results, 2, r.stdout)
	assert.JSONEq(t, `{"op":"get","key":"missing","ok":false,"retries":0,
		"error":{"kind":"not_found","message":"document \"missing\" not found","exit":3,"status":"KEY_ENOENT"}}`, string(doc.Results[0]))
	var got map[string]any
	require.NoError(t, json.Unmarshal(doc.Results[1], &got))
	assert.Equal(t, "a", got["key"])
	assert.Equal(t, "1", got["value"])
	assert.Equal(t, true, got["ok"])

	// A refusal other than a miss decides the exit code.
	h := mc.AddFault(mockcluster.Fault{Match: mockcluster.Match{OpCodes: []memdx.OpCode{memdx.OpGet}, Key: "c"},
		Action: mockcluster.Action{Status: memdx.StatusNoAccess}})
	t.Cleanup(h.Remove)
	r = runKV(t, env, "", "get", "missing", "c", "a")
	assert.Equal(t, exitError, r.code, r)
	assert.Equal(t, "a\t1\n", r.stdout)
	assert.Contains(t, r.stderr, `"missing" not found`)
	h.Remove()

	// Interrupted while the server holds the answers: every key ends, 130.
	held := make(chan struct{})
	var once sync.Once
	hold := mc.Control(mockcluster.Match{OpCodes: []memdx.OpCode{memdx.OpGet}, Key: "c"}, 0,
		func(*mockcluster.Request) (mockcluster.Action, bool) {
			once.Do(func() { close(held) })
			return mockcluster.Action{Delay: time.Hour}, true
		})
	t.Cleanup(hold.Remove)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { <-held; cancel() }()
	r = runKVCtx(ctx, env, "", "get", "a", "c", "-t", "1m")
	assert.Equal(t, exitInterrupted, r.code, r)
	assert.Contains(t, r.stderr, `kvcli: "c": interrupted`, "the line names the key it is about")
	hold.Remove()

	r = runKV(t, env, "", "get", "a", "", "c")
	assert.Equal(t, exitUsage, r.code, r)
	r = runKV(t, env, "", "get", "a", "c", "--touch", "1m")
	assert.Equal(t, exitUsage, r.code, r)
	assert.Contains(t, r.stderr, "--touch takes one KEY")
}

// blockingReader is a stdin that never ends until released: a terminal
// nobody types into, or a pipe whose writer stays open.
type blockingReader struct {
	reading chan struct{} // closed at the first Read
	release chan struct{}
	once    sync.Once
}

func (b *blockingReader) Read([]byte) (int, error) {
	b.once.Do(func() { close(b.reading) })
	<-b.release
	return 0, io.EOF
}

// Ctrl-C while set waits for its value on stdin ends kvcli as interrupted
// (exit 130), as it does at any other point: nothing is written.
func TestValueFromStdinInterrupted(t *testing.T) {
	mc, env := newMock(t, mockcluster.Options{})
	in := &blockingReader{reading: make(chan struct{}), release: make(chan struct{})}
	defer close(in.release)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	bg := startKvcliWith(ctx, []string{"set", "k", "-"}, env, func(e *env_) { e.stdin = in })
	select {
	case <-in.reading:
	case code := <-bg.done:
		t.Fatalf("exit %d before reading stdin: %s", code, bg.stderr.String())
	}
	cancel()
	select {
	case code := <-bg.done:
		assert.Equal(t, exitInterrupted, code, bg.stderr.String())
		assert.Equal(t, "kvcli: interrupted\n", bg.stderr.String())
	case <-time.After(10 * time.Second):
		t.Fatal("kvcli did not end on interrupt while reading stdin")
	}
	_, ok := doc(t, mc, "k")
	assert.False(t, ok)
}

// A CAS is hex with 0x, else decimal: a leading 0 is not octal's prefix,
// and strconv's other prefixes and underscores are refused.
func TestParseCasHexOrDecimalOnly(t *testing.T) {
	for in, want := range map[string]uint64{"0123": 123, "123": 123, "0x1f": 31, "0X1F": 31, "0x0000000000000010": 16} {
		got, err := parseCas(in)
		if err != nil || got != want {
			t.Errorf("parseCas(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"0b101", "0o17", "1_000", "0", "0x", "-1", "x10"} {
		if got, err := parseCas(in); err == nil {
			t.Errorf("parseCas(%q) = %d, want an error", in, got)
		}
	}
}

// TestNumberFlagsAreDecimalOrHex: --flags and --delta read like --cas, decimal
// or 0x hex. A leading zero is not octal: "010" is ten, as a user means it.
func TestNumberFlagsAreDecimalOrHex(t *testing.T) {
	mc, env := newMock(t, mockcluster.Options{})

	for in, want := range map[string]uint32{"010": 10, "0x10": 16, "0X0300_0000": 0, "50331648": 0x03000000} {
		r := runKV(t, env, "", "set", "f", "v", "--flags", in)
		if want == 0 {
			assert.Equal(t, exitUsage, r.code, "--flags %s: %s", in, r)
			assert.Contains(t, r.stderr, "--flags "+strconv.Quote(in), r)
			continue
		}
		require.Equal(t, exitOK, r.code, "--flags %s: %s", in, r)
		d, ok := doc(t, mc, "f")
		require.True(t, ok)
		assert.Equal(t, want, d.Flags, "--flags %s", in)
	}
	r := runKV(t, env, "", "set", "f", "v", "--flags", "0o17")
	assert.Equal(t, exitUsage, r.code, r)

	r = runKV(t, env, "", "incr", "n0", "--initial", "010")
	assert.Equal(t, "10\n", r.stdout, "--initial is decimal too: %s", r)
	r = runKV(t, env, "", "incr", "n1", "--initial", "0x10")
	assert.Equal(t, "16\n", r.stdout, r)
	r = runKV(t, env, "", "incr", "n", "--initial", "0")
	require.Equal(t, exitOK, r.code, r)
	r = runKV(t, env, "", "incr", "n", "--delta", "010")
	assert.Equal(t, "10\n", r.stdout, r)
	r = runKV(t, env, "", "decr", "n", "--delta", "0x2")
	assert.Equal(t, "8\n", r.stdout, r)
	r = runKV(t, env, "", "incr", "n", "--delta", "0b1")
	assert.Equal(t, exitUsage, r.code, r)
	assert.Contains(t, r.stderr, `--delta "0b1"`, r)
}

// scan's --sample and --seed and bench's --seed and --keys read as the
// other number flags do, decimal or 0x hex: "010" is ten, not Go's octal
// eight, and 0o, 0b and underscores are refused.
func TestScanAndBenchNumbersAreDecimalOrHex(t *testing.T) {
	mc, env := newMock(t, mockcluster.Options{})
	b := mc.Bucket(mockcluster.DefaultBucket)
	for i := range 12 {
		_, err := b.Set(client.DefaultScope, client.DefaultCollection, fmt.Sprintf("d%02d", i), []byte("v"), 0, 0)
		require.NoError(t, err)
	}
	r := runKV(t, env, "", "scan", "--sample", "010", "--seed", "010", "--keys-only")
	require.Equal(t, exitOK, r.code, r)
	assert.Len(t, lines(r.stdout), 10, "--sample 010")
	r = runKV(t, env, "", "scan", "--sample", "0x3", "--seed", "0x10", "--keys-only")
	require.Equal(t, exitOK, r.code, r)
	assert.Len(t, lines(r.stdout), 3, "--sample 0x3")
	r = runKV(t, env, "", "scan", "--concurrency", "0x2", "--keys-only")
	require.Equal(t, exitOK, r.code, r)
	assert.Len(t, lines(r.stdout), 12, "--concurrency 0x2")
	for _, bad := range [][]string{{"--sample", "0o3"}, {"--sample", "3", "--seed", "0b1"}, {"--sample", "1_0"},
		{"--sample", "3", "--seed", "0x100000000"}, {"--concurrency", "0o2"}, {"--concurrency", "1_0"}} {
		r = runKV(t, env, "", append([]string{"scan", "--keys-only"}, bad...)...)
		assert.Equal(t, exitUsage, r.code, "%v: %s", bad, r)
	}

	r = runKV(t, env, "", "bench", "--ops", "5", "--concurrency", "1", "--keys", "010", "--seed", "010", "--preload=false", "--json")
	require.Equal(t, exitOK, r.code, r)
	var s benchSummary
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &s))
	assert.Equal(t, 10, s.Config.Keys, "--keys 010")
	assert.Equal(t, uint64(10), s.Config.Seed, "--seed 010")
	r = runKV(t, env, "", "bench", "--ops", "5", "--concurrency", "1", "--keys", "0x10", "--seed", "0x10", "--preload=false", "--json")
	require.Equal(t, exitOK, r.code, r)
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &s))
	assert.Equal(t, 16, s.Config.Keys, "--keys 0x10")
	assert.Equal(t, uint64(16), s.Config.Seed, "--seed 0x10")
	for _, bad := range [][]string{{"--keys", "0o10"}, {"--seed", "0b1"}, {"--keys", "-1"}, {"--keys", "0"}} {
		r = runKV(t, env, "", append([]string{"bench", "--ops", "5", "--preload=false"}, bad...)...)
		assert.Equal(t, exitUsage, r.code, "%v: %s", bad, r)
	}
}

// get of several keys reports each failure on stderr with the key it is
// about: a line that does not name the key ("may not do this", "timed
// out") would leave a person unable to tell which keys failed.
func TestGetManyFailureLinesNameTheKey(t *testing.T) {
	mc, env := newMock(t, mockcluster.Options{})
	for _, k := range []string{"a", "b", "c"} {
		r := runKV(t, env, "", "set", k, "v"+k)
		require.Equal(t, exitOK, r.code, r)
	}
	for _, k := range []string{"b", "c"} {
		h := mc.AddFault(mockcluster.Fault{
			Match:  mockcluster.Match{Key: k, OpCodes: []memdx.OpCode{memdx.OpGet}},
			Action: mockcluster.Action{Status: memdx.StatusNoAccess},
		})
		defer h.Remove()
	}
	r := runKV(t, env, "", "get", "a", "b", "c", "missing")
	assert.Equal(t, exitError, r.code, r)
	assert.Equal(t, "a\tva\n", r.stdout)
	assert.Equal(t, `kvcli: "b": user "Administrator" may not do this in bucket "default"`+"\n"+
		`kvcli: "c": user "Administrator" may not do this in bucket "default"`+"\n"+
		`kvcli: document "missing" not found`+"\n", r.stderr)

	// One key: the line is as it was (the key is the command's).
	r = runKV(t, env, "", "get", "b")
	assert.Equal(t, exitError, r.code, r)
	assert.Equal(t, `kvcli: user "Administrator" may not do this in bucket "default"`+"\n", r.stderr)
}

// A --lock-time that is not whole seconds is sent rounded up (the
// protocol's lock time is seconds): lock says the time the server was
// asked for, not the one typed.
func TestLockReportsTheLockTimeSent(t *testing.T) {
	_, env := newMock(t, mockcluster.Options{})
	for _, k := range []string{"a", "b"} {
		r := runKV(t, env, "", "set", k, "v")
		require.Equal(t, exitOK, r.code, r)
	}
	r := runKV(t, env, "", "lock", "a", "--lock-time", "1.2s")
	require.Equal(t, exitOK, r.code, r)
	assert.Contains(t, r.stderr, " locked for 2s; unlock with: kvcli unlock a 0x")

	r = runKV(t, env, "", "lock", "b", "--lock-time", "1500ms", "--json")
	require.Equal(t, exitOK, r.code, r)
	var jr jsonResult
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &jr), r.stdout)
	assert.Equal(t, 2.0, jr.LockTime)
}

// fullWriter is stdout on a full disk: every write fails.
type fullWriter struct{ n int }

func (w *fullWriter) Write(p []byte) (int, error) {
	w.n++
	return 0, errors.New("write /dev/full: no space left on device")
}

// A result that could not be written to stdout (a full disk, an I/O
// error) is a failure: kvcli get k > file on a full disk must not exit 0
// with the file empty, as the command's own answer would say it worked.
func TestStdoutWriteErrorFails(t *testing.T) {
	_, env := newMock(t, mockcluster.Options{})
	r := runKV(t, env, "", "set", "k", "value")
	require.Equal(t, exitOK, r.code, r)
	for _, args := range [][]string{
		{"get", "k"},
		{"get", "k", "--json"},
		{"get", "k", "k"},
		{"set", "k2", "v"},
		{"scan"},
		{"stats"},
		{"help"},
	} {
		var errb bytes.Buffer
		out := &fullWriter{}
		code := run(context.Background(), args, &env_{stdin: strings.NewReader(""), stdout: out, stderr: &errb,
			getenv: func(k string) string { return env[k] }})
		assert.Equal(t, exitError, code, "%v: %s", args, errb.String())
		assert.Positive(t, out.n, "%v", args)
		assert.Contains(t, errb.String(), "kvcli: writing the output: write /dev/full: no space left on device (the command itself succeeded", "%v", args)
	}
	// A command that failed keeps its own code.
	var errb bytes.Buffer
	code := run(context.Background(), []string{"get", "missing", "--json"}, &env_{stdin: strings.NewReader(""), stdout: &fullWriter{}, stderr: &errb,
		getenv: func(k string) string { return env[k] }})
	assert.Equal(t, exitNotFound, code, errb.String())
}

// Before 7.6 Couchbase Server answers UNLOCK_KEY of a document that is not
// locked with TMPFAIL, and to a connection without XERROR (couchbase://
// drops XERROR when a node's error map is unusable) it answers TMPFAIL for a
// lock held with another CAS too. kvcli used to print only "is not locked"
// for it, which may be false; it now names both readings.
func TestUnlockTmpFailNamesBothReadings(t *testing.T) {
	_, env := newMock(t, mockcluster.Options{Version: "7.2.4-7070-enterprise"})
	require.Equal(t, exitOK, runKV(t, env, "", "set", "doc", "v").code)
	r := runKV(t, env, "", "unlock", "doc", "0x1234")
	assert.Equal(t, exitConflict, r.code, r)
	assert.Contains(t, r.stderr, `document "doc" is not locked, or (on a connection without XERROR) locked with another CAS`)
}
