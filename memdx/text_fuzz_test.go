package memdx

import (
	"bytes"
	"errors"
	"testing"
)

// FuzzParseTextGet parses the item at the start of the input with two
// value limits: it never panics, n stays within the input, an error is a
// *TextError or a malformed error naming its field (with n == 0), and an
// item it parses re-encodes (VALUE line and data) to bytes that parse again
// to the same item. Its seeds are textFuzzSeeds.
func FuzzParseTextGet(f *testing.F) {
	f.Fuzz(func(t *testing.T, b []byte) {
		// The one-pass scan of a VALUE line's fields agrees with the
		// field-by-field parse wherever it accepts a line.
		if line, _, _ := bytes.Cut(b, []byte("\r\n")); bytes.HasPrefix(line, []byte("VALUE ")) {
			fields := line[len("VALUE "):]
			k1, f1, s1, c1, ok := scanTextValue(fields)
			k2, f2, s2, c2, err := textValueFields(fields)
			if ok && (err != nil || !bytes.Equal(k1, k2) || f1 != f2 || s1 != s2 || c1 != c2) {
				t.Fatalf("%q: scan %q %d %d %d, fields %q %d %d %d %v", fields, k1, f1, s1, c1, k2, f2, s2, c2, err)
			}
		}
		for _, max := range []int{0, 16} {
			var v TextValue
			n, end, err := ParseTextGet(b, max, &v)
			if n < 0 || n > len(b) {
				t.Fatalf("n=%d for %d bytes", n, len(b))
			}
			var te *TextError
			switch {
			case errors.As(err, &te):
				if n == 0 || end || te.Kind == "" {
					t.Fatalf("error line: n=%d end=%v %+v", n, end, te)
				}
				continue
			case err != nil:
				checkErrKind(t, err)
				if !errors.Is(err, ErrMalformed) || n != 0 {
					t.Fatalf("n=%d with %v", n, err)
				}
				continue
			case n == 0 || end:
				if end && string(b[:n]) != "END\r\n" {
					t.Fatalf("END from %q", b[:n])
				}
				continue
			}
			if max > 0 && len(v.Value) > max {
				t.Fatalf("value of %d bytes over the limit of %d", len(v.Value), max)
			}
			if CheckTextKey(v.Key) != nil {
				t.Fatalf("parsed a key the encoder refuses: %q", v.Key)
			}
			enc := appendTextValue(nil, &v)
			var again TextValue
			n2, end2, err := ParseTextGet(enc, max, &again)
			if err != nil || end2 || n2 != len(enc) || !textValueEqual(&v, &again) {
				t.Fatalf("%+v re-encoded as %q parses to %+v n=%d end=%v err=%v", v, enc, again, n2, end2, err)
			}
		}
	})
}

// textFuzzSeeds are the seeds of FuzzParseTextGet (a whole answer, each
// kind of line, and inputs at the edges of the grammar) and of
// FuzzCheckTextKey (keys with a refused byte in a word and in the tail,
// the edges of the rule, no key).
func textFuzzSeeds() map[string][][]any {
	var seeds [][]any
	for _, s := range []string{
		textAnswer,
		"END\r\n",
		"VALUE k 0 1\r\na\r\nEND\r\n",
		"VALUE k 1 0\r\n\r\n",
		"VALUE k 4294967295 2 18446744073709551615\r\n\r\n\r\n",
		"VALUE k 00 01 007\r\nz\r\n",
		"VALUE k 0 1\r\na",
		"VALUE k 0 99999999999\r\n",
		"ERROR\r\n",
		"CLIENT_ERROR bad data chunk\r\n",
		"SERVER_ERROR out of memory storing object\r\n",
		"VALUE k\xff 0 1 2 3\r\na\r\n",
		"END\n",
		"",
	} {
		seeds = append(seeds, []any{[]byte(s)})
	}
	var keys [][]any
	for _, k := range []string{"a", "key-000123", "k\x20y", "abcdefg\x7f", "\x80\xff\x21\x7e\x21\x21\x21\x21\x00", ""} {
		keys = append(keys, []any{[]byte(k)})
	}
	return map[string][][]any{"FuzzParseTextGet": seeds, "FuzzCheckTextKey": keys}
}

// FuzzCheckTextKey: the word-at-a-time check of a key's bytes agrees with
// the byte rule (no byte <= 0x20, none 0x7f) on any input, and CheckTextKey
// accepts exactly the keys of 1 to MaxTextKey bytes that pass it. Its
// seeds are textFuzzSeeds.
func FuzzCheckTextKey(f *testing.F) {
	f.Fuzz(func(t *testing.T, k []byte) {
		rule := true
		for _, c := range k {
			if c <= ' ' || c == 0x7f {
				rule = false
			}
		}
		if got := textKeyBytesOK(k); got != rule {
			t.Fatalf("%x: %v, want %v", k, got, rule)
		}
		want := rule && len(k) >= 1 && len(k) <= MaxTextKey
		if got := CheckTextKey(k) == nil; got != want {
			t.Fatalf("CheckTextKey(%x): %v, want %v", k, got, want)
		}
	})
}
