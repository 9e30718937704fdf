package memdx

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"slices"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/kvwire/kvwire/internal/kverr"
)

// Fuzz targets: one per decoder. Each is seeded from the conformance packets
// when /work/shared/conformance is present, from the hand-written golden
// requests, and from the corpus committed in testdata/fuzz/<FuzzName>/, so
// `go test ./memdx` runs every seed. Each checks properties, not only the
// absence of panics: what decodes re-encodes to the same bytes, and errors
// are the documented kinds.

// goldenSeeds returns every golden request's bytes.
func goldenSeeds(tb testing.TB) [][]byte {
	var out [][]byte
	g := readGolden(tb, "requests.txt")
	for _, gr := range goldenRequests {
		out = append(out, g[gr.name])
	}
	return out
}

// responseSeeds are hand-made responses covering the op-specific decoders.
func responseSeeds() [][]byte {
	enc := func(p Packet) []byte { b, _ := AppendPacket(nil, &p); return b }
	snappyJSON := CompressSnappy(nil, []byte(`{"a":"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"}`))
	lookup := AppendSubdocLookupResult(nil, StatusSuccess, []byte(`"v"`))
	lookup = AppendSubdocLookupResult(lookup, StatusSubdocPathNotFound, nil)
	mutate := AppendSubdocMutateResult(nil, 2, StatusSuccess, []byte("7"))
	return [][]byte{
		enc(Packet{Magic: MagicRes, OpCode: OpGet, Extras: []byte{2, 0, 0, 0}, Value: []byte(`{"x":1}`), Cas: 9, Datatype: DatatypeJSON}),
		enc(Packet{Magic: MagicResExt, OpCode: OpGet, FramingExtras: []byte{0x02, 0x00, 0x09}, Extras: []byte{2, 0, 0, 0},
			Value: snappyJSON, Datatype: DatatypeJSON | DatatypeSnappy}),
		enc(Packet{Magic: MagicRes, OpCode: OpSet, Extras: make([]byte, 16), Cas: 1}),
		enc(Packet{Magic: MagicRes, OpCode: OpIncrement, Value: make([]byte, 8)}),
		enc(Packet{Magic: MagicRes, OpCode: OpSet, Status: StatusLocked, Datatype: DatatypeJSON,
			Value: []byte(`{"error":{"context":"locked","ref":"r"}}`)}),
		enc(Packet{Magic: MagicRes, OpCode: OpCollectionsGetID, Extras: make([]byte, 12)}),
		enc(Packet{Magic: MagicServerReq, ServerOpCode: ServerOpClustermapChangeNotification, Key: []byte("b"),
			Extras: make([]byte, 16), Value: []byte(`{"rev":1}`)}),
		enc(Packet{Magic: MagicRes, OpCode: OpGetMeta, Extras: make([]byte, 21)}),
		enc(Packet{Magic: MagicRes, OpCode: OpObserveSeqno, Value: make([]byte, 43)}),
		enc(Packet{Magic: MagicRes, OpCode: OpObserve, Value: unhex("00010002616201000000000000000700")}),
		enc(Packet{Magic: MagicRes, OpCode: OpHello, Value: []byte{0, 7, 0, 0x12}}),
		enc(Packet{Magic: MagicRes, OpCode: OpSubdocMultiLookup, Value: lookup}),
		enc(Packet{Magic: MagicRes, OpCode: OpSubdocMultiMutation, Value: mutate}),
		enc(Packet{Magic: MagicRes, OpCode: OpStat, Key: []byte("pid"), Value: []byte("1")}),
		enc(Packet{Magic: MagicRes, OpCode: OpRangeScanCreate, Value: unhex("00112233445566778899aabbccddeeff")}),
		enc(Packet{Magic: MagicRes, OpCode: OpRangeScanContinue, Status: StatusRangeScanMore, Extras: []byte{0, 0, 0, 0},
			Value: unhex("046b657930056b65793131")}),
	}
}

