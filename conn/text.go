package conn

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"time"

	"github.com/kvwire/kvwire/internal/kverr"
	"github.com/kvwire/kvwire/memdx"
)

// TextConn is a connection to a memcached server in its text protocol, for
// the one request the text protocol has and the binary one lacks: a
// multi-get. memcached serves at most -R requests of a connection (20 by
// default) per turn of its event loop. Binary quiet gets are a request
// each, so 256 of them take 13 turns, each with a flush and an epoll
// round, while "gets k1 ... k256" is one request; memcached 1.6 also
// deprecated the binary protocol. memcached tells the protocols apart by
// a connection's first byte, on the same port.
//
// A TextConn has no goroutine: its user sends a multi-get (SendGets) and
// reads the answer (ReadGets) on its own goroutine, one multi-get at a
// time. The text protocol has no opaque, so each multi-get follows a
// sentinel request whose answer must come first (SendGets says why). It
// is not safe for concurrent use, except Close, which may be called at any
// time and ends a read in progress. An error from SendGets
// or ReadGets other than a refused key breaks it for good (Err says why):
// close it.
type TextConn struct {
	nc       net.Conn
	addr     string
	maxValue int
	out      []byte
	in       []byte
	r, w     int
	sent     int             // keys of the multi-get awaiting ReadGets (0: none)
	op       memdx.OpCode    // the request in progress, as errors name it
	stop     func() bool     // ends the context watch of a read in progress
	err      error           // why it broke
	idle     *idlePeeker     // nil: the socket cannot be peeked at (CheckIdle)
	v        memdx.TextValue // ReadGets' item (a local escapes to hit: an allocation per call)
}

// textReadBuffer is a TextConn's first read buffer; it grows to hold the
// largest single item read.
const textReadBuffer = 64 << 10

// textLineMax bounds a line of an answer, as memdx.ParseTextGet does: an
// item is at most a line, its value and a CRLF.
const textLineMax = 512

// DialText connects to addr as Dial does (Options.DialContext, TLSConfig,
// TCP_NODELAY) and returns a TextConn. Nothing is sent: the text protocol
// has no handshake, so a server that does not take text (one requiring
// SASL, or started with -B binary) shows it in the first ReadGets, as a
// *memdx.TextError, the connection's end, or silence until the deadline
// (a binary-only memcached waits for a 24-byte header, and closes the
// connection once it has one that is not binary): Version checks first.
// Values longer than Options.MaxBodyLength are refused as malformed
// answers.
func DialText(ctx context.Context, addr string, opts Options) (*TextConn, error) {
	o := opts.resolved()
	nc, err := dialNet(ctx, addr, &o)
	if err != nil {
		return nil, err
	}
	return &TextConn{nc: nc, addr: addr, maxValue: int(o.MaxBodyLength), idle: newIdlePeeker(nc)}, nil
}

// Addr is the address dialed.
func (t *TextConn) Addr() string { return t.addr }

// Err is why the connection broke (nil while it is usable).
func (t *TextConn) Err() error { return t.err }

// Close closes the connection; a ReadGets in progress on another goroutine
// ends with an error. Over TLS it does not wait to send the close_notify
// alert to a server that reads nothing more (see Conn.Close).
func (t *TextConn) Close() error { return closeNet(t.nc) }

// CheckIdle checks a connection that sat idle, before a multi-get is sent
// on it. The server owes an idle connection nothing: bytes waiting to be
// read are a protocol violation (a late or repeated answer to an earlier
// request), and a connection the server closed cannot carry a multi-get.
// Either breaks it: the error (a *RequestError, not written: nothing was
// sent) matches memdx.ErrMalformed for bytes that arrived, and
// kverr.ErrConnectionClosed for a connection that ended. ReadGets'
// sentinel refuses such bytes too, at the cost of the multi-get (written),
// except bytes that begin as the sentinel's answer does (an earlier
// multi-get's whole answer, repeated), which only CheckIdle finds, if they
// arrived before it looked; and it tells a connection that ended while
// idle from one the server closed at the multi-get. It makes one
// non-blocking peek at the socket (a recv with MSG_PEEK: nothing is taken
// from it); on a connection that is not plain TCP, or off Unix, it checks
// only what an earlier read left unread.
func (t *TextConn) CheckIdle() error {
	if t.err != nil {
		return t.err
	}
	t.op = memdx.OpGet
	if t.r != t.w {
		return t.broke(false, fmt.Errorf("%d bytes left unread on the idle text connection: %w", t.w-t.r, memdx.ErrMalformed))
	}
	if t.idle == nil {
		return nil
	}
	// The read deadline is still the last multi-get's (watch), long passed
	// on a connection that sat idle: the peek would fail on it at once, and
	// the connection be taken for one that ended.
	if err := t.nc.SetReadDeadline(time.Time{}); err != nil {
		return t.broke(false, err)
	}
	data, ended, err := t.idle.waiting()
	switch {
	case data:
		return t.broke(false, fmt.Errorf("bytes arrived on the idle text connection, answering no request: %w", memdx.ErrMalformed))
	case ended && err == nil:
		return t.broke(false, io.EOF)
	case ended:
		return t.broke(false, err)
	}
	return nil
}

