package multiget

import (
	"errors"
	"sync"
	"time"

	"github.com/kvwire/kvwire/conn"
	"github.com/kvwire/kvwire/internal/kverr"
	"github.com/kvwire/kvwire/memdx"
)

// textGets reads a group as one text multi-get ("gets k1 k2 ...") on an
// idle text connection of the server's (internal/cluster's text.go),
// written by the caller's goroutine and read by it: every group's
// multi-get of a window is sent before any is read (and the next window's
// before this one's are read: each on a text connection of its own, as a
// TextConn carries one multi-get at a time), the first group's answer is
// read on the caller's goroutine and every other on a goroutine of its
// own, so that a silent server holds back no other's read past the
// deadline (a read past its deadline fails even when the answer came in
// time). A group that fails the way a quiet one can (its deadline, its
// context, its connection) ends with that error; one the server refuses
// (an error line, an answer that is not one) falls back: its unanswered
// keys are sent as binary gets, and the server's text path is turned off
// for a while. A group's text connection is its tc, nil once given back;
// textGets keeps only await's scratch.
type textGets struct {
	// Scratch of await: the groups to read and their outcomes.
	live  []*Group
	reads []textRead
}

// textRead is what reading a group's answer gave.
type textRead struct {
	hits int
	err  error
}

func (x *textGets) reset() {
	clear(x.live)
	clear(x.reads)
	x.live, x.reads = x.live[:0], x.reads[:0]
}

// takes refuses a key with a space or a control character: text cannot
// carry it (it goes as a get of its own, in binary).
func (x *textGets) takes(key []byte) bool { return memdx.CheckTextKey(key) == nil }

// opcode: a key of a text multi-get counts as the GET a single Get sends.
func (x *textGets) opcode() memdx.OpCode { return memdx.OpGet }

func (x *textGets) send(w *Window, gi int, keys [][]byte, deadline time.Time) {
	g := &w.Groups[gi]
	switch {
	case !w.clock.Now().Before(deadline):
		x.done(g, false)
		g.deadlinePassed()
	case len(keys) == 0:
		// Every key of its server was one text cannot carry.
		x.done(g, false)
		g.end(true, nil)
	default:
		if err := g.tc.SendGets(w.realDeadline(deadline), keys); err != nil {
			x.failed(w, g, err, 0)
		}
	}
}

// await reads the answers of the text groups of [g0, g1), all sent, each
// hit into its key's record.
func (x *textGets) await(w *Window, g0, g1 int, deadline time.Time) {
	defer x.reset()
	rd := w.realDeadline(deadline)
	live := x.live[:0]
	for gi := g0; gi < g1; gi++ {
		if g := &w.Groups[gi]; g.rd == reader(x) && !g.Done {
			live = append(live, g)
		}
	}
	if len(live) == 0 {
		return
	}
	x.live = live
	reads := append(x.reads[:0], make([]textRead, len(live))...)
	x.reads = reads
	var wg sync.WaitGroup
	wg.Add(len(live) - 1)
	for k, g := range live[1:] {
		go func() {
			defer wg.Done()
			reads[k+1].hits, reads[k+1].err = x.read(w, g, rd, make([][]byte, 0, len(g.Keys)))
		}()
	}
	read := false
	defer func() {
		if !read {
			// A panic unwinds the read of live[0]: the others' reads
			// end with their connections, which Read then drops.
			for _, g := range live[1:] {
				_ = g.tc.Close()
			}
			wg.Wait()
		}
	}()
	reads[0].hits, reads[0].err = x.read(w, live[0], rd, w.bkeys[:0])
	read = true
	wg.Wait()
	for k, g := range live {
		if reads[k].err != nil {
			x.failed(w, g, reads[k].err, reads[k].hits)
			continue
		}
		x.done(g, true)
		g.end(true, nil)
	}
}

// read reads group g's answer, writing each hit into its key's record, and
// returns how many answers it read. An answer that ends in an error line
// or malformed gives no hit at all: what came before the fault may be as
// foreign as the fault (a late answer to another multi-get, read as this
// one's), so its hits are taken back and the keys read again another way.
// fk is scratch for the group's keys' bytes. It touches only g and its
// keys' records, so groups may be read concurrently.
func (x *textGets) read(w *Window, g *Group, rd time.Time, fk [][]byte) (hits int, err error) {
	for _, i := range g.Keys {
		fk = append(fk, bytesOf(w.keys[i]))
	}
	err = g.tc.ReadGets(w.ctx, rd, fk, func(j int, v *memdx.TextValue) {
		hits++
		r := &w.Recs[g.Keys[j]]
		if r.Got {
			return // a key asked twice, answered twice
		}
		into := g.block(len(v.Value))
		if into == nil {
			into = make([]byte, 0, len(v.Value)) // never nil: an empty value is a value
		}
		r.Got, r.Status, r.Value, r.Cas, r.Flags = true, memdx.StatusSuccess, append(into, v.Value...), v.Cas, v.Flags
	})
	clear(fk) // keep no key alive
	if err != nil && hits > 0 && refusedText(err) {
		for _, i := range g.Keys {
			w.Recs[i].Got, w.Recs[i].Status, w.Recs[i].Value = false, 0, nil
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

// failed ends group g with err, after hits answers. A refusal (an error
// line) or an answer that is not one falls back (its unanswered keys go
// as binary gets) and turns the server's text path off for a while; a
// multi-get not written, or answered by the connection's end with no hit
// before, falls back too: gets change nothing, so sending them again is
// safe. Any other failure (the
// deadline, the context, the connection) is the group's error, judged for
// each unanswered key as a quiet group's.
func (x *textGets) failed(w *Window, g *Group, err error, hits int) {
	x.done(g, false)
	var re *conn.RequestError
	switch {
	case refusedText(err):
		g.Node.TextRefused(err)
		g.Fallback = true
		g.end(false, nil)
		return
	case w.ctx.Err() == nil && (errors.As(err, &re) && !re.Written || hits == 0 && errors.Is(err, kverr.ErrConnectionClosed)):
		// Nothing was read. A connection the server closed while idle
		// was dropped when it was taken (CheckIdle): one that ends at the
		// multi-get was closed by the server for it, which turns the text
		// path off for a while, so that a server closing every text
		// connection at its multi-get does not cost a new one per batch.
		if errors.Is(err, kverr.ErrConnectionClosed) {
			g.Node.TextRefused(err)
		}
		g.Fallback = true
		g.end(false, nil)
		return
	}
	if w.ctx.Err() != nil {
		w.Canceled = true
	}
	g.end(false, err)
}

// done gives g's text connection back; answered: its multi-get was
// answered.
func (x *textGets) done(g *Group, answered bool) {
	if g.tc != nil {
		g.Node.PutText(g.tc, answered)
		g.tc = nil
	}
}
