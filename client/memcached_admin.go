package client

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/kvwire/kvwire/conn"
	"github.com/kvwire/kvwire/memdx"
	"github.com/kvwire/kvwire/retry"
)

// Server administration, one request per server: Stats (STAT), Version
// (VERSION) and, for memcached://, Flush (FLUSH). Each goes to every node
// of the current topology at once (or the one node its options name),
// once, without retries: a node that fails has its own error in its
// result, and the call's error joins those errors (nil when every node
// answered).

// StatsOptions are the options of Stats.
type StatsOptions struct {
	// Timeout bounds each node's answer (the client's KVTimeout by
	// default).
	Timeout time.Duration
	// Node, when set, asks only this node (an address as Nodes returns).
	Node string
}

// NodeStats is one node's statistics.
type NodeStats struct {
	Node string
	// Stats are the statistics by name, as the server sent them.
	Stats map[string]string
	Err   error
}

// VersionOptions are the options of Version.
type VersionOptions struct {
	Timeout time.Duration
	Node    string
}

// NodeVersion is one node's version string.
type NodeVersion struct {
	Node    string
	Version string
	Err     error
}

// FlushOptions are the options of Flush.
type FlushOptions struct {
	Timeout time.Duration
	Node    string
	// Delay makes the servers drop their items after this long rather than
	// at once (whole seconds, rounded up; past 30 days an absolute time, as
	// expiries are).
	Delay time.Duration
}

// NodeResult is one node's outcome of an operation without a result.
type NodeResult struct {
	Node string
	Err  error
}

// Stats asks every node for a group of statistics: "" for the default
// group, or one the server knows ("settings", "items", "slabs", "conns" on
// memcached; Couchbase Server needs the Stats privilege). A group the
// server does not know fails with ErrInvalidArgument.
func (c *Client) Stats(ctx context.Context, group string, opts *StatsOptions) ([]NodeStats, error) {
	var o StatsOptions
	if opts != nil {
		o = *opts
	}
	out, err := eachNode(c, ctx, "Stats", o.Node, o.Timeout, func(n *node) NodeStats { return NodeStats{Node: n.addr} },
		func(r *NodeStats, e error) { r.Err = e },
		func(r *NodeStats) (*memdx.Request, func(*memdx.Packet) error, *memdx.Status) {
			req := memdx.NewStat([]byte(group))
			st := new(memdx.Status)
			r.Stats = map[string]string{}
			return &req, func(p *memdx.Packet) error {
				*st = p.Status
				if p.Status == memdx.StatusSuccess && len(p.Key) > 0 {
					r.Stats[string(p.Key)] = string(p.Value)
				}
				return nil
			}, st
		})
	for i := range out {
		if out[i].Err != nil {
			out[i].Stats = nil
		}
	}
	return out, err
}

// Version asks every node for its version.
func (c *Client) Version(ctx context.Context, opts *VersionOptions) ([]NodeVersion, error) {
	var o VersionOptions
	if opts != nil {
		o = *opts
	}
	return eachNode(c, ctx, "Version", o.Node, o.Timeout, func(n *node) NodeVersion { return NodeVersion{Node: n.addr} },
		func(r *NodeVersion, e error) { r.Err = e },
		func(r *NodeVersion) (*memdx.Request, func(*memdx.Packet) error, *memdx.Status) {
			req := memdx.NewVersion()
			st := new(memdx.Status)
			return &req, func(p *memdx.Packet) error {
				*st = p.Status
				if p.Status == memdx.StatusSuccess {
					r.Version = string(p.Value)
				}
				return nil
			}, st
		})
}

// Flush drops every item of every memcached server (FLUSH), at once or
// after opts.Delay. memcached:// only: a Couchbase bucket is flushed
// through the cluster's management API, and Flush refuses it with
// ErrFeatureNotAvailable without sending anything. A node's FLUSH that was
// written and got no answer (its connection ended, or the timeout or ctx
// ended the wait) may have been applied: its error matches ErrAmbiguous
// (at the timeout, ErrAmbiguousTimeout) and is never sent again.
func (c *Client) Flush(ctx context.Context, opts *FlushOptions) ([]NodeResult, error) {
	var o FlushOptions
	if opts != nil {
		o = *opts
	}
	if !c.memcached {
		return nil, &KeyValueError{Op: "Flush", OpCode: opCodeOf(memdx.OpFlush), Bucket: c.opts.Bucket, Err: ErrFeatureNotAvailable,
			Cause: errors.New("a Couchbase bucket is flushed through the management REST API, not the KV protocol")}
	}
	if o.Delay < 0 {
		return nil, &KeyValueError{Op: "Flush", OpCode: opCodeOf(memdx.OpFlush), Err: ErrInvalidArgument, Cause: errors.New("negative Delay")}
	}
	var extras []byte
	if o.Delay > 0 {
		exp, err := expiryValue(o.Delay, c.clock.Now())
		if err != nil {
			return nil, &KeyValueError{Op: "Flush", OpCode: opCodeOf(memdx.OpFlush), Err: ErrInvalidArgument, Cause: err}
		}
		extras = []byte{byte(exp >> 24), byte(exp >> 16), byte(exp >> 8), byte(exp)}
	}
	return eachNode(c, ctx, "Flush", o.Node, o.Timeout, func(n *node) NodeResult { return NodeResult{Node: n.addr} },
		func(r *NodeResult, e error) { r.Err = e },
		func(*NodeResult) (*memdx.Request, func(*memdx.Packet) error, *memdx.Status) {
			req := memdx.NewFlush()
			req.Extras = extras
			st := new(memdx.Status)
			return &req, func(p *memdx.Packet) error { *st = p.Status; return nil }, st
		})
}

