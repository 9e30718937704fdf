package memdx

import (
	"encoding/binary"
	"encoding/json"
	"math"
	"unicode/utf8"
)

// Request is a client request before it has an opaque. The New* functions
// build one per opcode with its extras; the caller then sets routing fields
// (Vbucket, collection) and the connection encodes it with AppendTo, choosing
// the opaque at that moment. A Request is a value: copying it is safe.
// Building one allocates nothing, except where a New* function's doc says so
// (HELLO, OBSERVE, SASL, SELECT_BUCKET and COLLECTIONS_GET_ID build their
// values on the heap; none of them is on a hot path).
//
// Slices a Request holds (Key, Value, the sub-document paths and specs) stay
// owned by the caller and are read, not copied, by AppendTo: keep them
// unchanged until the request is encoded for the last time (a retry
// re-encodes). Encoding the same Request twice gives the same bytes.
type Request struct {
	OpCode   OpCode
	Datatype Datatype
	Vbucket  uint16
	Cas      uint64

	// Collections, when true, prefixes Key with CollectionID as unsigned
	// LEB128. Set it on every request once the connection negotiated HELLO
	// Collections: AppendTo adds the prefix only to opcodes whose key is a
	// document key (OpCode.HasCollectionKey), so HELLO, SASL, STAT and the
	// like are left alone.
	Collections  bool
	CollectionID uint32

	Key []byte
	// Value is the request's value. Builders that carry a small fixed-size
	// value (OBSERVE_SEQNO, GET_ERROR_MAP) keep it inline instead and leave
	// Value nil; ValueBytes returns what AppendTo will send.
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

	// Typed extras and small values live inline so that a Request can be
	// copied and built without allocating.
	ext    [28]byte
	extLen uint8
	extSet bool
	val    [8]byte
	valLen uint8
	valSet bool

	// Sub-document commands (subdoc.go): the path of a single-path command,
	// written between the key and the value, or the specs of a multi-path
	// command, written as the value.
	subdocPath []byte
	lookups    []SubdocLookupOp
	mutations  []SubdocMutateOp
}

// setExtras stores typed extras inline.
func (r *Request) setExtras(b []byte) {
	r.extLen = uint8(copy(r.ext[:], b))
	r.extSet = true
}

// setValue stores a small value inline.
func (r *Request) setValue(b []byte) {
	r.valLen = uint8(copy(r.val[:], b))
	r.valSet = true
	r.Value = nil
}

// ExtrasBytes returns the extras AppendTo will send. The slice aliases r.
func (r *Request) ExtrasBytes() []byte {
	if r.extSet {
		return r.ext[:r.extLen]
	}
	return r.Extras
}

// ValueBytes returns the value AppendTo will send after the key (and, for a
// single-path sub-document command, after the path). For a multi-path
// sub-document command it returns nil: the specs are encoded by AppendTo.
// The slice may alias r.
func (r *Request) ValueBytes() []byte {
	if r.valSet {
		return r.val[:r.valLen]
	}
	return r.Value
}

// collectionPrefix reports whether AppendTo prefixes the key with the
// collection id.
func (r *Request) collectionPrefix() bool {
	return r.Collections && r.OpCode.HasCollectionKey()
}

// frameInfosLen is the size of the typed frame infos AppendTo writes.
func (r *Request) frameInfosLen() int {
	n := 0
	if r.Durability != DurabilityNone {
		n += 2
		if r.DurabilityTimeout != 0 {
			n += 2
		}
	}
	if r.PreserveTTL {
		n++
	}
	return n
}

// AppendWithKey appends r with key in place of r.Key and the given
// opaque, as AppendTo would: one of a batch of requests that differ only in
// their key (a group of quiet gets). When key is all of r's body (no frame
// infos, extras, collection prefix, path or value) the header is written
// directly, without AppendTo's general encoding.
func (r *Request) AppendWithKey(dst []byte, key []byte, opaque uint32) ([]byte, error) {
	if !r.keyOnly() || len(key) > math.MaxUint16 {
		c := *r
		c.Key = key
		return c.AppendTo(dst, opaque)
	}
	n := len(dst)
	dst = grow(dst, HeaderSize+len(key))[:n+HeaderSize]
	h := dst[n:]
	h[0] = byte(MagicReq)
	h[1] = byte(r.OpCode)
	binary.BigEndian.PutUint16(h[2:4], uint16(len(key)))
	h[4] = 0
	h[5] = byte(r.Datatype)
	binary.BigEndian.PutUint16(h[6:8], r.Vbucket)
	binary.BigEndian.PutUint32(h[8:12], uint32(len(key)))
	binary.BigEndian.PutUint32(h[12:16], opaque)
	binary.BigEndian.PutUint64(h[16:24], r.Cas)
	return append(dst, key...), nil
}

