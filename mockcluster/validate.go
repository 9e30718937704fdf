package mockcluster

// The packet checks kv_engine makes of a request before running it
// (McbpValidator, daemon/mcbp_validators.cc) for the connection-level
// commands: each opcode's validator calls verify_header with what it
// expects of the extras, key, value, CAS and datatype, then adds its own
// checks. verify_header also judges the frame infos, the same way for every
// opcode. A refused packet answers its status with an error context and is
// not run.

import (
	"encoding/json"
	"strconv"

	"github.com/kvwire/kvwire/memdx"
)

// lenRule is what a validator expects of a key or value length
// (McbpValidator::ExpectedKeyLen / ExpectedValueLen).
type lenRule uint8

const (
	lenZero lenRule = iota
	lenNonZero
	lenAny
)

// casRule is what a validator expects of the CAS (ExpectedCas).
type casRule uint8

const (
	casNotSet casRule = iota
	casAny
	casSet
)

// headerRule is one opcode's verify_header arguments.
type headerRule struct {
	// extras is the exact extras length; 0 allows none, -1 any (the
	// handler checks them).
	extras     int
	key, value lenRule
	cas        casRule
	// datatypes are the datatype bits the opcode accepts besides raw.
	datatypes memdx.Datatype
	// durable and ttl say whether the opcode takes a durability
	// requirement (cb::mcbp::is_durability_supported) and PreserveTtl
	// (is_preserve_ttl_supported).
	durable, ttl bool
	// docKey: the key is a document key, whose collection-id prefix
	// is_document_key_valid judges (GeneratesDocKey::Yes).
	docKey bool
}

// maxBucketNameLen is the longest bucket name SELECT_BUCKET takes.
const maxBucketNameLen = 100

// connRules are the validators of the commands handle serves itself.
var connRules = map[memdx.OpCode]headerRule{
	// hello_validator (then the value must be of even length)
	memdx.OpHello: {key: lenAny, value: lenAny},
	// version, quit, noop and sasl_list_mech validators
	memdx.OpVersion:       {},
	memdx.OpQuit:          {},
	memdx.OpQuitQ:         {},
	memdx.OpNoop:          {},
	memdx.OpSASLListMechs: {},
	// sasl_auth_validator, for SASL_STEP too
	memdx.OpSASLAuth: {key: lenNonZero, value: lenAny},
	memdx.OpSASLStep: {key: lenNonZero, value: lenAny},
	// get_errmap_validator (then vbucket 0 and a 2-byte value)
	memdx.OpGetErrorMap: {value: lenAny},
	// select_bucket_validator, list_bucket_validator
	memdx.OpSelectBucket: {key: lenAny, cas: casAny},
	memdx.OpListBuckets:  {cas: casAny},
	// get_cluster_config_validator (the known-version extras are the
	// handler's)
	memdx.OpGetClusterConfig: {extras: -1},
	// stat_validator (then a value must be JSON)
	memdx.OpStat: {key: lenAny, value: lenAny, datatypes: memdx.DatatypeJSON},
	// verbosity_validator: a 4-byte level
	memdx.OpVerbosity: {extras: 4},
	// collections_get_manifest_validator (then vbucket 0)
	memdx.OpCollectionsGetManifest: {},
	// collections_get_id_validator, for GET_SCOPE_ID too: the path in the
	// key or the value, not both, vbucket 0
	memdx.OpCollectionsGetID:      {key: lenAny, value: lenAny},
	memdx.OpCollectionsGetScopeID: {key: lenAny, value: lenAny},
}

// validateConn applies kv_engine's validator for a connection-level
// command. It reports false after answering a refused packet, and true for
// a packet to run (or an opcode it has no rule for).
func (cn *conn) validateConn(p *memdx.Packet) bool {
	rule, ok := connRules[p.OpCode]
	if !ok {
		return true
	}
	st, ctx := cn.verifyHeader(p, rule)
	if st == memdx.StatusSuccess {
		st, ctx = cn.validateSpecific(p)
	}
	if st != memdx.StatusSuccess {
		cn.fail(p, st, ctx)
		return false
	}
	return true
}

