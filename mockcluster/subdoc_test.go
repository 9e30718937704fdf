package mockcluster

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"math/bits"
	"strings"
	"testing"
	"time"

	"github.com/kvwire/kvwire/memdx"
)

// sdFeatures are stdFeatures with XATTR.
var sdFeatures = append([]memdx.HelloFeature{memdx.FeatureXattr}, stdFeatures...)

// newSubdocEnv connects to every node up front, so that subtests (whose
// cleanups would close connections they opened) share the connections.
func newSubdocEnv(t *testing.T) *kvEnv {
	e := newKVEnv(t, Options{}, sdFeatures)
	for _, n := range e.c.Nodes() {
		e.conns[n.ID()] = bootstrap(t, n.Addr(), DefaultBucket, e.feats)
	}
	return e
}

func lk(op memdx.OpCode, path string, flags memdx.SubdocPathFlag) memdx.SubdocLookupOp {
	return memdx.SubdocLookupOp{Op: op, Flags: flags, Path: []byte(path)}
}

func mu(op memdx.OpCode, path, value string, flags memdx.SubdocPathFlag) memdx.SubdocMutateOp {
	m := memdx.SubdocMutateOp{Op: op, Flags: flags, Path: []byte(path)}
	if value != "" {
		m.Value = []byte(value)
	}
	return m
}

// lookupIn sends a SUBDOC_MULTI_LOOKUP and decodes its results.
func (e *kvEnv) lookupIn(key string, df memdx.SubdocDocFlag, ops ...memdx.SubdocLookupOp) (memdx.Packet, []memdx.SubdocLookupResult) {
	e.t.Helper()
	p := e.do(memdx.NewSubdocMultiLookup([]byte(key), df, ops))
	var rs []memdx.SubdocLookupResult
	if p.Status == memdx.StatusSuccess || p.Status == memdx.StatusSubdocMultiPathFailure ||
		p.Status == memdx.StatusSubdocSuccessDeleted || p.Status == memdx.StatusSubdocMultiPathFailureDeleted {
		var err error
		if rs, err = memdx.DecodeSubdocMultiLookup(p.Value, nil); err != nil {
			e.t.Fatalf("decode lookup response: %v", err)
		}
		if len(rs) != len(ops) {
			e.t.Fatalf("%d lookup results for %d specs", len(rs), len(ops))
		}
	}
	return p, rs
}

// mutateIn sends a SUBDOC_MULTI_MUTATION and decodes its results.
func (e *kvEnv) mutateIn(key string, df memdx.SubdocDocFlag, cas uint64, ops ...memdx.SubdocMutateOp) (memdx.Packet, []memdx.SubdocMutateResult) {
	e.t.Helper()
	r := memdx.NewSubdocMultiMutation([]byte(key), df, 0, ops)
	r.Cas = cas
	p := e.do(r)
	var rs []memdx.SubdocMutateResult
	if p.Status == memdx.StatusSuccess || p.Status == memdx.StatusSubdocMultiPathFailure ||
		p.Status == memdx.StatusSubdocSuccessDeleted || p.Status == memdx.StatusSubdocMultiPathFailureDeleted {
		var err error
		if rs, err = memdx.DecodeSubdocMultiMutation(p.Value, nil); err != nil {
			e.t.Fatalf("decode mutation response: %v", err)
		}
	}
	return p, rs
}

func (e *kvEnv) body(key string) (string, memdx.Status) {
	e.t.Helper()
	p := e.do(memdx.NewGet([]byte(key)))
	return string(p.Value), p.Status
}

func (e *kvEnv) seed(key, value string) uint64 {
	e.t.Helper()
	p := e.expect("seed "+key, e.do(set(key, value)), memdx.StatusSuccess)
	return p.Cas
}

const sdDoc = "{\"name\":\"kv\", \"n\":5,\"big\":9223372036854775807,\"huge\":99999999999999999999,\"f\":1.5," +
	"\"arr\":[1,\"two\",3],\"objs\":[{\"a\":1}],\"obj\":{\"x\":{\"y\":true}},\"dot.ted\":1,\"back`tick\":2,\"s\":\"str\"}"

func deepJSON(n int) string { return strings.Repeat("[", n) + strings.Repeat("]", n) }

func deepPath(n int) string {
	parts := make([]string, n)
	for i := range parts {
		parts[i] = "a"
	}
	return strings.Join(parts, ".")
}