// SendsKey reports whether key is the key AppendTo sends for r: its
// collection prefix, when it has one, then Key. A GETK or GETKQ response
// names the key of the request it answers (kv_engine with the prefix on a
// connection that negotiated collections, as the request carried it):
// comparing the two tells an answer to this request from one to another.
// It allocates nothing.
func (r *Request) SendsKey(key []byte) bool {
	if r.collectionPrefix() {
		var prefix [MaxLEB128Len]byte
		np := putULEB128(&prefix, r.CollectionID)
		if len(key) != np+len(r.Key) || string(key[:np]) != string(prefix[:np]) {
			return false
		}
		key = key[np:]
	}
	return string(key) == string(r.Key)
}

// keyOnly reports whether r's body is its key alone.
func (r *Request) keyOnly() bool {
	return r.Durability == DurabilityNone && !r.PreserveTTL && len(r.FramingExtras) == 0 &&
		len(r.ExtrasBytes()) == 0 && len(r.ValueBytes()) == 0 && !r.collectionPrefix() &&
		r.subdocPath == nil && r.lookups == nil && r.mutations == nil
}

// AppendTo appends the encoded request with the given opaque to dst. It uses
// magic 0x08 when there are frame infos and 0x80 otherwise. With enough
// capacity in dst (EncodedLen more bytes) it allocates nothing. On error
// (an *EncodeError: errors.Is(err, ErrInvalidRequest)) dst is returned
// unchanged.
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
	if r.collectionPrefix() {
		np = putULEB128(&prefix, r.CollectionID)
	}
	if len(r.subdocPath) > math.MaxUint16 {
		return dst, badRequest("sub-document path", "%d bytes exceed 65535", len(r.subdocPath))
	}
	tail, err := r.specsLen()
	if err != nil {
		return dst, err
	}
	out, err := appendFrame(dst, magic, uint8(r.OpCode), r.Datatype, r.Vbucket, opaque, r.Cas,
		frames[:nf], r.FramingExtras, r.ExtrasBytes(), prefix[:np], r.Key, r.subdocPath, r.ValueBytes(), tail)
	if err != nil {
		return dst, err
	}
	return r.appendSpecs(out), nil
}

// EncodedLen is the number of bytes AppendTo will append for a request it
// can encode.
func (r *Request) EncodedLen() int {
	n := HeaderSize + r.frameInfosLen() + len(r.FramingExtras) + len(r.ExtrasBytes()) +
		len(r.Key) + len(r.subdocPath) + len(r.ValueBytes())
	if r.collectionPrefix() {
		n += uleb128Len(r.CollectionID)
	}
	if t, err := r.specsLen(); err == nil {
		n += t
	}
	return n
}

// NewGet builds GET: no extras; the response carries 4 bytes of flags. GETQ,
// GETK and GETKQ encode the same way: set OpCode on the result. (So do the
// quiet variants of the other builders: SETQ, DELETEQ, INCREMENTQ, ...)
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
// vbucket UUID (8 bytes, kept inline: see ValueBytes).
func NewObserveSeqno(vbucket uint16, vbUUID uint64) Request {
	r := Request{OpCode: OpObserveSeqno, Vbucket: vbucket}
	var v [8]byte
	binary.BigEndian.PutUint64(v[:], vbUUID)
	r.setValue(v[:])
	return r
}

// ObserveKey is one key of an OBSERVE request.
type ObserveKey struct {
	Vbucket uint16
	// Key is the full key, collection prefix included when collections are on.
	Key []byte
}

// NewObserve builds OBSERVE (observe via CAS): the value lists vbucket (2),
// key length (2) and key for each key. It allocates the value. A key longer
// than 65535 bytes cannot be sent: its length is written modulo 2^16 and the
// server rejects the request.
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
// value lists the requested features, 2 bytes each (AppendHelloFeatures). It
// allocates the value.
func NewHello(key []byte, features []HelloFeature) Request {
	return Request{OpCode: OpHello, Key: key, Value: AppendHelloFeatures(make([]byte, 0, 2*len(features)), features)}
}

// AppendHelloFeatures appends features as HELLO encodes them (2 bytes each,
// big-endian): the value of a HELLO request, and of the server's reply.
func AppendHelloFeatures(dst []byte, features []HelloFeature) []byte {
	for _, f := range features {
		dst = binary.BigEndian.AppendUint16(dst, uint16(f))
	}
	return dst
}

