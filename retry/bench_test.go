package retry

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/kvwire/kvwire/memdx"
)

// TestDecideAllocations: a retry decision allocates nothing when Debug
// logging is off, whether the strategy or the controlled backoff decides.
func TestDecideAllocations(t *testing.T) {
	o := &Orchestrator{Logger: quiet}
	st := new(State)
	for _, r := range []Reason{ReasonKVNotMyVbucket, ReasonKVTemporaryFailure, ReasonKVErrorMapRetryIndicated} {
		allocs := testing.AllocsPerRun(100, func() {
			st.Init(context.Background(), memdx.OpGet, nil, time.Now().Add(time.Hour))
			for range 5 {
				if d := o.decide(st, r, nil); !d.Retry {
					t.Fatal("not retried")
				}
			}
		})
		if allocs != 0 {
			t.Errorf("%s: %v allocations per run, want 0", r, allocs)
		}
	}
	// The zero Orchestrator's default logger (Info) is also quiet.
	var zero Orchestrator
	prev := slog.Default()
	slog.SetDefault(slog.New(slog.DiscardHandler))
	defer slog.SetDefault(prev)
	allocs := testing.AllocsPerRun(100, func() {
		st.Init(context.Background(), memdx.OpGet, nil, time.Now().Add(time.Hour))
		zero.decide(st, ReasonKVLocked, nil)
	})
	if allocs != 0 {
		t.Errorf("zero Orchestrator: %v allocations per run, want 0", allocs)
	}
}

// TestWaitAllocations: on the real clock only the first wait of a State
// allocates its timer; later waits (and retries at once) allocate nothing.
func TestWaitAllocations(t *testing.T) {
	o := &Orchestrator{Logger: quiet}
	st := new(State)
	st.Init(context.Background(), memdx.OpGet, fixed(time.Microsecond), time.Now().Add(time.Hour))
	if err := o.Wait(st, ReasonKVLocked, nil); err != nil {
		t.Fatal(err)
	}
	allocs := testing.AllocsPerRun(50, func() {
		if err := o.Wait(st, ReasonKVLocked, nil); err != nil {
			t.Fatal(err)
		}
		st.MarkRouteChanged()
		if err := o.Wait(st, ReasonKVNotMyVbucket, nil); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Errorf("%v allocations per run, want 0", allocs)
	}
}

func BenchmarkDecide(b *testing.B) {
	cases := []struct {
		name   string
		reason Reason
		logger *slog.Logger
	}{
		{"NMV/controlled", ReasonKVNotMyVbucket, quiet},
		{"TMPFAIL/strategy", ReasonKVTemporaryFailure, quiet},
		{"TMPFAIL/strategy/debug-log", ReasonKVTemporaryFailure, slog.New(slog.NewTextHandler(discard{}, &slog.HandlerOptions{Level: slog.LevelDebug}))},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			o := &Orchestrator{Logger: c.logger}
			st := new(State)
			deadline := time.Now().Add(time.Hour)
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				if i%8 == 0 {
					st.Init(context.Background(), memdx.OpGet, nil, deadline)
				}
				if d := o.decide(st, c.reason, nil); !d.Retry {
					b.Fatal("not retried")
				}
			}
		})
	}
	b.Run("refusal", func(b *testing.B) {
		o := &Orchestrator{Logger: quiet}
		st := new(State)
		deadline := time.Now().Add(time.Hour)
		b.ReportAllocs()
		for b.Loop() {
			st.Init(context.Background(), memdx.OpSet, nil, deadline)
			if d := o.decide(st, ReasonSocketClosedWhileInFlight, nil); d.Retry {
				b.Fatal("retried")
			}
		}
	})
}

func BenchmarkWaitNoDelay(b *testing.B) {
	o := &Orchestrator{Logger: quiet}
	st := new(State)
	st.Init(context.Background(), memdx.OpGet, nil, time.Now().Add(time.Hour))
	b.ReportAllocs()
	for b.Loop() {
		st.MarkRouteChanged()
		if err := o.Wait(st, ReasonKVNotMyVbucket, nil); err != nil {
			b.Fatal(err)
		}
	}
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }
