package mockcluster

import (
	"time"

	"github.com/kvwire/kvwire/memdx"
)

// Server durations (HELLO Tracing). kv_engine measures each request from
// the moment it reads its header to the moment it hands the response to
// the OS, and puts that time first in the response's framing extras as a
// server-duration frame info (magic 0x18), in every response of a
// connection that negotiated Tracing (daemon/connection.cc,
// formatResponseHeaders). The mock does the same with real (monotonic)
// time, whatever Options.Clock says:
//
//   - a request is timed from when the connection's goroutine takes it up,
//     if Tracing was negotiated by then (the HELLO that grants it is
//     answered without the frame, as kv_engine decides per command);
//   - an answer written while the request is handled carries the time
//     since then;
//   - an answer a fault delays carries the time up to its release, so the
//     injected delay is part of it, as a slow server's would be;
//   - an answer that comes later (a synchronous write's commit or abort, a
//     range scan create waiting for a seqno) carries the time up to it.
//
// A response whose key does not fit the flexible header's one-byte key
// length (kv_engine fails such a response) goes out classic, without the
// frame.

// maxTimedPending bounds the requests left unanswered by their handling
// whose start a connection keeps: past it, their late answers go without a
// server duration.
const maxTimedPending = 4096

// reqTiming is a connection's record of when its requests started. Every
// field is guarded by the connection's wmu.
type reqTiming struct {
	// start is when the request being handled (cn.pkt) was taken up: its
	// answers during handling, and the continuation an ordered connection
	// runs before reading on, are timed from it.
	start time.Time
	// traced: Tracing was negotiated when the request being handled was
	// taken up, so its answers carry the frame.
	traced bool
	// answered: the request being handled has been answered.
	answered bool
	// pending maps the opaque of a request whose handling ended without
	// an answer (it is answered later) to its start.
	pending map[uint32]time.Time
}

// dispatchTimed is dispatch with the request's start recorded when the
// connection negotiated Tracing. wmu must be held.
func (cn *conn) dispatchTimed(p *memdx.Packet) outcome {
	cn.timing.traced = cn.has(memdx.FeatureTracing)
	if !cn.timing.traced {
		return cn.dispatch(p)
	}
	cn.timing.start, cn.timing.answered = time.Now(), false
	out := cn.dispatch(p)
	cn.notePending(p, out)
	return out
}

// runTimed runs the rest of a request whose dispatch waited (a barrier
// command), timed from its dispatch. wmu must be held.
func (cn *conn) runTimed(p *memdx.Packet, run func() outcome) outcome {
	out := run()
	if cn.timing.traced {
		cn.notePending(p, out)
	}
	return out
}

// notePending remembers the start of a request whose answer comes later.
// wmu must be held.
func (cn *conn) notePending(p *memdx.Packet, out outcome) {
	if !cn.timing.answered && !p.OpCode.IsQuiet() && !out.close && out.next == nil {
		if cn.timing.pending == nil {
			cn.timing.pending = make(map[uint32]time.Time)
		}
		if len(cn.timing.pending) < maxTimedPending {
			cn.timing.pending[p.Opaque] = cn.timing.start
		}
	}
}

// durationFrame returns the framing extras of a response to req: a
// server-duration frame info when req is timed, else nil. buf holds the frame (3 bytes). wmu must
// be held.
func (cn *conn) durationFrame(req *memdx.Packet, buf *[3]byte) []byte {
	var start time.Time
	if req == &cn.pkt {
		if !cn.timing.traced {
			return nil
		}
		start = cn.timing.start
		cn.timing.answered = true
	} else if s, ok := cn.timing.pending[req.Opaque]; ok {
		start = s
		delete(cn.timing.pending, req.Opaque)
	} else {
		return nil
	}
	return memdx.AppendServerDurationFrame(buf[:0], time.Since(start))
}

// appendResponse appends rp, a response to req, with the server-duration
// frame when there is one. wmu must be held.
func (cn *conn) appendResponse(req, rp *memdx.Packet) {
	var buf [3]byte
	rp.FramingExtras = cn.durationFrame(req, &buf)
	if len(rp.Key) > 255 {
		rp.FramingExtras = nil
	}
	cn.wbuf, _ = memdx.AppendPacket(cn.wbuf, rp)
}

// restampDurations rewrites the server durations of the responses in b
// (whole packets, as appendResponse wrote them) to the time since start:
// an answer held back is timed up to its release.
func restampDurations(b []byte, start time.Time) {
	d := time.Since(start)
	for len(b) >= memdx.HeaderSize {
		n, err := memdx.PacketSize(b, 0)
		if err != nil || n > len(b) {
			return
		}
		if memdx.Magic(b[0]) == memdx.MagicResExt && b[2] >= 3 && b[memdx.HeaderSize] == byte(memdx.FrameServerDuration)<<4|2 {
			v := memdx.EncodeServerDuration(d)
			b[memdx.HeaderSize+1], b[memdx.HeaderSize+2] = byte(v>>8), byte(v)
		}
		b = b[n:]
	}
}
