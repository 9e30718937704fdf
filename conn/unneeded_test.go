package conn

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/kvwire/kvwire/memdx"
)

// A request its caller gave up because it no longer needs the answer (its
// context canceled with a cause wrapping ErrNotNeeded: the read of one
// copy of a document that another copy's read beat) has an expected
// late answer: it is neither an orphan nor logged as a stray response
// (both say something went wrong, at warn), though the connection's
// counters still count it. A request canceled otherwise, answered after
// it on the same connection, still is both.
func TestLateAnswerToAnUnneededRequestIsNoOrphan(t *testing.T) {
	o := newOrphans(t)
	var logs logBuffer
	c, p := dialPipe(t, Options{ProbeAfter: -1, OnOrphan: o.hook, Logger: logs.logger()}, nil)
	o.set(c)
	abandon := func(key string, unneeded bool) memdx.Packet {
		done := make(chan error, 1)
		req := memdx.NewGet([]byte(key))
		from := Origin{Operation: key}
		ctx, stop := context.WithCancelCause(context.Background())
		defer stop(nil)
		go func() { _, err := c.DoDeadline(ctx, time.Time{}, &req, nil, &from); done <- err }()
		r := p.read()
		if unneeded {
			stop(fmt.Errorf("another copy answered: %w", ErrNotNeeded))
		} else {
			stop(nil)
		}
		if err := recv(t, done); !errors.Is(err, context.Canceled) || !requestError(t, err).Written {
			t.Fatalf("%s: %v, want a written Canceled", key, err)
		}
		return r
	}
	lost := abandon("lost", true)
	canceled := abandon("canceled", false)
	p.write(ok(lost, ""), ok(canceled, ""))
	x := o.next(t)
	if x.Opaque != canceled.Opaque || x.Operation != "canceled" {
		t.Fatalf("orphan %+v, want the canceled request's (opaque %d), not the unneeded one's (%d)", x, canceled.Opaque, lost.Opaque)
	}
	o.none(t, "the unneeded request's answer is expected")
	if s := c.Stats(); s.LateResponses != 2 {
		t.Errorf("late responses %d, want 2", s.LateResponses)
	}
	out := logs.String()
	if n := strings.Count(out, "dropped a stray response"); n != 1 || !strings.Contains(out, fmt.Sprintf("opaque=%d", canceled.Opaque)) {
		t.Errorf("stray warnings: %d, want the canceled request's alone:\n%s", n, out)
	}
}
