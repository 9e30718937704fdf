package mockcluster

import (
	"strconv"

	"github.com/kvwire/kvwire/memdx"
)

// The JSON side of sub-document operations. Like subjson (which kv_engine
// uses), it edits the document's text in place: a mutation splices the new
// text into the old, so everything it does not touch keeps its bytes,
// spacing and key order, and a lookup returns the matched value's text as
// it is in the document.

type jkind uint8

const (
	jObject jkind = iota + 1
	jArray
	jString
	jNumber
	jLiteral // true, false, null
)

// jval is a parsed JSON value: its kind and where its text is. A member of
// an object also has the span of its key, quotes included.
type jval struct {
	kind       jkind
	start, end int
	keyStart   int
	keyEnd     int
	kids       []jval
}

// key returns a member's key as written between its quotes.
func (v *jval) key(doc []byte) string { return string(doc[v.keyStart+1 : v.keyEnd-1]) }

// startWithKey is where a member (or an element) begins in the text.
func (v *jval) startWithKey() int {
	if v.keyEnd > 0 {
		return v.keyStart
	}
	return v.start
}

type jparser struct {
	b     []byte
	i     int
	depth int
	// maxDepth is how deep containers may nest; deeper sets tooDeep.
	maxDepth int
	tooDeep  bool
}

