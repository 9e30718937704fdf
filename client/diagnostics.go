package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/kvwire/kvwire/internal/cluster"
	"github.com/kvwire/kvwire/internal/diagnostics"
)

// Diagnostics and readiness (Couchbase SDK RFC 0034, "Health Check", in its
// SDK 3 form, RFC 0061): Client.Diagnostics reports every connection the
// client keeps or is trying to make, without any I/O; Client.WaitUntilReady
// waits until enough of them are connected.

// EndpointState is a connection's state in a diagnostics report (RFC 0034's
// service states). RFC 0061's EndpointState (and gocb's) has four states;
// kvwire also reports RFC 0034's "reconnecting" for an endpoint that had a
// connection, or a failed first attempt, and is being connected again: what
// those SDKs report as "disconnected" or "connecting" until the redial
// succeeds. "disconnected" is only a closed client's.
type EndpointState uint8

// Endpoint states.
const (
	// EndpointConnecting: the endpoint's first connection is being made
	// (dialed, authenticated, bootstrapped).
	EndpointConnecting EndpointState = iota
	// EndpointConnected: its connection is up.
	EndpointConnected
	// EndpointReconnecting: it had a connection, or a first attempt that
	// failed, and is being connected again (or waits out its backoff to
	// do so). Details says why its last connection or attempt ended.
	EndpointReconnecting
	// EndpointDisconnecting: its node left the cluster's config; the
	// connection drains (its requests in flight end) and closes. It is
	// reported while it lives, and no longer counts in the cluster's
	// state (nor in WaitUntilReady): the node is not the cluster's.
	EndpointDisconnecting
	// EndpointDisconnected: no connection and none will be made (the
	// client is closed).
	EndpointDisconnected
)

// String is the state's name in RFC 0034's JSON.
func (s EndpointState) String() string { return diagnostics.EndpointStateName(uint8(s)) }

// ClusterState sums up the endpoints of a diagnostics report (RFC 0061).
type ClusterState uint8

// Cluster states.
const (
	// ClusterOnline: every endpoint is connected.
	ClusterOnline ClusterState = iota
	// ClusterDegraded: at least one endpoint of each service is
	// connected, not all.
	ClusterDegraded
	// ClusterOffline: a service has no endpoint connected.
	ClusterOffline
)

// String is the state's name in RFC 0061's JSON.
func (s ClusterState) String() string { return diagnostics.State(s).String() }

// EndpointDiagnostics is one endpoint of a diagnostics report: one
// connection of a node's pool, whether or not it is up.
type EndpointDiagnostics struct {
	// Service is the service it serves: ServiceKV.
	Service string
	// ID names the endpoint, the same across its reconnections: the
	// node's address and the connection's place in the node's pool
	// ("10.0.0.1:11210/0"). A connection still draining of a node that
	// left and came back at the same address adds its LocalID
	// ("10.0.0.1:11210/0/<LocalID>"): the node's current endpoint keeps
	// the id.
	ID string
	// Node is the node's address, as the cluster's config gives it
	// (Remote while connected).
	Node string
	// Local and Remote are the connection's sockets ("ip:port"), empty
	// while it has none.
	Local, Remote string
	// LocalID is the connection's id, RFC 0067's local id
	// ("<client id>/<connection id>", as the slow-operation and orphan
	// reports show it), empty while it has no connection.
	LocalID string
	State   EndpointState
	// LastActivity is when a request was last sent on its connection, or
	// the connection was made (zero: never); while it has none, that of
	// the connection it had last (RFC 0034: the endpoint's, across
	// reconnects).
	LastActivity time.Time
	// Bucket is the bucket the connection selected ("" on memcached://).
	Bucket string
	// Err is why its last connection ended or its last attempt failed,
	// while it is not connected.
	Err error
}

// DiagnosticsOptions are the options of Client.Diagnostics.
type DiagnosticsOptions struct {
	// ReportID is the report's id; a random one when empty.
	ReportID string
}

// DiagnosticsResult is what Client.Diagnostics found: every endpoint,
// ordered by node as the config lists them, then by place in the pool;
// after them the connections still draining of nodes that left the
// config (EndpointDisconnecting).
// MarshalJSON writes RFC 0061's JSON (RFC 0034's shape, version 2).
type DiagnosticsResult struct {
	ID string
	// SDK is the client's agent, as HELLO sends it.
	SDK       string
	State     ClusterState
	Endpoints []EndpointDiagnostics
	// At is when the report was made: last_activity_us counts from it.
	At time.Time
}