// TestSubdocLookupSpecs runs each lookup kind through MULTI_LOOKUP, one
// spec per request, with the per-path statuses kv_engine's
// docs/SubDocument.md gives for each failure.
func TestSubdocLookupSpecs(t *testing.T) {
	e := newSubdocEnv(t)
	e.seed("doc", sdDoc)
	e.seed("notjson", "abc")
	e.seed("deep", `{"a":`+deepJSON(40)+`}`)
	cases := []struct {
		key   string
		op    memdx.OpCode
		path  string
		st    memdx.Status
		value string
	}{
		{"doc", memdx.OpSubdocGet, "name", memdx.StatusSuccess, `"kv"`},
		{"doc", memdx.OpSubdocGet, "obj", memdx.StatusSuccess, `{"x":{"y":true}}`},
		{"doc", memdx.OpSubdocGet, "obj.x.y", memdx.StatusSuccess, `true`},
		{"doc", memdx.OpSubdocGet, "arr[1]", memdx.StatusSuccess, `"two"`},
		{"doc", memdx.OpSubdocGet, "arr[-1]", memdx.StatusSuccess, `3`},
		{"doc", memdx.OpSubdocGet, "objs[0].a", memdx.StatusSuccess, `1`},
		{"doc", memdx.OpSubdocGet, "`dot.ted`", memdx.StatusSuccess, `1`},
		{"doc", memdx.OpSubdocGet, "`back``tick`", memdx.StatusSuccess, `2`},
		{"doc", memdx.OpSubdocGet, "missing", memdx.StatusSubdocPathNotFound, ""},
		{"doc", memdx.OpSubdocGet, "obj.x.z", memdx.StatusSubdocPathNotFound, ""},
		{"doc", memdx.OpSubdocGet, "arr[3]", memdx.StatusSubdocPathNotFound, ""},
		{"doc", memdx.OpSubdocGet, "name.first", memdx.StatusSubdocPathMismatch, ""},
		{"doc", memdx.OpSubdocGet, "arr.count", memdx.StatusSubdocPathMismatch, ""},
		{"doc", memdx.OpSubdocGet, "obj[0]", memdx.StatusSubdocPathMismatch, ""},
		{"doc", memdx.OpSubdocGet, "a..b", memdx.StatusSubdocPathInvalid, ""},
		{"doc", memdx.OpSubdocGet, "arr[x]", memdx.StatusSubdocPathInvalid, ""},
		{"doc", memdx.OpSubdocGet, "arr[-2]", memdx.StatusSubdocPathInvalid, ""},
		{"doc", memdx.OpSubdocGet, "name.", memdx.StatusSuccess, `"kv"`},    // subjson ignores a trailing dot
		{"doc", memdx.OpSubdocGet, "arr.[1]", memdx.StatusSuccess, `"two"`}, // and a dot before an index
		{"doc", memdx.OpSubdocGet, "arr[]", memdx.StatusSuccess, `1`},       // and reads [] as [0]
		{"doc", memdx.OpSubdocGet, ".name", memdx.StatusSubdocPathInvalid, ""},
		{"doc", memdx.OpSubdocGet, "a]b", memdx.StatusSubdocPathInvalid, ""},
		{"doc", memdx.OpSubdocGet, `a"b`, memdx.StatusSubdocPathInvalid, ""},
		{"doc", memdx.OpSubdocGet, `a\u0041`, memdx.StatusSubdocPathInvalid, ""},
		{"doc", memdx.OpSubdocGet, "arr[99999999999999999999]", memdx.StatusSubdocPathInvalid, ""},
		{"doc", memdx.OpSubdocGet, "arr[9999999999]", memdx.StatusSubdocPathNotFound, ""},
		{"doc", memdx.OpSubdocGet, "`open", memdx.StatusSubdocPathInvalid, ""},
		{"doc", memdx.OpSubdocGet, deepPath(33), memdx.StatusSubdocPathTooBig, ""},
		{"doc", memdx.OpSubdocGet, deepPath(32), memdx.StatusSubdocPathNotFound, ""},
		{"doc", memdx.OpSubdocExists, "obj.x", memdx.StatusSuccess, ""},
		{"doc", memdx.OpSubdocExists, "obj.nope", memdx.StatusSubdocPathNotFound, ""},
		{"doc", memdx.OpSubdocGetCount, "arr", memdx.StatusSuccess, "3"},
		{"doc", memdx.OpSubdocGetCount, "obj", memdx.StatusSuccess, "1"},
		{"doc", memdx.OpSubdocGetCount, "", memdx.StatusSuccess, "11"},
		{"doc", memdx.OpSubdocGetCount, "name", memdx.StatusSubdocPathMismatch, ""},
		{"doc", memdx.OpGet, "", memdx.StatusSuccess, sdDoc},
		{"notjson", memdx.OpSubdocGet, "a", memdx.StatusSubdocNotJSON, ""},
		{"notjson", memdx.OpGet, "", memdx.StatusSuccess, "abc"},
		{"deep", memdx.OpSubdocGet, "a", memdx.StatusSubdocDocTooDeep, ""},
	}
	for _, c := range cases {
		t.Run(fmt.Sprintf("%s/%s/%s", c.key, c.op, c.path), func(t *testing.T) {
			e.t = t
			p, rs := e.lookupIn(c.key, 0, lk(c.op, c.path, 0))
			want := memdx.StatusSuccess
			if c.st != memdx.StatusSuccess {
				want = memdx.StatusSubdocMultiPathFailure
			}
			if p.Status != want || rs[0].Status != c.st || string(rs[0].Value) != c.value {
				t.Fatalf("status %s, path %s %q; want %s, path %s %q", p.Status, rs[0].Status, rs[0].Value, want, c.st, c.value)
			}
			if p.Cas == 0 || p.Datatype != 0 {
				t.Fatalf("cas %d datatype %s", p.Cas, p.Datatype)
			}
		})
	}
}

// TestSubdocSinglePathLookups runs the single-path opcodes: the status is
// the path's, a value comes back as JSON.
func TestSubdocSinglePathLookups(t *testing.T) {
	e := newSubdocEnv(t)
	cas := e.seed("doc", sdDoc)
	p := e.do(memdx.NewSubdocLookup(memdx.OpSubdocGet, []byte("doc"), []byte("arr[0]"), 0, 0))
	if p.Status != memdx.StatusSuccess || string(p.Value) != "1" || p.Cas != cas || p.Datatype != memdx.DatatypeJSON {
		t.Fatalf("get: %s %q cas %d dt %s", p.Status, p.Value, p.Cas, p.Datatype)
	}
	p = e.do(memdx.NewSubdocLookup(memdx.OpSubdocGetCount, []byte("doc"), []byte("arr"), 0, 0))
	if p.Status != memdx.StatusSuccess || string(p.Value) != "3" {
		t.Fatalf("count: %s %q", p.Status, p.Value)
	}
	p = e.do(memdx.NewSubdocLookup(memdx.OpSubdocExists, []byte("doc"), []byte("nope"), 0, 0))
	e.expect("exists", p, memdx.StatusSubdocPathNotFound)
	p = e.do(memdx.NewSubdocLookup(memdx.OpSubdocGet, []byte("doc"), nil, 0, 0))
	e.expect("get with an empty path", p, memdx.StatusInvalidArgs)
	p = e.do(memdx.NewSubdocLookup(memdx.OpSubdocGet, []byte("nodoc"), []byte("a"), 0, 0))
	e.expect("missing document", p, memdx.StatusKeyNotFound)
}

type mutCase struct {
	name  string
	doc   string
	op    memdx.OpCode
	path  string
	value string
	flags memdx.SubdocPathFlag
	// st is the spec's status; want the body after it (the seed on
	// failure); result what a successful spec returns.
	st     memdx.Status
	want   string
	result string
}

