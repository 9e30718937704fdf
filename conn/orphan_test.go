package conn

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kvwire/kvwire/memdx"
	"github.com/kvwire/kvwire/mockcluster"
)

// orphans collects what Options.OnOrphan is told. Each call checks that
// the connection's lock is free: OnOrphan runs after the reader has
// released it, so a hook that takes time holds up no caller.
type orphans struct {
	t  *testing.T
	c  *Conn // set once dialled
	mu sync.Mutex
	ch chan Orphan
}

func newOrphans(t *testing.T) *orphans { return &orphans{t: t, ch: make(chan Orphan, 16)} }

func (o *orphans) hook(x Orphan) {
	o.mu.Lock()
	c := o.c
	o.mu.Unlock()
	if c != nil {
		free := false
		// Another goroutine (the writer, a caller) may hold the lock for
		// a moment; the reader itself holding it would never let go.
		for range 1000 {
			if c.mu.TryLock() {
				c.mu.Unlock()
				free = true
				break
			}
			runtime.Gosched()
		}
		if !free {
			o.t.Errorf("OnOrphan called with the connection's lock held")
		}
	}
	o.ch <- x
}

func (o *orphans) set(c *Conn) {
	o.mu.Lock()
	o.c = c
	o.mu.Unlock()
}

// next returns the next orphan reported.
func (o *orphans) next(t *testing.T) Orphan {
	t.Helper()
	return recv(t, (<-chan Orphan)(o.ch))
}

// none fails the test if an orphan was reported.
func (o *orphans) none(t *testing.T, why string) {
	t.Helper()
	select {
	case x := <-o.ch:
		t.Fatalf("orphan %+v reported: %s", x, why)
	default:
	}
}

// lateAnswer is a success answer to req carrying the server's duration.
func lateAnswer(req memdx.Packet, server time.Duration) memdx.Packet {
	r := ok(req, "late")
	r.Magic = memdx.MagicResExt
	r.FramingExtras = memdx.AppendServerDurationFrame(nil, server)
	return r
}

// A request that expired after it was written is a tombstone; its late
// answer is an orphan: OnOrphan gets what the request's Origin said (as it
// was when the request was abandoned: the caller may reuse its Origin at
// once), the opcode, opaque and status, the connection's id and sockets,
// when it was abandoned and when the answer came, and the server's
// duration; with the lock released. The connection's last activity moves
// to the answer's arrival. An answer in time is no orphan.
func TestLateAnswerToAnExpiredRequestIsAnOrphan(t *testing.T) {
	fc := newFakeClock()
	o := newOrphans(t)
	c, p := dialPipe(t, Options{clock: fc, ProbeAfter: -1, OnOrphan: o.hook}, nil)
	o.set(c)
	if got := c.LastActivity(); !got.Equal(fc.Now()) {
		t.Fatalf("last activity after the bootstrap %v, want %v", got, fc.Now())
	}
	sent := fc.Now().Add(-3 * time.Millisecond) // the caller read its clock before
	from := Origin{Operation: "get", Sent: sent, Timeout: 50 * time.Millisecond}
	done := make(chan error, 1)
	req := memdx.NewGet([]byte("slow"))
	go func() {
		_, err := c.DoDeadline(context.Background(), fc.Now().Add(50*time.Millisecond), &req, nil, &from)
		done <- err
	}()
	r := p.read()
	waitFor(t, "the deadline's timer", func() bool { return fc.armedWithin(50 * time.Millisecond) })
	fc.Advance(50 * time.Millisecond)
	abandoned := fc.Now()
	if err := recv(t, done); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("DoDeadline: %v, want DeadlineExceeded", err)
	}
	from = Origin{Operation: "upsert"} // the caller's next request
	o.none(t, "no answer yet")

	fc.Advance(700 * time.Millisecond)
	p.write(lateAnswer(r, 740*time.Millisecond))
	x := o.next(t)
	want := Orphan{Origin: Origin{Operation: "get", Sent: sent, Timeout: 50 * time.Millisecond},
		OpCode: memdx.OpGet, Opaque: r.Opaque, Status: memdx.StatusSuccess, ConnID: c.ID(),
		LocalAddr: c.nc.LocalAddr().String(), RemoteAddr: c.nc.RemoteAddr().String(), Abandoned: abandoned, Arrived: fc.Now(), HasServerDuration: true}
	got := x
	got.ServerDuration = 0
	if got != want {
		t.Fatalf("orphan\n%+v\nwant\n%+v", got, want)
	}
	// The 2-byte encoding is within 0.2% at this magnitude.
	if d := x.ServerDuration; d < 738*time.Millisecond || d > 742*time.Millisecond {
		t.Fatalf("server duration %v, want about 740ms", d)
	}
	if got := c.LastActivity(); !got.Equal(fc.Now()) {
		t.Fatalf("last activity %v, want the late answer's arrival %v", got, fc.Now())
	}
	if s := c.Stats(); s.LateResponses != 1 || s.Abandoned != 0 {
		t.Fatalf("stats %+v: want one late answer, no tombstone left", s)
	}

	// In time: no orphan; the request's Sent is the last activity.
	sent2 := fc.Now().Add(time.Second)
	from2 := Origin{Operation: "get", Sent: sent2}
	go func() {
		_, err := c.DoDeadline(context.Background(), fc.Now().Add(time.Minute), &req, nil, &from2)
		done <- err
	}()
	p.write(ok(p.read(), ""))
	if err := recv(t, done); err != nil {
		t.Fatal(err)
	}
	o.none(t, "the answer came in time")
	if got := c.LastActivity(); !got.Equal(sent2) {
		t.Fatalf("last activity %v, want the last request's Sent %v", got, sent2)
	}
}

