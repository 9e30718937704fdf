package rangescan

import (
	"cmp"
	"context"
	"errors"

	"github.com/kvwire/kvwire/internal/kverr"
	"github.com/kvwire/kvwire/memdx"
	"github.com/kvwire/kvwire/retry"
)

// Cursor reads a Run's items one at a time, for one goroutine (client's
// ScanResult): it runs ahead of its reader by the batches the Run has
// queued, stops the Run when a sampling scan has its Limit of items, and
// records how the scan ended.
type Cursor struct {
	run   *Run
	limit uint64 // a sampling scan's items returned at most
	// unwatch stops the caller's watch that fails the Run (the client
	// closing); fail is the error of a scan that ended incomplete without
	// one of its own, from what Incomplete makes of its context's end.
	unwatch func() bool
	fail    func(op memdx.OpCode, sentinel, cause error) error
	batch   []Item
	pos     int
	count   uint64
	// halted: the scan's goroutines have ended (and its server-side scans
	// with them) while the current item is still the caller's; ended: the
	// iteration is over.
	halted bool
	ended  bool
	err    error
}

// NewCursor reads run, which reads cfg; unwatch and fail are as Cursor's
// fields say.
func NewCursor(run *Run, cfg *Config, unwatch func() bool, fail func(op memdx.OpCode, sentinel, cause error) error) Cursor {
	return Cursor{run: run, limit: cfg.Limit, unwatch: unwatch, fail: fail}
}

// Run is the Run read.
func (c *Cursor) Run() *Run { return c.run }

// Next advances to the next item, waiting for it; it returns false at
// the end of the scan, on an error (Err), or after Close.
func (c *Cursor) Next() bool {
	if c.ended {
		return false
	}
	if c.halted {
		c.stop()
		return false
	}
	c.pos++
	for c.pos >= len(c.batch) {
		b, ok := <-c.run.Out()
		if !ok {
			c.end()
			return false
		}
		c.batch, c.pos = b, 0
	}
	c.count++
	if c.limit > 0 && c.count >= c.limit {
		// The sample is complete: stop the other vbuckets' scans now,
		// not when the caller next calls Next or Close.
		c.halt()
	}
	return true
}

// Item is the item Next moved to (nil: none).
func (c *Cursor) Item() *Item {
	if c.pos < len(c.batch) {
		return &c.batch[c.pos]
	}
	return nil
}

// Err is the error that ended the scan, nil when it ended normally or
// was closed.
func (c *Cursor) Err() error { return c.err }

// Close stops the scan if it is still running and returns Err.
func (c *Cursor) Close() error {
	if !c.ended {
		c.stop()
	}
	return c.err
}

// stop ends the iteration early (see halt).
func (c *Cursor) stop() {
	if !c.halted {
		c.halt()
	}
	c.ended = true
	c.batch, c.pos = nil, 0
}

// halt stops the scan's goroutines, which cancel their server-side scans,
// and waits for them; the batches they had queued are dropped.
func (c *Cursor) halt() {
	c.unwatch()
	c.err = c.run.Stop()
	c.halted = true
	c.run.Raise()
}

// end records how the scan ended once every worker has.
func (c *Cursor) end() {
	c.unwatch()
	c.ended = true
	c.batch, c.pos = nil, 0
	err, complete, cause := c.run.Result()
	if err == nil && !complete {
		err = c.fail(c.run.Incomplete(cause))
	}
	c.err = err
	c.run.Raise()
}

// Incomplete says how a scan that ended before every vbucket was scanned,
// without an error of its own, ended by cause (its context's): op is the
// request it sent last (a GET's opcode, 0, would be a lie), sentinel the
// kverr sentinel its error matches (nil for a timeout, whose cause becomes
// a *retry.TimeoutError naming op).
func (r *Run) Incomplete(cause error) (op memdx.OpCode, sentinel, err error) {
	op = memdx.OpCode(cmp.Or(r.lastOp.Load(), uint32(memdx.OpRangeScanCreate)))
	switch {
	case errors.Is(cause, context.DeadlineExceeded):
		cause = &retry.TimeoutError{OpCode: op, LastErr: cause}
	case errors.Is(cause, context.Canceled):
		sentinel = kverr.ErrRequestCanceled
	default:
		sentinel = kverr.ErrServerFailure
	}
	return op, sentinel, cause
}
