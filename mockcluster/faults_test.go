package mockcluster

import (
	"testing"
	"time"

	"github.com/kvwire/kvwire/memdx"
)

// faultEnv has a cluster, a key and clients on the key's owner and on
// another node.
type faultEnv struct {
	c          *Cluster
	b          *Bucket
	key        string
	owner      int
	cl, second *rawClient
}

func newFaultEnv(t *testing.T, feats []memdx.HelloFeature) *faultEnv {
	c := newCluster(t, Options{})
	e := &faultEnv{c: c, b: c.Bucket(DefaultBucket), key: "faulty"}
	e.owner = ownerOf(e.b, e.key)
	e.cl = bootstrap(t, c.Node(e.owner).Addr(), DefaultBucket, feats)
	e.second = bootstrap(t, c.Node(e.owner).Addr(), DefaultBucket, feats)
	return e
}

func (e *faultEnv) req(cl *rawClient, r memdx.Request) memdx.Request { return keyReq(cl, e.b, r) }

func TestFaultStatusIsNotApplied(t *testing.T) {
	for _, st := range []memdx.Status{memdx.StatusTmpFail, memdx.StatusLocked, StatusTestRetry, StatusTestNoRetry} {
		t.Run(st.String(), func(t *testing.T) {
			e := newFaultEnv(t, nil)
			h := e.c.AddFault(Fault{Match: Match{OpCodes: []memdx.OpCode{memdx.OpSet}, Key: e.key},
				Action: Action{Status: st}, Times: 1})
			p := e.cl.do(e.req(e.cl, set(e.key, "v")))
			if p.Status != st {
				t.Fatalf("client saw %s, want %s", p.Status, st)
			}
			// With XERROR the answer names the injected fault.
			if ec, ok := memdx.DecodeErrorContext(p.Datatype, p.Value); !ok || ec.Context == "" {
				t.Fatalf("no error context: %q", p.Value)
			}
			if n := e.b.MutationCount("", "", e.key); n != 0 {
				t.Fatalf("the faulted SET was applied (%d mutations)", n)
			}
			if _, ok := e.b.Get("", "", e.key); ok {
				t.Fatal("document exists after a faulted SET")
			}
			if h.Hits() != 1 {
				t.Fatalf("hits %d", h.Hits())
			}
			select {
			case <-h.Done():
			default:
				t.Fatal("a once-fault is still registered after its hit")
			}
			// Once: the retry goes through.
			if p := e.cl.do(e.req(e.cl, set(e.key, "v"))); p.Status != memdx.StatusSuccess {
				t.Fatalf("after the fault: %s", p.Status)
			}
			if n := e.b.MutationCount("", "", e.key); n != 1 {
				t.Fatalf("%d mutations, want 1", n)
			}
		})
	}
}

func TestFaultMatchers(t *testing.T) {
	e := newFaultEnv(t, nil)
	other := (e.owner + 1) % 3
	ocl := bootstrap(t, e.c.Node(other).Addr(), DefaultBucket, nil)
	tmp := Action{Status: memdx.StatusTmpFail}

	t.Run("node", func(t *testing.T) {
		h := e.c.AddFault(Fault{Match: Match{Nodes: []int{other}}, Action: tmp})
		defer h.Remove()
		if p := ocl.do(memdx.NewNoop()); p.Status != memdx.StatusTmpFail {
			t.Fatalf("matching node: %s", p.Status)
		}
		if p := e.cl.do(memdx.NewNoop()); p.Status != memdx.StatusSuccess {
			t.Fatalf("other node: %s", p.Status)
		}
	})
	t.Run("opcode", func(t *testing.T) {
		h := e.c.AddFault(Fault{Match: Match{OpCodes: []memdx.OpCode{memdx.OpGet}}, Action: tmp})
		defer h.Remove()
		if p := e.cl.do(e.req(e.cl, memdx.NewGet([]byte(e.key)))); p.Status != memdx.StatusTmpFail {
			t.Fatalf("GET: %s", p.Status)
		}
		if p := e.cl.do(e.req(e.cl, set(e.key, "v"))); p.Status != memdx.StatusSuccess {
			t.Fatalf("SET: %s", p.Status)
		}
	})
	t.Run("key", func(t *testing.T) {
		h := e.c.AddFault(Fault{Match: Match{Key: e.key}, Action: tmp})
		defer h.Remove()
		if p := e.cl.do(e.req(e.cl, memdx.NewGet([]byte(e.key)))); p.Status != memdx.StatusTmpFail {
			t.Fatalf("matching key: %s", p.Status)
		}
		if p := e.cl.do(e.req(e.cl, memdx.NewGet([]byte(e.key+"-other")))); p.Status == memdx.StatusTmpFail {
			t.Fatalf("other key faulted")
		}
		// The key matches without its collection prefix.
		if h.Hits() != 1 {
			t.Fatalf("hits %d", h.Hits())
		}
	})
	t.Run("predicate", func(t *testing.T) {
		h := e.c.AddFault(Fault{Match: Match{Func: func(r *Request) bool { return r.Cas == 77 }}, Action: tmp})
		defer h.Remove()
		if p := e.cl.do(e.req(e.cl, withCas(set(e.key, "x"), 77))); p.Status != memdx.StatusTmpFail {
			t.Fatalf("cas 77: %s", p.Status)
		}
		if p := e.cl.do(e.req(e.cl, withCas(set(e.key, "x"), 78))); p.Status == memdx.StatusTmpFail {
			t.Fatal("cas 78 faulted")
		}
	})
	t.Run("bucket", func(t *testing.T) {
		h := e.c.AddFault(Fault{Match: Match{Bucket: "other"}, Action: tmp})
		defer h.Remove()
		if p := e.cl.do(memdx.NewNoop()); p.Status != memdx.StatusSuccess {
			t.Fatalf("other bucket's fault hit: %s", p.Status)
		}
	})
}

