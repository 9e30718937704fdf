package conn

import (
	"context"
	"errors"
	"net"

	"github.com/kvwire/kvwire/internal/dnsctx"
	"github.com/kvwire/kvwire/internal/lifecycle"
)

// errNoConnection: Options.DialContext returned neither a connection nor
// an error.
var errNoConnection = errors.New("Options.DialContext returned no connection and no error")

// maxConnectAttempts bounds the connection attempts in flight at once
// (Options.ConnectAttempt).
const maxConnectAttempts = 4

// connectAttempt is one connection attempt of connect.
type connectAttempt struct {
	cancel context.CancelFunc
	gaveUp bool // given up for a newer one: its outcome is dropped
}

// attemptResult is a connection attempt's outcome.
type attemptResult struct {
	n   int // which attempt
	nc  net.Conn
	err error
}

// connect opens the network connection to addr: one attempt
// (Options.DialContext, or a net.Dialer), then another beside those in
// flight each time Options.ConnectAttempt passes with none ended, at most
// maxConnectAttempts at once (the oldest is given up to start the next).
// The first attempt that connects wins; the others are given up, and any
// of them that connected meanwhile is closed. An attempt that fails ends
// the dial with its error (a refusal, an unreachable network: what another
// attempt now would meet too), and so does ctx, with the error of an
// attempt it cut short. Every attempt's goroutine has returned when
// connect does.
func connect(ctx context.Context, addr string, o *Options) (net.Conn, error) {
	dialer := o.DialContext
	if dialer == nil {
		resolver := o.Resolver
		if resolver == nil {
			resolver = net.DefaultResolver
		}
		// A resolver of this dial's own, shared by its attempts: a
		// later attempt waits for the lookup in flight (the Go
		// resolver's sharing) instead of starting its own, so that a
		// lookup slower than the attempts' rotation (a dead first
		// nameserver's timeout) is not given up with each attempt. Its
		// queries end with the attempt that waits alone, and all of
		// them when the dial returns (dnsctx): the Go resolver does not
		// end a lookup more than one attempt waited for.
		lookups, endLookups := context.WithCancel(ctx)
		defer endLookups()
		d := net.Dialer{Resolver: dnsctx.InterruptibleUntil(resolver, lookups)}
		dialer = d.DialContext
	}
	dial := func(ctx context.Context) (net.Conn, error) {
		nc, err := dialer(ctx, "tcp", addr)
		if nc == nil && err == nil {
			// A caller's DialContext broke its contract: without this the
			// dial would wait for a connection that never comes, or use
			// a nil one.
			err = errNoConnection
		}
		return nc, err
	}
	if o.ConnectAttempt < 0 {
		return dial(ctx)
	}
	results := make(chan attemptResult, maxConnectAttempts+1)
	var attempts []connectAttempt
	running, active := 0, 0 // goroutines not returned; of them, not given up
	start := func() {
		actx, cancel := context.WithCancel(ctx)
		n := len(attempts)
		attempts = append(attempts, connectAttempt{cancel: cancel})
		running++
		active++
		lifecycle.Go(func() { // runs the TLS config's callbacks
			nc, err := dial(actx)
			results <- attemptResult{n: n, nc: nc, err: err}
		})
	}
	start()
	tm := o.clock.NewTimer()
	tm.Reset(o.ConnectAttempt)
	defer tm.Stop()
	var won net.Conn
	var err error
	for won == nil && err == nil {
		select {
		case r := <-results:
			running--
			a := &attempts[r.n]
			a.cancel()
			switch {
			case a.gaveUp:
				if r.nc != nil {
					_ = r.nc.Close() // connected as it was given up
				}
				continue
			case r.err == nil:
				won = r.nc
			default:
				err = r.err
			}
			a.gaveUp = true // ended
			active--
		case <-tm.C():
			if active == maxConnectAttempts {
				for i := range attempts {
					if a := &attempts[i]; !a.gaveUp {
						a.gaveUp = true
						a.cancel()
						active--
						break
					}
				}
			}
			start()
			tm.Reset(o.ConnectAttempt)
		}
	}
	for i := range attempts {
		if a := &attempts[i]; !a.gaveUp {
			a.gaveUp = true
			a.cancel()
		}
	}
	for ; running > 0; running-- {
		if r := <-results; r.nc != nil {
			_ = r.nc.Close() // connected as it was given up
		}
	}
	return won, err
}
