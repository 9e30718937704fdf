package memdx

import (
	"bytes"
	"errors"
	"strconv"
	"strings"
	"testing"
)

// appendTextValue encodes an item as memcached sends it in a get/gets
// answer: the cas goes on the line only when it is not zero.
func appendTextValue(dst []byte, v *TextValue) []byte {
	dst = append(dst, "VALUE "...)
	dst = append(dst, v.Key...)
	dst = append(dst, ' ')
	dst = strconv.AppendUint(dst, uint64(v.Flags), 10)
	dst = append(dst, ' ')
	dst = strconv.AppendInt(dst, int64(len(v.Value)), 10)
	if v.Cas != 0 {
		dst = append(dst, ' ')
		dst = strconv.AppendUint(dst, v.Cas, 10)
	}
	dst = append(dst, "\r\n"...)
	dst = append(dst, v.Value...)
	return append(dst, "\r\n"...)
}

func TestAppendTextGetsGolden(t *testing.T) {
	for _, tc := range []struct {
		keys [][]byte
		want string
	}{
		{[][]byte{[]byte("a")}, "gets a\r\n"},
		{[][]byte{[]byte("k1"), []byte("k2"), []byte("k1")}, "gets k1 k2 k1\r\n"},
		{[][]byte{[]byte("\x80\xff~!")}, "gets \x80\xff~!\r\n"},
		{[][]byte{bytes.Repeat([]byte("x"), MaxTextKey)}, "gets " + strings.Repeat("x", MaxTextKey) + "\r\n"},
	} {
		got, err := AppendTextGets([]byte("pre"), tc.keys)
		if err != nil {
			t.Fatalf("%q: %v", tc.keys, err)
		}
		if string(got) != "pre"+tc.want {
			t.Errorf("%q: got %q, want %q", tc.keys, got, "pre"+tc.want)
		}
	}
}

func TestAppendTextGetsRefusesBadKeysNamingTheirIndex(t *testing.T) {
	for _, tc := range []struct {
		name string
		key  []byte
		says string
	}{
		{"empty", nil, "empty"},
		{"251 bytes", bytes.Repeat([]byte("x"), MaxTextKey+1), "251 bytes"},
		{"space", []byte("a b"), "byte 1 is 0x20"},
		{"newline", []byte("ab\n"), "byte 2 is 0x0a"},
		{"NUL", []byte("\x00"), "byte 0 is 0x00"},
		{"DEL", []byte("abc\x7f"), "byte 3 is 0x7f"},
		{"carriage return", []byte("a\r"), "byte 1 is 0x0d"},
	} {
		keys := [][]byte{[]byte("ok"), []byte("fine"), tc.key}
		dst := []byte("pre")
		got, err := AppendTextGets(dst, keys)
		if !errors.Is(err, ErrInvalidRequest) {
			t.Errorf("%s: err = %v, want ErrInvalidRequest", tc.name, err)
			continue
		}
		if msg := err.Error(); !strings.Contains(msg, "keys[2]") || !strings.Contains(msg, tc.says) {
			t.Errorf("%s: error %q does not name keys[2] and say %q", tc.name, msg, tc.says)
		}
		if string(got) != "pre" {
			t.Errorf("%s: appended %q", tc.name, got)
		}
		if err := CheckTextKey(tc.key); !errors.Is(err, ErrInvalidRequest) || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("%s: CheckTextKey = %v, want ErrInvalidRequest saying %q", tc.name, err, tc.says)
		}
	}
	if got, err := AppendTextGets([]byte("pre"), nil); !errors.Is(err, ErrInvalidRequest) || string(got) != "pre" {
		t.Errorf("no keys: got %q, %v; want pre and ErrInvalidRequest", got, err)
	}
}

func TestCheckTextKeyAcceptsPrintableAndHighBytes(t *testing.T) {
	for _, k := range []string{"a", "!", "~", "k:1/ü", "\x80", "\xff", strings.Repeat("z", MaxTextKey)} {
		if err := CheckTextKey([]byte(k)); err != nil {
			t.Errorf("%q: %v", k, err)
		}
	}
}