// verifyHeader is McbpValidator::verify_header, in its order.
func (cn *conn) verifyHeader(p *memdx.Packet, r headerRule) (memdx.Status, string) {
	einval := memdx.StatusInvalidArgs
	if !p.Datatype.Valid() {
		return einval, "Request datatype invalid"
	}
	switch {
	case r.extras == 0 && len(p.Extras) != 0:
		return einval, "Request must not include extras"
	case r.extras > 0 && len(p.Extras) != r.extras:
		return einval, "Request must include extras of length " + strconv.Itoa(r.extras)
	}
	switch {
	case r.key == lenZero && len(p.Key) != 0:
		return einval, "Request must not include key"
	case r.key == lenNonZero && len(p.Key) == 0:
		return einval, "Request must include key"
	}
	if r.key != lenZero {
		max := maxKeyLen
		if cn.has(memdx.FeatureCollections) {
			max = maxKeyLen + 1 // MaxCollectionsKeyLen
		}
		if len(p.Key) > max {
			return einval, "Key length exceeds " + strconv.Itoa(max)
		}
	}
	switch {
	case r.value == lenZero && len(p.Value) != 0:
		return einval, "Request must not include value"
	case r.value == lenNonZero && len(p.Value) == 0:
		return einval, "Request must include value"
	}
	switch {
	case r.cas == casNotSet && p.Cas != 0:
		return einval, "Request CAS must not be set"
	case r.cas == casSet && p.Cas == 0:
		return einval, "Request CAS must be set"
	}
	if p.Datatype&^r.datatypes != 0 {
		return einval, "Request datatype invalid"
	}
	if off := cn.datatypesOff(p.Datatype); off != "" {
		return einval, "Datatype (" + off + ") not enabled for the connection"
	}
	// Cookie::inflateInputPayload: a Snappy value must inflate (up to
	// the size the server will inflate to).
	if p.Datatype.Has(memdx.DatatypeSnappy) {
		if _, err := memdx.DecompressSnappy(nil, p.Value, maxSnappyInflated); err != nil {
			return einval, "Failed to inflate payload"
		}
	}
	if st, ctx := cn.verifyFrames(p, r); st != memdx.StatusSuccess {
		return st, ctx
	}
	if r.docKey && cn.has(memdx.FeatureCollections) {
		return docKeyValid(p.Key)
	}
	return memdx.StatusSuccess, ""
}

// docKeyValid is kv_engine's is_document_key_valid for a connection that
// negotiated Collections: the key holds at least 2 bytes, a canonical
// LEB128 collection id that is not reserved, then a logical key of at most
// 250 bytes in the default collection and 246 in the others.
func docKeyValid(key []byte) (memdx.Status, string) {
	einval := memdx.StatusInvalidArgs
	if len(key) <= 1 {
		return einval, "Key length must be >= 2"
	}
	cid, n, err := memdx.DecodeULEB128(key)
	if err != nil {
		if stop := leb128StopByte(key); stop >= 0 && stop < memdx.MaxLEB128Len {
			return einval, "Key contains non-canonical leb128"
		}
		return einval, "No stop-byte found"
	}
	if n == len(key) {
		return einval, "No logical key found"
	}
	if reservedCollection(cid) {
		return einval, "Invalid collection-id:" + strconv.FormatUint(uint64(cid), 10)
	}
	if max := maxLogicalKeyLen(cid); len(key)-n > max {
		return einval, "Logical key exceeds " + strconv.Itoa(max)
	}
	return memdx.StatusSuccess, ""
}

// leb128StopByte is the index of the first byte without the continuation
// bit, -1 when there is none.
func leb128StopByte(b []byte) int {
	for i, c := range b {
		if c&0x80 == 0 {
			return i
		}
	}
	return -1
}

// datatypesOff names the bits of dt this connection did not negotiate in
// HELLO ("" when all were) as cb::mcbp::datatype::to_string does: lower
// case, snappy, json then xattr, comma-separated.
func (cn *conn) datatypesOff(dt memdx.Datatype) string {
	s := ""
	for _, b := range []struct {
		bit  memdx.Datatype
		feat memdx.HelloFeature
		name string
	}{
		{memdx.DatatypeSnappy, memdx.FeatureSnappy, "snappy"},
		{memdx.DatatypeJSON, memdx.FeatureJSON, "json"},
		{memdx.DatatypeXattr, memdx.FeatureXattr, "xattr"},
	} {
		if dt.Has(b.bit) && !cn.has(b.feat) {
			if s != "" {
				s += ","
			}
			s += b.name
		}
	}
	return s
}

