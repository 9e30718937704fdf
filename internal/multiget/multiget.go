// Package multiget reads a memcached GetMany's keys in groups: each
// server's share of a window of keys as one request, read by a reader: a
// text multi-get on one of the server's text connections (text.go), or its
// quiet gets and a NOOP as one conn.StartGets on the server's binary
// connection (quiet.go). The caller (client's GetMany) has the keys read
// (Read): each window is routed into groups and sent, the next window's
// requests going out before the last one's answers are read, and the
// caller settles each window's keys from their records once its groups
// have ended: a hit is done; every other key (a miss, a failure status, a
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

// reader reads the groups that route gave it and writes each key's answer
// into its record and each group's outcome into the group.
type reader interface {
	// send starts the request of group gi (its index in Window.Groups):
	// keys are its keys' bytes, in the group's order, valid only during
	// the call; deadline is every key's.
	send(w *Window, gi int, keys [][]byte, deadline time.Time)
	// await ends every group of its own among the groups [g0, g1) (one
	// window's, all sent): each has its answers, or its error.
	await(w *Window, g0, g1 int, deadline time.Time)
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
	// group), until the route after next, which reuses their array.
	Keys []int32
	// The outcome: Done, with the request Answered or Err; Fallback: the
	// reader gave the group back (its unanswered keys are not grouped).
	Done     bool
	Answered bool
	Fallback bool
	Err      error

	rd reader
	w  *Window // the reads it is one of (the quiet sink's keys and records)
	n  int32   // keys in the group
	// A text group's connection (nil once given back); a quiet group's
	// request.
	tc   *conn.TextConn
	pend conn.Pending
	// origin is a quiet group's request's conn.Origin, unchanged while
	// it is in flight (the group does not move then).
	origin conn.Origin
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
	Recs []Record
	// Groups are every window's groups, in the order routed. A group does
	// not move while it is in flight: its connection's reader writes into
	// it (Read grows the slice only when no group is).
	Groups []Group
	// Canceled: the context ended while the groups were read; no more
	// are sent.
	Canceled bool
	// Timeout is each key's timeout, as the orphan report shows a quiet
	// group's (0: none said); set after Start.
	Timeout time.Duration

	ctx    context.Context
	clock  retry.Clock
	keys   []string // the GetMany's keys
	server []int32  // a window's group per server index (-1: none yet, -2: none)
	idx    []int32  // the keys grouped
	// gkeys are the groups' keys, one slice per window, the two windows
	// in flight alternating (lane: the next route's).
	gkeys [2][]int32
	lane  int
	bkeys [][]byte
	quiet quietGets
	text  textGets

	// ends is what the quiet groups' conn.Notifier was told: the
	// requests that ended and those still expected.
	ends batch.Ends
}

// OperationName is the name a group's requests carry for the orphan
// report (conn.Origin): RFC 0067's name of a get.
const OperationName = "get"

// maxPooled bounds the records a Window keeps for reuse, and
// maxPooledGroups its groups.
const (
	maxPooled       = 4096
	maxPooledGroups = 256
)

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
	if cap(w.Groups) > maxPooledGroups {
		w.Groups = nil
	}
	w.Recs, w.Groups, w.idx, w.keys, w.ctx, w.Canceled, w.Timeout = w.Recs[:0], w.Groups[:0], w.idx[:0], nil, nil, false, 0
	w.ends.Reset()
	w.text.reset()
}

// Windows: a GetMany's keys are read in windows of maxInFlight keys (the
// batch's in-flight bound), each window one request per server. A GetMany
// of more has two windows in flight: the next window's requests are sent
// before the last one's answers are read, so that the servers work on one
// while the client reads the other, and a round trip carries two windows.
// So a GetMany's group reads have at most 2*maxInFlight keys in flight:
// the bound that keeps a batch's own gets from overloading a connection
// (MaxPending) counts requests, and a window is one request per server.
// Windows of half the bound, two in flight, would keep maxInFlight true
// but carry no more keys per round trip than one window at a time. (A text
// connection carries one multi-get at a time: the window in flight beside
// it takes another of the server's idle ones, or goes as quiet gets; quiet
// gets follow each other on the server's connection, whose reader and
// writer are goroutines of their own.)
func windows(n, maxInFlight int) (size, depth int) {
	size = max(1, maxInFlight)
	if n <= size {
		return size, 1
	}
	return size, 2
}

// span is a window: its keys [from, to) and its groups [g0, g1).
type span struct{ from, to, g0, g1 int }

