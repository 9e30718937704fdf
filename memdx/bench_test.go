package memdx

import "testing"

// Benchmarks: `go test -run='^$' -bench=. -benchmem ./memdx`. The
// zero-allocation facts are asserted by TestZeroAllocs; these measure time.

func BenchmarkAppendGet(b *testing.B) {
	buf := make([]byte, 0, 256)
	r := NewGet(benchKey)
	r.Collections, r.CollectionID, r.Vbucket = true, 8, 41
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		buf, _ = r.AppendTo(buf[:0], uint32(i))
	}
	b.SetBytes(int64(len(buf)))
}

func BenchmarkAppendSet(b *testing.B) {
	buf := make([]byte, 0, 2048)
	r := NewStore(OpSet, benchKey, benchValue, 0x02000000, 0)
	r.Datatype = DatatypeJSON
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		buf, _ = r.AppendTo(buf[:0], uint32(i))
	}
	b.SetBytes(int64(len(buf)))
}

// BenchmarkAppendSetDurable adds a collection prefix, a durability frame
// with a timeout and preserve-TTL: the flexible-framing path.
func BenchmarkAppendSetDurable(b *testing.B) {
	buf := make([]byte, 0, 2048)
	r := NewStore(OpSet, benchKey, benchValue, 0x02000000, 0)
	r.Collections, r.CollectionID = true, 0x1234
	r.Durability, r.DurabilityTimeout, r.PreserveTTL = DurabilityMajority, 1500, true
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		buf, _ = r.AppendTo(buf[:0], uint32(i))
	}
	b.SetBytes(int64(len(buf)))
}

// BenchmarkBuildAndAppendGet builds the request each time, as a client does
// per operation.
func BenchmarkBuildAndAppendGet(b *testing.B) {
	buf := make([]byte, 0, 256)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		r := NewGet(benchKey)
		r.Collections, r.CollectionID, r.Vbucket = true, 8, uint16(i)
		buf, _ = r.AppendTo(buf[:0], uint32(i))
	}
}

func BenchmarkAppendSubdocMultiLookup(b *testing.B) {
	buf := make([]byte, 0, 512)
	ops := []SubdocLookupOp{
		{Op: OpSubdocGet, Flags: SubdocPathXattr, Path: []byte("$document.CAS")},
		{Op: OpSubdocGet, Path: []byte("name")},
		{Op: OpSubdocExists, Path: []byte("address.city")},
	}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		r := NewSubdocMultiLookup(benchKey, 0, ops)
		buf, _ = r.AppendTo(buf[:0], uint32(i))
	}
}

func BenchmarkDecodeHeader(b *testing.B) {
	resp := getResponse(b)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := DecodeHeader(resp, 0); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDecodeGetResponse decodes a GET response with framing extras,
// reads the flags and the server duration.
func BenchmarkDecodeGetResponse(b *testing.B) {
	resp := getResponse(b)
	b.ReportAllocs()
	b.SetBytes(int64(len(resp)))
	for b.Loop() {
		p, _, err := DecodePacket(resp, 0)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := DecodeGetFlags(&p); err != nil {
			b.Fatal(err)
		}
		if _, ok := p.ServerDuration(); !ok {
			b.Fatal("no server duration")
		}
	}
}

func BenchmarkDecodeSubdocMultiLookup(b *testing.B) {
	var body []byte
	for range 8 {
		body = AppendSubdocLookupResult(body, StatusSuccess, []byte(`"some value"`))
	}
	res := make([]SubdocLookupResult, 0, 16)
	b.ReportAllocs()
	for b.Loop() {
		res, _ = DecodeSubdocMultiLookup(body, res[:0])
	}
}

func BenchmarkDecompressSnappy(b *testing.B) {
	c := CompressSnappy(nil, benchValue)
	dst := make([]byte, 0, len(benchValue))
	b.ReportAllocs()
	b.SetBytes(int64(len(benchValue)))
	for b.Loop() {
		if _, err := DecompressSnappy(dst, c, 0); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkScramSHA512Exchange(b *testing.B) {
	keys, _ := DeriveScramKeys(MechScramSHA512, "password", []byte("0123456789abcdef"), 4096)
	b.ReportAllocs()
	for b.Loop() {
		c, _ := NewScramClient(MechScramSHA512, "user", "password", nil)
		s, _ := NewScramServer(MechScramSHA512, func(string) (ScramKeys, bool) { return keys, true }, nil)
		first, _ := s.ServerFirst(c.ClientFirst())
		final, _ := c.ClientFinal(first)
		sf, err := s.ServerFinal(final)
		if err != nil || c.VerifyServerFinal(sf) != nil {
			b.Fatal(err)
		}
	}
}
