package errmap

import (
	"iter"
	"math/bits"
	"strconv"
	"strings"
)

// Attr is one error attribute of the map. The constants are every attribute
// kv_engine's docs/ErrorMap.md lists plus "auto-retry" of RFC 0013; Parse
// ignores attribute names outside this list (see the package doc).
//
// The zero Attr is not an attribute.
type Attr uint8

// The known attributes. The comment after each is its name in the map.
const (
	AttrItemDeleted          Attr = iota + 1 // item-deleted: the error is about a soft-deleted document
	AttrItemLocked                           // item-locked: the error is about a locked document
	AttrItemOnly                             // item-only: a constraint on the item itself failed
	AttrInvalidInput                         // invalid-input: the request violates the operation's rules or a limit
	AttrFetchConfig                          // fetch-config: the client's cluster map may be outdated
	AttrConnStateInvalidated                 // conn-state-invalidated: the connection must be re-established
	AttrAuth                                 // auth: authentication or authorization failed
	AttrSpecialHandling                      // special-handling: must be handled specially or the connection dropped
	AttrSupport                              // support: the operation is not supported here
	AttrTemp                                 // temp: transient (which alone does not make it retriable)
	AttrInternal                             // internal: an internal server error
	AttrRetryNow                             // retry-now: may be retried immediately
	AttrRetryLater                           // retry-later: may be retried after some time
	AttrNoRetry                              // no-retry: must not be retried
	AttrSubdoc                               // subdoc: about the sub-document subsystem
	AttrDCP                                  // dcp: about the DCP subsystem
	AttrRateLimit                            // rate-limit: rate limiting applies (format version 2)
	AttrSystemConstraint                     // system-constraint: a system limit was hit (format version 2)
	AttrSuccess                              // success: the status reports success
	AttrAutoRetry                            // auto-retry: retry as the entry's retry spec says (RFC 0013)

	attrEnd // one past the last known attribute
)

var attrNames = [attrEnd]string{
	AttrItemDeleted:          "item-deleted",
	AttrItemLocked:           "item-locked",
	AttrItemOnly:             "item-only",
	AttrInvalidInput:         "invalid-input",
	AttrFetchConfig:          "fetch-config",
	AttrConnStateInvalidated: "conn-state-invalidated",
	AttrAuth:                 "auth",
	AttrSpecialHandling:      "special-handling",
	AttrSupport:              "support",
	AttrTemp:                 "temp",
	AttrInternal:             "internal",
	AttrRetryNow:             "retry-now",
	AttrRetryLater:           "retry-later",
	AttrNoRetry:              "no-retry",
	AttrSubdoc:               "subdoc",
	AttrDCP:                  "dcp",
	AttrRateLimit:            "rate-limit",
	AttrSystemConstraint:     "system-constraint",
	AttrSuccess:              "success",
	AttrAutoRetry:            "auto-retry",
}

// KnownAttrs returns every known attribute in ascending order. The caller
// owns the slice.
func KnownAttrs() []Attr {
	out := make([]Attr, 0, attrEnd-1)
	for a := Attr(1); a < attrEnd; a++ {
		out = append(out, a)
	}
	return out
}

// ParseAttr returns the attribute with the given map name ("retry-now"), or
// false when the name is not a known attribute. Names are case-sensitive, as
// in the map.
func ParseAttr(name string) (Attr, bool) { return parseAttr([]byte(name)) }

func parseAttr(name []byte) (Attr, bool) {
	for a := Attr(1); a < attrEnd; a++ {
		if attrNames[a] == string(name) {
			return a, true
		}
	}
	return 0, false
}

// Valid reports whether a is one of the known attributes.
func (a Attr) Valid() bool { return a > 0 && a < attrEnd }

// String returns the attribute's name in the map, or "Attr(n)" when a is not
// a known attribute.
func (a Attr) String() string {
	if a.Valid() {
		return attrNames[a]
	}
	return "Attr(" + strconv.Itoa(int(a)) + ")"
}

// Attrs is a set of attributes. The zero value is the empty set. It is a
// value: copying it copies the set.
type Attrs uint32

// Each known Attr is one bit of Attrs.
var _ = [32 - attrEnd]struct{}{}

// NewAttrs returns the set of the given attributes; values that are not known
// attributes are left out.
func NewAttrs(as ...Attr) Attrs {
	var s Attrs
	for _, a := range as {
		if a.Valid() {
			s |= 1 << a
		}
	}
	return s
}

// Has reports whether a is in the set.
func (s Attrs) Has(a Attr) bool { return a.Valid() && s&(1<<a) != 0 }

// Len returns the number of attributes in the set.
func (s Attrs) Len() int { return bits.OnesCount32(uint32(s)) }

// All yields the attributes of the set in ascending order.
func (s Attrs) All() iter.Seq[Attr] {
	return func(yield func(Attr) bool) {
		for a := Attr(1); a < attrEnd; a++ {
			if s.Has(a) && !yield(a) {
				return
			}
		}
	}
}

// String lists the set's attribute names in ascending order, separated by
// commas ("item-only,retry-now"); the empty set is "".
func (s Attrs) String() string {
	var b strings.Builder
	for a := range s.All() {
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(attrNames[a])
	}
	return b.String()
}
