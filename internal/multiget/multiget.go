// Package multiget reads a memcached GetMany's keys in groups: each
// server's share of a window of keys as one request, read by a reader: a
// text multi-get on one of the server's text connections (text.go), or its
// quiet gets and a NOOP as one conn.StartGets on the server's binary
// connection (quiet.go). The caller (client's GetMany) routes the keys
// into groups (Route), reads them (Read), and settles each key from its
// record: a hit is done; every other key (a miss, a failure status, a
// group that ended without its answer) becomes an operation of the batch
// whose first attempt ended that way, judged by the client's usual steps.
// A key no group took (a key refused, one text cannot carry, a server
// without a connection), or whose group the reader gave back (Fallback:
// the server refused text), is an operation from the start.
package multiget

import (
	"context"
	"errors"
	"time"
	"unsafe"

	"github.com/kvwire/kvwire/conn"
	"github.com/kvwire/kvwire/internal/batch"
	"github.com/kvwire/kvwire/internal/cluster"
	"github.com/kvwire/kvwire/memdx"
	"github.com/kvwire/kvwire/retry"
)

// reader reads the groups of a window that Route gave it and writes each
// key's answer into its record and each group's outcome into the group.
type reader interface {
	// send starts group g's request: keys are its keys' bytes, in the
	// group's order, valid only during the call; deadline is every key's.
	send(w *Window, g *Group, keys [][]byte, deadline time.Time)
	// await ends every group sent: each has its answers, or its error.
	await(w *Window, deadline time.Time)
	// takes reports whether the reader can carry key.
	takes(key []byte) bool
	// opcode is what a key's first attempt counts as in its error.
	opcode() memdx.OpCode
}

// Record is one key's answer in a group.
type Record struct {
	Group    int32 // its group's index in Window.Groups; -1: none
	Got      bool  // an answer came
	Status   memdx.Status
	Datatype memdx.Datatype // without Snappy
	Opaque   uint32         // its get's, in a quiet group
	// Value is a hit's value (its reader's own copy, from a block the
	// group's small values share) or a failure's body.
	Value []byte
	Cas   uint64
	Flags uint32
	Err   error // the answer did not decode
}

// Hit reports whether the record holds a hit.
func (r *Record) Hit() bool {
	return r.Group >= 0 && r.Got && r.Status == memdx.StatusSuccess && r.Err == nil
}

// Group is one server's share of a window of keys.
type Group struct {
	Node *cluster.Node
	Conn *conn.Conn // the server's binary connection
	Topo *cluster.Topology
	// Keys are the keys' indexes, in the order sent (a get's index in the
	// group), until the next Route, which reuses their array.
	Keys []int32
	// The outcome: Done, with the request Answered or Err; Fallback: the
	// reader gave the group back (its unanswered keys are not grouped).
	Done     bool
	Answered bool
	Fallback bool
	Err      error

	rd   reader
	slot int32 // the group's place in its reader's groups
	n    int32 // keys in the group
	// blk is the block the group's small values are copied into
	// (block), written by its reader only.
	blk []byte
}

// Opcode is what a key's first attempt in g counts as in its error (the
// request a single Get of it would have sent, or a quiet get).
func (g *Group) Opcode() memdx.OpCode { return g.rd.opcode() }

func (g *Group) end(answered bool, err error) { g.Done, g.Answered, g.Err = true, answered, err }

// deadlinePassed ends g, not sent: its keys' deadline has passed.
func (g *Group) deadlinePassed() {
	g.end(false, &conn.RequestError{Op: memdx.OpNoop, Addr: g.Conn.Addr(), Err: context.DeadlineExceeded})
}

