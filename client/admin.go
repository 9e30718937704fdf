package client

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/kvwire/kvwire/internal/cluster"
	"github.com/kvwire/kvwire/internal/fanout"
	"github.com/kvwire/kvwire/internal/nodereq"
	"github.com/kvwire/kvwire/memdx"
)

// Requests to each node rather than for a key (internal/nodereq): each is
// an operation addressed to its node (op.target.Node), through the same
// execute as any operation, sent once (sendOnce).

// StatsOptions are the options of Stats.
type StatsOptions struct {
	// Timeout bounds each node's answer: 0 means the client's KVTimeout,
	// a negative one is refused (ErrInvalidArgument), as in the other
	// options of this file.
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
// group, or one the server knows ("settings", "items", "slabs", "sizes" on
// memcached, whose binary protocol has no "conns": that group is text
// only; Couchbase Server needs the Stats privilege). A group the server
// does not know fails with ErrInvalidArgument, naming the group; so does
// a group whose arguments name nothing the server has (Couchbase Server's
// "key <doc> <vbucket>" of a document that does not exist), the server
// answering both alike. A key group ("key <doc> <vbucket>
// [<scope.collection>]", "key-byid", "vkey", "vkey-byid") is about one
// vbucket, which kv_engine reads from the group (not the request header)
// and which a node that does not hold it answers NOT_MY_VBUCKET: without
// opts.Node it goes only to the node the client's map names active for
// that vbucket (every node when the map has none); a node's
// NOT_MY_VBUCKET error names the group's vbucket. Set opts.Node to ask a
// replica. On memcached:// "sizes_enable" and
// "sizes_disable" fail with ErrFeatureNotAvailable, unsent: memcached's
// binary protocol never ends their answer. STAT is a barrier in kv_engine
// under unordered execution, held as Ping's NOOP is (see Ping).
func (c *Client) Stats(ctx context.Context, group string, opts *StatsOptions) ([]NodeStats, error) {
	var o StatsOptions
	if opts != nil {
		o = *opts
	}
	if c.memcached && (group == "sizes_enable" || group == "sizes_disable") {
		// memcached 1.6 switches the tracking, then answers one
		// statistic and never the keyless packet that ends a STAT
		// answer (proto_bin.c process_bin_stat): the call would wait for
		// its timeout and call the request not applied.
		return nil, c.refusedNodes(ctx, "Stats", memdx.OpStat, ErrFeatureNotAvailable,
			fmt.Errorf("memcached's binary protocol never ends its answer to stats %q: use its text protocol", group))
	}
	vb, keyGroup := statKeyVbucket(group)
	keyGroup = keyGroup && !c.memcached
	pick := func(t *cluster.Topology) string {
		if keyGroup && o.Node == "" {
			// kv_engine answers a key group from the vbucket the
			// group names (parseStatKeyArg; the header's vbucket is
			// not read), and NOT_MY_VBUCKET on a node without it:
			// ask the node the map names active for it. With no
			// such node (no map, a vbucket outside it or without an
			// active), every node is asked, each answering for
			// itself.
			return vbucketActive(t, vb)
		}
		return o.Node
	}
	return eachNodeOf(c, ctx, "Stats", pick, o.Timeout, func(ctx context.Context, n *cluster.Node) (NodeStats, error) {
		stats := nodereq.Stats{}
		op := c.nodeOp("Stats", n, memdx.NewStat([]byte(group)), o.Timeout)
		op.handler = stats.Handle
		if err := runNode(ctx, op); err != nil {
			var kv *KeyValueError
			if errors.As(err, &kv) && kv.Status == StatusKeyNotFound {
				// The server's answer (Couchbase Server's and
				// memcached's alike) does not say which argument.
				kv.Cause = &statsGroupError{group: group, status: kv.Cause}
				kv.seal()
			}
			if keyGroup && errors.As(err, &kv) && kv.Status == StatusNotMyVbucket {
				// The request's header says vbucket 0, which the
				// server did not read: the vbucket is the group's.
				kv.Vbucket = vb
				kv.Cause = fmt.Errorf("node %s does not hold vbucket %d, which stats group %q names: %w", n.Addr(), vb, group, kv.Cause)
				kv.seal()
			}
			return NodeStats{Node: n.Addr(), Err: err}, err
		}
		return NodeStats{Node: n.Addr(), Stats: stats}, nil
	})
}

// Version asks every node for its version. VERSION is a barrier in
// kv_engine under unordered execution, held as Ping's NOOP is (see Ping).
func (c *Client) Version(ctx context.Context, opts *VersionOptions) ([]NodeVersion, error) {
	var o VersionOptions
	if opts != nil {
		o = *opts
	}
	return eachNode(c, ctx, "Version", o.Node, o.Timeout, func(ctx context.Context, n *cluster.Node) (NodeVersion, error) {
		var v nodereq.Version
		op := c.nodeOp("Version", n, memdx.NewVersion(), o.Timeout)
		op.handler = v.Handle
		if err := runNode(ctx, op); err != nil {
			return NodeVersion{Node: n.Addr(), Err: err}, err
		}
		return NodeVersion{Node: n.Addr(), Version: v.Version}, nil
	})
}

// Flush drops every item of every memcached server (FLUSH), at once or
// after opts.Delay. memcached:// only: a Couchbase bucket is flushed
// through the cluster's management API, and Flush refuses it with
// ErrFeatureNotAvailable without sending anything. A node's FLUSH that was
// written and got no answer (its connection ended, or the timeout or ctx
// ended the wait) may have been applied: its error matches ErrAmbiguous
// (at the timeout, ErrAmbiguousTimeout) and is never sent again. A server
// that does not allow FLUSH (memcached with flush_all disabled, -F, which
// answers AUTH_ERROR) fails with ErrFeatureNotAvailable.
func (c *Client) Flush(ctx context.Context, opts *FlushOptions) ([]NodeResult, error) {
	var o FlushOptions
	if opts != nil {
		o = *opts
	}
	refuse := func(sentinel, cause error) ([]NodeResult, error) {
		return nil, c.refusedNodes(ctx, "Flush", memdx.OpFlush, sentinel, cause)
	}
	if !c.memcached {
		return refuse(ErrFeatureNotAvailable, errors.New("a Couchbase bucket is flushed through the management REST API, not the KV protocol"))
	}
	if o.Delay < 0 {
		return refuse(ErrInvalidArgument, errors.New("negative Delay"))
	}
	var extras []byte
	if o.Delay > 0 {
		exp, err := expiryValue(o.Delay, c.clock)
		if err != nil {
			return refuse(ErrInvalidArgument, err)
		}
		extras = nodereq.FlushExtras(exp)
	}
	return eachNode(c, ctx, "Flush", o.Node, o.Timeout, func(ctx context.Context, n *cluster.Node) (NodeResult, error) {
		err := runNode(ctx, c.nodeOp("Flush", n, nodereq.Flush(extras), o.Timeout))
		var kv *KeyValueError
		if errors.As(err, &kv) && kv.Status == StatusAuthError {
			// memcached's refusal of FLUSH when flush_all is disabled
			// (-F); the status alone says "authentication".
			kv.Cause = fmt.Errorf("the server does not allow FLUSH (memcached with flush_all disabled, -F): %w", kv.Cause)
			kv.seal()
		}
		return NodeResult{Node: n.Addr(), Err: err}, err
	})
}

// PingResult is one connection's answer to a ping.
type PingResult struct {
	Node    string
	Latency time.Duration
	Err     error
	// Local and Remote are the sockets of the connection the NOOP went
	// on, and LocalID its id (RFC 0067's local id); empty when the node
	// had no connection.
	Local, Remote, LocalID string
}

// Ping sends NOOP on one connection of every node in the topology, all at
// once, and reports each answer and its latency. It never retries. NOOP is
// a barrier in kv_engine under unordered execution: it goes on a
// connection with no synchronous write waiting for replication (nor range
// scan continue) in flight, and, when every connection of the node has
// one, it is held, unsent, until one is free or the bounds of those
// requests on one of them (a write's durability timeout, a continue's time
// limit) have passed, then sent, as Stats' and Version's requests are (a
// held ping that times out says so).
func (c *Client) Ping(ctx context.Context) []PingResult {
	if ctx == nil {
		// Refused, as every node's answer would be; observed as a ping
		// sent is (RFC 0067 names ping among the calls with a wrapping
		// span): its span, over each node's NOOP refused.
		wctx, parent, end := c.wrapSpan(context.Background(), "ping", nil, nil)
		var out []PingResult
		var errs []error
		for _, n := range c.Nodes() {
			err := c.refused("Ping", memdx.OpNoop, nil, "", ErrInvalidArgument, errNilContext)
			c.refusedCall(wctx, "Ping", memdx.OpNoop, nil, parent, err)
			out = append(out, PingResult{Node: n, Err: err})
			errs = append(errs, err)
		}
		end(errors.Join(errs...))
		return out
	}
	// RFC 0067: a ping is a span over the NOOP of each node (when tracing).
	ctx, parent, end := c.wrapSpan(ctx, "ping", nil, nil)
	defer end(errUnwound) // a panic in a node's ping still ends the span (after end(err): nothing)
	out, err := eachNode(c, ctx, "Ping", "", 0, func(ctx context.Context, n *cluster.Node) (PingResult, error) {
		o := c.nodeOp("Ping", n, memdx.NewNoop(), 0)
		o.parentSpan = parent
		defer putOp(o)
		start := time.Now()
		err := c.execute(ctx, o)
		r := PingResult{Node: n.Addr(), Latency: time.Since(start), Err: err}
		if cn := o.trace.Conn(); cn != nil {
			r.Local, r.Remote, r.LocalID = cn.LocalAddr(), cn.RemoteAddr(), cn.ID()
		}
		return r, err
	})
	end(err)
	return out
}

// nodeOp is the operation name addressed to node n: req, sent once within
// timeout (0: the client's KVTimeout).
func (c *Client) nodeOp(name string, n *cluster.Node, req memdx.Request, timeout time.Duration) *op {
	o := c.getOp(name, kindNoop, nil, "")
	o.req, o.timeout, o.strategy, o.target.Node = req, timeout, sendOnce, n
	o.noVbucket = true
	// NOOP, STAT and VERSION are not reordered under UnorderedExecution
	// (memcached has neither); FLUSH is memcached's only.
	o.barrier = !c.memcached && (req.OpCode == memdx.OpNoop || req.OpCode == memdx.OpStat || req.OpCode == memdx.OpVersion)
	return o
}

// runNode executes a node's operation and releases it.
func runNode(ctx context.Context, o *op) error {
	_, err := run(ctx, o, func(*op) struct{} { return struct{}{} })
	return err
}

// eachNode runs do for each node of the current topology (only the one
// addressed when only is set), all at once, and waits for every one
// (fanout.Each). It returns their results in the topology's order and
// their errors joined. A nil ctx or a negative timeout (the call's
// option) is refused before anything is sent.
func eachNode[R any](c *Client, ctx context.Context, name, only string, timeout time.Duration, do func(context.Context, *cluster.Node) (R, error)) ([]R, error) {
	return eachNodeOf(c, ctx, name, func(*cluster.Topology) string { return only }, timeout, do)
}

// eachNodeOf is eachNode with the node to ask (only) chosen from the
// topology the call runs on.
func eachNodeOf[R any](c *Client, ctx context.Context, name string, pick func(*cluster.Topology) string, timeout time.Duration, do func(context.Context, *cluster.Node) (R, error)) ([]R, error) {
	if err := firstErr(checkContext(ctx), checkTimeout(timeout)); err != nil {
		return nil, c.refusedNodes(ctx, name, 0, ErrInvalidArgument, err)
	}
	t := c.cl.Topology()
	if t == nil {
		return nil, c.refusedNodes(ctx, name, 0, ErrNoNodeAvailable, errors.New("no topology yet"))
	}
	only := pick(t)
	nodes, ok := nodereq.Select(t.Nodes(), only)
	if !ok {
		return nil, c.refusedNodes(ctx, name, 0, ErrInvalidArgument, fmt.Errorf("node %q is not one of %v", only, c.Nodes()))
	}
	return fanout.Each(ctx, nodes, do)
}

// refusedNodes is the error of a request to each node (name, sent as
// opc) refused before any node was asked, called with ctx: an operation
// all the same to its observers, one span and one point failed with it
// (refusedCall), as each node's request sent would be.
func (c *Client) refusedNodes(ctx context.Context, name string, opc memdx.OpCode, sentinel, cause error) error {
	e := c.refused(name, opc, nil, "", sentinel, cause)
	c.refusedCall(ctx, name, opc, nil, nil, e)
	return e
}

// statKeyVbucket reads the vbucket of a key stats group, "key <doc> <vb>
// [<scope.collection>]", "key-byid <doc> <vb> [<collection id>]" and their
// "vkey" forms, as kv_engine splits it (single spaces of the trimmed
// group, 3 or 4 words). ok is false for another group, or a vbucket that
// is not a decimal number.
func statKeyVbucket(group string) (vb uint16, ok bool) {
	if !strings.HasPrefix(group, "key ") && !strings.HasPrefix(group, "key-byid ") &&
		!strings.HasPrefix(group, "vkey ") && !strings.HasPrefix(group, "vkey-byid ") {
		return 0, false
	}
	args := strings.Split(strings.TrimSpace(group), " ")
	if len(args) != 3 && len(args) != 4 {
		return 0, false
	}
	n, err := strconv.ParseUint(args[2], 10, 16)
	if err != nil {
		return 0, false
	}
	return uint16(n), true
}

// vbucketActive is the address of the node t's map names active for vb;
// "" when there is none (no map, vb outside it, no active).
func vbucketActive(t *cluster.Topology, vb uint16) string {
	if t == nil || t.Ketama() {
		return ""
	}
	cfg := t.Config()
	if cfg == nil || int(vb) >= cfg.NumVbuckets() {
		return ""
	}
	i, err := cfg.VbucketServer(vb, 0, false)
	if err != nil {
		return ""
	}
	if n := t.Server(i); n != nil {
		return n.Addr()
	}
	return ""
}

// statsGroupError is the cause of Stats' error when the server does not
// know the group asked for: it names the group, which the server's answer
// (KEY_ENOENT, no error context) does not, and wraps the status error.
type statsGroupError struct {
	group  string
	status error
}

func (e *statsGroupError) Error() string {
	if name, args, ok := strings.Cut(strings.TrimSpace(e.group), " "); ok {
		// A group with arguments: KEY_ENOENT is also what kv_engine
		// answers "key <doc> <vb>" and "vkey" for a document that does
		// not exist.
		return fmt.Sprintf("the server has no statistics for %q: no group %q, or nothing by its arguments %q (a key stat's document that does not exist, say)",
			e.group, name, strings.TrimSpace(args))
	}
	return fmt.Sprintf("the server has no statistics group %q", e.group)
}

func (e *statsGroupError) Unwrap() error { return e.status }

// checkContext refuses a nil ctx (errNilContext).
func checkContext(ctx context.Context) error {
	if ctx == nil {
		return errNilContext
	}
	return nil
}