// eachNode sends one request to each node of the current topology (only
// the one addressed when only is set), all at once, and waits for every
// answer. newResult makes a node's result, setErr records its error, and
// build gives its request, the handler of its answer (called on the
// connection's reader) and where the handler records the status. It
// returns the results in the topology's order and their errors joined.
func eachNode[R any](c *Client, ctx context.Context, op, only string, timeout time.Duration,
	newResult func(*node) R, setErr func(*R, error),
	build func(*R) (*memdx.Request, func(*memdx.Packet) error, *memdx.Status)) ([]R, error) {
	if c.ctx.Err() != nil {
		return nil, &KeyValueError{Op: op, Err: ErrClosed}
	}
	t := c.topo.Load()
	if t == nil {
		return nil, &KeyValueError{Op: op, Err: ErrNoNodeAvailable, Cause: errors.New("no topology yet")}
	}
	nodes := t.all
	if only != "" {
		i := slices.IndexFunc(nodes, func(n *node) bool { return n.addr == only })
		if i < 0 {
			return nil, &KeyValueError{Op: op, Err: ErrInvalidArgument,
				Cause: fmt.Errorf("node %q is not one of %v", only, c.Nodes())}
		}
		nodes = nodes[i : i+1]
	}
	if timeout <= 0 {
		timeout = c.opts.KVTimeout
	}
	out := make([]R, len(nodes))
	errs := make([]error, len(nodes))
	var wg sync.WaitGroup
	for i, n := range nodes {
		out[i] = newResult(n)
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, handle, st := build(&out[i])
			if _, err := c.doOnNode(ctx, n, op, req, timeout, handle, func() memdx.Status { return *st }, nil); err != nil {
				setErr(&out[i], err)
				errs[i] = err
			}
		}()
	}
	wg.Wait()
	return out, errors.Join(errs...)
}

// changesData reports whether a request doOnNode sends may change what the
// server holds, so that one written without an answer may have been
// applied: FLUSH. The others are reads (STAT, VERSION) or belong to a
// range scan, which a failed request restarts or leaves to the server.
func changesData(op memdx.OpCode) bool { return op == memdx.OpFlush }

// doOnNode sends req once to node n (no routing, no retry) and returns nil
// when it ends on a success status (RANGE_SCAN_MORE and _COMPLETE
// included), or a *KeyValueError naming the node, with the retry reason the
// status policy gives the status it ended on (0: none, or no status). status reads the status
// handle recorded; errCtx, if not nil, the error context it decoded. It is
// never sent again: a FLUSH written without an answer (its connection
// ended, the deadline or ctx ended the wait) is reported as ambiguous
// (KeyValueError.Ambiguous; ErrAmbiguousTimeout at the deadline).
func (c *Client) doOnNode(ctx context.Context, n *node, op string, req *memdx.Request, timeout time.Duration,
	handle func(*memdx.Packet) error, status func() memdx.Status, errCtx *memdx.ErrorContext) (retry.Reason, error) {
	e := &KeyValueError{Op: op, OpCode: opCodeOf(req.OpCode), Bucket: c.opts.Bucket, Vbucket: req.Vbucket, Node: n.addr}
	cn, _, err := n.pick()
	if err != nil {
		e.Err, e.Cause = ErrNoNodeAvailable, err
		return 0, e
	}
	// The deadline is counted on the client's Clock, as an operation's is.
	opaque, err := cn.DoDeadline(ctx, c.clock.Now().Add(timeout), req, handle)
	e.Opaque = opaque
	if err != nil {
		e.Cause = err
		var re *conn.RequestError
		if errors.As(err, &re) && re.Written && changesData(req.OpCode) {
			// Written without an answer: the server may have applied it.
			e.Ambiguous = true
		}
		switch {
		case re == nil:
			e.Err = ErrServerFailure // a response that did not decode
			e.Ambiguous = changesData(req.OpCode) && status() == memdx.StatusSuccess
		case errors.Is(err, context.Canceled):
			e.Err = ErrRequestCanceled
		case errors.Is(err, context.DeadlineExceeded):
			e.Cause = &retry.TimeoutError{OpCode: req.OpCode, Ambiguous: e.Ambiguous, LastErr: err}
		case e.Ambiguous:
			// The connection ended after the write: Cause matches
			// ErrConnectionClosed, and the error ErrAmbiguous.
		default:
			e.Err = ErrNoNodeAvailable
		}
		return 0, e
	}
	st := status()
	switch st {
	case memdx.StatusSuccess, memdx.StatusRangeScanMore, memdx.StatusRangeScanComplete:
		return 0, nil
	}
	e.Status = statusOf(st)
	out := decideStatus(req.OpCode, false, st, cn.ErrorMap())
	e.Err = out.sentinel
	if out.found {
		e.ErrorName, e.ErrorDescription = out.entry.Name, out.entry.Desc
	}
	if errCtx != nil {
		e.ServerContext, e.ServerErrorRef = errCtx.Context, errCtx.Ref
	}
	e.Cause = &memdx.StatusError{Status: st, OpCode: req.OpCode, Opaque: opaque, Context: e.ServerContext, Ref: e.ServerErrorRef}
	return out.reason, e
}
