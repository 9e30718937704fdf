package memdx

import (
	"bytes"
	"errors"
	"testing"
)

// FuzzRangeScanCreateValue parses a RANGE_SCAN_CREATE value; what parses
// and is encodable re-encodes to a value that parses to the same
// configuration, and re-encodes to the same bytes again.
func FuzzRangeScanCreateValue(f *testing.F) {
	f.Fuzz(func(t *testing.T, value []byte) {
		c, err := DecodeRangeScanCreateValue(value)
		if err != nil {
			checkErrKind(t, err)
			return
		}
		enc, err := AppendRangeScanCreateValue(nil, &c)
		if err != nil {
			// Only a configuration the decoder accepts but the encoder
			// refuses: zero samples (the server's validator takes it).
			if !errors.Is(err, ErrInvalidRequest) || c.Sampling == nil || c.Sampling.Samples != 0 {
				t.Fatalf("decoded %+v does not encode: %v", c, err)
			}
			return
		}
		c2, err := DecodeRangeScanCreateValue(enc)
		if err != nil {
			t.Fatalf("encoded %s does not decode: %v", enc, err)
		}
		if !createEqual(&c, &c2) {
			t.Fatalf("round trip changed %+v into %+v", c, c2)
		}
		enc2, _ := AppendRangeScanCreateValue(nil, &c2)
		if !bytes.Equal(enc, enc2) {
			t.Fatalf("encoding is not stable: %s then %s", enc, enc2)
		}
	})
}

// FuzzRangeScanContinueValue decodes a continue response value as keys or
// documents; what decodes re-encodes to the same bytes, and every key is
// non-empty.
func FuzzRangeScanContinueValue(f *testing.F) {
	f.Fuzz(func(t *testing.T, value []byte, documents bool) {
		var again []byte
		if documents {
			docs, err := DecodeRangeScanDocuments(nil, value)
			if err != nil {
				checkErrKind(t, err)
				return
			}
			for i := range docs {
				if len(docs[i].Key) == 0 {
					t.Fatal("empty key decoded")
				}
				again = AppendRangeScanDocument(again, &docs[i])
			}
		} else {
			keys, err := DecodeRangeScanKeys(nil, value)
			if err != nil {
				checkErrKind(t, err)
				return
			}
			for _, k := range keys {
				if len(k) == 0 {
					t.Fatal("empty key decoded")
				}
				again = AppendRangeScanKey(again, k)
			}
		}
		if !bytes.Equal(again, value) {
			t.Fatalf("re-encodes as %x", again)
		}
	})
}

// FuzzRangeScanRequests decodes continue and cancel extras (the server
// side); what decodes is rebuilt with the builders and must give the same
// extras.
func FuzzRangeScanRequests(f *testing.F) {
	f.Fuzz(func(t *testing.T, op byte, extras []byte) {
		p := Packet{Magic: MagicReq, OpCode: OpCode(op), Extras: extras}
		var r Request
		switch p.OpCode {
		case OpRangeScanContinue:
			c, err := DecodeRangeScanContinueRequest(&p)
			if err != nil {
				checkErrKind(t, err)
				return
			}
			r = NewRangeScanContinue(c)
		case OpRangeScanCancel:
			id, err := DecodeRangeScanCancelRequest(&p)
			if err != nil {
				checkErrKind(t, err)
				return
			}
			r = NewRangeScanCancel(id)
		default:
			return
		}
		if !bytes.Equal(r.ExtrasBytes(), extras) {
			t.Fatalf("rebuilt extras %x, want %x", r.ExtrasBytes(), extras)
		}
	})
}
