package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bradfitz/gomemcache/memcache"
	"github.com/couchbase/gocbcore/v10"

	"github.com/kvwire/kvwire/client"
)

// keyset is one set of preloaded documents: the same keys and the same value
// for every client (strings for the clients that take strings, byte slices
// for those that take bytes, built once so that no client pays for a
// conversion another does not).
type keyset struct {
	keys  []string
	bkeys [][]byte
	value []byte // random, so incompressible: snappy is tried and refused
}

func newKeyset(prefix string, n, size int, seed uint64) *keyset {
	ks := &keyset{keys: make([]string, n), bkeys: make([][]byte, n), value: make([]byte, size)}
	for i := range n {
		ks.keys[i] = fmt.Sprintf("%s%06d", prefix, i)
		ks.bkeys[i] = []byte(ks.keys[i])
	}
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	for i := range ks.value {
		ks.value[i] = byte(r.Uint32())
	}
	return ks
}

// worker is one goroutine's handle on a client. get reads key i and checks
// the value's length; upsert writes the keyset's value to key i.
type worker interface {
	get(i int) error
	upsert(i int) error
}

// leaver is a worker told when its goroutine has stopped (lockstepMember).
type leaver interface{ leave() }

// opMix says which operation each iteration runs.
type opMix uint8

const (
	mixGet       opMix = iota // every op is a Get
	mixUpsert                 // every op is an Upsert
	mixAlternate              // Get, Upsert, Get, ... (50/50)
)

var errShortValue = errors.New("value of the wrong length")

// keepFirst stores err in p unless p holds an error already. Taking err's
// address here moves only this copy to the heap, when there is an error: a
// caller's own err, taken by address, would be allocated on every call,
// inside the measured interval.
func keepFirst(p *atomic.Pointer[error], err error) { p.CompareAndSwap(nil, &err) }

// kvwire

type kvwireWorker struct {
	col *client.Collection
	ks  *keyset
	ctx ctxMode
	// bg is the context of every call but ctxPerOp's: Background, or
	// (ctxCancellable) one that can be cancelled, made once.
	bg     context.Context
	cancel context.CancelFunc // bg's, never called: it lives as long as the worker
}

// ctxMode is the context a kvwire worker passes: what a service passes
// decides which path a lone caller takes in the connection (a context that
// can be cancelled must be watched while its caller reads for itself).
type ctxMode uint8

const (
	ctxBackground  ctxMode = iota // context.Background(), as the other clients' calls (they take none)
	ctxCancellable                // one context.WithCancel for the worker's whole run (a service's root context)
	ctxPerOp                      // a fresh context.WithCancel per call, cancelled after it (a request's context)
)

func newKvwireWorker(col *client.Collection, ks *keyset, mode ctxMode) *kvwireWorker {
	w := &kvwireWorker{col: col, ks: ks, ctx: mode, bg: context.Background()}
	if mode == ctxCancellable {
		w.bg, w.cancel = context.WithCancel(w.bg)
	}
	return w
}

func (w *kvwireWorker) get(i int) error {
	if w.ctx == ctxPerOp {
		ctx, cancel := context.WithCancel(w.bg)
		err := w.getCtx(ctx, i)
		cancel()
		return err
	}
	return w.getCtx(w.bg, i)
}

func (w *kvwireWorker) getCtx(ctx context.Context, i int) error {
	r, err := w.col.Get(ctx, w.ks.keys[i], nil)
	if err != nil {
		return err
	}
	if len(r.Value) != len(w.ks.value) {
		return errShortValue
	}
	return nil
}

func (w *kvwireWorker) upsert(i int) error {
	ctx := w.bg
	if w.ctx == ctxPerOp {
		var cancel context.CancelFunc
		ctx, cancel = context.WithCancel(ctx)
		defer cancel()
	}
	_, err := w.col.Upsert(ctx, w.ks.keys[i], w.ks.value, nil)
	return err
}

// gomemcache (the ASCII protocol; one connection per goroutine in use)

type gomemcacheWorker struct {
	mc   *memcache.Client
	ks   *keyset
	item memcache.Item // reused: its best case, no Item per Set
}

func newGomemcache(addr string, conc int, timeout time.Duration) *memcache.Client {
	mc := memcache.New(addr)
	mc.MaxIdleConns = conc // its best setting: a pooled connection per goroutine
	mc.Timeout = timeout
	return mc
}

func (w *gomemcacheWorker) get(i int) error {
	it, err := w.mc.Get(w.ks.keys[i])
	if err != nil {
		return err
	}
	if len(it.Value) != len(w.ks.value) {
		return errShortValue
	}
	return nil
}

func (w *gomemcacheWorker) upsert(i int) error {
	w.item.Key, w.item.Value = w.ks.keys[i], w.ks.value
	return w.mc.Set(&w.item)
}

// gocbcore: asynchronous; each goroutine waits for its callback on a
// channel of its own, as gocb's synchronous API does.

type gocbcoreWorker struct {
	agent   *gocbcore.Agent
	ks      *keyset
	timeout time.Duration
	done    chan error
	n       int // value length seen by the last Get callback
	getCb   func(*gocbcore.GetResult, error)
	setCb   func(*gocbcore.StoreResult, error)
}

