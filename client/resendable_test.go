package client

import (
	"context"
	"testing"
	"time"

	"github.com/kvwire/kvwire/internal/cluster"
	"github.com/kvwire/kvwire/memdx"
	"github.com/stretchr/testify/assert"
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
		o := &op{req: memdx.Request{OpCode: tc.op}}
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
