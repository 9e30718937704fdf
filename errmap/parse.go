package errmap

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
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
	// Offset is the byte offset in the input of the key or value at fault,
	// or of the byte where the JSON syntax broke (the input's length when
	// it ended early).
	Offset int64
	// Reason says what was wrong.
	Reason string
	// Err is the underlying error, if any: io.ErrUnexpectedEOF when the
	// input ends early, ErrUnsupportedVersion for a version above
	// MaxVersion.
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
	p := parser{scanner{b: b, keyAt: -1}}
	return p.document()
}

// parser reads the error map's schema on top of the JSON scanner.
type parser struct{ scanner }

// seen records which known fields of an object were present, to find
// missing and duplicate ones.
type seen uint8

func (p *parser) once(s *seen, bit uint8, at int, field string) error {
	if *s&(1<<bit) != 0 {
		return p.fail(at, field, "appears twice")
	}
	*s |= 1 << bit
	return nil
}

func (p *parser) millis(field string) (time.Duration, error) {
	v, err := p.integer(field, maxMillis)
	return time.Duration(v) * time.Millisecond, err
}

func (p *parser) document() (*Map, error) {
	const (
		fVersion = iota
		fRevision
		fErrors
	)
	var (
		m   Map
		got seen
	)
	err := p.object("", func(key []byte, at int) error {
		switch string(key) {
		case "version":
			if err := p.once(&got, fVersion, at, "version"); err != nil {
				return err
			}
			p.peek()
			vat := p.i
			v, err := p.integer("version", math.MaxInt)
			if err != nil {
				return err
			}
			if v == 0 {
				return p.fail(vat, "version", "must be 1 or 2, got 0")
			}
			if v > MaxVersion {
				e := p.fail(vat, "version", "%d is above the highest version understood (%d)", v, MaxVersion)
				e.Err = ErrUnsupportedVersion
				return e
			}
			m.Version = int(v)
		case "revision":
			if err := p.once(&got, fRevision, at, "revision"); err != nil {
				return err
			}
			v, err := p.integer("revision", math.MaxInt)
			if err != nil {
				return err
			}
			m.Revision = int(v)
		case "errors":
			if err := p.once(&got, fErrors, at, "errors"); err != nil {
				return err
			}
			var err error
			m.entries, err = p.entries()
			return err
		default:
			return p.skip(string(key))
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	for _, f := range []struct {
		bit  uint8
		name string
	}{{fVersion, "version"}, {fRevision, "revision"}, {fErrors, "errors"}} {
		if got&(1<<f.bit) == 0 {
			return nil, p.fail(p.i, f.name, "missing")
		}
	}
	if _, more := p.peek(); more {
		return nil, p.fail(p.i, "", "unexpected data after the map")
	}
	return &m, nil
}

func (p *parser) entries() ([]Entry, error) {
	var (
		entries []Entry
		keyAt   = map[memdx.Status]int{} // offset of the key naming each status
	)
	err := p.object("errors", func(key []byte, at int) error {
		if len(key) == 0 {
			return p.fail(at, "errors", "an empty key is not a status code")
		}
		p.keyAt = at
		st, reason := statusKey(key)
		if reason != "" {
			return p.fail(at, "", "key %s", reason)
		}
		if other, dup := keyAt[st]; dup {
			return p.fail(at, "", "key names status 0x%04x, as key %q did before it", uint16(st), p.keyText(other))
		}
		keyAt[st] = at
		e, err := p.entry(st)
		if err != nil {
			return err
		}
		entries = append(entries, e)
		p.keyAt = -1
		return nil
	})
	if err != nil {
		return nil, err
	}
	slices.SortFunc(entries, func(a, b Entry) int { return int(a.Status) - int(b.Status) })
	return entries, nil
}

// statusKey decodes an "errors" key: hexadecimal digits, no prefix or sign,
// value at most 0xffff. It returns a reason when the key is not one.
func statusKey(k []byte) (memdx.Status, string) {
	if len(k) == 0 {
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
	const (
		fName = iota
		fDesc
		fAttrs
		fRetry
	)
	var (
		e   = Entry{Status: st}
		got seen
	)
	p.peek()
	start := p.i
	err := p.object("", func(key []byte, at int) (err error) {
		switch string(key) {
		case "name":
			if err = p.once(&got, fName, at, "name"); err == nil {
				e.Name, err = p.str("name")
			}
		case "desc":
			if err = p.once(&got, fDesc, at, "desc"); err == nil {
				e.Desc, err = p.str("desc")
			}
		case "attrs":
			if err = p.once(&got, fAttrs, at, "attrs"); err == nil {
				e.Attrs, err = p.attrs()
			}
		case "retry":
			if err = p.once(&got, fRetry, at, "retry"); err == nil {
				e.Retry, err = p.retry()
			}
		default:
			err = p.skip(string(key))
		}
		return err
	})
	switch {
	case err != nil:
		return e, err
	case got&(1<<fName) == 0:
		return e, p.fail(start, "name", "missing")
	case got&(1<<fAttrs) == 0:
		return e, p.fail(start, "attrs", "missing")
	}
	return e, nil
}

func (p *parser) attrs() (Attrs, error) {
	var s Attrs
	err := p.array("attrs", func(i int) error {
		name, err := p.rawStr("attrs[]")
		if pe, ok := err.(*ParseError); ok {
			// Name the element only now: most maps never need the string.
			pe.Field = "attrs[" + strconv.Itoa(i) + "]"
		}
		if err != nil {
			return err
		}
		if a, ok := parseAttr(name); ok {
			s |= 1 << a
		}
		return nil
	})
	return s, err
}

func (p *parser) retry() (*RetrySpec, error) {
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
	p.peek()
	start := p.i
	err := p.object("retry", func(key []byte, at int) error {
		var (
			bit   uint8
			dst   *time.Duration
			field string
		)
		switch string(key) {
		case "strategy":
			field = "retry.strategy"
			if err := p.once(&got, fStrategy, at, field); err != nil {
				return err
			}
			p.peek()
			vat := p.i
			name, err := p.str(field)
			if err != nil {
				return err
			}
			var ok bool
			if r.Strategy, ok = ParseStrategy(name); !ok {
				return p.fail(vat, field, "unknown strategy %q (want constant, linear or exponential)", name)
			}
			return nil
		case "after":
			bit, dst, field = fAfter, &r.After, "retry.after"
		case "interval":
			bit, dst, field = fInterval, &r.Interval, "retry.interval"
		case "ceil":
			bit, dst, field = fCeil, &r.Ceil, "retry.ceil"
		case "max-duration":
			bit, dst, field = fMaxDuration, &r.MaxDuration, "retry.max-duration"
		default:
			return p.skip("retry." + string(key))
		}
		if err := p.once(&got, bit, at, field); err != nil {
			return err
		}
		var err error
		*dst, err = p.millis(field)
		return err
	})
	if err != nil {
		return nil, err
	}
	for _, f := range []struct {
		bit  uint8
		name string
	}{{fStrategy, "retry.strategy"}, {fAfter, "retry.after"}, {fInterval, "retry.interval"}} {
		if got&(1<<f.bit) == 0 {
			return nil, p.fail(start, f.name, "missing")
		}
	}
	return &r, nil
}
