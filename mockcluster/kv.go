package mockcluster

import (
	"encoding/json"
	"strconv"
	"time"

	"github.com/kvwire/kvwire/memdx"
)

// Lock times of GET_LOCKED, in seconds (kv_engine's getl_default_timeout
// and getl_max_timeout).
const (
	DefaultLockTime = 15
	MaxLockTime     = 30
)

// relativeExpiryLimit is the largest expiry read as seconds from now (30
// days); larger values are absolute Unix times.
const relativeExpiryLimit = 30 * 24 * 60 * 60

func (cn *conn) handleKV(p *memdx.Packet) outcome {
	switch p.OpCode {
	case memdx.OpGet, memdx.OpGetQ, memdx.OpGetK, memdx.OpGetKQ, memdx.OpGetReplica:
		cn.get(p)
	case memdx.OpSet, memdx.OpSetQ, memdx.OpAdd, memdx.OpAddQ, memdx.OpReplace, memdx.OpReplaceQ:
		return cn.store(p)
	case memdx.OpDelete, memdx.OpDeleteQ:
		return cn.del(p)
	case memdx.OpAppend, memdx.OpAppendQ, memdx.OpPrepend, memdx.OpPrependQ:
		return cn.concat(p)
	case memdx.OpIncrement, memdx.OpIncrementQ, memdx.OpDecrement, memdx.OpDecrementQ:
		return cn.counter(p)
	case memdx.OpTouch, memdx.OpGAT, memdx.OpGATQ:
		cn.touch(p)
	case memdx.OpGetLocked:
		cn.getLocked(p)
	case memdx.OpUnlockKey:
		cn.unlock(p)
	case memdx.OpGetMeta:
		cn.getMeta(p)
	case memdx.OpObserveSeqno:
		cn.observeSeqno(p)
	case memdx.OpObserve:
		cn.observe(p)
	case memdx.OpSubdocGet, memdx.OpSubdocExists, memdx.OpSubdocGetCount, memdx.OpSubdocMultiLookup,
		memdx.OpSubdocDictAdd, memdx.OpSubdocDictUpsert, memdx.OpSubdocDelete, memdx.OpSubdocReplace,
		memdx.OpSubdocArrayPushLast, memdx.OpSubdocArrayPushFirst, memdx.OpSubdocArrayInsert,
		memdx.OpSubdocArrayAddUnique, memdx.OpSubdocCounter, memdx.OpSubdocMultiMutation,
		memdx.OpSubdocReplaceBodyWithXattr:
		return cn.subdoc(p)
	case memdx.OpRangeScanCreate, memdx.OpRangeScanContinue, memdx.OpRangeScanCancel:
		if cn.c.opts.NoRangeScans {
			cn.fail(p, memdx.StatusUnknownCommand, "")
			return outcome{}
		}
		return cn.rangeScan(p)
	default:
		cn.fail(p, memdx.StatusUnknownCommand, "")
	}
	return outcome{}
}

// rangeScan runs RANGE_SCAN_CREATE, _CONTINUE or _CANCEL.
func (cn *conn) rangeScan(p *memdx.Packet) outcome {
	switch p.OpCode {
	case memdx.OpRangeScanCreate:
		return cn.rangeScanCreate(p)
	case memdx.OpRangeScanContinue:
		cn.rangeScanContinue(p)
	case memdx.OpRangeScanCancel:
		cn.rangeScanCancel(p)
	}
	return outcome{}
}

// frames are the frame infos of a request that the mock acts on.
type frames struct {
	durable bool
	level   memdx.DurabilityLevel
	// timeout is the durability timeout the request gave (0: none given).
	timeout     time.Duration
	preserveTTL bool
}

// parseFrames reads the framing extras. Durability is allowed when
// mutation, preserve-TTL when ttl; anything else answers EINVAL, unknown
// ids UNKNOWN_FRAME_INFO. It reports false after answering.
func (cn *conn) parseFrames(p *memdx.Packet, mutation, ttl bool) (frames, bool) {
	var f frames
	if len(p.FramingExtras) == 0 {
		return f, true
	}
	st := memdx.StatusSuccess
	var ctx string
	err := memdx.FrameInfos(p.FramingExtras, func(id uint16, data []byte) error {
		switch memdx.RequestFrameID(id) {
		case memdx.FrameBarrier, memdx.FrameOpenTracingContext:
		case memdx.FrameDurability:
			if !mutation {
				st, ctx = memdx.StatusInvalidArgs, "Durability is only valid on mutations"
				return errStop
			}
			level, timeout, err := memdx.DecodeDurabilityFrame(data)
			if err != nil {
				st, ctx = memdx.StatusInvalidArgs, err.Error()
				if len(data) >= 1 && (data[0] == 0 || data[0] > byte(memdx.DurabilityPersistToMajority)) {
					st = memdx.StatusDurabilityInvalidLevel
				}
				return errStop
			}
			f.durable, f.level, f.timeout = true, level, time.Duration(timeout)*time.Millisecond
		case memdx.FramePreserveTTL:
			if !ttl || len(data) != 0 {
				st, ctx = memdx.StatusInvalidArgs, "PreserveTTL is not valid here"
				return errStop
			}
			f.preserveTTL = true
		default:
			st, ctx = memdx.StatusUnknownFrameInfo, "Unknown frame info id "+strconv.Itoa(int(id))
			return errStop
		}
		return nil
	})
	if err != nil && st == memdx.StatusSuccess {
		st, ctx = memdx.StatusInvalidArgs, err.Error()
	}
	if st != memdx.StatusSuccess {
		cn.fail(p, st, ctx)
		return f, false
	}
	return f, true
}

type stopErr struct{}

func (stopErr) Error() string { return "stop" }

var errStop error = stopErr{}

// target is where a key request goes: its bucket state, vbucket and the
// document's key in the vbucket map.
type target struct {
	b   *Bucket
	s   *bucketSnap
	vb  *vbucket
	cid uint32
	// mk aliases the request or the connection's scratch buffer: use it for
	// lookups only (string(mk) copies it for an insert).
	mk []byte
}

// locate checks the key, the vbucket's owner (the active node, or a replica
// for GET_REPLICA) and the collection. It reports false after answering.
func (cn *conn) locate(p *memdx.Packet, replica bool) (target, bool) {
	var t target
	t.b = cn.bucket.Load()
	key := p.Key
	if cn.has(memdx.FeatureCollections) {
		cid, k, err := memdx.SplitCollectionKey(p.Key)
		if err != nil {
			cn.fail(p, memdx.StatusInvalidArgs, "Invalid collection id prefix: "+err.Error())
			return t, false
		}
		t.cid, key, t.mk = cid, k, p.Key
	} else {
		cn.scratch = append(append(cn.scratch[:0], 0), p.Key...)
		t.mk = cn.scratch
	}
	if len(key) == 0 {
		cn.fail(p, memdx.StatusInvalidArgs, "Request must include key")
		return t, false
	}
	if len(key) > maxKeyLen {
		cn.fail(p, memdx.StatusInvalidArgs, "Key length exceeds 250")
		return t, false
	}
	t.s = t.b.snap.Load()
	if int(p.Vbucket) >= t.b.numVbs {
		cn.nmv(p, t.s)
		return t, false
	}
	chain := t.s.chains[p.Vbucket]
	owns := false
	if replica {
		for _, id := range chain[1:] {
			owns = owns || id == cn.n.id
		}
	} else {
		owns = chain[0] == cn.n.id
	}
	if !owns {
		cn.nmv(p, t.s)
		return t, false
	}
	if !t.s.manifest.has(t.cid) {
		cn.failManifest(p, memdx.StatusUnknownCollection, t.s.manifest.uid,
			"Unknown collection id 0x"+strconv.FormatUint(uint64(t.cid), 16))
		return t, false
	}
	t.vb = t.b.vbs[p.Vbucket]
	return t, true
}

// live returns the live document at mk, nil when missing or expired.
// vb.mu must be held.
func (vb *vbucket) live(mk []byte, now time.Time) *document {
	d := vb.docs[string(mk)]
	if d == nil || d.expired(now) {
		return nil
	}
	return d
}

