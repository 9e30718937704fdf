package mockcluster

import (
	"bytes"
	"crypto/rand"
	mrand "math/rand/v2"
	"slices"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/kvwire/kvwire/memdx"
)

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

// KV range scans: RANGE_SCAN_CREATE, RANGE_SCAN_CONTINUE and
// RANGE_SCAN_CANCEL as kv_engine serves them (docs/range_scans/*.md,
// daemon/protocol/mcbp/range_scan_*_executor.cc, engines/ep/src/ep_bucket.cc
// createRangeScan, engines/ep/src/ep_vb.cc, engines/ep/src/range_scans/).
//
// A scan belongs to the node and vbucket it was created on. At create it
// takes a snapshot of the collection's live documents in the range, sorted
// by key (kv_engine scans a disk snapshot opened at create); continues walk
// that snapshot. The statuses are kv_engine's:
//
//   - create: EINVAL for a malformed JSON value, NOT_MY_VBUCKET when this
//     node is not the vbucket's active, UNKNOWN_COLLECTION,
//     VB_UUID_NOT_EQUAL when snapshot_requirements.vb_uuid is not the
//     vbucket's UUID, ETMPFAIL when snapshot_requirements.seqno is beyond
//     the vbucket's (after waiting timeout_ms for it, when given),
//     NOT_STORED when seqno_exists and no live document has that seqno,
//     KEY_ENOENT for an empty range or an empty collection to sample, EBUSY
//     when the node already holds Options.MaxRangeScans scans of the bucket,
//     EACCESS without the RangeScan privilege (rangeScanPrivilege: after
//     EBUSY, before NOT_STORED and KEY_ENOENT).
//   - continue: NOT_MY_VBUCKET when the vbucket is not active here (its
//     scans were dropped, as kv_engine cancels them on a state change),
//     KEY_ENOENT for a scan id the vbucket does not hold (never created,
//     completed, cancelled, expired), UNKNOWN_COLLECTION (and the scan is
//     cancelled) when its collection was dropped, EACCESS without the
//     RangeScan privilege (rangeScanPrivilege), then EBUSY while another
//     continue of the scan runs; otherwise responses with
//     status SUCCESS for full 8 KiB batches, ended by RANGE_SCAN_MORE (a
//     limit was reached) or RANGE_SCAN_COMPLETE (the scan is gone).
//   - cancel: SUCCESS, KEY_ENOENT for an unknown id, or EACCESS without
//     the RangeScan privilege.
//
// A client that did not negotiate XERROR is disconnected instead of being
// answered VB_UUID_NOT_EQUAL or RANGE_SCAN_CANCELLED (kv_engine's
// Connection::remapErrorCode); it does get RANGE_SCAN_MORE and
// RANGE_SCAN_COMPLETE, which kv_engine sends without remapping. One that
// did not negotiate Collections gets EINVAL for UNKNOWN_COLLECTION.
//
// A scan lives Options.RangeScanLifetime from its create, whatever it
// does meanwhile (kv_engine's range_scan_max_lifetime, enforced by its
// RangeScanTimeoutTask); the mock removes expired scans whenever a range
// scan request or OpenRangeScans looks at them, against the cluster's
// Clock.

// Defaults for Options.MaxRangeScans and Options.RangeScanLifetime.
const (
	// DefaultMaxRangeScans bounds the range scans one node holds for one
	// bucket. kv_engine's bound is per bucket and node too: a share
	// (range_scan_kv_store_scan_ratio) of quota × 1% / 10 KiB disk scans, at
	// most 4096 (KVStoreScanTracker::getMaxRunningScansForQuota); 20 is the
	// mock's choice, not derived from a quota.
	DefaultMaxRangeScans = 20
	// DefaultRangeScanLifetime is how long a scan may exist after its
	// create before the node cancels it (kv_engine's range_scan_max_lifetime,
	// in seconds; 60 is the mock's choice).
	DefaultRangeScanLifetime = 60 * time.Second
)

// rangeScanPrivilege is the privilege each range scan command needs on the
// scan's collection (kv_engine's McbpPrivilegeChains checks nothing for
// them; RangeScan::hasPrivilege, engines/ep/src/range_scans/range_scan.cc,
// checks RangeScan, after SystemCollectionLookup for a system collection:
// collectionPrivilegeMissing): a create checks it once the collection is found and
// room reserved for the scan (RangeScan::createScan), a continue or cancel
// once the scan is found (EPVBucket::continueRangeScan and cancelRangeScan
// call RangeScanOwner::checkPrivileges), so an unknown id is KEY_ENOENT
// whoever asks. The mock's impersonated user without access to the bucket
// has it only when the request grants it.
const rangeScanPrivilege = "RangeScan"