// Read reads the keys of w's GetMany (Start) by groups, a window at a time
// (windows), each routed on the topology top returns then (a key of a
// window with no ketama topology, or sent after the context ended, is in
// no group), with every key's deadline; valid and text are route's. Once
// a window's groups have all ended, settled is called with its keys: their
// records hold their answers, and their groups their outcomes. Every group
// sent has ended when Read returns. A panic on the caller's goroutine
// meanwhile (settled, or the caller's Logger or context, which Read calls)
// unwinds Read with every text connection its groups held closed and given
// back (dropText).
func (w *Window) Read(top func() *cluster.Topology, maxInFlight int, valid func(string) bool,
	text func(*conn.Conn) bool, deadline time.Time, settled func(from, to int)) {
	returned := false
	defer func() {
		if !returned {
			w.dropText()
		}
	}()
	size, depth := windows(len(w.keys), maxInFlight)
	var ring [2]span // the windows in flight, oldest first from head
	head, n := 0, 0
	for from := 0; from < len(w.keys) || n > 0; {
		if from < len(w.keys) && n < depth {
			// A context that ended is seen here too, not only by an await
			// (one whose groups had all ended looks at no context): no
			// window is sent after it.
			if !w.Canceled && w.ctx.Err() != nil {
				w.Canceled = true
			}
			t := top()
			routed := t != nil && t.Ketama() && !w.Canceled
			// The window's groups are appended to Groups: while others
			// are in flight, only into room it has (a topology grown
			// since the last window can need more: it waits for them).
			if !routed || n == 0 || cap(w.Groups)-len(w.Groups) >= t.NumServers() {
				to := min(from+size, len(w.keys))
				s := span{from: from, to: to, g0: len(w.Groups)}
				if routed {
					if n == 0 {
						w.reserve((len(w.keys) - from + size - 1) / size * t.NumServers())
					}
					w.route(t, from, to, valid, text)
					w.send(s.g0, deadline)
				}
				s.g1 = len(w.Groups)
				ring[(head+n)%2] = s
				n++
				from = to
				continue
			}
		}
		s := ring[head]
		head, n = (head+1)%2, n-1
		w.await(s.g0, s.g1, deadline)
		settled(s.from, s.to)
	}
	returned = true
}

// dropText closes and gives back the text connections w's groups still
// hold (Read unwound by a panic): a multi-get sent on one may still be
// answered, so none is kept for another batch. No read of them is running
// (textGets.await waits for its own).
func (w *Window) dropText() {
	for gi := range w.Groups {
		if g := &w.Groups[gi]; g.tc != nil {
			g.Node.DropText(g.tc)
			g.tc = nil
		}
	}
}

// reserve makes room in Groups for n more groups. Called only when no
// group is in flight: it may move them.
func (w *Window) reserve(n int) {
	if cap(w.Groups)-len(w.Groups) < n {
		w.Groups = append(make([]Group, 0, len(w.Groups)+n), w.Groups...)
	}
}

// route makes keys[from:to] into groups: one per server of t (a ketama
// topology), on one of its connections; valid refuses keys no request may
// carry. A server's group is read by a text multi-get when text allows it
// for its connection, no write to the server is unanswered on its
// connections (a read on the text connection could overtake it: reading
// back an ambiguous write must see its outcome) and it has an idle text
// connection; by quiet gets otherwise. Each group's keys are in key
// order, in one slice the window's groups share, which the route after
// next reuses: at most two windows are in flight. Groups must have room
// for a group per server of t if a group is in flight.
func (w *Window) route(t *cluster.Topology, from, to int, valid func(string) bool, text func(*conn.Conn) bool) {
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
					w.Groups = append(w.Groups, Group{Node: n, Conn: cn, Topo: t, w: w})
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
	gkeys := w.gkeys[w.lane]
	if cap(gkeys) < len(w.idx) {
		gkeys = make([]int32, len(w.idx))
		w.gkeys[w.lane] = gkeys
	}
	w.lane ^= 1
	off := 0
	for gi := range groups {
		n := int(groups[gi].n)
		groups[gi].Keys = gkeys[off : off : off+n]
		off += n
	}
	for _, i := range w.idx {
		g := &groups[w.Recs[i].Group-int32(g0)]
		g.Keys = append(g.Keys, i)
	}
}

// pickReader gives group gi to its reader (see route).
func (w *Window) pickReader(gi int32, text bool) {
	g := &w.Groups[gi]
	if text && g.Node.WritesInFlight() == 0 {
		if tc := g.Node.TakeText(); tc != nil {
			g.rd, g.tc = &w.text, tc
			return
		}
	}
	g.rd = &w.quiet
}

// send sends every group from g0 on (a window's, just routed), with every
// key's deadline.
func (w *Window) send(g0 int, deadline time.Time) {
	for gi := g0; gi < len(w.Groups); gi++ {
		g := &w.Groups[gi]
		w.bkeys = w.bkeys[:0]
		for _, i := range g.Keys {
			w.bkeys = append(w.bkeys, bytesOf(w.keys[i]))
		}
		g.rd.send(w, gi, w.bkeys, deadline)
		clear(w.bkeys) // keep no key alive
	}
}

// await has each reader end its own of the groups [g0, g1), a window's,
// all sent (the servers work on them, and on a window sent after them,
// meanwhile).
func (w *Window) await(g0, g1 int, deadline time.Time) {
	for _, rd := range [...]reader{&w.text, &w.quiet} {
		rd.await(w, g0, g1, deadline)
	}
}

// realDeadline is deadline, read on the client's clock, on the system's:
// what a socket's deadline is set to.
func (w *Window) realDeadline(deadline time.Time) time.Time {
	return time.Now().Add(deadline.Sub(w.clock.Now()))
}

// RequestEnded implements conn.Notifier for the quiet groups (a group's
// tag is its index in Groups): it records the tag, and asks to be woken
// for a failure, for the last request, or for any while a window's
// groups are awaited with another's in flight (quietGets.await).
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