// verifyFrames judges the frame infos as verify_header does for every
// opcode: each id kv_engine knows has its own rule, an unknown one answers
// UNKNOWN_FRAME_INFO (with no context) and a bad encoding EINVAL.
func (cn *conn) verifyFrames(p *memdx.Packet, r headerRule) (memdx.Status, string) {
	st, ctx := memdx.StatusSuccess, ""
	err := memdx.FrameInfos(p.FramingExtras, func(id uint16, data []byte) error {
		switch memdx.RequestFrameID(id) {
		case memdx.FrameBarrier:
			if len(data) != 0 {
				st, ctx = memdx.StatusInvalidArgs, "Barrier should not contain value"
			}
		case memdx.FrameDurability:
			if _, _, err := memdx.DecodeDurabilityFrame(data); err != nil {
				st, ctx = durabilityFrameError(data)
			} else if !r.durable {
				st, ctx = memdx.StatusInvalidArgs, "The requested command does not support durability requirements"
			}
		case memdx.FrameDcpStreamID:
			if len(data) != 2 {
				st, ctx = memdx.StatusInvalidArgs, "DcpStreamId invalid size:"+strconv.Itoa(len(data))
			}
		case memdx.FrameOpenTracingContext:
			if len(data) == 0 {
				st, ctx = memdx.StatusInvalidArgs, "OpenTracingContext cannot be empty"
			}
		case memdx.FrameImpersonateUser:
			st, ctx = impersonateFrameValid(data)
		case memdx.FramePreserveTTL:
			if len(data) != 0 {
				st, ctx = memdx.StatusInvalidArgs, "PreserveTtl should not contain value"
			} else if !r.ttl {
				st, ctx = memdx.StatusNotSupported, "This command does not support PreserveTtl"
			}
		case memdx.FrameImpersonateUserExtraPrivilege:
			switch {
			case len(data) == 0:
				st, ctx = memdx.StatusInvalidArgs, "Privilege name must be set"
			case !knownPrivilege(string(data)):
				// cb::rbac::to_privilege throws for a name it does not
				// know.
				st, ctx = memdx.StatusInvalidArgs, "Failed to look up the privilege"
			}
		default:
			st = memdx.StatusUnknownFrameInfo
		}
		if st != memdx.StatusSuccess {
			return errStop
		}
		return nil
	})
	if err != nil && st == memdx.StatusSuccess {
		return memdx.StatusInvalidArgs, "Invalid encoding in FrameExtras"
	}
	return st, ctx
}

// validateSpecific is the rest of each opcode's validator, after
// verify_header.
func (cn *conn) validateSpecific(p *memdx.Packet) (memdx.Status, string) {
	einval := memdx.StatusInvalidArgs
	switch p.OpCode {
	case memdx.OpHello:
		if len(p.Value)%2 != 0 {
			return einval, "Request value must be of even length"
		}
	case memdx.OpGetErrorMap:
		if p.Vbucket != 0 {
			return einval, "Request vbucket id must be 0"
		}
		if len(p.Value) != 2 {
			return einval, "Request value must be of length 2"
		}
	case memdx.OpStat:
		if len(p.Value) != 0 {
			if !p.Datatype.Has(memdx.DatatypeJSON) {
				return einval, "Datatype must be JSON"
			}
			if !json.Valid(p.Value) {
				return einval, "value is not valid JSON"
			}
		}
	case memdx.OpSelectBucket:
		// select_bucket_validator: MAX_BUCKET_NAME_LENGTH (daemon/buckets.h).
		if len(p.Key) > maxBucketNameLen {
			return einval, "Request key length exceeds maximum"
		}
	case memdx.OpCollectionsGetManifest:
		if p.Vbucket != 0 {
			return einval, "Request vbucket id must be 0"
		}
	case memdx.OpCollectionsGetID, memdx.OpCollectionsGetScopeID:
		if len(p.Key) != 0 && len(p.Value) != 0 {
			return einval, "Cannot set both key and value"
		}
		if p.Vbucket != 0 {
			return einval, "Request vbucket id must be 0"
		}
	}
	return memdx.StatusSuccess, ""
}

