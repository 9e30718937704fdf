package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bradfitz/gomemcache/memcache"
	"github.com/couchbase/gocbcore/v10"

	"github.com/kvwire/kvwire/client"
	"github.com/kvwire/kvwire/memdx"
)

// Batch workloads: one goroutine reads size keys per call, the same
// consecutive keys of the keyset for every client (a batch never wraps: it
// restarts at key 0 when the next one would run past the end). Every key
// counts as one operation, so ops/s is keys per second and CPU, allocations
// and system calls per op are per key; a timed key (latency.go) is recorded
// at its batch's time (the whole call).

// batcher is one client's way of reading the keys [lo, lo+n) of its keyset
// and checking every value's length.
type batcher interface {
	getBatch(lo, n int) error
}

// batchJob calls its batcher from one goroutine (run's) until stop.
type batchJob struct {
	ks   *keyset
	size int
	newB func() (batcher, error)
	b    batcher
}

func (j *batchJob) prepare() error {
	if j.b != nil {
		return nil
	}
	b, err := j.newB()
	if err != nil {
		return err
	}
	if p, ok := b.(interface{ prepare() error }); ok {
		if err := p.prepare(); err != nil {
			return err
		}
	}
	j.b = b
	return nil
}

func (j *batchJob) close() {
	if c, ok := j.b.(interface{ close() }); ok {
		c.close()
	}
	j.b = nil
}

func (j *batchJob) run(gt *gate, recs []*recorder) (int64, error) {
	n := len(j.ks.keys)
	rec := recs[0]
	var ops int64
	lo := 0
	gt.open(0)
	for !gt.stop.Load() {
		if lo+j.size > n {
			lo = 0
		}
		k := rec.begin(j.size)
		err := j.b.getBatch(lo, j.size)
		rec.end(k)
		if err != nil {
			return ops, fmt.Errorf("batch of keys %s to %s: %w", j.ks.keys[lo], j.ks.keys[lo+j.size-1], err)
		}
		ops += int64(j.size)
		lo += j.size
	}
	return ops, nil
}

// kvwire: Collection.GetMany, default options.

type kvwireBatch struct {
	col *client.Collection
	ks  *keyset
}

func (b *kvwireBatch) getBatch(lo, n int) error {
	keys := b.ks.keys[lo : lo+n]
	rs := b.col.GetMany(context.Background(), keys, nil)
	if len(rs) != n {
		return fmt.Errorf("GetMany returned %d results for %d keys", len(rs), n)
	}
	for i := range rs {
		r := &rs[i]
		if r.Err != nil {
			return fmt.Errorf("key %s: %w", keys[i], r.Err)
		}
		if r.Key != keys[i] {
			return fmt.Errorf("result %d is key %s, want %s", i, r.Key, keys[i])
		}
		if len(r.Value) != len(b.ks.value) {
			return fmt.Errorf("key %s: %w", keys[i], errShortValue)
		}
	}
	return nil
}

// gomemcache: GetMulti (one "gets k1 k2 ..." per server).

type gomemcacheBatch struct {
	mc *memcache.Client
	ks *keyset
}

func (b *gomemcacheBatch) getBatch(lo, n int) error {
	keys := b.ks.keys[lo : lo+n]
	m, err := b.mc.GetMulti(keys)
	if err != nil {
		return err
	}
	if len(m) != n {
		return fmt.Errorf("GetMulti found %d of %d keys", len(m), n)
	}
	for _, k := range keys {
		it := m[k]
		if it == nil {
			return fmt.Errorf("key %s: missing from GetMulti's answer", k)
		}
		if len(it.Value) != len(b.ks.value) {
			return fmt.Errorf("key %s: %w", k, errShortValue)
		}
	}
	return nil
}

// fanout is what a user without a batch API writes: a goroutine per key,
// each doing one blocking Get, and a wait for all. The per-key workers (and
// their channels) are made once and reused, the clients' best case.
type fanout struct {
	workers []worker
}

func newFanout(n int, newWorker func() worker) *fanout {
	f := &fanout{workers: make([]worker, n)}
	for i := range f.workers {
		f.workers[i] = newWorker()
	}
	return f
}

func (f *fanout) getBatch(lo, n int) error {
	if n > len(f.workers) {
		return fmt.Errorf("batch of %d keys, %d workers", n, len(f.workers))
	}
	var (
		wg    sync.WaitGroup
		first atomic.Pointer[error]
	)
	wg.Add(n)
	for i := range n {
		go func() {
			defer wg.Done()
			if err := f.workers[i].get(lo + i); err != nil {
				keepFirst(&first, err)
			}
		}()
	}
	wg.Wait()
	if p := first.Load(); p != nil {
		return *p
	}
	return nil
}