// unhex decodes a constant hex string (the seeds are literals).
func unhex(s string) []byte {
	b, err := hex.DecodeString(s)
	if err != nil {
		panic(err)
	}
	return b
}

// addPacketSeeds adds the conformance packets (when the corpus is present);
// the hand-made seeds are in testdata/fuzz (fuzzSeeds).
func addPacketSeeds(f *testing.F) {
	for _, b := range conformanceSeeds(f) {
		f.Add(b)
	}
}

func checkErrKind(t *testing.T, err error) {
	t.Helper()
	if !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrShortBuffer) {
		t.Fatalf("error is neither ErrMalformed nor ErrShortBuffer: %v", err)
	}
	var de *DecodeError
	if errors.Is(err, ErrMalformed) && (!errors.As(err, &de) || de.Field == "") {
		t.Fatalf("malformed error names no field: %v", err)
	}
}

func FuzzDecodeHeader(f *testing.F) {
	addPacketSeeds(f)
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, limit := range []uint32{0, 100} {
			h, err := DecodeHeader(b, limit)
			if err != nil {
				checkErrKind(t, err)
				if errors.Is(err, ErrShortBuffer) != (len(b) < HeaderSize) {
					t.Fatalf("short-buffer error for %d bytes: %v", len(b), err)
				}
				continue
			}
			max := limit
			if max == 0 {
				max = DefaultMaxBodyLength
			}
			if !h.Magic.Valid() || h.BodyLen > max ||
				uint32(h.FramingExtrasLen)+uint32(h.ExtrasLen)+uint32(h.KeyLen) > h.BodyLen {
				t.Fatalf("accepted an inconsistent header %+v", h)
			}
			if !h.Magic.HasFramingExtras() && h.FramingExtrasLen != 0 {
				t.Fatalf("framing extras on magic %s", h.Magic)
			}
			if n, err := PacketSize(b, limit); err != nil || n != HeaderSize+int(h.BodyLen) {
				t.Fatalf("PacketSize %d, %v", n, err)
			}
		}
	})
}

func FuzzDecodePacket(f *testing.F) {
	addPacketSeeds(f)
	f.Fuzz(func(t *testing.T, b []byte) {
		p, n, err := DecodePacket(b, 0)
		if err != nil {
			checkErrKind(t, err)
			return
		}
		if n < HeaderSize || n > len(b) {
			t.Fatalf("consumed %d of %d", n, len(b))
		}
		if got := HeaderSize + len(p.FramingExtras) + len(p.Extras) + len(p.Key) + len(p.Value); got != n {
			t.Fatalf("sections add up to %d, packet is %d", got, n)
		}
		again, err := AppendPacket(nil, &p)
		if err != nil {
			t.Fatalf("re-encoding a decoded packet: %v", err)
		}
		if !bytes.Equal(again, b[:n]) {
			t.Fatalf("re-encoded\n%x\nfrom\n%x", again, b[:n])
		}
	})
}

func FuzzFrameInfos(f *testing.F) {
	for _, b := range conformanceSeeds(f) {
		if p, _, err := DecodePacket(b, 0); err == nil && len(p.FramingExtras) > 0 {
			f.Add(p.FramingExtras)
		}
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var again []byte
		err := FrameInfos(b, func(id uint16, data []byte) error {
			var err error
			again, err = AppendFrameInfo(again, id, data)
			if err != nil {
				t.Fatalf("re-encoding frame %d (%d bytes): %v", id, len(data), err)
			}
			if id == uint16(FrameDurability) {
				if l, to, err := DecodeDurabilityFrame(data); err == nil {
					enc, err := AppendDurabilityFrame(nil, l, to)
					if err != nil || !bytes.Equal(enc[1:], data) {
						t.Fatalf("durability frame %x re-encoded as %x (%v)", data, enc, err)
					}
				}
			}
			if id == uint16(FrameServerDuration) && len(data) == 2 {
				if d := DecodeServerDuration(binary.BigEndian.Uint16(data)); d < 0 {
					t.Fatalf("negative duration %v", d)
				}
			}
			return nil
		})
		if err != nil {
			checkErrKind(t, err)
			return
		}
		if !bytes.Equal(again, b) {
			t.Fatalf("frame infos %x re-encoded as %x", b, again)
		}
		if _, _, err := ServerDuration(b); err != nil && !errors.Is(err, ErrMalformed) {
			t.Fatal(err)
		}
	})
}