// The word-at-a-time check of a text key's bytes agrees with the rule
// byte by byte: every byte value at every position of keys of 1 to 17
// bytes, among neighbours at the rule's edges (0x21, 0x7e, 0x80, 0xff).
func TestTextKeyBytesOKAgreesWithTheRule(t *testing.T) {
	rule := func(k []byte) bool {
		for _, c := range k {
			if c <= ' ' || c == 0x7f {
				return false
			}
		}
		return true
	}
	for _, fill := range []byte{0x21, 0x7e, 0x80, 0xff, 'a'} {
		for n := 1; n <= 17; n++ {
			for pos := range n {
				for c := range 256 {
					k := bytes.Repeat([]byte{fill}, n)
					k[pos] = byte(c)
					if got, want := textKeyBytesOK(k), rule(k); got != want {
						t.Fatalf("%x: %v, want %v", k, got, want)
					}
					if got, want := CheckTextKey(k) == nil, rule(k); got != want {
						t.Fatalf("CheckTextKey(%x): %v, want %v", k, got, want)
					}
				}
			}
		}
	}
}

// textAnswer is a gets answer with three hits and END, the first value
// binary with \r\nEND\r\n inside, the third empty and without cas.
const textAnswer = "VALUE k1 0 13 77\r\nab\r\nEND\r\n\x00\xffcd\r\n" +
	"VALUE key:2 4294967295 3 18446744073709551615\r\nxyz\r\n" +
	"VALUE k3 7 0\r\n\r\n" +
	"END\r\n"

var textAnswerItems = []TextValue{
	{Key: []byte("k1"), Flags: 0, Cas: 77, Value: []byte("ab\r\nEND\r\n\x00\xffcd")},
	{Key: []byte("key:2"), Flags: 4294967295, Cas: 18446744073709551615, Value: []byte("xyz")},
	{Key: []byte("k3"), Flags: 7, Cas: 0, Value: []byte{}},
}

func textValueEqual(a, b *TextValue) bool {
	return bytes.Equal(a.Key, b.Key) && a.Flags == b.Flags && a.Cas == b.Cas && bytes.Equal(a.Value, b.Value)
}

// parseAll parses a whole answer, returning its items; it fails the test on
// anything but items followed by END at the very end.
func parseAll(t *testing.T, b []byte) []TextValue {
	t.Helper()
	var items []TextValue
	for off := 0; ; {
		var v TextValue
		n, end, err := ParseTextGet(b[off:], 0, &v)
		if err != nil || n == 0 {
			t.Fatalf("at %d: n=%d err=%v", off, n, err)
		}
		off += n
		if end {
			if off != len(b) {
				t.Fatalf("END at %d of %d", off, len(b))
			}
			return items
		}
		items = append(items, v)
	}
}

func TestParseTextGetAnswerWithHitsAndEnd(t *testing.T) {
	items := parseAll(t, []byte(textAnswer))
	if len(items) != len(textAnswerItems) {
		t.Fatalf("got %d items, want %d", len(items), len(textAnswerItems))
	}
	for i := range items {
		if !textValueEqual(&items[i], &textAnswerItems[i]) {
			t.Errorf("item %d: got %+v, want %+v", i, items[i], textAnswerItems[i])
		}
	}
}

func TestParseTextGetSlicesAliasTheBufferWithCappedCapacity(t *testing.T) {
	b := []byte("VALUE k 1 3 9\r\nabc\r\nEND\r\n")
	var v TextValue
	n, end, err := ParseTextGet(b, 0, &v)
	if err != nil || end || n != 20 {
		t.Fatalf("n=%d end=%v err=%v", n, end, err)
	}
	if &v.Key[0] != &b[6] || &v.Value[0] != &b[15] {
		t.Error("key or value does not alias the buffer")
	}
	if cap(v.Key) != 1 || cap(v.Value) != 3 {
		t.Errorf("capacities %d, %d; want 1, 3", cap(v.Key), cap(v.Value))
	}
	_ = append(v.Value, 'X')
	if string(b[18:]) != "\r\nEND\r\n" {
		t.Errorf("appending to the value overwrote the buffer: %q", b)
	}
}

