package mockcluster

import (
	"strings"
	"testing"

	"github.com/kvwire/kvwire/memdx"
)

// keyCase is one refused (or accepted) document request and kv_engine's
// answer to it.
type keyCase struct {
	name string
	req  memdx.Request
	st   memdx.Status
	ctx  string
}

func runKeyCases(t *testing.T, cl *rawClient, cases []keyCase) {
	t.Helper()
	for _, tc := range cases {
		expectAnswer(t, tc.name, cl.do(tc.req), tc.st, tc.ctx)
	}
	if p := cl.do(memdx.NewNoop()); p.Status != memdx.StatusSuccess {
		t.Fatalf("NOOP after the refused packets: %s", p.Status)
	}
}

// The document commands refuse what kv_engine's validators refuse
// (daemon/mcbp_validators.cc: get_validator, add_validator,
// set_replace_validator, append_prepend_validator, delete_validator,
// arithmetic_validator, gat_validator, get_locked_validator,
// unlock_validator, get_meta_validator, observe_validator,
// observe_seqno_validator, each calling verify_header), with the same
// status and error context: a CAS where the command takes none, a datatype
// it does not take, the wrong extras, a value where none belongs.
func TestKeyCommandsValidatePackets(t *testing.T) {
	c := newCluster(t, Options{Nodes: 1})
	cl := bootstrap(t, c.Node(0).Addr(), DefaultBucket, []memdx.HelloFeature{memdx.FeatureXerror, memdx.FeatureSelectBucket})
	k := []byte("k")
	req := func(op memdx.OpCode, f func(*memdx.Request)) memdx.Request {
		r := memdx.Request{OpCode: op, Key: k}
		if f != nil {
			f(&r)
		}
		return r
	}
	einval := memdx.StatusInvalidArgs
	if p := cl.do(memdx.NewStore(memdx.OpSet, k, []byte("1"), 0, 0)); p.Status != memdx.StatusSuccess {
		t.Fatalf("SET: %s", p.Status)
	}
	runKeyCases(t, cl, []keyCase{
		{"GET CAS", req(memdx.OpGet, func(r *memdx.Request) { r.Cas = 1 }), einval, "Request CAS must not be set"},
		{"GETK CAS", req(memdx.OpGetK, func(r *memdx.Request) { r.Cas = 1 }), einval, "Request CAS must not be set"},
		{"GET_REPLICA CAS", req(memdx.OpGetReplica, func(r *memdx.Request) { r.Cas = 1 }), einval, "Request CAS must not be set"},
		{"GET JSON", req(memdx.OpGet, func(r *memdx.Request) { r.Datatype = memdx.DatatypeJSON }), einval, "Request datatype invalid"},
		{"GET extras", req(memdx.OpGet, func(r *memdx.Request) { r.Extras = []byte{0, 0, 0, 0} }), einval, "Request must not include extras"},
		{"GET value", req(memdx.OpGet, func(r *memdx.Request) { r.Value = []byte("v") }), einval, "Request must not include value"},
		{"GET no key", memdx.Request{OpCode: memdx.OpGet}, einval, "Request must include key"},
		{"SET short extras", req(memdx.OpSet, func(r *memdx.Request) { r.Extras = []byte{0, 0, 0, 0} }), einval, "Request must include extras of length 8"},
		{"SET xattr", req(memdx.OpSet, func(r *memdx.Request) { r.Extras = make([]byte, 8); r.Datatype = memdx.DatatypeXattr }), einval, "Request datatype invalid"},
		{"ADD CAS", req(memdx.OpAdd, func(r *memdx.Request) { r.Extras = make([]byte, 8); r.Cas = 5 }), einval, "Request CAS must not be set"},
		{"APPEND extras", req(memdx.OpAppend, func(r *memdx.Request) { r.Extras = make([]byte, 8) }), einval, "Request must not include extras"},
		{"DELETE JSON", req(memdx.OpDelete, func(r *memdx.Request) { r.Datatype = memdx.DatatypeJSON }), einval, "Request datatype invalid"},
		{"DELETE value", req(memdx.OpDelete, func(r *memdx.Request) { r.Value = []byte("v") }), einval, "Request must not include value"},
		{"INCREMENT JSON", req(memdx.OpIncrement, func(r *memdx.Request) { r.Extras = make([]byte, 20); r.Datatype = memdx.DatatypeJSON }), einval, "Request datatype invalid"},
		{"INCREMENT CAS", req(memdx.OpIncrement, func(r *memdx.Request) { r.Extras = make([]byte, 20); r.Cas = 3 }), einval, "Request CAS must not be set"},
		{"TOUCH CAS", req(memdx.OpTouch, func(r *memdx.Request) { r.Extras = make([]byte, 4); r.Cas = 3 }), einval, "Request CAS must not be set"},
		{"GAT CAS", req(memdx.OpGAT, func(r *memdx.Request) { r.Extras = make([]byte, 4); r.Cas = 3 }), einval, "Request CAS must not be set"},
		{"TOUCH no extras", req(memdx.OpTouch, nil), einval, "Request must include extras of length 4"},
		{"TOUCH JSON", req(memdx.OpTouch, func(r *memdx.Request) { r.Extras = make([]byte, 4); r.Datatype = memdx.DatatypeJSON }), einval, "Request datatype invalid"},
		{"GET_LOCKED CAS", req(memdx.OpGetLocked, func(r *memdx.Request) { r.Cas = 3 }), einval, "Request CAS must not be set"},
		{"GET_LOCKED 2-byte extras", req(memdx.OpGetLocked, func(r *memdx.Request) { r.Extras = []byte{0, 1} }), einval, "Request extras must be of length 0 or 4"},
		{"UNLOCK no CAS", req(memdx.OpUnlockKey, nil), einval, "Request CAS must be set"},
		{"UNLOCK JSON", req(memdx.OpUnlockKey, func(r *memdx.Request) { r.Cas = 3; r.Datatype = memdx.DatatypeJSON }), einval, "Request datatype invalid"},
		{"GET_META CAS", req(memdx.OpGetMeta, func(r *memdx.Request) { r.Cas = 3 }), einval, "Request CAS must not be set"},
		{"GET_META version 3", req(memdx.OpGetMeta, func(r *memdx.Request) { r.Extras = []byte{3} }), einval, "Request extras invalid"},
		{"GET_META 2-byte extras", req(memdx.OpGetMeta, func(r *memdx.Request) { r.Extras = []byte{1, 0} }), einval, "Request extras must be of length 0 or 1"},
		{"OBSERVE no value", memdx.Request{OpCode: memdx.OpObserve}, einval, "Request must include value"},
		{"OBSERVE CAS", memdx.Request{OpCode: memdx.OpObserve, Cas: 1, Value: []byte{0, 0, 0, 1, 'k'}}, einval, "Request CAS must not be set"},
		{"OBSERVE key", memdx.Request{OpCode: memdx.OpObserve, Key: k, Value: []byte{0, 0, 0, 1, 'k'}}, einval, "Request must not include key"},
		{"OBSERVE_SEQNO short value", memdx.Request{OpCode: memdx.OpObserveSeqno, Value: []byte{1, 2, 3}}, einval, "Request value must be of length 8"},
		{"OBSERVE_SEQNO key", memdx.Request{OpCode: memdx.OpObserveSeqno, Key: k, Value: make([]byte, 8)}, einval, "Request must not include key"},
		{"GET long key", memdx.Request{OpCode: memdx.OpGet, Key: []byte(strings.Repeat("k", 251))}, einval, "Key length exceeds 250"},
	})
}

