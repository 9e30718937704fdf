package multiget

import (
	"time"

	"github.com/kvwire/kvwire/conn"
	"github.com/kvwire/kvwire/memdx"
)

// quietGets reads a group as its quiet gets and the NOOP that settles them,
// one conn.StartGets on the server's binary connection, behind any write
// on it: the connection's reader writes each answer into the key's record
// (GetAnswer) while the group is live; a get not answered when the NOOP is
// is a miss.
type quietGets struct {
	// The window's groups (their indexes in Window.Groups) and the request
	// of each; a group's tag is its slot here.
	groups []int32
	pends  []conn.Pending
}

func (q *quietGets) reset() {
	clear(q.groups)
	clear(q.pends)
	q.groups, q.pends = q.groups[:0], q.pends[:0]
}

// add gives the reader group gi, and returns its slot.
func (q *quietGets) add(gi int32) int32 {
	q.groups = append(q.groups, gi)
	q.pends = append(q.pends, conn.Pending{})
	return int32(len(q.groups) - 1)
}

func (q *quietGets) takes([]byte) bool    { return true }
func (q *quietGets) opcode() memdx.OpCode { return memdx.OpGetKQ }

func (q *quietGets) send(w *Window, g *Group, keys [][]byte, deadline time.Time) {
	if !w.clock.Now().Before(deadline) {
		g.deadlinePassed()
		return
	}
	tmpl := memdx.Request{OpCode: memdx.OpGetKQ} // answers name their keys: GetAnswer checks them
	w.ends.ExpectAdd(1)
	pend, err := g.Conn.StartGets(deadline, &tmpl, keys, (*quietSink)(w), w, uint64(g.slot), nil)
	if err != nil {
		w.ends.ExpectAdd(-1)
		g.end(false, err)
		return
	}
	q.pends[g.slot] = pend
	base := pend.Opaque - uint32(len(g.Keys))
	for j, i := range g.Keys {
		w.Recs[i].Opaque = base + uint32(j)
	}
}

// await waits until every group has ended; the window's context ending
// cancels those still in flight.
func (q *quietGets) await(w *Window, _ time.Time) {
	defer q.reset()
	left := 0
	for _, gi := range q.groups {
		if !w.Groups[gi].Done {
			left++
		}
	}
	ctxDone := w.ctx.Done()
	for left > 0 {
		select {
		case <-w.ends.Kick():
			for _, tag := range w.collect() {
				answered, err := q.pends[tag].Result()
				w.Groups[q.groups[tag]].end(answered, err)
				q.pends[tag] = conn.Pending{}
				left--
			}
		case <-ctxDone:
			ctxDone = nil
			w.Canceled = true
			cause := w.ctx.Err()
			for k, gi := range q.groups {
				g := &w.Groups[gi]
				if g.Done {
					continue
				}
				// One that has ended already is collected as usual.
				if err, ended := q.pends[k].Cancel(cause); !ended {
					w.ends.ExpectAdd(-1)
					g.end(false, err)
					q.pends[k] = conn.Pending{}
					left--
				}
			}
		}
	}
}

// quietSink is the Window as the quiet groups' conn.GetSink.
type quietSink Window

// GetAnswer implements conn.GetSink: it records the answer to get j of
// the group of tag. It runs on the connection's reader, with its lock held.
// The gets are GETKQ: an answer that names another key than get j's (a
// server that mixed up its answers, or their opaques) is refused as a
// protocol violation, which closes the connection before the NOOP after
// the gets can settle the others as misses; the group then ends with the
// connection's error, and its keys without a hit are retried.
func (s *quietSink) GetAnswer(tag uint64, j int, p *memdx.Packet) (bool, error) {
	w := (*Window)(s)
	g := &w.Groups[w.quiet.groups[tag]]
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
