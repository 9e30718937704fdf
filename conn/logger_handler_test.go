package conn

import (
	"errors"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kvwire/kvwire/internal/kverr"
	"github.com/kvwire/kvwire/internal/logcapture"
	"github.com/kvwire/kvwire/memdx"
)

// The monitor logs that it closes a connection whose node stopped
// answering. The Logger's handler is caller code, which may run an
// operation on the client (docs/ARCHITECTURE.md), and the client's pick
// takes a connection not yet ended: the monitor must have ended this one
// before it logs. It logged first: a request the handler sent there waited
// for the monitor, the goroutine that expires the connection's requests
// and was about to close it, which was running the handler. Handler,
// monitor and request waited forever, and every request on the
// connection with them. The handler's request runs on a goroutine of its
// own, bounded, so that the test fails rather than hangs.
func TestLoggerMayUseTheConnectionTheMonitorCloses(t *testing.T) {
	fc := newFakeClock()
	var cp atomic.Pointer[Conn]
	logger, ran := reentrantLogger(fc, &cp, "stopped answering")
	c, p := dialPipe(t, Options{clock: fc, Logger: logger}, nil)
	cp.Store(c)
	abandonOne(t, c, p, fc, "a")
	fc.Advance(DefaultProbeAfter)
	if probe := p.read(); probe.OpCode != memdx.OpNoop {
		t.Fatalf("after ProbeAfter the node got %s, want the NOOP probe", probe.OpCode)
	}
	waitFor(t, "the probe's timer", func() bool { return fc.armedWithin(DefaultProbeTimeout) })
	go drain(p.nc)
	for i := 0; len(ran) == 0; i++ {
		if i == 2 {
			t.Fatalf("not closed two probe timeouts after the probe was written: %v", c.Err())
		}
		nextCheck(t, fc, func() bool { return len(ran) > 0 })
	}
	handlerRequestEnded(t, <-ran, kverr.ErrUnresponsive)
}

var errHandlerBlocked = errors.New("a request the Logger's handler sent on the connection logged about did not end within 5 s: the goroutine that would end it runs the handler")

// reentrantLogger is a Logger whose handler, given a line whose message
// contains msg once cp holds a connection, sends a request on that
// connection (as caller code may: docs/ARCHITECTURE.md) and reports its
// error on the channel returned (the request's, or errHandlerBlocked
// when it did not end within 5 s).
func reentrantLogger(fc *fakeClock, cp *atomic.Pointer[Conn], msg string) (*slog.Logger, chan error) {
	ran := make(chan error, 1)
	return slog.New(logcapture.Func(func(l logcapture.Logged) {
		c := cp.Load()
		if c == nil || !strings.Contains(l.Msg, msg) {
			return
		}
		select {
		case r := <-doDeadline(c, "from-the-handler", fc.Now().Add(2500*time.Millisecond)):
			ran <- r.err
		case <-time.After(5 * time.Second): // the healthy run: at once
			ran <- errHandlerBlocked
		}
	})), ran
}

// handlerRequestEnded fails the test unless err, the error of the request
// a reentrantLogger's handler sent, is the connection's end, want: the
// connection was ended before it was logged about, and the request not
// sent.
func handlerRequestEnded(t *testing.T, err, want error) {
	t.Helper()
	if errors.Is(err, errHandlerBlocked) {
		t.Fatal(err)
	}
	if !errors.Is(err, want) {
		t.Fatalf("the handler's request: %v; want the connection's end (%v), not sent", err, want)
	}
}

// A protocol violation is logged on the goroutine reading the connection
// (the reader goroutine, or a caller borrowing its role), which then ends
// it. It logged first: a request the Logger's handler sent there, on the
// connection still open, waited for its answer, which that goroutine,
// running the handler, would read, until the request's deadline. Ended
// first, the connection is not one the handler's request can be sent on.
func TestLoggerMayUseTheConnectionAProtocolViolationEnds(t *testing.T) {
	fc := newFakeClock()
	var cp atomic.Pointer[Conn]
	logger, ran := reentrantLogger(fc, &cp, "protocol violation")
	c, p := dialPipe(t, Options{clock: fc, Logger: logger}, nil)
	cp.Store(c)
	ch := goGet(testCtx(t), c, "a")
	p.read()
	go drain(p.nc)
	p.writeRaw([]byte("HTTP/1.1 400 Bad Request\r\n\r\n"))
	recv(t, ch)
	handlerRequestEnded(t, recv(t, ran), kverr.ErrProtocol)
}
