package client

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kvwire/kvwire/conn"
	"github.com/kvwire/kvwire/internal/cluster"
	"github.com/kvwire/kvwire/internal/dnssrv"
	"github.com/kvwire/kvwire/internal/lifecycle"
	"github.com/kvwire/kvwire/retry"
)

// Client is a connection to one Couchbase bucket, or to a set of plain
// memcached servers. It is safe for concurrent use; operations run on the
// caller's goroutine (no goroutine per operation). Close releases
// everything.
type Client struct {
	// What every operation reads comes first, together (two cache lines
	// rather than six or seven of Options and the rest): an operation
	// finds none of it in the nearest cache after the system calls of its
	// round trip.

	// cl owns the cluster's state: seeds, topology, nodes and their
	// pools, configs, collection ids (package internal/cluster). ctx is
	// its context, ended by Close.
	cl    *cluster.Cluster
	ctx   context.Context
	clock retry.Clock // Options.Clock: deadlines, retry waits, and the cluster's timers
	// strategy runs opts.RetryStrategy for operations that set none;
	// resends is retry.ResendsIdempotent of it (of the default when nil).
	strategy retry.Strategy
	resends  bool
	// obs are the tracer, the meter and the reports (observers.go).
	obs *observers
	// Copies of opts' Observer, Transcoder and KVTimeout; realClock:
	// opts.Clock is nil.
	observer   Observer
	transcoder Transcoder
	kvTimeout  time.Duration
	realClock  bool
	memcached  bool

	opts  Options
	orch  retry.Orchestrator
	opIDs atomic.Uint64
	// closeOnce runs the shutdown (Close); closing is set once a Close
	// has started it or is about to.
	closeOnce sync.Once
	closing   atomic.Bool
	// bg are the goroutines an operation leaves running after it returned
	// (a scan's cancel held behind a durable write: scanRequests.Cancel),
	// which the shutdown waits for.
	bg bgGroup
}

// bgGroup counts the goroutines of a client's own that outlive the call
// that started them; the shutdown waits for them (wait), and none starts
// after it began.
type bgGroup struct {
	mu     sync.Mutex
	closed bool
	wg     sync.WaitGroup
}

// Go runs f on a goroutine of the client's own (lifecycle.Go: a Close
// called from the caller's code it runs does not wait for it), unless the
// shutdown has begun: it then reports false and runs nothing.
func (g *bgGroup) Go(f func()) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return false
	}
	g.wg.Add(1)
	lifecycle.Go(func() {
		defer g.wg.Done()
		f()
	})
	return true
}

// wait starts no goroutine after it is called, and returns once every
// one started has ended.
func (g *bgGroup) wait() {
	g.mu.Lock()
	g.closed = true
	g.mu.Unlock()
	g.wg.Wait()
}

// testHookParse, when set by this package's tests (before any client
// starts, and reset after the last one closed), runs on the config loop
// before each config it parses.
var testHookParse func()

// Connect parses the connection string, bootstraps against the first seed
// that answers, and returns a Client ready for operations. It returns at
// once (not after a timeout) when the server refuses the credentials
// (ErrAuthenticationFailure) or the bucket (ErrBucketNotFound). opts may be
// nil.
//
//	c, err := client.Connect(ctx, "couchbase://10.0.0.1,10.0.0.2/travel-sample",
//		&client.Options{Username: "app", Password: os.Getenv("CB_PASSWORD")})
//	if err != nil {
//		return err
//	}
//	defer c.Close()
func Connect(ctx context.Context, connStr string, opts *Options) (*Client, error) {
	if ctx == nil {
		return nil, fmt.Errorf("%w: Connect: %w", ErrInvalidArgument, errNilContext)
	}
	cs, err := ParseConnStr(connStr)
	if err != nil {
		return nil, err
	}
	var o Options
	if opts != nil {
		o = *opts
	}
	o, err = o.resolved(cs)
	if err != nil {
		return nil, err
	}
	c := &Client{
		opts:       o,
		memcached:  cs.Scheme.IsMemcached(),
		clock:      clockFor(o.Clock),
		strategy:   internalStrategy(o.RetryStrategy, nil),
		observer:   o.Observer,
		transcoder: o.Transcoder,
		kvTimeout:  o.KVTimeout,
		realClock:  o.Clock == nil,
	}
	c.resends = resendsIdempotent(c.strategy)
	// A nil Clock keeps the orchestrator on its real-clock path, which
	// reuses one timer per operation.
	var orchClock retry.Clock
	if o.Clock != nil {
		orchClock = c.clock
	}
	c.orch = retry.Orchestrator{Clock: orchClock, Logger: o.Logger, NMVInterval: o.NMVRetryInterval}
	c.obs = newObservers(&c.opts, c.clock, retry.RealClock(), newClientID())
	connected := false
	defer func() {
		if !connected {
			// Failed, or the caller's code Connect runs (a Resolver, a
			// TLS callback) panicked: the reports stop.
			c.obs.close()
		}
	}()
	srv := c.seedResolver(cs)
	c.cl, err = cluster.Connect(ctx, c.clusterConfig(cs, srv))
	if err != nil {
		return nil, connectError(cs, srv, err)
	}
	connected = true
	c.ctx = c.cl.Context()
	c.obs.topology = c.cl.Topology // before any operation: Connect returns after
	return c, nil
}