// docValue is a document's value as this connection gets it: compressed
// when it arrived compressed and the client negotiated Snappy.
func (cn *conn) docValue(d *document) ([]byte, memdx.Datatype) {
	if d.snappy != nil && cn.has(memdx.FeatureSnappy) {
		return d.snappy, cn.outDatatype(d.datatype | memdx.DatatypeSnappy)
	}
	return d.value, cn.outDatatype(d.datatype)
}

func (cn *conn) get(p *memdx.Packet) {
	op := p.OpCode
	quiet := op == memdx.OpGetQ || op == memdx.OpGetKQ
	if len(p.Extras) != 0 || len(p.Value) != 0 {
		cn.fail(p, memdx.StatusInvalidArgs, "GET takes no extras and no value")
		return
	}
	t, ok := cn.locateChecked(p, op == memdx.OpGetReplica)
	if !ok {
		return
	}
	t.vb.mu.Lock()
	d := t.vb.docs[string(t.mk)]
	cas := uint64(0)
	if d != nil {
		cas = d.cas
		// Only documents with an expiry or a lock need the time.
		if d.expiry != 0 || !d.lockedUntil.IsZero() {
			now := cn.c.clock.Now()
			if d.expired(now) {
				d = nil
			} else if op != memdx.OpGetReplica && d.locked(now) {
				cas = lockedCas
			}
		}
	}
	if d == nil {
		t.vb.mu.Unlock()
		if !quiet {
			cn.fail(p, memdx.StatusKeyNotFound, "")
		}
		return
	}
	value, dt := cn.docValue(d)
	var ext [4]byte
	putUint32(ext[:], d.flags)
	t.vb.mu.Unlock()
	var key []byte
	if op == memdx.OpGetK || op == memdx.OpGetKQ {
		key = p.Key
	}
	cn.reply(p, memdx.StatusSuccess, cas, dt, ext[:], key, value)
}

// locateChecked is locate for a request that is not a mutation: it parses
// its frame infos as a read's (no durability, no preserve-TTL) first. It
// reports false after answering the error.
func (cn *conn) locateChecked(p *memdx.Packet, replica bool) (target, bool) {
	if _, ok := cn.parseFrames(p, false, false); !ok {
		return target{}, false
	}
	return cn.locate(p, replica)
}

// inValue reads a mutation's value: it checks the datatype against what was
// negotiated, inflates a snappy value, copies it out of the read buffer and
// detects JSON as the server does. It reports false after answering.
func (cn *conn) inValue(p *memdx.Packet) (value, snappyRaw []byte, dt memdx.Datatype, ok bool) {
	in := p.Datatype
	switch {
	case !in.Valid() || in.Has(memdx.DatatypeXattr):
		cn.fail(p, memdx.StatusInvalidArgs, "Invalid datatype "+in.String())
		return nil, nil, 0, false
	case in.Has(memdx.DatatypeJSON) && !cn.has(memdx.FeatureJSON):
		cn.fail(p, memdx.StatusInvalidArgs, "Datatype JSON was not negotiated")
		return nil, nil, 0, false
	case in.Has(memdx.DatatypeSnappy) && !cn.has(memdx.FeatureSnappy):
		cn.fail(p, memdx.StatusInvalidArgs, "Datatype Snappy was not negotiated")
		return nil, nil, 0, false
	}
	if in.Has(memdx.DatatypeSnappy) {
		// Inflating up to the server's limit (not maxValue) lets a value
		// that is merely too big get E2BIG below, as the server answers.
		v, err := memdx.DecompressSnappy(nil, p.Value, maxSnappyInflated)
		if err != nil {
			cn.fail(p, memdx.StatusInvalidArgs, "Failed to inflate the snappy value: "+err.Error())
			return nil, nil, 0, false
		}
		value, snappyRaw = v, append([]byte(nil), p.Value...)
	} else {
		value = append([]byte(nil), p.Value...)
	}
	if len(value) > maxValue {
		cn.fail(p, memdx.StatusTooBig, "Value exceeds 20 MiB")
		return nil, nil, 0, false
	}
	if json.Valid(value) {
		dt = memdx.DatatypeJSON
	}
	return value, snappyRaw, dt, true
}

