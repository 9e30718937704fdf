package memdx

import "testing"

// TestClientOpcodes pins the value and log name of every opcode a KV client
// needs (kv_engine include/mcbp/protocol/opcode.h).
func TestClientOpcodes(t *testing.T) {
	for _, tc := range []struct {
		op   OpCode
		num  uint8
		name string
	}{
		{OpGet, 0x00, "GET"}, {OpSet, 0x01, "SET"}, {OpAdd, 0x02, "ADD"}, {OpReplace, 0x03, "REPLACE"},
		{OpDelete, 0x04, "DELETE"}, {OpIncrement, 0x05, "INCREMENT"}, {OpDecrement, 0x06, "DECREMENT"},
		{OpQuit, 0x07, "QUIT"}, {OpFlush, 0x08, "FLUSH"}, {OpGetQ, 0x09, "GETQ"}, {OpNoop, 0x0a, "NOOP"},
		{OpVersion, 0x0b, "VERSION"}, {OpGetK, 0x0c, "GETK"}, {OpGetKQ, 0x0d, "GETKQ"},
		{OpAppend, 0x0e, "APPEND"}, {OpPrepend, 0x0f, "PREPEND"}, {OpStat, 0x10, "STAT"},
		{OpTouch, 0x1c, "TOUCH"}, {OpGAT, 0x1d, "GAT"}, {OpGATQ, 0x1e, "GATQ"}, {OpHello, 0x1f, "HELLO"},
		{OpSASLListMechs, 0x20, "SASL_LIST_MECHS"}, {OpSASLAuth, 0x21, "SASL_AUTH"}, {OpSASLStep, 0x22, "SASL_STEP"},
		{OpGetReplica, 0x83, "GET_REPLICA"}, {OpListBuckets, 0x87, "LIST_BUCKETS"},
		{OpSelectBucket, 0x89, "SELECT_BUCKET"}, {OpObserveSeqno, 0x91, "OBSERVE_SEQNO"},
		{OpObserve, 0x92, "OBSERVE"}, {OpGetLocked, 0x94, "GET_LOCKED"}, {OpUnlockKey, 0x95, "UNLOCK_KEY"},
		{OpGetMeta, 0xa0, "GET_META"}, {OpGetClusterConfig, 0xb5, "GET_CLUSTER_CONFIG"},
		{OpGetRandomKey, 0xb6, "GET_RANDOM_KEY"}, {OpCollectionsGetManifest, 0xba, "COLLECTIONS_GET_MANIFEST"},
		{OpCollectionsGetID, 0xbb, "COLLECTIONS_GET_ID"}, {OpCollectionsGetScopeID, 0xbc, "COLLECTIONS_GET_SCOPE_ID"},
		{OpSubdocGet, 0xc5, "SUBDOC_GET"}, {OpSubdocExists, 0xc6, "SUBDOC_EXISTS"},
		{OpSubdocDictAdd, 0xc7, "SUBDOC_DICT_ADD"}, {OpSubdocDictUpsert, 0xc8, "SUBDOC_DICT_UPSERT"},
		{OpSubdocDelete, 0xc9, "SUBDOC_DELETE"}, {OpSubdocReplace, 0xca, "SUBDOC_REPLACE"},
		{OpSubdocArrayPushLast, 0xcb, "SUBDOC_ARRAY_PUSH_LAST"}, {OpSubdocArrayPushFirst, 0xcc, "SUBDOC_ARRAY_PUSH_FIRST"},
		{OpSubdocArrayInsert, 0xcd, "SUBDOC_ARRAY_INSERT"}, {OpSubdocArrayAddUnique, 0xce, "SUBDOC_ARRAY_ADD_UNIQUE"},
		{OpSubdocCounter, 0xcf, "SUBDOC_COUNTER"}, {OpSubdocMultiLookup, 0xd0, "SUBDOC_MULTI_LOOKUP"},
		{OpSubdocMultiMutation, 0xd1, "SUBDOC_MULTI_MUTATION"}, {OpSubdocGetCount, 0xd2, "SUBDOC_GET_COUNT"},
		{OpSubdocReplaceBodyWithXattr, 0xd3, "SUBDOC_REPLACE_BODY_WITH_XATTR"},
		{OpGetErrorMap, 0xfe, "GET_ERROR_MAP"},
	} {
		if uint8(tc.op) != tc.num {
			t.Errorf("%s = 0x%02x, want 0x%02x", tc.name, uint8(tc.op), tc.num)
		}
		if tc.op.String() != tc.name || !tc.op.Known() {
			t.Errorf("OpCode(0x%02x).String() = %q (known %v), want %q", tc.num, tc.op.String(), tc.op.Known(), tc.name)
		}
	}
	if got := OpCode(0x77).String(); got != "OPCODE(0x77)" || OpCode(0x77).Known() {
		t.Errorf("unknown opcode String = %q", got)
	}
}