// rangeScanSendSize is the batch after which a continue sends a SUCCESS
// response and goes on (kv_engine's range_scan_read_buffer_send_size plays
// that role).
const rangeScanSendSize = 8 << 10

// rangeScans are the open scans of a cluster, by id.
type rangeScans struct {
	mu   sync.Mutex
	byID map[memdx.RangeScanID]*rangeScan
}

// rangeScan is one open scan.
type rangeScan struct {
	id      memdx.RangeScanID
	bucket  *Bucket
	vb      uint16
	node    int
	vbUUID  uint64
	cid     uint32
	created time.Time
	keyOnly bool
	items   []scanItem
	next    int
	// busy is set while a continue runs (guarded by rangeScans.mu).
	busy bool
}

// scanItem is one document of a scan's snapshot. doc is never modified
// (a mutation stores a new document), so the scan reads it without locks.
type scanItem struct {
	key []byte
	doc *document
}

func (c *Cluster) maxRangeScans() int {
	if c.opts.MaxRangeScans > 0 {
		return c.opts.MaxRangeScans
	}
	return DefaultMaxRangeScans
}

func (c *Cluster) rangeScanLifetime() time.Duration {
	if c.opts.RangeScanLifetime > 0 {
		return c.opts.RangeScanLifetime
	}
	return DefaultRangeScanLifetime
}

// reapLocked removes the scans whose lifetime ended and those of a
// vbucket whose active node is no longer the scan's (kv_engine cancels a
// vbucket's scans when its state changes). rs.mu must be held.
func (c *Cluster) reapLocked(now time.Time) {
	life := c.rangeScanLifetime()
	for id, s := range c.scans.byID {
		if !now.Before(s.created.Add(life)) || s.bucket.removed.Load() ||
			s.bucket.snap.Load().chains[s.vb][0] != s.node {
			delete(c.scans.byID, id)
		}
	}
}

// OpenRangeScans returns how many range scans the cluster's nodes hold
// (created, and not yet completed, cancelled or expired).
func (c *Cluster) OpenRangeScans() int {
	c.scans.mu.Lock()
	defer c.scans.mu.Unlock()
	c.reapLocked(c.clock.Now())
	return len(c.scans.byID)
}

// scanVbucket checks that this node is the active node of the request's
// vbucket (NOT_MY_VBUCKET otherwise). It reports false after answering.
func (cn *conn) scanVbucket(p *memdx.Packet) (*Bucket, *bucketSnap, bool) {
	b := cn.bucket.Load()
	s := b.snap.Load()
	if int(p.Vbucket) >= b.numVbs || s.chains[p.Vbucket][0] != cn.n.id {
		cn.nmv(p, s)
		return nil, nil, false
	}
	return b, s, true
}