func TestFaultTimes(t *testing.T) {
	e := newFaultEnv(t, nil)
	noop := func() memdx.Status { return e.cl.do(memdx.NewNoop()).Status }
	h := e.c.AddFault(Fault{Match: Match{OpCodes: []memdx.OpCode{memdx.OpNoop}},
		Action: Action{Status: memdx.StatusBusy}, Times: 3})
	for i := 0; i < 3; i++ {
		if st := noop(); st != memdx.StatusBusy {
			t.Fatalf("hit %d: %s", i, st)
		}
	}
	if st := noop(); st != memdx.StatusSuccess || h.Hits() != 3 {
		t.Fatalf("after 3 hits: %s, hits %d", st, h.Hits())
	}
	// Until removed.
	h = e.c.AddFault(Fault{Match: Match{OpCodes: []memdx.OpCode{memdx.OpNoop}}, Action: Action{Status: memdx.StatusBusy}})
	for i := 0; i < 10; i++ {
		if st := noop(); st != memdx.StatusBusy {
			t.Fatalf("hit %d: %s", i, st)
		}
	}
	h.Remove()
	if st := noop(); st != memdx.StatusSuccess {
		t.Fatalf("after Remove: %s", st)
	}
	// Control decides per request; declined requests are not hits.
	n := 0
	ctl := e.c.Control(Match{OpCodes: []memdx.OpCode{memdx.OpNoop}}, 0, func(r *Request) (Action, bool) {
		n++
		return Action{Status: memdx.StatusTmpFail}, n%2 == 0
	})
	defer ctl.Remove()
	got := []memdx.Status{noop(), noop(), noop(), noop()}
	want := []memdx.Status{memdx.StatusSuccess, memdx.StatusTmpFail, memdx.StatusSuccess, memdx.StatusTmpFail}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("control answers %v, want %v", got, want)
		}
	}
	if ctl.Hits() != 2 {
		t.Fatalf("control hits %d", ctl.Hits())
	}
	// Requests a fault answered are still counted by opcode.
	if c := e.c.Node(e.owner).RequestCount(memdx.OpNoop); c < 18 {
		t.Fatalf("NOOP count %d", c)
	}
}

func TestFaultUnknownStatusAndNMV(t *testing.T) {
	e := newFaultEnv(t, []memdx.HelloFeature{memdx.FeatureJSON, memdx.FeatureCollections})
	h := e.c.AddFault(Fault{Match: Match{Key: e.key}, Action: Action{Status: memdx.StatusNotMyVbucket}, Times: 1})
	p := e.cl.do(e.req(e.cl, memdx.NewGet([]byte(e.key))))
	if p.Status != memdx.StatusNotMyVbucket || parseConfig(t, p.Value).Rev != e.b.Rev() {
		t.Fatalf("injected NMV: %s %d bytes", p.Status, len(p.Value))
	}
	h.Remove()
	e.c.AddFault(Fault{Match: Match{Key: e.key}, Action: Action{Status: 0x7ff0, Value: []byte("custom")}, Times: 1})
	p = e.cl.do(e.req(e.cl, memdx.NewGet([]byte(e.key))))
	if p.Status != 0x7ff0 || string(p.Value) != "custom" {
		t.Fatalf("custom status: %s %q", p.Status, p.Value)
	}
}

