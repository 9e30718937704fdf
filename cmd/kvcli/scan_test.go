package main

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvwire/kvwire/client"
	"github.com/kvwire/kvwire/internal/memcachedtest"
	"github.com/kvwire/kvwire/memdx"
	"github.com/kvwire/kvwire/mockcluster"
)

// lines returns out's lines, sorted (a scan interleaves vbuckets).
func lines(out string) []string {
	l := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(l) == 1 && l[0] == "" {
		return nil
	}
	slices.Sort(l)
	return l
}

func TestScanCommand(t *testing.T) {
	mc, env := newMock(t, mockcluster.Options{})
	b := mc.Bucket(mockcluster.DefaultBucket)
	var want []string
	for i := range 12 {
		k := fmt.Sprintf("user:%02d", i)
		_, err := b.Set(client.DefaultScope, client.DefaultCollection, k, []byte("v"+k), 0, 0)
		require.NoError(t, err)
		want = append(want, k)
	}
	_, err := b.Set(client.DefaultScope, client.DefaultCollection, "odd", []byte("two\nlines"), 0, 0)
	require.NoError(t, err)

	r := runKV(t, env, "", "scan", "--prefix", "user:", "--keys-only")
	require.Equal(t, exitOK, r.code, r)
	assert.Equal(t, want, lines(r.stdout))

	r = runKV(t, env, "", "scan", "--from", "user:03", "--to", "user:05", "--to-exclusive", "--concurrency", "4")
	require.Equal(t, exitOK, r.code, r)
	assert.Equal(t, []string{"user:03\tvuser:03", "user:04\tvuser:04"}, lines(r.stdout))

	r = runKV(t, env, "", "scan", "--from", "odd", "--to", "odd")
	require.Equal(t, exitOK, r.code, r)
	assert.Equal(t, "odd\t\"two\\nlines\"\n", r.stdout, "a value of several lines is quoted")

	r = runKV(t, env, "", "scan", "--prefix", "user:0", "--json")
	require.Equal(t, exitOK, r.code, r)
	var doc struct {
		Op    string         `json:"op"`
		Items []jsonScanItem `json:"items"`
		jsonScanEnd
	}
	requireOneJSONDocument(t, r.stdout, &doc)
	assert.Equal(t, "scan", doc.Op)
	assert.True(t, doc.OK)
	assert.Equal(t, uint64(10), doc.Count)
	var got []string
	for _, j := range doc.Items {
		require.NotNil(t, j.Value)
		assert.Equal(t, "v"+j.Key, *j.Value)
		assert.NotEmpty(t, j.Cas)
		got = append(got, j.Key)
	}
	slices.Sort(got)
	assert.Equal(t, want[:10], got)
	assert.Len(t, lines(r.stdout), 10+2, "an item per line, between the document's first and last lines")

	r = runKV(t, env, "", "scan", "--prefix", "nothing", "--json")
	require.Equal(t, exitOK, r.code, r)
	assert.JSONEq(t, `{"op":"scan","items":[],"count":0,"ok":true}`, r.stdout)

	r = runKV(t, env, "", "scan", "--sample", "3", "--seed", "9", "--keys-only")
	require.Equal(t, exitOK, r.code, r)
	assert.Len(t, lines(r.stdout), 3)

	r = runKV(t, env, "", "scan", "--prefix", "nothing")
	require.Equal(t, exitOK, r.code, r)
	assert.Empty(t, r.stdout)

	for _, bad := range [][]string{
		{"--sample", "3", "--prefix", "u"},
		{"--prefix", "u", "--from", "a"},
		{"--sample", "0"},
		{"--seed", "3"},
		{"--from-exclusive"},
		{"--concurrency", "0"},
		{"extra-arg"},
	} {
		r = runKV(t, env, "", append([]string{"scan"}, bad...)...)
		assert.Equal(t, exitUsage, r.code, "%v: %s", bad, r)
	}
	assert.Zero(t, mc.OpenRangeScans())
}

func TestScanCommandOnMemcachedFails(t *testing.T) {
	addr := memcachedtest.Start(t)
	r := runKV(t, map[string]string{envConnStr: "memcached://" + addr}, "", "scan")
	assert.Equal(t, exitError, r.code, r)
	assert.Contains(t, r.stderr, "memcached has no range scans")
}