func (cn *conn) rangeScanCreate(p *memdx.Packet) outcome {
	if len(p.Key) != 0 || len(p.Extras) != 0 {
		cn.fail(p, memdx.StatusInvalidArgs, "RANGE_SCAN_CREATE takes no key and no extras")
		return outcome{}
	}
	if !p.Datatype.Has(memdx.DatatypeJSON) || !cn.has(memdx.FeatureJSON) {
		cn.fail(p, memdx.StatusInvalidArgs, "RANGE_SCAN_CREATE needs datatype JSON (negotiated with HELLO JSON)")
		return outcome{}
	}
	if _, ok := cn.parseFrames(p, false, false); !ok {
		return outcome{}
	}
	cfg, err := memdx.DecodeRangeScanCreateValue(p.Value)
	if err != nil {
		cn.fail(p, memdx.StatusInvalidArgs, err.Error())
		return outcome{}
	}
	b, s, ok := cn.scanVbucket(p)
	if !ok {
		return outcome{}
	}
	if !s.manifest.has(cfg.CollectionID) {
		cn.failManifestExec(p, memdx.StatusUnknownCollection, s.manifest.uid,
			"Unknown collection id 0x"+strconv.FormatUint(uint64(cfg.CollectionID), 16))
		return outcome{}
	}
	vb := b.vbs[p.Vbucket]
	if sr := cfg.Snapshot; sr != nil {
		vb.mu.Lock()
		uuid, seqno := vb.uuid, vb.seqno
		vb.mu.Unlock()
		if uuid != sr.VbUUID {
			// The engine's status (ep_bucket.cc createRangeScan, which
			// sets no error context), through handle_executor_status: a
			// client without XERROR is disconnected.
			cn.failExec(p, memdx.StatusVbUUIDNotEqual, "")
			return outcome{}
		}
		if seqno < sr.Seqno && sr.TimeoutMs > 0 {
			// kv_engine waits (a SeqnoPersistenceRequest) up to the timeout
			// and creates the scan once the seqno is persisted (at once:
			// every mock write is persisted when applied).
			// The create then runs after the connection may have
			// handled other requests (unordered): with its own
			// request's user, whose privileges it checks.
			h, u := reqHeader(p), cn.requestUser()
			return cn.waitSeqno(vb, sr.Seqno, time.Duration(sr.TimeoutMs)*time.Millisecond,
				func() { cn.as(u, func() { cn.createScan(h, b, vb, &cfg, true) }) })
		}
	}
	cn.createScan(p, b, vb, &cfg, false)
	return outcome{}
}

// seqnoPoll is how often a create waiting for a seqno looks at the vbucket.
const seqnoPoll = time.Millisecond

// waitSeqno runs finish (with wmu held) once vb reaches seqno or after d,
// whichever comes first, on a timer that re-arms itself every seqnoPoll (real
// time, not the cluster's Clock) and stops when the connection closes. An
// ordered connection waits meanwhile, as the server holds its command; an
// unordered one reads on. wmu must be held.
func (cn *conn) waitSeqno(vb *vbucket, seqno uint64, d time.Duration, finish func()) outcome {
	end := time.Now().Add(d)
	unordered := cn.has(memdx.FeatureUnorderedExecution)
	if unordered {
		cn.owe()
	}
	ready := make(chan struct{})
	var tick func()
	tick = func() {
		select {
		case <-cn.done:
			return
		default:
		}
		vb.mu.Lock()
		reached := vb.seqno >= seqno
		vb.mu.Unlock()
		if !reached && time.Now().Before(end) {
			time.AfterFunc(seqnoPoll, tick)
			return
		}
		if !unordered {
			close(ready)
			return
		}
		cn.wmu.Lock()
		defer cn.wmu.Unlock()
		if !cn.wclosed {
			finish()
			cn.paid()
			_ = cn.flushLocked()
		}
	}
	time.AfterFunc(seqnoPoll, tick)
	if unordered {
		return outcome{}
	}
	return outcome{wait: ready, then: finish}
}

