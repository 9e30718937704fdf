package chaos

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kvwire/kvwire/client"
	"github.com/kvwire/kvwire/internal/faultnode"
	"github.com/kvwire/kvwire/internal/memcachedtest"
	"github.com/kvwire/kvwire/memdx"
	"github.com/kvwire/kvwire/mockcluster"
)

// The memcached configuration (-chaos.configs memcached) runs the same
// workers and checks against two private memcached servers
// (memcachedtest.Start: no persistence, 16 MiB, far more than the run's
// few hundred documents of at most a few KiB, so nothing is evicted), each
// behind a fault proxy (faultnode.Proxy), through memcached:// with both
// proxies in its ketama ring. The client has no Observer: GetMany reads by
// groups (a text multi-get on a text connection, or conn.StartGets: quiet
// gets and a NOOP, the hits written straight into the results) only
// without one. One client, one binary connection per server: a key's
// requests reach its server in the order the worker made them, so a read
// after an ambiguous write cannot overtake it on another connection (a
// second client for GetMany did, and the model, which takes an
// operation's requests to be settled when the next one starts, then saw
// writes applied after they were read back). The text multi-gets keep
// that order too: the client takes the text path only while no write is
// unanswered on the server's binary connection (Conn.WritesInFlight; the
// first 3-minute run without that rule lost 5 writes this way). GetAndLock
// and Unlock do not exist on memcached; the workers read instead.
//
// The proxies play the mock's hook: each request for a chaos key is
// attributed to its operation as the hook does (values and deltas name
// it), and each answer the proxy relays says whether it was applied (a
// mutation answered SUCCESS was; any other status was not), so that an
// operation whose every request was answered, or cut off by the proxy
// before it was forwarded, is checked as on the mock (acknowledged:
// applied once; failed: not applied; ambiguous: at most once; never sent
// again after no answer), and a request that reached a proxy whose answer
// was never relayed must leave its mutation ambiguous (the Observer's
// check on the mock). One whose request was forwarded and never
// answered (its connection ended, a black hole swallowed the answer) has
// an unknown count: the summary says how many; the model's checks (every
// read and success possible, the stored documents at the end) hold for
// all.
//
// The faults, through the proxies: close-before (a request dropped and
// its server's connections closed), close-after (the answer to a mutation
// dropped, the connections closed), slow (an answer held back; the
// proxy's relay of that connection waits), drop (every connection of one
// server, or both, closed), restart (a server refuses connections for a
// while: memcached:// fails its keys at once meanwhile) and blackhole
// (a proxy passes nothing on, either way, for a while; its connections are
// reset before it relays again). A proxy closes its connections as a
// server would: it stops forwarding (what it reads meanwhile is dropped,
// a close-before), waits for the answers to what it forwarded, then
// resets. Resetting with requests forwarded and unanswered would let the
// server run them after the client's next connection had read the key
// (the server reads each connection on its own), a reordering TCP and
// memcached never make on one connection. A black hole that dropped
// packets and then relayed the rest on the same connection would be one
// too: a GETQ lost and its NOOP answered is a miss no server reports.
// Cancels on arrival fire when the proxy sees the answer, just before it
// relays it: the request was run, its answer is on its way.

// mcBackend is the memcached servers, their proxies and what the proxies
// saw.
type mcBackend struct {
	h       *harness
	proxies []*faultnode.Proxy

	mu sync.Mutex
	// pending maps a relayed request (by its signature) to its receipt,
	// until its answer comes; a proxy's entries are dropped when it
	// resets its connections (their answers will never come).
	pending []map[string]mcPending
	// closing[i]: proxy i is closing its connections: it forwards
	// nothing more.
	closing []bool
	wg      sync.WaitGroup // closes started by the hooks
	// unsettledResets counts resets made with forwarded requests still
	// unanswered after closeWait (a black hole's, or a stuck server).
	unsettledResets int
}

