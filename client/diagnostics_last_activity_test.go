package client

import (
	"context"
	"encoding/json"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvwire/kvwire/mockcluster"
	"github.com/kvwire/kvwire/retry"
)

// An endpoint whose connection ended keeps its last activity: RFC 0034's
// last_activity_us is the endpoint's (an id that stays across reconnects),
// present once any activity happened, and its sample report shows it on a
// reconnecting endpoint. Diagnostics dropped it as soon as the connection
// ended, so an endpoint reconnecting (or disconnected, after Close) read
// as one that never had any traffic.
func TestDiagnosticsKeepLastActivityAcrossReconnects(t *testing.T) {
	t.Parallel()
	mc := newMock(t, mockcluster.Options{Nodes: 2})
	fc := retry.NewFakeClock(time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC))
	c := connect(t, mc, &Options{Clock: fakeClock{fc}, ConfigPollInterval: time.Hour})
	require.NoError(t, c.WaitUntilReady(context.Background(), nil))
	down := mc.Node(1).Addr()
	var before time.Time
	for _, e := range c.Diagnostics(nil).Endpoints {
		if e.Node == down {
			before = e.LastActivity
		}
	}
	require.False(t, before.IsZero(), "the connection's bootstrap is activity")

	mc.Node(1).Stop()
	fc.Advance(time.Second) // the report is made a second after that activity
	d := awaitDiagnostics(t, c, down, EndpointReconnecting, syscall.ECONNREFUSED)
	for _, e := range d.Endpoints {
		if e.Node == down {
			assert.Equal(t, before, e.LastActivity, "the ended connection's last activity")
		}
	}
	b, err := json.Marshal(d)
	require.NoError(t, err)
	var out struct {
		Services map[string][]map[string]any
	}
	require.NoError(t, json.Unmarshal(b, &out))
	found := false
	for _, e := range out.Services["kv"] {
		if e["remote"] == down {
			found = true
			assert.Equal(t, "reconnecting", e["state"])
			assert.EqualValues(t, 1e6, e["last_activity_us"], "%s", b)
		}
	}
	require.True(t, found, "%s", b)
}