// With Collections negotiated, kv_engine's is_document_key_valid judges the
// key's collection-id prefix after the header checks and the frame infos:
// at least 2 bytes, a canonical LEB128 with its stop byte, a logical key
// after it; and the whole key may have at most 251 bytes.
func TestKeyCommandsValidateCollectionKeys(t *testing.T) {
	c := newCluster(t, Options{Nodes: 1})
	cl := bootstrap(t, c.Node(0).Addr(), DefaultBucket, stdFeatures)
	get := func(key []byte) memdx.Request { return memdx.Request{OpCode: memdx.OpGet, Key: key} }
	einval := memdx.StatusInvalidArgs
	runKeyCases(t, cl, []keyCase{
		{"1-byte key", get([]byte{0}), einval, "Key length must be >= 2"},
		{"no stop byte", get([]byte{0x80, 0x80}), einval, "No stop-byte found"},
		{"non-canonical", get([]byte{0x80, 0x00, 'k'}), einval, "Key contains non-canonical leb128"},
		{"no logical key", get([]byte{0x88, 0x01}), einval, "No logical key found"},
		{"reserved", get([]byte{0x01, 'k'}), einval, "Invalid collection-id:1"},
		{"252 bytes", get(append([]byte{0}, strings.Repeat("k", 251)...)), einval, "Key length exceeds 251"},
		{"default 251 logical", get(append([]byte{0}, strings.Repeat("k", 250)...)), memdx.StatusKeyNotFound, ""},
		// verify_header judges the datatype before the frame infos.
		{"GET unknown frame", memdx.Request{OpCode: memdx.OpGet, Key: []byte{0, 'k'}, FramingExtras: []byte{0xe0}}, memdx.StatusUnknownFrameInfo, ""},
		{"datatype before frames", memdx.Request{OpCode: memdx.OpDelete, Key: []byte{0, 'k'}, Datatype: memdx.DatatypeJSON, FramingExtras: []byte{0xe0}}, einval, "Request datatype invalid"},
		// Durability is for mutations, PreserveTtl for SET and the like.
		{"GET durability", memdx.Request{OpCode: memdx.OpGet, Key: []byte{0, 'k'}, FramingExtras: []byte{0x11, 0x01}}, einval, "The requested command does not support durability requirements"},
		{"ADD PreserveTtl", memdx.Request{OpCode: memdx.OpAdd, Key: []byte{0, 'k'}, Extras: make([]byte, 8), FramingExtras: []byte{0x50}}, memdx.StatusNotSupported, "This command does not support PreserveTtl"},
	})
}