// A request its caller cancelled after it was written (ctx), without an
// Origin, is an orphan when its answer comes: the zero Origin, no server
// duration when the answer carries none. A multi-packet answer's orphan is
// its last packet, once.
func TestLateAnswerToACancelledRequestIsAnOrphan(t *testing.T) {
	o := newOrphans(t)
	c, p := dialPipe(t, Options{ProbeAfter: -1, OnOrphan: o.hook}, nil)
	for _, op := range []memdx.OpCode{memdx.OpGet, memdx.OpStat} {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		req := memdx.Request{OpCode: op, Key: []byte("k")}
		go func() { done <- c.Do(ctx, &req, nil) }()
		r := p.read()
		cancel()
		if err := recv(t, done); !errors.Is(err, context.Canceled) || !requestError(t, err).Written {
			t.Fatalf("%s: %v, want a written Canceled", op, err)
		}
		if op == memdx.OpStat {
			stat := ok(r, "1")
			stat.Key = []byte("uptime")
			p.write(stat, stat)
			o.none(t, "a statistic is not STAT's last packet")
		}
		p.write(ok(r, ""))
		x := o.next(t)
		if x.Origin != (Origin{}) || x.OpCode != op || x.Opaque != r.Opaque || x.HasServerDuration || x.ServerDuration != 0 {
			t.Fatalf("%s: orphan %+v", op, x)
		}
		if x.Arrived.Before(x.Abandoned) {
			t.Fatalf("%s: arrived %v before it was abandoned %v", op, x.Arrived, x.Abandoned)
		}
	}
	o.none(t, "one orphan per request")
}

