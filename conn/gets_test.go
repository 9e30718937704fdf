package conn

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kvwire/kvwire/internal/kverr"
	"github.com/kvwire/kvwire/memdx"
	"github.com/kvwire/kvwire/mockcluster"
)

// getAnswer is what a testSink recorded of one answer.
type getAnswer struct {
	tag    uint64
	op     memdx.OpCode
	status memdx.Status
	opaque uint32
	key    string
	value  string
}

// testSink records the answers a group's gets receive, keyed by index. As
// the client's sink does, it refuses a second answer to the same get
// (false), and, when keys is set, an answer naming another key than get
// i's (a protocol violation); offered counts every call, refused ones
// included.
type testSink struct {
	mu      sync.Mutex
	got     map[int]getAnswer
	offered int
	keys    []string
}

func newTestSink() *testSink { return &testSink{got: map[int]getAnswer{}} }

func (s *testSink) GetAnswer(tag uint64, i int, p *memdx.Packet) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.offered++
	if s.keys != nil && string(p.Key) != s.keys[i] {
		return false, fmt.Errorf("answer for key %q to the get of %q: %w", p.Key, s.keys[i], kverr.ErrProtocol)
	}
	if _, dup := s.got[i]; dup {
		return false, nil
	}
	s.got[i] = getAnswer{tag: tag, op: p.OpCode, status: p.Status, opaque: p.Opaque, key: string(p.Key), value: string(p.Value)}
	return true, nil
}

// answers returns a copy of what was recorded, and the number of calls.
func (s *testSink) answers() (map[int]getAnswer, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := make(map[int]getAnswer, len(s.got))
	for i, a := range s.got {
		m[i] = a
	}
	return m, s.offered
}

// wantAnswers fails the test unless s recorded exactly want (index to
// value, or to the status's name for a failure status), each with tag.
func (s *testSink) wantAnswers(t *testing.T, tag uint64, want map[int]string) {
	t.Helper()
	got, _ := s.answers()
	if len(got) != len(want) {
		t.Errorf("sink has %d answers %v, want %d %v", len(got), got, len(want), want)
	}
	for i, w := range want {
		a, ok := got[i]
		v := a.value
		if a.status != memdx.StatusSuccess {
			v = a.status.String()
		}
		if !ok || v != w || a.tag != tag {
			t.Errorf("get %d: sink has %+v (present %v), want %q with tag %d", i, a, ok, w, tag)
		}
	}
}

func byteKeys(keys ...string) [][]byte {
	out := make([][]byte, len(keys))
	for i, k := range keys {
		out[i] = []byte(k)
	}
	return out
}

// startGets starts a group of op gets of keys, with no deadline.
func startGets(t *testing.T, c *Conn, op memdx.OpCode, keys []string, s GetSink, n Notifier, tag uint64) Pending {
	t.Helper()
	return startGetsBy(t, c, time.Time{}, op, keys, s, n, tag)
}

func startGetsBy(t *testing.T, c *Conn, deadline time.Time, op memdx.OpCode, keys []string, s GetSink, n Notifier, tag uint64) Pending {
	t.Helper()
	tmpl := memdx.NewGet(nil)
	tmpl.OpCode = op
	p, err := c.StartGets(deadline, &tmpl, byteKeys(keys...), s, n, tag, nil)
	if err != nil {
		t.Fatalf("StartGets %s %v: %v", op, keys, err)
	}
	return p
}

// readGroup reads a group of n gets of op and its NOOP, and checks what
// the server sees: the keys in order, then the NOOP, whose opaque is pg's,
// the gets' opaques the n just before it.
func readGroup(t *testing.T, p *peer, pg Pending, op memdx.OpCode, keys []string) []memdx.Packet {
	t.Helper()
	reqs := make([]memdx.Packet, len(keys)+1)
	for i := range reqs {
		reqs[i] = p.read()
	}
	for i, k := range keys {
		if r := reqs[i]; r.OpCode != op || string(r.Key) != k || r.Opaque != pg.Opaque-uint32(len(keys)-i) {
			t.Fatalf("request %d of the group: %s %q opaque %d; want %s %q opaque %d",
				i, r.OpCode, r.Key, r.Opaque, op, k, pg.Opaque-uint32(len(keys)-i))
		}
	}
	if r := reqs[len(keys)]; r.OpCode != memdx.OpNoop || r.Opaque != pg.Opaque {
		t.Fatalf("the group ends with %s opaque %d, want NOOP opaque %d", r.OpCode, r.Opaque, pg.Opaque)
	}
	return reqs
}

// waitWritten waits until the socket has taken all of the request sent
// with opaque.
func waitWritten(t *testing.T, c *Conn, opaque uint32) {
	t.Helper()
	waitFor(t, "the group written", func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		cl := callOf(c, opaque)
		return cl != nil && cl.state == reqWritten
	})
}

// noTag fails the test if n has been told of a request.
func noTag(t *testing.T, n tagNotifier, why string) {
	t.Helper()
	select {
	case tag := <-n:
		t.Fatalf("Notifier told of request %d: %s", tag, why)
	default:
	}
}

// groupsLive returns the number of groups the connection keeps.
func groupsLive(c *Conn) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.inflight.groups)
}

// roundTrip runs a GET through c and the peer, so that every response
// the peer wrote before it has been dispatched when it returns. before
// is written in the same write, ahead of the GET's answer.
func roundTrip(t *testing.T, c *Conn, p *peer, key string, before ...memdx.Packet) {
	t.Helper()
	ch := goGet(testCtx(t), c, key)
	r := p.read()
	if r.OpCode != memdx.OpGet || string(r.Key) != key {
		t.Fatalf("the server read %s %q opaque %d, want GET %q", r.OpCode, r.Key, r.Opaque, key)
	}
	p.write(append(before, ok(r, "V-"+key))...)
	if got := recv(t, ch); got.err != nil || got.value != "V-"+key {
		t.Fatalf("GET %s: %+v", key, got)
	}
}

