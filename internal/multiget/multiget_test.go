package multiget

import (
	"context"
	"encoding/binary"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvwire/kvwire/conn"
	"github.com/kvwire/kvwire/internal/cluster"
	"github.com/kvwire/kvwire/internal/faultnode"
	"github.com/kvwire/kvwire/internal/kverr"
	"github.com/kvwire/kvwire/internal/leakcheck"
	"github.com/kvwire/kvwire/memdx"
	"github.com/kvwire/kvwire/retry"
)

func TestMain(m *testing.M) { leakcheck.Main(m) }

// bound bounds every wait and every group's deadline: a failure guard no
// healthy run nears, never a wait a test relies on.
const bound = 10 * time.Second

// doc is a stored document of a server.
type doc struct {
	value string
	flags uint32
	cas   uint64
}

// server is a memcached played by a faultnode.Server: it answers quiet
// gets (GETKQ: a hit names its key; a miss is not answered) and text
// multi-gets from its documents, unless the test's hooks answer first.
type server struct {
	*faultnode.Server
	mu   sync.Mutex
	docs map[string]doc
	// onGet answers a GETKQ (true: answered, or left unanswered on
	// purpose); onGets a text multi-get, given its keys.
	onGet  func(c *faultnode.ServerConn, req *memdx.Packet) bool
	onGets func(c *faultnode.ServerConn, keys []string) bool
	// onNoop answers a NOOP (true: answered, or left unanswered).
	onNoop func(c *faultnode.ServerConn, req *memdx.Packet) bool
	// silent: NOOPs are not answered (set once connected); each one read
	// then, and each multi-get, is signalled on asked.
	silent bool
	asked  chan struct{}
	gets   []string // the keys of every GETKQ and multi-get read, in order
}

func newServer(t *testing.T, docs map[string]doc) *server {
	t.Helper()
	s := &server{docs: docs, asked: make(chan struct{}, 16)}
	fs, err := faultnode.NewServer(s.binary)
	require.NoError(t, err)
	fs.SetTextHandler(s.text)
	s.Server = fs
	t.Cleanup(fs.Close)
	return s
}

func (s *server) set(f func(s *server)) {
	s.mu.Lock()
	f(s)
	s.mu.Unlock()
}

// seen is the keys the server was asked for, by either protocol.
func (s *server) seen() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.gets...)
}

func (s *server) binary(c *faultnode.ServerConn, req *memdx.Packet) bool {
	s.mu.Lock()
	onGet, onNoop, silent := s.onGet, s.onNoop, s.silent
	switch req.OpCode {
	case memdx.OpGetKQ:
		s.gets = append(s.gets, string(req.Key))
	case memdx.OpNoop:
		s.mu.Unlock()
		if silent {
			s.asked <- struct{}{}
		}
		return silent || onNoop != nil && onNoop(c, req)
	default:
		s.mu.Unlock()
		return false
	}
	d, ok := s.docs[string(req.Key)]
	s.mu.Unlock()
	switch {
	case onGet != nil && onGet(c, req):
	case ok:
		_ = c.Send(hit(req, d))
	}
	return true
}

// hit is a GETKQ's answer with d.
func hit(req *memdx.Packet, d doc) memdx.Packet {
	p := faultnode.Reply(req, memdx.StatusSuccess, []byte(d.value))
	p.Extras, p.Cas = binary.BigEndian.AppendUint32(nil, d.flags), d.cas
	return p
}

func (s *server) text(c *faultnode.ServerConn, line string) bool {
	keys, ok := strings.CutPrefix(line, "gets ")
	if !ok {
		return false
	}
	s.mu.Lock()
	ks := strings.Fields(keys)
	s.gets = append(s.gets, ks...)
	onGets := s.onGets
	var b strings.Builder
	for _, k := range ks {
		if d, ok := s.docs[k]; ok {
			fmt.Fprintf(&b, "VALUE %s %d %d %d\r\n%s\r\n", k, d.flags, len(d.value), d.cas, d.value)
		}
	}
	s.mu.Unlock()
	select {
	case s.asked <- struct{}{}:
	default:
	}
	if onGets == nil || !onGets(c, ks) {
		_ = c.Write([]byte(b.String() + "END\r\n"))
	}
	return true
}