// expiry converts a wire expiry to absolute Unix seconds: 0 is never,
// values up to 30 days are relative, larger ones absolute (one in the past
// expires at once).
func expiry(exp uint32, now time.Time) uint32 {
	switch {
	case exp == 0:
		return 0
	case exp <= relativeExpiryLimit:
		return uint32(now.Unix()) + exp
	case int64(exp) <= now.Unix():
		return uint32(now.Unix())
	}
	return exp
}

// casCheck applies the server's rules for mutating an existing document: a
// locked document accepts only its lock CAS (LOCKED otherwise); an unlocked
// one accepts CAS 0 or its current CAS (KEY_EEXISTS otherwise).
func casCheck(d *document, cas uint64, now time.Time) memdx.Status {
	if d.locked(now) {
		if cas != d.cas {
			return memdx.StatusLocked
		}
		return memdx.StatusSuccess
	}
	if cas != 0 && cas != d.cas {
		return memdx.StatusKeyExists
	}
	return memdx.StatusSuccess
}

// mutResult is what a committed mutation answers.
type mutResult struct {
	cas, seqno, vbUUID uint64
	counter            uint64
}

// reqHeader keeps what a deferred response needs from a request whose
// buffer will be reused.
func reqHeader(p *memdx.Packet) *memdx.Packet {
	return &memdx.Packet{OpCode: p.OpCode, Opaque: p.Opaque}
}

// mutated answers a successful mutation (nothing for a quiet opcode), with
// the mutation token when MutationSeqno was negotiated.
func (cn *conn) mutated(h *memdx.Packet, r mutResult, value []byte) {
	if h.OpCode.IsQuiet() {
		return
	}
	var ext [16]byte
	var extras []byte
	if cn.has(memdx.FeatureMutationSeqno) {
		putUint64(ext[0:8], r.vbUUID)
		putUint64(ext[8:16], r.seqno)
		extras = ext[:]
	}
	cn.reply(h, memdx.StatusSuccess, r.cas, 0, extras, nil, value)
}

// commitMutation finishes a mutation whose checks passed, with t.vb.mu held
// (it unlocks it). A plain write commits now; a synchronous write checks
// that its durability is possible and, with a sync-write delay, stays
// pending (other writers of the key get SYNC_WRITE_IN_PROGRESS) until a
// timer commits it. When the request's durability timeout ends first, the
// write is aborted, never applied, and answered SYNC_WRITE_AMBIGUOUS, as
// kv_engine's ActiveDurabilityMonitor aborts an expired SyncWrite
// (engines/ep/src/durability/active_durability_monitor.cc, processTimeout;
// VBucket::abort in engines/ep/src/vbucket.cc answers the client
// sync_write_ambiguous).
func (cn *conn) commitMutation(p *memdx.Packet, t target, f frames, commit func(now time.Time) mutResult,
	respond func(h *memdx.Packet, r mutResult)) outcome {
	if f.durable {
		chain := t.s.chains[p.Vbucket]
		have := 0
		for _, id := range chain {
			if id >= 0 {
				have++
			}
		}
		if have < len(chain)/2+1 {
			t.vb.mu.Unlock()
			cn.fail(p, memdx.StatusDurabilityImpossible, "Not enough replicas for the durability level")
			return outcome{}
		}
	}
	delay := time.Duration(cn.c.syncWriteDelay.Load())
	if !f.durable || delay <= 0 {
		r := commit(cn.c.clock.Now())
		t.vb.mu.Unlock()
		respond(p, r)
		return outcome{}
	}
	mk := string(t.mk)
	sw := &syncWrite{done: make(chan struct{})}
	t.vb.pending[mk] = sw
	t.vb.mu.Unlock()
	h := reqHeader(p)
	answer := func() {
		if sw.aborted {
			cn.fail(h, memdx.StatusSyncWriteAmbiguous, "The durability timeout expired before the synchronous write was committed")
			return
		}
		respond(h, sw.res)
	}
	abortAfter := time.Duration(0)
	if f.timeout > 0 && f.timeout < delay {
		abortAfter = f.timeout
	}
	if cn.has(memdx.FeatureUnorderedExecution) {
		sw.onDone = func() {
			cn.wmu.Lock()
			defer cn.wmu.Unlock()
			if !cn.wclosed {
				answer()
				_ = cn.flushLocked()
			}
		}
		cn.c.scheduleCommit(t.vb, mk, sw, delay, abortAfter, commit)
		return outcome{}
	}
	cn.c.scheduleCommit(t.vb, mk, sw, delay, abortAfter, commit)
	return outcome{wait: sw.done, then: answer}
}

