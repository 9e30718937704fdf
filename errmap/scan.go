package errmap

import (
	"bytes"
	"fmt"
	"io"
	"unicode/utf16"
	"unicode/utf8"
)

// The JSON reader under Parse: RFC 8259 syntax, read straight from the
// input with no token objects, so that Parse costs little more than the
// strings it keeps. Strings decode as encoding/json decodes them (escapes,
// surrogate pairs, invalid UTF-8 and lone surrogates become U+FFFD); numbers
// are checked against the JSON grammar and handed over as their literal.
// Every method stops at the first problem with a *ParseError; the fuzz test
// checks that whatever it accepts, encoding/json accepts too.

// maxDepth bounds the nesting of values Parse skips (encoding/json allows
// 10000; a map needs 4).
const maxDepth = 1000

type scanner struct {
	b     []byte
	i     int // next byte to read
	depth int // objects and arrays open
	// keyAt is the offset of the "errors" key of the entry being read, or -1
	// outside the entries; errors name the key, read again from there.
	keyAt int
}

func (s *scanner) fail(at int, field, format string, args ...any) *ParseError {
	return &ParseError{Key: s.keyText(s.keyAt), Field: field, Offset: int64(at), Reason: fmt.Sprintf(format, args...)}
}

// keyText returns the decoded key whose opening quote is at offset at, or
// "" when at is -1.
func (s *scanner) keyText(at int) string {
	if at < 0 {
		return ""
	}
	again := scanner{b: s.b, i: at, keyAt: -1}
	k, _ := again.str("")
	return k
}

// eof reports input that ends inside a value.
func (s *scanner) eof(field string) *ParseError {
	e := s.fail(len(s.b), field, "invalid JSON: unexpected end of input")
	e.Err = io.ErrUnexpectedEOF
	return e
}

// syntax reports the byte at i, which the grammar does not allow there.
func (s *scanner) syntax(i int, field, context string) *ParseError {
	return s.fail(i, field, "invalid JSON: invalid character %q %s", s.b[i], context)
}

// peek skips white space and returns the next byte, unread; false at the
// end of the input.
func (s *scanner) peek() (byte, bool) {
	for s.i < len(s.b) {
		switch c := s.b[s.i]; c {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return c, true
		}
	}
	return 0, false
}

// kindOf names the type of the value that starts with c, or "" when no
// value starts with c.
func kindOf(c byte) string {
	switch {
	case c == '{':
		return "an object"
	case c == '[':
		return "an array"
	case c == '"':
		return "a string"
	case c == '-' || '0' <= c && c <= '9':
		return "a number"
	case c == 't' || c == 'f':
		return "a boolean"
	case c == 'n':
		return "null"
	}
	return ""
}

// begin checks that the next value is of the kind wanted ("an object", "a
// string", ... as kindOf names them) and leaves s at its first byte.
func (s *scanner) begin(field, want string) error {
	c, ok := s.peek()
	if !ok {
		return s.eof(field)
	}
	switch k := kindOf(c); k {
	case want:
		return nil
	case "":
		return s.syntax(s.i, field, "looking for the beginning of a value")
	default:
		return s.fail(s.i, field, "must be %s, not %s", want, k)
	}
}

// object reads an object, calling member for each key with s at the start
// of the value (which member must read) and at the offset of the key. The
// key may alias the input: member must copy what it keeps.
func (s *scanner) object(field string, member func(key []byte, at int) error) error {
	if err := s.begin(field, "an object"); err != nil {
		return err
	}
	if s.depth++; s.depth > maxDepth {
		return s.fail(s.i, field, "nested more than %d deep", maxDepth)
	}
	s.i++ // '{'
	if c, ok := s.peek(); ok && c == '}' {
		s.i++
		s.depth--
		return nil
	}
	for {
		c, ok := s.peek()
		if !ok {
			return s.eof(field)
		}
		if c != '"' {
			return s.syntax(s.i, field, "looking for the beginning of an object key")
		}
		at := s.i
		k, err := s.rawStr(field)
		if err != nil {
			return err
		}
		if c, ok = s.peek(); !ok {
			return s.eof(field)
		}
		if c != ':' {
			return s.syntax(s.i, field, "after object key")
		}
		s.i++
		if err := member(k, at); err != nil {
			return err
		}
		if c, ok = s.peek(); !ok {
			return s.eof(field)
		}
		s.i++
		switch c {
		case ',':
		case '}':
			s.depth--
			return nil
		default:
			return s.syntax(s.i-1, field, "after object key:value pair")
		}
	}
}