// keyRules are the validators of the document commands handleKV runs
// (mcbp_validators.cc), with what each opcode allows of the frame infos.
var keyRules = func() map[memdx.OpCode]headerRule {
	m := map[memdx.OpCode]headerRule{}
	add := func(r headerRule, ops ...memdx.OpCode) {
		for _, op := range ops {
			m[op] = r
		}
	}
	const storeTypes = memdx.DatatypeJSON | memdx.DatatypeSnappy
	// get_validator (GET_REPLICA too)
	add(headerRule{key: lenNonZero},
		memdx.OpGet, memdx.OpGetQ, memdx.OpGetK, memdx.OpGetKQ, memdx.OpGetReplica)
	// The quiet mutations take no durability requirement (opcode.cc gives
	// them no Durability attribute); the others do.
	durable := func(r headerRule, op, quiet memdx.OpCode) {
		add(r, quiet)
		r.durable = true
		add(r, op)
	}
	// set_replace_validator, add_validator
	set := headerRule{extras: 8, key: lenNonZero, value: lenAny, cas: casAny, datatypes: storeTypes, ttl: true}
	durable(set, memdx.OpSet, memdx.OpSetQ)
	durable(set, memdx.OpReplace, memdx.OpReplaceQ)
	durable(headerRule{extras: 8, key: lenNonZero, value: lenAny, datatypes: storeTypes}, memdx.OpAdd, memdx.OpAddQ)
	// append_prepend_validator
	concat := headerRule{key: lenNonZero, value: lenAny, cas: casAny, datatypes: storeTypes, ttl: true}
	durable(concat, memdx.OpAppend, memdx.OpAppendQ)
	durable(concat, memdx.OpPrepend, memdx.OpPrependQ)
	// delete_validator
	durable(headerRule{key: lenNonZero, cas: casAny}, memdx.OpDelete, memdx.OpDeleteQ)
	// arithmetic_validator
	counter := headerRule{extras: 20, key: lenNonZero, ttl: true}
	durable(counter, memdx.OpIncrement, memdx.OpIncrementQ)
	durable(counter, memdx.OpDecrement, memdx.OpDecrementQ)
	// gat_validator (TOUCH too); the engine refuses a durable touch
	durable(headerRule{extras: 4, key: lenNonZero}, memdx.OpTouch, memdx.OpGATQ)
	durable(headerRule{extras: 4, key: lenNonZero}, memdx.OpGAT, memdx.OpGATQ)
	// get_locked_validator, get_meta_validator: the extras are checked
	// after verify_header
	add(headerRule{extras: -1, key: lenNonZero}, memdx.OpGetLocked, memdx.OpGetMeta)
	// unlock_validator
	add(headerRule{key: lenNonZero, cas: casSet}, memdx.OpUnlockKey)
	// observe_validator, observe_seqno_validator
	add(headerRule{value: lenNonZero}, memdx.OpObserve)
	add(headerRule{value: lenAny, cas: casAny}, memdx.OpObserveSeqno)
	// subdocument_validators.cc's validate_basic_header_fields, for every
	// sub-document command; the extras are the sub-document checks'.
	add(headerRule{extras: -1, key: lenNonZero, value: lenAny, cas: casAny},
		memdx.OpSubdocGet, memdx.OpSubdocExists, memdx.OpSubdocGetCount, memdx.OpSubdocMultiLookup)
	add(headerRule{extras: -1, key: lenNonZero, value: lenAny, cas: casAny, durable: true, ttl: true},
		memdx.OpSubdocDictAdd, memdx.OpSubdocDictUpsert, memdx.OpSubdocDelete, memdx.OpSubdocReplace,
		memdx.OpSubdocArrayPushLast, memdx.OpSubdocArrayPushFirst, memdx.OpSubdocArrayInsert,
		memdx.OpSubdocArrayAddUnique, memdx.OpSubdocCounter, memdx.OpSubdocMultiMutation,
		memdx.OpSubdocReplaceBodyWithXattr)
	// Each of them but OBSERVE and OBSERVE_SEQNO has a document key.
	for op, r := range m {
		if op != memdx.OpObserve && op != memdx.OpObserveSeqno {
			r.docKey = true
			m[op] = r
		}
	}
	return m
}()

// validateKey applies kv_engine's validator for a document command. It
// reports false after answering a refused packet, and true for a packet
// to run (or an opcode it has no rule for).
func (cn *conn) validateKey(p *memdx.Packet) bool {
	rule, ok := keyRules[p.OpCode]
	if !ok {
		return true
	}
	st, ctx := cn.verifyHeader(p, rule)
	if st == memdx.StatusSuccess && rule.docKey && !cn.collectionKnown(p) {
		return false
	}
	if st == memdx.StatusSuccess {
		st, ctx = validateKeySpecific(p)
	}
	if st != memdx.StatusSuccess {
		cn.fail(p, st, ctx)
		return false
	}
	return true
}