func TestStatsCommand(t *testing.T) {
	mc, env := newMock(t, mockcluster.Options{})
	r := runKV(t, env, "", "stats")
	require.Equal(t, exitOK, r.code, r)
	for _, n := range mc.Nodes() {
		assert.Contains(t, r.stdout, n.Addr()+" version "+mockcluster.DefaultVersion+"\n")
	}
	r = runKV(t, env, "", "stats", "--node", mc.Nodes()[1].Addr(), "--json")
	require.Equal(t, exitOK, r.code, r)
	var j jsonAdmin
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &j), r.stdout)
	require.Len(t, j.Nodes, 1)
	assert.True(t, j.OK)
	assert.Equal(t, mockcluster.DefaultVersion, j.Nodes[0].Stats["version"])

	r = runKV(t, env, "", "stats", "no-such-group")
	assert.Equal(t, exitError, r.code, r)
	assert.Equal(t, 3, strings.Count(r.stderr, "kvcli: "), "one line per node: %s", r.stderr)
	r = runKV(t, env, "", "stats", "--node", "127.0.0.1:1")
	assert.Equal(t, exitError, r.code, r)
	r = runKV(t, env, "", "stats", "a", "b")
	assert.Equal(t, exitUsage, r.code, r)
}

func TestFlushCommand(t *testing.T) {
	addr := memcachedtest.Start(t)
	env := map[string]string{envConnStr: "memcached://" + addr}
	r := runKV(t, env, "", "set", "k", "v")
	require.Equal(t, exitOK, r.code, r)

	r = runKV(t, env, "", "flush")
	assert.Equal(t, exitUsage, r.code, r)
	assert.Contains(t, r.stderr, "add --yes to confirm")
	r = runKV(t, env, "", "get", "k")
	require.Equal(t, exitOK, r.code, "without --yes nothing is flushed: %s", r)

	r = runKV(t, env, "", "flush", "--yes", "--delay", "1h")
	require.Equal(t, exitOK, r.code, r)
	assert.Equal(t, addr+" flushes in 1h0m0s\n", r.stdout)
	r = runKV(t, env, "", "get", "k")
	require.Equal(t, exitOK, r.code, "a delayed flush leaves the item for now: %s", r)

	r = runKV(t, env, "", "flush", "--yes", "--json")
	require.Equal(t, exitOK, r.code, r)
	assert.JSONEq(t, `{"op":"flush","ok":true,"nodes":[{"node":"`+addr+`","ok":true}]}`, r.stdout)
	r = runKV(t, env, "", "get", "k")
	assert.Equal(t, exitNotFound, r.code, r)

	r = runKV(t, env, "", "stats", "settings")
	require.Equal(t, exitOK, r.code, r)
	assert.Contains(t, r.stdout, addr+" maxbytes ")

	// Couchbase: refused, nothing flushed.
	mc, cenv := newMock(t, mockcluster.Options{})
	r = runKV(t, cenv, "", "set", "k", "v")
	require.Equal(t, exitOK, r.code, r)
	r = runKV(t, cenv, "", "flush", "--yes")
	assert.Equal(t, exitError, r.code, r)
	assert.Contains(t, r.stderr, "REST")
	_, ok := mc.Bucket(mockcluster.DefaultBucket).Get(client.DefaultScope, client.DefaultCollection, "k")
	assert.True(t, ok)
}

