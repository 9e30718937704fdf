// Package dnsctx makes a *net.Resolver's queries end when their context
// does. The Go resolver waits for a DNS server's answer until the query's
// own deadline (the resolver configuration's timeout, 5 s by default,
// for each attempt) and looks at its context only then: a lookup that a
// client's Close cancelled went on that long past Close when the DNS
// server did not answer. internal/dnssrv's SRV lookups and the host name
// lookups before conn's and internal/httpconfig's dials go through it.
package dnsctx

import (
	"context"
	"net"
	"sync"
	"time"
)

// Interruptible returns a resolver that asks what r asks, through r's Dial
// (a net.Dialer's when nil), but whose queries end when their context
// does. The Go resolver waits for a query's answer until the query's
// deadline (the resolver configuration's timeout, 5 s by default) and
// sees its context's end only then: a lookup ended by the client's Close,
// or by the bound of a lookup of the seeds again (a cancellation, on the
// client's clock), held Close or that bound as long when the DNS server
// did not answer.
func Interruptible(r *net.Resolver) *net.Resolver { return InterruptibleUntil(r, nil) }

// InterruptibleUntil is Interruptible whose queries also end when until
// does (nil: never). A lookup that more than one caller waits for (the Go
// resolver shares one in flight among the callers of the same resolver)
// runs on a context of its own, which their contexts' end does not end:
// until bounds it, as the dial whose connection attempts share it does.
func InterruptibleUntil(r *net.Resolver, until context.Context) *net.Resolver {
	dial := r.Dial
	if dial == nil {
		var d net.Dialer
		dial = d.DialContext
	}
	return &net.Resolver{PreferGo: r.PreferGo, StrictErrors: r.StrictErrors,
		Dial: func(ctx context.Context, network, addr string) (net.Conn, error) {
			release := func() {}
			if until != nil {
				if err := until.Err(); err != nil {
					// The lookup's next query (the
					// resolver tries again after a failed
					// one) is not sent.
					return nil, err
				}
				var cancel context.CancelFunc
				ctx, cancel = context.WithCancel(ctx)
				stopUntil := context.AfterFunc(until, cancel)
				release = func() {
					stopUntil()
					cancel()
				}
			}
			nc, err := dial(ctx, network, addr)
			if err != nil || nc == nil {
				release()
				return nc, err
			}
			// The context's end makes the query's reads and writes
			// fail at once; closing the connection (the resolver
			// closes it after each query) drops that watch.
			fired := make(chan struct{})
			stop := context.AfterFunc(ctx, func() {
				defer close(fired)
				_ = nc.SetDeadline(pastDeadline)
			})
			// Once: a second Close would find the watch stopped
			// by the first and wait for a run that never comes.
			closeWatch := sync.OnceFunc(func() {
				if !stop() {
					<-fired // it ran, or runs: wait for it to end
				}
				release()
			})
			wc := &watchedConn{Conn: nc, ctx: ctx, stop: closeWatch}
			if pc, ok := nc.(net.PacketConn); ok {
				// The resolver tells UDP from TCP by this interface.
				return &watchedPacketConn{watchedConn: wc, pc: pc}, nil
			}
			return wc, nil
		}}
}

// pastDeadline is the deadline of a query whose context ended.
var pastDeadline = time.Unix(1, 0)

// watchedConn is a query's stream connection whose Close ends the watch of
// its context. A deadline set once the context ended is the past one: the
// resolver sets the query's own right after the dial, which would
// otherwise undo the watch's when the context ended in between.
type watchedConn struct {
	net.Conn
	ctx  context.Context
	stop func()
}

func (c *watchedConn) Close() error {
	c.stop()
	return c.Conn.Close()
}

func (c *watchedConn) SetDeadline(t time.Time) error {
	return c.keepPast(c.Conn.SetDeadline(t), c.Conn.SetDeadline)
}

func (c *watchedConn) SetReadDeadline(t time.Time) error {
	return c.keepPast(c.Conn.SetReadDeadline(t), c.Conn.SetReadDeadline)
}

func (c *watchedConn) SetWriteDeadline(t time.Time) error {
	return c.keepPast(c.Conn.SetWriteDeadline(t), c.Conn.SetWriteDeadline)
}

// keepPast sets the past deadline with set when the context has ended
// (after the deadline just set, whose error is err).
func (c *watchedConn) keepPast(err error, set func(time.Time) error) error {
	if c.ctx.Err() != nil {
		_ = set(pastDeadline)
	}
	return err
}

// watchedPacketConn is watchedConn for a datagram connection.
type watchedPacketConn struct {
	*watchedConn
	pc net.PacketConn
}

func (c *watchedPacketConn) ReadFrom(b []byte) (int, net.Addr, error)  { return c.pc.ReadFrom(b) }
func (c *watchedPacketConn) WriteTo(b []byte, a net.Addr) (int, error) { return c.pc.WriteTo(b, a) }