// syncWrite is a pending synchronous write.
type syncWrite struct {
	done chan struct{}
	res  mutResult
	// aborted is set when the durability timeout ended the write unapplied.
	aborted bool
	onDone  func()
}

// scheduleCommit commits sw after d, or, when abortAfter is not 0 (it is
// then shorter than d), aborts it after abortAfter. CommitSyncWrites
// commits it before either.
func (c *Cluster) scheduleCommit(vb *vbucket, mk string, sw *syncWrite, d, abortAfter time.Duration, commit func(time.Time) mutResult) {
	finish := func(abort bool) {
		vb.mu.Lock()
		delete(vb.pending, mk)
		if abort {
			sw.aborted = true
		} else {
			sw.res = commit(c.clock.Now())
		}
		vb.mu.Unlock()
		close(sw.done)
		if sw.onDone != nil {
			sw.onDone()
		}
	}
	run := func() { finish(false) }
	fire := run
	if abortAfter > 0 {
		d = abortAfter
		fire = func() { finish(true) }
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return
	}
	fired := c.syncFired
	var t *time.Timer
	t = time.AfterFunc(d, func() {
		if fired != nil {
			fired()
		}
		// The entry in c.timers is the claim on the commit: whoever removes
		// it (this callback, or CommitSyncWrites) runs it, exactly once.
		c.mu.Lock()
		_, mine := c.timers[t]
		delete(c.timers, t)
		c.mu.Unlock()
		if mine {
			fire()
		}
	})
	c.timers[t] = run
}

// PendingSyncWrites returns how many synchronous writes wait for their
// commit.
func (c *Cluster) PendingSyncWrites() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.timers)
}

// CommitSyncWrites commits every pending synchronous write now, instead of
// when the sync-write delay ends, and answers their clients.
func (c *Cluster) CommitSyncWrites() {
	c.mu.Lock()
	runs := make([]func(), 0, len(c.timers))
	for t, run := range c.timers {
		// Removing the entry claims the write: a timer that already fired
		// finds it gone and leaves the commit to us, so run it whatever Stop
		// says (skipping it would leave the write unanswered and its key
		// blocked by SYNC_WRITE_IN_PROGRESS for good).
		t.Stop()
		delete(c.timers, t)
		runs = append(runs, run)
	}
	c.mu.Unlock()
	for _, run := range runs {
		run()
	}
}

// pendingCheck answers SYNC_WRITE_IN_PROGRESS when the key has a pending
// synchronous write. vb.mu must be held; on false it was released.
func (cn *conn) pendingCheck(p *memdx.Packet, t target) bool {
	if t.vb.pending[string(t.mk)] != nil {
		t.vb.mu.Unlock()
		cn.fail(p, memdx.StatusSyncWriteInProgress, "A synchronous write on this key is in progress")
		return false
	}
	return true
}