// createScan checks the remaining requirements and creates the scan. late
// is true when it runs after a wait for the snapshot's seqno (the vbucket
// may have moved meanwhile). wmu must be held.
func (cn *conn) createScan(p *memdx.Packet, b *Bucket, vb *vbucket, cfg *memdx.RangeScanCreate, late bool) {
	if late {
		s := b.snap.Load()
		if s.chains[vb.id][0] != cn.n.id {
			cn.nmv(p, s)
			return
		}
	}
	now := cn.c.clock.Now()
	// kv_engine's order: the snapshot's UUID and seqno (ep_bucket.cc
	// createRangeScan), the bound on scans (EBUSY, EPVBucket::createRangeScan),
	// then, creating it, the RangeScan privilege (hasPrivilege), seqno_exists
	// (NOT_STORED) and an empty range or collection (KEY_ENOENT) in
	// RangeScan::createScan.
	if sr := cfg.Snapshot; sr != nil {
		// kv_engine sets no error context for either
		// (EPBucket::createRangeScan, EPVBucket::createRangeScan).
		vb.mu.Lock()
		st := memdx.StatusSuccess
		switch {
		case vb.uuid != sr.VbUUID:
			st = memdx.StatusVbUUIDNotEqual
		case vb.seqno < sr.Seqno:
			st = memdx.StatusTmpFail
		}
		vb.mu.Unlock()
		if st != memdx.StatusSuccess {
			cn.failExec(p, st, "")
			return
		}
	}
	if !cn.scanRoom(p, b, now) {
		return
	}
	if missing := cn.collectionPrivilegeMissing(b.snap.Load(), cfg.CollectionID, rangeScanPrivilege); missing != "" {
		cn.refusePrivilege(p, missing)
		return
	}
	vb.mu.Lock()
	if sr := cfg.Snapshot; sr != nil && sr.SeqnoExists && !vb.hasSeqno(sr.Seqno, now) {
		vb.mu.Unlock()
		cn.fail(p, memdx.StatusNotStored, "snapshot_requirements.seqno is not stored")
		return
	}
	items := vb.scanSnapshot(cfg, now)
	uuid := vb.uuid
	vb.mu.Unlock()
	if len(items) == 0 {
		cn.fail(p, memdx.StatusKeyNotFound, "The range is empty")
		return
	}
	if cfg.Sampling != nil {
		items = sample(items, cfg.Sampling)
	}
	sc := &rangeScan{bucket: b, vb: vb.id, node: cn.n.id, vbUUID: uuid, cid: cfg.CollectionID,
		created: now, keyOnly: cfg.KeyOnly, items: items}
	rs := &cn.c.scans
	rs.mu.Lock()
	if !cn.scanRoomLocked(p, b, now) { // a create on another connection took it meanwhile
		rs.mu.Unlock()
		cn.fail(p, memdx.StatusBusy, "Too many range scans on this node")
		return
	}
	if rs.byID == nil {
		rs.byID = make(map[memdx.RangeScanID]*rangeScan)
	}
	for {
		_, _ = rand.Read(sc.id[:])
		if rs.byID[sc.id] == nil {
			break
		}
	}
	rs.byID[sc.id] = sc
	rs.mu.Unlock()
	cn.reply(p, memdx.StatusSuccess, 0, 0, nil, nil, sc.id[:])
}

// scanRoom answers EBUSY and reports false when this node holds
// Options.MaxRangeScans scans of the bucket.
func (cn *conn) scanRoom(p *memdx.Packet, b *Bucket, now time.Time) bool {
	rs := &cn.c.scans
	rs.mu.Lock()
	ok := cn.scanRoomLocked(p, b, now)
	rs.mu.Unlock()
	if !ok {
		cn.fail(p, memdx.StatusBusy, "Too many range scans on this node")
	}
	return ok
}

// scanRoomLocked reports whether this node holds fewer than
// Options.MaxRangeScans scans of the bucket. rs.mu must be held.
func (cn *conn) scanRoomLocked(p *memdx.Packet, b *Bucket, now time.Time) bool {
	cn.c.reapLocked(now)
	n := 0
	for _, o := range cn.c.scans.byID {
		if o.bucket == b && o.node == cn.n.id {
			n++
		}
	}
	return n < cn.c.maxRangeScans()
}

// hasSeqno reports whether a live document of the vbucket has seqno.
// vb.mu must be held.
func (vb *vbucket) hasSeqno(seqno uint64, now time.Time) bool {
	for _, d := range vb.docs {
		if d.seqno == seqno && !d.expired(now) {
			return true
		}
	}
	return false
}

// scanSnapshot returns the live documents of the scan's collection in its
// range, sorted by key. Without a range (sampling, or neither) the range
// is kv_engine's default: "\x00" to "\xff", both inclusive. vb.mu must be
// held.
func (vb *vbucket) scanSnapshot(cfg *memdx.RangeScanCreate, now time.Time) []scanItem {
	r := memdx.RangeScanRange{Start: []byte{0x00}, End: []byte{0xff}}
	if cfg.Range != nil {
		r = *cfg.Range
	}
	var items []scanItem
	for mk, d := range vb.docs {
		cid, key, err := memdx.SplitCollectionKey([]byte(mk))
		if err != nil || cid != cfg.CollectionID || d.expired(now) {
			continue
		}
		if c := bytes.Compare(key, r.Start); c < 0 || (c == 0 && r.ExclusiveStart) {
			continue
		}
		if c := bytes.Compare(key, r.End); c > 0 || (c == 0 && r.ExclusiveEnd) {
			continue
		}
		items = append(items, scanItem{key: key, doc: d})
	}
	sort.Slice(items, func(i, j int) bool { return bytes.Compare(items[i].key, items[j].key) < 0 })
	return items
}

