package errmap

import (
	"slices"

	"github.com/kvwire/kvwire/memdx"
)

// MaxVersion is the highest error-map format version this package parses.
// The connection asks for it in GET_ERROR_MAP
// (memdx.NewGetErrorMap(errmap.MaxVersion)); Parse rejects a map whose
// version is higher.
const MaxVersion = 2

// Map is one node's error map.
//
// A Map is immutable after Parse: every method is safe for concurrent use,
// and whoever holds it shares it without copying. Callers must not assign
// to its fields.
type Map struct {
	// Version is the format version, 1 or 2: the version says which
	// attributes the map may use.
	Version int
	// Revision counts changes to the map's codes and their attributes. It
	// orders maps of one node whatever their Version: the server derives
	// v1 from v2 with a higher revision (kv_engine docs/ErrorMap.md).
	Revision int

	entries []Entry // sorted by Status, no two alike
}

// Entry is what the map says about one status code.
type Entry struct {
	// Status is the code the entry describes.
	Status memdx.Status
	// Name is the short name for logs ("KEY_ENOENT").
	Name string
	// Desc is the longer description for messages; "" when the map has none.
	Desc string
	// Attrs is the set of known attributes; unknown ones were dropped.
	Attrs Attrs
	// Retry is the entry's retry spec, or nil when it has none. It is shared
	// by every copy of the entry: do not modify it.
	Retry *RetrySpec
}

// RetryIndicated reports whether the map says an operation that failed with
// this status may be retried: the entry has retry-now, retry-later or
// auto-retry, and does not have no-retry. This is RFC 0049's test ("KV Error
// Map Handling"): a status that passes it goes to the retry orchestrator with
// reason KV_ERROR_MAP_RETRY_INDICATED, any other unknown status fails the
// operation at once.
//
// Why these: retry-now and retry-later are the attributes RFC 0049 names;
// auto-retry is RFC 0013's way of saying "retry per the attached spec". temp
// does not count: kv_engine defines it as "transient ... does not mean the
// error is retriable". no-retry vetoes the others: when a map says both,
// not retrying is the conservative reading (RFC 0049: unknown errors must not
// be retried, to avoid data loss); no map seen so far has both.
//
// Whether a mutation that may have been applied is retried is not decided
// here but by the retry strategy.
func (e Entry) RetryIndicated() bool {
	const retry = 1<<AttrRetryNow | 1<<AttrRetryLater | 1<<AttrAutoRetry
	return e.Attrs&retry != 0 && !e.Attrs.Has(AttrNoRetry)
}

// Lookup returns the map's entry for s. It returns false when the map has no
// entry for s, or m is nil. It allocates nothing.
//
// RFC 0013: a client consults the map only for statuses it does not know;
// for those it knows, its own handling takes precedence.
func (m *Map) Lookup(s memdx.Status) (Entry, bool) {
	if m == nil {
		return Entry{}, false
	}
	lo, hi := 0, len(m.entries)
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		switch st := m.entries[mid].Status; {
		case st < s:
			lo = mid + 1
		case st > s:
			hi = mid
		default:
			return m.entries[mid], true
		}
	}
	return Entry{}, false
}

// Len returns the number of entries; 0 for a nil map.
func (m *Map) Len() int {
	if m == nil {
		return 0
	}
	return len(m.entries)
}

// Entries returns every entry in ascending Status order. The slice is a new
// copy the caller owns (the RetrySpecs it points to are still shared); nil
// for a nil map.
func (m *Map) Entries() []Entry {
	if m == nil {
		return nil
	}
	return slices.Clone(m.entries)
}