func (cn *conn) store(p *memdx.Packet) outcome {
	op := p.OpCode
	if len(p.Extras) != 8 {
		cn.fail(p, memdx.StatusInvalidArgs, "SET/ADD/REPLACE extras must be flags and expiry (8 bytes)")
		return outcome{}
	}
	isAdd := op == memdx.OpAdd || op == memdx.OpAddQ
	isReplace := op == memdx.OpReplace || op == memdx.OpReplaceQ
	if isAdd && p.Cas != 0 {
		cn.fail(p, memdx.StatusInvalidArgs, "ADD takes no CAS")
		return outcome{}
	}
	f, ok := cn.parseFrames(p, true, !isAdd)
	if !ok {
		return outcome{}
	}
	t, ok := cn.locate(p, false)
	if !ok {
		return outcome{}
	}
	value, raw, dt, ok := cn.inValue(p)
	if !ok {
		return outcome{}
	}
	now := cn.c.clock.Now()
	flags := getUint32(p.Extras[0:4])
	exp := expiry(getUint32(p.Extras[4:8]), now)
	t.vb.mu.Lock()
	if !cn.pendingCheck(p, t) {
		return outcome{}
	}
	d := t.vb.live(t.mk, now)
	st := memdx.StatusSuccess
	switch {
	case d == nil && (isReplace || p.Cas != 0):
		st = memdx.StatusKeyNotFound
	case d != nil && isAdd:
		st = memdx.StatusKeyExists
	case d != nil:
		st = casCheck(d, p.Cas, now)
	}
	if st != memdx.StatusSuccess {
		t.vb.mu.Unlock()
		cn.fail(p, st, "")
		return outcome{}
	}
	nd := &document{value: value, flags: flags, datatype: dt, expiry: exp, snappy: raw}
	if d != nil {
		// A write of the body keeps the document's xattrs (kv_engine's
		// MutationCommandContext copies them to the new item).
		nd.xattrs = d.xattrs
		if f.preserveTTL {
			nd.expiry = d.expiry
		}
	}
	mk, vb := string(t.mk), t.vb
	return cn.commitMutation(p, t, f, func(now time.Time) mutResult {
		vb.store(mk, nd, now)
		return mutResult{cas: nd.cas, seqno: nd.seqno, vbUUID: vb.uuid}
	}, func(h *memdx.Packet, r mutResult) { cn.mutated(h, r, nil) })
}

func (cn *conn) del(p *memdx.Packet) outcome {
	if len(p.Extras) != 0 || len(p.Value) != 0 {
		cn.fail(p, memdx.StatusInvalidArgs, "DELETE takes no extras and no value")
		return outcome{}
	}
	f, ok := cn.parseFrames(p, true, false)
	if !ok {
		return outcome{}
	}
	t, ok := cn.locate(p, false)
	if !ok {
		return outcome{}
	}
	now := cn.c.clock.Now()
	t.vb.mu.Lock()
	if !cn.pendingCheck(p, t) {
		return outcome{}
	}
	d := t.vb.live(t.mk, now)
	st := memdx.StatusKeyNotFound
	if d != nil {
		st = casCheck(d, p.Cas, now)
	}
	if st != memdx.StatusSuccess {
		t.vb.mu.Unlock()
		cn.fail(p, st, "")
		return outcome{}
	}
	mk, vb := string(t.mk), t.vb
	return cn.commitMutation(p, t, f, func(now time.Time) mutResult {
		cas, seqno := vb.remove(mk, now)
		return mutResult{cas: cas, seqno: seqno, vbUUID: vb.uuid}
	}, func(h *memdx.Packet, r mutResult) { cn.mutated(h, r, nil) })
}

func (cn *conn) concat(p *memdx.Packet) outcome {
	if len(p.Extras) != 0 {
		cn.fail(p, memdx.StatusInvalidArgs, "APPEND/PREPEND take no extras")
		return outcome{}
	}
	f, ok := cn.parseFrames(p, true, false)
	if !ok {
		return outcome{}
	}
	t, ok := cn.locate(p, false)
	if !ok {
		return outcome{}
	}
	value, _, _, ok := cn.inValue(p)
	if !ok {
		return outcome{}
	}
	now := cn.c.clock.Now()
	t.vb.mu.Lock()
	if !cn.pendingCheck(p, t) {
		return outcome{}
	}
	d := t.vb.live(t.mk, now)
	st := memdx.StatusNotStored
	if d != nil {
		st = casCheck(d, p.Cas, now)
	}
	if st == memdx.StatusSuccess && len(d.value)+len(value) > maxValue {
		st = memdx.StatusTooBig
	}
	if st != memdx.StatusSuccess {
		t.vb.mu.Unlock()
		cn.fail(p, st, "")
		return outcome{}
	}
	nv := make([]byte, 0, len(d.value)+len(value))
	if p.OpCode == memdx.OpAppend || p.OpCode == memdx.OpAppendQ {
		nv = append(append(nv, d.value...), value...)
	} else {
		nv = append(append(nv, value...), d.value...)
	}
	nd := &document{value: nv, flags: d.flags, expiry: d.expiry, xattrs: d.xattrs}
	if json.Valid(nv) {
		nd.datatype = memdx.DatatypeJSON
	}
	mk, vb := string(t.mk), t.vb
	return cn.commitMutation(p, t, f, func(now time.Time) mutResult {
		vb.store(mk, nd, now)
		return mutResult{cas: nd.cas, seqno: nd.seqno, vbUUID: vb.uuid}
	}, func(h *memdx.Packet, r mutResult) { cn.mutated(h, r, nil) })
}

