package main

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"github.com/kvwire/kvwire/client"
	"github.com/kvwire/kvwire/mockcluster"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

type rawReport []byte

func (r rawReport) MarshalJSON() ([]byte, error) { return r, nil }

// bench's logger keeps the slow-operation and orphan reports the client
// logs, whatever the level of the log it passes records on to (none
// without -v), and passes every record on as before.
func TestReportsAreKeptFromTheClientsLog(t *testing.T) {
	var out bytes.Buffer
	r := &reports{}
	next := slog.NewTextHandler(&out, &slog.HandlerOptions{Level: slog.LevelError})
	for _, l := range []*slog.Logger{slog.New(r.handler(next)), slog.New(r.handler(nil)).With("conn", "x")} {
		l.Warn(client.ThresholdReportMessage, client.ReportAttribute, rawReport(`{"kv":{"total_count":1}}`))
		l.Warn(client.OrphanReportMessage, client.ReportAttribute, rawReport(`{"kv":{"total_count":2}}`))
		l.Info(client.LoggingMeterMessage, client.ReportAttribute, rawReport(`{"meta":{}}`))
		l.Error("something else")
	}
	th, or := r.taken()
	require.Equal(t, []json.RawMessage{json.RawMessage(`{"kv":{"total_count":1}}`), json.RawMessage(`{"kv":{"total_count":1}}`)}, th)
	require.Equal(t, []json.RawMessage{json.RawMessage(`{"kv":{"total_count":2}}`), json.RawMessage(`{"kv":{"total_count":2}}`)}, or)
	assert.Equal(t, 1, strings.Count(out.String(), "something else"), "records go on to the next handler at its level: %s", out.String())
	assert.NotContains(t, out.String(), "total_count", "below the next handler's level")

	var text bytes.Buffer
	printReports(&text, th[:1], nil)
	assert.Equal(t, "slow ops   1 report(s) of operations over the threshold (the slowest of each interval):\n"+
		"           {\"kv\":{\"total_count\":1}}\n"+
		"orphans    none: no answers that came after their operation had given up\n", text.String())
}

// bench prints, at its end, the slow-operation reports the client logged
// during the run (every operation is slow under a 1 ns threshold) and
// says there was no orphan; --json holds them in its one object.
func TestBenchPrintsTheReports(t *testing.T) {
	_, env := newMock(t, mockcluster.Options{})
	env = with(env, envConnStr, env[envConnStr]+"?tracing_threshold_kv=1ns")
	r := runKV(t, env, "", "bench", "--ops", "50", "--keys", "5", "--concurrency", "1", "--preload=false")
	require.Equal(t, exitOK, r.code, r)
	assert.Regexp(t, `(?m)^slow ops   \d+ report\(s\) of operations over the threshold`, r.stdout)
	assert.Contains(t, r.stdout, `"top_requests":[{`)
	assert.Contains(t, r.stdout, "orphans    none: no answers that came after their operation had given up\n")

	r = runKV(t, env, "", "bench", "--ops", "50", "--keys", "5", "--concurrency", "1", "--preload=false", "--json")
	require.Equal(t, exitOK, r.code, r)
	var s benchSummary
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &s), r.stdout)
	require.NotEmpty(t, s.ThresholdReports)
	var total uint64
	for _, raw := range s.ThresholdReports {
		var rep struct {
			KV struct {
				TotalCount uint64 `json:"total_count"`
			} `json:"kv"`
		}
		require.NoError(t, json.Unmarshal(raw, &rep))
		total += rep.KV.TotalCount
	}
	assert.EqualValues(t, 50, total, "every operation of the run is over a 1 ns threshold")
	assert.NotNil(t, s.OrphanReports)
	assert.Empty(t, s.OrphanReports)
}