// connect is a memcached:// cluster of servers.
func connect(t *testing.T, servers ...*server) *cluster.Cluster {
	t.Helper()
	var seeds []string
	for _, s := range servers {
		seeds = append(seeds, s.Addr())
	}
	cl, err := cluster.Connect(t.Context(), cluster.Config{
		Seeds: seeds, Memcached: true,
		ConnectTimeout: bound, KVTimeout: bound, PollInterval: time.Hour, ConnectionsPerNode: 1,
		Conn:  conn.Options{Memcached: true, ProbeTimeout: time.Minute},
		Clock: retry.RealClock(), Logger: slog.New(slog.DiscardHandler),
		NodeError: func(addr string, err error) error {
			return fmt.Errorf("node %s: %w (%v)", addr, kverr.ErrNoNodeAvailable, err)
		},
	})
	require.NoError(t, err)
	t.Cleanup(cl.Close)
	return cl
}

// read reads keys as one window on cl's servers under ctx with the given
// deadline (on clock), by text multi-gets when text is set and a server
// has an idle text connection, by quiet gets otherwise.
func read(ctx context.Context, cl *cluster.Cluster, clock retry.Clock, deadline time.Time, text bool, keys ...string) *Window {
	w := &Window{}
	w.Start(ctx, clock, keys)
	w.route(cl.Topology(), 0, len(keys), func(k string) bool { return k != "refused" },
		func(*conn.Conn) bool { return text })
	readWindow(w, 0, deadline)
	return w
}

// readWindow sends the groups routed from g0 on and awaits them.
func readWindow(w *Window, g0 int, deadline time.Time) {
	w.send(g0, deadline)
	w.await(g0, len(w.Groups), deadline)
}

// readQuiet reads keys by quiet gets, with every key's deadline the bound.
func readQuiet(t *testing.T, cl *cluster.Cluster, keys ...string) *Window {
	return read(t.Context(), cl, retry.RealClock(), time.Now().Add(bound), false, keys...)
}

// textReady has every node of cl dial a text connection (as a window that
// finds none does) and waits until each has one idle.
func textReady(t *testing.T, cl *cluster.Cluster) {
	t.Helper()
	for _, n := range cl.Topology().Nodes() {
		require.Nil(t, n.TakeText(), "no text connection before the first is dialed")
		// Polled: the node tells no one when its dial ends.
		for end := time.Now().Add(bound); ; time.Sleep(time.Millisecond) {
			if idle, _, _ := n.TextState(); idle == 1 {
				break
			}
			require.False(t, time.Now().After(end), "no idle text connection within %v", bound)
		}
	}
}

// readText reads keys by text multi-gets (every node has an idle text
// connection), with every key's deadline the bound.
func readText(t *testing.T, cl *cluster.Cluster, keys ...string) *Window {
	t.Helper()
	textReady(t, cl)
	return read(t.Context(), cl, retry.RealClock(), time.Now().Add(bound), true, keys...)
}

// requestError is err as the *conn.RequestError a group ends with.
func requestError(t *testing.T, err error) *conn.RequestError {
	t.Helper()
	var re *conn.RequestError
	require.ErrorAs(t, err, &re)
	return re
}

// record is what a test checks of a key's record.
type record struct {
	Got    bool
	Hit    bool
	Status memdx.Status
	Value  string
	Flags  uint32
	Cas    uint64
}

func records(w *Window) []record {
	var out []record
	for i := range w.Recs {
		r := &w.Recs[i]
		out = append(out, record{Got: r.Got, Hit: r.Hit(), Status: r.Status, Value: string(r.Value), Flags: r.Flags, Cas: r.Cas})
	}
	return out
}

