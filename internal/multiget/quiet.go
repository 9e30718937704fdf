package multiget

import (
	"time"

	"github.com/kvwire/kvwire/conn"
	"github.com/kvwire/kvwire/memdx"
)

// quietGets reads a group as its quiet gets and the NOOP that settles them,
// one conn.StartGets on the server's binary connection, behind any write
// on it (a window's group behind the window's before it, whose answers
// may still be coming): the connection's reader writes each answer into
// the key's record (GetAnswer) while the group is live; a get not answered
// when the NOOP is is a miss. A group's request is its Pending, its tag
// its index in Window.Groups. quietGets keeps no state of its own.
type quietGets struct{}

func (quietGets) takes([]byte) bool    { return true }
func (quietGets) opcode() memdx.OpCode { return memdx.OpGetKQ }

func (*quietGets) send(w *Window, gi int, keys [][]byte, deadline time.Time) {
	g := &w.Groups[gi]
	now := w.clock.Now()
	if !now.Before(deadline) {
		g.deadlinePassed()
		return
	}
	tmpl := memdx.Request{OpCode: memdx.OpGetKQ} // answers name their keys: GetAnswer checks them
	w.ends.ExpectAdd(1)
	// The group's gets are the GetMany's: should its NOOP be answered
	// after the group was abandoned, the orphan report names them (not the
	// NOOP, "ping") and times the answer from now.
	g.origin = conn.Origin{Operation: OperationName, Sent: now, Timeout: w.Timeout}
	pend, err := g.Conn.StartGets(deadline, &tmpl, keys, (*quietSink)(g), w, uint64(gi), &g.origin)
	if err != nil {
		w.ends.ExpectAdd(-1)
		g.end(false, err)
		return
	}
	g.pend = pend
	base := pend.Opaque - uint32(len(g.Keys))
	for j, i := range g.Keys {
		w.Recs[i].Opaque = base + uint32(j)
	}
}

// await waits until every quiet group of [g0, g1) has ended, ending too
// any group of the window in flight after them whose end it collects; the
// window's context ending cancels those of [g0, g1) still in flight.
func (*quietGets) await(w *Window, g0, g1 int, _ time.Time) {
	groups := w.Groups[g0:g1]
	left := 0
	for k := range groups {
		if g := &groups[k]; isQuiet(g) && !g.Done {
			left++
		}
	}
	ctxDone := w.ctx.Done()
	// Ends wake the goroutine only for the last request expected (or a
	// failure): with the next window's groups in flight, this window's
	// clean ends would stay uncollected until theirs. Then any end wakes.
	later := g1 < len(w.Groups)
	for left > 0 {
		if later {
			w.ends.AwaitRoom()
		}
		select {
		case <-w.ends.Kick():
			for _, tag := range w.collect() {
				g := &w.Groups[tag]
				answered, err := g.pend.Result()
				g.end(answered, err)
				g.pend = conn.Pending{}
				if int(tag) >= g0 && int(tag) < g1 {
					left--
				}
			}
		case <-ctxDone:
			ctxDone = nil
			w.Canceled = true
			cause := w.ctx.Err()
			for k := range groups {
				g := &groups[k]
				if !isQuiet(g) || g.Done {
					continue
				}
				// One that has ended already is collected as usual.
				if err, ended := g.pend.Cancel(cause); !ended {
					w.ends.ExpectAdd(-1)
					g.end(false, err)
					g.pend = conn.Pending{}
					left--
				}
			}
		}
	}
}

func isQuiet(g *Group) bool {
	_, ok := g.rd.(*quietGets)
	return ok
}

// quietSink is a quiet group as its conn.GetSink.
type quietSink Group

// GetAnswer implements conn.GetSink: it records the answer to get j of the
// group. It runs on the connection's reader, with its lock held, while the
// group's window is sent or awaited and the next one routed: it touches
// only the group (which does not move while in flight) and its keys'
// records. The gets are GETKQ: an answer that names another key than get
// j's (a server that mixed up its answers, or their opaques) is refused as
// a protocol violation, which closes the connection before the NOOP after
// the gets can settle the others as misses; the group then ends with the
// connection's error, and its keys without a hit are retried.
func (s *quietSink) GetAnswer(_ uint64, j int, p *memdx.Packet) (bool, error) {
	g := (*Group)(s)
	w := g.w
	i := g.Keys[j]
	if key := w.keys[i]; (len(p.Key) > 0 || p.Status == memdx.StatusSuccess) && string(p.Key) != key {
		return false, memdx.ForeignKey(p, key)
	}
	r := &w.Recs[i]
	if r.Got {
		return false, nil
	}
	r.Got, r.Status, r.Cas = true, p.Status, p.Cas
	if p.Status == memdx.StatusSuccess {
		// The caller reads the record only after the group has ended.
		r.Value, r.Flags, r.Datatype, r.Err = memdx.CopyGetValue(p, g.block(len(p.Value)))
		return true, nil
	}
	r.Datatype = p.Datatype
	r.Value = append([]byte(nil), p.Value...)
	return true, nil
}