// collectionKnown is the end of verify_header for a document command
// (is_collection_command): setCurrentCollectionInfo looks the key's
// collection up in the vbucket's manifest (get_collection_meta), so an
// unknown collection answers UNKNOWN_COLLECTION before the opcode's own
// checks and before the command runs, and a node that does not hold the
// vbucket answers NOT_MY_VBUCKET. The default collection is not looked up,
// nor is anything in a memcached bucket (not collection-capable). It
// reports false after answering.
func (cn *conn) collectionKnown(p *memdx.Packet) bool {
	s, cid, st := cn.lookupCollection(p)
	switch st {
	case memdx.StatusNotMyVbucket:
		cn.nmv(p, s)
		return false
	case memdx.StatusUnknownCollection:
		cn.failManifest(p, memdx.StatusUnknownCollection, s.manifest.uid,
			"Unknown collection id 0x"+strconv.FormatUint(uint64(cid), 16))
		return false
	}
	return true
}

// lookupCollection is collectionKnown's decision, without the answer:
// NOT_MY_VBUCKET, UNKNOWN_COLLECTION or success.
func (cn *conn) lookupCollection(p *memdx.Packet) (*bucketSnap, uint32, memdx.Status) {
	b := cn.bucket.Load()
	if b == nil || b.memcached() || !cn.has(memdx.FeatureCollections) {
		return nil, 0, memdx.StatusSuccess
	}
	cid, _, err := memdx.SplitCollectionKey(p.Key)
	if err != nil || cid == 0 {
		return nil, 0, memdx.StatusSuccess
	}
	s := b.snap.Load()
	if !cn.holdsVbucket(s, p.Vbucket) {
		return s, cid, memdx.StatusNotMyVbucket
	}
	if !s.manifest.has(cid) {
		return s, cid, memdx.StatusUnknownCollection
	}
	return s, cid, memdx.StatusSuccess
}

// rejected reports whether kv_engine's Cookie::validate would refuse p
// (before authentication, an unknown opcode, or the opcode's validator
// for the commands the mock validates): such a packet is answered at
// once, even on a connection with commands in flight. wmu must be held.
func (cn *conn) rejected(p *memdx.Packet) bool {
	if !cn.authed.Load() {
		switch p.OpCode {
		case memdx.OpHello, memdx.OpSASLListMechs, memdx.OpSASLAuth, memdx.OpSASLStep, memdx.OpGetErrorMap:
		default:
			return true
		}
	}
	if rule, ok := connRules[p.OpCode]; ok {
		st, _ := cn.verifyHeader(p, rule)
		if st == memdx.StatusSuccess {
			st, _ = cn.validateSpecific(p)
		}
		return st != memdx.StatusSuccess
	}
	if !p.OpCode.Known() {
		return true
	}
	rule, ok := keyRules[p.OpCode]
	if !ok || cn.bucket.Load() == nil {
		return false
	}
	st, _ := cn.verifyHeader(p, rule)
	if st == memdx.StatusSuccess && rule.docKey {
		_, _, st = cn.lookupCollection(p)
	}
	if st == memdx.StatusSuccess {
		st, _ = validateKeySpecific(p)
	}
	return st != memdx.StatusSuccess
}

// validateKeySpecific is the rest of a document command's validator,
// after verify_header.
func validateKeySpecific(p *memdx.Packet) (memdx.Status, string) {
	einval := memdx.StatusInvalidArgs
	switch p.OpCode {
	case memdx.OpGetLocked:
		if len(p.Extras) != 0 && len(p.Extras) != 4 {
			return einval, "Request extras must be of length 0 or 4"
		}
	case memdx.OpGetMeta:
		if len(p.Extras) > 1 {
			return einval, "Request extras must be of length 0 or 1"
		}
		if len(p.Extras) == 1 && p.Extras[0] > 2 {
			// 1: the conflict resolution mode, 2: the datatype
			return einval, "Request extras invalid"
		}
	case memdx.OpObserveSeqno:
		// The whole body, frame infos included.
		if len(p.FramingExtras)+len(p.Value) != 8 {
			return einval, "Request value must be of length 8"
		}
	}
	return memdx.StatusSuccess, ""
}
