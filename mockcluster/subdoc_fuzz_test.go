package mockcluster

import (
	"encoding/json"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/kvwire/kvwire/memdx"
)

// renderPath writes comps back as a path, escaping keys with backticks
// where they hold path metacharacters.
func renderPath(comps []pathComp) string {
	var b strings.Builder
	for i, c := range comps {
		if c.isIndex {
			b.WriteString("[" + strconv.Itoa(c.index) + "]")
			continue
		}
		if i > 0 {
			b.WriteByte('.')
		}
		if strings.ContainsAny(c.key, ".[]`") {
			b.WriteString("`" + strings.ReplaceAll(c.key, "`", "``") + "`")
		} else {
			b.WriteString(c.key)
		}
	}
	return b.String()
}

// FuzzSubdocPath checks the path parser: any input gives a path or
// PATH_EINVAL / PATH_E2BIG, never a panic; a parsed path has at most 32
// components, no empty key, and reads back the same once rendered; and the
// input taken as one key reads back as that key once escaped.
func FuzzSubdocPath(f *testing.F) {
	for _, s := range []string{"", "a", "a.b.c", "arr[0]", "arr[-1].x", "[3][4]", "`a.b`.c", "`back``tick`",
		"a..b", "a.", ".a", "a[", "a[]", "a[x]", "a[-2]", "a]b", "`open", "a.[0]", "x" + strings.Repeat(".x", 40),
		"pDistributors[1].dAdded[2]", "a`b`c", "a[1]b", "a[99999999999]", "a``b", "``", "```", `a\"b`, `a\u0041`,
		"arr[]", "arr[0].", "a.[0]"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, path []byte) {
		// The input as one key, escaped, reads back as that key (when it
		// needs no JSON escapes: those it must carry already escaped).
		if len(path) > 0 && !strings.ContainsFunc(string(path), func(r rune) bool { return r == '\\' || r == '"' || r < 0x20 }) {
			one := []pathComp{{key: string(path)}}
			got, st := parseSubdocPath([]byte(renderPath(one)))
			if st != memdx.StatusSuccess || !reflect.DeepEqual(got, one) {
				t.Fatalf("key %q rendered %q reads back %s %+v", path, renderPath(one), st, got)
			}
		}
		comps, st := parseSubdocPath(path)
		switch st {
		case memdx.StatusSuccess:
		case memdx.StatusSubdocPathInvalid, memdx.StatusSubdocPathTooBig:
			if comps != nil {
				t.Fatalf("%q: %s with components %+v", path, st, comps)
			}
			return
		default:
			t.Fatalf("%q: status %s", path, st)
		}
		if len(comps) > subdocMaxDepth {
			t.Fatalf("%q: %d components", path, len(comps))
		}
		for i, c := range comps {
			if !c.isIndex && c.key == "" {
				t.Fatalf("%q: empty key at %d", path, i)
			}
			if c.isIndex && c.index < -1 {
				t.Fatalf("%q: index %d", path, c.index)
			}
		}
		again, st := parseSubdocPath([]byte(renderPath(comps)))
		if st != memdx.StatusSuccess || !reflect.DeepEqual(again, comps) {
			t.Fatalf("%q parsed as %+v, rendered %q, reparsed %s %+v", path, comps, renderPath(comps), st, again)
		}
	})
}

var fuzzMutationOps = []memdx.OpCode{
	memdx.OpSubdocDictAdd, memdx.OpSubdocDictUpsert, memdx.OpSubdocReplace, memdx.OpSubdocDelete,
	memdx.OpSubdocArrayPushLast, memdx.OpSubdocArrayPushFirst, memdx.OpSubdocArrayInsert,
	memdx.OpSubdocArrayAddUnique, memdx.OpSubdocCounter,
}

// trimJSONSpace trims JSON whitespace.
func trimJSONSpace(b []byte) []byte {
	return []byte(strings.Trim(string(b), " \t\r\n"))
}

