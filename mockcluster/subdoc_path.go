package mockcluster

import (
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
// docs/SubDocument.md, "Path"): components separated by dots, array
// indexes in brackets straight after the array's component, and backticks
// around text in which '.', '[' and ']' are literal (two backticks are a
// literal backtick). An empty path is the document root. It answers
// SUBDOC_PATH_EINVAL for a path that does not parse and SUBDOC_PATH_E2BIG
// for one of more than 32 components.
func parseSubdocPath(p []byte) ([]pathComp, memdx.Status) {
	var comps []pathComp
	i := 0
	for i < len(p) {
		// A key, unless the path (or a component after a dot) starts with
		// an index: only the root may be indexed without a key.
		if p[i] != '[' || len(comps) > 0 {
			key, n, ok := parsePathKey(p[i:])
			if !ok || len(key) == 0 {
				return nil, memdx.StatusSubdocPathInvalid
			}
			comps = append(comps, pathComp{key: key})
			i += n
		}
		for i < len(p) && p[i] == '[' {
			idx, n, ok := parsePathIndex(p[i:])
			if !ok {
				return nil, memdx.StatusSubdocPathInvalid
			}
			comps = append(comps, pathComp{index: idx, isIndex: true})
			i += n
		}
		if len(comps) > subdocMaxDepth {
			return nil, memdx.StatusSubdocPathTooBig
		}
		if i == len(p) {
			break
		}
		if p[i] != '.' || i+1 == len(p) {
			return nil, memdx.StatusSubdocPathInvalid
		}
		i++
		if p[i] == '[' {
			// "a.[0]": an index needs the array's key before it.
			return nil, memdx.StatusSubdocPathInvalid
		}
	}
	return comps, memdx.StatusSuccess
}

// parsePathKey reads a key component up to an unescaped '.' or '[' and
// returns it without its backticks, with the bytes it used.
func parsePathKey(p []byte) (string, int, bool) {
	var out []byte
	i := 0
	for i < len(p) {
		c := p[i]
		switch c {
		case '.', '[':
			return string(out), i, true
		case ']':
			return "", 0, false
		case '`':
			i++
			for {
				if i == len(p) {
					return "", 0, false // unterminated escape
				}
				if p[i] == '`' {
					if i+1 < len(p) && p[i+1] == '`' {
						out = append(out, '`')
						i += 2
						continue
					}
					i++
					break
				}
				out = append(out, p[i])
				i++
			}
			continue
		}
		out = append(out, c)
		i++
	}
	return string(out), i, true
}

// parsePathIndex reads "[n]" or "[-1]".
func parsePathIndex(p []byte) (int, int, bool) {
	end := 1
	for end < len(p) && p[end] != ']' {
		end++
	}
	if end == len(p) {
		return 0, 0, false
	}
	digits := p[1:end]
	if string(digits) == "-1" {
		return -1, end + 1, true
	}
	if len(digits) == 0 || len(digits) > 9 {
		return 0, 0, false
	}
	n := 0
	for _, d := range digits {
		if d < '0' || d > '9' {
			return 0, 0, false
		}
		n = n*10 + int(d-'0')
	}
	return n, end + 1, true
}