// TestSubdocMutationSpecs runs each mutation kind through
// MULTI_MUTATION, one spec per request: on success the new body and the
// spec's result, on failure the failing index and status (kv_engine
// docs/SubDocument.md, "Command Listings") and an unchanged document.
func TestSubdocMutationSpecs(t *testing.T) {
	obj := `{"a":1,"arr":[1,2,3],"o":{},"s":"x","n":5,"f":1.5,"big":9223372036854775807,"huge":99999999999999999999,"mixed":[1,{"b":2}]}`
	cases := []mutCase{
		{"dict-add", `{"a":1}`, memdx.OpSubdocDictAdd, "b", `2`, 0, memdx.StatusSuccess, `{"a":1,"b":2}`, ""},
		{"dict-add into empty", `{"o":{}}`, memdx.OpSubdocDictAdd, "o.k", `"v"`, 0, memdx.StatusSuccess, `{"o":{"k":"v"}}`, ""},
		{"dict-add exists", obj, memdx.OpSubdocDictAdd, "a", `2`, 0, memdx.StatusSubdocPathExists, obj, ""},
		{"dict-add no parent", obj, memdx.OpSubdocDictAdd, "x.y", `2`, 0, memdx.StatusSubdocPathNotFound, obj, ""},
		{"dict-add mkdir-p", `{"a":1}`, memdx.OpSubdocDictAdd, "x.y.z", `2`, memdx.SubdocPathMkdirP, memdx.StatusSuccess, `{"a":1,"x":{"y":{"z":2}}}`, ""},
		{"dict-add mkdir-p through index", obj, memdx.OpSubdocDictAdd, "x[0].y", `2`, memdx.SubdocPathMkdirP, memdx.StatusSubdocPathNotFound, obj, ""},
		{"dict-add index path", obj, memdx.OpSubdocDictAdd, "arr[0]", `2`, 0, memdx.StatusSubdocPathInvalid, obj, ""},
		{"dict-add into array", obj, memdx.OpSubdocDictAdd, "arr.k", `2`, 0, memdx.StatusSubdocPathMismatch, obj, ""},
		{"dict-add bad value", obj, memdx.OpSubdocDictAdd, "k", `{nope`, 0, memdx.StatusSubdocCantInsert, obj, ""},
		{"dict-add two values", obj, memdx.OpSubdocDictAdd, "k", `1,2`, 0, memdx.StatusSubdocCantInsert, obj, ""},
		{"dict-add too deep", obj, memdx.OpSubdocDictAdd, "k", deepJSON(32), 0, memdx.StatusSubdocValueTooDeep, obj, ""},
		{"dict-add deepest", `{}`, memdx.OpSubdocDictAdd, "k", deepJSON(31), 0, memdx.StatusSuccess, `{"k":` + deepJSON(31) + `}`, ""},
		{"dict-upsert new", `{"a":1}`, memdx.OpSubdocDictUpsert, "b", `[true]`, 0, memdx.StatusSuccess, `{"a":1,"b":[true]}`, ""},
		{"dict-upsert existing", `{"a":1, "b":2}`, memdx.OpSubdocDictUpsert, "a", `"z"`, 0, memdx.StatusSuccess, `{"a":"z", "b":2}`, ""},
		{"dict-upsert under string", obj, memdx.OpSubdocDictUpsert, "s.k", `1`, 0, memdx.StatusSubdocPathMismatch, obj, ""},
		{"replace", `{"a":1,"b":2}`, memdx.OpSubdocReplace, "b", `{"c":3}`, 0, memdx.StatusSuccess, `{"a":1,"b":{"c":3}}`, ""},
		{"replace element", `{"arr":[1,2]}`, memdx.OpSubdocReplace, "arr[-1]", `9`, 0, memdx.StatusSuccess, `{"arr":[1,9]}`, ""},
		{"replace missing", obj, memdx.OpSubdocReplace, "zz", `1`, 0, memdx.StatusSubdocPathNotFound, obj, ""},
		{"delete first", `{"a":1,"b":2}`, memdx.OpSubdocDelete, "a", "", 0, memdx.StatusSuccess, `{"b":2}`, ""},
		{"delete last", `{"a":1,"b":2}`, memdx.OpSubdocDelete, "b", "", 0, memdx.StatusSuccess, `{"a":1}`, ""},
		{"delete only", `{"o":{"a":1}}`, memdx.OpSubdocDelete, "o.a", "", 0, memdx.StatusSuccess, `{"o":{}}`, ""},
		{"delete element", `{"arr":[1,2,3]}`, memdx.OpSubdocDelete, "arr[1]", "", 0, memdx.StatusSuccess, `{"arr":[1,3]}`, ""},
		{"delete last element", `{"arr":[1,2,3]}`, memdx.OpSubdocDelete, "arr[-1]", "", 0, memdx.StatusSuccess, `{"arr":[1,2]}`, ""},
		{"delete missing", obj, memdx.OpSubdocDelete, "zz", "", 0, memdx.StatusSubdocPathNotFound, obj, ""},
		{"push-last", `{"arr":[1]}`, memdx.OpSubdocArrayPushLast, "arr", `2`, 0, memdx.StatusSuccess, `{"arr":[1,2]}`, ""},
		{"push-last several", `{"arr":[1]}`, memdx.OpSubdocArrayPushLast, "arr", `2,"3"`, 0, memdx.StatusSuccess, `{"arr":[1,2,"3"]}`, ""},
		{"push-last empty", `{"arr":[]}`, memdx.OpSubdocArrayPushLast, "arr", `2`, 0, memdx.StatusSuccess, `{"arr":[2]}`, ""},
		{"push-last root", `[1]`, memdx.OpSubdocArrayPushLast, "", `2`, 0, memdx.StatusSuccess, `[1,2]`, ""},
		{"push-first", `{"arr":[1]}`, memdx.OpSubdocArrayPushFirst, "arr", `0`, 0, memdx.StatusSuccess, `{"arr":[0,1]}`, ""},
		{"push on object", obj, memdx.OpSubdocArrayPushLast, "o", `1`, 0, memdx.StatusSubdocPathMismatch, obj, ""},
		{"push missing", obj, memdx.OpSubdocArrayPushLast, "nope", `1`, 0, memdx.StatusSubdocPathNotFound, obj, ""},
		{"push mkdir-p", `{}`, memdx.OpSubdocArrayPushFirst, "a.list", `1`, memdx.SubdocPathMkdirP, memdx.StatusSuccess, `{"a":{"list":[1]}}`, ""},
		{"push bad value", obj, memdx.OpSubdocArrayPushLast, "arr", `1,`, 0, memdx.StatusSubdocCantInsert, obj, ""},
		{"insert", `{"arr":[1,3]}`, memdx.OpSubdocArrayInsert, "arr[1]", `2`, 0, memdx.StatusSuccess, `{"arr":[1,2,3]}`, ""},
		{"insert at end", `{"arr":[1]}`, memdx.OpSubdocArrayInsert, "arr[1]", `2`, 0, memdx.StatusSuccess, `{"arr":[1,2]}`, ""},
		{"insert past end", obj, memdx.OpSubdocArrayInsert, "arr[4]", `2`, 0, memdx.StatusSubdocPathNotFound, obj, ""},
		{"insert at -1", obj, memdx.OpSubdocArrayInsert, "arr[-1]", `2`, 0, memdx.StatusSubdocPathInvalid, obj, ""},
		{"insert without index", obj, memdx.OpSubdocArrayInsert, "arr", `2`, 0, memdx.StatusSubdocPathInvalid, obj, ""},
		{"insert into object", obj, memdx.OpSubdocArrayInsert, "o[0]", `2`, 0, memdx.StatusSubdocPathMismatch, obj, ""},
		{"add-unique", `{"arr":[1,"a"]}`, memdx.OpSubdocArrayAddUnique, "arr", `"b"`, 0, memdx.StatusSuccess, `{"arr":[1,"a","b"]}`, ""},
		{"add-unique present", obj, memdx.OpSubdocArrayAddUnique, "arr", `2`, 0, memdx.StatusSubdocPathExists, obj, ""},
		{"add-unique not primitive", obj, memdx.OpSubdocArrayAddUnique, "arr", `[2]`, 0, memdx.StatusSubdocCantInsert, obj, ""},
		{"add-unique mixed array", obj, memdx.OpSubdocArrayAddUnique, "mixed", `7`, 0, memdx.StatusSubdocPathMismatch, obj, ""},
		{"add-unique mkdir-p", `{}`, memdx.OpSubdocArrayAddUnique, "tags", `"t"`, memdx.SubdocPathMkdirP, memdx.StatusSuccess, `{"tags":["t"]}`, ""},
		{"counter", `{"n":5}`, memdx.OpSubdocCounter, "n", `10`, 0, memdx.StatusSuccess, `{"n":15}`, "15"},
		{"counter down", `{"n":5}`, memdx.OpSubdocCounter, "n", `-7`, 0, memdx.StatusSuccess, `{"n":-2}`, "-2"},
		{"counter creates", `{"a":1}`, memdx.OpSubdocCounter, "c", `3`, 0, memdx.StatusSuccess, `{"a":1,"c":3}`, "3"},
		{"counter mkdir-p", `{}`, memdx.OpSubdocCounter, "x.c", `3`, memdx.SubdocPathMkdirP, memdx.StatusSuccess, `{"x":{"c":3}}`, "3"},
		{"counter float", obj, memdx.OpSubdocCounter, "f", `1`, 0, memdx.StatusSubdocPathMismatch, obj, ""},
		{"counter string", obj, memdx.OpSubdocCounter, "s", `1`, 0, memdx.StatusSubdocPathMismatch, obj, ""},
		{"counter overflow", obj, memdx.OpSubdocCounter, "big", `1`, 0, memdx.StatusSubdocCantInsert, obj, ""},
		{"counter number too big", obj, memdx.OpSubdocCounter, "huge", `1`, 0, memdx.StatusSubdocBadRange, obj, ""},
		{"counter zero delta", obj, memdx.OpSubdocCounter, "n", `0`, 0, memdx.StatusSubdocBadDelta, obj, ""},
		{"counter float delta", obj, memdx.OpSubdocCounter, "n", `1.5`, 0, memdx.StatusSubdocBadDelta, obj, ""},
		{"counter word delta", obj, memdx.OpSubdocCounter, "n", `one`, 0, memdx.StatusSubdocBadDelta, obj, ""},
		{"counter huge delta", obj, memdx.OpSubdocCounter, "n", `9223372036854775808`, 0, memdx.StatusSubdocBadDelta, obj, ""},
		{"not json", `abc`, memdx.OpSubdocDictUpsert, "a", `1`, 0, memdx.StatusSubdocNotJSON, `abc`, ""},
		{"bad path", obj, memdx.OpSubdocDictUpsert, "a[", `1`, 0, memdx.StatusSubdocPathInvalid, obj, ""},
		{"set whole", obj, memdx.OpSet, "", `{"new":1}`, 0, memdx.StatusSuccess, `{"new":1}`, ""},
	}
	e := newSubdocEnv(t)
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e.t = t
			key := fmt.Sprintf("m%d", i)
			cas := e.seed(key, c.doc)
			p, rs := e.mutateIn(key, 0, 0, mu(c.op, c.path, c.value, c.flags))
			if c.st != memdx.StatusSuccess {
				if p.Status != memdx.StatusSubdocMultiPathFailure || len(rs) != 1 || rs[0].Index != 0 || rs[0].Status != c.st {
					t.Fatalf("status %s results %+v, want MULTI_PATH_FAILURE with index 0 %s", p.Status, rs, c.st)
				}
			} else {
				if p.Status != memdx.StatusSuccess || p.Cas == 0 || p.Cas == cas || len(p.Extras) != 16 {
					t.Fatalf("status %s cas %d (was %d) extras %d results %+v", p.Status, p.Cas, cas, len(p.Extras), rs)
				}
				if c.result != "" && (len(rs) != 1 || string(rs[0].Value) != c.result) {
					t.Fatalf("results %+v, want %q", rs, c.result)
				} else if c.result == "" && len(rs) != 0 {
					t.Fatalf("results %+v, want none", rs)
				}
			}
			if got, _ := e.body(key); got != c.want {
				t.Fatalf("body %s\nwant %s", got, c.want)
			}
		})
	}
}