// MarshalJSON writes the report as RFC 0061 has it:
//
//	{"version":2,"id":"...","sdk":"kvwire","state":"online","services":{"kv":[
//	  {"id":"10.0.0.1:11210/0","last_activity_us":1182,"remote":"10.0.0.1:11210",
//	   "local":"10.0.0.9:54670","state":"connected","namespace":"travel-sample",
//	   "details":"local id 66388CF5BFCF7522/18CC8791579B567C"}]}}
//
// last_activity_us is the time from the last activity to the report, in
// microseconds as RFC 0034 has it (gocb writes nanoseconds under that
// name), absent when there was none; remote is the node's address as the
// config gives it; details hold the local id of a connected endpoint, and
// the error of one that is not.
func (r DiagnosticsResult) MarshalJSON() ([]byte, error) {
	out := diagnostics.NewReport(r.ID, r.SDK, r.State.String(), r.At)
	for _, e := range r.Endpoints {
		out.Add(diagnostics.Endpoint{Service: e.Service, ID: e.ID, Remote: e.Node, Local: e.Local, State: e.State.String(),
			Namespace: e.Bucket, LocalID: e.LocalID, LastActivity: e.LastActivity, Err: e.Err})
	}
	return json.Marshal(out)
}

// clusterState sums up endpoints (diagnostics.Summary), but those of
// nodes that left the config (disconnecting).
func clusterState(endpoints []EndpointDiagnostics) ClusterState {
	var s diagnostics.Summary
	for _, e := range endpoints {
		if e.State != EndpointDisconnecting {
			s.Add(e.Service, e.State == EndpointConnected)
		}
	}
	return ClusterState(s.State())
}

// WaitUntilReadyOptions are the options of Client.WaitUntilReady.
type WaitUntilReadyOptions struct {
	// DesiredState is the state to wait for: ClusterOnline (the default)
	// or ClusterDegraded; ClusterOffline is refused (ErrInvalidArgument).
	DesiredState ClusterState
	// Timeout bounds the wait (with ctx's deadline, whichever is
	// earlier). 0 means Options.ConnectTimeout.
	Timeout time.Duration
}

// NotReadyError is WaitUntilReady's error when the cluster did not reach
// the desired state in time: it names the first node that stayed out, its
// state and why. It matches ErrTimeout and ErrUnambiguousTimeout (or
// ErrRequestCanceled when ctx was cancelled) and unwraps to the node's
// error, so that errors.Is(err, ErrAuthenticationFailure) tells a refused
// login from an unreachable node.
type NotReadyError struct {
	Desired, State ClusterState
	// Waited is how long WaitUntilReady waited.
	Waited time.Duration
	// Node is the first node, in the config's order, with an endpoint
	// that was not connected; NodeState that endpoint's state and Err
	// why (nil when none was known: a first connection still being
	// made).
	Node      string
	NodeState EndpointState
	Err       error
	canceled  bool
}

func (e *NotReadyError) Error() string {
	return diagnostics.NotReadyMessage(diagnostics.State(e.Desired), diagnostics.State(e.State), e.Waited, e.canceled, e.Node, e.NodeState.String(), e.Err)
}

// Is matches the timeout sentinels (ErrRequestCanceled when ctx was
// cancelled).
func (e *NotReadyError) Is(target error) bool {
	if e.canceled {
		return target == ErrRequestCanceled
	}
	return target == ErrTimeout || target == ErrUnambiguousTimeout
}

// Unwrap returns the node's error.
func (e *NotReadyError) Unwrap() error { return e.Err }

// notReady builds the error of a wait that ended with d the last report.
func notReady(d *DiagnosticsResult, desired ClusterState, waited time.Duration, canceled bool) *NotReadyError {
	e := &NotReadyError{Desired: desired, State: d.State, Waited: waited, canceled: canceled}
	for _, ep := range d.Endpoints {
		if ep.State != EndpointConnected && ep.State != EndpointDisconnecting {
			e.Node, e.NodeState, e.Err = ep.Node, ep.State, ep.Err
			break
		}
	}
	return e
}

