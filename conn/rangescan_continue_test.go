package conn

import (
	"context"
	"errors"
	"testing"

	"github.com/kvwire/kvwire/memdx"
)

// RANGE_SCAN_CONTINUE is answered with any number of SUCCESS packets (no
// key: the value holds keys or documents), ended by RANGE_SCAN_MORE,
// RANGE_SCAN_COMPLETE or an error: handle sees each, and the request ends
// on the last.
func TestRangeScanContinueMultiResponse(t *testing.T) {
	c, p := dialPipe(t, Options{}, nil)
	var values []string
	var last memdx.Status
	done := make(chan error, 1)
	go func() {
		req := memdx.NewRangeScanContinue(memdx.RangeScanContinue{ItemLimit: 10})
		done <- c.Do(testCtx(t), &req, func(p *memdx.Packet) error {
			values = append(values, string(p.Value))
			last = p.Status
			return nil
		})
	}()
	req := p.read()
	p.write(ok(req, "a"), ok(req, "b"))
	p.write(res(req, memdx.StatusRangeScanMore, "c"))
	if err := recv(t, done); err != nil {
		t.Fatal(err)
	}
	if len(values) != 3 || values[2] != "c" || last != memdx.StatusRangeScanMore {
		t.Fatalf("handle saw %q, last status %s", values, last)
	}
	if c.Pending() != 0 {
		t.Fatalf("%d pending after the continue", c.Pending())
	}
}

// A continue abandoned after its first packet stays a tombstone through
// the SUCCESS packets that follow (a keyless SUCCESS does not end it as it
// ends STAT) and goes on the status that ends the series.
func TestRangeScanContinueAbandonedUntilItsLastPacket(t *testing.T) {
	c, p := dialPipe(t, Options{}, nil)
	ctx, cancel := context.WithCancel(context.Background())
	entered := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		req := memdx.NewRangeScanContinue(memdx.RangeScanContinue{})
		calls := 0
		done <- c.Do(ctx, &req, func(*memdx.Packet) error {
			if calls++; calls == 1 {
				close(entered)
			}
			return nil
		})
	}()
	req := p.read()
	p.write(ok(req, "1"))
	<-entered
	cancel()
	if err := recv(t, done); !errors.Is(err, context.Canceled) {
		t.Fatalf("Do: %v", err)
	}
	p.write(ok(req, "2"))
	// A NOOP answered after that packet: the reader has handled it.
	noop := make(chan error, 1)
	go func() {
		req := memdx.NewNoop()
		noop <- c.Do(testCtx(t), &req, nil)
	}()
	p.write(ok(p.read(), ""))
	if err := recv(t, noop); err != nil {
		t.Fatal(err)
	}
	if c.Pending() != 1 {
		t.Fatalf("%d pending; want the continue's tombstone", c.Pending())
	}
	p.write(res(req, memdx.StatusRangeScanComplete, "3"))
	waitFor(t, "the tombstone dropped", func() bool { return c.Pending() == 0 })
	if c.Err() != nil {
		t.Fatal(c.Err())
	}
}