func TestServerOpcodes(t *testing.T) {
	if ServerOpClustermapChangeNotification != 0x01 || ServerOpClustermapChangeNotification.String() != "CLUSTERMAP_CHANGE_NOTIFICATION" {
		t.Errorf("ServerOpClustermapChangeNotification = 0x%02x %q", uint8(ServerOpClustermapChangeNotification), ServerOpClustermapChangeNotification)
	}
	if got := ServerOpCode(0x09).String(); got != "SERVER_OPCODE(0x09)" {
		t.Errorf("unknown server opcode String = %q", got)
	}
}

func TestQuietOpcodes(t *testing.T) {
	quiet := map[OpCode]bool{OpGetQ: true, OpGetKQ: true, OpSetQ: true, OpAddQ: true, OpReplaceQ: true,
		OpDeleteQ: true, OpIncrementQ: true, OpDecrementQ: true, OpQuitQ: true, OpFlushQ: true,
		OpAppendQ: true, OpPrependQ: true, OpGATQ: true, OpGetQMeta: true}
	for op := range 256 {
		if got := OpCode(op).IsQuiet(); got != quiet[OpCode(op)] {
			t.Errorf("%s.IsQuiet() = %v", OpCode(op), got)
		}
	}
}

func TestCollectionKeyOpcodes(t *testing.T) {
	for _, op := range []OpCode{OpGet, OpSet, OpDelete, OpGetReplica, OpGetLocked, OpUnlockKey, OpTouch, OpGAT,
		OpGetMeta, OpSubdocGet, OpSubdocMultiLookup, OpSubdocMultiMutation, OpIncrement, OpAppend, OpGetKeys} {
		if !op.HasCollectionKey() {
			t.Errorf("%s.HasCollectionKey() = false", op)
		}
	}
	for _, op := range []OpCode{OpHello, OpSASLAuth, OpSelectBucket, OpStat, OpNoop, OpGetClusterConfig,
		OpGetRandomKey, OpObserve, OpObserveSeqno, OpCollectionsGetID, OpGetErrorMap} {
		if op.HasCollectionKey() {
			t.Errorf("%s.HasCollectionKey() = true", op)
		}
	}
}

