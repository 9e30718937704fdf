package client

import (
	"context"
	"errors"
	"sync"
	"time"
	"unsafe"

	"github.com/kvwire/kvwire/conn"
	"github.com/kvwire/kvwire/memdx"
)

// A memcached GetMany reads its keys in groups first: each server's keys
// go as one text multi-get on a text connection of that server's
// (textconns.go), sent by the batch's goroutine and read by it (every
// server's after the first on a goroutine of its own), or, where the
// text path is not taken (MemcachedOptions.BinaryMultiGet, TLS, SASL, a
// key text cannot carry, a write to the server unanswered, no idle text
// connection, the path turned off), as one conn.StartGets (quiet gets and
// a NOOP, one request on the connection) whose answers are written into a
// record per key by the connection's reader. A text group that
// fails the way a binary one can (its deadline, its context, its
// connection) is judged as a binary group that failed so; one the server
// refuses, or answers with what is not a multi-get's answer, gives its
// unanswered keys to the binary path, as if it had not taken them, and
// turns the server's text path off for a while. A key that comes back a
// hit is done; every
// other key (a miss, a failure status, a group that did not end with its
// NOOP's answer) becomes an operation of the batch whose first attempt
// ended that way, and is judged by the batch's usual steps (judge, wait,
// place, ...), so that its error, retries and deadline are a Get's. So is
// a key the group path does not take (a server without a connection, a
// key refused): it is a batch operation from the start.

// groupTag marks a group's tag; the rest is its index in fgroups.
const groupTag = 1 << 62

// fastRec is one key's answer in a group (a hit's result is written
// straight into the caller's result).
type fastRec struct {
	group    int32 // index in fgroups
	got      bool
	status   memdx.Status
	datatype memdx.Datatype
	opaque   uint32
	value    []byte // a failure's body
	err      error  // the answer did not decode
}

// fastGroup is one server's share of a window of keys.
type fastGroup struct {
	pl       placed
	n        int32   // keys in the group
	keys     []int32 // batch key indexes, in the order sent (a get's index in the group)
	pend     conn.Pending
	done     bool
	answered bool
	err      error
	// tc, when not nil, is the text connection the group is read on;
	// text says it was one (tc is given back once read); fallback: the
	// server refused it, its unanswered keys are not grouped.
	tc       *conn.TextConn
	text     bool
	fallback bool
	// blk is the block the group's small values are copied into
	// (block), written by its connection's reader only.
	blk []byte
}

// Small values read in a group share blocks of valueBlock bytes, capped
// so that appending to one never writes into another: a block per few
// dozen hits instead of an allocation per hit. A value kept by the caller
// keeps its block alive, at most valueBlock bytes.
const (
	valueBlock    = 4 << 10
	maxBlockValue = 512
)

// block returns an empty slice with room for a value of n bytes, carved
// from the group's block when n is small but not 0; nil otherwise
// (decodeGetValue then makes one of its own).
func (g *fastGroup) block(n int) []byte {
	if n == 0 || n > maxBlockValue {
		return nil // an empty value needs no block, and keeps none alive
	}
	if cap(g.blk)-len(g.blk) < n {
		g.blk = make([]byte, 0, valueBlock)
	}
	l := len(g.blk)
	g.blk = g.blk[:l+n]
	return g.blk[l : l : l+n]
}

// groupGets reports whether GetMany on col may read by groups: a memcached
// client, the default collection, no Observer (whose attempts are per
// key), and a context and a client still open.
func (b *batch) groupGets(col *Collection) bool {
	c := b.c
	return c.memcached && col.isDefault && b.obs == nil && c.ctx.Err() == nil && b.ctx.Err() == nil
}