// Keys are grouped by server, as the ketama ring places them, each group's
// keys in key order; a key refused (valid) is in no group.
func TestRouteMakesOneGroupPerServer(t *testing.T) {
	s1, s2 := newServer(t, nil), newServer(t, nil)
	cl := connect(t, s1, s2)
	top := cl.Topology()
	var keys []string
	for i := range 40 {
		keys = append(keys, fmt.Sprint("key-", i))
	}
	keys = append(keys, "refused")
	w := &Window{}
	w.Start(t.Context(), retry.RealClock(), keys)
	w.route(top, 0, len(keys), func(k string) bool { return k != "refused" }, func(*conn.Conn) bool { return false })
	require.Len(t, w.Groups, 2, "one group per server")
	want := map[*cluster.Node][]int32{}
	for i, k := range keys[:40] {
		_, n := top.KetamaServer([]byte(k))
		want[n] = append(want[n], int32(i))
	}
	for gi, g := range w.Groups {
		assert.Equal(t, want[g.Node], g.Keys, "group %d: its server's keys, in key order", gi)
		for _, i := range g.Keys {
			assert.Equal(t, int32(gi), w.Recs[i].Group)
		}
		assert.Equal(t, memdx.OpGetKQ, g.Opcode())
	}
	assert.Equal(t, int32(-1), w.Recs[40].Group, "a refused key is in no group")
	readWindow(w, 0, time.Now().Add(bound))
	for _, g := range w.Groups {
		assert.True(t, g.Done && g.Answered)
	}
}

// A GetMany's keys are read a window at a time, each window's groups
// after the last's (a record's Group indexes every window's groups); a
// Window reset for reuse reads its next GetMany as a new one.
func TestWindowsReadInTurnAndAWindowIsReused(t *testing.T) {
	docs := map[string]doc{}
	var keys []string
	for i := range 12 {
		k := fmt.Sprint("key-", i)
		keys = append(keys, k)
		if i%3 != 0 {
			docs[k] = doc{value: "v" + k, cas: uint64(i)}
		}
	}
	cl := connect(t, newServer(t, docs), newServer(t, docs))
	want := func(keys []string) []record {
		var out []record
		for _, k := range keys {
			if d, ok := docs[k]; ok {
				out = append(out, record{Got: true, Hit: true, Value: d.value, Cas: d.cas})
			} else {
				out = append(out, record{})
			}
		}
		return out
	}
	w := &Window{}
	w.Start(t.Context(), retry.RealClock(), keys)
	for from := 0; from < len(keys); from += 5 {
		g0 := len(w.Groups)
		w.route(cl.Topology(), from, min(from+5, len(keys)), func(string) bool { return true }, func(*conn.Conn) bool { return false })
		readWindow(w, g0, time.Now().Add(bound))
		for i := from; i < min(from+5, len(keys)); i++ {
			assert.GreaterOrEqual(t, w.Recs[i].Group, int32(g0), "key %d is in a group of its window", i)
		}
	}
	assert.Equal(t, want(keys), records(w))
	for _, g := range w.Groups {
		assert.True(t, g.Done && g.Answered)
	}

	w.Reset()
	again := []string{"key-4", "key-3", "other"}
	w.Start(t.Context(), retry.RealClock(), again)
	w.route(cl.Topology(), 0, len(again), func(string) bool { return true }, func(*conn.Conn) bool { return false })
	readWindow(w, 0, time.Now().Add(bound))
	assert.Equal(t, want(again), records(w))
	assert.LessOrEqual(t, len(w.Groups), 2, "no group of the last GetMany is left")
}

// Quiet gets: a hit's record holds its value, flags and CAS; a miss (not
// answered before the NOOP) has no answer; a failure status is recorded as
// the answer, not a hit; a key asked twice is answered twice; a hit whose
// answer does not decode is not a hit.
func TestQuietGroupRecordsHitsMissesAndFailures(t *testing.T) {
	s := newServer(t, map[string]doc{"a": {"va", 3, 77}, "empty": {"", 0, 5}})
	s.set(func(s *server) {
		s.onGet = func(c *faultnode.ServerConn, req *memdx.Packet) bool {
			switch string(req.Key) {
			case "busy":
				_ = c.Send(faultnode.Reply(req, memdx.StatusTmpFail, []byte("later"))) // no key, as kv_engine answers
				return true
			case "bad":
				p := hit(req, doc{value: "v"})
				p.Extras = p.Extras[:3] // flags cut short
				_ = c.Send(p)
				return true
			}
			return false
		}
	})
	cl := connect(t, s)
	w := readQuiet(t, cl, "a", "miss", "busy", "empty", "a", "bad")
	require.Len(t, w.Groups, 1)
	g := &w.Groups[0]
	assert.True(t, g.Done && g.Answered, "the NOOP settled the group")
	assert.NoError(t, g.Err)
	assert.Equal(t, []record{
		{Got: true, Hit: true, Value: "va", Flags: 3, Cas: 77},
		{},
		{Got: true, Status: memdx.StatusTmpFail, Value: "later"},
		{Got: true, Hit: true, Cas: 5},
		{Got: true, Hit: true, Value: "va", Flags: 3, Cas: 77},
		{Got: true},
	}, records(w))
	assert.NotNil(t, w.Recs[3].Value, "an empty value is a value")
	assert.Error(t, w.Recs[5].Err, "an answer that does not decode")
	assert.Equal(t, []string{"a", "miss", "busy", "empty", "a", "bad"}, s.seen())
	// The first attempts of the keys without a hit, as the batch judges them.
	op, answered, err := w.FirstAttempt(1)
	assert.Equal(t, memdx.OpGetKQ, op)
	assert.False(t, answered, "a miss is settled by the group's end")
	assert.NoError(t, err)
	_, answered, err = w.FirstAttempt(2)
	assert.True(t, answered, "a failure status is an answer")
	assert.NoError(t, err)
	_, answered, err = w.FirstAttempt(5)
	assert.True(t, answered)
	assert.Equal(t, w.Recs[5].Err, err, "an answer that does not decode is its error")
}

