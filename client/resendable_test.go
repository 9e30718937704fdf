package client

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/kvwire/kvwire/conn"
	"github.com/kvwire/kvwire/internal/cluster"
	"github.com/kvwire/kvwire/memdx"
	"github.com/kvwire/kvwire/mockcluster"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A request is resendable (its connection need not catch up before writing
// it: conn.Origin.Resendable) when it is idempotent, goes to the node of
// its key, and its strategy is one of the package's, which retry it alike
// whether the connection refused it or ended after writing it; not a
// mutation, not a request to a chosen node (sent once), not under a
// caller's strategy, which may tell the two apart.
func TestResendable(t *testing.T) {
	mine := RetryStrategyFunc(func(RetryRequest, RetryReason) RetryAction { return NoRetry() })
	for _, tc := range []struct {
		name     string
		op       memdx.OpCode
		strategy RetryStrategy
		node     bool
		want     bool
	}{
		{"get, default strategy", memdx.OpGet, nil, false, true},
		{"get, BestEffort", memdx.OpGet, BestEffort(nil), false, true},
		{"get, FailFastOnTerminalErrors", memdx.OpGet, FailFastOnTerminalErrors(nil), false, true},
		{"get, FollowErrorMap", memdx.OpGet, FollowErrorMap(nil), false, true},
		{"lookup_in", memdx.OpSubdocMultiLookup, nil, false, true},
		{"get, a strategy of the caller's", memdx.OpGet, mine, false, false},
		{"get, FollowErrorMap over the caller's", memdx.OpGet, FollowErrorMap(mine), false, false},
		{"upsert", memdx.OpSet, nil, false, false},
		{"get_and_touch", memdx.OpGAT, nil, false, false},
		{"stat to a node", memdx.OpStat, nil, true, false},
		{"noop to a node", memdx.OpNoop, nil, true, false},
	} {
		o := &op{opHot: opHot{c: &Client{resends: resendsIdempotent(nil)}, req: memdx.Request{OpCode: tc.op}}}
		o.strategy = internalStrategy(tc.strategy, &o.userStrategy)
		if tc.node {
			o.target.Node = &cluster.Node{}
		}
		o.st.Init(context.Background(), tc.op, o.strategy, time.Now().Add(time.Second))
		if tc.node && repeatable(tc.op) {
			o.st.SetIdempotent(true)
		}
		assert.Equal(t, tc.want, o.resendable(), tc.name)
	}
}

// The client hands conn the predicate (conn.Origin.Resendable, seen where
// each attempt's Origin goes to DoDeadline): a Get under the default
// strategy, or one of the package's, goes out resendable; an Upsert, a
// Ping, Stats or Version to a chosen node, and a Get under a caller's own
// strategy (per call or the client's) do not. Not parallel: it sets a
// package hook.
func TestResendableReachesTheConnection(t *testing.T) {
	var mu sync.Mutex
	var seen []conn.Origin
	hook := func(from *conn.Origin) {
		mu.Lock()
		seen = append(seen, *from)
		mu.Unlock()
	}
	testHookSend.Store(&hook)
	t.Cleanup(func() { testHookSend.Store(nil) }) // after the clients' Close
	mc := newMock(t, mockcluster.Options{})
	mine := RetryStrategyFunc(func(RetryRequest, RetryReason) RetryAction { return NoRetry() })
	c := connect(t, mc, nil)
	theirs := connect(t, mc, &Options{RetryStrategy: mine})
	ctx := context.Background()
	_, err := c.DefaultCollection().Upsert(ctx, "k", []byte("v"), nil)
	require.NoError(t, err)

	// sent runs op and returns the Resendable of the attempts it sent
	// under operation name.
	sent := func(name string, op func()) []bool {
		mu.Lock()
		seen = seen[:0]
		mu.Unlock()
		op()
		mu.Lock()
		defer mu.Unlock()
		var got []bool
		for _, o := range seen {
			if o.Operation == name {
				got = append(got, o.Resendable)
			}
		}
		require.NotEmpty(t, got, "no %s sent", name)
		return got
	}
	get := func(c *Client, opts *GetOptions) func() {
		return func() {
			_, err := c.DefaultCollection().Get(ctx, "k", opts)
			require.NoError(t, err)
		}
	}
	nodes := len(c.Nodes())
	for _, tc := range []struct {
		name, op string
		run      func()
		want     bool
	}{
		{"get, default strategy", "get", get(c, nil), true},
		{"get, BestEffort", "get", get(c, &GetOptions{RetryStrategy: BestEffort(nil)}), true},
		{"get, a strategy of the caller's", "get", get(c, &GetOptions{RetryStrategy: mine}), false},
		{"get, the client's strategy the caller's", "get", get(theirs, nil), false},
		{"upsert", "upsert", func() {
			_, err := c.DefaultCollection().Upsert(ctx, "k", []byte("v"), nil)
			require.NoError(t, err)
		}, false},
		{"ping", "ping", func() {
			for _, p := range c.Ping(ctx) {
				require.NoError(t, p.Err)
			}
		}, false},
		{"stats", "stats", func() {
			_, err := c.Stats(ctx, "", nil)
			require.NoError(t, err)
		}, false},
		{"version", "version", func() {
			_, err := c.Version(ctx, nil)
			require.NoError(t, err)
		}, false},
	} {
		got := sent(tc.op, tc.run)
		want := []bool{tc.want}
		if tc.op == "ping" || tc.op == "stats" || tc.op == "version" {
			want = slices.Repeat(want, nodes) // one to each node
		}
		assert.Equal(t, want, got, tc.name)
	}
}