// getGroups reads keys by groups, a window of at most maxInFlight keys at
// a time, and sets res for the hits; every other key is added to b as an
// operation (add), to be judged or sent by run.
func (b *batch) getGroups(col *Collection, keys []string, p opParams, res []GetManyResult) {
	deadline := b.c.deadline(b.ctx, p.timeout, b.now) // each key's, as begin gives it
	b.fres = res
	if cap(b.frecs) < len(keys) {
		b.frecs = make([]fastRec, len(keys))
	}
	b.frecs = b.frecs[:len(keys)]
	for from := 0; from < len(keys); from += b.maxInFlight {
		to := min(from+b.maxInFlight, len(keys))
		b.getWindow(col, keys, from, to, deadline, p, res)
	}
}

// getWindow reads keys[from:to] by groups and settles them.
func (b *batch) getWindow(col *Collection, keys []string, from, to int, deadline time.Time, p opParams, res []GetManyResult) {
	c := b.c
	t := c.topo.Load()
	g0 := len(b.fgroups)
	for i := from; i < to; i++ {
		b.frecs[i] = fastRec{group: -1}
	}
	if t != nil && t.ketama != nil && !b.canceled {
		// Route: one group per server, on one of its connections.
		if cap(b.fserver) < len(t.servers) {
			b.fserver = make([]int32, len(t.servers))
		}
		srv := b.fserver[:len(t.servers)]
		for i := range srv {
			srv[i] = -1
		}
		b.fidx = b.fidx[:0]
		for i := from; i < to; i++ {
			if checkKey(keys[i]) != nil {
				continue
			}
			s := 0
			if len(t.servers) > 1 {
				s = t.ketama.Server(unsafe.Slice(unsafe.StringData(keys[i]), len(keys[i])))
			}
			if s < 0 || s >= len(t.servers) {
				continue
			}
			if srv[s] == -1 {
				srv[s] = -2
				if n := t.servers[s]; n != nil && n.downErr() == nil {
					if cn, _, err := n.pick(); err == nil && cn.Memcached() {
						var tc *conn.TextConn
						if c.textOK(cn) && n.writesInFlight() == 0 {
							tc = n.takeText()
						}
						srv[s] = int32(len(b.fgroups))
						b.fgroups = append(b.fgroups, fastGroup{pl: placed{t: t, n: n, cn: cn}, tc: tc, text: tc != nil})
					}
				}
			}
			if srv[s] >= 0 && b.fgroups[srv[s]].text && memdx.CheckTextKey(unsafe.Slice(unsafe.StringData(keys[i]), len(keys[i]))) != nil {
				continue // a get of its own, in binary
			}
			if srv[s] >= 0 {
				b.frecs[i].group = srv[s]
				b.fidx = append(b.fidx, int32(i))
			}
		}
		// Each group's keys, in key order, in one shared slice.
		groups := b.fgroups[g0:]
		for _, i := range b.fidx {
			groups[b.frecs[i].group-int32(g0)].n++
		}
		if cap(b.fgkeys) < len(b.fidx) {
			b.fgkeys = make([]int32, len(b.fidx))
		}
		off := 0
		for gi := range groups {
			n := int(groups[gi].n)
			groups[gi].keys = b.fgkeys[off : off : off+n]
			off += n
		}
		for _, i := range b.fidx {
			g := &groups[b.frecs[i].group-int32(g0)]
			g.keys = append(g.keys, i)
		}
		b.sendGroups(g0, keys, deadline)
		b.readTextGroups(g0, keys, deadline)
		b.waitGroups(g0)
	}
	// Settle: hits are done; every other key is an operation.
	for i := from; i < to; i++ {
		r := &b.frecs[i]
		if r.group >= 0 && r.got && r.status == memdx.StatusSuccess && r.err == nil {
			b.keys[i].state = bkGot // GetAnswer wrote its result
			continue
		}
		o, err := col.newOp("Get", kindGet, keys[i], memdx.NewGet(nil), p)
		b.add(i, o, err)
		b.keys[i].grouped = err == nil && r.group >= 0 && !b.fgroups[r.group].fallback
	}
}