// closeWait bounds how long a closing proxy waits for the answers to
// what it forwarded: more than the longest slow answer (1.5 s).
const closeWait = 3 * time.Second

type mcPending struct {
	ks         *keyState
	op         *opRec // nil: an untracked read
	idx        int    // the receipt's index in op.receipts
	closeAfter bool
	delay      time.Duration
	// hold (a slow fault's hookFault.hold): the answer is held until its
	// operation has returned, if it is still running when the answer
	// comes, rather than for delay.
	hold bool
}

// sig identifies a request among those in flight through one proxy: its
// opaque, opcode and key, and for mutations the unique value or delta.
func sig(p *memdx.Packet) string {
	return strconv.FormatUint(uint64(p.Opaque), 10) + "/" + strconv.Itoa(int(p.OpCode)) + "/" + string(p.Key) + "/" +
		string(p.Extras) + "/" + string(p.Value)
}

func startMemcached(t *testing.T, h *harness, n int) *mcBackend {
	t.Helper()
	b := &mcBackend{h: h}
	for i := 0; i < n; i++ {
		addr := memcachedtest.Start(t)
		p, err := faultnode.NewProxy(addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(p.Close)
		b.proxies = append(b.proxies, p)
		b.pending = append(b.pending, map[string]mcPending{})
		b.closing = append(b.closing, false)
		p.OnRequest(b.onRequest(i))
		p.OnResponse(b.onResponse(i))
	}
	return b
}

func (b *mcBackend) connStr() string {
	s := "memcached://"
	for i, p := range b.proxies {
		if i > 0 {
			s += ","
		}
		s += p.Addr()
	}
	return s
}

// close closes proxy i's connections as a server would (see above): no
// more forwarding, the answers to what was forwarded, then a reset. then
// runs once they are reset, before the proxy forwards again.
func (b *mcBackend) close(i int, then func()) {
	b.mu.Lock()
	b.closing[i] = true
	b.mu.Unlock()
	limit := time.Now().Add(closeWait)
	for {
		b.mu.Lock()
		n := len(b.pending[i])
		b.mu.Unlock()
		if n == 0 {
			break
		}
		if time.Now().After(limit) {
			b.mu.Lock()
			b.unsettledResets++
			b.mu.Unlock()
			break
		}
		time.Sleep(time.Millisecond)
	}
	b.proxies[i].Reset()
	if then != nil {
		then()
	}
	b.mu.Lock()
	clear(b.pending[i])
	b.closing[i] = false
	b.mu.Unlock()
}

// closeAsync is close from a hook, which must return for the answers it
// waits for to be relayed.
func (b *mcBackend) closeAsync(i int) {
	b.mu.Lock()
	already := b.closing[i]
	b.closing[i] = true
	b.mu.Unlock()
	if already {
		return
	}
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		b.close(i, nil)
	}()
}

