package errmap

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/kvwire/kvwire/memdx"
)

// ErrCorrupt is matched (errors.Is) by every error Parse returns: the map
// cannot be used, and RFC 0013 says the connection should go on without
// XERROR.
var ErrCorrupt = errors.New("errmap: corrupt error map")

// ErrUnsupportedVersion is matched, besides ErrCorrupt, by the error for a
// map whose version is above MaxVersion.
var ErrUnsupportedVersion = errors.New("errmap: unsupported error map version")

// ParseError says what was wrong with a map and where.
type ParseError struct {
	// Key is the "errors" key of the entry at fault, as the map wrote it;
	// "" when the problem is outside the entries.
	Key string
	// Field is the field at fault: a top-level name ("version", "errors")
	// when Key is "", else a path inside the entry ("name", "attrs[2]",
	// "retry.interval"). "" means the document (or the entry) as a whole.
	Field string
	// Offset is how many bytes of the input had been read when the problem
	// was found: just past the value at fault, or where the JSON broke.
	Offset int64
	// Reason says what was wrong.
	Reason string
	// Err is the underlying error, if any: a *json.SyntaxError,
	// io.ErrUnexpectedEOF or ErrUnsupportedVersion.
	Err error
}

// Path returns where the problem is: `version`, `errors["7ff0"].retry.ceil`,
// `errors["zz"]`, or `document`.
func (e *ParseError) Path() string {
	switch {
	case e.Key != "" && e.Field != "":
		return "errors[" + strconv.Quote(e.Key) + "]." + e.Field
	case e.Key != "":
		return "errors[" + strconv.Quote(e.Key) + "]"
	case e.Field != "":
		return e.Field
	}
	return "document"
}

func (e *ParseError) Error() string {
	return fmt.Sprintf("errmap: corrupt error map: %s: %s (at offset %d)", e.Path(), e.Reason, e.Offset)
}

// Is makes errors.Is(err, ErrCorrupt) true.
func (e *ParseError) Is(target error) bool { return target == ErrCorrupt }

// Unwrap returns Err.
func (e *ParseError) Unwrap() error { return e.Err }

// maxMillis is the largest millisecond count a time.Duration holds.
const maxMillis = int64(maxDuration / time.Millisecond)

// Parse decodes an error map (the value of a GET_ERROR_MAP response) of
// format version 1 or 2. It does not retain b.
//
// Any problem yields a *ParseError (errors.Is(err, ErrCorrupt)) naming the
// key and field at fault; the package doc lists what counts as corrupt.
// Parse never panics, whatever b holds.
func Parse(b []byte) (*Map, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	p := parser{dec: dec}
	m, err := p.document()
	if err != nil {
		return nil, err
	}
	return m, nil
}

// parser walks the JSON tokens of one map; it stops at the first problem.
type parser struct {
	dec *json.Decoder
	key string // the "errors" key of the entry being read, "" outside
}

func (p *parser) fail(field, format string, args ...any) *ParseError {
	return &ParseError{Key: p.key, Field: field, Offset: p.dec.InputOffset(), Reason: fmt.Sprintf(format, args...)}
}

// token reads the next token; a syntax error or an early end is reported
// against field.
func (p *parser) token(field string) (json.Token, error) {
	tok, err := p.dec.Token()
	if err != nil {
		return nil, p.syntax(field, err)
	}
	return tok, nil
}

// syntax reports an error of the JSON decoder against field.
func (p *parser) syntax(field string, err error) *ParseError {
	e := p.fail(field, "invalid JSON: %v", err)
	var se *json.SyntaxError
	switch {
	case errors.As(err, &se):
		e.Offset = se.Offset
	case err == io.EOF || errors.Is(err, io.ErrUnexpectedEOF):
		e.Reason = "invalid JSON: unexpected end of input"
		err = io.ErrUnexpectedEOF
	}
	e.Err = err
	return e
}

// kind names a token's JSON type for messages.
func kind(tok json.Token) string {
	switch t := tok.(type) {
	case json.Delim:
		switch t {
		case '{':
			return "an object"
		case '[':
			return "an array"
		}
		return "'" + t.String() + "'"
	case string:
		return "a string"
	case json.Number:
		return "a number"
	case bool:
		return "a boolean"
	case nil:
		return "null"
	}
	return fmt.Sprintf("%T", tok)
}

// open reads the opening delimiter of an object or array value.
func (p *parser) open(field string, want json.Delim) error {
	tok, err := p.token(field)
	if err != nil {
		return err
	}
	if d, ok := tok.(json.Delim); !ok || d != want {
		what := "an object"
		if want == '[' {
			what = "an array"
		}
		return p.fail(field, "must be %s, not %s", what, kind(tok))
	}
	return nil
}

