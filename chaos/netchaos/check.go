package main

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/kvwire/kvwire/client"
)

// outcome is what the client reported for one write.
type outcome uint8

const (
	// acked: the write succeeded; it must be in the document exactly once.
	acked outcome = iota + 1
	// ambiguous: the error matches client.ErrAmbiguous; the write may be in
	// the document, at most once.
	ambiguous
	// failed: the error does not match client.ErrAmbiguous, so the client
	// says it was not applied; it must never be in the document.
	failed
)

func (o outcome) String() string {
	switch o {
	case acked:
		return "acknowledged"
	case ambiguous:
		return "ambiguous"
	case failed:
		return "failed (not ambiguous)"
	}
	return "unknown"
}

// The checks, as they are named in the report.
const (
	checkLost       = "acknowledged write lost"
	checkTwice      = "write applied twice"
	checkUnreported = "ambiguous outcome not reported as such"
	checkForeign    = "document holds a token no write sent"
	checkDeadline   = "operation ended past its deadline plus margin"
	checkRecovery   = "no recovery within -recovery-limit of the heal"
	checkUnverified = "key could not be read back"
	checkVacuous    = "phase did not test what it should"
)

// violation is one failed check, with enough detail to find it again.
type violation struct {
	check  string
	key    string
	detail string
}

func (v violation) String() string {
	if v.key == "" {
		return v.check + ": " + v.detail
	}
	return fmt.Sprintf("%s: key %q: %s", v.check, v.key, v.detail)
}

// write is one Insert or Append of a unique token.
type write struct {
	token   string
	outcome outcome
	class   string // the error class when it did not succeed
}

// keyModel is what a key's owner knows of it: every write it sent, in
// order. A key has one owner goroutine, so a read sees the outcome of every
// earlier write of its key. Each write adds a unique token ("w3.17;") to the
// document (Insert creates it with one, Append adds one), so the document
// read back says exactly which writes were applied and how often.
type keyModel struct {
	key    string
	writes []write
	index  map[string]int // token -> position in writes
}

func newKeyModel(key string) *keyModel {
	return &keyModel{key: key, index: make(map[string]int)}
}

func (m *keyModel) record(token string, o outcome, class string) {
	m.index[token] = len(m.writes)
	m.writes = append(m.writes, write{token: token, outcome: o, class: class})
}

// tokens splits a document into its tokens (each ends with ';').
func tokens(doc []byte) []string {
	s := string(doc)
	if s == "" {
		return nil
	}
	parts := strings.SplitAfter(s, ";")
	if parts[len(parts)-1] == "" {
		parts = parts[:len(parts)-1]
	}
	return parts
}

// checkRead compares a read of the key (found false: the document does not
// exist) with every write recorded so far.
func (m *keyModel) checkRead(found bool, doc []byte) []violation {
	var out []violation
	seen := make(map[string]int)
	if found {
		for _, t := range tokens(doc) {
			seen[t]++
		}
	}
	// Report in write order (and foreign tokens sorted) so that a report
	// is the same for the same history.
	var foreign []string
	for t := range seen {
		if _, ok := m.index[t]; !ok {
			foreign = append(foreign, t)
		}
	}
	sort.Strings(foreign)
	for _, t := range foreign {
		out = append(out, violation{checkForeign, m.key, fmt.Sprintf("token %q (document %q)", t, abbrev(doc))})
	}
	for _, w := range m.writes {
		n := seen[w.token]
		switch {
		case n > 1:
			out = append(out, violation{checkTwice, m.key, fmt.Sprintf("token %q of a write reported %s is in the document %d times", w.token, w.outcome, n)})
		case n == 1 && w.outcome == failed:
			out = append(out, violation{checkUnreported, m.key, fmt.Sprintf("token %q is in the document, but its write failed with %s, which does not match client.ErrAmbiguous", w.token, w.class)})
		case n == 0 && w.outcome == acked:
			what := "the document does not exist"
			if found {
				what = fmt.Sprintf("the document is %q", abbrev(doc))
			}
			out = append(out, violation{checkLost, m.key, fmt.Sprintf("token %q was acknowledged; %s", w.token, what)})
		}
	}
	return out
}

func abbrev(b []byte) string {
	const max = 120
	if len(b) <= max {
		return string(b)
	}
	return string(b[:max/2]) + "..." + string(b[len(b)-max/2:])
}

// classify names an operation's error class for the report, most specific
// first, and says whether a write that failed with it may have been applied.
func classify(err error) (class string, mayBeApplied bool) {
	if err == nil {
		return "ok", false
	}
	amb := errors.Is(err, client.ErrAmbiguous)
	switch {
	case errors.Is(err, client.ErrAmbiguousTimeout):
		class = "ambiguous-timeout"
	case errors.Is(err, client.ErrUnambiguousTimeout):
		class = "unambiguous-timeout"
	case amb:
		class = "ambiguous"
	case errors.Is(err, client.ErrDocumentNotFound):
		class = "not-found"
	case errors.Is(err, client.ErrDocumentExists):
		class = "exists"
	case errors.Is(err, client.ErrNotStored):
		class = "not-stored"
	case errors.Is(err, client.ErrNoNodeAvailable):
		class = "no-node-available"
	case errors.Is(err, client.ErrTemporaryFailure):
		class = "temporary-failure"
	case errors.Is(err, client.ErrRequestCanceled):
		class = "canceled"
	case errors.Is(err, client.ErrTimeout):
		class = "timeout"
	default:
		class = "other"
	}
	return class, amb
}

// ambiguityMismatch reports a *client.KeyValueError whose Ambiguous field
// disagrees with errors.Is(err, client.ErrAmbiguous): a caller checking one
// way or the other would decide differently.
func ambiguityMismatch(err error) string {
	var kv *client.KeyValueError
	if !errors.As(err, &kv) {
		return ""
	}
	if is := errors.Is(err, client.ErrAmbiguous); kv.Ambiguous != is {
		return fmt.Sprintf("KeyValueError.Ambiguous=%v but errors.Is(err, ErrAmbiguous)=%v: %v", kv.Ambiguous, is, err)
	}
	return ""
}

// span is one operation's timing and result, for the recovery measure.
type span struct {
	worker     int
	start, end time.Time
	ok         bool
}

// recovery measures how long after heal the workers recovered: for each
// worker, the end of its first successful operation after its last failed
// one (among operations that ended after heal), less heal; the largest over
// the workers. A worker with no success after its last failure, or no
// operation ending after heal, has not recovered (ok false). first is the
// earliest success after heal of any worker.
func recovery(spans []span, workers int, heal time.Time) (worst, first time.Duration, ok bool) {
	byWorker := make([][]span, workers)
	for _, s := range spans {
		if s.end.Before(heal) || s.worker < 0 || s.worker >= workers {
			continue
		}
		byWorker[s.worker] = append(byWorker[s.worker], s)
	}
	ok = true
	first = -1
	for _, ss := range byWorker {
		sort.Slice(ss, func(i, j int) bool { return ss[i].end.Before(ss[j].end) })
		var rec time.Time
		for _, s := range ss {
			if !s.ok {
				rec = time.Time{}
				continue
			}
			if first < 0 || s.end.Sub(heal) < first {
				first = s.end.Sub(heal)
			}
			if rec.IsZero() {
				rec = s.end
			}
		}
		if rec.IsZero() {
			ok = false
			continue
		}
		worst = max(worst, rec.Sub(heal))
	}
	return worst, first, ok
}