// A group's gets and NOOP go out in one write, the gets with the opaques
// just before the NOOP's (the group's only entry in pending). The sink is
// given exactly the gets the server answered (hits and a failure status),
// each with its index and the group's tag; misses reach it not at all.
// The NOOP's answer ends the group, answered, with no error.
func TestStartGetsHandsAnswersToTheSinkAndEndsWithTheNoop(t *testing.T) {
	for _, op := range []memdx.OpCode{memdx.OpGetQ, memdx.OpGetKQ} {
		t.Run(op.String(), func(t *testing.T) {
			c, peer := dialPipe(t, Options{}, nil)
			n := make(tagNotifier, 4)
			s := newTestSink()
			keys := []string{"a", "b", "c", "d", "e"}
			writes := c.Stats().Writes
			pg := startGets(t, c, op, keys, s, n, 9)
			reqs := readGroup(t, peer, pg, op, keys)
			if got := c.Stats().Writes - writes; got != 1 {
				t.Errorf("%d writes for one group, want 1", got)
			}
			if got := c.Pending(); got != 1 {
				t.Errorf("%d requests pending for one group, want 1 (its NOOP)", got)
			}
			hit := func(i int, v string) memdx.Packet {
				r := ok(reqs[i], v)
				if op == memdx.OpGetKQ {
					r.Key = reqs[i].Key
				}
				return r
			}
			peer.write(hit(0, "A"), res(reqs[2], memdx.StatusTmpFail, ""), hit(4, "E"))
			waitFor(t, "three answers in the sink", func() bool { _, k := s.answers(); return k == 3 })
			noTag(t, n, "before its NOOP's answer")
			peer.write(ok(reqs[5], ""))
			if tag := recv(t, (<-chan uint64)(n)); tag != 9 {
				t.Fatalf("tag %d ended, want 9", tag)
			}
			if answered, err := pg.Result(); !answered || err != nil {
				t.Fatalf("group: answered %v, %v; want answered, nil", answered, err)
			}
			s.wantAnswers(t, 9, map[int]string{0: "A", 2: memdx.StatusTmpFail.String(), 4: "E"})
			got, _ := s.answers()
			for i, a := range got {
				if a.op != op || a.opaque != reqs[i].Opaque {
					t.Errorf("get %d: sink given %s opaque %d, want %s opaque %d", i, a.op, a.opaque, op, reqs[i].Opaque)
				}
				if op == memdx.OpGetKQ && a.status == memdx.StatusSuccess && a.key != keys[i] {
					t.Errorf("GETKQ %d: key %q, want %q", i, a.key, keys[i])
				}
			}
			if st := c.Stats(); st.StrayResponses != 0 || c.Pending() != 0 || groupsLive(c) != 0 {
				t.Fatalf("after the group: stats %+v, pending %d, groups %d", st, c.Pending(), groupsLive(c))
			}
			roundTrip(t, c, peer, "next")
		})
	}
}

// A group's NOOP settles the quiet requests Start queued before the group
// (sent before it), not one queued after it.
func TestStartGetsNoopSettlesQuietRequestsBeforeTheGroup(t *testing.T) {
	c, peer := dialPipe(t, Options{}, nil)
	n := make(tagNotifier, 8)
	s := newTestSink()
	var v1, v2 string
	c.Cork()
	before := startGet(t, c, memdx.OpGetQ, "before", n, 1, &v1)
	pg := startGets(t, c, memdx.OpGetQ, []string{"a"}, s, n, 2)
	after := startGet(t, c, memdx.OpGetQ, "after", n, 3, &v2)
	c.Uncork()
	peer.read()
	reqs := readGroup(t, peer, pg, memdx.OpGetQ, []string{"a"})
	peer.read()
	peer.write(ok(reqs[1], ""))
	got := map[uint64]bool{recv(t, (<-chan uint64)(n)): true, recv(t, (<-chan uint64)(n)): true}
	if !got[1] || !got[2] {
		t.Fatalf("ended %v, want the quiet get before the group (1) and the group (2)", got)
	}
	noTag(t, n, "the quiet get after the group waits for a later NOOP")
	if answered, err := before.Result(); answered || err != nil {
		t.Fatalf("quiet get before the group: %v, %v; want settled", answered, err)
	}
	if answered, err := pg.Result(); !answered || err != nil {
		t.Fatalf("group: %v, %v", answered, err)
	}
	if err, ended := after.Cancel(context.Canceled); ended || err == nil {
		t.Fatalf("quiet get after the group: ended %v, %v", ended, err)
	}
}

// Cancelled while still queued (corked), a group is withdrawn: not
// written, the server never sees a byte of it (the request after it is
// the next it reads), its Notifier is not told, and answers to its opaques
// never reach the sink.
func TestStartGetsCancelledBeforeTheWriteIsWithdrawn(t *testing.T) {
	c, peer := dialPipe(t, Options{}, nil)
	n := make(tagNotifier, 4)
	s := newTestSink()
	c.Cork()
	pg := startGets(t, c, memdx.OpGetQ, []string{"a", "b"}, s, n, 1)
	err, ended := pg.Cancel(context.Canceled)
	c.Uncork()
	if re := requestError(t, err); ended || re.Written || !errors.Is(err, context.Canceled) || re.Opaque != pg.Opaque {
		t.Fatalf("Cancel of a queued group: ended %v, %v; want not written, Canceled, opaque %d", ended, err, pg.Opaque)
	}
	if c.Pending() != 0 || groupsLive(c) != 0 {
		t.Fatalf("after the withdrawal: pending %d, groups %d", c.Pending(), groupsLive(c))
	}
	strays := c.Stats().StrayResponses
	get := memdx.Packet{Magic: memdx.MagicRes, OpCode: memdx.OpGetQ, Opaque: pg.Opaque - 2, Value: []byte("A")}
	noop := memdx.Packet{Magic: memdx.MagicRes, OpCode: memdx.OpNoop, Opaque: pg.Opaque}
	roundTrip(t, c, peer, "next", get, noop) // fails if the server read the group first
	if _, k := s.answers(); k != 0 {
		t.Fatalf("the sink of a withdrawn group was called %d times", k)
	}
	if st := c.Stats(); st.StrayResponses-strays != 2 || st.Abandoned != 0 {
		t.Fatalf("stats %+v: want the two answers to the withdrawn group counted as strays, no tombstone", st)
	}
	noTag(t, n, "its caller withdrew it")
}