// SendGets writes the multi-get "gets k1 k2 ...\r\n" for keys, after a
// sentinel "version\r\n" in the same write, with deadline bounding the
// write. The text protocol has no opaque: an answer carries nothing that
// ties it to its request, so bytes the server sent before it read this
// request (a late or duplicated answer to an earlier one) would pass for
// this one's answer, with the values of then. The server answers its
// requests in order and TCP keeps its bytes in order, so whatever it sent
// before it handled the sentinel arrives before the sentinel's VERSION
// line: ReadGets requires that line first. (version is the request the
// connection's check already relies on, Version: every text server kvwire
// reads answers it, where memcached 1.6's meta no-op "mn" is not older
// servers' or proxies'.) A key the text protocol cannot carry
// (memdx.CheckTextKey) fails it before anything is written, and leaves the
// connection usable. Another SendGets before the answer was read is
// refused.
func (t *TextConn) SendGets(deadline time.Time, keys [][]byte) error {
	if t.err != nil {
		return t.err
	}
	if t.sent != 0 {
		return &RequestError{Op: memdx.OpGet, Addr: t.addr,
			Err: fmt.Errorf("a multi-get's answer is still unread: %w", memdx.ErrInvalidRequest)}
	}
	t.op = memdx.OpGet
	out, err := memdx.AppendTextGets(memdx.AppendTextVersion(t.out[:0]), keys)
	if err != nil {
		return &RequestError{Op: memdx.OpGet, Addr: t.addr, Err: err}
	}
	t.out = out
	if err := t.nc.SetWriteDeadline(deadline); err != nil {
		return t.broke(false, err)
	}
	n, err := t.nc.Write(out)
	if err != nil {
		return t.broke(n > 0, err)
	}
	t.sent = len(keys)
	return nil
}

// ReadGets reads the answer to the last SendGets, whose keys it is given
// again, and calls hit with the index in keys of each key answered (a
// hit), in order; a key it does not call hit for is a miss. The answer
// must begin with the sentinel's VERSION line (SendGets): anything else
// first is a foreign answer, sent before the server read the request.
// v and its slices are valid only during the call. ReadGets returns nil once the
// answer has ended. It ends early, with the connection broken, when ctx
// ends (Err is ctx's error), when deadline passes (Err is
// context.DeadlineExceeded), when the connection ends (errors.Is
// kverr.ErrConnectionClosed), on an error line (Err is a *memdx.TextError:
// the server refused the request, e.g. it takes no text or requires SASL)
// or on an answer that is malformed, does not begin with the sentinel's
// line, or names a key not asked for, or not in order
// (memdx.ErrMalformed). Every such error is a *RequestError with Written
// set.
func (t *TextConn) ReadGets(ctx context.Context, deadline time.Time, keys [][]byte, hit func(i int, v *memdx.TextValue)) error {
	if t.err != nil {
		return t.err
	}
	if t.sent == 0 || t.sent != len(keys) {
		return &RequestError{Op: memdx.OpGet, Addr: t.addr,
			Err: fmt.Errorf("ReadGets of %d keys after a SendGets of %d: %w", len(keys), t.sent, memdx.ErrInvalidRequest)}
	}
	if err := t.watch(ctx, deadline); err != nil {
		return err
	}
	defer t.unwatch(ctx)
	v := &t.v
	next := 0        // the first key not yet passed
	sentinel := true // the sentinel's line is still to come
	for {
		if sentinel {
			n, _, err := memdx.ParseTextVersion(t.in[t.r:t.w])
			switch {
			case err != nil:
				return t.broke(true, foreignBeforeSentinel(err))
			case n == 0:
				if err := t.fill(ctx); err != nil {
					return err
				}
				continue
			}
			t.r += n
			sentinel = false
		}
		n, end, err := memdx.ParseTextGet(t.in[t.r:t.w], t.maxValue, v)
		switch {
		case err != nil:
			var te *memdx.TextError
			if !errors.As(err, &te) {
				err = fmt.Errorf("multi-get answer: %w", err)
			}
			return t.broke(true, err)
		case end:
			t.r += n
			t.sent = 0
			if t.r != t.w {
				return t.broke(true, fmt.Errorf("%d bytes after the multi-get's END: %w", t.w-t.r, memdx.ErrMalformed))
			}
			t.r, t.w = 0, 0
			return nil
		case n > 0:
			t.r += n
			j := next
			for j < len(keys) && !bytes.Equal(keys[j], v.Key) {
				j++
			}
			if j == len(keys) {
				return t.broke(true, fmt.Errorf("multi-get answer for key %q, not asked for after key %d of %d: %w",
					v.Key, next, len(keys), memdx.ErrMalformed))
			}
			hit(j, v)
			next = j + 1
			continue
		}
		if err := t.fill(ctx); err != nil {
			return err
		}
	}
}

