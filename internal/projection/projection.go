// Package projection is the JSON side of a Get with a projection
// (client.GetOptions.Project): it parses sub-document paths, picks them out
// of a whole document when there are too many to read as sub-document
// specs, and shapes the values read into one object like the document.
//
// It works on JSON, not through the client's Transcoder: the server's
// sub-document values are JSON text, and a path names a place in a JSON
// document, which a Transcoder (whole values to bytes and flags, and back)
// cannot address.
package projection

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/kvwire/kvwire/internal/kverr"
)

// Component is one component of a path: an object key, or an array index.
type Component struct {
	key   string
	index int
	isIdx bool
}

// Path is a parsed sub-document path.
type Path []Component

// Parse splits a sub-document path into components: keys separated by dots
// (a key in backticks may hold dots and brackets; two backticks are one),
// each followed by any number of [index] (-1: the last element).
func Parse(p string) (Path, error) {
	bad := func(why string) (Path, error) {
		return nil, fmt.Errorf("projection path %q: %s", p, why)
	}
	if p == "" {
		return bad("empty")
	}
	var out Path
	i := 0
	for {
		// A key.
		var key []byte
		if i < len(p) && p[i] == '`' {
			i++
			for {
				if i >= len(p) {
					return bad("unterminated backtick")
				}
				if p[i] == '`' {
					if i+1 < len(p) && p[i+1] == '`' {
						key = append(key, '`')
						i += 2
						continue
					}
					i++
					break
				}
				key = append(key, p[i])
				i++
			}
		} else {
			start := i
			for i < len(p) && p[i] != '.' && p[i] != '[' {
				if p[i] == ']' || p[i] == '`' {
					return bad("unexpected " + string(p[i]))
				}
				i++
			}
			key = []byte(p[start:i])
		}
		if len(key) == 0 && (len(out) > 0 || i >= len(p) || p[i] != '[') {
			return bad("empty key")
		}
		if len(key) > 0 || len(out) > 0 {
			out = append(out, Component{key: string(key)})
		}
		// Indexes.
		for i < len(p) && p[i] == '[' {
			end := bytes.IndexByte([]byte(p[i:]), ']')
			if end < 0 {
				return bad("unterminated [")
			}
			n, err := strconv.Atoi(p[i+1 : i+end])
			if err != nil || n < -1 {
				return bad("index " + strconv.Quote(p[i+1:i+end]))
			}
			out = append(out, Component{index: n, isIdx: true})
			i += end + 1
		}
		if i >= len(p) {
			return out, nil
		}
		if p[i] != '.' {
			return bad("unexpected " + string(p[i]))
		}
		i++
	}
}

// Build shapes values (values[i] read at paths[i]; nil: the document has
// no such path, left out) into one JSON object shaped like the document:
// {"address":{"city":"Paris"}} for address.city. An array index keeps the
// element, not its position: tags[2] gives {"tags":[<element 2>]}. Keys
// come in the order they were first projected. Arrays are appended to, so
// the tree is built with pointers to slices.
func Build(paths []Path, values []json.RawMessage) ([]byte, error) {
	root := &pnode{obj: map[string]*pnode{}}
	for i, comps := range paths {
		if values[i] == nil {
			continue
		}
		if len(comps) > 0 && comps[0].isIdx {
			comps = append(Path{{key: ""}}, comps...)
		}
		n := root
		for j, c := range comps {
			last := j == len(comps)-1
			var child *pnode
			if last {
				child = &pnode{raw: values[i]}
			} else if comps[j+1].isIdx {
				child = &pnode{isArr: true}
			} else {
				child = &pnode{obj: map[string]*pnode{}}
			}
			switch {
			case n.isArr:
				n.arr = append(n.arr, child)
				n = child
			default:
				if ex, ok := n.obj[c.key]; ok && !last && ex.raw == nil && ex.isArr == child.isArr {
					n = ex
					continue
				}
				if _, ok := n.obj[c.key]; !ok {
					n.order = append(n.order, c.key)
				}
				n.obj[c.key] = child
				n = child
			}
		}
	}
	return root.appendJSON(nil)
}

// pnode is a node of a projection being built: a raw value, an object (in
// the order its keys were first projected) or an array.
type pnode struct {
	raw   json.RawMessage
	obj   map[string]*pnode
	order []string
	isArr bool
	arr   []*pnode
}