// sendGroups starts the groups from g0 on, each as one text multi-get
// (SendGets: readTextGroups reads them) or one StartGets.
func (b *batch) sendGroups(g0 int, keys []string, deadline time.Time) {
	tmpl := memdx.Request{OpCode: memdx.OpGetKQ} // answers name their keys: GetAnswer checks them
	for gi := g0; gi < len(b.fgroups); gi++ {
		g := &b.fgroups[gi]
		if !b.c.clock.Now().Before(deadline) {
			b.textDone(g, false)
			g.done = true
			g.err = &conn.RequestError{Op: memdx.OpNoop, Addr: g.pl.cn.Addr(), Err: context.DeadlineExceeded}
			continue
		}
		if g.text && len(g.keys) == 0 {
			// Every key of its server was one text cannot carry.
			b.textDone(g, false)
			g.done, g.answered = true, true
			continue
		}
		b.groupKeys(g, keys)
		if g.text {
			err := g.tc.SendGets(b.realDeadline(deadline), b.fkeys)
			clear(b.fkeys)
			if err != nil {
				b.textFailed(g, err, 0)
			}
			continue
		}
		b.expectAdd(1)
		pend, err := g.pl.cn.StartGets(deadline, &tmpl, b.fkeys, b, b, groupTag|uint64(gi))
		clear(b.fkeys) // keep no key alive
		if err != nil {
			b.expectAdd(-1)
			g.done = true
			g.err = err
			continue
		}
		g.pend = pend
		base := pend.Opaque - uint32(len(g.keys))
		for j, i := range g.keys {
			b.frecs[i].opaque = base + uint32(j)
		}
	}
}

// groupKeys sets b.fkeys to g's keys.
func (b *batch) groupKeys(g *fastGroup, keys []string) {
	b.fkeys = b.fkeys[:0]
	for _, i := range g.keys {
		b.fkeys = append(b.fkeys, unsafe.Slice(unsafe.StringData(keys[i]), len(keys[i])))
	}
}

// realDeadline is deadline, read on the client's clock, on the system's:
// what a socket's deadline is set to.
func (b *batch) realDeadline(deadline time.Time) time.Time {
	return time.Now().Add(deadline.Sub(b.c.clock.Now()))
}

// readTextGroups reads the answers of the text groups from g0 on,
// writing each hit into the caller's result. Every multi-get was sent
// first, so the servers work meanwhile. The first group is read on this
// goroutine and any other on a goroutine of its own, joined here: read
// one after another, a silent server would hold back the reads of the
// others until the deadline had passed, and a read past its deadline
// fails even when the answer came in time.
func (b *batch) readTextGroups(g0 int, keys []string, deadline time.Time) {
	rd := b.realDeadline(deadline)
	first := -1
	var more []int
	for gi := g0; gi < len(b.fgroups); gi++ {
		if g := &b.fgroups[gi]; g.text && !g.done {
			if first < 0 {
				first = gi
			} else {
				more = append(more, gi)
			}
		}
	}
	if first < 0 {
		return
	}
	type read struct {
		hits int
		err  error
	}
	var reads []read
	var wg sync.WaitGroup
	if len(more) > 0 {
		reads = make([]read, len(more))
		wg.Add(len(more))
		for k, gi := range more {
			go func() {
				defer wg.Done()
				g := &b.fgroups[gi]
				fk := make([][]byte, len(g.keys))
				for j, i := range g.keys {
					fk[j] = unsafe.Slice(unsafe.StringData(keys[i]), len(keys[i]))
				}
				reads[k].hits, reads[k].err = b.readText(g, rd, fk)
			}()
		}
	}
	g := &b.fgroups[first]
	b.groupKeys(g, keys)
	hits, err := b.readText(g, rd, b.fkeys)
	b.textRead(g, hits, err)
	wg.Wait()
	for k, gi := range more {
		b.textRead(&b.fgroups[gi], reads[k].hits, reads[k].err)
	}
}

