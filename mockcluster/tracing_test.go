package mockcluster

import (
	"testing"
	"time"

	"github.com/kvwire/kvwire/memdx"
)

// tracedFeatures are stdFeatures plus HELLO Tracing.
func tracedFeatures(extra ...memdx.HelloFeature) []memdx.HelloFeature {
	fs := append([]memdx.HelloFeature{memdx.FeatureTracing}, stdFeatures...)
	return append(fs, extra...)
}

// precision is the most the 2-byte encoding moves a duration of the
// magnitudes these tests use (100 ms and more: under 0.1%).
const precision = 0.002

// serverDuration returns p's server duration, failing the test when it has
// none.
func serverDuration(t *testing.T, p memdx.Packet) time.Duration {
	t.Helper()
	d, ok := p.ServerDuration()
	if !ok {
		t.Fatalf("%s %s response (magic %s, framing % x) has no server duration", p.OpCode, p.Status, p.Magic, p.FramingExtras)
	}
	return d
}

// The HELLO that grants Tracing is answered classic; from then on every
// response carries the server duration as its first frame info (magic
// 0x18), errors and bootstrap commands too. A connection without Tracing
// gets classic responses.
func TestTracingFramesEveryResponse(t *testing.T) {
	c := newCluster(t, Options{Nodes: 1})
	b := c.Bucket(DefaultBucket)
	cl := dialRaw(t, c.Node(0).Addr())
	p := cl.do(memdx.NewHello(memdx.HelloKey("mocktest", "1"), tracedFeatures()))
	if p.Status != memdx.StatusSuccess || p.Magic != memdx.MagicRes {
		t.Fatalf("HELLO granting Tracing answered %s with magic %s, want SUCCESS, classic", p.Status, p.Magic)
	}
	cl.feats = map[memdx.HelloFeature]bool{memdx.FeatureCollections: true}
	if st := cl.authPlain(DefaultUser, DefaultPassword); st != memdx.StatusSuccess {
		t.Fatalf("auth: %s", st)
	}
	for _, r := range []memdx.Request{
		memdx.NewSelectBucket(DefaultBucket),
		keyReq(cl, b, memdx.NewStore(memdx.OpSet, []byte("k"), []byte("v"), 0, 0)),
		keyReq(cl, b, memdx.NewGet([]byte("k"))),
		keyReq(cl, b, memdx.NewGet([]byte("missing"))),
		memdx.NewNoop(),
	} {
		p := cl.do(r)
		if p.Magic != memdx.MagicResExt || len(p.FramingExtras) != 3 {
			t.Errorf("%s: magic %s framing % x, want 0x18 with one 3-byte frame", r.OpCode, p.Magic, p.FramingExtras)
		}
		if d := serverDuration(t, p); d < 0 || d > time.Minute {
			t.Errorf("%s: server duration %v", r.OpCode, d)
		}
	}

	plain := bootstrap(t, c.Node(0).Addr(), DefaultBucket, nil)
	if p := plain.do(keyReq(plain, b, memdx.NewGet([]byte("k")))); p.Magic != memdx.MagicRes || len(p.FramingExtras) != 0 {
		t.Errorf("without Tracing: magic %s framing % x, want a classic response", p.Magic, p.FramingExtras)
	}
}

// A delay a fault injects is part of the server duration, on an ordered
// connection (held in its goroutine) and an unordered one (released by a
// timer): the duration is at least the delay and at most the round trip
// the client measured around it.
func TestTracingDurationIncludesInjectedDelay(t *testing.T) {
	const delay = 150 * time.Millisecond
	forEachOrdering(t, func(t *testing.T, extra []memdx.HelloFeature) {
		c := newCluster(t, Options{Nodes: 1})
		b := c.Bucket(DefaultBucket)
		cl := bootstrap(t, c.Node(0).Addr(), DefaultBucket, tracedFeatures(extra...))
		if _, err := b.Set("", "", "slow", []byte("v"), 0, 0); err != nil {
			t.Fatal(err)
		}
		h := c.AddFault(Fault{Match: Match{OpCodes: []memdx.OpCode{memdx.OpGet}, Key: "slow"},
			Action: Action{Delay: delay}, Times: 1})
		defer h.Remove()
		start := time.Now()
		p := cl.do(keyReq(cl, b, memdx.NewGet([]byte("slow"))))
		rtt := time.Since(start)
		if p.Status != memdx.StatusSuccess {
			t.Fatalf("GET: %s", p.Status)
		}
		d := serverDuration(t, p)
		if float64(d) < float64(delay)*(1-precision) || float64(d) > float64(rtt)*(1+precision) {
			t.Errorf("server duration %v, want at least the %v delay and at most the %v round trip", d, delay, rtt)
		}
		// The next request is timed on its own.
		if d2 := serverDuration(t, cl.do(memdx.NewNoop())); d2 >= delay {
			t.Errorf("the NOOP after the delayed GET reports %v", d2)
		}
	})
}