// sample keeps s.Samples of the items (all of them when there are no more),
// chosen by a PRNG seeded with s.Seed, in key order: the same seed over the
// same documents gives the same sample. kv_engine includes each key with
// probability samples/items (a Bernoulli draw per key), so its count is
// only close to samples; the mock returns exactly samples, one of the
// outcomes kv_engine can give.
func sample(items []scanItem, s *memdx.RangeScanSampling) []scanItem {
	if uint64(len(items)) <= s.Samples {
		return items
	}
	rng := mrand.New(mrand.NewPCG(uint64(s.Seed), 0x6b7677697265))
	idx := rng.Perm(len(items))[:s.Samples]
	slices.Sort(idx)
	out := make([]scanItem, len(idx))
	for i, j := range idx {
		out[i] = items[j]
	}
	return out
}

// lookupScanLocked finds the scan id of the request's vbucket on this
// node, after dropping expired scans and those of the vbucket's earlier
// UUID (it failed over since: kv_engine cancels a vbucket's scans on a
// state change). It reports false after answering KEY_ENOENT. rs.mu must be
// held.
func (cn *conn) lookupScanLocked(p *memdx.Packet, b *Bucket, id memdx.RangeScanID, vbUUID uint64, now time.Time) (*rangeScan, bool) {
	cn.c.reapLocked(now)
	sc := cn.c.scans.byID[id]
	if sc != nil && sc.bucket == b && sc.vb == p.Vbucket && sc.vbUUID != vbUUID {
		delete(cn.c.scans.byID, id)
		sc = nil
	}
	if sc == nil || sc.bucket != b || sc.vb != p.Vbucket || sc.node != cn.n.id {
		cn.fail(p, memdx.StatusKeyNotFound, "No range scan with that id on this vbucket")
		return nil, false
	}
	return sc, true
}

func (cn *conn) rangeScanContinue(p *memdx.Packet) {
	req, err := memdx.DecodeRangeScanContinueRequest(p)
	if err != nil {
		cn.fail(p, memdx.StatusInvalidArgs, err.Error())
		return
	}
	if _, ok := cn.parseFrames(p, false, false); !ok {
		return
	}
	b, s, ok := cn.scanVbucket(p)
	if !ok {
		return
	}
	now := cn.c.clock.Now()
	uuid := b.VbucketUUID(p.Vbucket)
	rs := &cn.c.scans
	rs.mu.Lock()
	sc, ok := cn.lookupScanLocked(p, b, req.ID, uuid, now)
	if !ok {
		rs.mu.Unlock()
		return
	}
	// kv_engine's order (EPVBucket::continueRangeScan, engines/ep/src/
	// ep_vb.cc): the scan's collection (setupCookieForRangeScan: a
	// dropped one cancels the scan), the privilege (RangeScanOwner::
	// checkPrivileges), and only then whether the scan is idle
	// (RangeScanOwner::continueScan's too_busy): a user refused the scan
	// does not learn that it is being read.
	if !s.manifest.has(sc.cid) {
		delete(rs.byID, sc.id)
		rs.mu.Unlock()
		cn.failManifestExec(p, memdx.StatusUnknownCollection, s.manifest.uid,
			"The scan's collection 0x"+strconv.FormatUint(uint64(sc.cid), 16)+" was dropped")
		return
	}
	if missing := cn.collectionPrivilegeMissing(s, sc.cid, rangeScanPrivilege); missing != "" {
		rs.mu.Unlock()
		cn.refusePrivilege(p, missing)
		return
	}
	if sc.busy {
		rs.mu.Unlock()
		cn.fail(p, memdx.StatusBusy, "The range scan is already being continued")
		return
	}
	sc.busy = true
	rs.mu.Unlock()

	content := memdx.RangeScanDocuments
	if sc.keyOnly {
		content = memdx.RangeScanKeys
	}
	extras := memdx.AppendRangeScanContent(make([]byte, 0, 4), content)
	var deadline time.Time
	if req.TimeLimitMs > 0 {
		deadline = now.Add(time.Duration(req.TimeLimitMs) * time.Millisecond)
	}
	batch := cn.streamScan(p, sc, req, deadline, extras)
	rs.mu.Lock()
	sc.busy = false
	cancelled := rs.byID[sc.id] != sc
	done := sc.next >= len(sc.items)
	if done && !cancelled {
		delete(rs.byID, sc.id)
	}
	rs.mu.Unlock()
	switch {
	case cancelled:
		// Cancelled (or expired) while this continue ran: kv_engine ends
		// the continue with RANGE_SCAN_CANCELLED alone, dropping the batch
		// it still held (RangeScanContinueResultCancelled sends nothing;
		// range_scan_continue_executor.cc sends the status through
		// handle_executor_status, whose Connection::remapErrorCode
		// disconnects a client without XERROR; RANGE_SCAN_MORE and
		// _COMPLETE, which the engine sends itself
		// (RangeScanContinueResult::send), are not remapped).
		if !cn.has(memdx.FeatureXerror) {
			cn.hangUp(p, memdx.StatusRangeScanCancelled)
			return
		}
		cn.scanResponse(p, memdx.StatusRangeScanCancelled, nil, nil)
	case done:
		cn.scanResponse(p, memdx.StatusRangeScanComplete, extras, batch)
	default:
		cn.scanResponse(p, memdx.StatusRangeScanMore, extras, batch)
	}
}