// TestSubdocSinglePathMutations runs the single-path opcodes: the path's
// status is the response's; a counter's value comes back as JSON, with the
// mutation token.
func TestSubdocSinglePathMutations(t *testing.T) {
	e := newSubdocEnv(t)
	e.seed("doc", `{"n":1}`)
	p := e.do(memdx.NewSubdocMutation(memdx.OpSubdocCounter, []byte("doc"), []byte("n"), []byte("4"), 0, 0, 0))
	if p.Status != memdx.StatusSuccess || string(p.Value) != "5" || p.Datatype != memdx.DatatypeJSON || len(p.Extras) != 16 {
		t.Fatalf("counter: %s %q dt %s extras %d", p.Status, p.Value, p.Datatype, len(p.Extras))
	}
	p = e.do(memdx.NewSubdocMutation(memdx.OpSubdocDictAdd, []byte("doc"), []byte("n"), []byte("4"), 0, 0, 0))
	e.expect("dict-add existing", p, memdx.StatusSubdocPathExists)
	p = e.do(memdx.NewSubdocMutation(memdx.OpSubdocDictUpsert, []byte("new"), []byte("a.b"), []byte(`"v"`), 0, memdx.SubdocDocMkdoc, 0))
	e.expect("mkdoc", p, memdx.StatusSuccess)
	if got, _ := e.body("new"); got != `{"a":{"b":"v"}}` {
		t.Fatalf("mkdoc created %s", got)
	}
	p = e.do(memdx.NewSubdocMutation(memdx.OpSubdocArrayPushLast, []byte("newarr"), nil, []byte(`1`), 0, memdx.SubdocDocMkdoc, 0))
	e.expect("mkdoc array", p, memdx.StatusSuccess)
	if got, _ := e.body("newarr"); got != `[1]` {
		t.Fatalf("mkdoc with a root array op created %s", got)
	}
	p = e.do(memdx.NewSubdocMutation(memdx.OpSubdocDictUpsert, []byte("nodoc"), []byte("a"), []byte(`1`), 0, 0, 0))
	e.expect("missing document", p, memdx.StatusKeyNotFound)
	p = e.do(memdx.NewSubdocMutation(memdx.OpSubdocDictUpsert, []byte("doc"), []byte("a"), nil, 0, 0, 0))
	e.expect("no value", p, memdx.StatusInvalidArgs)
}