// onRequest is proxy i's request hook: the per-request faults, and the
// receipt of each tracked request.
func (b *mcBackend) onRequest(i int) func(req *memdx.Packet) faultnode.Action {
	h := b.h
	return func(req *memdx.Packet) faultnode.Action {
		b.mu.Lock()
		closing := b.closing[i]
		b.mu.Unlock()
		ks := h.keys[string(req.Key)]
		if ks == nil {
			if closing {
				// Every request is dropped while closing: a NOOP
				// relayed after its group's GETQ was dropped would
				// make a miss of a hit.
				return faultnode.Action{Drop: true}
			}
			return faultnode.Action{}
		}
		var act mockcluster.Action
		var kind faultKind
		var hit, hold bool
		if closing {
			act = mockcluster.Action{Close: mockcluster.CloseBeforeApply}
		} else {
			act, kind, hit, hold = h.faults.decideHold(&mockcluster.Request{Node: i, OpCode: req.OpCode, Key: req.Key, Packet: req})
		}
		k, tracked := kindOf(req.OpCode)
		if hit && (act.Close == mockcluster.CloseAfterApply && !tracked || act.Delay > 0 && req.OpCode.IsQuiet()) {
			// Acts on the answer, which only a tracked request is sure
			// to have (a quiet get that misses has none).
			hit, act, hold = false, mockcluster.Action{}, false
		}
		if hit {
			h.faults.count(kind)
		}
		pend := mcPending{ks: ks, closeAfter: act.Close == mockcluster.CloseAfterApply, delay: act.Delay, hold: hold && act.Delay > 0}
		ks.mu.Lock()
		if !tracked {
			if op := ks.cur; op != nil && op.kind == opGet && !closing && !req.OpCode.IsQuiet() {
				pend.op, pend.idx = op, -1 // a read: cancelled on its answer
			}
		} else if op, stale := h.attribute(ks, k, req, i); op != nil {
			rc := receipt{node: i, stale: stale}
			switch {
			case act.Close == mockcluster.CloseBeforeApply:
				rc.act, rc.known = actCloseBefore, true
				if k.counted() {
					h.doubtNotApplied.Add(1)
				}
			case pend.closeAfter:
				rc.act = actCloseAfter
			case act.Delay > 0:
				rc.act, rc.delay = actDelay, act.Delay
			}
			for _, prev := range op.receipts {
				// Its answer, if any, is relayed only after onResponse
				// marks it: the client cannot have had it. (Only for
				// requests that name their operation: one attributed
				// by kind may be a late one of the key's previous
				// operation.)
				if !prev.answered && !byKind(k) {
					op.sentUnanswered = true
				}
			}
			op.receipts = append(op.receipts, rc)
			pend.op, pend.idx = op, len(op.receipts)-1
		}
		ks.mu.Unlock()
		if act.Close == mockcluster.CloseBeforeApply {
			b.closeAsync(i)
			return faultnode.Action{Drop: true}
		}
		if pend.op != nil || pend.delay > 0 {
			// Every request with an answer to act on or to cancel at:
			// a close waits for those answers.
			b.mu.Lock()
			b.pending[i][sig(req)] = pend
			b.mu.Unlock()
		}
		return faultnode.Action{}
	}
}

// onResponse is proxy i's answer hook: it settles the receipt of the
// request answered and applies the fault decided for it.
func (b *mcBackend) onResponse(i int) func(req, resp *memdx.Packet) faultnode.Action {
	h := b.h
	return func(req, resp *memdx.Packet) faultnode.Action {
		if req == nil {
			return faultnode.Action{}
		}
		s := sig(req)
		b.mu.Lock()
		pend, ok := b.pending[i][s]
		delete(b.pending[i], s)
		b.mu.Unlock()
		if !ok {
			return faultnode.Action{}
		}
		if op := pend.op; op != nil && pend.idx >= 0 {
			pend.ks.mu.Lock()
			r := &op.receipts[pend.idx]
			r.known = true
			// A held-back answer is relayed after its delay (below).
			r.answered = !pend.closeAfter && pend.delay == 0
			if op.kind.counted() && resp.Status == memdx.StatusSuccess {
				r.applied = 1
				op.applied++
				if pend.closeAfter {
					h.doubtApplied.Add(1)
				}
			}
			pend.ks.mu.Unlock()
		}
		if pend.closeAfter {
			b.closeAsync(i)
			return faultnode.Action{Drop: true}
		}
		if pend.delay > 0 {
			// Holds back this connection's answers: a slow server. An
			// answer to hold until its operation has returned waits for
			// that, as the mock's hook does: a client that waits for it
			// past the operation's deadline never returns, and the run
			// hangs (awaitWorkers). (A cancel on arrival fires first: the
			// answer is on its way and the caller gives up on it.)
			var release <-chan struct{}
			if op := pend.op; op != nil && pend.hold {
				pend.ks.mu.Lock()
				if pend.ks.cur == op {
					release = op.holdUntilReturned()
					if pend.idx >= 0 {
						op.receipts[pend.idx].held = true
					}
					h.heldAnswers.Add(1)
				}
				pend.ks.mu.Unlock()
			}
			if release != nil {
				pend.op.cc.arrived()
				<-release
			} else {
				time.Sleep(pend.delay)
			}
			if op := pend.op; op != nil && pend.idx >= 0 {
				pend.ks.mu.Lock()
				op.receipts[pend.idx].answered = true
				pend.ks.mu.Unlock()
			}
		}
		if op := pend.op; op != nil {
			// The request was run; its answer is about to be relayed.
			op.cc.arrived()
		}
		return faultnode.Action{}
	}
}

