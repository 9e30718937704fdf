package main

import (
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/kvwire/kvwire/client"
)

// This file reports a bench run: the summary, as text or as --json's one
// object.

// benchSummary is bench's result; --json prints it as one object.
type benchSummary struct {
	Config benchConfig `json:"config"`
	Target string      `json:"target"`
	// Stopped says how the run ended: "duration", "ops", "interrupted", or
	// "interrupted_preloading" (Ctrl-C before the run started: no
	// operations, and Preloaded says how far the preload got).
	Stopped string `json:"stopped"`
	// Preloaded is how many keys the preload set (0 with --preload=false).
	Preloaded int64   `json:"preloaded"`
	ElapsedS  float64 `json:"elapsed_s"`
	// Ops is the operations that succeeded (a get's miss included: the
	// server answered), and OpsPerSec their rate over the run; Gets, Sets
	// and SetBytes count those. Failed operations are in Errors only.
	Ops       uint64  `json:"ops"`
	OpsPerSec float64 `json:"ops_per_sec"`
	Gets      uint64  `json:"gets"`
	Misses    uint64  `json:"misses"`
	Sets      uint64  `json:"sets"`
	// SetBytes is the value bytes the sets wrote.
	SetBytes uint64 `json:"set_bytes"`
	// Calls is the calls made, failed or not: one per operation, or per
	// batch with --batch. The latencies are the calls'.
	Calls uint64 `json:"calls"`
	// Errors is the operations that failed, by kind in ErrorsByKind
	// (error.kind of the other commands' --json).
	Errors       uint64            `json:"errors"`
	ErrorsByKind map[string]uint64 `json:"errors_by_kind"`
	Retries      uint64            `json:"retries"`
	RetryReasons map[string]uint64 `json:"retries_by_reason"`
	// LatencyUS is the latency of the calls that succeeded (every key of
	// a batch); ErrorLatencyUS, present when some failed, that of the
	// others.
	LatencyUS      benchLatency  `json:"latency_us"`
	ErrorLatencyUS *benchLatency `json:"error_latency_us,omitempty"`
	// LatencyFromScheduleUS, with --rate, counts each successful call's
	// latency from its scheduled time instead of its start: it includes
	// the wait of an operation that started late, which latency_us leaves
	// out (coordinated omission).
	LatencyFromScheduleUS *benchLatency `json:"latency_from_schedule_us,omitempty"`
	// Rate is how well a run with --rate kept its schedule (absent
	// without --rate).
	Rate *benchRate `json:"rate,omitempty"`
	// FirstError is the first failed operation's message, for a person.
	FirstError string `json:"first_error,omitempty"`
	// ThresholdReports and OrphanReports are the client's slow-operation
	// and orphan reports (RFC 0067's JSON) logged during the run, the
	// last at its end.
	ThresholdReports []json.RawMessage `json:"threshold_reports"`
	OrphanReports    []json.RawMessage `json:"orphan_reports"`
}

// benchRate is how a paced run went: the achieved rate is ops_per_sec.
type benchRate struct {
	TargetOpsPerSec float64 `json:"target_ops_per_sec"`
	// LateOps is how many operations started more than 1 ms after their
	// scheduled time, and MaxLateUS the most any started behind it.
	LateOps   uint64  `json:"late_ops"`
	MaxLateUS float64 `json:"max_late_us"`
	// FinalLagUS is how far behind its scheduled time the last operation
	// started.
	FinalLagUS float64 `json:"final_lag_us"`
	// KeptUp is false when the run ended behind schedule by more than 1%
	// of its time (and 1 ms): the workers could not keep up with the rate.
	KeptUp bool `json:"kept_up"`
}

type benchLatency struct {
	Min   float64 `json:"min"`
	Mean  float64 `json:"mean"`
	P50   float64 `json:"p50"`
	P90   float64 `json:"p90"`
	P99   float64 `json:"p99"`
	P999  float64 `json:"p99.9"`
	Max   float64 `json:"max"`
	Count uint64  `json:"count"`
}