// A GETKQ answer that names another key than its get's (or a hit that
// names none) is refused: the server has mixed up its answers, so the
// connection closes before the NOOP can settle the other gets as misses,
// and the group ends with the connection's error. The foreign answer is
// nobody's; a hit before it, which named its own key, is kept.
func TestQuietGroupRefusesAnAnswerForAnotherKey(t *testing.T) {
	for _, tc := range []struct {
		name   string
		answer func(req *memdx.Packet) memdx.Packet
	}{
		{"a hit for another key", func(req *memdx.Packet) memdx.Packet {
			p := hit(req, doc{value: "vb"})
			p.Key = []byte("b")
			return p
		}},
		{"a hit naming no key", func(req *memdx.Packet) memdx.Packet {
			p := hit(req, doc{value: "vb"})
			p.Key = nil
			return p
		}},
		{"a miss for another key", func(req *memdx.Packet) memdx.Packet {
			p := faultnode.Reply(req, memdx.StatusKeyNotFound, nil)
			p.Key = []byte("b")
			return p
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newServer(t, map[string]doc{"b": {"vb", 0, 1}, "first": {"v", 0, 1}})
			s.set(func(s *server) {
				s.onGet = func(c *faultnode.ServerConn, req *memdx.Packet) bool {
					if string(req.Key) != "a" {
						return false
					}
					_ = c.Send(tc.answer(req))
					return true
				}
			})
			cl := connect(t, s)
			cn, _, err := cl.Topology().Nodes()[0].Pick()
			require.NoError(t, err)
			w := readQuiet(t, cl, "first", "a", "b")
			g := &w.Groups[0]
			assert.True(t, g.Done)
			assert.False(t, g.Answered)
			assert.ErrorIs(t, g.Err, kverr.ErrProtocol)
			re := requestError(t, g.Err)
			assert.True(t, re.Written)
			<-cn.Done()
			assert.Equal(t, []record{{Got: true, Hit: true, Value: "v", Cas: 1}, {}, {}}, records(w),
				"the foreign answer is not a's, and b was never answered")
		})
	}
}

// The connection lost after the gets were written: the keys answered
// before keep their answers; the others have none, and the group's error
// says the request was written (its outcome unknown) and the connection
// closed.
func TestQuietGroupConnectionLostAfterWrite(t *testing.T) {
	s := newServer(t, map[string]doc{"a": {"va", 0, 1}, "b": {"vb", 0, 2}})
	s.set(func(s *server) {
		s.onGet = func(c *faultnode.ServerConn, req *memdx.Packet) bool {
			if string(req.Key) == "b" {
				c.Reset()
				return true
			}
			return false
		}
	})
	cl := connect(t, s)
	w := readQuiet(t, cl, "a", "b")
	g := &w.Groups[0]
	assert.True(t, g.Done)
	assert.False(t, g.Answered)
	assert.ErrorIs(t, g.Err, kverr.ErrConnectionClosed)
	re := requestError(t, g.Err)
	assert.True(t, re.Written, "the gets were written")
	assert.True(t, w.Recs[0].Hit())
	assert.False(t, w.Recs[1].Got)
	op, answered, err := w.FirstAttempt(1)
	assert.False(t, answered)
	assert.ErrorIs(t, err, kverr.ErrConnectionClosed)
	kre := requestError(t, err)
	assert.Equal(t, memdx.OpGetKQ, op)
	assert.Equal(t, op, kre.Op, "the key's error names its get, not the group's request")
	assert.Equal(t, w.Recs[1].Opaque, kre.Opaque)
	assert.True(t, kre.Written)
	assert.NotSame(t, re, kre, "the group's error is not changed")
}