func FuzzULEB128(f *testing.F) {
	f.Fuzz(func(t *testing.T, b []byte, v uint32) {
		enc := AppendULEB128(nil, v)
		got, n, err := DecodeULEB128(enc)
		if err != nil || got != v || n != len(enc) || n != uleb128Len(v) {
			t.Fatalf("decode(encode(%#x)) = %#x, %d, %v", v, got, n, err)
		}
		got, n, err = DecodeULEB128(b)
		if err != nil {
			checkErrKind(t, err)
			return
		}
		if n < 1 || n > MaxLEB128Len || !bytes.Equal(AppendULEB128(nil, got), b[:n]) {
			t.Fatalf("accepted %x as %#x (%d bytes): not the canonical encoding", b, got, n)
		}
		cid, key, err := SplitCollectionKey(b)
		if err != nil || cid != got || len(key) != len(b)-n {
			t.Fatalf("SplitCollectionKey disagrees: %d %d %v", cid, len(key), err)
		}
	})
}

func FuzzHello(f *testing.F) {
	f.Fuzz(func(t *testing.T, value, key []byte, agent, id string) {
		feats, err := DecodeHelloFeatures(value)
		if err != nil {
			checkErrKind(t, err)
			if len(value)%2 == 0 {
				t.Fatalf("even-length value refused: %v", err)
			}
		} else if !bytes.Equal(AppendHelloFeatures(nil, feats), value) {
			t.Fatal("features do not re-encode")
		}
		DecodeHelloKey(key)
		k := HelloKey(agent, id)
		if len(k) > 2*(MaxHelloAgentLen+MaxHelloConnectionIDLen)*6+32 {
			t.Fatalf("key of %d bytes", len(k))
		}
		a, i := DecodeHelloKey(k)
		if utf8.ValidString(agent) && utf8.ValidString(id) {
			if a != TruncateUTF8(agent, MaxHelloAgentLen) || i != TruncateUTF8(id, MaxHelloConnectionIDLen) {
				t.Fatalf("HelloKey(%q, %q) read back as %q %q", agent, id, a, i)
			}
		}
	})
}

// fuzzScramIterations keeps accepted iteration counts cheap while fuzzing.
func fuzzScramIterations(f *testing.F) {
	old := scramIterationLimit
	scramIterationLimit = 4096
	f.Cleanup(func() { scramIterationLimit = old })
}

func checkSASLErr(t *testing.T, err error) {
	t.Helper()
	var de *DecodeError
	if !errors.As(err, &de) && !errors.Is(err, kverr.ErrAuthenticationFailure) {
		t.Fatalf("SASL error is neither a DecodeError nor kverr.ErrAuthenticationFailure: %v", err)
	}
}

// FuzzScramClientMessages feeds the client side server-first and
// server-final messages.
func FuzzScramClientMessages(f *testing.F) {
	fuzzScramIterations(f)
	f.Fuzz(func(t *testing.T, serverFirst, serverFinal []byte) {
		c, err := NewScramClient(MechScramSHA1, "user", "pencil", fixedNonce("fyko+d2lbbFgONRv9qkxdawL"))
		if err != nil {
			t.Fatal(err)
		}
		c.ClientFirst()
		final, err := c.ClientFinal(serverFirst)
		if err != nil {
			checkSASLErr(t, err)
			return
		}
		if !bytes.HasPrefix(final, []byte("c=biws,r=fyko+d2lbbFgONRv9qkxdawL")) {
			t.Fatalf("client-final %q", final)
		}
		if err := c.VerifyServerFinal(serverFinal); err != nil {
			checkSASLErr(t, err)
		}
	})
}