func (cn *conn) counter(p *memdx.Packet) outcome {
	if len(p.Extras) != 20 || len(p.Value) != 0 {
		cn.fail(p, memdx.StatusInvalidArgs, "INCREMENT/DECREMENT extras must be delta, initial and expiry (20 bytes), no value")
		return outcome{}
	}
	if p.Cas != 0 {
		// kv_engine's validator for INCREMENT/DECREMENT requires CAS 0.
		cn.fail(p, memdx.StatusInvalidArgs, "Request CAS must not be set")
		return outcome{}
	}
	f, ok := cn.parseFrames(p, true, true)
	if !ok {
		return outcome{}
	}
	t, ok := cn.locate(p, false)
	if !ok {
		return outcome{}
	}
	incr := p.OpCode == memdx.OpIncrement || p.OpCode == memdx.OpIncrementQ
	delta, initial := getUint64(p.Extras[0:8]), getUint64(p.Extras[8:16])
	rawExp := getUint32(p.Extras[16:20])
	now := cn.c.clock.Now()
	t.vb.mu.Lock()
	if !cn.pendingCheck(p, t) {
		return outcome{}
	}
	d := t.vb.live(t.mk, now)
	var nd *document
	var newVal uint64
	switch {
	case d == nil && rawExp == memdx.NoCreate:
		t.vb.mu.Unlock()
		cn.fail(p, memdx.StatusKeyNotFound, "")
		return outcome{}
	case d == nil:
		newVal = initial
		nd = &document{expiry: expiry(rawExp, now)}
	default:
		if st := casCheck(d, p.Cas, now); st != memdx.StatusSuccess {
			t.vb.mu.Unlock()
			cn.fail(p, st, "")
			return outcome{}
		}
		cur, err := strconv.ParseUint(string(d.value), 10, 64)
		if err != nil {
			t.vb.mu.Unlock()
			cn.fail(p, memdx.StatusBadDelta, "The document is not a number")
			return outcome{}
		}
		switch {
		case incr:
			newVal = cur + delta // wraps at 2^64, as the server does
		case delta > cur:
			newVal = 0
		default:
			newVal = cur - delta
		}
		nd = &document{flags: d.flags, expiry: d.expiry, xattrs: d.xattrs}
	}
	nd.value = strconv.AppendUint(nil, newVal, 10)
	nd.datatype = memdx.DatatypeJSON
	mk, vb := string(t.mk), t.vb
	return cn.commitMutation(p, t, f, func(now time.Time) mutResult {
		vb.store(mk, nd, now)
		return mutResult{cas: nd.cas, seqno: nd.seqno, vbUUID: vb.uuid, counter: newVal}
	}, func(h *memdx.Packet, r mutResult) {
		var v [8]byte
		putUint64(v[:], r.counter)
		cn.mutated(h, r, v[:])
	})
}

// touch handles TOUCH, GAT and GATQ: a new expiry and CAS, no new value.
func (cn *conn) touch(p *memdx.Packet) {
	if len(p.Extras) != 4 || len(p.Value) != 0 {
		cn.fail(p, memdx.StatusInvalidArgs, "TOUCH/GAT extras must be the expiry (4 bytes), no value")
		return
	}
	t, ok := cn.locateChecked(p, false)
	if !ok {
		return
	}
	now := cn.c.clock.Now()
	t.vb.mu.Lock()
	if !cn.pendingCheck(p, t) {
		return
	}
	d := t.vb.live(t.mk, now)
	if d == nil {
		t.vb.mu.Unlock()
		if p.OpCode != memdx.OpGATQ {
			cn.fail(p, memdx.StatusKeyNotFound, "")
		}
		return
	}
	if d.locked(now) {
		t.vb.mu.Unlock()
		cn.fail(p, memdx.StatusLocked, "")
		return
	}
	nd := *d
	nd.expiry = expiry(getUint32(p.Extras), now)
	nd.cas = t.vb.nextCas(now)
	t.vb.seqno++
	nd.seqno = t.vb.seqno
	t.vb.docs[string(t.mk)] = &nd
	value, dt := cn.docValue(&nd)
	t.vb.mu.Unlock()
	if p.OpCode == memdx.OpTouch {
		cn.reply(p, memdx.StatusSuccess, nd.cas, 0, nil, nil, nil)
		return
	}
	var ext [4]byte
	putUint32(ext[:], nd.flags)
	cn.reply(p, memdx.StatusSuccess, nd.cas, dt, ext[:], nil, value)
}

