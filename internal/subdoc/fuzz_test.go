package subdoc

import (
	"bytes"
	"testing"

	"github.com/kvwire/kvwire/memdx"
)

// FuzzSubdocResponseDecoding feeds the sub-document response
// decoding (on top of memdx's) arbitrary values for a request of n specs:
// it never panics, and what it accepts is exactly what a server could have
// sent for that request (the lookup results re-encode to the input; the
// mutation results name distinct specs below n, in order).
func FuzzSubdocResponseDecoding(f *testing.F) {
	var lookup []byte
	lookup = memdx.AppendSubdocLookupResult(lookup, memdx.StatusSuccess, []byte(`{"id":1}`))
	lookup = memdx.AppendSubdocLookupResult(lookup, memdx.StatusSubdocPathNotFound, nil)
	lookup = memdx.AppendSubdocLookupResult(lookup, memdx.StatusSuccess, []byte(`3`))
	f.Add(lookup, uint8(3))
	f.Add(lookup, uint8(2))
	var mutate []byte
	mutate = memdx.AppendSubdocMutateResult(mutate, 1, memdx.StatusSuccess, []byte(`5`))
	mutate = memdx.AppendSubdocMutateResult(mutate, 3, memdx.StatusSuccess, []byte(`-2`))
	f.Add(mutate, uint8(4))
	f.Add(memdx.AppendSubdocMutateResult(nil, 2, memdx.StatusSubdocPathExists, nil), uint8(3))
	f.Add([]byte{}, uint8(1))
	f.Add([]byte{0, 0, 0xff, 0xff, 0xff, 0xff}, uint8(1))

	f.Fuzz(func(t *testing.T, value []byte, n uint8) {
		specs := int(n % (MaxSpecs + 2))
		if fields, err := decodeLookupIn(value, specs); err == nil {
			if len(fields) != specs {
				t.Fatalf("%d lookup results for %d specs", len(fields), specs)
			}
			var re []byte
			for _, f := range fields {
				re = memdx.AppendSubdocLookupResult(re, f.Status, f.Value)
			}
			if !bytes.Equal(re, value) {
				t.Fatalf("lookup results re-encode to %x, not %x", re, value)
			}
		}
		if fields, err := decodeMutateIn(value, specs); err == nil {
			if len(fields) != specs {
				t.Fatalf("%d mutation fields for %d specs", len(fields), specs)
			}
			var re []byte
			for i, f := range fields {
				if f.Value != nil {
					re = memdx.AppendSubdocMutateResult(re, uint8(i), memdx.StatusSuccess, f.Value)
				}
			}
			if !bytes.Equal(re, value) {
				t.Fatalf("mutation results re-encode to %x, not %x", re, value)
			}
		}
		if i, st, err := decodeMutateInFailure(value, specs); err == nil {
			if i < 0 || i >= specs || st == memdx.StatusSuccess {
				t.Fatalf("failure of spec %d of %d with %s", i, specs, st)
			}
			if !bytes.Equal(memdx.AppendSubdocMutateResult(nil, uint8(i), st, nil), value) {
				t.Fatalf("failure result re-encodes differently from %x", value)
			}
		}
	})
}