func (b *bench) summary(stopped string, elapsed time.Duration) *benchSummary {
	var h, eh, sh histogram
	var late uint64
	var maxLate time.Duration
	ls := make([]*lateness, 0, len(b.workers))
	s := &benchSummary{Config: b.cfg, Target: b.target, Stopped: stopped, Preloaded: b.preloaded.Load(),
		ElapsedS: elapsed.Seconds(), ErrorsByKind: map[string]uint64{}}
	for _, w := range b.workers {
		h.merge(&w.hist)
		eh.merge(&w.errHist)
		sh.merge(&w.schedHist)
		s.Ops += w.ok.Load()
		s.Gets += w.gets.Load()
		s.Sets += w.sets.Load()
		s.SetBytes += w.setBytes
		s.Calls += w.calls
		late += w.lateness.late.Load()
		maxLate = max(maxLate, w.lateness.maxLate)
		ls = append(ls, &w.lateness)
		s.Misses += w.misses.Load()
		s.Errors += w.errs.Load()
		for k, n := range w.errKinds {
			s.ErrorsByKind[k] += n
		}
		if s.FirstError == "" {
			s.FirstError = w.firstErr
		}
	}
	if elapsed > 0 {
		s.OpsPerSec = float64(s.Ops) / elapsed.Seconds()
	}
	s.Retries = b.rc.total()
	s.RetryReasons = b.rc.byName()
	if b.cfg.Rate > 0 && stopped != "interrupted_preloading" {
		lag := finalLag(ls)
		s.Rate = &benchRate{TargetOpsPerSec: b.cfg.Rate, LateOps: late, MaxLateUS: us(maxLate),
			FinalLagUS: us(lag), KeptUp: keptUp(lag, elapsed)}
		fs := latencyOf(&sh)
		s.LatencyFromScheduleUS = &fs
	}
	s.LatencyUS = latencyOf(&h)
	if eh.n > 0 {
		el := latencyOf(&eh)
		s.ErrorLatencyUS = &el
	}
	s.ThresholdReports, s.OrphanReports = []json.RawMessage{}, []json.RawMessage{}
	if b.inv.reports != nil {
		s.ThresholdReports, s.OrphanReports = b.inv.reports.taken()
	}
	return s
}

// us is d in microseconds.
func us(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e3 }

// latencyOf summarises h in microseconds.
func latencyOf(h *histogram) benchLatency {
	return benchLatency{
		Min: us(time.Duration(h.min)), Mean: us(h.mean()),
		P50: us(h.percentile(0.50)), P90: us(h.percentile(0.90)), P99: us(h.percentile(0.99)),
		P999: us(h.percentile(0.999)), Max: us(time.Duration(h.max)), Count: h.n,
	}
}