// A batch's requests (Start, StartGets) that their caller cancelled after
// they were written are orphans when answered: a group of gets is one,
// its NOOP's answer, with the group's Origin; its gets' late answers are
// not orphans of their own. A quiet request settled by a NOOP (no answer
// came) is none.
func TestLateAnswersToABatchAreOrphans(t *testing.T) {
	o := newOrphans(t)
	c, peer := dialPipe(t, Options{ProbeAfter: -1, OnOrphan: o.hook}, nil)
	n := make(tagNotifier, 8)

	from := Origin{Operation: "get", Timeout: time.Second}
	get := memdx.NewGet([]byte("one"))
	pg, err := c.Start(time.Time{}, &get, nil, n, 1, &from)
	if err != nil {
		t.Fatal(err)
	}
	r := peer.read()
	waitWritten(t, c, pg.Opaque)
	if _, ended := pg.Cancel(context.Canceled); ended {
		t.Fatal("ended before its answer")
	}
	peer.write(ok(r, "V"))
	if x := o.next(t); x.Origin != from || x.OpCode != memdx.OpGet || x.Opaque != r.Opaque {
		t.Fatalf("orphan %+v of a started request", x)
	}

	groupFrom := Origin{Operation: "get_many", Timeout: 2 * time.Second}
	tmpl := memdx.NewGet(nil)
	tmpl.OpCode = memdx.OpGetQ
	s := newTestSink()
	keys := []string{"a", "b", "c"}
	gp, err := c.StartGets(time.Time{}, &tmpl, byteKeys(keys...), s, n, 2, &groupFrom)
	if err != nil {
		t.Fatal(err)
	}
	reqs := readGroup(t, peer, gp, memdx.OpGetQ, keys)
	waitWritten(t, c, gp.Opaque)
	if _, ended := gp.Cancel(context.Canceled); ended {
		t.Fatal("the group ended before its answer")
	}
	peer.write(ok(reqs[0], "A"), ok(reqs[2], "C"))
	o.none(t, "a group's gets' answers are part of the group's")
	peer.write(ok(reqs[3], ""))
	if x := o.next(t); x.Origin != groupFrom || x.OpCode != memdx.OpNoop || x.Opaque != gp.Opaque {
		t.Fatalf("orphan %+v of a group", x)
	}

	// A quiet get abandoned, then settled by a NOOP: no answer arrived.
	q := memdx.NewGet([]byte("q"))
	q.OpCode = memdx.OpGetQ
	pq, err := c.Start(time.Time{}, &q, nil, n, 3, &from)
	if err != nil {
		t.Fatal(err)
	}
	peer.read()
	waitWritten(t, c, pq.Opaque)
	pq.Cancel(context.Canceled)
	noop := memdx.Request{OpCode: memdx.OpNoop}
	pn, err := c.Start(time.Time{}, &noop, nil, n, 4, nil)
	if err != nil {
		t.Fatal(err)
	}
	peer.write(ok(peer.read(), ""))
	recv(t, (<-chan uint64)(n))
	if _, err := pn.Result(); err != nil {
		t.Fatal(err)
	}
	o.none(t, "a settled quiet request had no answer")
	noTag(t, n, "its caller cancelled it")
}

// Options.ClientID prefixes the connection's id, which HELLO carries to
// the server: "<client id>/<16 hex digits>", RFC 0067's local id, cut to
// fit HELLO's 33 bytes.
func TestClientIDPrefixesTheConnectionID(t *testing.T) {
	for _, tc := range []struct{ clientID, prefix string }{
		{"", ""},
		{"66388CF5BFCF7522", "66388CF5BFCF7522/"},
		{"0123456789abcdefXYZ", "0123456789abcdef/"},
		// Cut at a character's start, not inside it: the id HELLO
		// carries (JSON, valid UTF-8) is then the one ID reports.
		{"aéééééééé", "aééééééé/"},
	} {
		f := &fakeNode{}
		c, err := dialFake(t, f, Options{ClientID: tc.clientID})
		if err != nil {
			t.Fatal(err)
		}
		id := c.ID()
		if !strings.HasPrefix(id, tc.prefix) || len(id) != len(tc.prefix)+16 {
			t.Errorf("client id %q: connection id %q, want %q and 16 hex digits", tc.clientID, id, tc.prefix)
		}
		f.mu.Lock()
		ids := f.helloIDs
		f.mu.Unlock()
		if len(ids) != 1 || ids[0] != id {
			t.Errorf("client id %q: HELLO carried %q, want %q", tc.clientID, ids, id)
		}
	}
}

// Over TCP the connection's sockets are its addresses: the remote one is
// the node's listener, the local one the client's port.
func TestConnectionAddresses(t *testing.T) {
	mc := newMock(t, mockcluster.Options{})
	c := dialMemcached(t, mc.Node(0).Addr(), adminOpts(mockcluster.DefaultBucket))
	if c.RemoteAddr() != mc.Node(0).Addr() {
		t.Errorf("remote %q, want the node's %q", c.RemoteAddr(), mc.Node(0).Addr())
	}
	if l := c.LocalAddr(); l == "" || l == c.RemoteAddr() || !strings.HasPrefix(l, "127.0.0.1:") {
		t.Errorf("local %q", l)
	}
}
