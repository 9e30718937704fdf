package main

import (
	"fmt"
	"io"
	"time"
)

// progressEvery is how often long work (bench's preload and run, scan)
// reports progress.
const progressEvery = time.Second

// ticker is what a progress line waits on: a time.Ticker, or in tests a
// channel the test sends on (env.newTicker).
type ticker interface {
	C() <-chan time.Time
	Stop()
}

type realTicker struct{ *time.Ticker }

func (t realTicker) C() <-chan time.Time { return t.Ticker.C }

// newTicker returns a ticker firing every d: the environment's, or a real
// one.
func (e *env) newTickerEvery(d time.Duration) ticker {
	if e.newTicker != nil {
		return e.newTicker(d)
	}
	return realTicker{time.NewTicker(d)}
}

// isTerminal reports whether w is a terminal: the environment's answer,
// or a character device's.
func (e *env) isTerminal(w io.Writer) bool {
	if o, ok := w.(*outWriter); ok { // stdout, as run wraps it
		w = o.w
	}
	if e.terminal != nil {
		return e.terminal(w)
	}
	return isTerminal(w)
}

// progress is a progress line on stderr: rewritten in place on a
// terminal, one line per report elsewhere.
type progress struct {
	w       io.Writer
	tty     bool
	printed bool
}

func (p *progress) show(s string) {
	if p.tty {
		fmt.Fprintf(p.w, "\r\033[K%s", s)
	} else {
		fmt.Fprintf(p.w, "%s\n", s)
	}
	p.printed = true
}

// end finishes a line rewritten in place, so that what follows starts on
// a line of its own.
func (p *progress) end() {
	if p.tty && p.printed {
		fmt.Fprintf(p.w, "\n")
	}
}

// startProgress shows line(now) on stderr every progressEvery until stop
// is called; stop returns once the last line is written and ended. With
// --json it shows nothing (stdout's document is all a script asked for).
// when, if not nil, decides whether to show anything: scan shows progress
// only where nothing else would (see cmdScan).
func (inv *invocation) startProgress(when func() bool, line func(now time.Time) string) (stop func()) {
	if inv.g.json || (when != nil && !when()) {
		return func() {}
	}
	t := inv.env.newTickerEvery(progressEvery)
	p := &progress{w: inv.diag(), tty: inv.env.isTerminal(inv.env.stderr)}
	done, exited := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(exited)
		for {
			select {
			case now := <-t.C():
				p.show(line(now))
			case <-done:
				return
			}
		}
	}()
	return func() {
		t.Stop()
		close(done)
		<-exited
		p.end()
	}
}

// rate is how many per second n more are over the time from since to now
// (0 when no time has passed).
func rate(n uint64, since, now time.Time) float64 {
	d := now.Sub(since).Seconds()
	if d <= 0 {
		return 0
	}
	return float64(n) / d
}
