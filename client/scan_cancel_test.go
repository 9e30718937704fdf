package client

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvwire/kvwire/mockcluster"
	"github.com/kvwire/kvwire/retry"
)

// cancelRetries is a slog handler that signals each wait the orchestrator
// logs before sending a RANGE_SCAN_CANCEL again.
type cancelRetries struct{ ch chan struct{} }

func (h cancelRetries) Enabled(context.Context, slog.Level) bool { return true }
func (h cancelRetries) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h cancelRetries) WithGroup(string) slog.Handler            { return h }

func (h cancelRetries) Handle(_ context.Context, r slog.Record) error {
	if r.Message != "retrying operation" {
		return nil
	}
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "op" && a.Value.String() == "RANGE_SCAN_CANCEL" {
			select {
			case h.ch <- struct{}{}:
			default:
			}
			return false
		}
		return true
	})
	return nil
}

// pendingCancel starts a scan on a client with clock fc, takes one item,
// stops every node and closes the ScanResult, whose worker then has a
// cancel of its open scan waiting for a node. It returns the client, the
// channel Close's result arrives on, and the scan's timeout.
func pendingCancel(t *testing.T, fc *retry.FakeClock) (*Client, <-chan error, time.Duration) {
	t.Helper()
	mc := newMock(t, mockcluster.Options{Buckets: []mockcluster.BucketOptions{{Name: mockcluster.DefaultBucket, NumVbuckets: 4}}})
	retries := cancelRetries{ch: make(chan struct{}, 1)}
	c := connect(t, mc, &Options{Clock: fakeClock{fc}, Logger: slog.New(retries)})
	col := c.DefaultCollection()
	scanDocs(t, col, 20)
	const timeout = time.Minute
	res, err := col.Scan(context.Background(), RangeScan{}, &ScanOptions{BatchItemLimit: 1, Timeout: timeout})
	require.NoError(t, err)
	require.True(t, res.Next())
	for _, n := range mc.Nodes() {
		n.Stop()
	}
	closed := make(chan error, 1)
	go func() { closed <- res.Close() }()
	select {
	case <-retries.ch:
	case err := <-closed:
		t.Fatalf("Close returned (%v) without the cancel waiting for its node", err)
	case <-time.After(10 * time.Second):
		t.Fatal("no cancel waited for its node")
	}
	require.Eventually(t, func() bool { return res.cur.Run().Stopped() }, 10*time.Second, time.Millisecond,
		"Close stopped the scan")
	return c, closed, timeout
}

// A cancel waiting for its node to come back waits on the client's Clock:
// with a clock an hour ahead of the wall clock it still waits, and it gives
// up once that clock passes its timeout.
func TestScanCancelWaitsOnTheClientClock(t *testing.T) {
	start := time.Now().Add(time.Hour)
	fc := retry.NewFakeClock(start)
	_, closed, timeout := pendingCancel(t, fc)
	select {
	case err := <-closed:
		t.Fatalf("Close returned (%v) before the client's clock moved", err)
	default:
	}
	require.Eventually(t, func() bool {
		select {
		case err := <-closed:
			assert.NoError(t, err)
			return true
		default:
			fc.Advance(5 * time.Second)
			return false
		}
	}, 10*time.Second, time.Millisecond, "the cancel gave up at its timeout on the client's clock")
	assert.GreaterOrEqual(t, fc.Now().Sub(start), timeout-5*time.Second, "the cancel waited its timeout")
}

// Closing the client ends a cancel that waits for its node at once, with
// the client's clock standing still: nothing is left running (TestMain
// checks for leaked goroutines).
func TestClientCloseEndsAPendingScanCancel(t *testing.T) {
	fc := retry.NewFakeClock(time.Now())
	c, closed, _ := pendingCancel(t, fc)
	require.NoError(t, c.Close())
	select {
	case err := <-closed:
		// The close of the ScanResult may come before the client's
		// (no error) or after it (the scan ended with ErrClosed).
		if err != nil {
			assert.ErrorIs(t, err, ErrClosed)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the scan's cancel outlived the client's Close")
	}
}