// Diagnostics reports every endpoint of the client (each place of each
// node's connection pool, connected or not, and the connections of nodes
// that left the config while they drain) and the cluster's state, from
// what the client knows: it does no I/O (Ping does). json.Marshal of the
// result is RFC 0061's report.
func (c *Client) Diagnostics(opts *DiagnosticsOptions) *DiagnosticsResult {
	id := ""
	if opts != nil {
		id = opts.ReportID
	}
	if id == "" {
		id = newClientID()
	}
	return c.diagnostics(id)
}

func (c *Client) diagnostics(id string) *DiagnosticsResult {
	eps := c.cl.Endpoints()
	r := &DiagnosticsResult{ID: id, SDK: c.opts.ClientName, At: c.clock.Now(), Endpoints: make([]EndpointDiagnostics, len(eps))}
	var ids map[string]bool // set once a node has left: ids may collide
	for i, e := range eps {
		d := &r.Endpoints[i]
		*d = EndpointDiagnostics{Service: ServiceKV, ID: e.Node + "/" + strconv.Itoa(e.Slot), Node: e.Node,
			State: endpointStateOf(e.State), Bucket: c.opts.Bucket, Err: e.Err, LastActivity: e.LastActivity}
		if cn := e.Conn; cn != nil {
			d.Local, d.Remote, d.LocalID = cn.LocalAddr(), cn.RemoteAddr(), cn.ID()
		}
		if d.State == EndpointDisconnecting && ids == nil {
			ids = make(map[string]bool, i)
			for _, p := range r.Endpoints[:i] {
				ids[p.ID] = true
			}
		}
		if ids == nil {
			continue
		}
		if ids[d.ID] && d.LocalID != "" {
			// A node that left and came back at its address while its
			// old connection drains (the draining endpoints come after
			// the current nodes'): the current endpoint keeps the id,
			// the draining one is told apart by its connection.
			d.ID += "/" + d.LocalID
		}
		ids[d.ID] = true
	}
	r.State = clusterState(r.Endpoints)
	return r
}

// WaitUntilReady waits until the cluster is in opts.DesiredState (online:
// every endpoint connected, the default; degraded: at least one), and
// returns as soon as it is: the connections tell it of each change, no
// polling. It fails with a *NotReadyError (a timeout) when opts.Timeout
// (Options.ConnectTimeout by default, counted on the client's Clock) or
// ctx's deadline passes first, naming the first node that stayed out and
// why, and with ErrClosed when the client closes. An endpoint counts as
// ready once its connection is made (dialed, authenticated, the bucket
// selected): unlike RFC 0061's waitUntilReady, it sends no ping to an
// endpoint without activity, since making the connection is the
// round trip that ping would be. The RFC's timeout is mandatory; here 0
// takes Options.ConnectTimeout.
func (c *Client) WaitUntilReady(ctx context.Context, opts *WaitUntilReadyOptions) error {
	var o WaitUntilReadyOptions
	if opts != nil {
		o = *opts
	}
	if ctx == nil {
		return fmt.Errorf("%w: WaitUntilReady: %w", ErrInvalidArgument, errNilContext)
	}
	desired := o.DesiredState
	timeout, err := diagnostics.WaitFor(diagnostics.State(desired), o.Timeout, c.opts.ConnectTimeout)
	if err != nil {
		return err
	}
	state := func() diagnostics.State { return diagnostics.State(c.diagnostics("").State) }
	end, waited := diagnostics.Wait(ctx, c.clock, timeout, c.ctx.Done(), c.cl.HealthChanged, state, diagnostics.State(desired))
	switch end {
	case diagnostics.Ready:
		return nil
	case diagnostics.Closed:
		return fmt.Errorf("kvwire: WaitUntilReady: %w", ErrClosed)
	}
	return notReady(c.diagnostics(""), desired, waited, end == diagnostics.Canceled)
}

// PingState is how a node's ping ended (RFC 0034's ping states).
type PingState uint8

// Ping states.
const (
	// PingOK: the node answered the NOOP.
	PingOK PingState = iota
	// PingTimeout: it did not answer in time (the error matches
	// ErrTimeout).
	PingTimeout
	// PingError: the ping failed otherwise (no connection to the node,
	// the connection ended, the client closed, ctx was cancelled).
	PingError
)