// TestSubdocMultiMutationAtomic: a failing spec leaves the document as it
// was and names itself; a success returns values only for the specs that
// have one, each at its index.
func TestSubdocMultiMutationAtomic(t *testing.T) {
	e := newSubdocEnv(t)
	cas := e.seed("doc", `{"a":1,"n":0}`)
	p, rs := e.mutateIn("doc", 0, 0,
		mu(memdx.OpSubdocDictUpsert, "b", "2", 0),
		mu(memdx.OpSubdocDictAdd, "a", "3", 0),
		mu(memdx.OpSubdocCounter, "n", "1", 0))
	if p.Status != memdx.StatusSubdocMultiPathFailure || len(rs) != 1 || rs[0].Index != 1 || rs[0].Status != memdx.StatusSubdocPathExists {
		t.Fatalf("status %s results %+v", p.Status, rs)
	}
	if got, _ := e.body("doc"); got != `{"a":1,"n":0}` {
		t.Fatalf("failed multi-mutation changed the document: %s", got)
	}
	p, rs = e.mutateIn("doc", 0, cas,
		mu(memdx.OpSubdocCounter, "n", "2", 0),
		mu(memdx.OpSubdocDictUpsert, "b", "2", 0),
		mu(memdx.OpSubdocCounter, "n", "5", 0))
	if p.Status != memdx.StatusSuccess || len(rs) != 2 || rs[0].Index != 0 || string(rs[0].Value) != "2" ||
		rs[1].Index != 2 || string(rs[1].Value) != "7" {
		t.Fatalf("status %s results %+v", p.Status, rs)
	}
	// The old CAS no longer matches.
	p, _ = e.mutateIn("doc", 0, cas, mu(memdx.OpSubdocDictUpsert, "c", "1", 0))
	e.expect("stale cas", p, memdx.StatusKeyExists)
	if got := e.b.MutationCount("", "", "doc"); got != 2 {
		t.Fatalf("mutation count %d, want 2 (seed and one multi-mutation)", got)
	}
}

