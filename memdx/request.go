package memdx

import (
	"encoding/binary"
	"encoding/json"
)

// Request is a client request before it has an opaque. The New* functions
// build one per opcode with its extras; the caller then sets routing fields
// (Vbucket, collection) and the connection encodes it with AppendTo, choosing
// the opaque at that moment. A Request is a value: copying it is safe, and
// building one allocates nothing.
type Request struct {
	OpCode   OpCode
	Datatype Datatype
	Vbucket  uint16
	Cas      uint64

	// Collections, when true, prefixes Key with CollectionID as unsigned
	// LEB128: set it when the connection negotiated HELLO Collections and
	// OpCode.HasCollectionKey().
	Collections  bool
	CollectionID uint32

	Key   []byte
	Value []byte

	// Extras are raw extras for opcodes the New* functions do not cover.
	// They are ignored when a New* function set typed extras.
	Extras []byte

	// Durability adds a durability-requirement frame info (a synchronous
	// write); DurabilityTimeout is in milliseconds, 0 for the server default.
	Durability        DurabilityLevel
	DurabilityTimeout uint16
	// PreserveTTL adds the preserve-TTL frame info (keep the expiry).
	PreserveTTL bool
	// FramingExtras are further pre-encoded frame infos (AppendFrameInfo),
	// written after the typed ones.
	FramingExtras []byte

	// Typed extras live inline so that a Request can be copied and built
	// without allocating.
	ext    [24]byte
	extLen uint8
	extSet bool
}

// setExtras stores typed extras inline.
func (r *Request) setExtras(b []byte) {
	r.extLen = uint8(copy(r.ext[:], b))
	r.extSet = true
}

// ExtrasBytes returns the extras AppendTo will send.
func (r *Request) ExtrasBytes() []byte {
	if r.extSet {
		return r.ext[:r.extLen]
	}
	return r.Extras
}

// AppendTo appends the encoded request with the given opaque to dst. It uses
// magic 0x08 when there are frame infos and 0x80 otherwise. With enough
// capacity in dst it allocates nothing.
func (r *Request) AppendTo(dst []byte, opaque uint32) ([]byte, error) {
	var frames [8]byte
	nf := 0
	if r.Durability != DurabilityNone {
		fb, err := AppendDurabilityFrame(frames[:0], r.Durability, r.DurabilityTimeout)
		if err != nil {
			return dst, err
		}
		nf = len(fb)
	}
	if r.PreserveTTL {
		frames[nf] = byte(FramePreserveTTL) << 4
		nf++
	}
	magic := MagicReq
	if nf > 0 || len(r.FramingExtras) > 0 {
		magic = MagicReqExt
	}
	var prefix [MaxLEB128Len]byte
	np := 0
	if r.Collections {
		np = putULEB128(&prefix, r.CollectionID)
	}
	ext := r.Extras
	if r.extSet {
		ext = r.ext[:r.extLen]
	}
	return appendFrame(dst, magic, uint8(r.OpCode), r.Datatype, r.Vbucket, opaque, r.Cas,
		frames[:nf], r.FramingExtras, ext, prefix[:np], r.Key, r.Value)
}

// EncodedLen is the number of bytes AppendTo will append (an upper bound when
// the request is invalid).
func (r *Request) EncodedLen() int {
	n := HeaderSize + len(r.FramingExtras) + len(r.ExtrasBytes()) + len(r.Key) + len(r.Value)
	if r.Durability != DurabilityNone {
		n += 4
	}
	if r.PreserveTTL {
		n++
	}
	if r.Collections {
		n += MaxLEB128Len
	}
	return n
}

// NewGet builds GET: no extras; the response carries 4 bytes of flags.
func NewGet(key []byte) Request { return Request{OpCode: OpGet, Key: key} }

// NewGetReplica builds GET_REPLICA, sent to the node holding the replica.
func NewGetReplica(key []byte) Request { return Request{OpCode: OpGetReplica, Key: key} }

// NewStore builds SET, ADD or REPLACE (or a quiet variant): extras are flags
// then expiry, 4 bytes each. Cas guards REPLACE and SET when non-zero.
func NewStore(op OpCode, key, value []byte, flags, expiry uint32) Request {
	r := Request{OpCode: op, Key: key, Value: value}
	var e [8]byte
	binary.BigEndian.PutUint32(e[0:4], flags)
	binary.BigEndian.PutUint32(e[4:8], expiry)
	r.setExtras(e[:])
	return r
}

