package client

import (
	"context"
	"testing"
	"time"
)

// An operation waiting out a retry after finding its node without a
// connection retries as soon as the node has one again, not at the end of
// its back-off: with a strategy that asks for an hour's wait, a Get and a
// GetMany's keys still succeed once the node is back. Before the node is
// back, each must have been refused a connection and be waiting (its
// strategy was asked, for NODE_NOT_AVAILABLE). What the test waits for in
// real time (the connection to die, the redial) bounds a failure only.
func TestNodeBackEndsRetryWaitsAtOnce(t *testing.T) {
	_, p, c := proxiedClient(t)
	col := c.DefaultCollection()
	ctx := context.Background()
	if _, err := col.Upsert(ctx, "k", []byte(`"v"`), nil); err != nil {
		t.Fatal(err)
	}
	takeDown(t, p, c)
	guard := time.After(time.Minute)

	getAsked, manyAsked := make(chan RetryReason, 1), make(chan RetryReason, 1)
	done := make(chan error, 2)
	go func() {
		_, err := col.Get(ctx, "k", &GetOptions{Timeout: 2 * time.Hour, RetryStrategy: hourStrategy(getAsked)})
		done <- err
	}()
	go func() {
		var err error
		for _, r := range col.GetMany(ctx, []string{"k", "k", "k"}, &GetManyOptions{Timeout: 2 * time.Hour, RetryStrategy: hourStrategy(manyAsked)}) {
			if r.Err != nil {
				err = r.Err
			}
		}
		done <- err
	}()
	waitAsked(t, getAsked, RetryReasonNodeNotAvailable, done)
	waitAsked(t, manyAsked, RetryReasonNodeNotAvailable, done)
	p.RefuseNew(false)
	for range 2 {
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("after the node came back: %v", err)
			}
		case <-guard:
			t.Fatal("an operation still waits its hour a minute after the reset: the node's return did not end the wait")
		}
	}
}