// Cancelled after it was written, a group is abandoned (written): a
// tombstone whose gets' answers and NOOP's answer are late strays, never
// given to the sink once Cancel has returned; the NOOP's answer drops the
// tombstone, after which an answer to one of its gets is an unknown
// opaque. The connection carries on.
func TestStartGetsCancelledAfterTheWriteIsAbandoned(t *testing.T) {
	c, peer := dialPipe(t, Options{ProbeAfter: -1}, nil)
	n := make(tagNotifier, 4)
	s := newTestSink()
	keys := []string{"a", "b", "c"}
	pg := startGets(t, c, memdx.OpGetQ, keys, s, n, 1)
	reqs := readGroup(t, peer, pg, memdx.OpGetQ, keys)
	waitWritten(t, c, pg.Opaque)
	peer.write(ok(reqs[0], "A"))
	waitFor(t, "get 0 in the sink", func() bool { _, k := s.answers(); return k == 1 })

	err, ended := pg.Cancel(context.Canceled)
	if re := requestError(t, err); ended || !re.Written || !errors.Is(err, context.Canceled) || re.Op != memdx.OpNoop {
		t.Fatalf("Cancel of a written group: ended %v, %v; want written, Canceled, NOOP", ended, err)
	}
	if st := c.Stats(); st.Abandoned != 1 || c.Pending() != 1 {
		t.Fatalf("stats %+v, pending %d; want one tombstone", st, c.Pending())
	}
	before := c.Stats()
	roundTrip(t, c, peer, "next", ok(reqs[1], "B"), ok(reqs[2], "C"), ok(reqs[3], ""))
	st := c.Stats()
	if st.StrayResponses-before.StrayResponses != 3 || st.LateResponses-before.LateResponses != 3 {
		t.Fatalf("stats %+v (before %+v): want the two gets' and the NOOP's answers as late strays", st, before)
	}
	if st.Abandoned != 0 || c.Pending() != 0 || groupsLive(c) != 0 {
		t.Fatalf("after the NOOP's answer: stats %+v, pending %d, groups %d; want the tombstone dropped", st, c.Pending(), groupsLive(c))
	}
	s.wantAnswers(t, 1, map[int]string{0: "A"})
	if _, k := s.answers(); k != 1 {
		t.Fatalf("the sink was called %d times, want once (before Cancel)", k)
	}
	roundTrip(t, c, peer, "again", ok(reqs[1], "B"))
	if st2 := c.Stats(); st2.StrayResponses-st.StrayResponses != 1 || st2.LateResponses != st.LateResponses {
		t.Fatalf("stats %+v (before %+v): an answer to a dropped group's get is an unknown opaque", st2, st)
	}
	if _, k := s.answers(); k != 1 {
		t.Fatalf("the sink was called %d times after its group was dropped", k)
	}
	noTag(t, n, "its caller cancelled it")
}

// Past MaxAbandoned, an abandoned group is forgotten like any tombstone:
// answers to its gets are then unknown opaques, not late answers, and
// still never reach its sink.
func TestStartGetsForgottenTombstoneAnswersAreUnknown(t *testing.T) {
	c, peer := dialPipe(t, Options{MaxAbandoned: 1, ProbeAfter: -1}, nil)
	n := make(tagNotifier, 4)
	s1, s2 := newTestSink(), newTestSink()
	p1 := startGets(t, c, memdx.OpGetQ, []string{"a"}, s1, n, 1)
	r1 := readGroup(t, peer, p1, memdx.OpGetQ, []string{"a"})
	waitWritten(t, c, p1.Opaque)
	p2 := startGets(t, c, memdx.OpGetQ, []string{"b"}, s2, n, 2)
	r2 := readGroup(t, peer, p2, memdx.OpGetQ, []string{"b"})
	waitWritten(t, c, p2.Opaque)
	p1.Cancel(context.Canceled)
	p2.Cancel(context.Canceled)
	if st := c.Stats(); st.Abandoned != 1 || st.Forgotten != 1 || groupsLive(c) != 1 {
		t.Fatalf("stats %+v, groups %d; want the first group forgotten", st, groupsLive(c))
	}
	before := c.Stats()
	roundTrip(t, c, peer, "next", ok(r1[0], "A"), ok(r2[0], "B"))
	st := c.Stats()
	if st.StrayResponses-before.StrayResponses != 2 || st.LateResponses-before.LateResponses != 1 {
		t.Fatalf("stats %+v (before %+v): want one unknown and one late stray", st, before)
	}
	for i, s := range []*testSink{s1, s2} {
		if _, k := s.answers(); k != 0 {
			t.Fatalf("sink %d called %d times after Cancel", i+1, k)
		}
	}
}

// The group's deadline is enforced by the monitor: written, it ends as a
// written DeadlineExceeded RequestError reported to the Notifier, and its
// gets' later answers are late strays, not given to the sink; still
// queued (corked), it is withdrawn and never reaches the server.
func TestStartGetsDeadlineExpiresTheGroup(t *testing.T) {
	t.Run("written", func(t *testing.T) {
		fc := newFakeClock()
		c, peer := dialPipe(t, Options{clock: fc, ProbeAfter: -1}, nil)
		n := make(tagNotifier, 4)
		s := newTestSink()
		keys := []string{"a", "b"}
		pg := startGetsBy(t, c, fc.Now().Add(time.Second), memdx.OpGetQ, keys, s, n, 7)
		reqs := readGroup(t, peer, pg, memdx.OpGetQ, keys)
		waitWritten(t, c, pg.Opaque)
		peer.write(ok(reqs[0], "A"))
		waitFor(t, "get 0 in the sink", func() bool { _, k := s.answers(); return k == 1 })
		noTag(t, n, "before its deadline")
		fc.Advance(time.Second)
		if tag := recv(t, (<-chan uint64)(n)); tag != 7 {
			t.Fatalf("tag %d", tag)
		}
		answered, err := pg.Result()
		if re := requestError(t, err); answered || !re.Written || !errors.Is(err, context.DeadlineExceeded) ||
			re.Op != memdx.OpNoop || re.Opaque != pg.Opaque {
			t.Fatalf("expired group: answered %v, %v; want a written DeadlineExceeded for NOOP opaque %d", answered, err, pg.Opaque)
		}
		before := c.Stats()
		roundTrip(t, c, peer, "next", ok(reqs[1], "B"), ok(reqs[2], ""))
		if st := c.Stats(); st.LateResponses-before.LateResponses != 2 || st.Abandoned != 0 || c.Pending() != 0 || groupsLive(c) != 0 {
			t.Fatalf("stats %+v (before %+v), pending %d, groups %d", st, before, c.Pending(), groupsLive(c))
		}
		s.wantAnswers(t, 7, map[int]string{0: "A"})
	})
	t.Run("queued", func(t *testing.T) {
		fc := newFakeClock()
		c, peer := dialPipe(t, Options{clock: fc, ProbeAfter: -1}, nil)
		n := make(tagNotifier, 4)
		s := newTestSink()
		c.Cork()
		pg := startGetsBy(t, c, fc.Now().Add(time.Second), memdx.OpGetQ, []string{"a", "b"}, s, n, 7)
		fc.Advance(time.Second)
		tag := recv(t, (<-chan uint64)(n))
		c.Uncork()
		if tag != 7 {
			t.Fatalf("tag %d", tag)
		}
		answered, err := pg.Result()
		if re := requestError(t, err); answered || re.Written || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("group expired while queued: answered %v, %v; want not written, DeadlineExceeded", answered, err)
		}
		if c.Pending() != 0 || groupsLive(c) != 0 {
			t.Fatalf("pending %d, groups %d", c.Pending(), groupsLive(c))
		}
		roundTrip(t, c, peer, "next") // fails if the server read the group first
		if _, k := s.answers(); k != 0 {
			t.Fatalf("sink called %d times", k)
		}
	})
}