// FuzzScramServerMessages feeds the server side client-first and
// client-final messages; a success must come from a client that knows the
// password.
func FuzzScramServerMessages(f *testing.F) {
	keys, err := DeriveScramKeys(MechScramSHA256, "pencil", []byte("salt"), 16)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, clientFirst, clientFinal []byte) {
		s, err := NewScramServer(MechScramSHA256, func(u string) (ScramKeys, bool) { return keys, u == "user" }, fixedNonce("SRV"))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.ServerFirst(clientFirst); err != nil {
			checkSASLErr(t, err)
			return
		}
		if _, err := s.ServerFinal(clientFinal); err != nil {
			checkSASLErr(t, err)
			return
		}
		// Success: the proof must be the one the password gives.
		proof, _, err := ScramProofs(MechScramSHA256, "pencil", []byte("salt"), 16, s.authMessage)
		if err != nil {
			t.Fatal(err)
		}
		i := bytes.LastIndex(clientFinal, []byte(",p="))
		if got, _ := base64.StdEncoding.DecodeString(string(clientFinal[i+3:])); !bytes.Equal(got, proof) {
			t.Fatalf("server accepted a proof the password does not give: %q", clientFinal)
		}
	})
}

func FuzzDecodePlain(f *testing.F) {
	f.Fuzz(func(t *testing.T, b []byte) {
		az, u, p, err := DecodePlainPayload(b)
		if err != nil {
			checkErrKind(t, err)
			return
		}
		if u == "" {
			t.Fatal("empty user accepted")
		}
		if az == "" && !bytes.Equal(PlainPayload(u, p), b) {
			t.Fatalf("%q does not re-encode", b)
		}
	})
}

func FuzzDecompressSnappy(f *testing.F) {
	for _, b := range conformanceSeeds(f) {
		if p, _, err := DecodePacket(b, 0); err == nil && p.Datatype.Has(DatatypeSnappy) {
			f.Add(p.Value)
		}
	}
	const limit = 1 << 20
	f.Fuzz(func(t *testing.T, b []byte) {
		out, err := DecompressSnappy(nil, b, limit)
		if err != nil {
			checkErrKind(t, err)
			return
		}
		if len(out) > limit {
			t.Fatalf("%d bytes over the %d limit", len(out), limit)
		}
		back, err := DecompressSnappy(nil, CompressSnappy(nil, out), limit)
		if err != nil || !bytes.Equal(back, out) {
			t.Fatalf("recompression round trip: %v", err)
		}
	})
}

