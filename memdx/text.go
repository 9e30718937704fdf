package memdx

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"strconv"
)

// memcached's text protocol, for the one command kvwire sends in it: a
// multi-key "gets", which memcached answers as one request where binary
// GETQs are split across event-loop turns. The grammar is memcached's
// doc/protocol.txt: a hit is
//
//	VALUE <key> <flags> <bytes> [<cas unique>]\r\n
//	<bytes bytes of data>\r\n
//
// misses produce nothing, and "END\r\n" follows the last hit. An error line
// (ERROR, CLIENT_ERROR <msg>, SERVER_ERROR <msg>) may come instead.

// MaxTextKey is the longest key memcached's text protocol accepts.
const MaxTextKey = 250

// maxTextLine bounds the search for the end of an answer line. The longest
// valid VALUE line is 6 + 250 + 1 + 10 + 1 + 20 + 1 + 20 + 2 = 311 bytes.
const maxTextLine = 512

// CheckTextKey reports whether key can be sent in a text command: 1 to
// MaxTextKey bytes, none of them a control character or space (bytes <=
// 0x20, and 0x7f). The error wraps ErrInvalidRequest and says what is wrong
// (length, or the offending byte's position and value).
func CheckTextKey(key []byte) error {
	if reason := textKeyReason(key); reason != "" {
		return badRequest("key", "%s", reason)
	}
	return nil
}

// textKeyReason says what is wrong with a text key, or "" when nothing is.
// It allocates only for a refused key.
func textKeyReason(key []byte) string {
	if len(key) == 0 {
		return "empty"
	}
	if len(key) > MaxTextKey {
		return strconv.Itoa(len(key)) + " bytes is longer than the text protocol's " + strconv.Itoa(MaxTextKey)
	}
	if textKeyBytesOK(key) {
		return ""
	}
	for i, c := range key {
		if c <= ' ' || c == 0x7f {
			return fmt.Sprintf("byte %d is 0x%02x, a space or control character", i, c)
		}
	}
	return ""
}

// textKeyBytesOK reports whether key has no byte <= 0x20 and no 0x7f,
// eight bytes at a time: a GetMany checks every key of its text
// multi-gets twice (when it groups them, and when the command is
// encoded). For a word x, (x - 0x21 in each byte) &^ x has a byte's top
// bit set exactly when some byte of x is below 0x21 (exact for any bound
// up to 0x80), and x ^ 0x7f in each byte has a zero byte exactly where x
// has 0x7f.
func textKeyBytesOK(key []byte) bool {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	for len(key) >= 8 {
		x := binary.LittleEndian.Uint64(key)
		y := x ^ (0x7f * ones)
		if ((x-0x21*ones)&^x|(y-ones)&^y)&highs != 0 {
			return false
		}
		key = key[8:]
	}
	for _, c := range key {
		if c <= ' ' || c == 0x7f {
			return false
		}
	}
	return true
}

// AppendTextGets appends the text command "gets <key> <key> ...\r\n" to
// dst. Every key is checked first; when one is refused nothing is appended
// and the error names its index. No keys is an error (ErrInvalidRequest).
// It does not allocate when dst has room for the command.
func AppendTextGets(dst []byte, keys [][]byte) ([]byte, error) {
	if len(keys) == 0 {
		return dst, badRequest("keys", "no keys to get")
	}
	size := len("gets") + len("\r\n")
	for i, k := range keys {
		if reason := textKeyReason(k); reason != "" {
			return dst, badRequest("keys["+strconv.Itoa(i)+"]", "%s", reason)
		}
		size += 1 + len(k)
	}
	dst = slices.Grow(dst, size)
	dst = append(dst, "gets"...)
	for _, k := range keys {
		dst = append(dst, ' ')
		dst = append(dst, k...)
	}
	return append(dst, '\r', '\n'), nil
}

// TextValue is one item of the answer to a text get or gets. Key and Value
// alias the parsed buffer (capacity capped).
type TextValue struct {
	Key   []byte
	Flags uint32
	Cas   uint64 // 0 when the line carries none (an answer to get, not gets)
	Value []byte
}

// TextError is an error line of memcached's text protocol: Kind is
// "ERROR", "CLIENT_ERROR" or "SERVER_ERROR", Msg the rest of the line (may
// be empty). The server may close the connection after sending one.
type TextError struct{ Kind, Msg string }

