package vbmap

import (
	"strconv"
	"strings"
)

// PeekVersion reads the version (top-level "rev" and "revEpoch") of a config
// without parsing the rest, for a client that sees the same config over and
// over (NOT_MY_VBUCKET bodies during a rebalance) and only needs to know
// whether it is newer than the one it holds: a byte scan, about a
// thousandth of Parse's cost, that allocates nothing.
//
// ok is false whenever the answer might differ from Parse's: a key spelled
// with escapes or in another case (encoding/json matches keys without
// regard to case), a value that is not a plain integer, JSON the scan
// cannot follow, or no "rev" at all. Callers then parse the config fully.
// The scan does not check what it passes over (a missing comma, trailing
// bytes, the inside of a nested value): on such malformed JSON it may
// answer, and Parse refuses it. When ok is true and Parse succeeds on the
// same bytes, Parse's Version is the one returned.
func PeekVersion(data []byte) (v Version, ok bool) {
	seenRev := false
	ok = eachTopLevel(data, func(k, val []byte) bool {
		key := string(k) // no allocation: used for comparison only
		switch {
		case key == "rev":
			n, err := strconv.ParseUint(string(val), 10, 64)
			if err != nil || !plainInt(val) {
				return false
			}
			v.Rev, seenRev = n, true
		case key == "revEpoch":
			n, err := strconv.ParseInt(string(val), 10, 64)
			if err != nil || !plainInt(val) {
				return false
			}
			v.Epoch = n
		case strings.EqualFold(key, "rev"), strings.EqualFold(key, "revEpoch"):
			return false
		}
		return true
	})
	if !ok || !seenRev {
		return Version{}, false
	}
	return v, true
}

// PeekUUIDs reads a config's cluster uuid (top-level "clusterUUID",
// published by Server 7.6.4 and later) and bucket uuid ("uuid") in a byte
// scan as PeekVersion does, for a client that only needs to know whose
// config it was served (Config.ClusterUUID, Config.BucketUUID): one that
// is absent or null is "". ok is false whenever the answer might differ
// from Parse's: a key spelled with escapes or in another case, a value
// that is not a string of printable ASCII without escapes (nor null), or
// JSON the scan cannot follow; on malformed JSON that it can (see
// PeekVersion) it answers, with the uuids as written. When ok is true and
// Parse succeeds on the same bytes, its uuids are the ones returned.
func PeekUUIDs(data []byte) (cluster, bucket string, ok bool) {
	ok = eachTopLevel(data, func(k, val []byte) bool {
		key := string(k) // no allocation: used for comparison only
		var dst *string
		switch {
		case key == "clusterUUID":
			dst = &cluster
		case key == "uuid":
			dst = &bucket
		case strings.EqualFold(key, "clusterUUID"), strings.EqualFold(key, "uuid"):
			return false
		default:
			return true
		}
		if string(val) == "null" {
			return true // encoding/json leaves the string as it was
		}
		if len(val) < 2 || val[0] != '"' {
			return false
		}
		for _, c := range val[1 : len(val)-1] {
			if c < 0x20 || c >= 0x7f || c == '\\' {
				return false
			}
		}
		*dst = string(val[1 : len(val)-1])
		return true
	})
	if !ok {
		return "", "", false
	}
	return cluster, bucket, true
}

// eachTopLevel calls fn with each key of the top-level JSON object in
// data (key: its bytes between the quotes) and the bytes of its value, in
// order, while fn returns true. It reports false when fn did, or when the
// scan cannot read data as an object (a key with escapes, malformed JSON),
// and allocates nothing itself.
func eachTopLevel(data []byte, fn func(key, val []byte) bool) bool {
	i := skipSpace(data, 0)
	if i >= len(data) || data[i] != '{' {
		return false
	}
	i++
	for {
		i = skipSpace(data, i)
		if i >= len(data) {
			return false
		}
		if data[i] == '}' {
			return true
		}
		if data[i] == ',' {
			i = skipSpace(data, i+1)
		}
		if i >= len(data) || data[i] != '"' {
			return false
		}
		start := i + 1
		end, escaped := scanString(data, start)
		if end < 0 || escaped {
			return false
		}
		key := data[start:end]
		i = skipSpace(data, end+1)
		if i >= len(data) || data[i] != ':' {
			return false
		}
		i = skipSpace(data, i+1)
		valStart := i
		i = skipValue(data, i)
		if i < 0 {
			return false
		}
		if !fn(key, data[valStart:i]) {
			return false
		}
	}
}

// plainInt reports whether b is an optional '-' and digits, without a
// leading zero (JSON's integer form).
func plainInt(b []byte) bool {
	if len(b) > 0 && b[0] == '-' {
		b = b[1:]
	}
	if len(b) == 0 || (len(b) > 1 && b[0] == '0') {
		return false
	}
	for _, c := range b {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// scanString returns the index of the closing quote of a string whose
// contents start at i, and whether it contains escapes; -1 if unterminated.
func scanString(b []byte, i int) (int, bool) {
	escaped := false
	for i < len(b) {
		switch b[i] {
		case '"':
			return i, escaped
		case '\\':
			escaped = true
			i += 2
			continue
		}
		if b[i] < 0x20 {
			return -1, false
		}
		i++
	}
	return -1, false
}

// skipValue returns the index just past the JSON value starting at i, or -1.
// Nested objects and arrays are skipped by depth, strings by their quotes;
// the contents are not validated (Parse does that).
func skipValue(b []byte, i int) int {
	if i >= len(b) {
		return -1
	}
	switch b[i] {
	case '"':
		end, _ := scanString(b, i+1)
		if end < 0 {
			return -1
		}
		return end + 1
	case '{', '[':
		depth := 0
		for i < len(b) {
			switch b[i] {
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1
				}
			case '"':
				end, _ := scanString(b, i+1)
				if end < 0 {
					return -1
				}
				i = end
			}
			i++
		}
		return -1
	}
	// A scalar: up to the next delimiter.
	start := i
	for i < len(b) && b[i] != ',' && b[i] != '}' && b[i] != ']' && b[i] != ' ' &&
		b[i] != '\n' && b[i] != '\r' && b[i] != '\t' {
		i++
	}
	if i == start {
		return -1
	}
	return i
}
