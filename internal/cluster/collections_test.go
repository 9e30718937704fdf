package cluster

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sync/singleflight"

	"github.com/kvwire/kvwire/conn"
	"github.com/kvwire/kvwire/memdx"
	"github.com/kvwire/kvwire/retry"
)

// A caller waiting for a collection-id lookup (perhaps another caller's,
// under that caller's context and deadline) waits within its own: its
// context's end or its deadline on the clock ends the wait as its own
// lookup would have ended, a *conn.RequestError with the context's error,
// not written; the lookup's result, once there, is taken even past the
// deadline.
func TestCollectionLookupWaitEndsWithItsCaller(t *testing.T) {
	fc := retry.NewFakeClock(time.Now())
	cc := CollectionIDs{clock: fc}
	flight := make(chan singleflight.Result, 1) // a lookup not answered yet
	wait := func(ctx context.Context, deadline time.Time) <-chan error {
		done := make(chan error, 1)
		go func() {
			_, err := cc.await(ctx, deadline, flight, "node:11210")
			done <- err
		}()
		return done
	}
	ended := func(done <-chan error) error {
		t.Helper()
		select {
		case err := <-done:
			return err
		case <-time.After(10 * time.Second):
			t.Fatal("the wait did not end")
			return nil
		}
	}
	isRequestError := func(err, cause error) {
		t.Helper()
		var re *conn.RequestError
		require.True(t, errors.As(err, &re), "%v", err)
		assert.Equal(t, memdx.OpCollectionsGetID, re.Op)
		assert.False(t, re.Written)
		assert.ErrorIs(t, err, cause)
	}

	ctx, cancel := context.WithCancel(context.Background())
	done := wait(ctx, fc.Now().Add(time.Hour))
	cancel()
	isRequestError(ended(done), context.Canceled)

	done = wait(context.Background(), fc.Now().Add(time.Second))
	bctx, bcancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer bcancel()
	require.NoError(t, fc.BlockUntilTimers(bctx, 1))
	fc.Advance(time.Second)
	isRequestError(ended(done), context.DeadlineExceeded)

	flight <- singleflight.Result{Val: uint32(8)}
	v, err := cc.await(context.Background(), fc.Now().Add(-time.Second), flight, "node:11210")
	require.NoError(t, err)
	assert.Equal(t, uint32(8), v)
}