// gocbcoreAsync is gocbcore's own way to a batch: its API is asynchronous,
// so one goroutine issues every Get and waits for the last callback.
type gocbcoreAsync struct {
	agent   *gocbcore.Agent
	ks      *keyset
	timeout time.Duration
	left    atomic.Int64
	bad     atomic.Pointer[error]
	done    chan struct{}
	cb      func(*gocbcore.GetResult, error)
}

func newGocbcoreAsync(agent *gocbcore.Agent, ks *keyset, timeout time.Duration) *gocbcoreAsync {
	b := &gocbcoreAsync{agent: agent, ks: ks, timeout: timeout, done: make(chan struct{}, 1)}
	b.cb = func(r *gocbcore.GetResult, err error) {
		if err == nil && len(r.Value) != len(b.ks.value) {
			err = errShortValue
		}
		if err != nil {
			keepFirst(&b.bad, err)
		}
		if b.left.Add(-1) == 0 {
			b.done <- struct{}{}
		}
	}
	return b
}

func (b *gocbcoreAsync) getBatch(lo, n int) error {
	b.bad.Store(nil)
	b.left.Store(int64(n))
	deadline := time.Now().Add(b.timeout)
	for i := range n {
		if _, err := b.agent.Get(gocbcore.GetOptions{Key: b.ks.bkeys[lo+i], Deadline: deadline}, b.cb); err != nil {
			// The Gets already issued still call back: wait for them
			// so that the next batch starts from a clean count.
			if b.left.Add(-int64(n-i)) == 0 {
				b.done <- struct{}{}
			}
			<-b.done
			return err
		}
	}
	<-b.done
	if p := b.bad.Load(); p != nil {
		return *p
	}
	return nil
}

// rawBatch is the wire limit for a batch on memcached: one connection, the
// batch's requests encoded (memdx) into one buffer and sent in one Write,
// then read until every answer is in. With quiet set (OpGetQ or OpGetKQ)
// the requests are that quiet get followed by a NOOP (kvwire's GetMany
// with binary_multiget sends GETKQ + NOOP to memcached: a miss costs no
// response, and the NOOP's answer ends the batch); without it they are
// plain GETs, one answer each.
// The checks are the least a client must do: each answer's status, its
// opaque (answers come in request order on one connection), the value's
// length, and for quiet gets that no key was missed.
type rawBatch struct {
	rawConn
	quiet   memdx.OpCode // 0: plain GETs
	ks      *keyset
	out, in []byte
}

// rawConn is a raw batch's one connection to addr, dialed by prepare.
type rawConn struct {
	addr string
	nc   net.Conn
}

func (r *rawConn) prepare() error {
	if r.nc != nil {
		return nil
	}
	nc, err := dialRaw(r.addr)
	if err != nil {
		return err
	}
	r.nc = nc
	return nil
}

func (r *rawConn) close() {
	if r.nc != nil {
		_ = r.nc.Close()
		r.nc = nil
	}
}

func (b *rawBatch) getBatch(lo, n int) error {
	// A hung server must not hang the harness.
	_ = b.nc.SetDeadline(time.Now().Add(time.Minute))
	want := len(b.ks.value)
	if b.in == nil {
		b.in = make([]byte, max(256<<10, 2*n*(want+64)))
	}
	out := b.out[:0]
	for i := range n {
		req := memdx.NewGet(b.ks.bkeys[lo+i])
		if b.quiet != 0 {
			req.OpCode = b.quiet
		}
		var err error
		if out, err = req.AppendTo(out, uint32(i+1)); err != nil {
			return err
		}
	}
	answers := n // GET: one answer per key
	if b.quiet != 0 {
		noop := memdx.NewNoop()
		var err error
		if out, err = noop.AppendTo(out, uint32(n+1)); err != nil {
			return err
		}
		answers = n + 1 // quiet gets: one per hit, then the NOOP's
	}
	b.out = out
	if _, err := b.nc.Write(out); err != nil {
		return err
	}
	in := b.in
	r, w := 0, 0
	for got := 0; got < answers; {
		if w-r >= memdx.HeaderSize {
			size, err := memdx.PacketSize(in[r:w], 0)
			if err != nil {
				return err
			}
			if w-r >= size {
				p := in[r : r+size]
				r += size
				opaque := binary.BigEndian.Uint32(p[12:16])
				if memdx.OpCode(p[1]) == memdx.OpNoop {
					if opaque != uint32(n+1) || got != n {
						return fmt.Errorf("raw NOOP (opaque %d) after %d of %d hits", opaque, got, n)
					}
					got++
					continue
				}
				if opaque != uint32(got+1) {
					return fmt.Errorf("raw GET: answer %d has opaque %d (a key missed?)", got+1, opaque)
				}
				st, vlen := rawAnswer(p)
				if st != 0 {
					return fmt.Errorf("raw GET: status 0x%04x", st)
				}
				if vlen != want {
					return errShortValue
				}
				got++
				continue
			}
		}
		w = copy(in, in[r:w])
		r = 0
		m, err := b.nc.Read(in[w:])
		if err != nil {
			return err
		}
		w += m
	}
	return nil
}