// FirstAttempt is how key i's first attempt (its get in its group, sent
// as op) ended when it had no hit: answered with a failure status (its
// record says which; err: the answer did not decode), settled as a miss
// by the group's end (answered false, no error), or with the group's
// error, which names the get (its opcode and opaque) rather than the
// group's request.
func (w *Window) FirstAttempt(i int) (op memdx.OpCode, answered bool, err error) {
	r := &w.Recs[i]
	g := &w.Groups[r.Group]
	op = g.Opcode()
	switch {
	case r.Got:
		return op, true, r.Err
	case g.Answered:
		return op, false, nil
	}
	var re *conn.RequestError
	if errors.As(g.Err, &re) {
		e := *re
		e.Op, e.Opaque = op, r.Opaque
		return op, false, &e
	}
	return op, false, g.Err
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
// from the group's block when n is small but not 0; nil otherwise (the
// value gets a slice of its own).
func (g *Group) block(n int) []byte {
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

// Window is a GetMany's group reads: a record per key and the groups of
// every window read so far. It is reused (Reset), with its buffers.
type Window struct {
	Recs   []Record
	Groups []Group
	// Canceled: the context ended while the groups were read; no more
	// should be sent.
	Canceled bool

	ctx    context.Context
	clock  retry.Clock
	keys   []string // the GetMany's keys
	server []int32  // a window's group per server index (-1: none yet, -2: none)
	idx    []int32  // the keys grouped
	gkeys  []int32  // every group's keys, one slice
	bkeys  [][]byte
	quiet  quietGets
	text   textGets

	// ends is what the quiet groups' conn.Notifier was told: the
	// requests that ended and those still expected.
	ends batch.Ends
}

// maxPooled bounds the records a Window keeps for reuse.
const maxPooled = 4096

// Start prepares w for a GetMany of keys under ctx, timed on clock.
func (w *Window) Start(ctx context.Context, clock retry.Clock, keys []string) {
	w.ctx, w.clock, w.keys = ctx, clock, keys
	if cap(w.Recs) < len(keys) {
		w.Recs = make([]Record, len(keys))
	}
	w.Recs = w.Recs[:len(keys)]
	for i := range w.Recs {
		w.Recs[i] = Record{Group: -1}
	}
	w.ends.Init()
}

// Reset drops what a reused Window must not keep.
func (w *Window) Reset() {
	clear(w.Recs)
	clear(w.Groups)
	clear(w.bkeys)
	if cap(w.Recs) > maxPooled {
		w.Recs = nil
	}
	w.Recs, w.Groups, w.idx, w.keys, w.ctx, w.Canceled = w.Recs[:0], w.Groups[:0], w.idx[:0], nil, nil, false
	w.ends.Reset()
	w.quiet.reset()
	w.text.reset()
}

// Route makes keys[from:to] into groups: one per server of t (a ketama
// topology), on one of its connections; valid refuses keys no request may
// carry. A server's group is read by a text multi-get when text allows it
// for its connection, no write to the server is unanswered on its
// connections (a read on the text connection could overtake it: reading
// back an ambiguous write must see its outcome) and it has an idle text
// connection; by quiet gets otherwise. Each group's keys are in key
// order, in one shared slice.
func (w *Window) Route(t *cluster.Topology, from, to int, valid func(string) bool, text func(*conn.Conn) bool) {
	g0 := len(w.Groups)
	if cap(w.server) < t.NumServers() {
		w.server = make([]int32, t.NumServers())
	}
	srv := w.server[:t.NumServers()]
	for i := range srv {
		srv[i] = -1
	}
	w.idx = w.idx[:0]
	for i := from; i < to; i++ {
		if !valid(w.keys[i]) {
			continue
		}
		key := bytesOf(w.keys[i])
		s, n := t.KetamaServer(key)
		if s < 0 || s >= len(srv) {
			continue
		}
		if srv[s] == -1 {
			srv[s] = -2
			if n != nil && n.Down() == nil {
				if cn, _, err := n.Pick(); err == nil && cn.Memcached() {
					srv[s] = int32(len(w.Groups))
					w.Groups = append(w.Groups, Group{Node: n, Conn: cn, Topo: t})
					w.pickReader(srv[s], text(cn))
				}
			}
		}
		if srv[s] >= 0 && w.Groups[srv[s]].rd.takes(key) {
			w.Recs[i].Group = srv[s]
			w.idx = append(w.idx, int32(i))
		}
	}
	groups := w.Groups[g0:]
	for _, i := range w.idx {
		groups[w.Recs[i].Group-int32(g0)].n++
	}
	if cap(w.gkeys) < len(w.idx) {
		w.gkeys = make([]int32, len(w.idx))
	}
	off := 0
	for gi := range groups {
		n := int(groups[gi].n)
		groups[gi].Keys = w.gkeys[off : off : off+n]
		off += n
	}
	for _, i := range w.idx {
		g := &groups[w.Recs[i].Group-int32(g0)]
		g.Keys = append(g.Keys, i)
	}
}

// pickReader gives group gi to its reader (see Route).
func (w *Window) pickReader(gi int32, text bool) {
	g := &w.Groups[gi]
	if text && g.Node.WritesInFlight() == 0 {
		if tc := g.Node.TakeText(); tc != nil {
			g.rd, g.slot = &w.text, w.text.add(gi, tc)
			return
		}
	}
	g.rd, g.slot = &w.quiet, w.quiet.add(gi)
}

// Read sends every group from g0 on, then has each reader await its own
// (the servers work meanwhile), with every key's deadline.
func (w *Window) Read(g0 int, deadline time.Time) {
	for gi := g0; gi < len(w.Groups); gi++ {
		g := &w.Groups[gi]
		w.bkeys = w.bkeys[:0]
		for _, i := range g.Keys {
			w.bkeys = append(w.bkeys, bytesOf(w.keys[i]))
		}
		g.rd.send(w, g, w.bkeys, deadline)
		clear(w.bkeys) // keep no key alive
	}
	for _, rd := range [...]reader{&w.text, &w.quiet} {
		rd.await(w, deadline)
	}
}

// realDeadline is deadline, read on the client's clock, on the system's:
// what a socket's deadline is set to.
func (w *Window) realDeadline(deadline time.Time) time.Time {
	return time.Now().Add(deadline.Sub(w.clock.Now()))
}

// RequestEnded implements conn.Notifier for the quiet groups: it records
// the tag, and asks to be woken for a failure or for the last request.
func (w *Window) RequestEnded(tag uint64, answered bool, err error) bool {
	return w.ends.Ended(tag, err == nil)
}

// Wake implements conn.Notifier (a wake left over for a reused Window
// makes its next await look once at an empty list).
func (w *Window) Wake() { w.ends.Wake() }

// collect takes the tags of the requests that ended since the last call.
func (w *Window) collect() []uint64 {
	ended := w.ends.TakeEnded()
	w.ends.GiveBack(ended)
	return ended
}

// bytesOf returns s's bytes without copying; they are never written.
func bytesOf(s string) []byte { return unsafe.Slice(unsafe.StringData(s), len(s)) }