// array reads an array, calling elem with the index of each element and s
// at its start (elem must read it).
func (s *scanner) array(field string, elem func(i int) error) error {
	if err := s.begin(field, "an array"); err != nil {
		return err
	}
	if s.depth++; s.depth > maxDepth {
		return s.fail(s.i, field, "nested more than %d deep", maxDepth)
	}
	s.i++ // '['
	if c, ok := s.peek(); ok && c == ']' {
		s.i++
		s.depth--
		return nil
	}
	for n := 0; ; n++ {
		if err := elem(n); err != nil {
			return err
		}
		c, ok := s.peek()
		if !ok {
			return s.eof(field)
		}
		s.i++
		switch c {
		case ',':
		case ']':
			s.depth--
			return nil
		default:
			return s.syntax(s.i-1, field, "after array element")
		}
	}
}

// str reads a string value.
func (s *scanner) str(field string) (string, error) {
	b, err := s.rawStr(field)
	return string(b), err
}

// rawStr reads a string value and returns its decoded bytes, which alias the
// input when the string has no escapes and is plain ASCII.
func (s *scanner) rawStr(field string) ([]byte, error) {
	if err := s.begin(field, "a string"); err != nil {
		return nil, err
	}
	start := s.i + 1
	// Fast path: printable ASCII without escapes, as every known map is.
	i := start
	for ; i < len(s.b); i++ {
		c := s.b[i]
		if c == '"' {
			s.i = i + 1
			return s.b[start:i], nil
		}
		if c == '\\' || c < 0x20 || c >= utf8.RuneSelf {
			break
		}
	}
	buf := append([]byte(nil), s.b[start:i]...)
	for {
		if i >= len(s.b) {
			return nil, s.eof(field)
		}
		switch c := s.b[i]; {
		case c == '"':
			s.i = i + 1
			return buf, nil
		case c < 0x20:
			return nil, s.syntax(i, field, "in string literal")
		case c == '\\':
			var err error
			if buf, i, err = s.escape(buf, i, field); err != nil {
				return nil, err
			}
		case c < utf8.RuneSelf:
			buf = append(buf, c)
			i++
		default:
			r, size := utf8.DecodeRune(s.b[i:])
			if r == utf8.RuneError && size == 1 {
				buf = utf8.AppendRune(buf, utf8.RuneError)
			} else {
				buf = append(buf, s.b[i:i+size]...)
			}
			i += size
		}
	}
}

// escape appends what the escape sequence at i (a backslash) stands for to
// buf, and returns the index after the sequence.
func (s *scanner) escape(buf []byte, i int, field string) ([]byte, int, error) {
	if i+1 >= len(s.b) {
		return nil, 0, s.eof(field)
	}
	switch e := s.b[i+1]; e {
	case '"', '\\', '/':
		buf = append(buf, e)
	case 'b':
		buf = append(buf, '\b')
	case 'f':
		buf = append(buf, '\f')
	case 'n':
		buf = append(buf, '\n')
	case 'r':
		buf = append(buf, '\r')
	case 't':
		buf = append(buf, '\t')
	case 'u':
		r, err := s.hex4(i+2, field)
		if err != nil {
			return nil, 0, err
		}
		i += 6
		if utf16.IsSurrogate(r) {
			// A high surrogate pairs with an escaped low one that
			// follows; anything else is U+FFFD, as in encoding/json.
			r2 := rune(-1)
			if i+1 < len(s.b) && s.b[i] == '\\' && s.b[i+1] == 'u' {
				if v, err := s.hex4(i+2, field); err == nil {
					r2 = v
				}
			}
			if d := utf16.DecodeRune(r, r2); d != utf8.RuneError {
				r = d
				i += 6
			} else {
				r = utf8.RuneError
			}
		}
		return utf8.AppendRune(buf, r), i, nil
	default:
		return nil, 0, s.syntax(i+1, field, "in string escape code")
	}
	return buf, i + 2, nil
}

