package main

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"github.com/kvwire/kvwire/client"
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