// Ctrl-C during a scan: exit 130, and the scan is cancelled on the server.
func TestScanCommandInterrupted(t *testing.T) {
	mc, env := newMock(t, mockcluster.Options{})
	b := mc.Bucket(mockcluster.DefaultBucket)
	for i := range 50 {
		_, err := b.Set(client.DefaultScope, client.DefaultCollection, fmt.Sprintf("k%02d", i), []byte("v"), 0, 0)
		require.NoError(t, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var continues atomic.Int32
	mc.Control(mockcluster.Match{OpCodes: []memdx.OpCode{memdx.OpRangeScanContinue}}, 0,
		func(*mockcluster.Request) (mockcluster.Action, bool) {
			if continues.Add(1) == 2 {
				cancel() // as SIGINT does
			}
			return mockcluster.Action{}, false
		})
	r := runKVCtx(ctx, env, "", "scan", "--keys-only")
	assert.Equal(t, exitInterrupted, r.code, r)
	assert.Contains(t, r.stderr, "kvcli: interrupted")
	assert.Zero(t, mc.OpenRangeScans())

	// With --json the document started is closed, saying why it ended.
	ctx, cancel = context.WithCancel(context.Background())
	defer cancel()
	continues.Store(0)
	r = runKVCtx(ctx, env, "", "scan", "--keys-only", "--json")
	assert.Equal(t, exitInterrupted, r.code, r)
	var doc struct {
		Items []jsonScanItem `json:"items"`
		jsonScanEnd
	}
	requireOneJSONDocument(t, r.stdout, &doc)
	assert.False(t, doc.OK)
	require.NotNil(t, doc.Error)
	assert.Equal(t, kindInterrupted, doc.Error.Kind)
	assert.Equal(t, uint64(len(doc.Items)), doc.Count)
	assert.Zero(t, mc.OpenRangeScans())
}

// A key is one field of scan's lines as get's several-key lines have it:
// a key holding a line break or a tab (keys are any bytes to the server)
// is quoted, so that one document stays one line and a --keys-only line
// is one key.
func TestScanQuotesKeysOfSeveralLines(t *testing.T) {
	mc, env := newMock(t, mockcluster.Options{})
	b := mc.Bucket(mockcluster.DefaultBucket)
	for _, k := range []string{"k:a\nb", "k:c\td", `k:"e`} {
		_, err := b.Set(client.DefaultScope, client.DefaultCollection, k, []byte("v"), 0, 0)
		require.NoError(t, err)
	}
	r := runKV(t, env, "", "scan", "--prefix", "k:", "--keys-only")
	require.Equal(t, exitOK, r.code, r)
	assert.Equal(t, []string{`"k:a\nb"`, `"k:c\td"`, `k:"e`}, lines(r.stdout))

	r = runKV(t, env, "", "scan", "--prefix", "k:")
	require.Equal(t, exitOK, r.code, r)
	assert.Equal(t, []string{`"k:a\nb"` + "\tv", `"k:c\td"` + "\tv", `k:"e` + "\tv"}, lines(r.stdout))

	// get of several keys prints the same lines.
	r = runKV(t, env, "", "get", "k:a\nb", "k:c\td", `k:"e`)
	require.Equal(t, exitOK, r.code, r)
	assert.Equal(t, []string{`"k:a\nb"` + "\tv", `"k:c\td"` + "\tv", `k:"e` + "\tv"}, lines(r.stdout))
}

// flush --delay goes to the server as whole seconds, rounded up: flush
// says the delay it asked for, not the one typed.
func TestFlushReportsTheDelaySent(t *testing.T) {
	env := map[string]string{envConnStr: "memcached://" + memcachedtest.Start(t)}
	r := runKV(t, env, "", "flush", "--yes", "--delay", "1500ms")
	require.Equal(t, exitOK, r.code, r)
	assert.Regexp(t, `^\S+ flushes in 2s\n$`, r.stdout)
}

// --from after --to is an empty range: a usage error naming both, before
// connecting, rather than no documents and exit 0 (a swapped range reads
// as "the collection holds none").
func TestScanRangeFromAfterTo(t *testing.T) {
	env := map[string]string{envConnStr: "couchbase://127.0.0.1:1/default"}
	for _, args := range [][]string{
		{"scan", "--from", "user:9", "--to", "user:1"},
		{"scan", "--from", "b", "--to", "a", "--json"},
		{"scan", "--from", "a", "--to", "a", "--to-exclusive"},
	} {
		r := runKV(t, env, "", args...)
		assert.Equal(t, exitUsage, r.code, "%v: %s", args, r)
		assert.Contains(t, r.stderr, "kvcli: scan: the range is empty: --from ", "%v", args)
		assert.NotContains(t, r.stderr, "nothing is listening", "%v", args)
		assert.Empty(t, r.stdout, "%v", args)
	}
	// A range of one key, both ends included, is fine.
	_, env = newMock(t, mockcluster.Options{})
	r := runKV(t, env, "", "scan", "--from", "a", "--to", "a")
	assert.Equal(t, exitOK, r.code, r)
}