// String is the state's name in RFC 0034's JSON.
func (s PingState) String() string { return diagnostics.PingStateName(uint8(s)) }

// State is the ping's state: PingOK when the node answered, PingTimeout
// when Err is a timeout, PingError otherwise.
func (r PingResult) State() PingState {
	switch {
	case r.Err == nil:
		return PingOK
	case errors.Is(r.Err, ErrTimeout):
		return PingTimeout
	}
	return PingError
}

// PingOptions are the options of Client.PingReport.
type PingOptions struct {
	// ReportID is the report's id; a random one when empty.
	ReportID string
}

// PingEndpoint is one node's ping in a PingReport.
type PingEndpoint struct {
	PingResult
	// Service is the service pinged: ServiceKV.
	Service string
	// ID names the endpoint pinged as Diagnostics names it: the node's
	// address and the place in its pool of the connection the NOOP went
	// on ("10.0.0.1:11210/0"); the node's address alone when the ping
	// found no connection.
	ID string
	// Bucket is the bucket the connection selected ("" on memcached://).
	Bucket string
}

// PingReport is what Client.PingReport found: a ping of every node, in
// the config's order. MarshalJSON writes RFC 0061's ping report (RFC
// 0034's shape, version 2).
type PingReport struct {
	ID string
	// SDK is the client's agent, as HELLO sends it.
	SDK string
	// ConfigRev is the revision of the config held as the ping began
	// (RFC 0034's config_rev): the nodes pinged are its own unless a new
	// config came in meanwhile (a rebalance). HasConfigRev is false on
	// memcached://, which has no config.
	ConfigRev    uint64
	HasConfigRev bool
	Endpoints    []PingEndpoint
}

// MarshalJSON writes the report as RFC 0061 has it:
//
//	{"version":2,"id":"...","config_rev":53,"sdk":"kvwire","services":{"kv":[
//	  {"id":"10.0.0.1:11210/0","latency_us":1182,"remote":"10.0.0.1:11210",
//	   "local":"10.0.0.9:54670","state":"ok","namespace":"travel-sample"}]}}
//
// latency_us is in whole microseconds; remote is the node's address as the
// config gives it; error holds the error of a ping that was not ok.
func (r PingReport) MarshalJSON() ([]byte, error) {
	var rev *uint64
	if r.HasConfigRev {
		rev = &r.ConfigRev
	}
	out := diagnostics.NewPingReport(r.ID, r.SDK, rev)
	for _, e := range r.Endpoints {
		out.Add(diagnostics.PingEndpoint{Service: e.Service, ID: e.ID, Remote: e.Node, Local: e.Local, State: e.State().String(),
			Namespace: e.Bucket, Latency: e.Latency, Err: e.Err})
	}
	return json.Marshal(out)
}

// PingReport pings every node as Ping does (one NOOP per node, on one of
// its connections, within the KV timeout) and returns RFC 0034's report of
// it: its id (opts.ReportID, a random one when empty), the config's
// revision, and each node's state (ok, timeout, error), latency and
// connection, named as Diagnostics names its endpoints. json.Marshal of
// the result is RFC 0061's ping report.
func (c *Client) PingReport(ctx context.Context, opts *PingOptions) *PingReport {
	id := ""
	if opts != nil {
		id = opts.ReportID
	}
	if id == "" {
		id = newClientID()
	}
	r := &PingReport{ID: id, SDK: c.opts.ClientName}
	if t := c.cl.Topology(); t != nil && !c.memcached {
		if cfg := t.Config(); cfg != nil {
			r.ConfigRev, r.HasConfigRev = cfg.Version().Rev, true
		}
	}
	results := c.Ping(ctx)
	slots := make(map[string]string) // connection's local id -> endpoint id
	for _, e := range c.cl.Endpoints() {
		if e.Conn != nil && e.State != cluster.EndpointDisconnecting {
			slots[e.Conn.ID()] = e.Node + "/" + strconv.Itoa(e.Slot)
		}
	}
	r.Endpoints = make([]PingEndpoint, len(results))
	for i, p := range results {
		ep := PingEndpoint{PingResult: p, Service: ServiceKV, ID: p.Node, Bucket: c.opts.Bucket}
		if s, ok := slots[p.LocalID]; ok && p.LocalID != "" {
			ep.ID = s
		}
		r.Endpoints[i] = ep
	}
	return r
}