// A connection that ended after the window was routed onto it: the group
// fails before anything is written, and says so.
func TestQuietGroupConnectionLostBeforeWrite(t *testing.T) {
	s := newServer(t, map[string]doc{"a": {"va", 0, 1}})
	cl := connect(t, s)
	w := &Window{}
	w.Start(t.Context(), retry.RealClock(), []string{"a"})
	w.route(cl.Topology(), 0, 1, func(string) bool { return true }, func(*conn.Conn) bool { return false })
	require.Len(t, w.Groups, 1)
	for _, c := range s.Conns() {
		c.Reset()
	}
	<-w.Groups[0].Conn.Done()
	readWindow(w, 0, time.Now().Add(bound))
	g := &w.Groups[0]
	assert.True(t, g.Done)
	assert.False(t, g.Answered)
	re := requestError(t, g.Err)
	assert.False(t, re.Written, "nothing was written")
	assert.False(t, w.Recs[0].Got)
	assert.Empty(t, s.seen())
}

// The window's context ending while a group is awaited ends the group
// with the context's error at once and marks the window Canceled. A quiet
// group is abandoned on its connection, which is kept; a text connection
// is broken by the read cut short, and closed.
func TestGroupCanceled(t *testing.T) {
	for _, text := range []bool{false, true} {
		s := newServer(t, map[string]doc{"a": {"va", 0, 1}})
		cl := connect(t, s)
		n := cl.Topology().Nodes()[0]
		cn, _, err := n.Pick()
		require.NoError(t, err)
		if text {
			textReady(t, cl)
		}
		s.set(func(s *server) {
			s.silent = true
			s.onGets = func(*faultnode.ServerConn, []string) bool { return true }
		})
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan *Window)
		go func() { done <- read(ctx, cl, retry.RealClock(), time.Now().Add(bound), text, "b", "c") }()
		<-s.asked // the request was written
		cancel()
		var w *Window
		select {
		case w = <-done:
		case <-time.After(bound):
			t.Fatalf("text %v: the read did not end with its context", text)
		}
		assert.True(t, w.Canceled)
		g := &w.Groups[0]
		assert.True(t, g.Done)
		assert.False(t, g.Fallback)
		assert.ErrorIs(t, g.Err, context.Canceled)
		assert.NoError(t, cn.Err(), "the binary connection is kept")
		idle, _, _ := n.TextState()
		assert.Zero(t, idle, "no text connection is kept")
	}
}

// A group whose keys' deadline has passed (on the window's clock) is not
// sent, by either reader; it ends with a deadline error, not written.
func TestGroupPastItsDeadlineIsNotSent(t *testing.T) {
	s := newServer(t, map[string]doc{"a": {"va", 0, 1}})
	cl := connect(t, s)
	clock := retry.NewFakeClock(time.Unix(1000, 0))
	for _, text := range []bool{false, true} {
		if text {
			textReady(t, cl)
		}
		w := read(t.Context(), cl, clock, clock.Now(), text, "a")
		g := &w.Groups[0]
		assert.True(t, g.Done, "text %v", text)
		assert.False(t, g.Answered)
		assert.ErrorIs(t, g.Err, context.DeadlineExceeded)
		re := requestError(t, g.Err)
		assert.False(t, re.Written)
		assert.False(t, w.Recs[0].Got)
	}
	assert.Empty(t, s.seen(), "nothing was sent")
	idle, _, _ := cl.Topology().Nodes()[0].TextState()
	assert.Equal(t, 1, idle, "the text connection is given back")
}