// TestSubdocValidation checks the whole-command statuses of
// daemon/subdocument_validators.cc.
func TestSubdocValidation(t *testing.T) {
	e := newSubdocEnv(t)
	e.seed("doc", `{"a":1}`)
	up := mu(memdx.OpSubdocDictUpsert, "a", "1", 0)
	x := memdx.SubdocPathXattr
	seventeen := make([]memdx.SubdocMutateOp, 17)
	for i := range seventeen {
		seventeen[i] = up
	}
	cases := []struct {
		name string
		df   memdx.SubdocDocFlag
		cas  uint64
		ops  []memdx.SubdocMutateOp
		st   memdx.Status
	}{
		{"17 specs", 0, 0, seventeen, memdx.StatusSubdocInvalidCombo},
		{"no specs", 0, 0, nil, memdx.StatusSubdocInvalidCombo},
		{"lookup opcode", 0, 0, []memdx.SubdocMutateOp{mu(memdx.OpSubdocGet, "a", "", 0)}, memdx.StatusSubdocInvalidCombo},
		{"unknown opcode", 0, 0, []memdx.SubdocMutateOp{mu(memdx.OpNoop, "a", "", 0)}, memdx.StatusSubdocInvalidCombo},
		{"xattr after body", 0, 0, []memdx.SubdocMutateOp{up, mu(memdx.OpSubdocDictUpsert, "x", "1", x)}, memdx.StatusSubdocInvalidXattrOrder},
		{"macro without xattr", 0, 0, []memdx.SubdocMutateOp{mu(memdx.OpSubdocDictUpsert, "a", `"${Mutation.CAS}"`, memdx.SubdocPathExpandMacros)}, memdx.StatusSubdocXattrInvalidFlagCombo},
		{"unknown macro", 0, 0, []memdx.SubdocMutateOp{mu(memdx.OpSubdocDictUpsert, "m", `"${Mutation.nope}"`, x|memdx.SubdocPathExpandMacros)}, memdx.StatusSubdocXattrUnknownMacro},
		{"xattr key too long", 0, 0, []memdx.SubdocMutateOp{mu(memdx.OpSubdocDictUpsert, "abcdefghijklmnopq", "1", x)}, memdx.StatusXattrInvalid},
		{"xattr key punctuation", 0, 0, []memdx.SubdocMutateOp{mu(memdx.OpSubdocDictUpsert, "#k", "1", x)}, memdx.StatusXattrInvalid},
		{"write a vattr", 0, 0, []memdx.SubdocMutateOp{mu(memdx.OpSubdocDictUpsert, "$document.CAS", "1", x)}, memdx.StatusSubdocXattrCantModifyVattr},
		{"mkdir-p on replace", 0, 0, []memdx.SubdocMutateOp{mu(memdx.OpSubdocReplace, "a", "1", memdx.SubdocPathMkdirP)}, memdx.StatusInvalidArgs},
		{"empty path", 0, 0, []memdx.SubdocMutateOp{mu(memdx.OpSubdocDictUpsert, "", "1", 0)}, memdx.StatusInvalidArgs},
		{"path too long", 0, 0, []memdx.SubdocMutateOp{mu(memdx.OpSubdocDictUpsert, strings.Repeat("a", 1025), "1", 0)}, memdx.StatusInvalidArgs},
		{"whole-doc set with path", 0, 0, []memdx.SubdocMutateOp{mu(memdx.OpSet, "a", "1", 0)}, memdx.StatusInvalidArgs},
		{"delete then body", 0, 0, []memdx.SubdocMutateOp{mu(memdx.OpDelete, "", "", 0), up}, memdx.StatusSubdocInvalidCombo},
		{"body then delete", 0, 0, []memdx.SubdocMutateOp{up, mu(memdx.OpDelete, "", "", 0)}, memdx.StatusSubdocInvalidCombo},
		{"add and mkdoc", memdx.SubdocDocAdd | memdx.SubdocDocMkdoc, 0, []memdx.SubdocMutateOp{up}, memdx.StatusInvalidArgs},
		{"add with cas", memdx.SubdocDocAdd, 5, []memdx.SubdocMutateOp{up}, memdx.StatusInvalidArgs},
		{"revive without access-deleted", memdx.SubdocDocReviveDocument, 0, []memdx.SubdocMutateOp{up}, memdx.StatusInvalidArgs},
		{"create-as-deleted alone", memdx.SubdocDocCreateAsDeleted, 0, []memdx.SubdocMutateOp{up}, memdx.StatusInvalidArgs},
		{"replica read on a mutation", memdx.SubdocDocReplicaRead, 0, []memdx.SubdocMutateOp{up}, memdx.StatusInvalidArgs},
		{"add on existing", memdx.SubdocDocAdd, 0, []memdx.SubdocMutateOp{up}, memdx.StatusKeyExists},
		{"revive a live document", memdx.SubdocDocAccessDeleted | memdx.SubdocDocReviveDocument, 0, []memdx.SubdocMutateOp{mu(memdx.OpSubdocDictUpsert, "x", "1", x)}, memdx.StatusSubdocCanOnlyReviveDeletedDocuments},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e.t = t
			p, _ := e.mutateIn("doc", c.df, c.cas, c.ops...)
			e.expect(c.name, p, c.st)
		})
	}
	// Without HELLO XATTR an xattr path is not supported.
	e.t = t
	plain := newKVEnv(t, Options{}, stdFeatures)
	p, _ := plain.mutateIn("doc", memdx.SubdocDocMkdoc, 0, mu(memdx.OpSubdocDictUpsert, "x", "1", x))
	plain.expect("xattr without HELLO XATTR", p, memdx.StatusNotSupported)
}

// xattrLookups reads xattr paths of key (access-deleted when deleted).
func (e *kvEnv) xattrLookups(key string, df memdx.SubdocDocFlag, paths ...string) (memdx.Status, []memdx.SubdocLookupResult) {
	e.t.Helper()
	ops := make([]memdx.SubdocLookupOp, len(paths))
	for i, p := range paths {
		ops[i] = lk(memdx.OpSubdocGet, p, memdx.SubdocPathXattr)
	}
	p, rs := e.lookupIn(key, df, ops...)
	return p.Status, rs
}

// TestSubdocXattrOnlyDocument creates a document with xattr specs only:
// its body is an empty object, its xattrs are kept apart from it (a GET
// returns the body alone, a SET of the body keeps them) and the virtual
// xattrs describe it.
func TestSubdocXattrOnlyDocument(t *testing.T) {
	e := newSubdocEnv(t)
	x := memdx.SubdocPathXattr
	p, _ := e.mutateIn("doc", memdx.SubdocDocMkdoc, 0,
		mu(memdx.OpSubdocDictUpsert, "meta.owner", `"me"`, x|memdx.SubdocPathMkdirP),
		mu(memdx.OpSubdocArrayPushLast, "_sys.seen", `1`, x|memdx.SubdocPathMkdirP))
	e.expect("create with xattrs only", p, memdx.StatusSuccess)
	if got, st := e.body("doc"); st != memdx.StatusSuccess || got != `{}` {
		t.Fatalf("body %s %q, want {}", st, got)
	}
	st, rs := e.xattrLookups("doc", 0, "meta", "_sys.seen[0]", "$document.value_bytes", "$document.deleted", "$XTOC", "nope", "$nope")
	want := []string{`{"owner":"me"}`, `1`, `2`, `false`, `["meta","_sys"]`, "", ""}
	wantSt := []memdx.Status{0, 0, 0, 0, 0, memdx.StatusSubdocPathNotFound, memdx.StatusSubdocXattrUnknownVattr}
	if st != memdx.StatusSubdocMultiPathFailure {
		t.Fatalf("lookup status %s", st)
	}
	for i := range rs {
		if rs[i].Status != wantSt[i] || string(rs[i].Value) != want[i] {
			t.Errorf("spec %d: %s %q, want %s %q", i, rs[i].Status, rs[i].Value, wantSt[i], want[i])
		}
	}
	if xs, deleted, ok := e.b.Xattrs("", "", "doc"); !ok || deleted || string(xs) != `{"meta":{"owner":"me"},"_sys":{"seen":[1]}}` {
		t.Fatalf("Bucket.Xattrs: %s %v %v", xs, deleted, ok)
	}
	e.expect("set body", e.do(set("doc", `{"body":1}`)), memdx.StatusSuccess)
	_, rs = e.xattrLookups("doc", 0, "meta.owner")
	if rs[0].Status != memdx.StatusSuccess || string(rs[0].Value) != `"me"` {
		t.Fatalf("xattr after SET: %s %q", rs[0].Status, rs[0].Value)
	}
	// xattrs count against the document size limit.
	big := `"` + strings.Repeat("x", maxValue-10) + `"`
	// Seeded in place (a SET keeps the xattrs too): 20 MiB over loopback
	// under the race detector is slow.
	if _, err := e.b.Set("", "", "doc", []byte(big), 0, 0); err != nil {
		t.Fatal(err)
	}
	p, _ = e.mutateIn("doc", 0, 0, mu(memdx.OpSubdocDictUpsert, "pad", `"`+strings.Repeat("y", 64)+`"`, x))
	e.expect("xattr over the size limit", p, memdx.StatusTooBig)
}