// A group in flight when the connection ends (the server closes it) ends
// with the connection's error, written and unanswered; the answers that
// came before stay in the sink. A group started afterwards is refused.
func TestStartGetsConnectionEndFailsTheGroup(t *testing.T) {
	c, peer := dialPipe(t, Options{}, nil)
	n := make(tagNotifier, 4)
	s := newTestSink()
	keys := []string{"a", "b"}
	pg := startGets(t, c, memdx.OpGetQ, keys, s, n, 3)
	reqs := readGroup(t, peer, pg, memdx.OpGetQ, keys)
	waitWritten(t, c, pg.Opaque)
	peer.write(ok(reqs[1], "B"))
	waitFor(t, "get 1 in the sink", func() bool { _, k := s.answers(); return k == 1 })
	peer.nc.Close()
	if tag := recv(t, (<-chan uint64)(n)); tag != 3 {
		t.Fatalf("tag %d", tag)
	}
	answered, err := pg.Result()
	if re := requestError(t, err); answered || !re.Written || !errors.Is(err, kverr.ErrConnectionClosed) || re.Op != memdx.OpNoop {
		t.Fatalf("group at the connection's end: answered %v, %v; want a written ErrConnectionClosed", answered, err)
	}
	s.wantAnswers(t, 3, map[int]string{1: "B"})
	if c.Pending() != 0 || groupsLive(c) != 0 {
		t.Fatalf("pending %d, groups %d", c.Pending(), groupsLive(c))
	}
	tmpl := memdx.Request{OpCode: memdx.OpGetQ}
	if _, err := c.StartGets(time.Time{}, &tmpl, byteKeys("a"), s, n, 4, nil); !errors.Is(err, kverr.ErrConnectionClosed) {
		t.Fatalf("StartGets on an ended connection: %v, want ErrConnectionClosed", err)
	}
}

// Answers that do not fit a group's get are strays and never reach the
// sink: one with another opcode, one that arrives while the group is still
// queued (the server cannot have read it), and a second answer to the same
// get, which the sink refuses.
func TestStartGetsStrayAnswersDoNotReachTheSink(t *testing.T) {
	c, peer := dialPipe(t, Options{}, nil)
	n := make(tagNotifier, 4)
	s := newTestSink()
	keys := []string{"a", "b", "c"}
	c.Cork()
	pg := startGets(t, c, memdx.OpGetQ, keys, s, n, 5)
	early := memdx.Packet{Magic: memdx.MagicRes, OpCode: memdx.OpGetQ, Opaque: pg.Opaque - 1, Value: []byte("early")}
	peer.write(early)
	waitFor(t, "the early answer counted as a stray", func() bool { return c.Stats().StrayResponses == 1 })
	c.Uncork()
	reqs := readGroup(t, peer, pg, memdx.OpGetQ, keys)
	waitWritten(t, c, pg.Opaque)
	wrongOp := ok(reqs[0], "GET")
	wrongOp.OpCode = memdx.OpGet
	peer.write(wrongOp, ok(reqs[1], "B"), ok(reqs[1], "B again"), ok(reqs[3], ""))
	if tag := recv(t, (<-chan uint64)(n)); tag != 5 {
		t.Fatalf("tag %d", tag)
	}
	if answered, err := pg.Result(); !answered || err != nil {
		t.Fatalf("group: %v, %v", answered, err)
	}
	s.wantAnswers(t, 5, map[int]string{1: "B"})
	if _, k := s.answers(); k != 2 {
		t.Fatalf("sink offered %d answers, want 2 (get 1 and its repeat)", k)
	}
	if st := c.Stats(); st.StrayResponses != 3 || st.LateResponses != 0 || c.Err() != nil {
		t.Fatalf("stats %+v, err %v; want three strays (early, wrong opcode, repeat)", st, c.Err())
	}
	roundTrip(t, c, peer, "next")
}