// A text multi-get: a hit's record holds its value, flags and CAS (an
// empty value is a value); a miss has no answer; a key asked twice is
// answered twice. A key the text protocol cannot carry is in no group (it
// goes as a get of its own). The connection is given back for the next.
func TestTextGroupRecordsHitsAndMisses(t *testing.T) {
	s := newServer(t, map[string]doc{"a": {"va", 3, 77}, "empty": {"", 0, 5}})
	cl := connect(t, s)
	w := readText(t, cl, "a", "miss", "empty", "a", "has space")
	require.Len(t, w.Groups, 1)
	g := &w.Groups[0]
	assert.Equal(t, memdx.OpGet, g.Opcode(), "a text multi-get's key counts as a GET")
	assert.True(t, g.Done && g.Answered)
	assert.NoError(t, g.Err)
	assert.False(t, g.Fallback)
	assert.Equal(t, []record{
		{Got: true, Hit: true, Value: "va", Flags: 3, Cas: 77},
		{},
		{Got: true, Hit: true, Cas: 5},
		{Got: true, Hit: true, Value: "va", Flags: 3, Cas: 77},
		{},
	}, records(w))
	assert.NotNil(t, w.Recs[2].Value, "an empty value is a value")
	assert.Equal(t, int32(-1), w.Recs[4].Group, "text cannot carry a key with a space")
	assert.Equal(t, []string{"a", "miss", "empty", "a"}, s.seen())
	idle, _, _ := cl.Topology().Nodes()[0].TextState()
	assert.Equal(t, 1, idle, "the text connection is given back")
}

// A text answer that ends in an error line or malformed gives no hit at
// all, not even the values before the fault (they may be as foreign as
// the fault: a late answer to another multi-get): the group is given back
// (Fallback, no error) for its keys to go as binary gets, and the server's
// text path is off for a while.
func TestTextAnswerEndingBadlyGivesNoHit(t *testing.T) {
	for _, tc := range []struct{ name, tail string }{
		{"malformed", "GARBAGE\r\n"},
		{"an error line", "SERVER_ERROR out of memory\r\n"},
		{"a key not asked for", "VALUE zz 0 1 1\r\nz\r\nEND\r\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newServer(t, map[string]doc{"a": {"va", 0, 1}})
			s.set(func(s *server) {
				s.onGets = func(c *faultnode.ServerConn, _ []string) bool {
					_ = c.Write([]byte("VALUE a 0 2 1\r\nva\r\n" + tc.tail))
					return true
				}
			})
			cl := connect(t, s)
			before := time.Now()
			w := readText(t, cl, "a", "b")
			g := &w.Groups[0]
			assert.True(t, g.Fallback, "the group is given back")
			assert.True(t, g.Done)
			assert.NoError(t, g.Err)
			for i := range w.Recs {
				assert.False(t, w.Recs[i].Got || w.Recs[i].Hit(), "key %d: no answer, not even a's", i)
				assert.Nil(t, w.Recs[i].Value)
			}
			_, _, off := cl.Topology().Nodes()[0].TextState()
			assert.True(t, off.After(before), "the server's text path is off")
		})
	}
}

// A text connection lost in the middle of an answer: the keys answered
// before keep their values, the group ends with the connection's error
// (written), for the others to be retried. Lost before any answer, the
// group is given back instead (nothing was read: the keys go as binary
// gets at once).
func TestTextConnectionLost(t *testing.T) {
	for _, tc := range []struct {
		name     string
		answered string
		hits     []record
	}{
		{"after an answer", "VALUE a 0 2 1\r\nva\r\n", []record{{Got: true, Hit: true, Value: "va", Cas: 1}, {}}},
		{"before any answer", "", []record{{}, {}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newServer(t, nil)
			s.set(func(s *server) {
				s.onGets = func(c *faultnode.ServerConn, _ []string) bool {
					_ = c.Write([]byte(tc.answered))
					c.Close()
					return true
				}
			})
			cl := connect(t, s)
			w := readText(t, cl, "a", "b")
			g := &w.Groups[0]
			assert.True(t, g.Done)
			assert.False(t, g.Answered)
			assert.Equal(t, tc.hits, records(w))
			if tc.answered == "" {
				assert.True(t, g.Fallback)
				assert.NoError(t, g.Err)
				return
			}
			assert.False(t, g.Fallback)
			assert.ErrorIs(t, g.Err, kverr.ErrConnectionClosed)
			re := requestError(t, g.Err)
			assert.True(t, re.Written)
			idle, _, _ := cl.Topology().Nodes()[0].TextState()
			assert.Zero(t, idle, "the lost connection is not kept")
		})
	}
}