// Error prints e.g. "memcached: SERVER_ERROR out of memory".
func (e *TextError) Error() string {
	if e.Msg == "" {
		return "memcached: " + e.Kind
	}
	return "memcached: " + e.Kind + " " + e.Msg
}

// ParseTextGet parses the next item of a get/gets answer at the start of b:
//
//   - n > 0, end == false, err == nil: a VALUE line and its data block, in *v
//   - n > 0, end == true: the END line
//   - n == 0, err == nil: b does not yet hold a whole item (read more and
//     call again)
//   - err is a *TextError: an error line; n is its length (so the caller can
//     skip it)
//   - err wraps ErrMalformed (n == 0): anything else, naming what was wrong.
//
// Malformed are: a line not starting with VALUE, END or an error word; a
// line not ended by \r\n, or with no \n in its first 512 bytes (the longest
// valid VALUE line is 311); a VALUE line without exactly the fields key,
// flags, bytes and optionally cas, separated by single spaces; a key that
// CheckTextKey refuses; a number that is not decimal digits or overflows
// its type (flags 32 bits, bytes and cas 64); a data length over maxValue
// (the error also matches ErrBodyTooLarge; maxValue <= 0 means
// DefaultMaxBodyLength); data not followed by \r\n. The data block is
// binary and is found by its length, never by searching.
//
// *v is written only when a VALUE item is returned. ParseTextGet does not
// allocate unless it returns an error.
func ParseTextGet(b []byte, maxValue int, v *TextValue) (n int, end bool, err error) {
	window := b
	if len(window) > maxTextLine {
		window = window[:maxTextLine]
	}
	nl := bytes.IndexByte(window, '\n')
	if nl < 0 {
		if len(b) >= maxTextLine {
			return 0, false, malformed("text get answer", "line",
				"no \\n in the first %d bytes", maxTextLine)
		}
		return 0, false, nil
	}
	if nl == 0 || b[nl-1] != '\r' {
		return 0, false, malformed("text get answer", "line", "ends in \\n without \\r")
	}
	line := b[:nl-1]
	lineLen := nl + 1

	word, rest, hasRest := bytes.Cut(line, []byte{' '})
	switch string(word) { // no allocation: the conversion is only compared
	case "VALUE":
		if !hasRest {
			return 0, false, malformed("VALUE line", "key", "missing")
		}
		return parseTextValue(b, rest, lineLen, maxValue, v)
	case "END":
		if hasRest {
			return 0, false, malformed("END line", "line", "carries more than END: %q", clip(line))
		}
		return lineLen, true, nil
	case "ERROR", "CLIENT_ERROR", "SERVER_ERROR":
		return lineLen, false, &TextError{Kind: string(word), Msg: string(rest)}
	}
	return 0, false, malformed("text get answer", "line",
		"%q starts with none of VALUE, END, ERROR, CLIENT_ERROR, SERVER_ERROR", clip(line))
}

// parseTextValue parses the fields after "VALUE " and the data block that
// follows the line of lineLen bytes at the start of b.
func parseTextValue(b, fields []byte, lineLen, maxValue int, v *TextValue) (int, bool, error) {
	key, flags, size, cas, ok := scanTextValue(fields)
	if !ok {
		var err error
		if key, flags, size, cas, err = textValueFields(fields); err != nil {
			return 0, false, err
		}
	}
	if maxValue <= 0 {
		maxValue = DefaultMaxBodyLength
	}
	if size > uint64(maxValue) {
		return 0, false, &DecodeError{What: "VALUE line", Field: "bytes", Err: ErrBodyTooLarge,
			Reason: strconv.FormatUint(size, 10) + " bytes exceeds the limit of " + strconv.Itoa(maxValue)}
	}
	if size > uint64(len(b)-lineLen) {
		return 0, false, nil // the data has not all arrived
	}
	dataEnd := lineLen + int(size)
	// Whatever of the trailer has arrived must be \r\n already.
	if trailer := b[dataEnd:min(dataEnd+2, len(b))]; !bytes.HasPrefix([]byte("\r\n"), trailer) {
		return 0, false, malformed("VALUE item", "data", "%d bytes not followed by \\r\\n", size)
	}
	if len(b)-dataEnd < 2 {
		return 0, false, nil
	}
	v.Key = key[:len(key):len(key)]
	v.Flags = uint32(flags)
	v.Cas = cas
	v.Value = b[lineLen:dataEnd:dataEnd]
	return dataEnd + 2, false, nil
}