// FuzzSubdocMutation runs a path mutation on arbitrary documents, paths
// and values. It never panics; the JSON parser agrees with encoding/json;
// a success leaves valid JSON no deeper than the limit, in which the path
// now reads the value written (dictionary ops, replace, counter) or the
// parent lost one member (delete); a failure returns no document.
func FuzzSubdocMutation(f *testing.F) {
	doc := []byte(`{"a":1,"arr":[1,"two",{"x":null}],"o":{"p":{"q":[true]}}, "n":-5, "f":1.5, "s":"\u00e9\n"}`)
	for i, c := range []struct{ path, value string }{
		{"b", `{"new":[1,2]}`}, {"a", `"x"`}, {"o.p.q[0]", `false`}, {"arr[1]", ``}, {"arr", `4,5`},
		{"o.p.q", `0`}, {"arr[3]", `"end"`}, {"arr", `"two"`}, {"n", `10`}, {"x.y.z", `1`}, {"`a`", `1`},
		{"arr[-1].x", `[[[]]]`}, {"o.p.q[-1]", `1`}, {"f", `-3`}, {"s", ` 7 `},
	} {
		f.Add(doc, []byte(c.path), []byte(c.value), uint8(i), i%2 == 0)
	}
	f.Add([]byte(`[1,2]`), []byte(""), []byte(`3`), uint8(4), false)
	f.Add([]byte(`{}`), []byte("k"), []byte(deepJSON(31)), uint8(0), false)
	f.Add([]byte(`not json`), []byte("k"), []byte(`1`), uint8(1), false)
	f.Fuzz(func(t *testing.T, doc, path, value []byte, opn uint8, mkdir bool) {
		op := fuzzMutationOps[int(opn)%len(fuzzMutationOps)]
		_, docSt := parseJSON(doc, subdocMaxDepth)
		if docSt == memdx.StatusSuccess && !json.Valid(doc) {
			t.Fatalf("parser accepts %q, encoding/json does not", doc)
		}
		if docSt == memdx.StatusSubdocNotJSON && json.Valid(doc) {
			t.Fatalf("parser rejects %q, encoding/json accepts it", doc)
		}
		comps, st := parseSubdocPath(path)
		if st != memdx.StatusSuccess {
			return
		}
		nd, res, st := sdMutate(op, doc, comps, value, mkdir)
		if docSt != memdx.StatusSuccess {
			if st != docSt || nd != nil {
				t.Fatalf("document %q: status %s, want %s", doc, st, docSt)
			}
			return
		}
		if st != memdx.StatusSuccess {
			if nd != nil || res != nil {
				t.Fatalf("%s failed with %s but returned %q %q", op, st, nd, res)
			}
			return
		}
		if !json.Valid(nd) {
			t.Fatalf("%s %q %q on %q left invalid JSON %q", op, path, value, doc, nd)
		}
		if _, st := parseJSON(nd, subdocMaxDepth); st != memdx.StatusSuccess {
			t.Fatalf("%s %q %q on %q left %q: %s", op, path, value, doc, nd, st)
		}
		switch op {
		case memdx.OpSubdocDictAdd, memdx.OpSubdocDictUpsert, memdx.OpSubdocReplace:
			got, st := sdLookup(memdx.OpSubdocGet, nd, comps)
			if st != memdx.StatusSuccess || string(got) != string(trimJSONSpace(value)) {
				t.Fatalf("%s %q %q on %q: reads back %s %q from %q", op, path, value, doc, st, got, nd)
			}
		case memdx.OpSubdocCounter:
			got, st := sdLookup(memdx.OpSubdocGet, nd, comps)
			if _, err := strconv.ParseInt(string(res), 10, 64); err != nil || st != memdx.StatusSuccess || string(got) != string(res) {
				t.Fatalf("counter %q %q on %q: result %q, reads back %s %q", path, value, doc, res, st, got)
			}
		case memdx.OpSubdocDelete:
			parent := comps[:len(comps)-1]
			before, _ := sdLookup(memdx.OpSubdocGetCount, doc, parent)
			after, st := sdLookup(memdx.OpSubdocGetCount, nd, parent)
			b, _ := strconv.Atoi(string(before))
			a, _ := strconv.Atoi(string(after))
			if st != memdx.StatusSuccess || a != b-1 {
				t.Fatalf("delete %q on %q: parent count %d -> %s %d", path, doc, b, st, a)
			}
		}
	})
}