// NewDelete builds DELETE: no extras; Cas guards it when non-zero.
func NewDelete(key []byte) Request { return Request{OpCode: OpDelete, Key: key} }

// NewConcat builds APPEND or PREPEND: no extras; Cas guards it when non-zero.
func NewConcat(op OpCode, key, value []byte) Request {
	return Request{OpCode: op, Key: key, Value: value}
}

// NoCreate as a counter's expiry tells the server not to create a missing
// document (the request fails with KEY_ENOENT instead).
const NoCreate uint32 = 0xffffffff

// NewCounter builds INCREMENT or DECREMENT: extras are delta (8 bytes), the
// initial value for a missing document (8 bytes) and its expiry (4 bytes;
// NoCreate to fail instead of creating). The response value is the new value
// as 8 bytes.
func NewCounter(op OpCode, key []byte, delta, initial uint64, expiry uint32) Request {
	r := Request{OpCode: op, Key: key}
	var e [20]byte
	binary.BigEndian.PutUint64(e[0:8], delta)
	binary.BigEndian.PutUint64(e[8:16], initial)
	binary.BigEndian.PutUint32(e[16:20], expiry)
	r.setExtras(e[:])
	return r
}

// NewTouch builds TOUCH: extras are the new expiry (4 bytes).
func NewTouch(key []byte, expiry uint32) Request {
	return withExpiry(Request{OpCode: OpTouch, Key: key}, expiry)
}

// NewGAT builds GAT (get and touch): extras are the new expiry (4 bytes); the
// response is a GET response.
func NewGAT(key []byte, expiry uint32) Request {
	return withExpiry(Request{OpCode: OpGAT, Key: key}, expiry)
}

// NewGetLocked builds GET_LOCKED: extras are the lock time in seconds
// (4 bytes; 0 for the server's default). The response is a GET response whose
// CAS unlocks the document.
func NewGetLocked(key []byte, lockTime uint32) Request {
	return withExpiry(Request{OpCode: OpGetLocked, Key: key}, lockTime)
}

func withExpiry(r Request, v uint32) Request {
	var e [4]byte
	binary.BigEndian.PutUint32(e[:], v)
	r.setExtras(e[:])
	return r
}

// NewUnlock builds UNLOCK_KEY with the CAS the lock returned.
func NewUnlock(key []byte, cas uint64) Request {
	return Request{OpCode: OpUnlockKey, Key: key, Cas: cas}
}

// NewGetMeta builds GET_META asking for the version-2 response (which adds
// the datatype): extras are one byte, 2.
func NewGetMeta(key []byte) Request {
	r := Request{OpCode: OpGetMeta, Key: key}
	r.setExtras([]byte{2})
	return r
}

// NewObserveSeqno builds OBSERVE_SEQNO for a vbucket: the value is the
// vbucket UUID (8 bytes).
func NewObserveSeqno(vbucket uint16, vbUUID uint64) Request {
	r := Request{OpCode: OpObserveSeqno, Vbucket: vbucket}
	r.Value = binary.BigEndian.AppendUint64(nil, vbUUID)
	return r
}

// ObserveKey is one key of an OBSERVE request.
type ObserveKey struct {
	Vbucket uint16
	// Key is the full key, collection prefix included when collections are on.
	Key []byte
}

// NewObserve builds OBSERVE (observe via CAS): the value lists vbucket (2),
// key length (2) and key for each key.
func NewObserve(keys []ObserveKey) Request {
	var v []byte
	for _, k := range keys {
		v = binary.BigEndian.AppendUint16(v, k.Vbucket)
		v = binary.BigEndian.AppendUint16(v, uint16(len(k.Key)))
		v = append(v, k.Key...)
	}
	return Request{OpCode: OpObserve, Value: v}
}

// NewNoop builds NOOP.
func NewNoop() Request { return Request{OpCode: OpNoop} }

// NewVersion builds VERSION: the response value is the server's version.
func NewVersion() Request { return Request{OpCode: OpVersion} }

// NewStat builds STAT for a group (empty for the default group). The server
// answers with one response per statistic (key and value) and ends with a
// response whose key is empty.
func NewStat(group []byte) Request { return Request{OpCode: OpStat, Key: group} }