// A server that never answers: the group ends at its keys' deadline with
// a deadline error, the request written (a quiet group's request is its
// NOOP; a text one's counts as a GET). The text reader sets its socket's
// deadline from the window's clock, a fake one here, 50ms of real time
// ahead; the connection reads the quiet group's on the system clock.
func TestGroupOfASilentServerTimesOut(t *testing.T) {
	s := newServer(t, nil)
	cl := connect(t, s)
	s.set(func(s *server) {
		s.silent = true
		s.onGets = func(*faultnode.ServerConn, []string) bool { return true }
	})
	for _, text := range []bool{false, true} {
		var clock retry.Clock = retry.RealClock()
		op := memdx.OpNoop
		if text {
			textReady(t, cl)
			clock, op = retry.NewFakeClock(time.Unix(1000, 0)), memdx.OpGet
		}
		ctx, cancel := context.WithTimeout(t.Context(), bound)
		w := read(ctx, cl, clock, clock.Now().Add(50*time.Millisecond), text, "a")
		cancel()
		g := &w.Groups[0]
		assert.False(t, w.Canceled, "text %v: the keys' deadline ended the read, not the context", text)
		assert.True(t, g.Done)
		assert.False(t, g.Fallback)
		assert.ErrorIs(t, g.Err, context.DeadlineExceeded)
		re := requestError(t, g.Err)
		assert.True(t, re.Written)
		assert.Equal(t, op, re.Op)
	}
}

// A GetMany's windows are of the in-flight bound; one of more keys than
// that has two in flight.
func TestWindowsOfTheInFlightBoundTwoInFlight(t *testing.T) {
	for _, tc := range []struct{ n, max, size, depth int }{
		{256, 2048, 2048, 1},
		{2048, 2048, 2048, 1},
		{2049, 2048, 2048, 2},
		{8192, 2048, 2048, 2},
		{5, 4, 4, 2},
		{5, 1, 1, 2},
		{1, 1, 1, 1},
		{0, 0, 1, 1},
	} {
		size, depth := windows(tc.n, tc.max)
		assert.Equal(t, []int{tc.size, tc.depth}, []int{size, depth}, "%d keys, at most %d in flight", tc.n, tc.max)
	}
}

// twoTextConns has the node of cl (one) keep two idle text connections,
// for two windows read at once.
func twoTextConns(t *testing.T, cl *cluster.Cluster) {
	t.Helper()
	textReady(t, cl)
	n := cl.Topology().Nodes()[0]
	first := n.TakeText()
	require.NotNil(t, first)
	require.Nil(t, n.TakeText(), "none idle: a second is dialed")
	for end := time.Now().Add(bound); ; time.Sleep(time.Millisecond) {
		if idle, _, _ := n.TextState(); idle == 1 {
			break
		}
		require.False(t, time.Now().After(end), "no second text connection within %v", bound)
	}
	n.PutText(first, true)
}

// windowedDocs are the keys of windowed and their documents: every key
// but key-1 is stored.
func windowedDocs() ([]string, map[string]doc) {
	docs := map[string]doc{}
	keys := make([]string, 8)
	for i := range keys {
		keys[i] = fmt.Sprint("key-", i)
		if i != 1 {
			docs[keys[i]] = doc{value: "v" + keys[i], cas: uint64(i + 1)}
		}
	}
	return keys, docs
}

// windowed reads windowedDocs' keys by Read with an in-flight bound of 2:
// windows of 2, [0,2) [2,4) [4,6) [6,8), two in flight. It checks that the windows
// are settled in order, each once its keys' groups have ended, and that
// every key was read: a hit but key-1's, every group answered.
func windowed(t *testing.T, cl *cluster.Cluster, text bool, keys []string) *Window {
	t.Helper()
	w := &Window{}
	w.Start(t.Context(), retry.RealClock(), keys)
	var settled [][2]int
	w.Read(cl.Topology, 2, func(string) bool { return true }, func(*conn.Conn) bool { return text },
		time.Now().Add(bound), func(from, to int) {
			for i := from; i < to; i++ {
				if gi := w.Recs[i].Group; gi >= 0 {
					assert.True(t, w.Groups[gi].Done, "key %d: its group has ended when it is settled", i)
				}
			}
			settled = append(settled, [2]int{from, to})
		})
	assert.Equal(t, [][2]int{{0, 2}, {2, 4}, {4, 6}, {6, 8}}, settled)
	for i := range keys {
		r := &w.Recs[i]
		assert.Equal(t, i != 1, r.Hit(), keys[i])
		if i != 1 {
			assert.Equal(t, "v"+keys[i], string(r.Value))
		}
	}
	for _, g := range w.Groups {
		assert.True(t, g.Done && g.Answered)
	}
	return w
}