// TestSubdocTombstoneRevive deletes a document with system and user
// xattrs: its tombstone keeps the system ones, reachable only with
// access-deleted; a mutation with access-deleted and revive makes it live
// again.
func TestSubdocTombstoneRevive(t *testing.T) {
	e := newSubdocEnv(t)
	x := memdx.SubdocPathXattr
	e.seed("doc", `{"v":1}`)
	p, _ := e.mutateIn("doc", 0, 0,
		mu(memdx.OpSubdocDictUpsert, "_sync", `{"rev":1}`, x),
		mu(memdx.OpSubdocDictUpsert, "user", `true`, x))
	e.expect("add xattrs", p, memdx.StatusSuccess)
	e.expect("delete", e.do(memdx.NewDelete([]byte("doc"))), memdx.StatusSuccess)
	if _, st := e.body("doc"); st != memdx.StatusKeyNotFound {
		t.Fatalf("GET of the tombstone: %s", st)
	}
	if st, _ := e.xattrLookups("doc", 0, "_sync"); st != memdx.StatusKeyNotFound {
		t.Fatalf("lookup without access-deleted: %s", st)
	}
	if m := e.do(memdx.NewGetMeta([]byte("doc"))); m.Status != memdx.StatusSuccess || u32(m.Extras[0:4]) != 1 || m.Extras[20]&byte(memdx.DatatypeXattr) == 0 {
		t.Fatalf("GET_META of the tombstone: %s extras %x", m.Status, m.Extras)
	}
	st, rs := e.xattrLookups("doc", memdx.SubdocDocAccessDeleted, "_sync.rev", "user", "$document.deleted")
	if st != memdx.StatusSubdocMultiPathFailureDeleted || string(rs[0].Value) != "1" ||
		rs[1].Status != memdx.StatusSubdocPathNotFound || string(rs[2].Value) != "true" {
		t.Fatalf("tombstone lookup %s %+v", st, rs)
	}
	pl, lr := e.lookupIn("doc", memdx.SubdocDocAccessDeleted, lk(memdx.OpGet, "", 0))
	if pl.Status != memdx.StatusSubdocMultiPathFailureDeleted || lr[0].Status != memdx.StatusSubdocPathNotFound {
		t.Fatalf("whole-body lookup of a tombstone: %s %+v", pl.Status, lr)
	}
	// An xattr write keeps it deleted.
	p, _ = e.mutateIn("doc", memdx.SubdocDocAccessDeleted, 0, mu(memdx.OpSubdocDictUpsert, "txn", `"staged"`, x))
	e.expect("xattr write on a tombstone", p, memdx.StatusSubdocSuccessDeleted)
	p, _ = e.mutateIn("doc", memdx.SubdocDocAccessDeleted, 0, mu(memdx.OpSubdocDictUpsert, "body", `1`, 0))
	e.expect("body write on a tombstone", p, memdx.StatusSubdocDeletedDocumentCantHaveValue)
	// Revive, with a new body.
	p, _ = e.mutateIn("doc", memdx.SubdocDocAccessDeleted|memdx.SubdocDocReviveDocument, p.Cas,
		mu(memdx.OpSubdocReplaceBodyWithXattr, "txn", "", x),
		mu(memdx.OpSubdocDelete, "txn", "", x))
	e.expect("revive", p, memdx.StatusSuccess)
	if got, st := e.body("doc"); st != memdx.StatusSuccess || got != `"staged"` {
		t.Fatalf("revived body %s %q", st, got)
	}
	st, rs = e.xattrLookups("doc", 0, "_sync.rev", "txn")
	if st != memdx.StatusSubdocMultiPathFailure || string(rs[0].Value) != "1" || rs[1].Status != memdx.StatusSubdocPathNotFound {
		t.Fatalf("revived xattrs %s %+v", st, rs)
	}
	// A whole-document delete through MULTI_MUTATION keeps system xattrs
	// too; without any, the tombstone has none.
	p, _ = e.mutateIn("doc", 0, 0, mu(memdx.OpDelete, "", "", 0))
	e.expect("whole-doc delete", p, memdx.StatusSuccess)
	if st, _ := e.xattrLookups("doc", memdx.SubdocDocAccessDeleted, "_sync.rev"); st != memdx.StatusSubdocSuccessDeleted {
		t.Fatalf("tombstone after whole-doc delete: %s", st)
	}
	e.seed("plain", `{}`)
	e.expect("delete plain", e.do(memdx.NewDelete([]byte("plain"))), memdx.StatusSuccess)
	if st, rs := e.xattrLookups("plain", memdx.SubdocDocAccessDeleted, "_sync"); st != memdx.StatusSubdocMultiPathFailureDeleted ||
		rs[0].Status != memdx.StatusSubdocPathNotFound {
		t.Fatalf("tombstone of a document without system xattrs: %s %+v", st, rs)
	}
}

// TestSubdocCreateAsDeleted creates a tombstone with xattrs (what
// transactions stage inserts with).
func TestSubdocCreateAsDeleted(t *testing.T) {
	e := newSubdocEnv(t)
	x := memdx.SubdocPathXattr
	df := memdx.SubdocDocAdd | memdx.SubdocDocAccessDeleted | memdx.SubdocDocCreateAsDeleted
	p, rs := e.mutateIn("doc", df, 0,
		mu(memdx.OpSubdocDictUpsert, "txn.id", `"t1"`, x|memdx.SubdocPathMkdirP),
		mu(memdx.OpSubdocCounter, "txn.n", `1`, x|memdx.SubdocPathMkdirP))
	if p.Status != memdx.StatusSubdocSuccessDeleted || len(rs) != 1 || rs[0].Index != 1 || string(rs[0].Value) != "1" {
		t.Fatalf("create-as-deleted: %s %+v", p.Status, rs)
	}
	if _, st := e.body("doc"); st != memdx.StatusKeyNotFound {
		t.Fatalf("GET of a document created as deleted: %s", st)
	}
	st, rs2 := e.xattrLookups("doc", memdx.SubdocDocAccessDeleted, "txn.id")
	if st != memdx.StatusSubdocSuccessDeleted || string(rs2[0].Value) != `"t1"` {
		t.Fatalf("lookup: %s %+v", st, rs2)
	}
	p, _ = e.mutateIn("doc", df, 0, mu(memdx.OpSubdocDictUpsert, "txn.id", `"t2"`, x))
	e.expect("insert over a tombstone with access-deleted", p, memdx.StatusKeyExists)
	p, _ = e.mutateIn("other", df, 0, mu(memdx.OpSubdocDictUpsert, "txn", `1`, x), mu(memdx.OpSubdocDictUpsert, "b", `1`, 0))
	e.expect("create-as-deleted with a body path", p, memdx.StatusSubdocDeletedDocumentCantHaveValue)
}