// episode runs one fault of kind e.kind on the proxies and reports whether
// it acted; per-request kinds go through the faultSet as on the mock.
func (b *mcBackend) episode(s *scheduler, e *episode) bool {
	pick := e.pick % len(b.proxies)
	switch e.kind {
	case fkDrop:
		var wg sync.WaitGroup
		for i := range b.proxies {
			if e.all || i == pick {
				wg.Add(1)
				go func() { defer wg.Done(); b.close(i, nil) }()
			}
		}
		wg.Wait()
		return true
	case fkRestart:
		p := b.proxies[pick]
		p.RefuseNew(true)
		b.close(pick, nil)
		time.Sleep(e.dur)
		p.RefuseNew(false)
		return true
	case fkBlackhole:
		for i, p := range b.proxies {
			if e.all || i == pick {
				p.Blackhole(true)
			}
		}
		time.Sleep(e.dur)
		for i, p := range b.proxies {
			if e.all || i == pick {
				// Reset before relaying again: no connection goes on
				// after losing packets. What it swallowed is never
				// answered (close does not wait for it).
				b.mu.Lock()
				clear(b.pending[i])
				b.mu.Unlock()
				b.close(i, func() { p.Blackhole(false) })
			}
		}
		return true
	}
	f := e.hf
	if len(f.nodes) > 0 {
		f.nodes[0] = pick
	}
	s.h.faults.add(f)
	time.Sleep(e.dur)
	if s.short {
		s.untilActed(f)
	}
	s.h.faults.remove(f)
	return f.hitCount(&s.h.faults) > 0
}

// runMemcached is run for the memcached configuration.
func runMemcached(t *testing.T, cfg config) *report {
	t.Helper()
	h := &harness{keys: map[string]*keyState{}, problems: map[string]int{}, batchProblems: map[string]int{}, batchShare: cfg.batches,
		cancelShare: cfg.cancels, memcached: true}
	rng := rand.New(rand.NewSource(cfg.seed))
	workers := make([]*worker, cfg.workers)
	for i := range workers {
		w := &worker{h: h, id: i, rng: rand.New(rand.NewSource(rng.Int63()))}
		for j := 0; j < cfg.keys; j++ {
			ks := &keyState{name: fmt.Sprintf("w%d-k%d", i, j), owner: w, ctr: j%4 == 3,
				model: newModel(), byValue: map[string]*opRec{}, byDelta: map[uint64]*opRec{},
				scope: client.DefaultScope, coll: client.DefaultCollection}
			w.keys = append(w.keys, ks)
			h.keys[ks.name] = ks
		}
		workers[i] = w
	}
	mb := startMemcached(t, h, 2)
	h.bothGetPaths = func() bool {
		getq, text := 0, 0
		for _, p := range mb.proxies {
			getq += p.Requests(memdx.OpGetKQ)
			text += p.TextGets()
		}
		return getq > 0 && text > 0
	}

	connect := func(obs client.Observer) *client.Client {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		opts := &client.Options{KVTimeout: time.Second, Observer: obs, Logger: planLog}
		cl, err := client.Connect(ctx, mb.connStr(), opts)
		if err != nil {
			t.Fatal(err)
		}
		return cl
	}
	cl := connect(nil)
	closed := false
	defer func() {
		if !closed {
			_ = cl.Close()
		}
	}()
	api := kvAPI(cl.DefaultCollection())
	if cfg.wrap != nil {
		api = cfg.wrap(api)
	}
	for _, w := range workers {
		for _, ks := range w.keys {
			ks.api, ks.gets = api, api
		}
	}

	d := h.drive(cfg, rng, workers, nil, func(s *scheduler) { s.mcb = mb })
	mb.wg.Wait()

	_ = cl.Close()
	closed = true
	// The proxies relay what they read until the clients' connections
	// are gone; memcached answers in order, so once a fresh connection's
	// read is answered, everything relayed before it has been run.
	deadline := time.Now().Add(10 * time.Second)
	for {
		open := 0
		for _, p := range mb.proxies {
			open += len(p.Conns())
		}
		if open == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("chaos seed=%d: %d proxied memcached connections still open 10 s after the clients closed", cfg.seed, open)
		}
		time.Sleep(5 * time.Millisecond)
	}
	final := connect(nil)
	defer final.Close()
	col := final.DefaultCollection()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, w := range workers {
		for _, ks := range w.keys {
			r, err := col.Get(ctx, ks.name, nil)
			exists := err == nil
			if err != nil && !errors.Is(err, client.ErrDocumentNotFound) {
				t.Fatalf("chaos seed=%d: reading %s at the end: %v", cfg.seed, ks.name, err)
			}
			h.finishMemcached(ks, exists, h.value(ks, r.Value), r.Cas)
		}
	}

	r := h.report(cfg, d, workers)
	for _, p := range mb.proxies {
		r.getq += uint64(p.Requests(memdx.OpGetKQ))
		r.noop += uint64(p.Requests(memdx.OpNoop))
		r.textGets += uint64(p.TextGets())
	}
	r.unsettledResets = mb.unsettledResets
	r.summary = r.format()
	return r
}