// readText reads text group g's answer to the multi-get of keys fk,
// writing each hit into its key's record and the caller's result, and
// returns how many answers it read. An answer that ends in an error line
// or malformed gives no hit at all: what came before the fault may be as
// foreign as the fault (a late answer to another multi-get, read as this
// one's), so its hits are taken back and the keys read again another way.
// It touches only g and its keys' entries, so groups may be read
// concurrently.
func (b *batch) readText(g *fastGroup, rd time.Time, fk [][]byte) (hits int, err error) {
	err = g.tc.ReadGets(b.ctx, rd, fk, func(j int, v *memdx.TextValue) {
		hits++
		r := &b.frecs[g.keys[j]]
		if r.got {
			return // a key asked twice, answered twice
		}
		r.got, r.status = true, memdx.StatusSuccess
		into := g.block(len(v.Value))
		if into == nil {
			into = make([]byte, 0, len(v.Value)) // never nil: an empty value is a value
		}
		b.fres[g.keys[j]].GetResult = GetResult{Value: append(into, v.Value...), Cas: v.Cas, Flags: v.Flags,
			transcoder: b.c.opts.Transcoder}
	})
	clear(fk) // keep no key alive
	if err != nil && hits > 0 && refusedText(err) {
		for _, i := range g.keys {
			b.frecs[i].got, b.frecs[i].status = false, 0
			b.fres[i].GetResult = GetResult{}
		}
		hits = 0
	}
	return hits, err
}

// refusedText reports whether a text read ended in an error line or an
// answer that is not one.
func refusedText(err error) bool {
	var te *memdx.TextError
	return errors.As(err, &te) || errors.Is(err, memdx.ErrMalformed)
}

// textRead ends text group g, read with err after hits answers.
func (b *batch) textRead(g *fastGroup, hits int, err error) {
	if err != nil {
		b.textFailed(g, err, hits)
		return
	}
	b.textDone(g, true)
	g.done, g.answered = true, true
}

// textFailed ends text group g with err, after hits answers. A refusal
// (an error line) or an answer that is not one gives its unanswered keys
// to the binary path and turns the server's text path off for a while; a
// multi-get not written, or answered by the connection's end with no hit
// before (an idle connection the server had closed), gives its keys to the
// binary path; any other failure (the deadline, the context, the
// connection) is the group's error, judged for each unanswered key as a
// binary group's.
func (b *batch) textFailed(g *fastGroup, err error, hits int) {
	b.textDone(g, false)
	g.done = true
	var re *conn.RequestError
	switch {
	case refusedText(err):
		g.pl.n.textRefused(err)
		g.fallback = true
		return
	case b.ctx.Err() == nil && (errors.As(err, &re) && !re.Written || hits == 0 && errors.Is(err, ErrConnectionClosed)):
		// Nothing was read (a refused key; the write failed, or the
		// answer was the connection's end): the keys go as binary
		// gets now. Gets change nothing, so sending them again is
		// safe. A connection the server closed while idle was dropped
		// when the batch took it (CheckIdle): one that ends at the
		// multi-get was closed by the server for it, which turns the
		// text path off for a while, so that a server closing every
		// text connection at its multi-get does not cost a new one per
		// batch.
		if errors.Is(err, ErrConnectionClosed) {
			g.pl.n.textRefused(err)
		}
		g.fallback = true
		return
	}
	if b.ctx.Err() != nil {
		b.canceled = true
	}
	g.err = err
}

// textDone gives g's text connection back; answered: its multi-get was
// answered.
func (b *batch) textDone(g *fastGroup, answered bool) {
	if g.tc != nil {
		g.pl.n.putText(g.tc, answered)
		g.tc = nil
	}
}