func TestParseTextGetEndAndErrorLines(t *testing.T) {
	var v TextValue
	if n, end, err := ParseTextGet([]byte("END\r\nVALUE"), 0, &v); n != 5 || !end || err != nil {
		t.Errorf("END: n=%d end=%v err=%v", n, end, err)
	}
	for _, tc := range []struct {
		in, kind, msg, text string
	}{
		{"ERROR\r\n", "ERROR", "", "memcached: ERROR"},
		{"ERROR unknown command\r\n", "ERROR", "unknown command", "memcached: ERROR unknown command"},
		{"CLIENT_ERROR bad command line format\r\n", "CLIENT_ERROR", "bad command line format", "memcached: CLIENT_ERROR bad command line format"},
		{"SERVER_ERROR out of memory\r\n", "SERVER_ERROR", "out of memory", "memcached: SERVER_ERROR out of memory"},
		{"SERVER_ERROR\r\n", "SERVER_ERROR", "", "memcached: SERVER_ERROR"},
	} {
		b := []byte(tc.in + "VALUE k 0 1\r\n")
		n, end, err := ParseTextGet(b, 0, &v)
		var te *TextError
		if !errors.As(err, &te) || end || n != len(tc.in) {
			t.Errorf("%q: n=%d end=%v err=%v", tc.in, n, end, err)
			continue
		}
		if te.Kind != tc.kind || te.Msg != tc.msg || te.Error() != tc.text {
			t.Errorf("%q: got %+v (%q)", tc.in, *te, te.Error())
		}
		if errors.Is(err, ErrMalformed) {
			t.Errorf("%q: an error line matches ErrMalformed", tc.in)
		}
	}
}

func TestParseTextGetRejectsMalformedNamingTheField(t *testing.T) {
	long := strings.Repeat("k", MaxTextKey+1)
	for _, tc := range []struct {
		in, what, field, says string
	}{
		{"VALUES k 0 1\r\na\r\n", "text get answer", "line", "starts with none"},
		{"value k 0 1\r\na\r\n", "text get answer", "line", "starts with none"},
		{"\r\n", "text get answer", "line", "starts with none"},
		{"STORED\r\n", "text get answer", "line", "starts with none"},
		{"ERRORS\r\n", "text get answer", "line", "starts with none"},
		{"END\n", "text get answer", "line", "without \\r"},
		{"\n", "text get answer", "line", "without \\r"},
		{"END \r\n", "END line", "line", "more than END"},
		{"END\r\r\n", "text get answer", "line", "starts with none"},
		{"VALUE\r\n", "VALUE line", "key", "missing"},
		{"VALUE \r\n", "VALUE line", "key", "empty"},
		{"VALUE  0 1\r\na\r\n", "VALUE line", "key", "empty"},
		{"VALUE " + long + " 0 1\r\na\r\n", "VALUE line", "key", "251 bytes"},
		{"VALUE k\x01 0 1\r\na\r\n", "VALUE line", "key", "byte 1 is 0x01"},
		{"VALUE k\x7f 0 1\r\na\r\n", "VALUE line", "key", "byte 1 is 0x7f"},
		{"VALUE k\r\n", "VALUE line", "flags", "missing"},
		{"VALUE k \r\n", "VALUE line", "flags", "empty"},
		{"VALUE k 0\r\n", "VALUE line", "bytes", "missing"},
		{"VALUE k 0 \r\n", "VALUE line", "bytes", "empty"},
		{"VALUE k -1 1\r\na\r\n", "VALUE line", "flags", "not unsigned decimal"},
		{"VALUE k +1 1\r\na\r\n", "VALUE line", "flags", "not unsigned decimal"},
		{"VALUE k 0x1 1\r\na\r\n", "VALUE line", "flags", "not unsigned decimal"},
		{"VALUE k 4294967296 1\r\na\r\n", "VALUE line", "flags", "overflows"},
		{"VALUE k 0 +1\r\na\r\n", "VALUE line", "bytes", "not unsigned decimal"},
		{"VALUE k 0 1a\r\na\r\n", "VALUE line", "bytes", "not unsigned decimal"},
		{"VALUE k 0 18446744073709551616\r\na\r\n", "VALUE line", "bytes", "overflows"},
		{"VALUE k 0 1 \r\na\r\n", "VALUE line", "cas", "empty"},
		{"VALUE k 0 1 -5\r\na\r\n", "VALUE line", "cas", "not unsigned decimal"},
		{"VALUE k 0 1 18446744073709551616\r\na\r\n", "VALUE line", "cas", "overflows"},
		{"VALUE k 0 1 5 6\r\na\r\n", "VALUE line", "line", "fields after"},
		{"VALUE k 0 1 5 \r\na\r\n", "VALUE line", "line", "fields after"},
		{"VALUE k 0 1\r\nab\r\n", "VALUE item", "data", "not followed by \\r\\n"},
		{"VALUE k 0 1\r\na\n", "VALUE item", "data", "not followed by \\r\\n"},
		{"VALUE k 0 1\r\na\rX", "VALUE item", "data", "not followed by \\r\\n"},
		{"VALUE k 0 2\r\na\r\n", "VALUE item", "data", "not followed by \\r\\n"},
		{"VALUE k 0 1\r\na", "", "", ""}, // incomplete, not malformed: checked below
	} {
		if tc.field == "" {
			continue
		}
		v := TextValue{Key: []byte("untouched")}
		n, end, err := ParseTextGet([]byte(tc.in), 0, &v)
		var de *DecodeError
		if !errors.Is(err, ErrMalformed) || !errors.As(err, &de) || n != 0 || end {
			t.Errorf("%q: n=%d end=%v err=%v, want a malformed error", tc.in, n, end, err)
			continue
		}
		if de.What != tc.what || de.Field != tc.field || !strings.Contains(de.Reason, tc.says) {
			t.Errorf("%q: got %s/%s %q, want %s/%s saying %q", tc.in, de.What, de.Field, de.Reason, tc.what, tc.field, tc.says)
		}
		if string(v.Key) != "untouched" {
			t.Errorf("%q: *v written on an error", tc.in)
		}
	}
}