// The sub-document commands go through verify_header first
// (validate_basic_header_fields in daemon/subdocument_validators.cc):
// any extras length, a key, any value and CAS, raw datatype only, the
// frame infos and the document key's prefix; the sub-document checks come
// after.
func TestSubdocCommandsValidateHeader(t *testing.T) {
	c := newCluster(t, Options{Nodes: 1})
	cl := bootstrap(t, c.Node(0).Addr(), DefaultBucket, stdFeatures)
	key := []byte{0, 'k'}
	with := func(r memdx.Request, f func(*memdx.Request)) memdx.Request { r.Key = key; f(&r); return r }
	get := memdx.NewSubdocLookup(memdx.OpSubdocGet, nil, []byte("a"), 0, 0)
	lookup := memdx.NewSubdocMultiLookup(nil, 0, []memdx.SubdocLookupOp{{Op: memdx.OpSubdocGet, Path: []byte("a")}})
	mutate := memdx.NewSubdocMultiMutation(nil, 0, 0, []memdx.SubdocMutateOp{{Op: memdx.OpSubdocDictUpsert, Path: []byte("a"), Value: []byte("1")}})
	einval := memdx.StatusInvalidArgs
	runKeyCases(t, cl, []keyCase{
		{"SUBDOC_GET JSON", with(get, func(r *memdx.Request) { r.Datatype = memdx.DatatypeJSON }), einval, "Request datatype invalid"},
		{"MULTI_LOOKUP snappy", with(lookup, func(r *memdx.Request) { r.Datatype = memdx.DatatypeSnappy }), einval, "Request datatype invalid"},
		{"MULTI_MUTATION JSON", with(mutate, func(r *memdx.Request) { r.Datatype = memdx.DatatypeJSON }), einval, "Request datatype invalid"},
		{"SUBDOC_GET 1-byte key", with(get, func(r *memdx.Request) { r.Key = []byte{0} }), einval, "Key length must be >= 2"},
		{"MULTI_MUTATION non-canonical key", with(mutate, func(r *memdx.Request) { r.Key = []byte{0x80, 0x00, 'k'} }), einval, "Key contains non-canonical leb128"},
		{"MULTI_LOOKUP 252-byte key", with(lookup, func(r *memdx.Request) { r.Key = append([]byte{0}, strings.Repeat("k", 251)...) }), einval, "Key length exceeds 251"},
		{"MULTI_LOOKUP durability", with(lookup, func(r *memdx.Request) { r.FramingExtras = []byte{0x11, 0x01} }), einval, "The requested command does not support durability requirements"},
		{"MULTI_LOOKUP PreserveTtl", with(lookup, func(r *memdx.Request) { r.FramingExtras = []byte{0x50} }), memdx.StatusNotSupported, "This command does not support PreserveTtl"},
	})
}