// StartGets refuses what it cannot carry out, naming it, before anything
// is queued: an opcode other than GETQ and GETKQ, no keys, no sink or
// Notifier, a key the codec refuses (after keys it could encode). The
// server sees nothing of a refused group.
func TestStartGetsRefusesBadInputQueueingNothing(t *testing.T) {
	c, peer := dialPipe(t, Options{}, nil)
	n := make(tagNotifier, 4)
	s := newTestSink()
	long := strings.Repeat("k", math.MaxUint16+1)
	for _, tt := range []struct {
		name string
		op   memdx.OpCode
		keys [][]byte
		s    GetSink
		n    Notifier
		want string
	}{
		{"GET", memdx.OpGet, byteKeys("a"), s, n, "quiet gets"},
		{"SETQ", memdx.OpSetQ, byteKeys("a"), s, n, "quiet gets"},
		{"GATQ", memdx.OpGATQ, byteKeys("a"), s, n, "quiet gets"},
		{"no keys", memdx.OpGetQ, nil, s, n, "keys"},
		{"empty keys", memdx.OpGetQ, [][]byte{}, s, n, "keys"},
		{"no sink", memdx.OpGetQ, byteKeys("a"), nil, n, "sink"},
		{"no notifier", memdx.OpGetQ, byteKeys("a"), s, nil, "Notifier"},
		{"key too long", memdx.OpGetQ, byteKeys("a", long, "c"), s, n, "key"},
	} {
		tmpl := memdx.NewGet(nil)
		tmpl.OpCode = tt.op
		_, err := c.StartGets(time.Time{}, &tmpl, tt.keys, tt.s, tt.n, 1, nil)
		re := requestError(t, err)
		if !errors.Is(err, memdx.ErrInvalidRequest) || re.Written || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: %v; want a not-written ErrInvalidRequest naming %q", tt.name, err, tt.want)
		}
	}
	if c.Pending() != 0 || groupsLive(c) != 0 {
		t.Fatalf("pending %d, groups %d after refusals", c.Pending(), groupsLive(c))
	}
	roundTrip(t, c, peer, "next") // fails if the server read any refused group's get
	if _, k := s.answers(); k != 0 {
		t.Fatalf("sink called %d times", k)
	}
	noTag(t, n, "it was refused")
}

// A group counts as one request against MaxPending: on a full connection
// it is refused (ErrOverloaded, not written), and while it is in flight it
// fills one place, whatever its number of gets.
func TestStartGetsCountsAsOneRequestAgainstMaxPending(t *testing.T) {
	c, peer := dialPipe(t, Options{MaxPending: 2}, nil)
	n := make(tagNotifier, 4)
	s := newTestSink()
	keys := []string{"a", "b", "c", "d"}
	p1 := startGets(t, c, memdx.OpGetQ, keys, s, n, 1)
	r1 := readGroup(t, peer, p1, memdx.OpGetQ, keys)
	var v string
	pn := startGet(t, c, memdx.OpGet, "x", n, 2, &v) // the second place
	rx := peer.read()
	tmpl := memdx.Request{OpCode: memdx.OpGetQ}
	_, err := c.StartGets(time.Time{}, &tmpl, byteKeys("e"), s, n, 3, nil)
	if re := requestError(t, err); !errors.Is(err, kverr.ErrOverloaded) || re.Written {
		t.Fatalf("StartGets on a full connection: %v, want a not-written ErrOverloaded", err)
	}
	peer.write(ok(r1[4], ""), ok(rx, "X"))
	for range 2 {
		recv(t, (<-chan uint64)(n))
	}
	p1.Result()
	pn.Result()
	p3 := startGets(t, c, memdx.OpGetQ, []string{"e"}, s, n, 3)
	r3 := readGroup(t, peer, p3, memdx.OpGetQ, []string{"e"})
	peer.write(ok(r3[1], ""))
	if tag := recv(t, (<-chan uint64)(n)); tag != 3 {
		t.Fatalf("tag %d", tag)
	}
	if answered, err := p3.Result(); !answered || err != nil {
		t.Fatalf("group after the others ended: %v, %v", answered, err)
	}
}

// On a connection that negotiated unordered execution a NOOP does not
// settle quiet gets: StartGets refuses them.
func TestStartGetsRefusedUnderUnorderedExecution(t *testing.T) {
	mc := newMock(t, mockcluster.Options{})
	o := adminOpts(mockcluster.DefaultBucket)
	o.Features = []memdx.HelloFeature{memdx.FeatureUnorderedExecution}
	c := dialMemcached(t, mc.Node(0).Addr(), o)
	if !c.Features().Has(memdx.FeatureUnorderedExecution) {
		t.Fatalf("features %v: unordered execution not negotiated", c.Features())
	}
	tmpl := memdx.Request{OpCode: memdx.OpGetQ}
	_, err := c.StartGets(time.Time{}, &tmpl, byteKeys("a"), newTestSink(), make(tagNotifier, 1), 1, nil)
	if re := requestError(t, err); !errors.Is(err, memdx.ErrInvalidRequest) || re.Written || !strings.Contains(err.Error(), "unordered") {
		t.Fatalf("StartGets under unordered execution: %v", err)
	}
	if c.Pending() != 0 {
		t.Fatalf("%d pending", c.Pending())
	}
}

// setOpaque makes c hand out opaques after o next, as if it had wrapped.
func setOpaque(c *Conn, o uint32, wrapped bool) {
	c.mu.Lock()
	c.inflight.opaque, c.inflight.wrapped = o, wrapped
	c.mu.Unlock()
}

// span is the opaques a group uses: its gets' and its NOOP's.
type span struct{ first, last uint32 }

func (s span) has(o uint32) bool { return s.first <= o && o <= s.last }

func groupSpan(pg Pending, n int) span { return span{pg.Opaque - uint32(n), pg.Opaque} }