func (p *jparser) ws() {
	for p.i < len(p.b) {
		switch p.b[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

// value parses one value at p.i (after whitespace).
func (p *jparser) value(v *jval) bool {
	p.ws()
	if p.i >= len(p.b) {
		return false
	}
	v.start = p.i
	switch c := p.b[p.i]; {
	case c == '{':
		v.kind = jObject
		return p.container(v, '}')
	case c == '[':
		v.kind = jArray
		return p.container(v, ']')
	case c == '"':
		v.kind = jString
		if !p.str() {
			return false
		}
	case c == '-' || c >= '0' && c <= '9':
		v.kind = jNumber
		if !p.number() {
			return false
		}
	default:
		v.kind = jLiteral
		ok := false
		for _, lit := range []string{"true", "false", "null"} {
			if len(p.b)-p.i >= len(lit) && string(p.b[p.i:p.i+len(lit)]) == lit {
				p.i += len(lit)
				ok = true
				break
			}
		}
		if !ok {
			return false
		}
	}
	v.end = p.i
	return true
}

func (p *jparser) container(v *jval, closer byte) bool {
	p.depth++
	if p.depth > p.maxDepth {
		p.tooDeep = true
		return false
	}
	p.i++
	p.ws()
	if p.i < len(p.b) && p.b[p.i] == closer {
		p.i++
		p.depth--
		v.end = p.i
		return true
	}
	for {
		var kid jval
		if closer == '}' {
			p.ws()
			if p.i >= len(p.b) || p.b[p.i] != '"' {
				return false
			}
			kid.keyStart = p.i
			if !p.str() {
				return false
			}
			kid.keyEnd = p.i
			p.ws()
			if p.i >= len(p.b) || p.b[p.i] != ':' {
				return false
			}
			p.i++
		}
		if !p.value(&kid) {
			return false
		}
		v.kids = append(v.kids, kid)
		p.ws()
		if p.i >= len(p.b) {
			return false
		}
		switch p.b[p.i] {
		case ',':
			p.i++
		case closer:
			p.i++
			p.depth--
			v.end = p.i
			return true
		default:
			return false
		}
	}
}

func (p *jparser) str() bool {
	p.i++ // opening quote
	for p.i < len(p.b) {
		c := p.b[p.i]
		switch {
		case c == '"':
			p.i++
			return true
		case c == '\\':
			if p.i+1 >= len(p.b) {
				return false
			}
			switch p.b[p.i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				p.i += 2
			case 'u':
				if p.i+6 > len(p.b) {
					return false
				}
				for _, h := range p.b[p.i+2 : p.i+6] {
					if !(h >= '0' && h <= '9' || h >= 'a' && h <= 'f' || h >= 'A' && h <= 'F') {
						return false
					}
				}
				p.i += 6
			default:
				return false
			}
		case c < 0x20:
			return false
		default:
			p.i++
		}
	}
	return false
}

func (p *jparser) digits() int {
	n := 0
	for p.i < len(p.b) && p.b[p.i] >= '0' && p.b[p.i] <= '9' {
		p.i++
		n++
	}
	return n
}

func (p *jparser) number() bool {
	if p.b[p.i] == '-' {
		p.i++
	}
	if p.i < len(p.b) && p.b[p.i] == '0' {
		p.i++
	} else if p.digits() == 0 {
		return false
	}
	if p.i < len(p.b) && p.b[p.i] == '.' {
		p.i++
		if p.digits() == 0 {
			return false
		}
	}
	if p.i < len(p.b) && (p.b[p.i] == 'e' || p.b[p.i] == 'E') {
		p.i++
		if p.i < len(p.b) && (p.b[p.i] == '+' || p.b[p.i] == '-') {
			p.i++
		}
		if p.digits() == 0 {
			return false
		}
	}
	return true
}

// parseJSON parses a whole JSON text (one value, whitespace around it).
// It answers SUBDOC_DOC_NOTJSON for text that is not JSON and
// SUBDOC_PATH_E2DEEP for containers nested deeper than maxDepth.
func parseJSON(b []byte, maxDepth int) (jval, memdx.Status) {
	p := jparser{b: b, maxDepth: maxDepth}
	var v jval
	ok := p.value(&v)
	if p.tooDeep {
		return jval{}, memdx.StatusSubdocDocTooDeep
	}
	if ok {
		p.ws()
		ok = p.i == len(b)
	}
	if !ok {
		return jval{}, memdx.StatusSubdocNotJSON
	}
	return v, memdx.StatusSuccess
}

// depth is how deeply containers nest in v: 0 for a primitive.
func (v *jval) depth() int {
	d := 0
	for i := range v.kids {
		if k := v.kids[i].depth(); k > d {
			d = k
		}
	}
	if v.kind == jObject || v.kind == jArray {
		d++
	}
	return d
}

// jwalk is where a path led in a document.
type jwalk struct {
	// chain[k] is the value at comps[:k]; chain[0] is the root.
	chain []*jval
	// at[k] is chain[k]'s index among chain[k-1]'s kids (k >= 1).
	at []int
	// st is SUCCESS when every component matched, else SUBDOC_PATH_ENOENT
	// or SUBDOC_PATH_MISMATCH for comps[len(chain)-1].
	st memdx.Status
}

func (w *jwalk) last() *jval { return w.chain[len(w.chain)-1] }

// matched is how many components matched.
func (w *jwalk) matched() int { return len(w.chain) - 1 }

// walk follows comps from root as far as the document allows.
func walk(doc []byte, root *jval, comps []pathComp) jwalk {
	w := jwalk{chain: []*jval{root}, at: []int{-1}, st: memdx.StatusSuccess}
	cur := root
	for _, c := range comps {
		idx := -1
		switch {
		case c.isIndex && cur.kind == jArray:
			switch {
			case c.index == -1 && len(cur.kids) > 0:
				idx = len(cur.kids) - 1
			case c.index >= 0 && c.index < len(cur.kids):
				idx = c.index
			}
		case !c.isIndex && cur.kind == jObject:
			for k := range cur.kids {
				if cur.kids[k].key(doc) == c.key {
					idx = k
					break
				}
			}
		default:
			w.st = memdx.StatusSubdocPathMismatch
			return w
		}
		if idx < 0 {
			w.st = memdx.StatusSubdocPathNotFound
			return w
		}
		cur = &cur.kids[idx]
		w.chain = append(w.chain, cur)
		w.at = append(w.at, idx)
	}
	return w
}

// splice replaces doc[from:to] with the concatenation of ins.
func splice(doc []byte, from, to int, ins ...[]byte) []byte {
	n := len(doc) - (to - from)
	for _, b := range ins {
		n += len(b)
	}
	out := make([]byte, 0, n)
	out = append(out, doc[:from]...)
	for _, b := range ins {
		out = append(out, b...)
	}
	return append(out, doc[to:]...)
}

// insertMember adds "key":value at the end of object o.
func insertMember(doc []byte, o *jval, key string, value []byte) []byte {
	kv := make([]byte, 0, len(key)+len(value)+4)
	if len(o.kids) > 0 {
		kv = append(kv, ',')
	}
	kv = append(kv, '"')
	kv = append(kv, key...)
	kv = append(kv, '"', ':')
	kv = append(kv, value...)
	if len(o.kids) == 0 {
		return splice(doc, o.end-1, o.end-1, kv)
	}
	last := o.kids[len(o.kids)-1].end
	return splice(doc, last, last, kv)
}

// insertElements puts values (one or more, comma separated) at index i of
// array a (0 <= i <= len).
func insertElements(doc []byte, a *jval, i int, values []byte) []byte {
	switch {
	case len(a.kids) == 0:
		return splice(doc, a.end-1, a.end-1, values)
	case i == len(a.kids):
		end := a.kids[i-1].end
		return splice(doc, end, end, []byte{','}, values)
	default:
		start := a.kids[i].start
		return splice(doc, start, start, values, []byte{','})
	}
}

// removeKid removes kid i of container c, with its key and a comma.
func removeKid(doc []byte, c *jval, i int) []byte {
	switch {
	case len(c.kids) == 1:
		return splice(doc, c.start+1, c.end-1)
	case i < len(c.kids)-1:
		return splice(doc, c.kids[i].startWithKey(), c.kids[i+1].startWithKey())
	default:
		return splice(doc, c.kids[i-1].end, c.kids[i].end)
	}
}

// validKey reports whether a path key may be written into the document as
// a member name: between quotes it must be a JSON string.
func validKey(k string) bool {
	p := jparser{b: []byte(`"` + k + `"`), maxDepth: 1}
	return p.str() && p.i == len(p.b)
}

// sdValue checks a mutation's value: one JSON value (dictionary ops,
// replace, counter's result) or, when multi, one or more values separated
// by commas (array ops). It returns the depth of the deepest value.
func sdValue(v []byte, multi bool) (int, memdx.Status) {
	if multi {
		wrapped := make([]byte, 0, len(v)+2)
		wrapped = append(append(append(wrapped, '['), v...), ']')
		root, st := parseJSON(wrapped, subdocMaxDepth+1)
		if st != memdx.StatusSuccess || len(root.kids) == 0 {
			return 0, memdx.StatusSubdocCantInsert
		}
		return root.depth() - 1, memdx.StatusSuccess
	}
	root, st := parseJSON(v, subdocMaxDepth)
	if st != memdx.StatusSuccess {
		return 0, memdx.StatusSubdocCantInsert
	}
	return root.depth(), memdx.StatusSuccess
}

// sdLookup runs a lookup (OpSubdocGet, OpSubdocExists, OpSubdocGetCount)
// on a JSON document and returns the result's text.
func sdLookup(op memdx.OpCode, doc []byte, comps []pathComp) ([]byte, memdx.Status) {
	root, st := parseJSON(doc, subdocMaxDepth)
	if st != memdx.StatusSuccess {
		return nil, st
	}
	w := walk(doc, &root, comps)
	if w.st != memdx.StatusSuccess {
		return nil, w.st
	}
	v := w.last()
	switch op {
	case memdx.OpSubdocExists:
		return nil, memdx.StatusSuccess
	case memdx.OpSubdocGetCount:
		if v.kind != jObject && v.kind != jArray {
			return nil, memdx.StatusSubdocPathMismatch
		}
		return strconv.AppendInt(nil, int64(len(v.kids)), 10), memdx.StatusSuccess
	}
	return append([]byte(nil), doc[v.start:v.end]...), memdx.StatusSuccess
}

// sdMutate runs a path mutation on a JSON document and returns the new
// document and the operation's result (the counter's new value).
func sdMutate(op memdx.OpCode, doc []byte, comps []pathComp, value []byte, mkdirP bool) (newDoc, result []byte, st memdx.Status) {
	root, st := parseJSON(doc, subdocMaxDepth)
	if st != memdx.StatusSuccess {
		return nil, nil, st
	}
	switch op {
	case memdx.OpSubdocDictAdd, memdx.OpSubdocDictUpsert:
		return sdDict(op, doc, &root, comps, value, mkdirP)
	case memdx.OpSubdocReplace:
		vd, st := sdValue(value, false)
		if st != memdx.StatusSuccess {
			return nil, nil, st
		}
		w := walk(doc, &root, comps)
		if w.st != memdx.StatusSuccess {
			return nil, nil, w.st
		}
		if len(comps)+vd > subdocMaxDepth {
			return nil, nil, memdx.StatusSubdocValueTooDeep
		}
		v := w.last()
		return splice(doc, v.start, v.end, value), nil, memdx.StatusSuccess
	case memdx.OpSubdocDelete:
		w := walk(doc, &root, comps)
		if w.st != memdx.StatusSuccess {
			return nil, nil, w.st
		}
		if len(comps) == 0 {
			return nil, nil, memdx.StatusSubdocPathInvalid
		}
		n := len(w.chain)
		return removeKid(doc, w.chain[n-2], w.at[n-1]), nil, memdx.StatusSuccess
	case memdx.OpSubdocArrayPushLast, memdx.OpSubdocArrayPushFirst, memdx.OpSubdocArrayAddUnique:
		return sdArrayAdd(op, doc, &root, comps, value, mkdirP)
	case memdx.OpSubdocArrayInsert:
		return sdArrayInsert(doc, &root, comps, value)
	case memdx.OpSubdocCounter:
		return sdCounter(doc, &root, comps, value, mkdirP)
	}
	return nil, nil, memdx.StatusSubdocInvalidCombo
}

// createPath inserts value at comps[w.matched():] under w.last(), an
// object, creating the missing dictionaries on the way (mkdir -p). It
// answers SUBDOC_PATH_ENOENT when a missing component is an array index:
// only dictionaries are created.
func createPath(doc []byte, w *jwalk, comps []pathComp, value []byte) ([]byte, memdx.Status) {
	rest := comps[w.matched():]
	for _, c := range rest {
		if c.isIndex {
			return nil, memdx.StatusSubdocPathNotFound
		}
		if !validKey(c.key) {
			return nil, memdx.StatusSubdocPathInvalid
		}
	}
	inner := value
	for i := len(rest) - 1; i >= 1; i-- {
		b := make([]byte, 0, len(rest[i].key)+len(inner)+5)
		b = append(b, `{"`...)
		b = append(b, rest[i].key...)
		b = append(b, `":`...)
		b = append(b, inner...)
		inner = append(b, '}')
	}
	return insertMember(doc, w.last(), rest[0].key, inner), memdx.StatusSuccess
}

// canCreate reports whether a walk stopped at a missing key of an object,
// from where mkdir -p may create the rest of the path.
func canCreate(w *jwalk, comps []pathComp) bool {
	return w.st == memdx.StatusSubdocPathNotFound && w.last().kind == jObject &&
		!comps[w.matched()].isIndex
}

func sdDict(op memdx.OpCode, doc []byte, root *jval, comps []pathComp, value []byte, mkdirP bool) ([]byte, []byte, memdx.Status) {
	if len(comps) == 0 || comps[len(comps)-1].isIndex {
		return nil, nil, memdx.StatusSubdocPathInvalid
	}
	vd, st := sdValue(value, false)
	if st != memdx.StatusSuccess {
		return nil, nil, st
	}
	if len(comps)+vd > subdocMaxDepth {
		return nil, nil, memdx.StatusSubdocValueTooDeep
	}
	w := walk(doc, root, comps)
	switch {
	case w.st == memdx.StatusSuccess:
		if op == memdx.OpSubdocDictAdd {
			return nil, nil, memdx.StatusSubdocPathExists
		}
		v := w.last()
		return splice(doc, v.start, v.end, value), nil, memdx.StatusSuccess
	case w.st == memdx.StatusSubdocPathNotFound && w.matched() == len(comps)-1:
		if w.last().kind != jObject {
			return nil, nil, memdx.StatusSubdocPathMismatch
		}
		if !validKey(comps[len(comps)-1].key) {
			return nil, nil, memdx.StatusSubdocPathInvalid
		}
		return insertMember(doc, w.last(), comps[len(comps)-1].key, value), nil, memdx.StatusSuccess
	case mkdirP && canCreate(&w, comps):
		nd, st := createPath(doc, &w, comps, value)
		return nd, nil, st
	}
	return nil, nil, w.st
}

// primitive reports whether v is a string, number, true, false or null.
func primitive(v *jval) bool { return v.kind != jObject && v.kind != jArray }

func sdArrayAdd(op memdx.OpCode, doc []byte, root *jval, comps []pathComp, value []byte, mkdirP bool) ([]byte, []byte, memdx.Status) {
	unique := op == memdx.OpSubdocArrayAddUnique
	vd, st := sdValue(value, !unique)
	if st != memdx.StatusSuccess {
		return nil, nil, st
	}
	if unique {
		v, _ := parseJSON(value, subdocMaxDepth)
		if !primitive(&v) {
			return nil, nil, memdx.StatusSubdocCantInsert
		}
	}
	if len(comps)+1+vd > subdocMaxDepth {
		return nil, nil, memdx.StatusSubdocValueTooDeep
	}
	w := walk(doc, root, comps)
	if w.st != memdx.StatusSuccess {
		if mkdirP && canCreate(&w, comps) {
			arr := make([]byte, 0, len(value)+2)
			arr = append(append(append(arr, '['), value...), ']')
			nd, st := createPath(doc, &w, comps, arr)
			return nd, nil, st
		}
		return nil, nil, w.st
	}
	a := w.last()
	if a.kind != jArray {
		return nil, nil, memdx.StatusSubdocPathMismatch
	}
	switch op {
	case memdx.OpSubdocArrayPushFirst:
		return insertElements(doc, a, 0, value), nil, memdx.StatusSuccess
	case memdx.OpSubdocArrayPushLast:
		return insertElements(doc, a, len(a.kids), value), nil, memdx.StatusSuccess
	}
	nv, _ := parseJSON(value, subdocMaxDepth)
	want := string(value[nv.start:nv.end])
	for i := range a.kids {
		k := &a.kids[i]
		if !primitive(k) {
			return nil, nil, memdx.StatusSubdocPathMismatch
		}
		if string(doc[k.start:k.end]) == want {
			return nil, nil, memdx.StatusSubdocPathExists
		}
	}
	return insertElements(doc, a, len(a.kids), value), nil, memdx.StatusSuccess
}

func sdArrayInsert(doc []byte, root *jval, comps []pathComp, value []byte) ([]byte, []byte, memdx.Status) {
	if len(comps) == 0 || !comps[len(comps)-1].isIndex || comps[len(comps)-1].index < 0 {
		return nil, nil, memdx.StatusSubdocPathInvalid
	}
	vd, st := sdValue(value, true)
	if st != memdx.StatusSuccess {
		return nil, nil, st
	}
	if len(comps)+vd > subdocMaxDepth {
		return nil, nil, memdx.StatusSubdocValueTooDeep
	}
	w := walk(doc, root, comps[:len(comps)-1])
	if w.st != memdx.StatusSuccess {
		return nil, nil, w.st
	}
	a := w.last()
	if a.kind != jArray {
		return nil, nil, memdx.StatusSubdocPathMismatch
	}
	idx := comps[len(comps)-1].index
	if idx > len(a.kids) {
		return nil, nil, memdx.StatusSubdocPathNotFound
	}
	return insertElements(doc, a, idx, value), nil, memdx.StatusSuccess
}

// parseDelta reads a counter delta: a non-zero integer in int64 range,
// written as JSON writes integers.
func parseDelta(v []byte) (int64, bool) {
	s := string(v)
	if s == "" || s[0] == '+' {
		return 0, false
	}
	d, err := strconv.ParseInt(s, 10, 64)
	if err != nil || d == 0 {
		return 0, false
	}
	return d, true
}

func sdCounter(doc []byte, root *jval, comps []pathComp, value []byte, mkdirP bool) ([]byte, []byte, memdx.Status) {
	if len(comps) == 0 {
		return nil, nil, memdx.StatusSubdocPathInvalid
	}
	delta, ok := parseDelta(value)
	if !ok {
		return nil, nil, memdx.StatusSubdocBadDelta
	}
	w := walk(doc, root, comps)
	if w.st != memdx.StatusSuccess {
		res := strconv.AppendInt(nil, delta, 10)
		switch {
		case w.st == memdx.StatusSubdocPathNotFound && w.matched() == len(comps)-1 &&
			w.last().kind == jObject && !comps[len(comps)-1].isIndex:
			if !validKey(comps[len(comps)-1].key) {
				return nil, nil, memdx.StatusSubdocPathInvalid
			}
			return insertMember(doc, w.last(), comps[len(comps)-1].key, res), res, memdx.StatusSuccess
		case mkdirP && canCreate(&w, comps):
			nd, st := createPath(doc, &w, comps, res)
			if st != memdx.StatusSuccess {
				return nil, nil, st
			}
			return nd, res, memdx.StatusSuccess
		}
		return nil, nil, w.st
	}
	v := w.last()
	text := string(doc[v.start:v.end])
	if v.kind != jNumber {
		return nil, nil, memdx.StatusSubdocPathMismatch
	}
	for i, c := range text {
		if !(c >= '0' && c <= '9' || c == '-' && i == 0) {
			return nil, nil, memdx.StatusSubdocPathMismatch // not an integer
		}
	}
	cur, err := strconv.ParseInt(text, 10, 64)
	if err != nil {
		return nil, nil, memdx.StatusSubdocBadRange
	}
	if delta > 0 && cur > (1<<63-1)-delta || delta < 0 && cur < (-1<<63)-delta {
		// kv_engine maps subjson's DELTA_OVERFLOW to VALUE_CANTINSERT.
		return nil, nil, memdx.StatusSubdocCantInsert
	}
	res := strconv.AppendInt(nil, cur+delta, 10)
	return splice(doc, v.start, v.end, res), res, memdx.StatusSuccess
}