// kv_engine's opcode table (mcbp/protocol/opcode.cc) gives the quiet
// mutations (SETQ, ADDQ, REPLACEQ, DELETEQ, APPENDQ, PREPENDQ,
// INCREMENTQ, DECREMENTQ) no Durability attribute: a durability
// requirement on one is EINVAL, as on a read, and the write is not made.
func TestQuietMutationsRefuseDurability(t *testing.T) {
	c := newCluster(t, Options{Nodes: 1})
	cl := bootstrap(t, c.Node(0).Addr(), DefaultBucket, stdFeatures)
	key := []byte{0, 'k'}
	durable := []byte{0x11, 0x01}
	req := func(op memdx.OpCode, extras int) memdx.Request {
		return memdx.Request{OpCode: op, Key: key, Extras: make([]byte, extras), FramingExtras: durable}
	}
	const ctx = "The requested command does not support durability requirements"
	einval := memdx.StatusInvalidArgs
	runKeyCases(t, cl, []keyCase{
		{"SETQ", req(memdx.OpSetQ, 8), einval, ctx},
		{"ADDQ", req(memdx.OpAddQ, 8), einval, ctx},
		{"REPLACEQ", req(memdx.OpReplaceQ, 8), einval, ctx},
		{"DELETEQ", req(memdx.OpDeleteQ, 0), einval, ctx},
		{"APPENDQ", req(memdx.OpAppendQ, 0), einval, ctx},
		{"PREPENDQ", req(memdx.OpPrependQ, 0), einval, ctx},
		{"INCREMENTQ", req(memdx.OpIncrementQ, 20), einval, ctx},
		{"DECREMENTQ", req(memdx.OpDecrementQ, 20), einval, ctx},
	})
	if p := cl.do(memdx.Request{OpCode: memdx.OpGet, Key: key}); p.Status != memdx.StatusKeyNotFound {
		t.Fatalf("GET after the refused writes: %s, want KEY_ENOENT", p.Status)
	}
}

// TOUCH and GAT take a durability frame (opcode.cc gives them the
// Durability attribute) but kv_engine's ep engine answers NOT_SUPPORTED to
// a durable get_and_touch, before it looks at the vbucket; GATQ has no
// Durability attribute, so its validator refuses the frame with EINVAL.
// The document keeps its expiry.
func TestDurableTouchNotSupported(t *testing.T) {
	c := newCluster(t, Options{Nodes: 1})
	cl := bootstrap(t, c.Node(0).Addr(), DefaultBucket, stdFeatures)
	key := []byte{0, 'k'}
	if p := cl.do(memdx.Request{OpCode: memdx.OpSet, Key: key, Extras: make([]byte, 8), Value: []byte("v")}); p.Status != memdx.StatusSuccess {
		t.Fatalf("SET: %s", p.Status)
	}
	// (One node holds every vbucket.)
	touch := func(op memdx.OpCode) memdx.Request {
		return memdx.Request{OpCode: op, Key: key, Extras: []byte{0, 0, 0, 100}, FramingExtras: []byte{0x11, 0x01}}
	}
	runKeyCases(t, cl, []keyCase{
		{"TOUCH", touch(memdx.OpTouch), memdx.StatusNotSupported, ""},
		{"GAT", touch(memdx.OpGAT), memdx.StatusNotSupported, ""},
		{"GATQ", touch(memdx.OpGATQ), memdx.StatusInvalidArgs, "The requested command does not support durability requirements"},
	})
	p := cl.do(memdx.Request{OpCode: memdx.OpGetMeta, Key: key})
	if p.Status != memdx.StatusSuccess {
		t.Fatalf("GET_META: %s", p.Status)
	}
	if m, err := memdx.DecodeGetMeta(&p); err != nil || m.Expiry != 0 {
		t.Fatalf("GET_META after the refused touches: %+v %v, want no expiry", m, err)
	}
}