// A group takes a run of consecutive opaques that never holds 0 (a run
// that would wrap starts again from 1) and, once the opaques have
// wrapped, overlaps no opaque in use: a pending request's, or any of
// another live group's, whose gets are not in pending. Nor does a single
// request take one of a live group's gets' opaques. Answers still go to
// the right group.
func TestStartGetsReservesOpaquesNoneZeroNoneInUse(t *testing.T) {
	c, peer := dialPipe(t, Options{}, nil)
	n := make(tagNotifier, 8)
	ctx := testCtx(t)

	// A request in flight with opaque 1.
	setOpaque(c, 0, true)
	held := goGet(ctx, c, "held")
	rh := peer.read()
	if rh.Opaque != 1 {
		t.Fatalf("held GET has opaque %d, want 1", rh.Opaque)
	}

	// Near the top, a group of 3 gets (4 opaques) would wrap: it starts
	// again from 1, past the held request.
	setOpaque(c, math.MaxUint32-2, false)
	s1 := newTestSink()
	k1 := []string{"a", "b", "c"}
	p1 := startGets(t, c, memdx.OpGetQ, k1, s1, n, 1)
	r1 := readGroup(t, peer, p1, memdx.OpGetQ, k1)
	g1 := groupSpan(p1, len(k1))
	if g1.has(0) || g1.has(rh.Opaque) || g1.first > g1.last {
		t.Fatalf("group 1 takes opaques %d..%d: it holds 0 or the held request's %d", g1.first, g1.last, rh.Opaque)
	}

	// Wrapped again: a second group must go past the held request and all
	// of group 1 (its gets are not in pending).
	setOpaque(c, 0, true)
	s2 := newTestSink()
	k2 := []string{"d", "e"}
	p2 := startGets(t, c, memdx.OpGetQ, k2, s2, n, 2)
	r2 := readGroup(t, peer, p2, memdx.OpGetQ, k2)
	g2 := groupSpan(p2, len(k2))
	for o := g2.first; o <= g2.last; o++ {
		if o == 0 || o == rh.Opaque || g1.has(o) {
			t.Fatalf("group 2 takes opaques %d..%d; held %d, group 1 %d..%d", g2.first, g2.last, rh.Opaque, g1.first, g1.last)
		}
	}

	// Wrapped again: a single request skips both groups' gets.
	setOpaque(c, 0, true)
	single := goGet(ctx, c, "single")
	rs := peer.read()
	if rs.Opaque == 0 || rs.Opaque == rh.Opaque || g1.has(rs.Opaque) || g2.has(rs.Opaque) {
		t.Fatalf("GET after the groups has opaque %d; held %d, groups %d..%d and %d..%d",
			rs.Opaque, rh.Opaque, g1.first, g1.last, g2.first, g2.last)
	}

	// Each answer reaches its own.
	peer.write(ok(r1[1], "B"), ok(r2[0], "D"), ok(rs, "S"), ok(rh, "H"), ok(r1[3], ""), ok(r2[2], ""))
	for _, ch := range []<-chan result{single, held} {
		if r := recv(t, ch); r.err != nil || r.calls != 1 {
			t.Fatalf("GET: %+v", r)
		}
	}
	for range 2 {
		recv(t, (<-chan uint64)(n))
	}
	for i, p := range []Pending{p1, p2} {
		if answered, err := p.Result(); !answered || err != nil {
			t.Fatalf("group %d: %v, %v", i+1, answered, err)
		}
	}
	s1.wantAnswers(t, 1, map[int]string{1: "B"})
	s2.wantAnswers(t, 2, map[int]string{0: "D"})
	if st := c.Stats(); st.StrayResponses != 0 || c.Pending() != 0 || groupsLive(c) != 0 {
		t.Fatalf("stats %+v, pending %d, groups %d", st, c.Pending(), groupsLive(c))
	}
}

// A group may end on the last opaque (its NOOP's 0xffffffff): its gets'
// answers are still matched, and the next request wraps to a non-zero
// opaque. A group whose run would start at 0 starts at 1.
func TestStartGetsAtTheTopOfTheOpaques(t *testing.T) {
	c, peer := dialPipe(t, Options{}, nil)
	n := make(tagNotifier, 4)
	s := newTestSink()
	keys := []string{"a", "b", "c"}
	setOpaque(c, math.MaxUint32-uint32(len(keys))-1, false)
	pg := startGets(t, c, memdx.OpGetQ, keys, s, n, 1)
	if pg.Opaque != math.MaxUint32 {
		t.Fatalf("group's NOOP opaque %d, want %d", pg.Opaque, uint32(math.MaxUint32))
	}
	reqs := readGroup(t, peer, pg, memdx.OpGetQ, keys)
	peer.write(ok(reqs[2], "C"), ok(reqs[3], ""))
	recv(t, (<-chan uint64)(n))
	if answered, err := pg.Result(); !answered || err != nil {
		t.Fatalf("group: %v, %v", answered, err)
	}
	s.wantAnswers(t, 1, map[int]string{2: "C"})

	ch := goGet(testCtx(t), c, "next")
	rn := peer.read()
	peer.write(ok(rn, "N"))
	if r := recv(t, ch); r.err != nil || rn.Opaque == 0 {
		t.Fatalf("GET after the top: opaque %d, %+v", rn.Opaque, r)
	}

	setOpaque(c, math.MaxUint32, true)
	s2 := newTestSink()
	p2 := startGets(t, c, memdx.OpGetQ, []string{"x"}, s2, n, 2)
	if g := groupSpan(p2, 1); g.has(0) || g.first != 1 {
		t.Fatalf("group after the top takes %d..%d, want 1..2", g.first, g.last)
	}
	r2 := readGroup(t, peer, p2, memdx.OpGetQ, []string{"x"})
	peer.write(ok(r2[0], "X"), ok(r2[1], ""))
	recv(t, (<-chan uint64)(n))
	if answered, err := p2.Result(); !answered || err != nil {
		t.Fatalf("group 2: %v, %v", answered, err)
	}
	s2.wantAnswers(t, 2, map[int]string{0: "X"})
}

// A group larger than one Write call (writeChunk) is answered while the
// writer is still writing it: answers to gets the server has read are the
// sink's, though the group's last bytes are not yet written.
func TestStartGetsLargerThanOneWriteTakesAnswersWhileSending(t *testing.T) {
	if pipeOverTCP {
		t.Skip("needs net.Pipe, whose writes wait for the reader: a socket buffer takes the group at once")
	}
	c, peer := dialPipe(t, Options{}, nil)
	n := make(tagNotifier, 4)
	s := newTestSink()
	keys := make([]string, 400)
	for i := range keys {
		keys[i] = fmt.Sprintf("%0200d", i)
	}
	pg := startGets(t, c, memdx.OpGetQ, keys, s, n, 1)
	first := peer.read()
	if string(first.Key) != keys[0] {
		t.Fatalf("first get %q", first.Key)
	}
	peer.write(ok(first, "V0"))
	waitFor(t, "get 0 in the sink", func() bool { _, k := s.answers(); return k == 1 })
	c.mu.Lock()
	state := callOf(c, pg.Opaque).state
	c.mu.Unlock()
	if state != reqSending {
		t.Fatalf("group %s when its first answer was taken; the test needs it still sending", state)
	}
	var last memdx.Packet
	for range keys {
		last = peer.read()
	}
	if last.OpCode != memdx.OpNoop || last.Opaque != pg.Opaque {
		t.Fatalf("last request %s opaque %d", last.OpCode, last.Opaque)
	}
	peer.write(ok(last, ""))
	recv(t, (<-chan uint64)(n))
	if answered, err := pg.Result(); !answered || err != nil {
		t.Fatalf("group: %v, %v", answered, err)
	}
	s.wantAnswers(t, 1, map[int]string{0: "V0"})
	if st := c.Stats(); st.StrayResponses != 0 || st.Writes < 2 {
		t.Fatalf("stats %+v: want no stray, the group in more than one write", st)
	}
}