// NewFlush builds FLUSH (no expiry extras).
func NewFlush() Request { return Request{OpCode: OpFlush} }

// NewQuit builds QUIT: the server answers, then closes the connection.
func NewQuit() Request { return Request{OpCode: OpQuit} }

// NewHello builds HELLO: the key names the client (see HelloKey) and the
// value lists the requested features, 2 bytes each.
func NewHello(key []byte, features []HelloFeature) Request {
	v := make([]byte, 0, 2*len(features))
	for _, f := range features {
		v = binary.BigEndian.AppendUint16(v, uint16(f))
	}
	return Request{OpCode: OpHello, Key: key, Value: v}
}

// HelloKey builds the HELLO key Couchbase servers log:
// {"a":"<agent>","i":"<connection id>"}. The server truncates the agent to
// 200 bytes and the id to 33; so does HelloKey.
func HelloKey(agent, connectionID string) []byte {
	if len(agent) > 200 {
		agent = agent[:200]
	}
	if len(connectionID) > 33 {
		connectionID = connectionID[:33]
	}
	b, _ := json.Marshal(struct {
		A string `json:"a"`
		I string `json:"i"`
	}{agent, connectionID})
	return b
}

// NewSASLListMechs builds SASL_LIST_MECHS.
func NewSASLListMechs() Request { return Request{OpCode: OpSASLListMechs} }

// NewSASLAuth builds SASL_AUTH: the key is the mechanism, the value the
// client's first message.
func NewSASLAuth(mechanism string, payload []byte) Request {
	return Request{OpCode: OpSASLAuth, Key: []byte(mechanism), Value: payload}
}

// NewSASLStep builds SASL_STEP: the key is the mechanism, the value the
// client's next message.
func NewSASLStep(mechanism string, payload []byte) Request {
	return Request{OpCode: OpSASLStep, Key: []byte(mechanism), Value: payload}
}

// NewSelectBucket builds SELECT_BUCKET: the key is the bucket name.
func NewSelectBucket(bucket string) Request {
	return Request{OpCode: OpSelectBucket, Key: []byte(bucket)}
}

// NewGetClusterConfig builds GET_CLUSTER_CONFIG without a known version.
func NewGetClusterConfig() Request { return Request{OpCode: OpGetClusterConfig} }

// NewGetClusterConfigKnown builds GET_CLUSTER_CONFIG with the version the
// client already has (epoch then revision, 8 bytes each, signed): the server
// returns a config only when its own is newer. Send it only when the server
// granted FeatureGetClusterConfigWithKnownVersion.
func NewGetClusterConfigKnown(epoch, revision int64) Request {
	r := Request{OpCode: OpGetClusterConfig}
	var e [16]byte
	binary.BigEndian.PutUint64(e[0:8], uint64(epoch))
	binary.BigEndian.PutUint64(e[8:16], uint64(revision))
	r.setExtras(e[:])
	return r
}

// NewGetRandomKey builds GET_RANDOM_KEY. With collections on, the extras name
// the collection to draw from (4 bytes).
func NewGetRandomKey(collections bool, collectionID uint32) Request {
	r := Request{OpCode: OpGetRandomKey}
	if collections {
		var e [4]byte
		binary.BigEndian.PutUint32(e[:], collectionID)
		r.setExtras(e[:])
	}
	return r
}

// NewCollectionsGetManifest builds COLLECTIONS_GET_MANIFEST.
func NewCollectionsGetManifest() Request { return Request{OpCode: OpCollectionsGetManifest} }

// NewCollectionsGetID builds COLLECTIONS_GET_ID for "scope.collection": the
// path goes in the value (the key form is deprecated). The response extras
// are the manifest uid (8 bytes) and the collection id (4 bytes).
func NewCollectionsGetID(scope, collection string) Request {
	return Request{OpCode: OpCollectionsGetID, Value: []byte(scope + "." + collection)}
}

// NewGetErrorMap builds GET_ERROR_MAP: the value is the highest error-map
// format version the client parses (2 bytes).
func NewGetErrorMap(version uint16) Request {
	return Request{OpCode: OpGetErrorMap, Value: binary.BigEndian.AppendUint16(nil, version)}
}