// streamScan sends the continue's items from where the scan stopped until
// its item, byte or time limit, in SUCCESS packets of about
// rangeScanSendSize; it returns the last batch, which goes with the
// continue's final status. The scan is busy: no other continue touches it.
func (cn *conn) streamScan(p *memdx.Packet, sc *rangeScan, req memdx.RangeScanContinue, deadline time.Time, extras []byte) []byte {
	var batch []byte
	items, sent := uint32(0), uint64(0)
	// kv_engine counts a key's bytes with its collection prefix, and a
	// document's value bytes besides (RangeScan::handleKey, handleItem).
	prefix := len(memdx.AppendULEB128(nil, sc.cid))
	limited := false
	for sc.next < len(sc.items) && !limited {
		it := sc.items[sc.next]
		sc.next++
		n := prefix + len(it.key)
		if sc.keyOnly {
			batch = memdx.AppendRangeScanKey(batch, it.key)
		} else {
			value, dt := cn.docValue(it.doc)
			n += len(value)
			batch = memdx.AppendRangeScanDocument(batch, &memdx.RangeScanDocument{Flags: it.doc.flags,
				Expiry: it.doc.expiry, Seqno: it.doc.seqno, Cas: it.doc.cas, Datatype: dt, Key: it.key, Value: value})
		}
		items++
		sent += uint64(n)
		// kv_engine checks its limits after each key or document, so a
		// continue returns at least one (RangeScan::ContinueRunState).
		limited = (req.ItemLimit > 0 && items >= req.ItemLimit) ||
			(req.ByteLimit > 0 && sent >= uint64(req.ByteLimit)) ||
			(req.TimeLimitMs > 0 && !cn.c.clock.Now().Before(deadline))
		if len(batch) >= rangeScanSendSize && sc.next < len(sc.items) && !limited {
			cn.scanResponse(p, memdx.StatusSuccess, extras, batch)
			batch = batch[:0]
		}
	}
	return batch
}

// scanResponse appends one continue response. RANGE_SCAN_MORE and
// RANGE_SCAN_COMPLETE are not errors, so they are not counted as such.
func (cn *conn) scanResponse(p *memdx.Packet, st memdx.Status, extras, value []byte) {
	rp := memdx.Packet{Magic: memdx.MagicRes, OpCode: p.OpCode, Status: st, Opaque: p.Opaque,
		Extras: extras, Value: value}
	cn.appendResponse(p, &rp)
}

func (cn *conn) rangeScanCancel(p *memdx.Packet) {
	id, err := memdx.DecodeRangeScanCancelRequest(p)
	if err != nil {
		cn.fail(p, memdx.StatusInvalidArgs, err.Error())
		return
	}
	if _, ok := cn.parseFrames(p, false, false); !ok {
		return
	}
	b, _, ok := cn.scanVbucket(p)
	if !ok {
		return
	}
	uuid := b.VbucketUUID(p.Vbucket)
	rs := &cn.c.scans
	rs.mu.Lock()
	sc, ok := cn.lookupScanLocked(p, b, id, uuid, cn.c.clock.Now())
	if !ok {
		rs.mu.Unlock()
		return
	}
	if missing := cn.collectionPrivilegeMissing(b.snap.Load(), sc.cid, rangeScanPrivilege); missing != "" {
		rs.mu.Unlock()
		cn.refusePrivilege(p, missing)
		return
	}
	delete(rs.byID, sc.id)
	rs.mu.Unlock()
	cn.ok(p)
}