// foreignBeforeSentinel is the error of a multi-get's answer that does not
// begin with its sentinel's VERSION line (ParseTextVersion's err): an
// error line is the server's (a *memdx.TextError, as one answering the
// multi-get is), anything else is bytes it sent before it read the
// request.
func foreignBeforeSentinel(err error) error {
	var te *memdx.TextError
	if errors.As(err, &te) {
		return err
	}
	return fmt.Errorf("multi-get answer: bytes the server sent before it read the multi-get "+
		"(a late answer to another request?), where the sentinel's VERSION line should be: %w", err)
}

// Version asks the server for its version in the text protocol and
// returns it. It is the check that the server takes text: one that does
// not (memcached started with -B binary, or requiring SASL) reads the
// request as the start of a binary header and stays silent, so Version
// then ends with ctx, which should have a deadline. Any error breaks the
// connection.
func (t *TextConn) Version(ctx context.Context) (string, error) {
	if t.err != nil {
		return "", t.err
	}
	if t.sent != 0 {
		return "", &RequestError{Op: memdx.OpVersion, Addr: t.addr,
			Err: fmt.Errorf("a multi-get's answer is still unread: %w", memdx.ErrInvalidRequest)}
	}
	t.op = memdx.OpVersion
	deadline, _ := ctx.Deadline()
	if err := t.nc.SetWriteDeadline(deadline); err != nil {
		return "", t.broke(false, err)
	}
	t.out = memdx.AppendTextVersion(t.out[:0])
	if n, err := t.nc.Write(t.out); err != nil {
		return "", t.broke(n > 0, err)
	}
	if err := t.watch(ctx, deadline); err != nil {
		return "", err
	}
	defer t.unwatch(ctx)
	for {
		n, version, err := memdx.ParseTextVersion(t.in[t.r:t.w])
		switch {
		case err != nil:
			return "", t.broke(true, fmt.Errorf("version answer: %w", err))
		case n > 0:
			t.r += n
			if t.r != t.w {
				return "", t.broke(true, fmt.Errorf("%d bytes after the version answer: %w", t.w-t.r, memdx.ErrMalformed))
			}
			t.r, t.w = 0, 0
			return string(version), nil
		}
		if err := t.fill(ctx); err != nil {
			return "", err
		}
	}
}

// watch readies a read bounded by deadline (zero: none) and ctx: a read
// blocked in the kernel ends when its deadline is moved into the past.
// unwatch must follow.
func (t *TextConn) watch(ctx context.Context, deadline time.Time) error {
	if t.in == nil {
		t.in = make([]byte, textReadBuffer)
	}
	if err := t.nc.SetReadDeadline(deadline); err != nil {
		return t.broke(true, err)
	}
	if ctx.Done() != nil {
		t.stop = context.AfterFunc(ctx, func() { _ = t.nc.SetReadDeadline(time.Unix(1, 0)) })
	}
	return nil
}

// unwatch ends what watch began. When ctx's function has run (or is
// running) the connection is broken: whatever the read got, the next one
// would fail.
func (t *TextConn) unwatch(ctx context.Context) {
	if t.stop == nil {
		return
	}
	if !t.stop() && t.err == nil {
		t.broke(true, ctx.Err())
	}
	t.stop = nil
}

// fill reads more of the answer, after moving what is left to the front
// of the buffer and growing it if it is full (an item larger than it).
func (t *TextConn) fill(ctx context.Context) error {
	if t.r > 0 {
		t.w = copy(t.in, t.in[t.r:t.w])
		t.r = 0
	}
	if t.w == len(t.in) {
		if len(t.in) >= t.maxValue+2*textLineMax {
			// ParseTextGet refuses an item this long before it is whole.
			return t.broke(true, fmt.Errorf("multi-get item over %d bytes: %w", len(t.in), memdx.ErrMalformed))
		}
		in := make([]byte, min(2*len(t.in), t.maxValue+2*textLineMax))
		copy(in, t.in[:t.w])
		t.in = in
	}
	m, err := t.nc.Read(t.in[t.w:])
	t.w += m
	if err != nil {
		if ctx.Err() != nil {
			err = ctx.Err()
		}
		return t.broke(true, err)
	}
	return nil
}

// broke records why the connection can no longer be used and returns the
// error for the request in progress.
func (t *TextConn) broke(written bool, err error) error {
	re := &RequestError{Op: t.op, Addr: t.addr, Written: written, Err: err}
	var te *memdx.TextError
	switch {
	case errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded):
	case errors.Is(err, os.ErrDeadlineExceeded):
		re.Err = context.DeadlineExceeded
	case errors.As(err, &te), errors.Is(err, memdx.ErrMalformed):
	default:
		re.Err = fmt.Errorf("%w: %w", kverr.ErrConnectionClosed, err)
		re.connEnded = true
	}
	if t.err == nil {
		t.err = re
	}
	return re
}