// forEachOrdering runs f as a subtest on an ordered connection and on one
// that negotiated UnorderedExecution (extra is the feature to add).
func forEachOrdering(t *testing.T, f func(t *testing.T, extra []memdx.HelloFeature)) {
	t.Run("ordered", func(t *testing.T) { f(t, nil) })
	t.Run("unordered", func(t *testing.T) { f(t, []memdx.HelloFeature{memdx.FeatureUnorderedExecution}) })
}

// A synchronous write answered when the mock commits it carries the time
// it was pending, on both kinds of connection.
func TestTracingDurationOfLateAnswer(t *testing.T) {
	const hold = 120 * time.Millisecond
	forEachOrdering(t, func(t *testing.T, extra []memdx.HelloFeature) {
		c := newCluster(t, Options{})
		b := c.Bucket(DefaultBucket)
		c.SetSyncWriteDelay(hold)
		key := "durable"
		cl := bootstrap(t, c.Node(ownerOf(b, key)).Addr(), DefaultBucket, tracedFeatures(extra...))
		r := keyReq(cl, b, memdx.NewStore(memdx.OpSet, []byte(key), []byte("v"), 0, 0))
		r.Durability = memdx.DurabilityMajority
		start := time.Now()
		p := cl.do(r)
		rtt := time.Since(start)
		if p.Status != memdx.StatusSuccess {
			t.Fatalf("durable SET: %s", p.Status)
		}
		if d := serverDuration(t, p); float64(d) < float64(hold)*(1-precision) || float64(d) > float64(rtt)*(1+precision) {
			t.Errorf("server duration %v, want at least the %v the write was pending and at most the %v round trip", d, hold, rtt)
		}
	})
}

// Disabling Tracing (Options.DisabledFeatures) keeps responses classic.
func TestTracingCanBeRefused(t *testing.T) {
	c := newCluster(t, Options{Nodes: 1, DisabledFeatures: []memdx.HelloFeature{memdx.FeatureTracing}})
	cl := bootstrap(t, c.Node(0).Addr(), DefaultBucket, tracedFeatures())
	if cl.feats[memdx.FeatureTracing] {
		t.Fatal("a disabled Tracing was granted")
	}
	if p := cl.do(memdx.NewNoop()); p.Magic != memdx.MagicRes {
		t.Errorf("NOOP answered with magic %s", p.Magic)
	}
}

// A response whose key is too long for the flexible header goes out
// classic instead of failing.
func TestTracingLongKeyResponseStaysClassic(t *testing.T) {
	cn := &conn{}
	cn.features.Store(1 << memdx.FeatureTracing)
	cn.pkt = memdx.Packet{Magic: memdx.MagicReq, OpCode: memdx.OpGetK, Opaque: 9}
	cn.timing.traced, cn.timing.start = true, time.Now()
	long := make([]byte, 300)
	cn.appendResponse(&cn.pkt, &memdx.Packet{Magic: memdx.MagicRes, OpCode: memdx.OpGetK, Opaque: 9, Key: long})
	p, _, err := memdx.DecodePacket(cn.wbuf, 0)
	if err != nil {
		t.Fatal(err)
	}
	if p.Magic != memdx.MagicRes || len(p.Key) != 300 {
		t.Fatalf("magic %s key %d bytes, want classic with the 300-byte key", p.Magic, len(p.Key))
	}
	cn.wbuf = cn.wbuf[:0]
	cn.appendResponse(&cn.pkt, &memdx.Packet{Magic: memdx.MagicRes, OpCode: memdx.OpGetK, Opaque: 9, Key: long[:255]})
	if p, _, err := memdx.DecodePacket(cn.wbuf, 0); err != nil || p.Magic != memdx.MagicResExt {
		t.Fatalf("255-byte key: magic %s, %v; want the flexible header", p.Magic, err)
	}
}
