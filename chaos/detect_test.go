package chaos

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kvwire/kvwire/client"
)

// liar is a client that breaks each promise the chaos test checks, so that
// TestChaosDetects can show every check fails when its promise is broken.
type liar struct {
	kvAPI
	gets atomic.Int64
}

// mutate runs a write the way a careless client would: an ambiguous write
// is sent again as if it had never left (applied twice, sent again after
// no answer), and a failure the server answered with a status that is not
// retried is reported as a success (a write acknowledged, never applied).
func mutate[R any](call func() (R, error), fake R) (R, error) {
	r, err := call()
	switch {
	case errors.Is(err, client.ErrAmbiguous):
		return call()
	case errors.Is(err, client.ErrServerFailure):
		return fake, nil
	}
	return r, err
}

var fakeResult = client.MutationResult{Cas: 0x11e}

func (l *liar) Upsert(ctx context.Context, key string, value []byte, opts *client.MutateOptions) (client.MutationResult, error) {
	return mutate(func() (client.MutationResult, error) { return l.kvAPI.Upsert(ctx, key, value, opts) }, fakeResult)
}

func (l *liar) Replace(ctx context.Context, key string, value []byte, opts *client.MutateOptions) (client.MutationResult, error) {
	return mutate(func() (client.MutationResult, error) { return l.kvAPI.Replace(ctx, key, value, opts) }, fakeResult)
}

func (l *liar) Append(ctx context.Context, key string, value []byte, opts *client.MutateOptions) (client.MutationResult, error) {
	return mutate(func() (client.MutationResult, error) { return l.kvAPI.Append(ctx, key, value, opts) }, fakeResult)
}

func (l *liar) Increment(ctx context.Context, key string, opts *client.CounterOptions) (client.CounterResult, error) {
	return mutate(func() (client.CounterResult, error) { return l.kvAPI.Increment(ctx, key, opts) },
		client.CounterResult{MutationResult: fakeResult, Value: 1})
}

// Get now and then (the first, then every tenth: a short run on a loaded
// machine makes few) returns well after its deadline, as a client that
// slept a backoff past it would.
func (l *liar) Get(ctx context.Context, key string, opts *client.GetOptions) (client.GetResult, error) {
	r, err := l.kvAPI.Get(ctx, key, opts)
	if l.gets.Add(1)%10 == 1 {
		time.Sleep(opts.Timeout + 800*time.Millisecond)
	}
	return r, err
}

// The checks are not vacuous: against a client that retries ambiguous
// writes, acknowledges writes that failed and overstays deadlines, a short
// run reports lost, duplicated, re-sent and late operations, naming the seed.
func TestChaosDetects(t *testing.T) {
	cfg := config{name: "liar", seed: *flagSeed, duration: 1500 * time.Millisecond, short: true,
		workers: 6, keys: 8, kinds: []faultKind{fkCloseAfter, fkErrmap}, prob: 0.3, heap: 1 << 30, logf: t.Logf,
		wrap: func(k kvAPI) kvAPI { return &liar{kvAPI: k} }}
	cfg.rerun = "go test ./chaos -run TestChaosDetects"
	r := run(t, cfg)
	t.Log(r.summary)
	st := &r.st
	for name, n := range map[string]int64{"lost": st.lost, "duplicated": st.duplicated, "resent": st.resent, "late": st.late} {
		if n == 0 {
			t.Errorf("the lying client's %s operations went unnoticed: %s", name, r.summary)
		}
	}
	for _, cat := range []string{"lost", "duplicated", "resent", "late"} {
		if r.problems[cat] == 0 {
			t.Errorf("no %q problem recorded; problems: %v", cat, r.problems)
		}
	}
	ft := &fakeT{}
	checkReport(ft, r)
	if !strings.Contains(ft.msg, "seed=") || !strings.Contains(ft.msg, "rerun:") {
		t.Errorf("the failure message does not say how to reproduce: %q", ft.msg)
	}
}

// fakeT records what checkReport would report.
type fakeT struct {
	testing.TB
	msg string
}

func (f *fakeT) Helper()                           {}
func (f *fakeT) Errorf(format string, args ...any) { f.msg += fmt.Sprintf(format, args...) + "\n" }
func (f *fakeT) Logf(format string, args ...any)   {}