// Limits HelloKey applies. kv_engine keeps only the first 32 bytes of the
// agent and 33 of the connection id for its logs and connection stats;
// HelloKey sends up to MaxHelloAgentLen bytes of agent so that nothing the
// server could show is lost, while keeping the key small.
const (
	MaxHelloAgentLen        = 200
	MaxHelloConnectionIDLen = 33
)

// HelloKey builds the JSON HELLO key kv_engine parses when the key starts
// with '{': {"a":"<agent>","i":"<connection id>"}. The agent is cut to
// MaxHelloAgentLen bytes and the id to MaxHelloConnectionIDLen, at a UTF-8
// character boundary. It allocates the key.
func HelloKey(agent, connectionID string) []byte {
	b, _ := json.Marshal(struct {
		A string `json:"a"`
		I string `json:"i"`
	}{TruncateUTF8(agent, MaxHelloAgentLen), TruncateUTF8(connectionID, MaxHelloConnectionIDLen)})
	return b
}

// DecodeHelloKey reads a HELLO key: the agent and connection id of a JSON
// key (HelloKey), or the whole key as the agent when it is not JSON, as
// kv_engine does. The strings are copies.
func DecodeHelloKey(key []byte) (agent, connectionID string) {
	if len(key) > 0 && key[0] == '{' {
		var k struct {
			A string `json:"a"`
			I string `json:"i"`
		}
		if json.Unmarshal(key, &k) == nil {
			return k.A, k.I
		}
	}
	return string(key), ""
}

// TruncateUTF8 cuts s to at most n bytes without splitting a character, as
// HelloKey cuts its agent and connection id (JSON would carry a character
// cut in two as U+FFFD).
func TruncateUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// NewSASLListMechs builds SASL_LIST_MECHS.
func NewSASLListMechs() Request { return Request{OpCode: OpSASLListMechs} }

// NewSASLAuth builds SASL_AUTH: the key is the mechanism, the value the
// client's first message. It allocates the key.
func NewSASLAuth(mechanism string, payload []byte) Request {
	return Request{OpCode: OpSASLAuth, Key: []byte(mechanism), Value: payload}
}

// NewSASLStep builds SASL_STEP: the key is the mechanism, the value the
// client's next message. It allocates the key.
func NewSASLStep(mechanism string, payload []byte) Request {
	return Request{OpCode: OpSASLStep, Key: []byte(mechanism), Value: payload}
}

// NewSelectBucket builds SELECT_BUCKET: the key is the bucket name. It
// allocates the key.
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
// the collection to draw from (4 bytes). The response carries the key found
// and its value.
func NewGetRandomKey(collections bool, collectionID uint32) Request {
	r := Request{OpCode: OpGetRandomKey}
	if collections {
		var e [4]byte
		binary.BigEndian.PutUint32(e[:], collectionID)
		r.setExtras(e[:])
	}
	return r
}

// NewGetRandomKeyWithXattrs builds GET_RANDOM_KEY asking for the document's
// extended attributes too (HELLO GetRandomKeyIncludeXattr): the extras are
// the collection id (4 bytes) and a non-zero byte (0xff, as the protocol
// document shows).
func NewGetRandomKeyWithXattrs(collectionID uint32) Request {
	r := Request{OpCode: OpGetRandomKey}
	var e [5]byte
	binary.BigEndian.PutUint32(e[:4], collectionID)
	e[4] = 0xff
	r.setExtras(e[:])
	return r
}

// NewCollectionsGetManifest builds COLLECTIONS_GET_MANIFEST.
func NewCollectionsGetManifest() Request { return Request{OpCode: OpCollectionsGetManifest} }

// NewCollectionsGetID builds COLLECTIONS_GET_ID for "scope.collection": the
// path goes in the value (the key form is deprecated). The response extras
// are the manifest uid (8 bytes) and the collection id (4 bytes). It
// allocates the value.
func NewCollectionsGetID(scope, collection string) Request {
	return Request{OpCode: OpCollectionsGetID, Value: []byte(scope + "." + collection)}
}

// NewGetErrorMap builds GET_ERROR_MAP: the value is the highest error-map
// format version the client parses (2 bytes, kept inline: see ValueBytes).
func NewGetErrorMap(version uint16) Request {
	r := Request{OpCode: OpGetErrorMap}
	var v [2]byte
	binary.BigEndian.PutUint16(v[:], version)
	r.setValue(v[:])
	return r
}
