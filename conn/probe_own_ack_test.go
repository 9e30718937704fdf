package conn

import (
	"errors"
	"testing"

	"github.com/kvwire/kvwire/internal/kverr"
	"github.com/kvwire/kvwire/memdx"
)

// A paused node's kernel acknowledges what it is sent, the probe
// included, while the process answers nothing. On an idle connection the
// probe's own bytes, acknowledged, are no sign of life: the connection is
// closed at the first check, ProbeTimeout after the probe, as where the
// socket has no unacknowledged count, not a ProbeTimeout later.
func TestProbeOwnBytesAcknowledgedAreNoProgress(t *testing.T) {
	fc := newFakeClock()
	var q fakeUnsent // 0: the node's kernel takes everything at once
	c, p := dialPipe(t, Options{clock: fc, unsentOf: q.of}, nil)
	abandonOne(t, c, p, fc, "a")
	fc.Advance(DefaultProbeAfter)
	if probe := p.read(); probe.OpCode != memdx.OpNoop {
		t.Fatalf("got %s, want the NOOP probe", probe.OpCode)
	}
	waitFor(t, "the probe's timer", func() bool { return fc.armedWithin(DefaultProbeTimeout) })
	// The probe written in full (its state too): the socket taking its
	// bytes is not what this check may count.
	waitFor(t, "the probe written", func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.monitor.probe != nil && c.writer.written >= c.monitor.probe.end
	})
	nextCheck(t, fc, closed(c))
	if c.Err() == nil {
		t.Fatal("still open ProbeTimeout after the probe, which the node's kernel acknowledged and the node never answered")
	}
	if !errors.Is(c.Err(), kverr.ErrUnresponsive) {
		t.Fatalf("connection error %v; want kverr.ErrUnresponsive", c.Err())
	}
}