func TestParseTextGetBoundsTheValueByMaxValue(t *testing.T) {
	b := []byte("VALUE k 0 10\r\n0123456789\r\n")
	var v TextValue
	if n, _, err := ParseTextGet(b, 10, &v); err != nil || n != len(b) || string(v.Value) != "0123456789" {
		t.Fatalf("at the limit: n=%d err=%v", n, err)
	}
	// Over the limit it is refused from the line alone, before the data.
	for _, in := range [][]byte{b, b[:14]} {
		n, _, err := ParseTextGet(in, 9, &v)
		var de *DecodeError
		if n != 0 || !errors.Is(err, ErrMalformed) || !errors.Is(err, ErrBodyTooLarge) ||
			!errors.As(err, &de) || de.Field != "bytes" || !strings.Contains(de.Reason, "limit of 9") {
			t.Errorf("%q over a limit of 9: n=%d err=%v", in, n, err)
		}
	}
	// maxValue <= 0 is DefaultMaxBodyLength.
	over := []byte("VALUE k 0 " + strconv.Itoa(DefaultMaxBodyLength+1) + "\r\n")
	for _, max := range []int{0, -1} {
		if _, _, err := ParseTextGet(over, max, &v); !errors.Is(err, ErrBodyTooLarge) {
			t.Errorf("maxValue %d: a value over DefaultMaxBodyLength gave %v", max, err)
		}
		at := []byte("VALUE k 0 " + strconv.Itoa(DefaultMaxBodyLength) + "\r\n")
		if n, _, err := ParseTextGet(at, max, &v); n != 0 || err != nil {
			t.Errorf("maxValue %d: a value of DefaultMaxBodyLength gave n=%d err=%v, want to wait for it", max, n, err)
		}
	}
}

func TestParseTextGetBoundsTheLineTo512Bytes(t *testing.T) {
	var v TextValue
	// A line of 512 bytes with its \n last is still parsed.
	msg := strings.Repeat("m", 512-len("SERVER_ERROR \r\n"))
	in := []byte("SERVER_ERROR " + msg + "\r\n")
	if n, _, err := ParseTextGet(in, 0, &v); n != 512 || !strings.Contains(err.Error(), msg) {
		t.Errorf("512-byte line: n=%d err=%v", n, err)
	}
	// One byte longer, and it is malformed as soon as 512 bytes without \n
	// have arrived; fewer bytes are an incomplete line.
	in = []byte("SERVER_ERROR m" + msg + "\r\n")
	for l := 0; l <= len(in); l++ {
		n, _, err := ParseTextGet(in[:l], 0, &v)
		var de *DecodeError
		switch {
		case l < 512:
			if n != 0 || err != nil {
				t.Fatalf("%d bytes: n=%d err=%v, want to wait", l, n, err)
			}
		case n != 0 || !errors.As(err, &de) || de.Field != "line" || !strings.Contains(de.Reason, "512"):
			t.Fatalf("%d bytes: n=%d err=%v, want a malformed line", l, n, err)
		}
	}
	// The longest valid VALUE line is well within the bound.
	item := TextValue{Key: bytes.Repeat([]byte("k"), MaxTextKey), Flags: 4294967295, Cas: 18446744073709551615, Value: []byte("v")}
	enc := appendTextValue(nil, &item)
	var got TextValue
	if n, _, err := ParseTextGet(enc, 0, &got); n != len(enc) || err != nil || !textValueEqual(&got, &item) {
		t.Errorf("longest line: n=%d err=%v", n, err)
	}
}

