package main

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/kvwire/kvwire/client"
	"github.com/kvwire/kvwire/retry"
)

func checksOf(vs []violation) []string {
	var out []string
	for _, v := range vs {
		out = append(out, v.check)
	}
	return out
}

// TestCheckReadFindsEachViolation gives the key model documents that a
// correct client can and cannot leave, and requires exactly the expected
// check to fire.
func TestCheckReadFindsEachViolation(t *testing.T) {
	m := newKeyModel("k")
	m.record("w0.1;", acked, "ok")
	m.record("w0.2;", ambiguous, "ambiguous-timeout")
	m.record("w0.3;", failed, "unambiguous-timeout")
	m.record("w0.4;", acked, "ok")
	cases := []struct {
		name  string
		found bool
		doc   string
		want  []string
	}{
		{"ambiguous applied", true, "w0.1;w0.2;w0.4;", nil},
		{"ambiguous not applied", true, "w0.1;w0.4;", nil},
		{"ambiguous applied late", true, "w0.1;w0.4;w0.2;", nil},
		{"acknowledged lost", true, "w0.1;w0.2;", []string{checkLost}},
		{"document missing", false, "", []string{checkLost, checkLost}},
		{"acknowledged twice", true, "w0.1;w0.4;w0.1;", []string{checkTwice}},
		{"ambiguous twice", true, "w0.1;w0.2;w0.4;w0.2;", []string{checkTwice}},
		{"failed applied", true, "w0.1;w0.3;w0.4;", []string{checkUnreported}},
		{"foreign token", true, "w0.1;w0.4;w9.9;", []string{checkForeign}},
	}
	for _, c := range cases {
		got := checksOf(m.checkRead(c.found, []byte(c.doc)))
		if fmt.Sprint(got) != fmt.Sprint(c.want) {
			t.Errorf("%s: document %q: checks %v, want %v", c.name, c.doc, got, c.want)
		}
	}
}

func TestClassifySaysWhetherAWriteMayHaveBeenApplied(t *testing.T) {
	cases := []struct {
		err   error
		class string
		amb   bool
	}{
		{nil, "ok", false},
		{fmt.Errorf("x: %w", &retry.TimeoutError{Ambiguous: true}), "ambiguous-timeout", true},
		{fmt.Errorf("x: %w", &retry.TimeoutError{Ambiguous: false}), "unambiguous-timeout", false},
		{fmt.Errorf("x: %w", client.ErrAmbiguous), "ambiguous", true},
		{fmt.Errorf("x: %w", client.ErrDocumentExists), "exists", false},
		{fmt.Errorf("x: %w", client.ErrNoNodeAvailable), "no-node-available", false},
		{fmt.Errorf("plain"), "other", false},
	}
	for _, c := range cases {
		class, amb := classify(c.err)
		if class != c.class || amb != c.amb {
			t.Errorf("classify(%v) = %s, %v; want %s, %v", c.err, class, amb, c.class, c.amb)
		}
	}
	// KeyValueError.Is matches ErrAmbiguous whenever Ambiguous is set, so
	// the one disagreement possible is Ambiguous false over an ambiguous
	// cause.
	inconsistent := &client.KeyValueError{Op: "Append", Key: "k", Ambiguous: false, Err: client.ErrTimeout, Cause: &retry.TimeoutError{Ambiguous: true}}
	if s := ambiguityMismatch(inconsistent); !strings.Contains(s, "Ambiguous=false") {
		t.Errorf("ambiguityMismatch of an error saying Ambiguous without matching ErrAmbiguous: %q", s)
	}
	consistent := &client.KeyValueError{Op: "Append", Key: "k", Ambiguous: true, Err: client.ErrTimeout, Cause: &retry.TimeoutError{Ambiguous: true}}
	if s := ambiguityMismatch(consistent); s != "" {
		t.Errorf("ambiguityMismatch of a consistent error: %q", s)
	}
}

func TestRecoveryIsWhenEveryWorkerSucceedsAndKeepsSucceeding(t *testing.T) {
	heal := time.Unix(1000, 0)
	at := func(d time.Duration) time.Time { return heal.Add(d) }
	ms := time.Millisecond
	cases := []struct {
		name  string
		spans []span
		worst,
		first time.Duration
		ok bool
	}{
		{"both at once", []span{
			{0, at(-3000 * ms), at(-500 * ms), false}, // failed before the heal: ignored
			{0, at(-100 * ms), at(200 * ms), true},
			{1, at(-2000 * ms), at(500 * ms), false},
			{1, at(500 * ms), at(700 * ms), true},
		}, 700 * ms, 200 * ms, true},
		{"a failure after a success pushes it out", []span{
			{0, at(0), at(100 * ms), true},
			{0, at(100 * ms), at(2600 * ms), false},
			{0, at(2600 * ms), at(2700 * ms), true},
			{1, at(0), at(50 * ms), true},
		}, 2700 * ms, 50 * ms, true},
		{"a worker never succeeds", []span{
			{0, at(0), at(100 * ms), true},
			{1, at(0), at(2500 * ms), false},
		}, 100 * ms, 100 * ms, false},
		{"a worker with nothing after the heal", []span{
			{0, at(0), at(100 * ms), true},
		}, 100 * ms, 100 * ms, false},
	}
	for _, c := range cases {
		worst, first, ok := recovery(c.spans, 2, heal)
		if worst != c.worst || first != c.first || ok != c.ok {
			t.Errorf("%s: recovery = %v, %v, %v; want %v, %v, %v", c.name, worst, first, ok, c.worst, c.first, c.ok)
		}
	}
}

func TestTokensSplitADocument(t *testing.T) {
	if got := tokens([]byte("w0.1;w1.22;")); fmt.Sprint(got) != "[w0.1; w1.22;]" {
		t.Fatalf("tokens: %q", got)
	}
	if got := tokens([]byte("w0.1;garbage")); fmt.Sprint(got) != "[w0.1; garbage]" {
		t.Fatalf("a trailing fragment must stay a token (and be reported foreign): %q", got)
	}
	if got := tokens(nil); got != nil {
		t.Fatalf("tokens(nil) = %q", got)
	}
}

func TestLatenessMarginCoversTheSlowestWakeUpAroundADeadline(t *testing.T) {
	l := &lateness{}
	t0 := time.Unix(2000, 0)
	l.add(t0, time.Millisecond)
	l.add(t0.Add(100*time.Millisecond), 80*time.Millisecond) // asleep from +20ms to +100ms
	l.add(t0.Add(300*time.Millisecond), 5*time.Millisecond)
	if got := l.margin(t0.Add(50*time.Millisecond), t0.Add(60*time.Millisecond)); got != baseMargin+160*time.Millisecond {
		t.Fatalf("margin inside the stall = %v", got)
	}
	if got := l.margin(t0.Add(200*time.Millisecond), t0.Add(250*time.Millisecond)); got != baseMargin {
		t.Fatalf("margin after the stall = %v", got)
	}
}
