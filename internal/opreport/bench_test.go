package opreport

import (
	"log/slog"
	"testing"
	"time"

	"github.com/kvwire/kvwire/internal/logcapture"
	"github.com/kvwire/kvwire/retry"
)

// The slow-operation report's cost for an operation under the threshold
// (every operation pays it) and over it.
func BenchmarkThresholdRecord(b *testing.B) {
	th := NewThreshold("kv", 500*time.Millisecond, testConfig(retry.NewFakeClock(logcapture.Epoch), slog.New(slog.DiscardHandler), thresholdMessage, 10*time.Second), 10)
	defer th.Close()
	for _, tc := range []struct {
		name  string
		total time.Duration
	}{{"under", time.Millisecond}, {"over", time.Second}} {
		b.Run(tc.name, func(b *testing.B) {
			r := fullRecord(tc.total)
			b.ReportAllocs()
			for b.Loop() {
				th.Record(&r)
			}
		})
	}
}

// An orphan, as a connection's reader reports it.
func BenchmarkOrphan(b *testing.B) {
	o := NewOrphans(testConfig(retry.NewFakeClock(logcapture.Epoch), slog.New(slog.DiscardHandler), orphanMessage, 10*time.Second), 10)
	defer o.Close()
	r := fullRecord(time.Second)
	b.ReportAllocs()
	for b.Loop() {
		o.Orphan(&r)
	}
}
