package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"sync"

	"github.com/kvwire/kvwire/client"
)

// The client logs its slow-operation and orphan reports (RFC 0067) through
// its logger: bench keeps the ones it saw and prints them at the end.

// reports are the reports a client logged, in order.
type reports struct {
	mu        sync.Mutex
	threshold []json.RawMessage
	orphans   []json.RawMessage
}

// handler returns a slog.Handler that keeps the reports and passes every
// record on to next (nil: none).
func (r *reports) handler(next slog.Handler) slog.Handler { return reportCapture{r: r, next: next} }

// taken returns the reports kept so far (empty lists, not nil, when
// there are none).
func (r *reports) taken() (threshold, orphans []json.RawMessage) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]json.RawMessage{}, r.threshold...), append([]json.RawMessage{}, r.orphans...)
}

// reportCapture is reports' slog.Handler.
type reportCapture struct {
	r    *reports
	next slog.Handler
}

func (h reportCapture) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= slog.LevelWarn || (h.next != nil && h.next.Enabled(ctx, l))
}

func (h reportCapture) Handle(ctx context.Context, rec slog.Record) error {
	var into *[]json.RawMessage
	switch rec.Message {
	case client.ThresholdReportMessage:
		into = &h.r.threshold
	case client.OrphanReportMessage:
		into = &h.r.orphans
	}
	if into != nil {
		rec.Attrs(func(a slog.Attr) bool {
			if a.Key != client.ReportAttribute {
				return true
			}
			if m, ok := a.Value.Any().(json.Marshaler); ok {
				if b, err := m.MarshalJSON(); err == nil && json.Valid(b) {
					h.r.mu.Lock()
					*into = append(*into, append(json.RawMessage(nil), b...))
					h.r.mu.Unlock()
				}
			}
			return false
		})
	}
	if h.next != nil && h.next.Enabled(ctx, rec.Level) {
		return h.next.Handle(ctx, rec)
	}
	return nil
}

func (h reportCapture) WithAttrs(as []slog.Attr) slog.Handler {
	if h.next != nil {
		h.next = h.next.WithAttrs(as)
	}
	return h
}

func (h reportCapture) WithGroup(name string) slog.Handler {
	if h.next != nil {
		h.next = h.next.WithGroup(name)
	}
	return h
}

// printReports prints the reports bench saw, one JSON object a line under
// a heading each.
func printReports(w io.Writer, threshold, orphans []json.RawMessage) {
	for _, part := range []struct {
		label, what string
		list        []json.RawMessage
	}{
		{"slow ops  ", "operations over the threshold (the slowest of each interval)", threshold},
		{"orphans   ", "answers that came after their operation had given up", orphans},
	} {
		if len(part.list) == 0 {
			fmt.Fprintf(w, "%s none: no %s\n", part.label, part.what)
			continue
		}
		fmt.Fprintf(w, "%s %d report(s) of %s:\n", part.label, len(part.list), part.what)
		for _, r := range part.list {
			fmt.Fprintf(w, "           %s\n", r)
		}
	}
}