// newClientID returns a client id: 16 random hex digits, the first half of
// each of the client's connection ids (RFC 0067's local id).
func newClientID() string {
	var b [8]byte
	rand.Read(b[:]) // crypto/rand.Read never fails
	return strings.ToUpper(hex.EncodeToString(b[:]))
}

// connectError is Connect's error for a bootstrap that failed with err;
// srv is the DNS SRV lookup (nil: none was made).
func connectError(cs *ConnStr, srv *dnssrv.Seeds, err error) error {
	var be *cluster.BootstrapError
	if !errors.As(err, &be) {
		return err
	}
	all, sentinel, cause := be.Failure(cs.Scheme.IsMemcached())
	ce := &ConnectError{Hosts: cs.seeds(), Err: sentinel, Cause: cause, All: all}
	if srv != nil && srv.Err != nil {
		ce.SRV = srv.Err
	}
	if srv != nil && len(srv.Targets) > 0 {
		// The record's targets replaced the one host (an SRV name has
		// no =http companions): they are the seeds dialed, not the name
		// with the scheme's port.
		ce.Hosts = append([]string(nil), srv.Targets...)
	}
	return ce
}

// ConnectError is the error of a Connect that could not bootstrap.
type ConnectError struct {
	// Hosts are the seeds dialed: the connection string's hosts (=http
	// ones with their type), or the targets of its DNS SRV record when the
	// lookup gave some.
	Hosts []string
	// Err is the sentinel: ErrAuthenticationFailure, ErrBucketNotFound,
	// ErrTLS or ErrNoNodeAvailable.
	Err error
	// Cause is the most telling seed error; All has every seed's.
	Cause error
	All   []error
	// SRV is why the DNS SRV lookup of the connection string's one host
	// gave no seeds, so that the host was dialed as written (a
	// *net.DNSError inside when the resolver answered so); nil when no
	// lookup was made or it gave the seeds.
	SRV error
}

func (e *ConnectError) Error() string {
	msg := fmt.Sprintf("kvwire: connect to %v: %v", e.Hosts, e.Err)
	if e.Cause != nil {
		msg += ": " + e.Cause.Error()
	}
	if e.SRV != nil {
		msg += " (dialed as written: " + e.SRV.Error() + ")"
	}
	return msg
}

func (e *ConnectError) Unwrap() []error {
	out := []error{e.Err}
	for _, err := range []error{e.Cause, e.SRV} {
		if err != nil {
			out = append(out, err)
		}
	}
	return out
}

// NodeError says that a node had no connection to carry a request, and why:
// its last connection attempt failed, or it waits before its next one (its
// connections ended soon after they were made), or, when neither, its last
// connection ended (nil Err: it is still making its first connection).
type NodeError struct {
	Addr string
	Err  error
}

func (e *NodeError) Error() string {
	if e.Err == nil {
		return "node " + e.Addr + " has no connection yet"
	}
	return "node " + e.Addr + " is not available: " + e.Err.Error()
}

func (e *NodeError) Unwrap() error { return e.Err }

func (e *NodeError) Is(target error) bool { return target == ErrNoNodeAvailable }