// Against memcached: hits (GETKQ, with their keys) reach the sink, misses
// do not, a key asked twice is answered twice, and the NOOP's answer ends
// the group; a group of thousands of keys, spanning many writes, gets
// every hit and no stray.
func TestMemcachedStartGets(t *testing.T) {
	c := dialMemcached(t, plainAddr(t), Options{Memcached: true})
	k := func(i int) []byte { return uniqueKey(t, strconv.Itoa(i)) }
	keys := make([][]byte, 3000)
	want := map[int]string{}
	for i := range keys {
		keys[i] = k(i)
		if i%3 == 1 {
			continue // a miss
		}
		set := memdx.NewStore(memdx.OpSet, keys[i], []byte("v"+strconv.Itoa(i)), 0, 0)
		if err := c.Do(testCtx(t), &set, nil); err != nil {
			t.Fatal(err)
		}
		want[i] = "v" + strconv.Itoa(i)
	}
	for _, tt := range []struct {
		name string
		keys [][]byte
		want map[int]string
	}{
		{"small", [][]byte{keys[0], keys[1], keys[2], keys[0]}, map[int]string{0: want[0], 2: want[2], 3: want[0]}},
		{"large", keys, want},
	} {
		n := make(tagNotifier, 1)
		s := newTestSink()
		tmpl := memdx.NewGet(nil)
		tmpl.OpCode = memdx.OpGetKQ
		strays := c.Stats().StrayResponses
		pg, err := c.StartGets(time.Now().Add(testTimeout), &tmpl, tt.keys, s, n, 1, nil)
		if err != nil {
			t.Fatal(err)
		}
		recv(t, (<-chan uint64)(n))
		if answered, err := pg.Result(); !answered || err != nil {
			t.Fatalf("%s: %v, %v", tt.name, answered, err)
		}
		s.wantAnswers(t, 1, tt.want)
		got, _ := s.answers()
		for i, a := range got {
			if a.key != string(tt.keys[i]) {
				t.Fatalf("%s: get %d answered with key %q, want %q", tt.name, i, a.key, tt.keys[i])
			}
		}
		if st := c.Stats(); st.StrayResponses != strays {
			t.Fatalf("%s: %d strays", tt.name, st.StrayResponses-strays)
		}
	}
}

// Once the opaques have wrapped, a group whose run would hold an opaque in
// use starts past it: reserving a run of 1<<15 opaques whose first try
// ends on a request in flight takes one pass over the run, not a pass per
// opaque slid (which is about 5e8 map lookups under the connection's lock,
// seconds).
func TestStartGetsReservationSkipsPastAnOpaqueInUse(t *testing.T) {
	c, peer := dialPipe(t, Options{}, nil)
	const n = 1 << 15
	setOpaque(c, n-1, true)
	held := goGet(testCtx(t), c, "held")
	rh := peer.read()
	if rh.Opaque != n {
		t.Fatalf("held GET has opaque %d, want %d", rh.Opaque, n)
	}
	c.mu.Lock()
	c.inflight.opaque = 0
	probes := c.inflight.reserveProbes
	base := c.inflight.reserve(n + 1) // 1..n+1 holds the held GET's
	probes = c.inflight.reserveProbes - probes
	c.mu.Unlock()
	if base != n+1 {
		t.Fatalf("run starts at %d, want %d (just past the opaque in use)", base, n+1)
	}
	// One pass over each run tried: the run that meets the GET's opaque
	// (from its top down to it), then the free run after it. Sliding by
	// one opaque per try rescanned the run each time: about n²/2.
	if limit := 2*(n+1) + 2; probes > limit {
		t.Fatalf("reserving %d opaques past one in use made %d pending lookups, want at most %d", n+1, probes, limit)
	}
	peer.write(ok(rh, "H"))
	if r := recv(t, held); r.err != nil {
		t.Fatal(r.err)
	}
}

// serveGroups answers, until the connection ends, as memcached does: a
// GETQ or GETKQ whose key starts with "h" with the key as its value (a
// miss: nothing), a GET and a NOOP always; all answers to one read in one
// write.
func serveGroups(p *peer) {
	var out []memdx.Packet
	for {
		pkt, err := p.tryRead()
		if err != nil {
			return
		}
		switch pkt.OpCode {
		case memdx.OpGetQ, memdx.OpGetKQ:
			if len(pkt.Key) > 0 && pkt.Key[0] == 'h' {
				r := ok(pkt, string(pkt.Key))
				if pkt.OpCode == memdx.OpGetKQ {
					r.Key = pkt.Key
				}
				out = append(out, r)
			}
		default:
			out = append(out, ok(pkt, ""))
		}
		if len(p.buf) < memdx.HeaderSize && len(out) > 0 { // nothing more read: answer
			var b []byte
			for i := range out {
				b, _ = memdx.AppendPacket(b, &out[i])
			}
			out = out[:0]
			if _, err := p.nc.Write(b); err != nil {
				return
			}
		}
	}
}

// raceSink is a testSink that records a call made after its group was
// given up (closed).
type raceSink struct {
	testSink
	closed atomic.Bool
	late   atomic.Int32
}

func (s *raceSink) GetAnswer(tag uint64, i int, p *memdx.Packet) (bool, error) {
	if s.closed.Load() {
		s.late.Add(1)
	}
	return s.testSink.GetAnswer(tag, i, p)
}