// FuzzResponseDecoders runs every op-specific decoder on a decoded packet.
func FuzzResponseDecoders(f *testing.F) {
	addPacketSeeds(f)
	f.Fuzz(func(t *testing.T, b []byte) {
		p, _, err := DecodePacket(b, 0)
		if err != nil {
			return
		}
		ok := func(err error) {
			t.Helper()
			if err != nil {
				checkErrKind(t, err)
			}
		}
		if _, err := DecodeGetFlags(&p); err == nil != (len(p.Extras) == 4) {
			t.Fatalf("DecodeGetFlags on %d bytes: %v", len(p.Extras), err)
		}
		_, has, err := DecodeMutationToken(&p)
		ok(err)
		if has != (len(p.Extras) == 16) {
			t.Fatal("mutation token presence")
		}
		_, err = DecodeCounterValue(&p)
		ok(err)
		_, _, err = DecodeCollectionsGetID(&p)
		ok(err)
		if n, err := DecodeClustermapNotification(&p); err == nil {
			if !bytes.Equal(n.Bucket, p.Key) || !bytes.Equal(n.Config, p.Value) {
				t.Fatal("notification sections")
			}
		} else {
			ok(err)
		}
		_, _, err = DecodeClusterConfigKnown(p.Extras)
		ok(err)
		_, err = DecodeGetMeta(&p)
		ok(err)
		_, err = DecodeObserveSeqno(p.Value)
		ok(err)
		if res, err := DecodeObserve(p.Value); err == nil {
			var again []byte
			for _, r := range res {
				again = binary.BigEndian.AppendUint16(again, r.Vbucket)
				again = binary.BigEndian.AppendUint16(again, uint16(len(r.Key)))
				again = append(again, r.Key...)
				again = append(again, byte(r.State))
				again = binary.BigEndian.AppendUint64(again, r.Cas)
			}
			if !bytes.Equal(again, p.Value) {
				t.Fatal("OBSERVE entries do not re-encode")
			}
		} else {
			ok(err)
		}
		if _, err := DecodeRangeScanCreateResponse(&p); err == nil != (len(p.Value) == 16) {
			t.Fatalf("DecodeRangeScanCreateResponse on %d bytes: %v", len(p.Value), err)
		}
		if c, err := DecodeRangeScanContent(&p); err == nil {
			if !bytes.Equal(AppendRangeScanContent(nil, c), p.Extras) {
				t.Fatal("range scan content does not re-encode")
			}
		} else {
			ok(err)
		}
		DecodeErrorContext(p.Datatype, p.Value)
		if e := NewStatusError(&p); (e == nil) != (p.Status == StatusSuccess) || (e != nil && !errors.Is(e, p.Status)) {
			t.Fatalf("NewStatusError(%s) = %v", p.Status, e)
		}
		DecodeSASLMechanisms(p.Value)
		DecodeStat(&p)
		if len(p.FramingExtras) > 0 {
			var d time.Duration
			var found bool
			d, found, err = ServerDuration(p.FramingExtras)
			ok(err)
			// The accessor agrees with the function on responses.
			pd, pok := p.ServerDuration()
			if want := p.Magic == MagicResExt && found && err == nil; pok != want || (pok && pd != d) {
				t.Fatalf("Packet.ServerDuration() = %v %v, ServerDuration = %v %v %v", pd, pok, d, found, err)
			}
		}
	})
}

// FuzzSubdocResponses decodes a value as multi-lookup and multi-mutation
// results; what decodes must re-encode to the same bytes.
func FuzzSubdocResponses(f *testing.F) {
	f.Fuzz(func(t *testing.T, b []byte) {
		if res, err := DecodeSubdocMultiLookup(b, nil); err == nil {
			var again []byte
			for _, r := range res {
				again = AppendSubdocLookupResult(again, r.Status, r.Value)
			}
			if !bytes.Equal(again, b) {
				t.Fatalf("lookup results re-encode as %x", again)
			}
		} else {
			checkErrKind(t, err)
		}
		if res, err := DecodeSubdocMultiMutation(b, nil); err == nil {
			var again []byte
			for _, r := range res {
				again = AppendSubdocMutateResult(again, r.Index, r.Status, r.Value)
			}
			if !bytes.Equal(again, b) {
				t.Fatalf("mutation results re-encode as %x", again)
			}
		} else {
			checkErrKind(t, err)
		}
	})
}

// FuzzSubdocRequest decodes sub-document requests (the server side); what
// decodes is rebuilt with the builders, encoded, and must decode to the
// same request.
func FuzzSubdocRequest(f *testing.F) {
	f.Fuzz(func(t *testing.T, op byte, extras, value []byte) {
		p := Packet{Magic: MagicReq, OpCode: OpCode(op), Key: []byte("k"), Extras: extras, Value: value}
		sd, err := DecodeSubdocRequest(&p)
		if err != nil {
			checkErrKind(t, err)
			return
		}
		var r Request
		switch p.OpCode {
		case OpSubdocMultiLookup:
			r = NewSubdocMultiLookup(p.Key, sd.DocFlags, sd.Lookups)
		case OpSubdocMultiMutation:
			r = NewSubdocMultiMutation(p.Key, sd.DocFlags, sd.Expiry, sd.Mutations)
		default:
			r = NewSubdocMutation(p.OpCode, p.Key, sd.Path, sd.Value, sd.Flags, sd.DocFlags, sd.Expiry)
		}
		b, err := r.AppendTo(nil, 1)
		if err != nil {
			t.Fatalf("rebuilding: %v", err)
		}
		q, err := decodeWhole(b)
		if err != nil {
			t.Fatal(err)
		}
		sd2, err := DecodeSubdocRequest(&q)
		if err != nil {
			t.Fatalf("decoding the rebuilt request: %v", err)
		}
		// The builders leave out a zero expiry; everything else must match.
		if sd.Expiry == 0 {
			sd.HasExpiry = false
		}
		if !subdocEqual(&sd, &sd2) {
			t.Fatalf("round trip changed the request:\n%+v\n%+v", sd, sd2)
		}
	})
}