func printBenchSummary(inv *invocation, s *benchSummary) {
	w := inv.env.stdout
	c := s.Config
	fmt.Fprintf(w, "kvcli bench: %s: %d workers, %.0f%% gets, %s-byte values, %d keys (%s)%s\n",
		s.Target, c.Concurrency, c.Ratio*100, c.valueSizeText(), c.Keys, c.keyDistText(), c.extraText())
	if s.Stopped == "interrupted_preloading" {
		fmt.Fprintf(w, "time       0s (interrupted while preloading: %d of %d keys set; no operations ran)\n", s.Preloaded, c.Keys)
		printReports(w, s.ThresholdReports, s.OrphanReports)
		return
	}
	how := map[string]string{"duration": "ran for --duration", "ops": "ran --ops", "interrupted": "interrupted"}[s.Stopped]
	fmt.Fprintf(w, "time       %.2fs (%s)\n", s.ElapsedS, how)
	fmt.Fprintf(w, "ops        %d (%.0f ops/s): %d gets (%d misses), %d sets", s.Ops, s.OpsPerSec, s.Gets, s.Misses, s.Sets)
	if c.Batch > 1 {
		fmt.Fprintf(w, ", in %d batches (GetMany, UpsertMany) of up to %d", s.Calls, c.Batch)
	}
	fmt.Fprintf(w, "\n")
	if r := s.Rate; r != nil {
		d := func(us float64) string { return fmtDuration(time.Duration(us * 1e3)) }
		fmt.Fprintf(w, "rate       target %s ops/s, achieved %.0f ops/s; %d operations started over %s late (at most %s), the last %s late\n",
			fmtRate(r.TargetOpsPerSec), s.OpsPerSec, r.LateOps, benchLateAfter, d(r.MaxLateUS), d(r.FinalLagUS))
		if !r.KeptUp {
			fmt.Fprintf(w, "           the client could not keep up with --rate (it ended %s behind schedule): raise --concurrency (each worker runs one operation at a time) or lower --rate\n",
				d(r.FinalLagUS))
		}
	}
	fmt.Fprintf(w, "errors     %d%s\n", s.Errors, countsSuffix(s.ErrorsByKind))
	if s.FirstError != "" {
		fmt.Fprintf(w, "           first: %s\n", s.FirstError)
	}
	if s.Errors > 0 {
		fmt.Fprintf(w, "           failed operations are not in ops, ops/s or latency\n")
	}
	fmt.Fprintf(w, "retries    %d%s\n", s.Retries, countsSuffix(s.RetryReasons))
	per, from := "", ", from each operation's scheduled time"
	if c.Batch > 1 {
		per, from = ", per batch", ", per batch, from its scheduled time"
	}
	printLatency(w, "latency   ", s.LatencyUS, per)
	if l := s.LatencyFromScheduleUS; l != nil {
		printLatency(w, "scheduled ", *l, from)
	}
	if l := s.ErrorLatencyUS; l != nil {
		printLatency(w, "failed    ", *l, per+", of the calls that failed")
	}
	printReports(w, s.ThresholdReports, s.OrphanReports)
}

// printLatency prints a latency line: the label, the percentiles, and
// the mean with what follows it in parentheses.
func printLatency(w io.Writer, label string, l benchLatency, note string) {
	d := func(us float64) string { return fmtDuration(time.Duration(us * 1e3)) }
	fmt.Fprintf(w, "%s min %s  p50 %s  p90 %s  p99 %s  p99.9 %s  max %s  (mean %s%s)\n",
		label, d(l.Min), d(l.P50), d(l.P90), d(l.P99), d(l.P999), d(l.Max), d(l.Mean), note)
}

// valueSizeText is --value-size as bench read it: "32" or "64-4096".
func (c benchConfig) valueSizeText() string {
	if c.ValueSizeMin == c.ValueSizeMax {
		return strconv.Itoa(c.ValueSizeMin)
	}
	return fmt.Sprintf("%d-%d", c.ValueSizeMin, c.ValueSizeMax)
}

// keyDistText is "uniform" or "zipfian s=1.01".
func (c benchConfig) keyDistText() string {
	if c.KeyDist == keyDistZipfian {
		return fmt.Sprintf("zipfian s=%v", c.ZipfS)
	}
	return c.KeyDist
}

// extraText is the summary's header's note of --durability and --rate.
func (c benchConfig) extraText() string {
	var s string
	if c.Durability != client.DurabilityNone.String() {
		s += ", durability " + c.Durability
	}
	if c.Rate > 0 {
		s += ", --rate " + fmtRate(c.Rate) + " ops/s"
	}
	if c.Batch > 1 {
		s += fmt.Sprintf(", --batch %d", c.Batch)
	}
	return s
}

// fmtRate prints a rate without a fraction when it has none.
func fmtRate(r float64) string { return strconv.FormatFloat(r, 'f', -1, 64) }

// countsSuffix renders " (a 1, b 2)" sorted by name, or "".
func countsSuffix(m map[string]uint64) string {
	if len(m) == 0 {
		return ""
	}
	names := make([]string, 0, len(m))
	for k := range m {
		names = append(names, k)
	}
	sort.Strings(names)
	parts := make([]string, len(names))
	for i, k := range names {
		parts[i] = fmt.Sprintf("%s %d", k, m[k])
	}
	return " (" + strings.Join(parts, ", ") + ")"
}