// Groups started from several goroutines, some cancelled at once, some
// with deadlines that race their answers: a group answered has exactly
// its hits in its sink; no sink is called once Cancel has returned or its
// group's failure has been reported; every group's outcome arrives once;
// nothing is left pending.
func TestStartGetsConcurrentCancelsAndExpiries(t *testing.T) {
	c, peer := dialPipe(t, Options{ProbeAfter: -1}, nil)
	go serveGroups(peer)
	const workers, rounds = 4, 150
	var wg sync.WaitGroup
	var mu sync.Mutex
	var sinks []*raceSink
	var nWithdrawn, nAbandoned, nExpired, nAnswered atomic.Int32
	notifiers := make([]tagNotifier, workers)
	for w := range workers {
		notifiers[w] = make(tagNotifier, 1)
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 1))
			n := notifiers[w]
			for r := range rounds {
				keys := make([]string, 1+rng.IntN(20))
				hits := map[int]string{}
				for i := range keys {
					keys[i] = fmt.Sprintf("m%d-%d-%d", w, r, i)
					if rng.IntN(2) == 0 {
						keys[i] = "h" + keys[i][1:]
						hits[i] = keys[i]
					}
				}
				var deadline time.Time
				if rng.IntN(3) == 0 {
					deadline = time.Now().Add(time.Duration(rng.IntN(200)) * time.Microsecond)
				}
				s := &raceSink{testSink: testSink{got: map[int]getAnswer{}}}
				mu.Lock()
				sinks = append(sinks, s)
				mu.Unlock()
				tmpl := memdx.Request{OpCode: memdx.OpGetQ}
				if rng.IntN(2) == 0 {
					tmpl.OpCode = memdx.OpGetKQ
				}
				pg, err := c.StartGets(deadline, &tmpl, byteKeys(keys...), s, n, uint64(r), nil)
				if err != nil {
					t.Errorf("StartGets: %v", err)
					return
				}
				if rng.IntN(3) == 0 {
					for range rng.IntN(40) { // let the writer and reader get on
						runtime.Gosched()
					}
					if err, ended := pg.Cancel(context.Canceled); !ended {
						s.closed.Store(true)
						if requestError(t, err).Written {
							nAbandoned.Add(1)
						} else {
							nWithdrawn.Add(1)
						}
						continue
					}
				}
				select {
				case tag := <-n:
					if tag != uint64(r) {
						t.Errorf("tag %d, want %d", tag, r)
						return
					}
				case <-time.After(testTimeout):
					t.Errorf("group %d of worker %d never ended", r, w)
					return
				}
				answered, err := pg.Result()
				if !answered {
					s.closed.Store(true)
					if !errors.Is(err, context.DeadlineExceeded) {
						t.Errorf("group unanswered: %v", err)
					}
					nExpired.Add(1)
					continue
				}
				if err != nil {
					t.Errorf("group answered with %v", err)
				}
				nAnswered.Add(1)
				got, _ := s.answers()
				if len(got) != len(hits) {
					t.Errorf("sink has %d answers, want the %d hits", len(got), len(hits))
				}
				for i, v := range hits {
					if got[i].value != v {
						t.Errorf("get %d: %+v, want %q", i, got[i], v)
					}
				}
				s.closed.Store(true)
			}
		}()
	}
	wg.Wait()
	t.Logf("groups: %d answered, %d expired, %d withdrawn, %d abandoned; %d strays",
		nAnswered.Load(), nExpired.Load(), nWithdrawn.Load(), nAbandoned.Load(), c.Stats().StrayResponses)
	// The server answers every NOOP it reads: the tombstones go.
	waitFor(t, "no tombstone left", func() bool { return c.Pending() == 0 && groupsLive(c) == 0 })
	for _, n := range notifiers {
		noTag(t, n, "after every group's outcome was taken")
	}
	for i, s := range sinks {
		if k := s.late.Load(); k != 0 {
			t.Errorf("sink %d was called %d times after its group was given up or ended", i, k)
		}
	}
	if c.Err() != nil {
		t.Fatal(c.Err())
	}
}

// With many groups in flight, finding the group of each answer costs one
// pass over the groups per group answered, not per answer: a group's
// answers come one after another, and the group found last is tried
// first. An answer for a group that has ended is a stray, though the
// group was the last one found.
func TestStartGetsFindsEachAnswersGroupWithoutScanningPerAnswer(t *testing.T) {
	c, peer := dialPipe(t, Options{}, nil)
	const groups, keysPer = 64, 32
	n := make(tagNotifier, groups)
	s := newTestSink()
	keys := make([]string, keysPer)
	for i := range keys {
		keys[i] = fmt.Sprint("k", i)
	}
	pgs := make([]Pending, groups)
	reqs := make([][]memdx.Packet, groups)
	for g := range groups {
		pgs[g] = startGets(t, c, memdx.OpGetQ, keys, s, n, uint64(g))
		reqs[g] = readGroup(t, peer, pgs[g], memdx.OpGetQ, keys)
	}
	c.mu.Lock()
	probes := c.inflight.groupProbes
	c.mu.Unlock()
	// Answer the groups newest first: each is found at the far end of a
	// scan the first time, and from the cache after.
	for g := groups - 1; g >= 0; g-- {
		var answers []memdx.Packet
		for i := range keysPer {
			answers = append(answers, ok(reqs[g][i], "v"))
		}
		peer.write(answers...)
	}
	waitFor(t, "every answer in the sink", func() bool { _, k := s.answers(); return k == groups*keysPer })
	c.mu.Lock()
	probes = c.inflight.groupProbes - probes
	c.mu.Unlock()
	if limit := groups * groups; probes > limit {
		t.Fatalf("%d groups compared for %d answers in %d groups; want at most %d (a scan per group)", probes, groups*keysPer, groups, limit)
	}

	// Group 0 was found last. End it, then answer one of its gets again.
	peer.write(ok(reqs[0][keysPer], ""))
	if tag := recv(t, (<-chan uint64)(n)); tag != 0 {
		t.Fatalf("tag %d ended, want 0", tag)
	}
	strays := c.Stats().StrayResponses
	peer.write(ok(reqs[0][3], "after the end"))
	waitFor(t, "the stray", func() bool { return c.Stats().StrayResponses == strays+1 })
	if _, k := s.answers(); k != groups*keysPer {
		t.Fatalf("the sink was offered %d answers, want %d: an answer after its group ended reached it", k, groups*keysPer)
	}
	for g := 1; g < groups; g++ {
		peer.write(ok(reqs[g][keysPer], ""))
	}
	for range groups - 1 {
		recv(t, (<-chan uint64)(n))
	}
	roundTrip(t, c, peer, "next")
}