// rawTextBatch is the wire limit for a batch on memcached's text protocol:
// one connection, one "gets k1 ... kn\r\n" sent in one Write (memcached
// serves it as one request, in one event-loop turn, where a binary batch of
// n gets is n requests spread over turns of -R each), then read until END.
// The checks are the least a client must do: every key answered, in order,
// by a VALUE line of the right length and its data, then END; any other
// line (ERROR, CLIENT_ERROR, SERVER_ERROR) is an error.
type rawTextBatch struct {
	rawConn
	ks      *keyset
	out, in []byte
}

func (b *rawTextBatch) getBatch(lo, n int) error {
	// A hung server must not hang the harness.
	_ = b.nc.SetDeadline(time.Now().Add(time.Minute))
	want := len(b.ks.value)
	keys := b.ks.bkeys[lo : lo+n]
	if b.in == nil {
		b.in = make([]byte, max(256<<10, 2*n*(want+64)))
	}
	out := append(b.out[:0], "gets"...)
	for _, k := range keys {
		out = append(out, ' ')
		out = append(out, k...)
	}
	out = append(out, "\r\n"...)
	b.out = out
	if _, err := b.nc.Write(out); err != nil {
		return err
	}
	in := b.in
	r, w, next := 0, 0, 0
	for {
		used, answered, end, err := parseTextGets(in[r:w], keys, next, want)
		if err != nil {
			return err
		}
		r += used
		next = answered
		if end {
			if r != w {
				return fmt.Errorf("raw gets: %d bytes after END", w-r)
			}
			return nil
		}
		if r == 0 && w == len(in) {
			return fmt.Errorf("raw gets: an answer longer than the %d-byte buffer", len(in))
		}
		w = copy(in, in[r:w])
		r = 0
		m, err := b.nc.Read(in[w:])
		if err != nil {
			return err
		}
		w += m
	}
}

// parseTextGets reads the complete items at the start of p, the answer to
// "gets" of keys of which the first next are already answered: a VALUE
// line ("VALUE <key> <flags> <bytes> [<cas>]\r\n") for keys[next] with its
// want bytes of data and "\r\n", then one for keys[next+1], and so on, and
// END once all are. It returns the bytes it used (whole items only: the
// rest waits for more input), the keys now answered, and whether it read
// END. A key out of order or missing, a value of another length, an
// ill-formed item or any other line is an error.
func parseTextGets(p []byte, keys [][]byte, next, want int) (used, answered int, end bool, err error) {
	for {
		nl := bytes.IndexByte(p[used:], '\n')
		if nl < 0 {
			return used, next, false, nil
		}
		lineEnd := used + nl + 1
		if nl == 0 || p[lineEnd-2] != '\r' {
			return used, next, false, fmt.Errorf("raw gets: a line not ended by CRLF: %q", clip(p[used:lineEnd]))
		}
		line := p[used : lineEnd-2]
		if string(line) == "END" {
			if next != len(keys) {
				return used, next, false, fmt.Errorf("raw gets: END after %d of %d keys (key %s missed)", next, len(keys), keys[next])
			}
			return lineEnd, next, true, nil
		}
		rest, ok := bytes.CutPrefix(line, []byte("VALUE "))
		if !ok {
			return used, next, false, fmt.Errorf("raw gets: %q", clip(line))
		}
		key, rest, _ := bytes.Cut(rest, []byte{' '})
		_, rest, _ = bytes.Cut(rest, []byte{' '})  // flags
		size, _, _ := bytes.Cut(rest, []byte{' '}) // the cas follows
		if next >= len(keys) {
			return used, next, false, fmt.Errorf("raw gets: a VALUE for %s after all %d keys", clip(key), len(keys))
		}
		if !bytes.Equal(key, keys[next]) {
			return used, next, false, fmt.Errorf("raw gets: VALUE %d is key %s, want %s (a key missed?)", next, clip(key), keys[next])
		}
		if n, ok := atoi(size); !ok || n != want {
			if ok {
				return used, next, false, errShortValue
			}
			return used, next, false, fmt.Errorf("raw gets: VALUE line %q has no byte count", clip(line))
		}
		itemEnd := lineEnd + want + 2
		if itemEnd > len(p) {
			return used, next, false, nil
		}
		if p[itemEnd-2] != '\r' || p[itemEnd-1] != '\n' {
			return used, next, false, fmt.Errorf("raw gets: key %s's %d bytes of data not followed by CRLF", keys[next], want)
		}
		used = itemEnd
		next++
	}
}

// atoi reads a decimal count of at most 9 digits.
func atoi(b []byte) (int, bool) {
	if len(b) == 0 || len(b) > 9 {
		return 0, false
	}
	n := 0
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	return n, true
}

// clip is at most the first 64 bytes of b, for an error message.
func clip(b []byte) []byte {
	if len(b) > 64 {
		return b[:64]
	}
	return b
}