// A sub-document request whose extras or specs do not parse gets
// kv_engine's error context (subdocument_validators.cc: subdoc_validator,
// subdoc_multi_validator and is_valid_multipath_spec).
func TestSubdocMalformedContexts(t *testing.T) {
	c := newCluster(t, Options{Nodes: 1})
	cl := bootstrap(t, c.Node(0).Addr(), DefaultBucket, stdFeatures)
	key := []byte{0, 'k'}
	req := func(op memdx.OpCode, extras, value []byte) memdx.Request {
		return memdx.Request{OpCode: op, Key: key, Extras: extras, Value: value}
	}
	long := make([]byte, 1100)
	einval := memdx.StatusInvalidArgs
	runKeyCases(t, cl, []keyCase{
		{"SUBDOC_GET 2-byte extras", req(memdx.OpSubdocGet, []byte{0, 1}, []byte("a")), einval, "Invalid extras section"},
		{"SUBDOC_GET 5-byte extras", req(memdx.OpSubdocGet, []byte{0, 1, 0, 0, 0}, []byte("a")), einval, "Invalid extras section"},
		{"SUBDOC_GET path past the value", req(memdx.OpSubdocGet, []byte{0, 5, 0}, []byte("a")), einval, "Path length can't exceed value"},
		{"SUBDOC_GET path over 1024", req(memdx.OpSubdocGet, []byte{0x04, 0x4c, 0}, []byte("a")), einval, "Request path length exceeds maximum"},
		{"SUBDOC_GET long path", req(memdx.OpSubdocGet, []byte{0x04, 0x4c, 0}, long), einval, "Request path length exceeds maximum"},
		{"MULTI_LOOKUP 2-byte extras", req(memdx.OpSubdocMultiLookup, []byte{0, 0}, []byte{0xc5, 0, 0, 1, 'a'}), einval, "Request extras invalid"},
		{"MULTI_MUTATION 2-byte extras", req(memdx.OpSubdocMultiMutation, []byte{0, 0}, []byte{0xc8, 0, 0, 1, 0, 0, 0, 1, 'a', '1'}), einval, "Request extras invalid"},
		{"MULTI_LOOKUP spec truncated", req(memdx.OpSubdocMultiLookup, nil, []byte{0xc5, 0, 0}), einval, "Multi lookup spec truncated"},
		{"MULTI_LOOKUP path truncated", req(memdx.OpSubdocMultiLookup, nil, []byte{0xc5, 0, 0, 3, 'a'}), einval, "Multi lookup path truncated"},
		{"MULTI_MUTATION spec truncated", req(memdx.OpSubdocMultiMutation, nil, []byte{0xc8, 0, 0, 1, 0}), einval, "Multi mutation spec truncated"},
		{"MULTI_MUTATION value truncated", req(memdx.OpSubdocMultiMutation, nil, []byte{0xc8, 0, 0, 1, 0, 0, 0, 2, 'a', '1'}), einval, "Multi mutation path and value truncated"},
	})
}

// verify_header names the datatype bits the connection did not negotiate
// with cb::mcbp::datatype::to_string: lower case, snappy before json
// before xattr, comma-separated.
func TestDatatypeNotEnabledContext(t *testing.T) {
	c := newCluster(t, Options{Nodes: 1})
	cl := bootstrap(t, c.Node(0).Addr(), DefaultBucket, []memdx.HelloFeature{memdx.FeatureXerror, memdx.FeatureSelectBucket})
	set := func(dt memdx.Datatype) memdx.Request {
		return memdx.Request{OpCode: memdx.OpSet, Key: []byte("k"), Extras: make([]byte, 8), Value: []byte("1"), Datatype: dt}
	}
	einval := memdx.StatusInvalidArgs
	runKeyCases(t, cl, []keyCase{
		{"JSON", set(memdx.DatatypeJSON), einval, "Datatype (json) not enabled for the connection"},
		{"Snappy", set(memdx.DatatypeSnappy), einval, "Datatype (snappy) not enabled for the connection"},
		{"JSON and Snappy", set(memdx.DatatypeJSON | memdx.DatatypeSnappy), einval, "Datatype (snappy,json) not enabled for the connection"},
	})
}