func (n *pnode) appendJSON(b []byte) ([]byte, error) {
	switch {
	case n.raw != nil:
		return append(b, n.raw...), nil
	case n.isArr:
		b = append(b, '[')
		for i, c := range n.arr {
			if i > 0 {
				b = append(b, ',')
			}
			var err error
			if b, err = c.appendJSON(b); err != nil {
				return nil, err
			}
		}
		return append(b, ']'), nil
	}
	b = append(b, '{')
	for i, k := range n.order {
		if i > 0 {
			b = append(b, ',')
		}
		kb, err := json.Marshal(k)
		if err != nil {
			return nil, err
		}
		b = append(append(b, kb...), ':')
		if b, err = n.obj[k].appendJSON(b); err != nil {
			return nil, err
		}
	}
	return append(b, '}'), nil
}

// pick returns the value at comps in doc (decoded with UseNumber), or
// false when the document does not have it; a component of the wrong type
// is kverr.ErrPathMismatch, as the server would answer.
func pick(doc any, comps Path) (json.RawMessage, bool, error) {
	cur := doc
	for _, c := range comps {
		switch v := cur.(type) {
		case map[string]any:
			if c.isIdx {
				return nil, false, kverr.ErrPathMismatch
			}
			next, ok := v[c.key]
			if !ok {
				return nil, false, nil
			}
			cur = next
		case []any:
			if !c.isIdx {
				return nil, false, kverr.ErrPathMismatch
			}
			i := c.index
			if i == -1 {
				i = len(v) - 1
			}
			if i < 0 || i >= len(v) {
				return nil, false, nil
			}
			cur = v[i]
		default:
			return nil, false, kverr.ErrPathMismatch
		}
	}
	b, err := json.Marshal(cur)
	if err != nil {
		return nil, false, err
	}
	return b, true, nil
}

// Decode decodes a whole JSON document for PickAll (numbers kept as
// written).
func Decode(doc []byte) (any, error) {
	d := json.NewDecoder(bytes.NewReader(doc))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, fmt.Errorf("the document is not JSON: %w", err)
	}
	return v, nil
}

// PickAll picks paths (named names) out of doc, a document Decode
// decoded: values[i] is the value at paths[i], nil where the document does
// not have it. A path that treats a value as the wrong type fails matching
// kverr.ErrPathMismatch, as the server would answer.
func PickAll(doc any, paths []Path, names []string) ([]json.RawMessage, error) {
	values := make([]json.RawMessage, len(paths))
	for i, p := range paths {
		got, ok, err := pick(doc, p)
		if err != nil {
			return nil, fmt.Errorf("projection path %q: %w", names[i], err)
		}
		if ok {
			values[i] = got
		}
	}
	return values, nil
}

// Plan is a projection's paths, parsed, and how they are read: one
// sub-document get each, or, when there are more than the specs one
// lookup may hold, the whole document, picked apart here.
type Plan struct {
	names []string
	paths []Path
	whole bool
}

// wholeDocument is the one spec path of a plan that reads the whole
// document: the empty path (shared, never written).
var wholeDocument = []string{""}

// NewPlan parses names, to be read with at most maxSpecs sub-document
// specs. A name that does not parse is an error.
func NewPlan(names []string, maxSpecs int) (Plan, error) {
	paths := make([]Path, len(names))
	for i, n := range names {
		c, err := Parse(n)
		if err != nil {
			return Plan{}, err
		}
		paths[i] = c
	}
	return Plan{names: names, paths: paths, whole: len(names) > maxSpecs}, nil
}

// Whole reports whether the plan reads the whole document (FromDocument)
// rather than one spec per path (Build).
func (p *Plan) Whole() bool { return p.whole }

// Specs are the paths to read, one sub-document get each: the names, or
// the empty path (the whole body) when Whole.
func (p *Plan) Specs() []string {
	if p.whole {
		return wholeDocument
	}
	return p.names
}

// FromDocument picks the plan's paths out of body, the whole document,
// for Build. A failure comes with the sentinel it is:
// kverr.ErrDocumentNotJSON for a body that is not JSON,
// kverr.ErrPathMismatch for a path that treats a value as the wrong type,
// kverr.ErrServerFailure otherwise.
func (p *Plan) FromDocument(body []byte) (values []json.RawMessage, sentinel, err error) {
	doc, err := Decode(body)
	if err != nil {
		return nil, kverr.ErrDocumentNotJSON, err
	}
	values, err = PickAll(doc, p.paths, p.names)
	if err != nil {
		sentinel := kverr.ErrPathMismatch
		if !errors.Is(err, kverr.ErrPathMismatch) {
			sentinel = kverr.ErrServerFailure
		}
		return nil, sentinel, err
	}
	return values, nil, nil
}

// Build shapes values (values[i] read at the plan's path i; nil: the
// document has no such path) into one object like the document (Build).
func (p *Plan) Build(values []json.RawMessage) ([]byte, error) { return Build(p.paths, values) }