// close reads the closing delimiter after dec.More has reported false.
func (p *parser) close(field string) error {
	_, err := p.token(field)
	return err
}

// name reads an object key.
func (p *parser) name(field string) (string, error) {
	tok, err := p.token(field)
	if err != nil {
		return "", err
	}
	s, ok := tok.(string)
	if !ok { // Decoder.Token should have refused this already
		return "", p.fail(field, "expected a key, found %s", kind(tok))
	}
	return s, nil
}

func (p *parser) str(field string) (string, error) {
	tok, err := p.token(field)
	if err != nil {
		return "", err
	}
	s, ok := tok.(string)
	if !ok {
		return "", p.fail(field, "must be a string, not %s", kind(tok))
	}
	return s, nil
}

// integer reads a JSON number written as an integer (no fraction, no
// exponent) in [0, limit].
func (p *parser) integer(field string, limit int64) (int64, error) {
	tok, err := p.token(field)
	if err != nil {
		return 0, err
	}
	n, ok := tok.(json.Number)
	if !ok {
		return 0, p.fail(field, "must be a number, not %s", kind(tok))
	}
	v, err := strconv.ParseInt(string(n), 10, 64)
	switch {
	case err != nil && strings.ContainsAny(string(n), ".eE"):
		return 0, p.fail(field, "must be an integer, not %s", n)
	case err != nil, v > limit:
		return 0, p.fail(field, "%s is out of range (at most %d)", n, limit)
	case v < 0:
		return 0, p.fail(field, "must not be negative, got %s", n)
	}
	return v, nil
}

func (p *parser) millis(field string) (time.Duration, error) {
	v, err := p.integer(field, maxMillis)
	return time.Duration(v) * time.Millisecond, err
}

// skip reads and drops one value of any type.
func (p *parser) skip(field string) error {
	var v json.RawMessage
	if err := p.dec.Decode(&v); err != nil {
		return p.syntax(field, err)
	}
	return nil
}

// seen records which known fields of an object were present, to find
// missing and duplicate ones.
type seen uint8

func (p *parser) once(s *seen, bit uint8, field string) error {
	if *s&(1<<bit) != 0 {
		return p.fail(field, "appears twice")
	}
	*s |= 1 << bit
	return nil
}

func (p *parser) document() (*Map, error) {
	if err := p.open("", '{'); err != nil {
		return nil, err
	}
	const (
		fVersion = iota
		fRevision
		fErrors
	)
	var (
		m   Map
		got seen
	)
	for p.dec.More() {
		k, err := p.name("")
		if err != nil {
			return nil, err
		}
		switch k {
		case "version":
			if err := p.once(&got, fVersion, k); err != nil {
				return nil, err
			}
			v, err := p.integer(k, math.MaxInt)
			if err != nil {
				return nil, err
			}
			if v == 0 {
				return nil, p.fail(k, "must be 1 or 2, got 0")
			}
			if v > MaxVersion {
				e := p.fail(k, "%d is above the highest version understood (%d)", v, MaxVersion)
				e.Err = ErrUnsupportedVersion
				return nil, e
			}
			m.Version = int(v)
		case "revision":
			if err := p.once(&got, fRevision, k); err != nil {
				return nil, err
			}
			v, err := p.integer(k, math.MaxInt)
			if err != nil {
				return nil, err
			}
			m.Revision = int(v)
		case "errors":
			if err := p.once(&got, fErrors, k); err != nil {
				return nil, err
			}
			if m.entries, err = p.entries(); err != nil {
				return nil, err
			}
		default:
			if err := p.skip(k); err != nil {
				return nil, err
			}
		}
	}
	if err := p.close(""); err != nil {
		return nil, err
	}
	for _, f := range []struct {
		bit  uint8
		name string
	}{{fVersion, "version"}, {fRevision, "revision"}, {fErrors, "errors"}} {
		if got&(1<<f.bit) == 0 {
			return nil, p.fail(f.name, "missing")
		}
	}
	if tok, err := p.dec.Token(); err != io.EOF {
		e := p.fail("", "unexpected data after the map")
		if err == nil {
			e.Reason += " (" + kind(tok) + ")"
		}
		return nil, e
	}
	return &m, nil
}

func (p *parser) entries() ([]Entry, error) {
	if err := p.open("errors", '{'); err != nil {
		return nil, err
	}
	var (
		entries []Entry
		keys    = map[memdx.Status]string{}
	)
	for p.dec.More() {
		k, err := p.name("errors")
		if err != nil {
			return nil, err
		}
		p.key = k
		st, reason := statusKey(k)
		if reason != "" {
			return nil, p.fail("", "key %s", reason)
		}
		if other, dup := keys[st]; dup {
			return nil, p.fail("", "key names status 0x%04x, as key %q did before it", uint16(st), other)
		}
		keys[st] = k
		e, err := p.entry(st)
		if err != nil {
			return nil, err
		}
		entries = append(entries, e)
		p.key = ""
	}
	if err := p.close("errors"); err != nil {
		return nil, err
	}
	slices.SortFunc(entries, func(a, b Entry) int { return int(a.Status) - int(b.Status) })
	return entries, nil
}