func TestFaultDelay(t *testing.T) {
	const delay = 300 * time.Millisecond
	for _, unordered := range []bool{false, true} {
		name := "ordered"
		feats := stdFeatures
		if unordered {
			name = "unordered"
			feats = append([]memdx.HelloFeature{memdx.FeatureUnorderedExecution}, stdFeatures...)
		}
		t.Run(name, func(t *testing.T) {
			e := newFaultEnv(t, feats)
			e.c.AddFault(Fault{Match: Match{OpCodes: []memdx.OpCode{memdx.OpSet}}, Action: Action{Delay: delay}, Times: 1})
			r := e.req(e.cl, set(e.key, "delayed"))
			buf, _ := r.AppendTo(nil, 1)
			// A GET (which kv_engine may reorder; a NOOP it may not)
			// overtakes the delayed answer on an unordered connection.
			nr := e.req(e.cl, memdx.NewGet([]byte(e.key)))
			buf, _ = nr.AppendTo(buf, 2)
			start := time.Now()
			e.cl.write(buf)
			first, err := e.cl.read(10 * time.Second)
			if err != nil {
				t.Fatal(err)
			}
			second, err := e.cl.read(10 * time.Second)
			if err != nil {
				t.Fatal(err)
			}
			if elapsed := time.Since(start); elapsed < delay {
				t.Fatalf("answers after %v, before the %v delay", elapsed, delay)
			}
			order := []uint32{first.Opaque, second.Opaque}
			if unordered && (order[0] != 2 || order[1] != 1) || !unordered && (order[0] != 1 || order[1] != 2) {
				t.Fatalf("answer order %v", order)
			}
			// The delayed request was applied.
			if d, ok := e.b.Get("", "", e.key); !ok || string(d.Value) != "delayed" {
				t.Fatal("delayed SET not applied")
			}
		})
	}
}

func TestFaultDelayWithStatus(t *testing.T) {
	e := newFaultEnv(t, nil)
	e.c.AddFault(Fault{Match: Match{OpCodes: []memdx.OpCode{memdx.OpGet}}, Action: Action{Status: memdx.StatusTmpFail, Delay: 100 * time.Millisecond}, Times: 1})
	start := time.Now()
	if p := e.cl.do(e.req(e.cl, memdx.NewGet([]byte(e.key)))); p.Status != memdx.StatusTmpFail {
		t.Fatalf("%s", p.Status)
	}
	if time.Since(start) < 100*time.Millisecond {
		t.Fatal("status answered before its delay")
	}
}

func TestFaultCloseBeforeApply(t *testing.T) {
	e := newFaultEnv(t, nil)
	e.c.AddFault(Fault{Match: Match{OpCodes: []memdx.OpCode{memdx.OpSet}}, Action: Action{Close: CloseBeforeApply}, Times: 1})
	nr := memdx.NewNoop()
	buf, _ := nr.AppendTo(nil, 1)
	r := e.req(e.cl, set(e.key, "never"))
	buf, _ = r.AppendTo(buf, 2)
	e.cl.write(buf)
	got := e.cl.expectClosed()
	if len(got) != 1 || got[0].Opaque != 1 {
		t.Fatalf("before the close: %d answers", len(got))
	}
	if n := e.b.MutationCount("", "", e.key); n != 0 {
		t.Fatalf("the request was applied %d times", n)
	}
	// Other connections are unaffected.
	if p := e.second.do(e.req(e.second, set(e.key, "later"))); p.Status != memdx.StatusSuccess {
		t.Fatal(p.Status)
	}
}

func TestFaultCloseAfterApply(t *testing.T) {
	e := newFaultEnv(t, nil)
	e.c.AddFault(Fault{Match: Match{OpCodes: []memdx.OpCode{memdx.OpSet}, Key: e.key},
		Action: Action{Close: CloseAfterApply}, Times: 1})
	e.cl.send(e.req(e.cl, set(e.key, "applied")))
	if got := e.cl.expectClosed(); len(got) != 0 {
		t.Fatalf("got %d answers", len(got))
	}
	if n := e.b.MutationCount("", "", e.key); n != 1 {
		t.Fatalf("applied %d times, want exactly once", n)
	}
	if d, ok := e.b.Get("", "", e.key); !ok || string(d.Value) != "applied" {
		t.Fatal("value not stored")
	}
}
