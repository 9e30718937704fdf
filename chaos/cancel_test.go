package chaos

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kvwire/kvwire/client"
)

// Cancellation. A share of the workers' steps (-chaos.cancels, single
// operations and batch calls alike) run under a context the harness
// cancels at a moment drawn from the worker's seeded generator:
//
//   - before: before the call (nothing may be sent);
//   - timer: after a drawn delay, from a few microseconds (while the
//     request is queued or being written) up to the timeout (while it is
//     in flight, or between retries);
//   - arrival: when a request of the operation (any key's, for a batch)
//     reaches a node, just before the node runs it: the request is written
//     and will be applied unless a fault stops it, so the caller gives up
//     on an answer that is on its way.
//
// What the client may report for a cancelled operation, and what the
// checks make of it: a read did nothing (the model keeps every state); a
// mutation whose error is ambiguous (errors.Is ErrAmbiguous: an attempt was
// written) may have been applied, at most once, and is read back like any
// ambiguous outcome; a mutation whose error is not ambiguous (the request
// was withdrawn before it was written, or it failed definitely before the
// cancel) was not applied: the hook's count says so or the run fails
// (applied-after-failure), and an attempt the Observer saw end written
// without an answer must make the error ambiguous (unreported-ambiguity).
// An ErrRequestCanceled from an operation whose context was not cancelled
// fails the run (unexpected-error). A cancel that comes after the answer
// leaves the outcome the client reported, checked as usual.

// cancelMode is when the harness cancels an operation's context.
type cancelMode uint8

const (
	cancelBefore cancelMode = iota
	cancelTimer
	cancelArrival
	numCancelModes
)

var cancelNames = [numCancelModes]string{"before", "timer", "arrival"}

func (m cancelMode) String() string { return cancelNames[m] }

// defaultCancelShare is the percentage of a worker's steps run under a
// context the harness cancels.
const defaultCancelShare = 8

// canceller is the cancellation of one call to the client (a single
// operation, or a batch: its keys' operations share it). Everything but
// fired is set before the operation is registered, so the hook reads it
// under the key's mu.
type canceller struct {
	mode   cancelMode
	delay  time.Duration // cancelTimer
	cancel context.CancelFunc
	timer  *time.Timer
	fired  atomic.Bool // the harness has cancelled (maybe after the call returned)
	// canceled: the context was cancelled when the call returned (owner
	// only, after it returned).
	canceled bool
}

// drawCancel decides whether the next call runs under a cancelled context,
// and when it is cancelled; nil: it is not.
func (w *worker) drawCancel(timeout time.Duration) *canceller {
	if w.h.cancelShare <= 0 || w.rng.Intn(100) >= w.h.cancelShare {
		return nil
	}
	c := &canceller{mode: cancelMode(w.rng.Intn(int(numCancelModes)))}
	if c.mode == cancelTimer {
		// Most cancels early (queued, being written, just sent), the rest
		// anywhere up to the timeout (in flight, between retries).
		switch w.rng.Intn(3) {
		case 0:
			c.delay = time.Duration(w.rng.Int63n(int64(200 * time.Microsecond)))
		case 1:
			c.delay = time.Duration(w.rng.Int63n(int64(5 * time.Millisecond)))
		default:
			c.delay = time.Duration(w.rng.Int63n(int64(timeout)))
		}
	}
	return c
}

// arm derives the call's context from ctx; cancelBefore cancels it at
// once. The timer starts with start, when the call is made.
func (c *canceller) arm(ctx context.Context) context.Context {
	if c == nil {
		return ctx
	}
	ctx, c.cancel = context.WithCancel(ctx)
	if c.mode == cancelBefore {
		c.fire()
	}
	return ctx
}

func (c *canceller) start() {
	if c != nil && c.mode == cancelTimer {
		c.timer = time.AfterFunc(c.delay, c.fire)
	}
}

func (c *canceller) fire() {
	c.fired.Store(true)
	c.cancel()
}

// arrived is the hook's: a request of the operation reached a node. It
// runs under the key's mu; cancelling only closes the context's channel.
func (c *canceller) arrived() {
	if c != nil && c.mode == cancelArrival && !c.fired.Load() {
		c.fire()
	}
}

// done ends the canceller once the call has returned: canceled says
// whether the context had been cancelled by then.
func (c *canceller) done(ctx context.Context) {
	if c == nil {
		return
	}
	c.canceled = ctx.Err() != nil
	if c.timer != nil {
		c.timer.Stop()
	}
	c.cancel()
}

// hider is a client that hides the doubt a cancel leaves: a mutation
// cancelled after it was written is reported cancelled and not ambiguous
// (as a client that took "cancelled" to mean "not done" would).
type hider struct{ kvAPI }

// hide returns err without its ambiguity when it is a cancellation.
func hide(err error) error {
	var kv *client.KeyValueError
	if errors.Is(err, client.ErrRequestCanceled) && errors.Is(err, client.ErrAmbiguous) && errors.As(err, &kv) {
		return &client.KeyValueError{Op: kv.Op, Key: kv.Key, Err: client.ErrRequestCanceled, Cause: context.Canceled}
	}
	return err
}

func (l *hider) Upsert(ctx context.Context, key string, value []byte, opts *client.UpsertOptions) (client.MutationResult, error) {
	r, err := l.kvAPI.Upsert(ctx, key, value, opts)
	return r, hide(err)
}

func (l *hider) Append(ctx context.Context, key string, value []byte, opts *client.AppendOptions) (client.MutationResult, error) {
	r, err := l.kvAPI.Append(ctx, key, value, opts)
	return r, hide(err)
}

func (l *hider) Increment(ctx context.Context, key string, opts *client.IncrementOptions) (client.CounterResult, error) {
	r, err := l.kvAPI.Increment(ctx, key, opts)
	return r, hide(err)
}

func (l *hider) UpsertMany(ctx context.Context, items []client.UpsertManyItem, opts *client.UpsertManyOptions) []client.MutateManyResult {
	res := l.kvAPI.UpsertMany(ctx, items, opts)
	for i := range res {
		res[i].Err = hide(res[i].Err)
	}
	return res
}

// cancelLies are the problems the hider must raise: a write reported not
// applied that was (the hook's count), and an attempt written without an
// answer behind an error that is not ambiguous (the Observer's).
var cancelLies = []string{"applied-after-failure", "unreported-ambiguity"}

// The cancellation checks are not vacuous: a client that reports a
// cancelled, written mutation as not written is caught, in single
// operations and in batches, by the hook's count and by the Observer.
func TestChaosDetectsHiddenCancel(t *testing.T) {
	cfg := config{name: "hider", seed: *flagSeed, duration: 1500 * time.Millisecond, short: true,
		workers: 6, keys: 8, kinds: []faultKind{}, heap: 1 << 30, logf: t.Logf, batches: 30, cancels: 50,
		wrap: func(k kvAPI) kvAPI { return &hider{kvAPI: k} },
		// Until each lie was caught (a lie is checked when its operation
		// settles, 5 s on), however few operations a busy machine makes.
		until: func(h *harness) bool { return h.caught(cancelLies...) && h.caughtInBatches(cancelLies...) }}
	cfg.rerun = "go test ./chaos -run TestChaosDetectsHiddenCancel"
	r := run(t, cfg)
	t.Log(r.summary)
	requireCaught(t, r, cancelLies)
}