// TestHelloFeatures pins every feature kv_engine's feature.h defines.
func TestHelloFeatures(t *testing.T) {
	want := map[HelloFeature]string{
		0x01: "Datatype(retired)", 0x02: "TLS", 0x03: "TCPNODELAY", 0x04: "MutationSeqno", 0x05: "TCPDELAY",
		0x06: "XATTR", 0x07: "XERROR", 0x08: "SelectBucket", 0x09: "Invalid2", 0x0a: "Snappy", 0x0b: "JSON",
		0x0c: "Duplex", 0x0d: "ClustermapChangeNotification", 0x0e: "UnorderedExecution", 0x0f: "Tracing",
		0x10: "AltRequestSupport", 0x11: "SyncReplication", 0x12: "Collections", 0x13: "SnappyEverywhere",
		0x14: "PreserveTtl", 0x15: "VAttr", 0x16: "PiTR(retired)", 0x17: "SubdocCreateAsDeleted",
		0x18: "SubdocDocumentMacroSupport", 0x19: "SubdocReplaceBodyWithXattr", 0x1a: "ReportUnitUsage",
		0x1b: "NonBlockingThrottlingMode", 0x1c: "SubdocReplicaRead", 0x1d: "GetClusterConfigWithKnownVersion",
		0x1e: "DedupeNotMyVbucketClustermap", 0x1f: "ClustermapChangeNotificationBrief",
		0x20: "SubdocAllowsAccessOnMultipleXattrKeys", 0x21: "SubdocBinaryXattr", 0x22: "RangeScanIncludeXattr",
		0x23: "SubdocAllowReplicaReadOnDeletedDocs", 0x24: "GetRandomKeyIncludeXattr",
	}
	for f, name := range want {
		if f.String() != name {
			t.Errorf("HelloFeature(0x%02x).String() = %q, want %q", uint16(f), f.String(), name)
		}
	}
	if len(featureNames) != len(want) {
		t.Errorf("memdx names %d features, want %d", len(featureNames), len(want))
	}
	if got := HelloFeature(0x99).String(); got != "Feature(0x0099)" {
		t.Errorf("unknown feature String = %q", got)
	}
	for _, tc := range []struct {
		f HelloFeature
		n uint16
	}{{FeatureXerror, 0x07}, {FeatureSelectBucket, 0x08}, {FeatureSnappy, 0x0a}, {FeatureJSON, 0x0b},
		{FeatureDuplex, 0x0c}, {FeatureAltRequests, 0x10}, {FeatureSyncReplication, 0x11},
		{FeatureCollections, 0x12}, {FeaturePreserveTTL, 0x14}, {FeatureGetClusterConfigWithKnownVersion, 0x1d},
		{FeatureDedupeNotMyVbucketClustermap, 0x1e}, {FeatureClustermapChangeNotificationBrief, 0x1f}} {
		if uint16(tc.f) != tc.n {
			t.Errorf("%s = 0x%02x, want 0x%02x", tc.f, uint16(tc.f), tc.n)
		}
	}
}

func TestDatatype(t *testing.T) {
	for _, tc := range []struct {
		d     Datatype
		s     string
		valid bool
	}{
		{0, "raw", true}, {DatatypeJSON, "json", true}, {DatatypeSnappy | DatatypeJSON, "json|snappy", true},
		{DatatypeXattr | DatatypeSnappy | DatatypeJSON, "json|snappy|xattr", true},
		{0x08 | DatatypeJSON, "json|0x08", false},
	} {
		if tc.d.String() != tc.s || tc.d.Valid() != tc.valid {
			t.Errorf("Datatype(0x%02x): String %q Valid %v, want %q %v", uint8(tc.d), tc.d.String(), tc.d.Valid(), tc.s, tc.valid)
		}
	}
	if !(DatatypeJSON | DatatypeSnappy).Has(DatatypeSnappy) || DatatypeJSON.Has(DatatypeSnappy) {
		t.Error("Datatype.Has wrong")
	}
}

func TestMagicClassification(t *testing.T) {
	for _, tc := range []struct {
		m                         Magic
		req, res, server, framing bool
		name                      string
	}{
		{MagicReq, true, false, false, false, "REQ"},
		{MagicRes, false, true, false, false, "RES"},
		{MagicReqExt, true, false, false, true, "REQ_EXT"},
		{MagicResExt, false, true, false, true, "RES_EXT"},
		{MagicServerReq, true, false, true, false, "SERVER_REQ"},
		{MagicServerRes, false, true, true, false, "SERVER_RES"},
	} {
		if !tc.m.Valid() || tc.m.IsRequest() != tc.req || tc.m.IsResponse() != tc.res ||
			tc.m.IsServerInitiated() != tc.server || tc.m.HasFramingExtras() != tc.framing || tc.m.String() != tc.name {
			t.Errorf("magic 0x%02x classified wrong", uint8(tc.m))
		}
	}
	valid := 0
	for m := range 256 {
		if Magic(m).Valid() {
			valid++
		}
	}
	if valid != 6 {
		t.Errorf("%d valid magics, want 6", valid)
	}
	if Magic(0x17).String() != "MAGIC(0x17)" {
		t.Errorf("Magic(0x17).String() = %q", Magic(0x17).String())
	}
}