func (cn *conn) getLocked(p *memdx.Packet) {
	if (len(p.Extras) != 0 && len(p.Extras) != 4) || len(p.Value) != 0 {
		cn.fail(p, memdx.StatusInvalidArgs, "GET_LOCKED extras must be empty or the lock time (4 bytes)")
		return
	}
	t, ok := cn.locateChecked(p, false)
	if !ok {
		return
	}
	lock := uint32(0)
	if len(p.Extras) == 4 {
		lock = getUint32(p.Extras)
	}
	if lock == 0 || lock > MaxLockTime {
		lock = DefaultLockTime
	}
	now := cn.c.clock.Now()
	t.vb.mu.Lock()
	// A lock taken on the committed version would vanish when the pending
	// sync write commits; kv_engine answers SYNC_WRITE_IN_PROGRESS.
	if !cn.pendingCheck(p, t) {
		return
	}
	d := t.vb.live(t.mk, now)
	if d == nil {
		t.vb.mu.Unlock()
		cn.fail(p, memdx.StatusKeyNotFound, "")
		return
	}
	if d.locked(now) {
		t.vb.mu.Unlock()
		cn.fail(p, memdx.StatusLocked, "The document is already locked")
		return
	}
	nd := *d
	nd.cas = t.vb.nextCas(now)
	nd.lockedUntil = now.Add(time.Duration(lock) * time.Second)
	t.vb.docs[string(t.mk)] = &nd
	value, dt := cn.docValue(&nd)
	t.vb.mu.Unlock()
	var ext [4]byte
	putUint32(ext[:], nd.flags)
	cn.reply(p, memdx.StatusSuccess, nd.cas, dt, ext[:], nil, value)
}

// unlock runs UNLOCK_KEY as kv_engine 7.6 does (KVBucket::unlockKey,
// engines/ep/src/kv_bucket.cc): the lock CAS unlocks a locked document,
// another CAS answers LOCKED (locked_tmpfail), and a document that exists
// but is not locked answers NOT_LOCKED (0x0e; the engine gives TMPFAIL
// instead only when the cluster setting not_locked_returns_tmpfail is on,
// and it is off by default, daemon/settings.h). What a client sees depends
// on its HELLO alone, not on the error map version it fetched:
// Connection::remapErrorCode (daemon/connection.cc) turns both into TMPFAIL
// for a connection without XERROR (mapStatus).
func (cn *conn) unlock(p *memdx.Packet) {
	if len(p.Extras) != 0 || len(p.Value) != 0 {
		cn.fail(p, memdx.StatusInvalidArgs, "UNLOCK_KEY takes no extras and no value")
		return
	}
	t, ok := cn.locateChecked(p, false)
	if !ok {
		return
	}
	now := cn.c.clock.Now()
	t.vb.mu.Lock()
	if !cn.pendingCheck(p, t) {
		return
	}
	d := t.vb.live(t.mk, now)
	st := memdx.StatusSuccess
	switch {
	case d == nil:
		st = memdx.StatusKeyNotFound
	case !d.locked(now):
		st = memdx.StatusNotLocked
	case p.Cas != d.cas:
		st = memdx.StatusLocked
	}
	if st != memdx.StatusSuccess {
		t.vb.mu.Unlock()
		cn.fail(p, st, "")
		return
	}
	nd := *d
	nd.lockedUntil = time.Time{}
	t.vb.docs[string(t.mk)] = &nd
	t.vb.mu.Unlock()
	cn.reply(p, memdx.StatusSuccess, nd.cas, 0, nil, nil, nil)
}
