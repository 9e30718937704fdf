package mockcluster

import (
	"bytes"
	"math"
	"strings"

	"github.com/kvwire/kvwire/memdx"
)

// Sub-document path limits (kv_engine: SUBDOC_PATH_MAX_LENGTH in
// protocol_binary.h; subjson's COMPONENTS_MAX).
const (
	// subdocPathMaxLen is the longest path the validators accept; a longer
	// one is EINVAL for the whole command.
	subdocPathMaxLen = 1024
	// subdocMaxDepth is the most path components, and the deepest a
	// document or an inserted value may nest.
	subdocMaxDepth = 32
)

// pathComp is one component of a sub-document path: a dictionary key (as
// it is written between the quotes in the JSON text, backtick escapes
// removed) or an array index (-1 is the last element).
type pathComp struct {
	key     string
	index   int
	isIndex bool
}

// parseSubdocPath splits a path as subjson does (kv_engine
// docs/SubDocument.md, "Path"; subjson's subdoc/path.cc): keys separated by
// dots, array indexes in brackets ("[-1]" is the last element, "[]" reads
// as index 0), backticks around text in which '.', '[' and ']' are literal
// (two backticks are a literal backtick). Keys are written as in the JSON
// text, so a quote or a control character must be escaped, and \u escapes
// are refused. An empty path is the document root. It answers
// SUBDOC_PATH_EINVAL for a path that does not parse and SUBDOC_PATH_E2BIG
// for one of more than 32 components.
//
// subjson's quirks are kept: a dot may precede an index ("a.[0]" is a[0])
// and a trailing dot is ignored ("a." is a).
func parseSubdocPath(p []byte) ([]pathComp, memdx.Status) {
	var comps []pathComp
	i := 0
	for i < len(p) {
		if p[i] == '[' {
			idx, n, ok := parsePathIndex(p[i:])
			if !ok {
				return nil, memdx.StatusSubdocPathInvalid
			}
			comps = append(comps, pathComp{index: idx, isIndex: true})
			i += n
			if i < len(p) {
				switch p[i] {
				case '[':
				case '.':
					i++
				default:
					return nil, memdx.StatusSubdocPathInvalid
				}
			}
		} else {
			key, n, ok := parsePathKey(p[i:])
			if !ok {
				return nil, memdx.StatusSubdocPathInvalid
			}
			comps = append(comps, pathComp{key: key})
			i += n
		}
		if len(comps) > subdocMaxDepth {
			return nil, memdx.StatusSubdocPathTooBig
		}
	}
	return comps, memdx.StatusSuccess
}

// jsonEscapes are the characters a backslash may escape in a path key (as
// in JSON; subjson refuses \u).
const jsonEscapes = "\"/\\bfnrt"

// parsePathKey reads a key up to an unescaped '.' (which it consumes) or
// '[' (which it leaves), and returns it without its backtick escapes.
func parsePathKey(p []byte) (string, int, bool) {
	inTicks, inEscape := false, false
	ticks := 0
	for i, c := range p {
		switch {
		case inEscape:
			if strings.IndexByte(jsonEscapes, c) < 0 {
				return "", 0, false
			}
			inEscape = false
		case c == '\\':
			inEscape = true
		case c == '"' || c < 0x1f:
			return "", 0, false
		}
		if c == '`' {
			ticks++
			inTicks = !inTicks
		}
		if inTicks {
			continue
		}
		switch c {
		case ']':
			return "", 0, false
		case '[', '.':
			if inEscape {
				return "", 0, false
			}
			key, ok := unescapeKey(p[:i], ticks)
			if c == '.' {
				i++
			}
			return key, i, ok
		}
	}
	if inTicks || inEscape {
		return "", 0, false
	}
	key, ok := unescapeKey(p, ticks)
	return key, len(p), ok
}

// unescapeKey removes a key's backtick escapes: a backtick at each end of
// the whole key, then single backticks, two backticks becoming one.
func unescapeKey(k []byte, ticks int) (string, bool) {
	if len(k) > 1 && k[0] == '`' && k[len(k)-1] == '`' {
		k = k[1 : len(k)-1]
		ticks -= 2
	}
	if len(k) == 0 {
		return "", false
	}
	if ticks == 0 {
		return string(k), true
	}
	out := make([]byte, 0, len(k))
	for i := 0; i < len(k); i++ {
		if k[i] != '`' {
			out = append(out, k[i])
		} else if i+1 < len(k) && k[i+1] == '`' {
			out = append(out, '`')
			i++
		}
	}
	return string(out), true
}

// parsePathIndex reads "[n]" or "[-1]" ("[]" is index 0, as in subjson).
// An index too large for an int still parses; it matches no element.
func parsePathIndex(p []byte) (int, int, bool) {
	end := bytes.IndexByte(p, ']')
	if end < 0 {
		return 0, 0, false
	}
	digits := p[1:end]
	if len(digits) > 0 && digits[0] == '-' {
		if string(digits) != "-1" {
			return 0, 0, false
		}
		return -1, end + 1, true
	}
	var n uint64
	for _, d := range digits {
		if d < '0' || d > '9' {
			return 0, 0, false
		}
		next := n*10 + uint64(d-'0')
		if next/10 != n {
			return 0, 0, false // overflow
		}
		n = next
	}
	if n > math.MaxInt {
		n = math.MaxInt
	}
	return int(n), end + 1, true
}