// TestParseTextGetWaitsAtEverySplitPoint feeds every prefix of a valid
// answer: each parses as the whole items it holds and then asks for more,
// never a wrong item and never an error.
func TestParseTextGetWaitsAtEverySplitPoint(t *testing.T) {
	answer := []byte(textAnswer + "SERVER_ERROR out of memory\r\n")
	// Item boundaries: after each item, END, and the error line.
	var bounds []int
	for off := 0; off < len(answer); {
		var v TextValue
		n, _, err := ParseTextGet(answer[off:], 0, &v)
		var te *TextError
		if n == 0 || (err != nil && !errors.As(err, &te)) {
			t.Fatalf("whole answer at %d: n=%d err=%v", off, n, err)
		}
		off += n
		bounds = append(bounds, off)
	}
	for l := 0; l <= len(answer); l++ {
		prefix := bytes.Clone(answer[:l])
		off, item := 0, 0
		for {
			var v TextValue
			n, end, err := ParseTextGet(prefix[off:], 0, &v)
			if n == 0 {
				if err != nil {
					t.Fatalf("prefix of %d bytes at %d: %v", l, off, err)
				}
				break
			}
			if off+n != bounds[item] {
				t.Fatalf("prefix of %d bytes: item %d ends at %d, want %d", l, item, off+n, bounds[item])
			}
			if item < len(textAnswerItems) {
				if err != nil || end || !textValueEqual(&v, &textAnswerItems[item]) {
					t.Fatalf("prefix of %d bytes: item %d = %+v end=%v err=%v", l, item, v, end, err)
				}
			}
			off += n
			item++
		}
		if off > l || (item < len(bounds) && bounds[item] <= l) {
			t.Fatalf("prefix of %d bytes: stopped at %d after %d items", l, off, item)
		}
	}
}

func TestTextCodecAllocatesNothing(t *testing.T) {
	keys := make([][]byte, 256)
	for i := range keys {
		keys[i] = []byte("airline_" + strconv.Itoa(i))
	}
	buf, err := AppendTextGets(nil, keys)
	if err != nil {
		t.Fatal(err)
	}
	var answer []byte
	for _, k := range keys[:8] {
		answer = appendTextValue(answer, &TextValue{Key: k, Flags: 0x02000000, Cas: 1700000000000000000, Value: benchValue})
	}
	answer = append(answer, "END\r\n"...)
	var v TextValue
	for _, tc := range []struct {
		name string
		f    func()
	}{
		{"AppendTextGets of 256 keys", func() { buf, _ = AppendTextGets(buf[:0], keys) }},
		{"CheckTextKey", func() { _ = CheckTextKey(keys[0]) }},
		{"ParseTextGet of an answer of 8 hits", func() {
			for off := 0; ; {
				n, end, err := ParseTextGet(answer[off:], 0, &v)
				if err != nil || n == 0 {
					t.Fatalf("n=%d err=%v", n, err)
				}
				if off += n; end {
					break
				}
			}
		}},
		{"ParseTextGet of an incomplete item", func() { _, _, _ = ParseTextGet(answer[:100], 0, &v) }},
	} {
		if n := testingAllocs(tc.f); n != 0 {
			t.Errorf("%s: %v allocations per run, want 0", tc.name, n)
		}
	}
}

func BenchmarkCheckTextKey(b *testing.B) {
	k := []byte("gmbench-key-000123")
	for b.Loop() {
		if CheckTextKey(k) != nil {
			b.Fatal("refused")
		}
	}
}
