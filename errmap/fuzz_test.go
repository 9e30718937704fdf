package errmap

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strconv"
	"testing"

	"github.com/kvwire/kvwire/internal/conformance"
)

// FuzzParse checks, for any input: Parse never panics; a rejection is a
// *ParseError matching ErrCorrupt; an accepted map is well formed, agrees
// with encoding/json's generic reading of the same bytes, and survives a
// round trip through the test encoder unchanged.
//
// Seeds: the conformance maps when present, and testdata/fuzz/FuzzParse.
func FuzzParse(f *testing.F) {
	for _, c := range conformanceMaps {
		for _, b := range conformance.Seeds(f, "errmap/"+c.file) {
			f.Add(b)
		}
	}
	f.Add([]byte(smallV2))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := Parse(b)
		if err != nil {
			checkRejection(t, b, m, err)
			return
		}
		checkMap(t, m)
		checkAgainstGeneric(t, b, m)
		again, err := Parse(encode(m))
		if err != nil {
			t.Fatalf("re-encoded map rejected: %v\n%s", err, encode(m))
		}
		if !reflect.DeepEqual(again, m) {
			t.Fatalf("re-encoded map differs:\n got %+v\nwant %+v", again.Entries(), m.Entries())
		}
	})
}

func checkRejection(t *testing.T, b []byte, m *Map, err error) {
	t.Helper()
	if m != nil {
		t.Fatalf("Parse returned a map and an error")
	}
	var pe *ParseError
	if !errors.As(err, &pe) || !errors.Is(err, ErrCorrupt) {
		t.Fatalf("error %T is not a *ParseError matching ErrCorrupt: %v", err, err)
	}
	if pe.Reason == "" || pe.Offset < 0 || pe.Offset > int64(len(b)) {
		t.Fatalf("ParseError without a reason or with offset %d outside %d bytes: %v", pe.Offset, len(b), err)
	}
	_ = err.Error()
}

// validAttrs is every bit a parsed Attrs may have.
var validAttrs = NewAttrs(KnownAttrs()...)

func checkMap(t *testing.T, m *Map) {
	t.Helper()
	if m.Version < 1 || m.Version > MaxVersion || m.Revision < 0 {
		t.Fatalf("version %d revision %d", m.Version, m.Revision)
	}
	es := m.Entries()
	if len(es) != m.Len() {
		t.Fatalf("Entries has %d, Len %d", len(es), m.Len())
	}
	for i, e := range es {
		if i > 0 && es[i-1].Status >= e.Status {
			t.Fatalf("entries not strictly ascending at %d", i)
		}
		if got, ok := m.Lookup(e.Status); !ok || !reflect.DeepEqual(got, e) {
			t.Fatalf("Lookup(%#x) = %+v, %v; want %+v", uint16(e.Status), got, ok, e)
		}
		if next := e.Status + 1; next != 0 && (i+1 == len(es) || es[i+1].Status != next) {
			if _, ok := m.Lookup(next); ok {
				t.Fatalf("Lookup(%#x) found an entry the map does not have", uint16(next))
			}
		}
		if e.Attrs&^validAttrs != 0 {
			t.Fatalf("%#x: attrs %#x has unknown bits", uint16(e.Status), uint32(e.Attrs))
		}
		if r := e.Retry; r != nil {
			if r.Strategy < Constant || r.Strategy > Exponential || r.After < 0 || r.Interval < 0 || r.Ceil < 0 || r.MaxDuration < 0 {
				t.Fatalf("%#x: bad retry spec %+v", uint16(e.Status), *r)
			}
			for _, n := range []int{1, 2, 3, 10, 64, 1 << 20} {
				d := r.Delay(n)
				if d < 0 || (n > 1 && r.Strategy != Constant && r.Ceil > 0 && d > r.Ceil) {
					t.Fatalf("%#x: Delay(%d) = %v for %v", uint16(e.Status), n, d, r)
				}
			}
		}
	}
}

// checkAgainstGeneric reads b with encoding/json into generic values and
// checks that Parse saw the same map.
func checkAgainstGeneric(t *testing.T, b []byte, m *Map) {
	t.Helper()
	if !json.Valid(b) {
		t.Fatalf("Parse accepted what encoding/json rejects")
	}
	var doc map[string]any
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if err := dec.Decode(&doc); err != nil {
		t.Fatalf("encoding/json: %v", err)
	}
	if doc["version"] != json.Number(strconv.Itoa(m.Version)) {
		t.Fatalf("version %v, Parse said %d", doc["version"], m.Version)
	}
	if rev, err := strconv.ParseInt(string(doc["revision"].(json.Number)), 10, 64); err != nil || rev != int64(m.Revision) {
		t.Fatalf("revision %v, Parse said %d", doc["revision"], m.Revision)
	}
	errs := doc["errors"].(map[string]any)
	if len(errs) != m.Len() {
		t.Fatalf("encoding/json sees %d entries, Parse %d", len(errs), m.Len())
	}
	for k, v := range errs {
		st, reason := statusKey([]byte(k))
		if reason != "" {
			t.Fatalf("key %q accepted: %s", k, reason)
		}
		e, ok := m.Lookup(st)
		if !ok {
			t.Fatalf("key %q missing", k)
		}
		ent := v.(map[string]any)
		if ent["name"] != e.Name {
			t.Fatalf("%q: name %q, Parse %q", k, ent["name"], e.Name)
		}
		if desc, ok := ent["desc"]; (ok || e.Desc != "") && desc != e.Desc {
			t.Fatalf("%q: desc %q, Parse %q", k, desc, e.Desc)
		}
		var want Attrs
		for _, a := range ent["attrs"].([]any) {
			if at, ok := ParseAttr(a.(string)); ok {
				want |= NewAttrs(at)
			}
		}
		if want != e.Attrs {
			t.Fatalf("%q: attrs %q, Parse %q", k, want, e.Attrs)
		}
		if _, has := ent["retry"]; has != (e.Retry != nil) {
			t.Fatalf("%q: retry present %v, Parse %v", k, has, e.Retry)
		}
	}
}
