package mockcluster

// What every document (key) request shares: the opcode table that sends each
// to its family's file, frame infos, the key's target (vbucket, owner,
// collection), the value a mutation brings and the CAS and expiry rules.

import (
	"encoding/json"
	"strconv"
	"time"

	"github.com/kvwire/kvwire/memdx"
)

// relativeExpiryLimit is the largest expiry read as seconds from now (30
// days); larger values are absolute Unix times.
const relativeExpiryLimit = 30 * 24 * 60 * 60

func (cn *conn) handleKV(p *memdx.Packet) outcome {
	if cn.refuseOnMemcached(p) || !cn.validateKey(p) || !cn.impersonate(p) || !cn.mayRunAs(p) {
		return outcome{}
	}
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

// frames are the frame infos of a request that the mock acts on.
type frames struct {
	durable bool
	level   memdx.DurabilityLevel
	// timeout is the durability timeout the request gave (0: none given).
	timeout     time.Duration
	preserveTTL bool
}

// parseFrames reads the framing extras as kv_engine's verify_header does.
// Durability is allowed when mutation (else EINVAL), preserve-TTL when ttl
// (else NOT_SUPPORTED); a 2-byte DCP stream id, an empty barrier and a
// tracing context pass; malformed ones answer EINVAL, unknown ids
// UNKNOWN_FRAME_INFO. It reports false after answering.
func (cn *conn) parseFrames(p *memdx.Packet, mutation, ttl bool) (frames, bool) {
	var f frames
	if len(p.FramingExtras) == 0 {
		return f, true
	}
	st := memdx.StatusSuccess
	var ctx string
	err := memdx.FrameInfos(p.FramingExtras, func(id uint16, data []byte) error {
		switch memdx.RequestFrameID(id) {
		case memdx.FrameBarrier:
			if len(data) != 0 {
				st, ctx = memdx.StatusInvalidArgs, "Barrier should not contain value"
				return errStop
			}
		case memdx.FrameOpenTracingContext:
			if len(data) == 0 {
				st, ctx = memdx.StatusInvalidArgs, "OpenTracingContext cannot be empty"
				return errStop
			}
		case memdx.FrameImpersonateUser, memdx.FrameImpersonateUserExtraPrivilege:
			// Judged by verifyFrames and acted on by impersonate.
		case memdx.FrameDcpStreamID:
			// kv_engine accepts a stream id on any opcode and ignores it
			// outside DCP.
			if len(data) != 2 {
				st, ctx = memdx.StatusInvalidArgs, "DcpStreamId invalid size:"+strconv.Itoa(len(data))
				return errStop
			}
		case memdx.FrameDurability:
			// kv_engine decodes the requirement before asking whether
			// the opcode supports one.
			level, timeout, err := memdx.DecodeDurabilityFrame(data)
			if err != nil {
				st, ctx = durabilityFrameError(data)
				return errStop
			}
			if !mutation {
				st, ctx = memdx.StatusInvalidArgs, "The requested command does not support durability requirements"
				return errStop
			}
			f.durable, f.level, f.timeout = true, level, time.Duration(timeout)*time.Millisecond
		case memdx.FramePreserveTTL:
			// kv_engine's frame validator (mcbp_validators.cc): a value
			// is EINVAL, an opcode outside is_preserve_ttl_supported
			// (SET, REPLACE, APPEND, PREPEND, counters and sub-document
			// mutations) NOT_SUPPORTED.
			switch {
			case len(data) != 0:
				st, ctx = memdx.StatusInvalidArgs, "PreserveTtl should not contain value"
				return errStop
			case !ttl:
				st, ctx = memdx.StatusNotSupported, "This command does not support PreserveTtl"
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

// durabilityFrameError is kv_engine's answer to a durability frame info
// it cannot decode (parseFrameExtras in daemon/mcbp_validators.cc): the
// cb::durability::Requirements constructor throws for a wrong size, a level
// that is not Majority to PersistToMajority and a timeout of 0 (the bucket
// default) or 0xffff (infinite), which a client may not ask for; any of
// these in a frame of 1 or 3 bytes answers DURABILITY_INVALID_LEVEL, other
// sizes EINVAL.
func durabilityFrameError(data []byte) (memdx.Status, string) {
	if len(data) != 1 && len(data) != 3 {
		return memdx.StatusInvalidArgs, "Invalid sized buffer provided: " + strconv.Itoa(len(data))
	}
	if len(data) == 3 {
		switch uint16(data[1])<<8 | uint16(data[2]) {
		case 0:
			return memdx.StatusDurabilityInvalidLevel, "Timeout(): Cannot specify bucket default timeout"
		case 0xffff:
			return memdx.StatusDurabilityInvalidLevel, "Timeout(): Cannot specify an infinite timeout"
		}
	}
	return memdx.StatusDurabilityInvalidLevel, "Content represents an invalid requirement specification"
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
	if reservedCollection(t.cid) {
		// kv_engine's key validator (is_document_key_valid) refuses the
		// ids it reserves for itself, before any vbucket or manifest.
		cn.fail(p, memdx.StatusInvalidArgs, "Invalid collection-id:"+strconv.FormatUint(uint64(t.cid), 10))
		return t, false
	}
	if max := maxLogicalKeyLen(t.cid); len(key) > max {
		what := "Key length"
		if cn.has(memdx.FeatureCollections) {
			what = "Logical key"
		}
		cn.fail(p, memdx.StatusInvalidArgs, what+" exceeds "+strconv.Itoa(max))
		return t, false
	}
	if t.b.memcached() {
		return cn.locateMemcached(p, t, replica)
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
	// kv_engine looks a collection other than the default one up in the
	// validator, in the manifest of the vbucket if this node holds it in
	// any state (get_collection_meta), so an unknown collection is
	// answered before the vbucket's state is; only a node without the
	// vbucket answers NOT_MY_VBUCKET first. The default collection (a
	// dropped one) is found unknown by the engine, after the vbucket's
	// state (KVBucket::getInternal, operationPrologue in
	// engines/ep/src/kv_bucket.cc), and its unknown_collection is
	// remapped (EINVAL for a client without Collections).
	validated := t.cid != 0
	if !owns && (!validated || !cn.holdsVbucket(t.s, p.Vbucket)) {
		cn.nmv(p, t.s)
		return t, false
	}
	if !t.s.manifest.has(t.cid) {
		ctx := "Unknown collection id 0x" + strconv.FormatUint(uint64(t.cid), 16)
		if validated {
			cn.failManifest(p, memdx.StatusUnknownCollection, t.s.manifest.uid, ctx)
		} else {
			cn.failManifestExec(p, memdx.StatusUnknownCollection, t.s.manifest.uid, ctx)
		}
		return t, false
	}
	if !owns {
		cn.nmv(p, t.s)
		return t, false
	}
	t.vb = t.b.vbs[p.Vbucket]
	return t, true
}

// reservedCollection says whether cid is one of the collection ids 1 to 7
// kv_engine reserves (CollectionID::isReserved: System to Reserved7),
// which no request may name.
func reservedCollection(cid uint32) bool { return cid >= 1 && cid <= 7 }

// live returns the live document at mk, nil when missing or expired (an
// expired one becomes a tombstone: vbucket.expire). vb.mu must be held.
func (vb *vbucket) live(mk []byte, now time.Time) *document {
	d := vb.docs[string(mk)]
	if d == nil {
		return nil
	}
	if d.expired(now) {
		vb.expire(string(mk), d, now)
		return nil
	}
	return d
}

// replicaLive returns the document at mk as a replica read sees it: nil
// when missing or expired, leaving the expiry to the active (kv_engine's
// fetchValidValue processes an expiry in an active vbucket only). vb.mu
// must be held.
func (vb *vbucket) replicaLive(mk []byte, now time.Time) *document {
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

// locateMutation is locate for a mutation whose frame infos are f: it
// also refuses a durable write where the bucket cannot make one. It
// reports false after answering.
func (cn *conn) locateMutation(p *memdx.Packet, f frames) (target, bool) {
	t, ok := cn.locate(p, false)
	if !ok || cn.refuseDurable(p, t, f) {
		return t, false
	}
	return t, true
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

// inValue reads a mutation's value for t's bucket: it checks the datatype
// against what was negotiated, inflates a snappy value, copies it out of
// the read buffer, checks its size and detects JSON as the server does. It
// reports false after answering. A memcached bucket keeps values inflated
// only (default_engine's compression mode is off), so it gets no
// snappyRaw.
func (cn *conn) inValue(p *memdx.Packet, t target) (value, snappyRaw []byte, dt memdx.Datatype, ok bool) {
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
			cn.fail(p, memdx.StatusInvalidArgs, "Failed to inflate payload")
			return nil, nil, 0, false
		}
		value, snappyRaw = v, append([]byte(nil), p.Value...)
	} else {
		value = append([]byte(nil), p.Value...)
	}
	if limit := t.b.valueLimit(); len(value) > limit {
		cn.fail(p, memdx.StatusTooBig, "Value exceeds "+strconv.Itoa(limit>>20)+" MiB")
		return nil, nil, 0, false
	}
	if t.b.memcached() {
		snappyRaw = nil
	}
	if json.Valid(value) {
		dt = memdx.DatatypeJSON
	}
	return value, snappyRaw, dt, true
}

// expiry converts a wire expiry to absolute Unix seconds: 0 is never,
// values up to 30 days are relative, larger ones absolute and kept as they
// are (one before the current second expires at once; kv_engine's
// mc_time_convert_to_real_time).
func expiry(exp uint32, now time.Time) uint32 {
	if exp != 0 && exp <= relativeExpiryLimit {
		return uint32(now.Unix()) + exp
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