// TestSubdocMacroExpansion expands the mutation macros with the new
// document's CAS (written as kv_engine writes it: its network-order bytes
// read as a little-endian number), seqno and body CRC32C, and
// ${$document.CAS} with the CAS before the mutation.
func TestSubdocMacroExpansion(t *testing.T) {
	e := newSubdocEnv(t)
	x := memdx.SubdocPathXattr | memdx.SubdocPathExpandMacros
	old := e.seed("doc", `{"v":1}`)
	p, _ := e.mutateIn("doc", 0, 0,
		mu(memdx.OpSubdocDictUpsert, "m.cas", `"${Mutation.CAS}"`, x|memdx.SubdocPathMkdirP),
		mu(memdx.OpSubdocDictUpsert, "m.seqno", `"${Mutation.seqno}"`, x),
		mu(memdx.OpSubdocDictUpsert, "m.crc", `"${Mutation.value_crc32c}"`, x),
		mu(memdx.OpSubdocDictUpsert, "m.prev", `"${$document.CAS}"`, x),
		mu(memdx.OpSubdocDictUpsert, "v", `2`, 0))
	e.expect("mutate with macros", p, memdx.StatusSuccess)
	seqno := binary.BigEndian.Uint64(p.Extras[8:16])
	crc := crc32.Checksum([]byte(`{"v":2}`), crc32.MakeTable(crc32.Castagnoli))
	want := fmt.Sprintf(`{"cas":"0x%016x","seqno":"0x%016x","crc":"0x%08x","prev":"0x%016x"}`,
		bits.ReverseBytes64(p.Cas), seqno, crc, old)
	_, rs := e.xattrLookups("doc", 0, "m", "$document.CAS")
	if string(rs[0].Value) != want {
		t.Fatalf("expanded %s\nwant     %s", rs[0].Value, want)
	}
	if string(rs[1].Value) != fmt.Sprintf(`"0x%016x"`, p.Cas) {
		t.Fatalf("$document.CAS %s, cas %x", rs[1].Value, p.Cas)
	}
}

// TestSubdocExpiry: a mutation sets the expiry it carries, clears it
// without one, and keeps it with preserve-TTL.
func TestSubdocExpiry(t *testing.T) {
	e := newSubdocEnv(t)
	e.seed("doc", `{}`)
	up := []memdx.SubdocMutateOp{mu(memdx.OpSubdocDictUpsert, "a", "1", 0)}
	r := memdx.NewSubdocMultiMutation([]byte("doc"), 0, 100, up)
	e.expect("with expiry", e.do(r), memdx.StatusSuccess)
	if d, _ := e.b.Get("", "", "doc"); !d.Expiry.Equal(e.now.Add(100 * time.Second)) {
		t.Fatalf("expiry %v", d.Expiry)
	}
	r = memdx.NewSubdocMultiMutation([]byte("doc"), 0, 0, up)
	r.PreserveTTL = true
	e.expect("preserve", e.do(r), memdx.StatusSuccess)
	if d, _ := e.b.Get("", "", "doc"); !d.Expiry.Equal(e.now.Add(100 * time.Second)) {
		t.Fatalf("expiry after preserve-TTL %v", d.Expiry)
	}
	e.expect("without expiry", e.do(memdx.NewSubdocMultiMutation([]byte("doc"), 0, 0, up)), memdx.StatusSuccess)
	if d, _ := e.b.Get("", "", "doc"); !d.Expiry.IsZero() {
		t.Fatalf("expiry after a mutation without one %v", d.Expiry)
	}
}

// TestSubdocDocumentVattr checks $document's fields against the document.
func TestSubdocDocumentVattr(t *testing.T) {
	e := newSubdocEnv(t)
	cas := e.seed("doc", `{"v":1}`)
	_, rs := e.xattrLookups("doc", 0, "$document")
	var m map[string]any
	if err := json.Unmarshal(rs[0].Value, &m); err != nil {
		t.Fatal(err)
	}
	if m["CAS"] != fmt.Sprintf("0x%016x", cas) || m["value_bytes"] != float64(7) || m["deleted"] != false ||
		fmt.Sprint(m["datatype"]) != "[json]" || m["exptime"] != float64(0) {
		t.Fatalf("$document %s", rs[0].Value)
	}
	keys := bytes.Split(rs[0].Value, []byte(`":`))
	if !bytes.HasPrefix(keys[0], []byte(`{"CAS`)) {
		t.Fatalf("$document members not sorted as kv_engine writes them: %s", rs[0].Value)
	}
}

// TestSubdocDurableMutation: a multi-mutation with durability waits for its
// sync write like any mutation, and others writers of the key meet
// SYNC_WRITE_IN_PROGRESS meanwhile.
func TestSubdocDurableMutation(t *testing.T) {
	e := newSubdocEnv(t)
	e.seed("doc", `{}`)
	r := memdx.NewSubdocMultiMutation([]byte("doc"), 0, 0, []memdx.SubdocMutateOp{mu(memdx.OpSubdocCounter, "n", "1", 0)})
	r.Durability = memdx.DurabilityMajority
	p := e.expect("durable", e.do(r), memdx.StatusSuccess)
	if rs, _ := memdx.DecodeSubdocMultiMutation(p.Value, nil); len(rs) != 1 || string(rs[0].Value) != "1" {
		t.Fatalf("results %+v", rs)
	}
	if got, _ := e.body("doc"); got != `{"n":1}` {
		t.Fatalf("body %s", got)
	}
}
