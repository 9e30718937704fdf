package memdx

import (
	"bytes"
	"testing"
)

// testingAllocs reports the average allocations of f over 200 runs.
func testingAllocs(f func()) float64 { return testing.AllocsPerRun(200, f) }

var (
	benchKey   = []byte("airline_10")
	benchValue = bytes.Repeat([]byte(`{"a":1}`), 147) // ~1 KiB
)

// getResponse is a GET response as a server sends it with flexible framing:
// server duration, flags, a JSON value.
func getResponse(tb testing.TB) []byte {
	b, err := AppendPacket(nil, &Packet{Magic: MagicResExt, OpCode: OpGet, Datatype: DatatypeJSON,
		FramingExtras: []byte{0x02, 0x00, 0x09}, Extras: []byte{0x02, 0, 0, 0}, Value: benchValue, Opaque: 7, Cas: 99})
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// TestZeroAllocs pins the allocation facts the hot path relies on:
// encoding GET and SET requests into a buffer with room, and decoding a GET
// response, allocate nothing. (Timing is measured by the benchmarks, never
// asserted here.)
func TestZeroAllocs(t *testing.T) {
	buf := make([]byte, 0, 4096)
	get := NewGet(benchKey)
	get.Collections, get.CollectionID, get.Vbucket = true, 8, 41
	set := NewStore(OpSet, benchKey, benchValue, 0x02000000, 60)
	durable := set
	durable.Collections, durable.CollectionID = true, 0x1234
	durable.Durability, durable.DurabilityTimeout, durable.PreserveTTL = DurabilityMajority, 1500, true
	lookupOps := []SubdocLookupOp{{Op: OpSubdocGet, Path: []byte("a")}, {Op: OpSubdocExists, Flags: SubdocPathXattr, Path: []byte("$document")}}
	mutateOps := []SubdocMutateOp{{Op: OpSubdocDictUpsert, Path: []byte("a"), Value: []byte("1")}}
	resp := getResponse(t)
	results := make([]SubdocLookupResult, 0, 4)
	lookupBody := AppendSubdocLookupResult(AppendSubdocLookupResult(nil, StatusSuccess, []byte("1")), StatusSuccess, nil)

	for _, tc := range []struct {
		name string
		f    func()
	}{
		{"append GET", func() { buf, _ = get.AppendTo(buf[:0], 1) }},
		{"append SET", func() { buf, _ = set.AppendTo(buf[:0], 1) }},
		{"append durable SET with collection and preserve-TTL", func() { buf, _ = durable.AppendTo(buf[:0], 1) }},
		{"build and append GET", func() { r := NewGet(benchKey); buf, _ = r.AppendTo(buf[:0], 1) }},
		{"build and append SET", func() {
			r := NewStore(OpSet, benchKey, benchValue, 0, 0)
			buf, _ = r.AppendTo(buf[:0], 1)
		}},
		{"build and append counter", func() {
			r := NewCounter(OpIncrement, benchKey, 1, 0, 0)
			buf, _ = r.AppendTo(buf[:0], 1)
		}},
		{"build and append OBSERVE_SEQNO", func() { r := NewObserveSeqno(1, 2); buf, _ = r.AppendTo(buf[:0], 1) }},
		{"build and append GET_ERROR_MAP", func() { r := NewGetErrorMap(2); buf, _ = r.AppendTo(buf[:0], 1) }},
		{"build and append known-version GET_CLUSTER_CONFIG", func() {
			r := NewGetClusterConfigKnown(1, 2)
			buf, _ = r.AppendTo(buf[:0], 1)
		}},
		{"build and append subdoc lookup", func() {
			r := NewSubdocLookup(OpSubdocGet, benchKey, []byte("a.b"), 0, 0)
			buf, _ = r.AppendTo(buf[:0], 1)
		}},
		{"build and append SUBDOC_MULTI_LOOKUP", func() {
			r := NewSubdocMultiLookup(benchKey, SubdocDocAccessDeleted, lookupOps)
			buf, _ = r.AppendTo(buf[:0], 1)
		}},
		{"build and append SUBDOC_MULTI_MUTATION", func() {
			r := NewSubdocMultiMutation(benchKey, 0, 10, mutateOps)
			buf, _ = r.AppendTo(buf[:0], 1)
		}},
		{"decode GET response", func() {
			p, _, err := DecodePacket(resp, 0)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := DecodeGetFlags(&p); err != nil {
				t.Fatal(err)
			}
			if _, ok := p.ServerDuration(); !ok {
				t.Fatal("no server duration")
			}
			if _, ok := p.ServerDurationEncoded(); !ok {
				t.Fatal("no server duration")
			}
		}},
		{"decode SUBDOC_MULTI_LOOKUP results", func() { results, _ = DecodeSubdocMultiLookup(lookupBody, results[:0]) }},
		{"split collection key", func() { _, _, _ = SplitCollectionKey([]byte{0x88, 0x01, 'k'}) }},
	} {
		if n := testingAllocs(tc.f); n != 0 {
			t.Errorf("%s: %v allocations per run, want 0", tc.name, n)
		}
	}
}
