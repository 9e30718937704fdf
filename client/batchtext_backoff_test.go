package client

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvwire/kvwire/internal/memcachedtest"
	"github.com/kvwire/kvwire/retry"
)

// A memcached that answers the version check of every text connection and
// closes it at its multi-get: each batch's keys are read in binary, and
// the text path goes off for 1 s after the first close, 2 s after the next
// (on the client's clock, a fake one here), instead of a new text
// connection per batch.
func TestGetManyMemcachedTextClosedAtEveryMultiGetBacksOff(t *testing.T) {
	f := newTextFront(t, memcachedtest.Start(t))
	fc := retry.NewFakeClock(time.Now())
	c := textClient(t, f.addr(), &Options{Clock: fakeClock{fc}})
	col := c.DefaultCollection()
	keys := batchKeys(t, col, "txclose", 8, 5)
	nd := c.cl.Topology().Nodes()[0]
	offFor := func() time.Duration {
		_, _, offUntil := nd.TextState()
		return offUntil.Sub(fc.Now())
	}
	f.setOnGets(func([]string) textAction { return textAction{close: true} })
	for i, want := range []time.Duration{time.Second, 2 * time.Second, 4 * time.Second} {
		warmText(t, c, keys[0]) // a batch in binary dials a text connection
		for range 5 {
			requireStored(t, col.GetMany(context.Background(), keys, nil), 5)
			waitFor(t, "no text dial", func() bool { return textSettled(c) })
		}
		require.Equal(t, int32(i+1), f.textConns.Load(), "text connections after %d closes", i+1)
		require.Equal(t, int32(i+1), f.multigets.Load(), "one multi-get per connection")
		assert.Equal(t, want, offFor(), "text path off")
		fc.Advance(want)
	}
}