// waitGroups waits until every group from g0 on has ended; the batch's
// context ending cancels those still in flight.
func (b *batch) waitGroups(g0 int) {
	left := 0
	for gi := g0; gi < len(b.fgroups); gi++ {
		if !b.fgroups[gi].done {
			left++
		}
	}
	ctxDone := b.ctx.Done()
	for left > 0 {
		select {
		case <-b.kick:
			b.mu.Lock()
			ended := b.ended
			b.ended = b.spare[:0]
			b.mu.Unlock()
			for _, tag := range ended {
				g := &b.fgroups[tag&^groupTag]
				g.answered, g.err = g.pend.Result()
				g.pend, g.done = conn.Pending{}, true
				left--
			}
			b.spare = ended[:0]
		case <-ctxDone:
			ctxDone = nil
			b.canceled = true
			cause := b.ctx.Err()
			for gi := g0; gi < len(b.fgroups); gi++ {
				g := &b.fgroups[gi]
				if g.done {
					continue
				}
				// One that has ended already is collected as usual.
				if err, ended := g.pend.Cancel(cause); !ended {
					b.expectAdd(-1)
					g.err, g.pend, g.done = err, conn.Pending{}, true
					left--
				}
			}
		}
	}
}

// GetAnswer implements conn.GetSink: it records the answer to get j of
// group tag. It runs on the connection's reader, with its lock held. The
// gets are GETKQ: an answer that names another key than get j's (a server
// that mixed up its answers, or their opaques) is refused as a protocol
// violation, which closes the connection before the NOOP after the gets
// can settle the others as misses; the group then ends with the
// connection's error, and its keys without a hit are retried.
func (b *batch) GetAnswer(tag uint64, j int, p *memdx.Packet) (bool, error) {
	g := &b.fgroups[tag&^groupTag]
	i := g.keys[j]
	if key := b.fres[i].Key; (len(p.Key) > 0 || p.Status == memdx.StatusSuccess) && string(p.Key) != key {
		return false, foreignKey(p, key)
	}
	r := &b.frecs[i]
	if r.got {
		return false, nil
	}
	r.got, r.status = true, p.Status
	if p.Status == memdx.StatusSuccess {
		v, flags, dt, err := decodeGetValue(p, g.block(len(p.Value)))
		if err != nil {
			r.err = err
			return true, nil
		}
		// The result is the caller's until GetMany returns; the batch
		// reads it only after the group has ended.
		b.fres[i].GetResult = GetResult{Value: v, Cas: p.Cas, Flags: flags, Datatype: Datatype(dt),
			transcoder: b.c.opts.Transcoder}
		return true, nil
	}
	r.datatype = p.Datatype
	r.value = append([]byte(nil), p.Value...)
	return true, nil
}

// judgeGrouped judges the first attempt of key i, read in a group without
// a hit, as the batch judges any attempt's outcome: a failure status as
// answered, a miss as settled by the NOOP, a group that ended without its
// NOOP's answer with the group's error.
func (b *batch) judgeGrouped(i int) {
	k := &b.keys[i]
	r := &b.frecs[i]
	g := &b.fgroups[r.group]
	o := k.o
	o.node = g.pl.n
	o.prepare(g.pl.cn, 0, 0)
	op := memdx.OpGetKQ
	if g.text {
		op = memdx.OpGet // one of a text multi-get's keys
	}
	o.req.OpCode = op
	o.opaque = r.opaque
	k.pl, k.attempt, k.state = g.pl, 1, bkInFlight
	b.inflight++
	switch {
	case r.got && r.err != nil:
		o.status = r.status
		b.judge(i, true, r.err)
	case r.got:
		pkt := memdx.Packet{Magic: memdx.MagicRes, OpCode: memdx.OpGetKQ, Status: r.status,
			Datatype: r.datatype, Opaque: r.opaque, Value: r.value}
		r.value = nil
		if err := o.handle(&pkt); err != nil {
			b.judge(i, true, err)
			return
		}
		b.judge(i, true, nil)
	case g.answered:
		b.judge(i, false, nil)
	default:
		err := g.err
		var re *conn.RequestError
		if errors.As(err, &re) {
			// The group's error is its NOOP's: this get's names the get.
			e := *re
			e.Op, e.Opaque = op, r.opaque
			err = &e
		}
		b.judge(i, false, err)
	}
}
