package client

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/kvwire/kvwire/internal/faultnode"
	"github.com/kvwire/kvwire/memdx"
	"github.com/kvwire/kvwire/mockcluster"
)

// hourStrategy retries everything after an hour, and tells asked (when
// not nil, without blocking) each reason it is asked about.
func hourStrategy(asked chan<- RetryReason) RetryStrategy {
	return RetryStrategyFunc(func(_ RetryRequest, reason RetryReason) RetryAction {
		if asked != nil {
			select {
			case asked <- reason:
			default:
			}
		}
		return RetryAfter(time.Hour)
	})
}

// waitAsked waits until a strategy was asked about want (the operation is
// then in its wait), failing if the operation ended first or a minute
// passed.
func waitAsked(t *testing.T, asked <-chan RetryReason, want RetryReason, done <-chan error) {
	t.Helper()
	select {
	case r := <-asked:
		if r != want {
			t.Fatalf("the strategy was asked about %v, want %v", r, want)
		}
	case err := <-done:
		t.Fatalf("the operation ended (%v) before its retry", err)
	case <-time.After(time.Minute):
		t.Fatalf("no retry for %v within a minute", want)
	}
}

// Close ends every retry wait at once, whatever it waits for: a Get
// waiting to retry on a node without a connection (a wait a config
// change also ends), a GetMany whose keys wait on LOCKED and on the node,
// and a key whose wait begins only when Close fails its request. Each
// ends with ErrClosed, though its strategy asked for an hour.
func TestCloseEndsEveryRetryWait(t *testing.T) {
	t.Run("node not available", func(t *testing.T) {
		_, p, c := proxiedClient(t)
		col := c.DefaultCollection()
		takeDown(t, p, c)
		asked := make(chan RetryReason, 1)
		done := make(chan error, 2)
		go func() {
			_, err := col.Get(context.Background(), "k", &GetOptions{Timeout: 2 * time.Hour, RetryStrategy: hourStrategy(asked)})
			done <- err
		}()
		waitAsked(t, asked, RetryReasonNodeNotAvailable, done)
		manyAsked := make(chan RetryReason, 1)
		go func() {
			done <- batchErr(col.GetMany(context.Background(), []string{"a", "b"},
				&GetManyOptions{Timeout: 2 * time.Hour, RetryStrategy: hourStrategy(manyAsked)}))
		}()
		waitAsked(t, manyAsked, RetryReasonNodeNotAvailable, done)
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
		for range 2 {
			expectClosed(t, done)
		}
	})
	t.Run("locked, in a batch", func(t *testing.T) {
		mc := newMock(t, mockcluster.Options{})
		c := connect(t, mc, nil)
		col := c.DefaultCollection()
		for _, k := range []string{"l1", "l2"} {
			if _, err := col.Upsert(context.Background(), k, []byte("v"), nil); err != nil {
				t.Fatal(err)
			}
			faultGets(t, mc, k, mockcluster.Action{Status: memdx.StatusLocked}, 0)
		}
		closeDuringBatch(t, c, []string{"l1", "l2"}, RetryReasonKVLocked)
	})
	// A key still in flight when the client closes fails with its
	// connection and comes to its retry wait after the others were woken:
	// that wait ends at once too.
	t.Run("in flight at Close, in a batch", func(t *testing.T) {
		mc, p, c := proxiedClient(t)
		col := c.DefaultCollection()
		for _, k := range []string{"l1", "l2"} {
			if _, err := col.Upsert(context.Background(), k, []byte("v"), nil); err != nil {
				t.Fatal(err)
			}
		}
		faultGets(t, mc, "l1", mockcluster.Action{Status: memdx.StatusLocked}, 0)
		p.OnResponse(func(req, _ *memdx.Packet) faultnode.Action {
			return faultnode.Action{Drop: req.OpCode == memdx.OpGet && strings.HasSuffix(string(req.Key), "l2")} // the key may carry a collection id
		})
		closeDuringBatch(t, c, []string{"l1", "l2"}, RetryReasonKVLocked)
	})
}

// takeDown makes the proxied client's node refuse connections, resets the
// one it has, and waits until the client's node has no live connection
// (polling: no margin rides on it; a minute bounds a failure).
func takeDown(t *testing.T, p *faultnode.Proxy, c *Client) {
	t.Helper()
	n := c.cl.Topology().Nodes()[0]
	p.RefuseNew(true)
	p.Reset()
	for deadline := time.Now().Add(time.Minute); ; {
		if _, _, err := n.Pick(); err != nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the node still has a live connection a minute after the reset")
		}
		time.Sleep(time.Millisecond)
	}
}

// closeDuringBatch runs a GetMany of keys whose strategy asks for an
// hour's wait, closes c once the strategy was asked about reason, and
// requires every key to end with ErrClosed.
func closeDuringBatch(t *testing.T, c *Client, keys []string, reason RetryReason) {
	t.Helper()
	asked := make(chan RetryReason, 1)
	done := make(chan error, 1)
	go func() {
		done <- batchErr(c.DefaultCollection().GetMany(context.Background(), keys,
			&GetManyOptions{Timeout: 2 * time.Hour, RetryStrategy: hourStrategy(asked)}))
	}()
	waitAsked(t, asked, reason, done)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	expectClosed(t, done)
}

// batchErr is the first key's error when every key of the batch failed
// with ErrClosed, else an error naming the first key that did not (a
// success included).
func batchErr(res []GetManyResult) error {
	for _, r := range res {
		if !errors.Is(r.Err, ErrClosed) {
			return fmt.Errorf("key %q: %v, want ErrClosed", r.Key, r.Err)
		}
	}
	return res[0].Err
}

func expectClosed(t *testing.T, done <-chan error) {
	t.Helper()
	select {
	case err := <-done:
		if !errors.Is(err, ErrClosed) {
			t.Fatalf("after Close: %v, want ErrClosed", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("an operation still waits its hour a minute after Close")
	}
}