// scanTextValue reads the fields of a well-formed VALUE line in one pass:
// key, flags, bytes and an optional cas, separated by single spaces. ok
// false means the line is not that; textValueFields then says why.
func scanTextValue(f []byte) (key []byte, flags uint32, size, cas uint64, ok bool) {
	i := 0
	for i < len(f) && f[i] != ' ' {
		if c := f[i]; c <= ' ' || c == 0x7f {
			return nil, 0, 0, 0, false
		}
		i++
	}
	if i == 0 || i > MaxTextKey || i == len(f) {
		return nil, 0, 0, 0, false
	}
	key = f[:i]
	n, i, good := scanTextUint(f, i+1, math.MaxUint32)
	if !good || i == len(f) {
		return nil, 0, 0, 0, false
	}
	flags = uint32(n)
	if size, i, good = scanTextUint(f, i+1, math.MaxUint64); !good {
		return nil, 0, 0, 0, false
	}
	if i == len(f) {
		return key, flags, size, 0, true
	}
	if cas, i, good = scanTextUint(f, i+1, math.MaxUint64); !good || i != len(f) {
		return nil, 0, 0, 0, false
	}
	return key, flags, size, cas, true
}

// scanTextUint reads the decimal digits of f from i up to a space or the
// end, as a value of at most max; good is false for none, a non-digit or
// an overflow.
func scanTextUint(f []byte, i int, max uint64) (n uint64, end int, good bool) {
	start := i
	for ; i < len(f) && f[i] != ' '; i++ {
		c := f[i]
		if c < '0' || c > '9' {
			return 0, i, false
		}
		d := uint64(c - '0')
		if n > (max-d)/10 {
			return 0, i, false
		}
		n = n*10 + d
	}
	return n, i, i > start
}

// textValueFields parses the fields of a VALUE line, naming what is wrong.
func textValueFields(fields []byte) (key []byte, flags uint32, size, cas uint64, err error) {
	var f [4][]byte // key, flags, bytes, cas
	nf := 0
	for rest, more := fields, true; more; nf++ {
		if nf == len(f) {
			return nil, 0, 0, 0, malformed("VALUE line", "line", "has fields after key, flags, bytes and cas")
		}
		f[nf], rest, more = bytes.Cut(rest, []byte{' '})
	}
	key = f[0]
	if reason := textKeyReason(key); reason != "" {
		return nil, 0, 0, 0, malformed("VALUE line", "key", "%s", reason)
	}
	if nf < 2 {
		return nil, 0, 0, 0, malformed("VALUE line", "flags", "missing")
	}
	flags64, problem := parseTextUint(f[1], math.MaxUint32)
	if problem != "" {
		return nil, 0, 0, 0, malformed("VALUE line", "flags", "%q %s", clip(f[1]), problem)
	}
	if nf < 3 {
		return nil, 0, 0, 0, malformed("VALUE line", "bytes", "missing")
	}
	size, problem = parseTextUint(f[2], math.MaxUint64)
	if problem != "" {
		return nil, 0, 0, 0, malformed("VALUE line", "bytes", "%q %s", clip(f[2]), problem)
	}
	if nf == 4 {
		if cas, problem = parseTextUint(f[3], math.MaxUint64); problem != "" {
			return nil, 0, 0, 0, malformed("VALUE line", "cas", "%q %s", clip(f[3]), problem)
		}
	}
	return key, uint32(flags64), size, cas, nil
}

// parseTextUint parses unsigned decimal digits (no sign) as a value of at
// most max, returning a reason when they are not that.
func parseTextUint(s []byte, max uint64) (uint64, string) {
	if len(s) == 0 {
		return 0, "is empty"
	}
	var n uint64
	for _, c := range s {
		if c < '0' || c > '9' {
			return 0, "is not unsigned decimal digits"
		}
		d := uint64(c - '0')
		if n > (max-d)/10 {
			return 0, "overflows"
		}
		n = n*10 + d
	}
	return n, ""
}

// clip shortens what an error quotes from the input.
func clip(b []byte) []byte {
	if len(b) > 64 {
		return b[:64]
	}
	return b
}
