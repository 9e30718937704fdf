package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
)

// Get with a projection: GetOptions.Project says what it does.

// projectionFlags are the common flags of a projection: JSON.
const projectionFlags = CommonFlagsJSON

// The projection is built and picked apart as JSON, not with the client's
// Transcoder: the server's sub-document values are JSON text, and a path
// names a place in a JSON document, which a Transcoder (whole values to
// bytes and flags, and back) cannot address. The result says JSON
// (projectionFlags, DatatypeJSON) and its ContentAs decodes it with the
// client's Transcoder, as a plain Get's does.

// projComp is one component of a projection path: an object key, or an
// array index.
type projComp struct {
	key   string
	index int
	isIdx bool
}

// parseProjectionPath splits a sub-document path into components: keys
// separated by dots (a key in backticks may hold dots and brackets; two
// backticks are one), each followed by any number of [index].
func parseProjectionPath(p string) ([]projComp, error) {
	bad := func(why string) ([]projComp, error) {
		return nil, fmt.Errorf("projection path %q: %s", p, why)
	}
	if p == "" {
		return bad("empty")
	}
	var out []projComp
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
			out = append(out, projComp{key: string(key)})
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
			out = append(out, projComp{index: n, isIdx: true})
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

// buildProjection shapes the read values into one object. Arrays are
// appended to, so the tree is built with pointers to slices.
func buildProjection(paths [][]projComp, values []json.RawMessage) ([]byte, error) {
	root := &pnode{obj: map[string]*pnode{}}
	for i, comps := range paths {
		if values[i] == nil {
			continue
		}
		if len(comps) > 0 && comps[0].isIdx {
			comps = append([]projComp{{key: ""}}, comps...)
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

// pickPath returns the value at comps in doc (decoded with UseNumber), or
// false when the document does not have it; a component of the wrong type
// is ErrPathMismatch, as the server would answer.
func pickPath(doc any, comps []projComp) (json.RawMessage, bool, error) {
	cur := doc
	for _, c := range comps {
		switch v := cur.(type) {
		case map[string]any:
			if c.isIdx {
				return nil, false, ErrPathMismatch
			}
			next, ok := v[c.key]
			if !ok {
				return nil, false, nil
			}
			cur = next
		case []any:
			if !c.isIdx {
				return nil, false, ErrPathMismatch
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
			return nil, false, ErrPathMismatch
		}
	}
	b, err := json.Marshal(cur)
	if err != nil {
		return nil, false, err
	}
	return b, true, nil
}

// projectionError is the *KeyValueError of a projection that failed
// outside the lookup itself.
func (col *Collection) projectionError(key string, sentinel, cause error) error {
	return col.c.refused("Get", 0, col, key, sentinel, cause)
}

// getProjected is Get with opts.Project.
func (col *Collection) getProjected(ctx context.Context, key string, project []string, p opParams) (GetResult, error) {
	comps := make([][]projComp, len(project))
	for i, p := range project {
		c, err := parseProjectionPath(p)
		if err != nil {
			return GetResult{}, col.projectionError(key, ErrInvalidArgument, err)
		}
		comps[i] = c
	}
	whole := len(project) > MaxSubdocSpecs
	var specs []LookupInSpec
	if whole {
		specs = []LookupInSpec{GetSpec("", nil)}
	} else {
		specs = make([]LookupInSpec, len(project))
		for i, p := range project {
			specs[i] = GetSpec(p, nil)
		}
	}
	o, err := col.lookupInOp("Get", key, specs, p, false, 0)
	if err != nil {
		return GetResult{}, err
	}
	r, err := run(ctx, o, (*op).lookupInResult)
	if err != nil {
		return GetResult{}, err
	}
	values := make([]json.RawMessage, len(project))
	if whole {
		body, err := r.ValueAt(0)
		if err != nil {
			return GetResult{}, err
		}
		d := json.NewDecoder(bytes.NewReader(body))
		d.UseNumber()
		var doc any
		if err := d.Decode(&doc); err != nil {
			return GetResult{}, col.projectionError(key, ErrDocumentNotJSON, fmt.Errorf("the document is not JSON: %w", err))
		}
		for i := range project {
			v, ok, err := pickPath(doc, comps[i])
			if err != nil {
				sentinel := ErrPathMismatch
				if !errors.Is(err, ErrPathMismatch) {
					sentinel = ErrServerFailure
				}
				return GetResult{}, col.projectionError(key, sentinel, fmt.Errorf("projection path %q: %w", project[i], err))
			}
			if ok {
				values[i] = v
			}
		}
	} else {
		for i := range project {
			v, err := r.ValueAt(i)
			switch {
			case errors.Is(err, ErrPathNotFound):
			case err != nil:
				var se *SubdocError
				errors.As(err, &se)
				return GetResult{}, col.projectionError(key, se.Err, err)
			default:
				values[i] = v
			}
		}
	}
	out, err := buildProjection(comps, values)
	if err != nil {
		return GetResult{}, err
	}
	return GetResult{Value: out, Cas: r.Cas, Flags: projectionFlags, Datatype: DatatypeJSON,
		RetryAttempts: r.RetryAttempts, RetryReasons: r.RetryReasons, transcoder: col.c.opts.Transcoder}, nil
}