// value is a document's value as the model has it: memcached may leave a
// counter decremented to fewer digits padded with spaces ("999 " after
// 1002 - 3: its protocol documents the padding), which the model ignores.
func (h *harness) value(ks *keyState, v []byte) string {
	if h.memcached && ks.ctr {
		return strings.TrimRight(string(v), " ")
	}
	return string(v)
}

// finishMemcached is finish for a memcached key: every operation is
// verified and the stored document must be a state of the model.
func (h *harness) finishMemcached(ks *keyState, exists bool, value string, cas uint64) {
	hist := ks.history()
	h.settleQueue(ks, true)
	if !ks.model.allows(exists, value, cas) {
		ks.owner.st.lost++
		h.problem("lost", "key %s: stored document (exists=%v value=%q cas=%#x) is not a state the client's results allow %s; recent operations:%s",
			ks.name, exists, value, cas, ks.model.describe(), hist)
	}
}

// The memcached checks are not vacuous: the lying client of
// TestChaosDetects, against memcached behind the proxies (answers cut off
// after a mutation was applied), sends ambiguous writes again and is
// caught: the proxies' receipts show them re-sent and applied twice, in
// single operations and in batches.
func TestChaosDetectsOnMemcached(t *testing.T) {
	lies := []string{"duplicated", "resent"}
	// Told in single operations only (an Insert refused and acknowledged,
	// an ambiguous Prepend reported not applied).
	single := []string{"lost", "applied-after-failure", "unreported-ambiguity"}
	cfg := config{name: "liar-memcached", seed: *flagSeed, duration: 1500 * time.Millisecond, short: true, memcached: true,
		workers: 6, keys: 8, kinds: []faultKind{fkCloseAfter}, prob: 0.3, heap: 1 << 30, logf: t.Logf, batches: 50,
		wrap:  func(k kvAPI) kvAPI { return &liar{kvAPI: k} },
		until: func(h *harness) bool { return h.caught(lies...) && h.caughtInBatches(lies...) && h.caught(single...) }}
	cfg.rerun = "go test ./chaos -run TestChaosDetectsOnMemcached"
	r := run(t, cfg)
	t.Log(r.summary)
	requireCaught(t, r, lies)
	requireCaughtSingle(t, r, single)
}