// hex4 decodes the four hex digits of a \u escape that start at i.
func (s *scanner) hex4(i int, field string) (rune, error) {
	var r rune
	for j := i; j < i+4; j++ {
		if j >= len(s.b) {
			return 0, s.eof(field)
		}
		c := s.b[j]
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c -= 'a' - 10
		case 'A' <= c && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, s.syntax(j, field, "in \\u hexadecimal character escape")
		}
		r = r<<4 | rune(c)
	}
	return r, nil
}

// number reads a number value and returns its literal, which aliases the
// input.
func (s *scanner) number(field string) ([]byte, error) {
	if err := s.begin(field, "a number"); err != nil {
		return nil, err
	}
	start, i := s.i, s.i
	digits := func(context string) error {
		if i >= len(s.b) {
			return s.eof(field)
		}
		if c := s.b[i]; c < '0' || c > '9' {
			return s.syntax(i, field, context)
		}
		for i < len(s.b) && '0' <= s.b[i] && s.b[i] <= '9' {
			i++
		}
		return nil
	}
	if s.b[i] == '-' {
		i++
	}
	if i < len(s.b) && s.b[i] == '0' {
		i++ // JSON allows no digit after a leading 0
	} else if err := digits("in numeric literal"); err != nil {
		return nil, err
	}
	if i < len(s.b) && s.b[i] == '.' {
		i++
		if err := digits("after decimal point in numeric literal"); err != nil {
			return nil, err
		}
	}
	if i < len(s.b) && (s.b[i] == 'e' || s.b[i] == 'E') {
		i++
		if i < len(s.b) && (s.b[i] == '+' || s.b[i] == '-') {
			i++
		}
		if err := digits("in exponent of numeric literal"); err != nil {
			return nil, err
		}
	}
	s.i = i
	return s.b[start:i], nil
}

// integer reads a number that must be an integer in [0, limit].
func (s *scanner) integer(field string, limit int64) (int64, error) {
	s.peek()
	at := s.i
	lit, err := s.number(field)
	if err != nil {
		return 0, err
	}
	digits, neg := bytes.CutPrefix(lit, []byte("-"))
	switch {
	case bytes.ContainsAny(lit, ".eE"):
		return 0, s.fail(at, field, "must be an integer, not %s", lit)
	case neg && bytes.ContainsAny(digits, "123456789"):
		return 0, s.fail(at, field, "must not be negative, got %s", lit)
	}
	var v int64
	for _, c := range digits {
		d := int64(c - '0')
		if v > (limit-d)/10 {
			return 0, s.fail(at, field, "%s is out of range (at most %d)", lit, limit)
		}
		v = v*10 + d
	}
	return v, nil
}

// skip reads a value of any type and drops it.
func (s *scanner) skip(field string) error {
	c, ok := s.peek()
	if !ok {
		return s.eof(field)
	}
	switch kindOf(c) {
	case "an object":
		return s.object(field, func([]byte, int) error { return s.skip(field) })
	case "an array":
		return s.array(field, func(int) error { return s.skip(field) })
	case "a string":
		_, err := s.rawStr(field)
		return err
	case "a number":
		_, err := s.number(field)
		return err
	}
	for _, lit := range []string{"true", "false", "null"} {
		if lit[0] != c {
			continue
		}
		for j := range len(lit) {
			if s.i+j >= len(s.b) {
				return s.eof(field)
			}
			if s.b[s.i+j] != lit[j] {
				return s.syntax(s.i+j, field, "in literal "+lit)
			}
		}
		s.i += len(lit)
		return nil
	}
	return s.syntax(s.i, field, "looking for the beginning of a value")
}
