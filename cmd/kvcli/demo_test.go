package main

import (
	"encoding/json"
	"regexp"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestDemo runs what `make demo` runs and checks that it shows what it
// says: NOT_MY_VBUCKET retries routed by the forward map, writers waiting
// on LOCKED, TMPFAIL retries, no failed operation, and no lost or doubled
// write.
func TestDemo(t *testing.T) {
	r := runKV(t, nil, "", "demo", "-v")
	require.Equal(t, exitOK, r.code, r)
	out := r.stdout

	m := regexp.MustCompile(`operations  (\d+) run, 0 failed\n`).FindStringSubmatch(out)
	require.NotNil(t, m, out)
	ops, _ := strconv.Atoi(m[1])
	assert.Greater(t, ops, 257, "the seed and a workload")

	m = regexp.MustCompile(`KV_NOT_MY_VBUCKET +(\d+)  (\d+) straight to the new owner by the forward map`).FindStringSubmatch(out)
	require.NotNil(t, m, out)
	nmv, _ := strconv.Atoi(m[1])
	fwd, _ := strconv.Atoi(m[2])
	assert.Greater(t, fwd, 0)
	assert.LessOrEqual(t, fwd, nmv)
	assert.Regexp(t, `KV_LOCKED +\d+  4 writers waited for the lock\n`, out)
	assert.Regexp(t, `KV_TEMPORARY_FAILURE +25  25 TMPFAIL answers injected\n`, out)
	assert.Regexp(t, `configs     rev \d+ -> rev \d+`, out)
	assert.Regexp(t, `data        257 documents hold their last write; (\d+) writes acknowledged, (\d+) applied: none lost, none twice`, out)
	assert.Contains(t, out, "OK: every operation succeeded")

	// -v traced the retries: a NOT_MY_VBUCKET answer, then the retry sent
	// by the forward map; LOCKED and TMPFAIL answers and their retries.
	assert.Regexp(t, `attempt 1 -> \S+ vb \d+ by current map \(rev \d+\): NOT_MY_VBUCKET`, r.stderr)
	assert.Regexp(t, `attempt \d+ \(retry: KV_NOT_MY_VBUCKET\) -> \S+ vb \d+ by forward map \(rev \d+\): SUCCESS`, r.stderr)
	assert.Regexp(t, `Upsert "demo:locked" attempt \d+ \(retry: KV_LOCKED\) -> .*: SUCCESS`, r.stderr)
	assert.Regexp(t, `attempt \d+ \(retry: KV_TEMPORARY_FAILURE\) -> .*: SUCCESS`, r.stderr)
}

func TestDemoJSON(t *testing.T) {
	if testing.Short() {
		t.Skip("TestDemo covers the demo; -short skips the JSON run")
	}
	r := runKV(t, nil, "", "demo", "--json")
	require.Equal(t, exitOK, r.code, r)
	var s demoSummary
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &s), r.stdout)
	assert.True(t, s.OK)
	assert.Zero(t, s.Failed)
	assert.True(t, s.DataOK)
	assert.Equal(t, s.WritesAcked, s.WritesApplied)
	assert.Empty(t, s.Missing)
	assert.Len(t, s.Showed, 3)
	assert.Greater(t, s.NMVToForwardMap, uint64(0))
	assert.Greater(t, s.ConfigRevTo, s.ConfigRevFrom)
	assert.Less(t, s.ElapsedS, 15.0)
}