func subdocEqual(a, b *SubdocRequest) bool {
	return bytes.Equal(a.Path, b.Path) && bytes.Equal(a.Value, b.Value) && a.Flags == b.Flags &&
		a.DocFlags == b.DocFlags && a.Expiry == b.Expiry && a.HasExpiry == b.HasExpiry &&
		slices.EqualFunc(a.Lookups, b.Lookups, func(x, y SubdocLookupOp) bool {
			return x.Op == y.Op && x.Flags == y.Flags && bytes.Equal(x.Path, y.Path)
		}) &&
		slices.EqualFunc(a.Mutations, b.Mutations, func(x, y SubdocMutateOp) bool {
			return x.Op == y.Op && x.Flags == y.Flags && bytes.Equal(x.Path, y.Path) && bytes.Equal(x.Value, y.Value)
		})
}

// FuzzRequestEncode builds requests from fuzzed fields and requires AppendTo
// either to refuse them (an EncodeError, dst unchanged) or to produce bytes
// that decode back to the same fields, of EncodedLen bytes.
func FuzzRequestEncode(f *testing.F) {
	f.Fuzz(func(t *testing.T, op byte, key, value, extras []byte, cid uint32, collections bool,
		level byte, timeout uint16, preserve bool, framing []byte) {
		r := Request{OpCode: OpCode(op), Key: key, Value: value, Extras: extras, Collections: collections,
			CollectionID: cid, Durability: DurabilityLevel(level), DurabilityTimeout: timeout,
			PreserveTTL: preserve, FramingExtras: framing, Vbucket: uint16(cid), Cas: uint64(cid) << 3}
		dst := []byte("pre")
		b, err := r.AppendTo(dst, cid)
		if err != nil {
			if !errors.Is(err, ErrInvalidRequest) || string(b) != "pre" {
				t.Fatalf("refusal %v left %q", err, b)
			}
			return
		}
		b = b[3:]
		if len(b) != r.EncodedLen() {
			t.Fatalf("EncodedLen %d, encoded %d", r.EncodedLen(), len(b))
		}
		p, err := decodeWhole(b)
		if err != nil {
			if errors.Is(err, ErrMalformed) {
				var de *DecodeError
				errors.As(err, &de)
				if de.Field == "body length" && len(b)-HeaderSize > DefaultMaxBodyLength {
					return // bigger than the decoder's default limit
				}
			}
			t.Fatalf("encoded request does not decode: %v", err)
		}
		if p.OpCode != r.OpCode || p.Vbucket != r.Vbucket || p.Cas != r.Cas || p.Opaque != cid ||
			!bytes.Equal(p.Extras, extras) || !bytes.Equal(p.Value, value) {
			t.Fatal("fields changed")
		}
		k := p.Key
		if r.collectionPrefix() {
			var got uint32
			got, k, err = SplitCollectionKey(p.Key)
			if err != nil || got != cid {
				t.Fatalf("collection prefix %d %v", got, err)
			}
		}
		if !bytes.Equal(k, key) {
			t.Fatal("key changed")
		}
		if !bytes.HasSuffix(p.FramingExtras, framing) {
			t.Fatal("caller's frame infos lost")
		}
	})
}