// verify_header inflates a Snappy value before it reads the frame infos:
// one that does not inflate is EINVAL "Failed to inflate payload"
// (Cookie::inflateInputPayload), whatever frames follow.
func TestSnappyValueInflatedInHeader(t *testing.T) {
	c := newCluster(t, Options{Nodes: 1})
	cl := bootstrap(t, c.Node(0).Addr(), DefaultBucket, stdFeatures)
	bad := func(op memdx.OpCode, extras int, frames ...byte) memdx.Request {
		return memdx.Request{OpCode: op, Key: []byte{0, 'k'}, Extras: make([]byte, extras), Value: []byte{0xff, 0xff, 0xff}, Datatype: memdx.DatatypeSnappy, FramingExtras: frames}
	}
	einval := memdx.StatusInvalidArgs
	runKeyCases(t, cl, []keyCase{
		{"SET", bad(memdx.OpSet, 8), einval, "Failed to inflate payload"},
		{"APPEND", bad(memdx.OpAppend, 0), einval, "Failed to inflate payload"},
		{"SET unknown frame", bad(memdx.OpSet, 8, 0xe0), einval, "Failed to inflate payload"},
	})
}

// A single-path sub-document command's value is judged before its path
// flags and its xattr section (subdoc_validator): a missing or unwanted
// value is EINVAL even where the XATTR flag would be NOT_SUPPORTED on a
// connection without XATTR.
func TestSubdocSingleValueCheckedFirst(t *testing.T) {
	c := newCluster(t, Options{Nodes: 1})
	cl := bootstrap(t, c.Node(0).Addr(), DefaultBucket, []memdx.HelloFeature{memdx.FeatureXerror, memdx.FeatureSelectBucket})
	x := byte(memdx.SubdocPathXattr)
	req := func(op memdx.OpCode, flags byte, value string) memdx.Request {
		return memdx.Request{OpCode: op, Key: []byte("k"), Extras: []byte{0, 3, flags}, Value: []byte("a.b" + value)}
	}
	einval := memdx.StatusInvalidArgs
	runKeyCases(t, cl, []keyCase{
		{"DICT_UPSERT xattr without value", req(memdx.OpSubdocDictUpsert, x, ""), einval, "Request must include value"},
		{"GET xattr with value", req(memdx.OpSubdocGet, x, "1"), einval, "Request must not include value"},
		{"GET bad flag with value", req(memdx.OpSubdocGet, 0x80, "1"), einval, "Request must not include value"},
		{"GET xattr", req(memdx.OpSubdocGet, x, ""), memdx.StatusNotSupported, "Connection not XATTR enabled"},
	})
}

// A single-path lookup with an expiry in its extras is refused last
// (subdoc_validator checks the extras length after the xattr section), so
// an xattr path on a connection without XATTR answers NOT_SUPPORTED first.
func TestSubdocLookupExpiryCheckedLast(t *testing.T) {
	c := newCluster(t, Options{Nodes: 1})
	cl := bootstrap(t, c.Node(0).Addr(), DefaultBucket, []memdx.HelloFeature{memdx.FeatureXerror, memdx.FeatureSelectBucket})
	get := func(flags byte) memdx.Request {
		return memdx.Request{OpCode: memdx.OpSubdocGet, Key: []byte("k"), Extras: []byte{0, 3, flags, 0, 0, 0, 9}, Value: []byte("a.b")}
	}
	runKeyCases(t, cl, []keyCase{
		{"xattr", get(byte(memdx.SubdocPathXattr)), memdx.StatusNotSupported, "Connection not XATTR enabled"},
		{"body", get(0), memdx.StatusInvalidArgs, "Request extras invalid"},
	})
}

// A GETK that misses answers KEY_ENOENT carrying the request's key
// (GetCommandContext::noSuchItem sends the key when shouldSendKey), so a
// client matching GETK answers by key finds it.
func TestGetKMissCarriesKey(t *testing.T) {
	c := newCluster(t, Options{Nodes: 1})
	for _, tc := range []struct {
		name  string
		feats []memdx.HelloFeature
		key   []byte
	}{
		{"without collections", []memdx.HelloFeature{memdx.FeatureXerror, memdx.FeatureSelectBucket}, []byte("missing")},
		{"with collections", stdFeatures, []byte("\x00missing")},
	} {
		cl := bootstrap(t, c.Node(0).Addr(), DefaultBucket, tc.feats)
		p := cl.do(memdx.Request{OpCode: memdx.OpGetK, Key: tc.key})
		if p.Status != memdx.StatusKeyNotFound || string(p.Key) != string(tc.key) || len(p.Value) != 0 {
			t.Errorf("%s: GETK miss: %s key %q value %q, want KEY_ENOENT with key %q", tc.name, p.Status, p.Key, p.Value, tc.key)
		}
	}
}