// connOptions are what the client asks of every connection (the cluster
// adds each node's callbacks).
func (c *Client) connOptions() conn.Options {
	o := conn.Options{
		Username:                 c.opts.Username,
		Password:                 c.opts.Password,
		AllowPlainAuthWithoutTLS: c.opts.AllowPlainAuthWithoutTLS,
		TLSConfig:                c.opts.TLSConfig,
		ClientName:               c.opts.ClientName,
		MaxPending:               c.opts.MaxPendingPerConnection,
		ProbeAfter:               c.opts.HealthCheck.ProbeAfter,
		ProbeTimeout:             c.opts.HealthCheck.ProbeTimeout,
		Logger:                   c.opts.Logger,
		ClientID:                 c.obs.clientID,
	}
	if c.obs.orphans != nil {
		o.OnOrphan = c.obs.onOrphan
	}
	if c.opts.Clock != nil {
		// The health check's probes and their timeouts, on the client's
		// Clock; the connections' deadlines and dials keep real time.
		o.Clock = retryClock{c.opts.Clock}
	}
	if c.opts.HealthCheck.Disabled {
		o.ProbeAfter = -1 // conn: no probes, nor the bootstrap's silence watch
	}
	if c.memcached {
		// memcached offers only SASL PLAIN: conn sends it over TLS
		// (memcacheds://), or in clear only when the caller opted in.
		o.Memcached = true
		return o
	}
	o.Bucket = c.opts.Bucket
	o.Features = cluster.HelloFeatures(!c.opts.DisableMutationTokens)
	return o
}

// Close closes every connection and stops every goroutine the client
// started. Operations in flight fail with errors that say whether they were
// written; operations waiting to retry end at once with ErrClosed. It is
// safe to call more than once, and concurrently: every call returns once
// the shutdown is complete and no goroutine of the client is left, but for
// a call made on a goroutine of a client's own.
//
// The client runs caller code on goroutines of its own: Options.Logger's
// handler (on a node's connection upkeep, a connection's goroutines, the
// config loop, the reports, and the shutdown itself, which logs the
// reports' last lines), a TLSConfig's callbacks (a redial's handshake), a
// Resolver (the DNS SRV re-lookup), an Observer, a RetryStrategy and a
// Tracer's spans in a range scan's cancel (each cancel is sent from a
// goroutine of the client's, so that one held behind a durable write can
// go on after the scan returned). Close called there
// cannot wait for the goroutine it runs on: it starts the shutdown and
// returns at once. When it returns, the client's context has ended, so
// that waits to retry and operations started later end with ErrClosed;
// the rest (closing the connections, failing the operations in flight on
// them, waiting for the goroutines) goes on on a goroutine of its own,
// which ends once the calling code has returned to the client. A Close
// from any other goroutine, made before or after, still waits for all of
// it. The same holds when that code closes another client (waiting there
// could deadlock two clients closing each other). Code the client runs on
// an operation's goroutine (an Observer, a RetryStrategy, a Tracer's
// spans, a Meter's instruments), but for a scan's cancel (above), runs on
// the caller's goroutine, or on one the operation waits for and Close
// does not: Close called there waits as from anywhere else.
func (c *Client) Close() error {
	if lifecycle.OnOwn() {
		c.cl.Cancel()
		if c.closing.CompareAndSwap(false, true) {
			// Marked too: the shutdown logs the reports' last lines,
			// whose handler may call Close once more.
			lifecycle.Go(c.shutdown)
		}
		return nil
	}
	c.closing.Store(true)
	// Marked as the client's own while it runs: caller code the shutdown
	// runs (a Logger's handler on the reports' last lines) may call Close,
	// which must not wait for the shutdown it is part of.
	lifecycle.Run(c.shutdown)
	return nil
}

// shutdown closes the cluster and the observers, once: a second caller
// waits until the first one's is complete.
func (c *Client) shutdown() {
	c.closeOnce.Do(func() {
		c.cl.Close()
		// A scan's cancel left running ends at once: the client's
		// context ended, and its connections are closed.
		c.bg.wait()
		c.obs.close() // after the connections: no orphan comes after it
	})
}

// Bucket returns the bucket the client opened ("" for memcached).
func (c *Client) Bucket() string { return c.opts.Bucket }

// ConfigVersion returns the version of the cluster config in use (zero in
// memcached mode).
func (c *Client) ConfigVersion() ConfigVersion {
	if t := c.cl.Topology(); t != nil && t.Config() != nil {
		return configVersionOf(t.Config().Version())
	}
	return ConfigVersion{}
}

// Nodes returns the KV addresses of the nodes in the current topology.
func (c *Client) Nodes() []string {
	t := c.cl.Topology()
	if t == nil {
		return nil
	}
	out := make([]string, 0, len(t.Nodes()))
	for _, n := range t.Nodes() {
		out = append(out, n.Addr())
	}
	return out
}
