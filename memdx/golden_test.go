package memdx

import (
	"bufio"
	"bytes"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// readGolden parses testdata/golden/<name>: "== case" headers, hex byte
// pairs, "Go-quoted strings" and '#' comments.
func readGolden(t testing.TB, name string) map[string][]byte {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", "golden", name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string][]byte{}
	var cur string
	sc := bufio.NewScanner(f)
	for ln := 1; sc.Scan(); ln++ {
		line := sc.Text()
		if rest, ok := strings.CutPrefix(line, "== "); ok {
			cur = strings.TrimSpace(rest)
			if _, dup := out[cur]; dup {
				t.Fatalf("%s:%d: case %q twice", name, ln, cur)
			}
			out[cur] = []byte{}
			continue
		}
		for i := 0; i < len(line); {
			c := line[i]
			switch {
			case c == '#':
				i = len(line)
			case c == ' ' || c == '\t':
				i++
			case c == '"':
				j := i + 1
				for ; j < len(line) && line[j] != '"'; j++ {
					if line[j] == '\\' {
						j++
					}
				}
				s, err := strconv.Unquote(line[i : j+1])
				if err != nil {
					t.Fatalf("%s:%d: bad string %s: %v", name, ln, line[i:min(j+1, len(line))], err)
				}
				if cur == "" {
					t.Fatalf("%s:%d: bytes before the first case", name, ln)
				}
				out[cur] = append(out[cur], s...)
				i = j + 1
			default:
				if i+1 >= len(line) {
					t.Fatalf("%s:%d: odd hex digit at column %d", name, ln, i+1)
				}
				v, err := strconv.ParseUint(line[i:i+2], 16, 8)
				if err != nil {
					t.Fatalf("%s:%d: bad hex %q", name, ln, line[i:i+2])
				}
				if cur == "" {
					t.Fatalf("%s:%d: bytes before the first case", name, ln)
				}
				out[cur] = append(out[cur], byte(v))
				i += 2
			}
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

type goldenRequest struct {
	name    string
	builder string // the New* function the case exercises
	opaque  uint32
	req     func() Request
}

func withVbucket(r Request, vb uint16) Request { r.Vbucket = vb; return r }

var goldenRequests = []goldenRequest{
	{"get", "NewGet", 0x11223344, func() Request { return withVbucket(NewGet([]byte("Hello")), 0x0102) }},
	{"get_replica", "NewGetReplica", 0x11223344, func() Request { return withVbucket(NewGetReplica([]byte("Hello")), 0x0102) }},
	{"set_json_cas", "NewStore", 0x11223344, func() Request {
		r := withVbucket(NewStore(OpSet, []byte("Hello"), []byte(`{"x":1}`), 0x02000000, 300), 0x0102)
		r.Datatype, r.Cas = DatatypeJSON, 0xabcdef
		return r
	}},
	{"add", "NewStore", 0x11223344, func() Request { return NewStore(OpAdd, []byte("k"), []byte("v"), 0, 0) }},
	{"replace", "NewStore", 0x11223344, func() Request {
		r := NewStore(OpReplace, []byte("k"), []byte("v"), 7, 3600)
		r.Cas = 9
		return r
	}},
	{"delete_cas", "NewDelete", 0x11223344, func() Request {
		r := withVbucket(NewDelete([]byte("Hello")), 0x0102)
		r.Cas = 5
		return r
	}},
	{"append", "NewConcat", 0x11223344, func() Request { return NewConcat(OpAppend, []byte("Hello"), []byte("!")) }},
	{"prepend", "NewConcat", 0x11223344, func() Request { return NewConcat(OpPrepend, []byte("k"), []byte("<")) }},
	{"decrement_nocreate", "NewCounter", 0x11223344, func() Request { return NewCounter(OpDecrement, []byte("c"), 16, 100, NoCreate) }},
	{"touch", "NewTouch", 0x11223344, func() Request { return NewTouch([]byte("k"), 10) }},
	{"gat", "NewGAT", 0x11223344, func() Request { return NewGAT([]byte("k"), 0) }},
	{"get_locked", "NewGetLocked", 0x11223344, func() Request { return NewGetLocked([]byte("k"), 15) }},
	{"unlock", "NewUnlock", 0x11223344, func() Request { return NewUnlock([]byte("k"), 0x1122334455667788) }},
	{"get_meta", "NewGetMeta", 0x11223344, func() Request { return NewGetMeta([]byte("k")) }},
	{"observe_seqno", "NewObserveSeqno", 0x11223344, func() Request { return NewObserveSeqno(0x0203, 0x0102030405060708) }},
	{"observe", "NewObserve", 0x11223344, func() Request {
		return NewObserve([]ObserveKey{{Vbucket: 1, Key: []byte("ab")}, {Vbucket: 0x0203, Key: []byte("c")}})
	}},
	{"noop", "NewNoop", 0x11223344, NewNoop},
	{"version", "NewVersion", 0x11223344, NewVersion},
	{"stat_group", "NewStat", 0x11223344, func() Request { return NewStat([]byte("vbucket-seqno")) }},
	{"flush", "NewFlush", 0x11223344, NewFlush},
	{"quit", "NewQuit", 0x11223344, NewQuit},
	{"hello", "NewHello", 0x11223344, func() Request {
		return NewHello(HelloKey("kvwire/0.1", "0123456789abcdef/0000000000000001"),
			[]HelloFeature{FeatureXerror, FeatureSelectBucket, FeatureCollections, FeatureAltRequests, FeatureDuplex})
	}},
	{"sasl_list_mechs", "NewSASLListMechs", 0x11223344, NewSASLListMechs},
	{"sasl_auth", "NewSASLAuth", 0x11223344, func() Request { return NewSASLAuth(MechScramSHA512, []byte("n,,n=u,r=abc")) }},
	{"sasl_step", "NewSASLStep", 0x11223344, func() Request { return NewSASLStep(MechPlain, []byte("x")) }},
	{"select_bucket", "NewSelectBucket", 0x11223344, func() Request { return NewSelectBucket("default") }},
	{"get_cluster_config", "NewGetClusterConfig", 0x11223344, NewGetClusterConfig},
	{"get_cluster_config_known", "NewGetClusterConfigKnown", 0x11223344, func() Request { return NewGetClusterConfigKnown(-1, 42) }},
	{"get_random_key", "NewGetRandomKey", 0x11223344, func() Request { return NewGetRandomKey(false, 0) }},
	{"get_random_key_collection", "NewGetRandomKey", 0x11223344, func() Request { return NewGetRandomKey(true, 8) }},
	{"get_random_key_xattrs", "NewGetRandomKeyWithXattrs", 0x11223344, func() Request { return NewGetRandomKeyWithXattrs(0) }},
	{"collections_get_manifest", "NewCollectionsGetManifest", 0x11223344, NewCollectionsGetManifest},
	{"collections_get_id", "NewCollectionsGetID", 0x11223344, func() Request { return NewCollectionsGetID("inventory", "airline") }},
	{"get_error_map", "NewGetErrorMap", 0x11223344, func() Request { return NewGetErrorMap(2) }},
	{"subdoc_get_xattr", "NewSubdocLookup", 0x11223344, func() Request {
		return NewSubdocLookup(OpSubdocGet, []byte("doc"), []byte("a.b"), SubdocPathXattr, 0)
	}},
	{"subdoc_exists_access_deleted", "NewSubdocLookup", 0x11223344, func() Request {
		return NewSubdocLookup(OpSubdocExists, []byte("doc"), []byte("x"), 0, SubdocDocAccessDeleted)
	}},
	{"subdoc_dict_upsert_doc_example", "NewSubdocMutation", 0xfee5, func() Request {
		r := NewSubdocMutation(OpSubdocDictUpsert, []byte("user:hugo_chavez"), []byte("games.revolution.rank"),
			[]byte("Comandante"), SubdocPathMkdirP, 0, 0)
		r.Vbucket, r.Cas = 668, 0xdeadbeef
		return r
	}},
	{"subdoc_counter_expiry_mkdoc", "NewSubdocMutation", 0x11223344, func() Request {
		return NewSubdocMutation(OpSubdocCounter, []byte("k"), []byte("n"), []byte("5"), SubdocPathMkdirP, SubdocDocMkdoc, 60)
	}},
	{"subdoc_multi_lookup_doc_example", "NewSubdocMultiLookup", 0xfee5, func() Request {
		r := NewSubdocMultiLookup([]byte("u:1234"), 0, []SubdocLookupOp{
			{Op: OpSubdocGet, Path: []byte("from")}, {Op: OpSubdocGet, Path: []byte("to")},
			{Op: OpSubdocExists, Path: []byte("bcc")}, {Op: OpSubdocGet, Path: []byte("subject")},
			{Op: OpSubdocExists, Path: []byte("body")},
		})
		// The doc example sends an explicit zero doc-flags byte; the builder
		// leaves zero flags out, raw Extras put it back.
		r.Extras = []byte{0}
		r.Vbucket, r.Cas = 668, 0xdeadbeef
		return r
	}},
	{"subdoc_multi_lookup", "NewSubdocMultiLookup", 0x11223344, func() Request {
		return NewSubdocMultiLookup([]byte("doc"), SubdocDocReplicaRead, []SubdocLookupOp{
			{Op: OpSubdocGet, Flags: SubdocPathXattr, Path: []byte("$document.CAS")},
			{Op: OpGet},
		})
	}},
	{"subdoc_multi_mutation_durable", "NewSubdocMultiMutation", 0x11223344, func() Request {
		r := NewSubdocMultiMutation([]byte("doc"), SubdocDocMkdoc, 60, []SubdocMutateOp{
			{Op: OpSubdocDictUpsert, Flags: SubdocPathMkdirP, Path: []byte("a.b"), Value: []byte("1")},
			{Op: OpSubdocDelete, Path: []byte("c")},
			{Op: OpSubdocCounter, Path: []byte("n"), Value: []byte("-2")},
		})
		r.Cas, r.Durability = 7, DurabilityMajority
		return r
	}},
	{"collection_get", "NewGet", 0x11223344, func() Request {
		r := NewGet([]byte("k"))
		r.Collections, r.CollectionID = true, 8
		return r
	}},
	{"collection_set_big_id", "NewStore", 0x11223344, func() Request {
		r := NewStore(OpSet, []byte("k"), []byte("v"), 0, 0)
		r.Collections, r.CollectionID = true, 0x1234567
		return r
	}},
	{"collection_not_on_select_bucket", "NewSelectBucket", 0x11223344, func() Request {
		r := NewSelectBucket("b")
		r.Collections, r.CollectionID = true, 8
		return r
	}},
	{"durability_timeout", "NewStore", 0x11223344, func() Request {
		r := NewStore(OpSet, []byte("k"), []byte("v"), 0, 0)
		r.Durability, r.DurabilityTimeout = DurabilityPersistToMajority, 5000
		return r
	}},
	{"preserve_ttl", "NewStore", 0x11223344, func() Request {
		r := NewStore(OpReplace, []byte("k"), []byte("v"), 0, 0)
		r.PreserveTTL = true
		return r
	}},
	{"frames_and_collection", "NewDelete", 0x11223344, func() Request {
		r := NewDelete([]byte("k"))
		r.Durability, r.PreserveTTL = DurabilityMajority, true
		r.FramingExtras, _ = AppendFrameInfo(nil, uint16(FrameImpersonateUser), []byte("bob"))
		r.Collections, r.CollectionID = true, 0x80
		return r
	}},
	{"range_scan_create_doc_example", "NewRangeScanCreate", 0x11223344, func() Request {
		return withVbucket(mustCreate(&RangeScanCreate{CollectionID: 0xf2, KeyOnly: true,
			Range:    &RangeScanRange{Start: []byte("user"), End: []byte("user\xff")},
			Snapshot: &RangeScanSnapshot{VbUUID: 16627788222, Seqno: 1000, TimeoutMs: 2000}}), 0x0203)
	}},
	{"range_scan_create_sampling", "NewRangeScanCreate", 0x11223344, func() Request {
		return mustCreate(&RangeScanCreate{CollectionID: 0xf2, Sampling: &RangeScanSampling{Samples: 512, Seed: 18111}})
	}},
	{"range_scan_create_exclusive_named", "NewRangeScanCreate", 0x11223344, func() Request {
		return withVbucket(mustCreate(&RangeScanCreate{Name: "n",
			Range: &RangeScanRange{Start: []byte("a"), ExclusiveStart: true, End: []byte("b"), ExclusiveEnd: true}}), 0x03ff)
	}},
	{"range_scan_continue", "NewRangeScanContinue", 0x11223344, func() Request {
		return withVbucket(NewRangeScanContinue(RangeScanContinue{ID: goldenScanID, ItemLimit: 500, ByteLimit: 4096}), 0x0203)
	}},
	{"range_scan_cancel", "NewRangeScanCancel", 0x11223344, func() Request {
		return withVbucket(NewRangeScanCancel(goldenScanID), 0x0203)
	}},
}

// TestGoldenRequests encodes every case of testdata/golden/requests.txt with
// its builder (encode == golden, EncodedLen exact, twice the same bytes,
// appended after existing bytes) and decodes the golden bytes back to the
// request's fields.
func TestGoldenRequests(t *testing.T) {
	golden := readGolden(t, "requests.txt")
	seen := map[string]bool{}
	for _, gr := range goldenRequests {
		t.Run(gr.name, func(t *testing.T) {
			want, ok := golden[gr.name]
			if !ok {
				t.Fatalf("no golden bytes for %q", gr.name)
			}
			seen[gr.name] = true
			r := gr.req()
			got, err := r.AppendTo(nil, gr.opaque)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("encoded\n%s\nwant\n%s", hexDump(got), hexDump(want))
			}
			if n := r.EncodedLen(); n != len(want) {
				t.Errorf("EncodedLen %d, want %d", n, len(want))
			}
			again, _ := r.AppendTo([]byte("xyz"), gr.opaque)
			if string(again[:3]) != "xyz" || !bytes.Equal(again[3:], want) {
				t.Error("re-encoding after existing bytes differs")
			}
			checkDecodesTo(t, want, &r, gr.opaque)
		})
	}
	for name := range golden {
		if !seen[name] {
			t.Errorf("golden case %q has no builder in goldenRequests", name)
		}
	}
}

// checkDecodesTo decodes golden bytes and compares every field with r.
func checkDecodesTo(t *testing.T, b []byte, r *Request, opaque uint32) {
	t.Helper()
	p, err := decodeWhole(b)
	if err != nil {
		t.Fatal(err)
	}
	hasFrames := r.frameInfosLen() > 0 || len(r.FramingExtras) > 0
	if hasFrames != (p.Magic == MagicReqExt) || !p.Magic.IsRequest() {
		t.Errorf("magic %s with frames=%v", p.Magic, hasFrames)
	}
	if p.OpCode != r.OpCode || p.Vbucket != r.Vbucket || p.Cas != r.Cas || p.Datatype != r.Datatype || p.Opaque != opaque {
		t.Errorf("header fields %s vb %d cas %d dt %s opaque %x", p.OpCode, p.Vbucket, p.Cas, p.Datatype, p.Opaque)
	}
	if !bytes.Equal(p.Extras, r.ExtrasBytes()) {
		t.Errorf("extras %x, want %x", p.Extras, r.ExtrasBytes())
	}
	key := p.Key
	if r.collectionPrefix() {
		cid, k, err := SplitCollectionKey(p.Key)
		if err != nil || cid != r.CollectionID {
			t.Errorf("collection prefix: %d, %v; want %d", cid, err, r.CollectionID)
		}
		key = k
	}
	if !bytes.Equal(key, r.Key) {
		t.Errorf("key %q, want %q", key, r.Key)
	}
	// Frame infos: the typed ones first, then the caller's.
	var level DurabilityLevel
	var timeout uint16
	preserve := false
	var rest []byte
	err = FrameInfos(p.FramingExtras, func(id uint16, data []byte) error {
		switch RequestFrameID(id) {
		case FrameDurability:
			var err error
			level, timeout, err = DecodeDurabilityFrame(data)
			return err
		case FramePreserveTTL:
			preserve = len(data) == 0
		default:
			rest, _ = AppendFrameInfo(rest, id, data)
		}
		return nil
	})
	if err != nil || level != r.Durability || timeout != r.DurabilityTimeout || preserve != r.PreserveTTL || !bytes.Equal(rest, r.FramingExtras) {
		t.Errorf("frames: level %s timeout %d preserve %v other %x err %v", level, timeout, preserve, rest, err)
	}
	switch {
	case r.OpCode >= OpSubdocGet && r.OpCode <= OpSubdocReplaceBodyWithXattr:
		sd, err := DecodeSubdocRequest(&p)
		if err != nil {
			t.Fatalf("DecodeSubdocRequest: %v", err)
		}
		checkSubdoc(t, &sd, r)
	default:
		if !bytes.Equal(p.Value, r.ValueBytes()) {
			t.Errorf("value %q, want %q", p.Value, r.ValueBytes())
		}
	}
	// Builder-specific decoders.
	switch r.OpCode {
	case OpGetClusterConfig:
		v, ok, err := DecodeClusterConfigKnown(p.Extras)
		if err != nil || ok != (len(r.ExtrasBytes()) == 16) || (ok && (v.Epoch != -1 || v.Revision != 42)) {
			t.Errorf("DecodeClusterConfigKnown = %+v %v %v", v, ok, err)
		}
	case OpRangeScanCreate:
		c, err := DecodeRangeScanCreateValue(p.Value)
		if err != nil {
			t.Fatalf("DecodeRangeScanCreateValue: %v", err)
		}
		again, err := AppendRangeScanCreateValue(nil, &c)
		if err != nil || !bytes.Equal(again, p.Value) {
			t.Errorf("create value decodes and re-encodes as %s (%v)", again, err)
		}
	case OpRangeScanContinue:
		c, err := DecodeRangeScanContinueRequest(&p)
		if err != nil || c.ID != goldenScanID || c.ItemLimit != 500 || c.TimeLimitMs != 0 || c.ByteLimit != 4096 {
			t.Errorf("DecodeRangeScanContinueRequest = %+v, %v", c, err)
		}
	case OpRangeScanCancel:
		id, err := DecodeRangeScanCancelRequest(&p)
		if err != nil || id != goldenScanID {
			t.Errorf("DecodeRangeScanCancelRequest = %x, %v", id, err)
		}
	case OpHello:
		agent, id := DecodeHelloKey(p.Key)
		f, err := DecodeHelloFeatures(p.Value)
		if agent != "kvwire/0.1" || id != "0123456789abcdef/0000000000000001" || err != nil || len(f) != 5 || f[2] != FeatureCollections {
			t.Errorf("HELLO decoded to %q %q %v %v", agent, id, f, err)
		}
	}
}

func checkSubdoc(t *testing.T, sd *SubdocRequest, r *Request) {
	t.Helper()
	if !bytes.Equal(sd.Path, r.subdocPath) || !bytes.Equal(sd.Value, r.Value) {
		t.Errorf("subdoc path %q value %q, want %q %q", sd.Path, sd.Value, r.subdocPath, r.Value)
	}
	if len(sd.Lookups) != len(r.lookups) || len(sd.Mutations) != len(r.mutations) {
		t.Fatalf("subdoc specs: %d lookups %d mutations, want %d %d", len(sd.Lookups), len(sd.Mutations), len(r.lookups), len(r.mutations))
	}
	for i, l := range r.lookups {
		g := sd.Lookups[i]
		if g.Op != l.Op || g.Flags != l.Flags || !bytes.Equal(g.Path, l.Path) {
			t.Errorf("lookup spec %d = %+v, want %+v", i, g, l)
		}
	}
	for i, m := range r.mutations {
		g := sd.Mutations[i]
		if g.Op != m.Op || g.Flags != m.Flags || !bytes.Equal(g.Path, m.Path) || !bytes.Equal(g.Value, m.Value) {
			t.Errorf("mutation spec %d = %+v, want %+v", i, g, m)
		}
	}
}

func hexDump(b []byte) string {
	var sb strings.Builder
	for i := 0; i < len(b); i += 24 {
		fmt.Fprintf(&sb, "%04x  %x\n", i, b[i:min(i+24, len(b))])
	}
	return sb.String()
}

// TestEveryBuilderHasGoldenBytes parses the package's sources and requires a
// golden case for every exported New* function that returns a Request.
func TestEveryBuilderHasGoldenBytes(t *testing.T) {
	covered := map[string]bool{}
	for _, gr := range goldenRequests {
		covered[gr.builder] = true
	}
	fset := token.NewFileSet()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		af, err := parser.ParseFile(fset, f, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range af.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Recv != nil || !strings.HasPrefix(fd.Name.Name, "New") || fd.Type.Results == nil {
				continue
			}
			if id, ok := fd.Type.Results.List[0].Type.(*ast.Ident); !ok || id.Name != "Request" {
				continue
			}
			n++
			if !covered[fd.Name.Name] {
				t.Errorf("builder %s has no golden request case", fd.Name.Name)
			}
		}
	}
	if n < 30 {
		t.Fatalf("found only %d builders; the source scan is broken", n)
	}
}
