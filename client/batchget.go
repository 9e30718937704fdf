package client

import (
	"time"

	"github.com/kvwire/kvwire/conn"
	sched "github.com/kvwire/kvwire/internal/batch"
	"github.com/kvwire/kvwire/memdx"
)

// A memcached GetMany reads its keys in groups first (internal/multiget):
// each server's share of a window of keys as one request, a text
// multi-get where the server takes one (textOK), its quiet gets and a NOOP
// otherwise; the batch routes, reads, and settles each key from its
// record. A hit is done; every other key (a miss, a failure status, a
// group that ended without its answer) becomes an operation of the batch
// whose first attempt ended that way (judgeGrouped), judged by the batch's
// usual steps, so that its error, retries and deadline are a Get's; a key
// no group took is an operation from the start.

// groupGets reports whether GetMany on col may read by groups: a memcached
// client, the default collection, no Observer (whose attempts are per
// key), and a context (not nil) and a client still open.
func (b *batch) groupGets(col *Collection) bool {
	c := b.c
	return c.memcached && col.isDefault && b.obs == nil && c.ctx.Err() == nil && b.ctx != nil && b.ctx.Err() == nil
}

// getGroups reads keys by groups, in windows of the batch's in-flight
// bound (multiget's Read: a batch larger than it has two windows in
// flight), and sets res for the hits as each window's groups end; every
// other key is added to b as an operation (add), to be judged or sent by
// run.
func (b *batch) getGroups(col *Collection, keys []string, p opParams, res []GetManyResult) {
	w := &b.mg
	deadline := b.c.deadline(b.ctx, p.timeout, b.now) // each key's, as begin gives it
	w.Start(b.ctx, b.c.clock, keys)
	w.Timeout = deadline.Sub(b.now)
	w.Read(b.c.cl.Topology, b.s.MaxInFlight, validKey, b.c.textOK, deadline, func(from, to int) {
		b.s.Canceled = b.s.Canceled || w.Canceled
		at := b.c.clock.Now() // when the window's groups were read
		hits := 0
		for i := from; i < to; i++ {
			if b.settle(col, i, keys[i], p, res, at) {
				hits++
			}
		}
		b.c.obs.done(b.ctx, "Get", memdx.OpGet, col, p.parent, b.now, at, hits)
	})
}

func validKey(key string) bool { return checkKey(key) == nil }

// settle gives key i of a window read by groups, at at, its outcome: a
// hit is done (its result set now; getGroups shows the window's hits to
// the observers as gets from the batch's start to at) and settle reports
// it; any other key is an operation.
func (b *batch) settle(col *Collection, i int, key string, p opParams, res []GetManyResult, at time.Time) (hit bool) {
	r := &b.mg.Recs[i]
	if r.Hit() {
		res[i].GetResult = GetResult{Value: r.Value, Cas: r.Cas, Flags: r.Flags, Datatype: Datatype(r.Datatype),
			transcoder: b.c.transcoder}
		b.s.Keys[i].State = sched.Got
		return true
	}
	o, err := col.newOp(b.ctx, "Get", kindGet, key, memdx.NewGet(nil), p)
	b.add(i, o, err)
	b.s.Keys[i].Op.grouped = err == nil && r.Group >= 0 && !b.mg.Groups[r.Group].Fallback
	b.s.Keys[i].Op.gotAt = at
	return false
}

// textOK reports whether GetMany may read this node's keys by a text
// multi-get: a plain-TCP, unauthenticated memcached connection (cn is the
// one the group would use otherwise) and the option not set.
func (c *Client) textOK(cn *conn.Conn) bool {
	return !c.opts.Memcached.BinaryMultiGet && c.opts.TLSConfig == nil && cn.Memcached() && cn.Mechanism() == ""
}

// judgeGrouped judges the first attempt of key i, read in a group without
// a hit, as the batch judges any attempt's outcome: a failure status as
// answered, a miss as settled by the group's end, a group that ended
// without its answer with the group's error (multiget's FirstAttempt).
func (b *batch) judgeGrouped(i int) {
	k := &b.s.Keys[i]
	r := &b.mg.Recs[i]
	g := &b.mg.Groups[r.Group]
	o := k.Op.o
	o.attempt(g.Node, 0)
	o.prepare(g.Conn, 0, 0)
	op, answered, err := b.mg.FirstAttempt(i)
	o.req.OpCode = op
	o.opaque = r.Opaque
	k.Op.pl = placed{cn: g.Conn}
	k.Op.pl.Topo, k.Op.pl.Node = g.Topo, g.Node
	k.Attempt, k.State = 1, sched.InFlight
	b.s.InFlight++
	// Its request went out with the group's, from the batch's start.
	b.c.obs.Send(&o.trace.Trace, g.Conn, g.Node.Addr(), b.now)
	if r.Got {
		o.status = r.Status
		if r.Err == nil {
			o.recordFailure(r.Status, r.Datatype, r.Value)
		}
		r.Value = nil
	}
	b.judge(i, answered, err, k.Op.gotAt)
}