// statusKey decodes an "errors" key: hexadecimal digits, no prefix or sign,
// value at most 0xffff. It returns a reason when the key is not one.
func statusKey(k string) (memdx.Status, string) {
	if k == "" {
		return 0, "is empty, not a hexadecimal status code"
	}
	var v uint32
	for i := 0; i < len(k); i++ {
		c := k[i]
		var d byte
		switch {
		case '0' <= c && c <= '9':
			d = c - '0'
		case 'a' <= c && c <= 'f':
			d = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			d = c - 'A' + 10
		default:
			return 0, "is not a hexadecimal status code"
		}
		v = v<<4 | uint32(d)
		if v > 0xffff {
			return 0, "is out of range: status codes are 0..ffff"
		}
	}
	return memdx.Status(v), ""
}

func (p *parser) entry(st memdx.Status) (Entry, error) {
	e := Entry{Status: st}
	if err := p.open("", '{'); err != nil {
		return e, err
	}
	const (
		fName = iota
		fDesc
		fAttrs
		fRetry
	)
	var got seen
	for p.dec.More() {
		k, err := p.name("")
		if err != nil {
			return e, err
		}
		switch k {
		case "name":
			if err = p.once(&got, fName, k); err == nil {
				e.Name, err = p.str(k)
			}
		case "desc":
			if err = p.once(&got, fDesc, k); err == nil {
				e.Desc, err = p.str(k)
			}
		case "attrs":
			if err = p.once(&got, fAttrs, k); err == nil {
				e.Attrs, err = p.attrs()
			}
		case "retry":
			if err = p.once(&got, fRetry, k); err == nil {
				e.Retry, err = p.retry()
			}
		default:
			err = p.skip(k)
		}
		if err != nil {
			return e, err
		}
	}
	if err := p.close(""); err != nil {
		return e, err
	}
	switch {
	case got&(1<<fName) == 0:
		return e, p.fail("name", "missing")
	case got&(1<<fAttrs) == 0:
		return e, p.fail("attrs", "missing")
	}
	return e, nil
}

func (p *parser) attrs() (Attrs, error) {
	if err := p.open("attrs", '['); err != nil {
		return 0, err
	}
	var s Attrs
	for i := 0; p.dec.More(); i++ {
		name, err := p.str("attrs[" + strconv.Itoa(i) + "]")
		if err != nil {
			return 0, err
		}
		if a, ok := ParseAttr(name); ok {
			s |= 1 << a
		}
	}
	return s, p.close("attrs")
}

func (p *parser) retry() (*RetrySpec, error) {
	if err := p.open("retry", '{'); err != nil {
		return nil, err
	}
	const (
		fStrategy = iota
		fAfter
		fInterval
		fCeil
		fMaxDuration
	)
	var (
		r   RetrySpec
		got seen
	)
	for p.dec.More() {
		k, err := p.name("retry")
		if err != nil {
			return nil, err
		}
		field := "retry." + k
		var (
			bit uint8
			dst *time.Duration
		)
		switch k {
		case "strategy":
			if err := p.once(&got, fStrategy, field); err != nil {
				return nil, err
			}
			name, err := p.str(field)
			if err != nil {
				return nil, err
			}
			var ok bool
			if r.Strategy, ok = parseStrategy(name); !ok {
				return nil, p.fail(field, "unknown strategy %q (want constant, linear or exponential)", name)
			}
			continue
		case "after":
			bit, dst = fAfter, &r.After
		case "interval":
			bit, dst = fInterval, &r.Interval
		case "ceil":
			bit, dst = fCeil, &r.Ceil
		case "max-duration":
			bit, dst = fMaxDuration, &r.MaxDuration
		default:
			if err := p.skip(field); err != nil {
				return nil, err
			}
			continue
		}
		if err := p.once(&got, bit, field); err != nil {
			return nil, err
		}
		if *dst, err = p.millis(field); err != nil {
			return nil, err
		}
	}
	if err := p.close("retry"); err != nil {
		return nil, err
	}
	for _, f := range []struct {
		bit  uint8
		name string
	}{{fStrategy, "retry.strategy"}, {fAfter, "retry.after"}, {fInterval, "retry.interval"}} {
		if got&(1<<f.bit) == 0 {
			return nil, p.fail(f.name, "missing")
		}
	}
	return &r, nil
}
