package fanout

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"testing/synctest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvwire/kvwire/conn"
	"github.com/kvwire/kvwire/internal/kverr"
	"github.com/kvwire/kvwire/internal/leakcheck"
)

func TestMain(m *testing.M) { leakcheck.Main(m) }

// The tests run in a synctest bubble: synctest.Wait returns once every
// read is blocked, which shows they all run at once without a sleep.

// First returns the first answer without an error while the other reads
// are still running; it cancels them and waits for every one to end
// before it returns.
func TestFirstReturnsFirstAnswerAndWaitsForTheCanceledReads(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		answer := make(chan struct{})
		var ended atomic.Int32
		var got string
		var errs []error
		returned := make(chan struct{})
		go func() {
			defer close(returned)
			got, errs = First(t.Context(), []int{0, 1, 2}, func(ctx context.Context, i int) (string, error) {
				defer ended.Add(1)
				if i == 1 {
					<-answer
					return "copy 1", nil
				}
				<-ctx.Done() // the slow copies end only when First cancels them
				return "", ctx.Err()
			})
		}()
		synctest.Wait()
		require.Zero(t, ended.Load(), "every read runs at once, each blocked in its own goroutine")
		close(answer)
		<-returned
		assert.Equal(t, "copy 1", got)
		assert.Nil(t, errs)
		assert.EqualValues(t, 3, ended.Load(), "First waits for the canceled reads before it returns")
	})
}

// With no answer, First returns every read's error and the zero value.
func TestFirstWithNoAnswerReturnsEveryError(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		got, errs := First(t.Context(), []int{0, 1, 2}, func(_ context.Context, i int) (*int, error) {
			return &i, fmt.Errorf("copy %d: %w", i, errNotFound)
		})
		assert.Nil(t, got, "a failed read's value is not returned")
		require.Len(t, errs, 3)
		var msgs []string
		for _, err := range errs {
			assert.ErrorIs(t, err, errNotFound)
			msgs = append(msgs, err.Error())
		}
		assert.ElementsMatch(t, []string{"copy 0: not found", "copy 1: not found", "copy 2: not found"}, msgs)
	})
}

// The caller's context reaches every read, and its end ends them.
func TestFirstPassesTheCallersContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		returned := make(chan []error)
		go func() {
			_, errs := First(ctx, []int{0, 1}, func(ctx context.Context, _ int) (int, error) {
				<-ctx.Done()
				return 0, ctx.Err()
			})
			returned <- errs
		}()
		synctest.Wait()
		cancel()
		errs := <-returned
		require.Len(t, errs, 2)
		for _, err := range errs {
			assert.ErrorIs(t, err, context.Canceled)
		}
	})
}

// All waits for every read, running at once, and returns the answers in
// the order of copies (not the order they came in), and the errors of the
// reads that failed.
func TestAllReturnsAnswersInTheOrderOfCopies(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		copies := []int{3, 1, 2, 0}
		release := map[int]chan struct{}{}
		for _, i := range copies {
			release[i] = make(chan struct{})
		}
		var started atomic.Int32
		var out []string
		var errs []error
		returned := make(chan struct{})
		go func() {
			defer close(returned)
			out, errs = All(t.Context(), copies, func(_ context.Context, i int) (string, error) {
				started.Add(1)
				<-release[i]
				if i == 2 {
					return "ignored", fmt.Errorf("copy 2: %w", errNotFound)
				}
				return fmt.Sprint("copy ", i), nil
			})
		}()
		// Answers come in the reverse of the order asked; each read is
		// blocked, all at once, until the test lets it answer.
		synctest.Wait()
		require.EqualValues(t, len(copies), started.Load(), "every read runs at once")
		for _, i := range []int{0, 2, 1, 3} {
			synctest.Wait()
			select {
			case <-returned:
				t.Fatalf("All returned before copy %d answered", i)
			default:
			}
			close(release[i])
		}
		<-returned
		assert.Equal(t, []string{"copy 3", "copy 1", "copy 0"}, out)
		require.Len(t, errs, 1)
		assert.ErrorIs(t, errs[0], errNotFound)
	})
}

// A read that fails does not cancel the others: All is for every copy
// that answers.
func TestAllDoesNotCancelOnAnError(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		failed := make(chan struct{})
		out, errs := All(t.Context(), []int{0, 1}, func(ctx context.Context, i int) (int, error) {
			if i == 0 {
				defer close(failed)
				return 0, errNotFound
			}
			<-failed
			return i, ctx.Err()
		})
		assert.Equal(t, []int{1}, out)
		assert.Equal(t, []error{errNotFound}, errs)
	})
}

var errNotFound = errors.New("not found")