func newGocbcoreWorker(agent *gocbcore.Agent, ks *keyset, timeout time.Duration) *gocbcoreWorker {
	w := &gocbcoreWorker{agent: agent, ks: ks, timeout: timeout, done: make(chan error, 1)}
	w.getCb = func(r *gocbcore.GetResult, err error) {
		if err == nil {
			w.n = len(r.Value)
		}
		w.done <- err
	}
	w.setCb = func(_ *gocbcore.StoreResult, err error) { w.done <- err }
	return w
}

func (w *gocbcoreWorker) get(i int) error {
	if _, err := w.agent.Get(gocbcore.GetOptions{Key: w.ks.bkeys[i], Deadline: time.Now().Add(w.timeout)}, w.getCb); err != nil {
		return err
	}
	if err := <-w.done; err != nil {
		return err
	}
	if w.n != len(w.ks.value) {
		return errShortValue
	}
	return nil
}

func (w *gocbcoreWorker) upsert(i int) error {
	if _, err := w.agent.Set(gocbcore.SetOptions{Key: w.ks.bkeys[i], Value: w.ks.value, Deadline: time.Now().Add(w.timeout)}, w.setCb); err != nil {
		return err
	}
	return <-w.done
}

// newGocbcoreAgent bootstraps an agent against the mock as reftest's tests
// do (SCRAM-SHA512, collections), with the settings that match kvwire's
// defaults: mutation tokens and snappy compression on (gocb's defaults;
// same minimum size and ratio as kvwire), one connection per node (its
// default, kvwire's too). Everything else is gocbcore's default.
func newGocbcoreAgent(connStr, user, password, bucket string, timeout time.Duration) (*gocbcore.Agent, error) {
	var cfg gocbcore.AgentConfig
	if err := cfg.FromConnStr(connStr); err != nil {
		return nil, err
	}
	cfg.BucketName = bucket
	cfg.UserAgent = "kvwire-benchcmp"
	cfg.SecurityConfig.Auth = gocbcore.PasswordAuthProvider{Username: user, Password: password}
	cfg.SecurityConfig.AuthMechanisms = []gocbcore.AuthMechanism{gocbcore.ScramSha512AuthMechanism}
	cfg.IoConfig.UseCollections = true
	cfg.IoConfig.UseMutationTokens = true
	cfg.CompressionConfig.Enabled = true
	cfg.CompressionConfig.MinSize = 32
	cfg.CompressionConfig.MinRatio = 0.83
	agent, err := gocbcore.CreateAgent(&cfg)
	if err != nil {
		return nil, err
	}
	ready := make(chan error, 1)
	if _, err := agent.WaitUntilReady(time.Now().Add(30*time.Second), gocbcore.WaitUntilReadyOptions{
		ServiceTypes: []gocbcore.ServiceType{gocbcore.MemdService},
	}, func(_ *gocbcore.WaitUntilReadyResult, err error) { ready <- err }); err != nil {
		_ = agent.Close()
		return nil, err
	}
	if err := <-ready; err != nil {
		_ = agent.Close()
		return nil, fmt.Errorf("gocbcore WaitUntilReady: %w", err)
	}
	return agent, nil
}

// clientJob runs conc goroutines, each with its own worker, until stop.
type clientJob struct {
	conc      int
	mix       opMix
	ks        *keyset
	newWorker func() worker
	workers   []worker
}

func (j *clientJob) prepare() error {
	if len(j.workers) == 0 {
		for range j.conc {
			j.workers = append(j.workers, j.newWorker())
		}
	}
	return nil
}

func (j *clientJob) close() {}

func (j *clientJob) run(gt *gate, recs []*recorder) (int64, error) {
	var (
		wg    sync.WaitGroup
		total atomic.Int64
		first atomic.Pointer[error]
	)
	n := len(j.ks.keys)
	for g := range j.conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			gt.wait()
			ops, err := j.loop(j.workers[g], g*n/j.conc, recs[g], &gt.stop)
			if l, ok := j.workers[g].(leaver); ok {
				l.leave()
			}
			total.Add(ops)
			if err != nil {
				keepFirst(&first, err)
			}
		}()
	}
	gt.open(j.conc)
	wg.Wait()
	if p := first.Load(); p != nil {
		return total.Load(), *p
	}
	return total.Load(), nil
}

// loop is every client's measuring loop: the same key walk, the same
// recorder (latency.go) around each operation.
func (j *clientJob) loop(w worker, idx int, rec *recorder, stop *atomic.Bool) (int64, error) {
	n := len(j.ks.keys)
	var ops int64
	for !stop.Load() {
		get := j.mix == mixGet || (j.mix == mixAlternate && ops&1 == 0)
		k := rec.begin(1)
		var err error
		if get {
			err = w.get(idx)
		} else {
			err = w.upsert(idx)
		}
		rec.end(k)
		if err != nil {
			return ops, fmt.Errorf("key %s: %w", j.ks.keys[idx], err)
		}
		ops++
		if idx++; idx == n {
			idx = 0
		}
	}
	return ops, nil
}