// Read sends window 2's quiet gets behind window 1's, on the same
// connection, before window 1's NOOP is answered: here the server answers
// window 1's NOOP (and holds window 2's answers) only once window 2's NOOP
// has come. Every window is settled in order, with its answers.
func TestReadSendsTheNextQuietWindowBeforeTheLastIsAnswered(t *testing.T) {
	keys, docs := windowedDocs()
	s := newServer(t, docs)
	cl := connect(t, s)     // before the hooks: connecting sends a NOOP
	var held []memdx.Packet // window 1's NOOP, then window 2's answers
	noops := 0
	s.set(func(s *server) {
		s.onGet = func(c *faultnode.ServerConn, req *memdx.Packet) bool {
			if noops == 1 {
				if d, ok := docs[string(req.Key)]; ok {
					held = append(held, hit(req, d)) // behind window 1's NOOP
				}
				return true
			}
			return false
		}
		s.onNoop = func(c *faultnode.ServerConn, req *memdx.Packet) bool {
			noops++
			switch noops {
			case 1:
				held = append(held, faultnode.Reply(req, memdx.StatusSuccess, nil))
				return true
			case 2:
				_ = c.Send(held...)
			}
			return false
		}
	})
	w := windowed(t, cl, false, keys)
	assert.Len(t, w.Groups, 4)
}

// Read sends window 2's multi-get, on a second text connection, before
// window 1's answer is read: here the server answers window 1 only once
// window 2's multi-get has come.
func TestReadSendsTheNextTextWindowBeforeTheLastIsAnswered(t *testing.T) {
	keys, docs := windowedDocs()
	s := newServer(t, docs)
	cl := connect(t, s)
	twoTextConns(t, cl)
	first := make(chan *faultnode.ServerConn, 1) // window 1's, unanswered until window 2 comes
	s.set(func(s *server) {
		s.onGets = func(c *faultnode.ServerConn, ks []string) bool {
			switch ks[0] {
			case keys[0]:
				first <- c
				return true
			case keys[2]:
				_ = (<-first).Write([]byte(fmt.Sprintf("VALUE %s 0 %d %d\r\n%s\r\nEND\r\n",
					keys[0], len(docs[keys[0]].value), docs[keys[0]].cas, docs[keys[0]].value)))
			}
			return false
		}
	})
	w := windowed(t, cl, true, keys)
	for _, g := range w.Groups {
		assert.Equal(t, memdx.OpGet, g.Opcode(), "every window by text")
	}
	idle, _, _ := cl.Topology().Nodes()[0].TextState()
	assert.Equal(t, 2, idle, "both text connections given back")
}

// The context ends between two windows (here while window 1 is settled,
// with window 2 in flight): no window is sent after it, though no await
// saw it end; window 2 is read as sent, and the later windows' keys are in
// no group, for the batch to end as a cancelled context ends a key.
func TestReadSendsNoWindowAfterTheContextEnded(t *testing.T) {
	keys, docs := windowedDocs()
	s := newServer(t, docs)
	cl := connect(t, s)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	w := &Window{}
	w.Start(ctx, retry.RealClock(), keys)
	w.Read(cl.Topology, 2, func(string) bool { return true }, func(*conn.Conn) bool { return false },
		time.Now().Add(bound), func(from, to int) {
			if from == 0 {
				cancel()
			}
		})
	assert.True(t, w.Canceled)
	for i := range keys {
		assert.Equal(t, i < 4, w.Recs[i].Group >= 0, "key %d: grouped only in the windows sent before", i)
	}
	assert.Subset(t, keys[:4], s.seen(), "the server was asked for windows 1 and 2's keys only")
}