// Each runs every call at once, and returns every result in the order of
// the targets with the errors joined.
func TestEachRunsEveryCallAtOnceAndJoinsTheErrors(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		var started atomic.Int32
		type res struct {
			out []string
			err error
		}
		done := make(chan res)
		go func() {
			out, err := Each(t.Context(), []string{"a", "b", "c"}, func(_ context.Context, n string) (string, error) {
				started.Add(1)
				<-release
				if n == "b" {
					return "b failed", fmt.Errorf("node %s: %w", n, errNotFound)
				}
				return n + " ok", nil
			})
			done <- res{out, err}
		}()
		synctest.Wait()
		require.EqualValues(t, 3, started.Load(), "every call runs at once")
		close(release)
		r := <-done
		assert.Equal(t, []string{"a ok", "b failed", "c ok"}, r.out, "every result, a failed call's too, in order")
		assert.ErrorIs(t, r.err, errNotFound)
		assert.EqualError(t, r.err, "node b: not found")
	})
}

// Error prefers a copy's document-not-found to the first error, and names
// the key when no copy answered at all.
func TestErrorPrefersDocumentNotFound(t *testing.T) {
	other := errors.New("timeout")
	notFound := fmt.Errorf("copy 1: %w", kverr.ErrDocumentNotFound)
	assert.Same(t, notFound, Error("k", []error{other, notFound}))
	assert.Same(t, other, Error("k", []error{other, errors.New("second")}))
	err := Error("k", nil)
	assert.ErrorIs(t, err, kverr.ErrNoNodeAvailable)
	assert.Contains(t, err.Error(), `"k"`)
}

// A call that panics makes First, All and Each panic with its value on the
// caller's goroutine, after every other call has ended, so that the caller
// can recover it and no goroutine is left. The others are canceled at once:
// a call that would run to its timeout (a Stats to a slow node) does not
// hold the panic back. In the bubble, a call left waiting for a cancel
// that never comes is a deadlock, which fails the test.
func TestAPanickingCallPanicsOnTheCallersGoroutine(t *testing.T) {
	read := func(ended *atomic.Int32) func(context.Context, int) (int, error) {
		return func(ctx context.Context, i int) (int, error) {
			defer ended.Add(1)
			if i == 1 {
				panic("boom")
			}
			if i == 2 {
				<-ctx.Done() // ends only when the panic cancels it
				return 0, ctx.Err()
			}
			return i, errors.New("no")
		}
	}
	for name, call := range map[string]func(context.Context, *atomic.Int32){
		"First": func(ctx context.Context, e *atomic.Int32) { First(ctx, []int{0, 1, 2}, read(e)) },
		"All":   func(ctx context.Context, e *atomic.Int32) { All(ctx, []int{0, 1, 2}, read(e)) },
		"Each": func(ctx context.Context, e *atomic.Int32) {
			Each(ctx, []int{0, 1, 2}, func(ctx context.Context, i int) (int, error) { return read(e)(ctx, i) })
		},
	} {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var ended atomic.Int32
				var got any
				func() {
					defer func() { got = recover() }()
					call(t.Context(), &ended)
				}()
				assert.Equal(t, "boom", got)
				assert.EqualValues(t, 3, ended.Load(), "every call ended before the panic reached the caller")
			})
		})
	}
}

// A call that ends its goroutine with runtime.Goexit (t.FailNow) ends the
// caller's the same way, rather than leaving First waiting for it forever.
func TestACallsGoexitEndsTheCallersGoroutine(t *testing.T) {
	returned := make(chan bool, 1)
	go func() {
		ok := false
		defer func() { returned <- ok }()
		First(t.Context(), []int{0}, func(context.Context, int) (int, error) {
			runtime.Goexit()
			return 0, nil
		})
		ok = true
	}()
	require.False(t, <-returned, "First returned after its call's Goexit")
}

// The reads First cancels once one answered are canceled with a cause that
// says so to the connections too (conn.ErrNotNeeded): the late answers
// they then get are expected, neither orphans nor stray warnings. A read
// the caller's own cancel ended is not.
func TestFirstMarksTheOtherReadsUnneeded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		answer := make(chan struct{})
		causes := make(chan error, 2)
		go func() { synctest.Wait(); close(answer) }()
		First(t.Context(), []int{0, 1}, func(ctx context.Context, i int) (string, error) {
			if i == 0 {
				<-answer
				return "copy 0", nil
			}
			<-ctx.Done()
			causes <- context.Cause(ctx)
			return "", ctx.Err()
		})
		cause := <-causes
		assert.ErrorIs(t, cause, conn.ErrNotNeeded, "the loser's cause")

		caller, cancel := context.WithCancel(t.Context())
		go func() { synctest.Wait(); cancel() }()
		_, errs := First(caller, []int{0, 1}, func(ctx context.Context, i int) (string, error) {
			<-ctx.Done()
			causes <- context.Cause(ctx)
			return "", ctx.Err()
		})
		require.Len(t, errs, 2)
		for range 2 {
			c := <-causes
			assert.NotErrorIs(t, c, conn.ErrNotNeeded, "the caller canceled")
			assert.False(t, errors.Is(c, errAnswered))
		}
	})
}
