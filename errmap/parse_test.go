package errmap

import (
	"errors"
	"io"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/kvwire/kvwire/memdx"
)

// A small v2 map in kv_engine's layout, with a retry spec added.
const smallV2 = `{
  "version": 2,
  "revision": 7,
  "errors": {
    "86": {"name": "ETMPFAIL", "desc": "Temporary failure. Try again", "attrs": ["temp", "retry-now"]},
    "1": {"name": "KEY_ENOENT", "desc": "Not Found", "attrs": ["item-only"]},
    "28": {"name": "EXPIRY_OVERFLOW", "desc": "overflows", "attrs": ["item-only", "system-constraint", "no-retry"]},
    "7ff1": {"name": "DUMMY_ERROR_RETRY_LINEAR", "desc": "Dummy", "attrs": ["auto-retry", "temp"],
             "retry": {"strategy": "linear", "interval": 2, "after": 50, "max-duration": 500, "ceil": 50}}
  }
}`

func TestParseSmall(t *testing.T) {
	m := mustParse(t, []byte(smallV2))
	if m.Version != 2 || m.Revision != 7 || m.Len() != 4 {
		t.Fatalf("Version %d Revision %d Len %d; want 2, 7, 4", m.Version, m.Revision, m.Len())
	}
	want := []Entry{
		{Status: 0x01, Name: "KEY_ENOENT", Desc: "Not Found", Attrs: NewAttrs(AttrItemOnly)},
		{Status: 0x28, Name: "EXPIRY_OVERFLOW", Desc: "overflows", Attrs: NewAttrs(AttrItemOnly, AttrSystemConstraint, AttrNoRetry)},
		{Status: 0x86, Name: "ETMPFAIL", Desc: "Temporary failure. Try again", Attrs: NewAttrs(AttrTemp, AttrRetryNow)},
		{Status: 0x7ff1, Name: "DUMMY_ERROR_RETRY_LINEAR", Desc: "Dummy", Attrs: NewAttrs(AttrAutoRetry, AttrTemp), Retry: &mockLinear},
	}
	if got := m.Entries(); !reflect.DeepEqual(got, want) {
		t.Fatalf("Entries (sorted by status):\n got %+v\nwant %+v", got, want)
	}
	for _, w := range want {
		got, ok := m.Lookup(w.Status)
		if !ok || !reflect.DeepEqual(got, w) {
			t.Errorf("Lookup(%#x) = %+v, %v; want %+v", uint16(w.Status), got, ok, w)
		}
	}
	for _, s := range []memdx.Status{0, 2, 0x27, 0x29, 0x85, 0x87, 0x7ff0, 0x7ff2, 0xffff} {
		if e, ok := m.Lookup(s); ok || !reflect.DeepEqual(e, Entry{}) {
			t.Errorf("Lookup(%#x) = %+v, %v; want zero, false", uint16(s), e, ok)
		}
	}
}

func TestParseEmptyErrors(t *testing.T) {
	m := mustParse(t, []byte(`{"version":1,"revision":0,"errors":{}}`))
	if m.Len() != 0 || len(m.Entries()) != 0 {
		t.Errorf("Len %d", m.Len())
	}
	if _, ok := m.Lookup(0); ok {
		t.Error("Lookup found an entry in an empty map")
	}
}

func TestNilMap(t *testing.T) {
	var m *Map
	if e, ok := m.Lookup(memdx.StatusTmpFail); ok || !reflect.DeepEqual(e, Entry{}) {
		t.Errorf("nil Lookup = %+v, %v", e, ok)
	}
	if m.Len() != 0 || m.Entries() != nil {
		t.Errorf("nil Len %d Entries %v", m.Len(), m.Entries())
	}
}

func TestEntriesIsACopy(t *testing.T) {
	m := mustParse(t, []byte(smallV2))
	es := m.Entries()
	es[0].Name = "CHANGED"
	es[0].Attrs = 0
	if e, _ := m.Lookup(1); e.Name != "KEY_ENOENT" || !e.Attrs.Has(AttrItemOnly) {
		t.Errorf("changing Entries' result changed the map: %+v", e)
	}
}

func TestParseDoesNotRetainInput(t *testing.T) {
	b := []byte(smallV2)
	m := mustParse(t, b)
	for i := range b {
		b[i] = 'X'
	}
	if e, _ := m.Lookup(0x86); e.Name != "ETMPFAIL" || e.Desc != "Temporary failure. Try again" {
		t.Errorf("entry changed with the input buffer: %+v", e)
	}
}

func TestUnknownAttributesIgnored(t *testing.T) {
	for _, version := range []string{"1", "2"} {
		doc := `{"version":` + version + `,"revision":3,"errors":{
			"a": {"name":"A","desc":"a","attrs":["temp","quantum-flux","retry-later","Temp",""]},
			"b": {"name":"B","desc":"b","attrs":["only-unknown"]},
			"c": {"name":"C","desc":"c","attrs":[]},
			"d": {"name":"D","desc":"d","attrs":["temp","temp"]}}}`
		m, err := Parse([]byte(doc))
		if err != nil {
			t.Fatalf("version %s: %v", version, err)
		}
		want := map[memdx.Status]Attrs{
			0xa: NewAttrs(AttrTemp, AttrRetryLater),
			0xb: 0,
			0xc: 0,
			0xd: NewAttrs(AttrTemp),
		}
		for s, w := range want {
			e, ok := m.Lookup(s)
			if !ok || e.Attrs != w {
				t.Errorf("version %s: %#x attrs = %q (found %v), want %q", version, uint16(s), e.Attrs, ok, w)
			}
		}
		if e, _ := m.Lookup(0xa); !e.RetryIndicated() || e.Name != "A" {
			t.Errorf("version %s: entry with unknown attrs lost its known ones: %+v", version, e)
		}
		if e, _ := m.Lookup(0xb); e.RetryIndicated() {
			t.Errorf("version %s: an unknown attribute alone indicated a retry", version)
		}
	}
}

func TestUnknownFieldsIgnored(t *testing.T) {
	doc := `{"comment":{"nested":[1,2,{"x":null}]},"version":2,"revision":1,"future":[true,false],
	  "errors":{"7ff0":{"name":"N","extra":{"a":[]},"attrs":["auto-retry"],"desc":"D",
	    "retry":{"strategy":"constant","floor":3,"jitter":{"kind":"full"},"interval":10,"after":50}}},
	  "trailing-field":"x"}`
	m := mustParse(t, []byte(doc))
	e, ok := m.Lookup(0x7ff0)
	want := Entry{Status: 0x7ff0, Name: "N", Desc: "D", Attrs: NewAttrs(AttrAutoRetry),
		Retry: &RetrySpec{Strategy: Constant, Interval: 10 * ms, After: 50 * ms}}
	if !ok || !reflect.DeepEqual(e, want) {
		t.Errorf("Lookup = %+v, %v; want %+v", e, ok, want)
	}
}

func TestDescOptional(t *testing.T) {
	m := mustParse(t, []byte(`{"version":1,"revision":1,"errors":{"1":{"name":"KEY_ENOENT","attrs":["item-only"]}}}`))
	if e, _ := m.Lookup(1); e.Desc != "" || e.Name != "KEY_ENOENT" {
		t.Errorf("entry = %+v", e)
	}
}

// RFC 0013's example puts fff2's interval/after/ceil in the entry rather than
// in a "retry" object; those are unknown entry fields, so the entry parses
// with no retry spec.
func TestRFCExampleMisplacedRetryFields(t *testing.T) {
	m := mustParse(t, []byte(`{"version":1,"revision":1,"errors":{"fff2":{"name":"DUMMY_ERROR_RETRY_EXPONENTIAL",
	  "desc":"Dummy retry error for exponential backoff","attrs":["auto-retry","temp"],
	  "interval":2,"after":10,"max-duration":1500,"ceil":500}}}`))
	if e, ok := m.Lookup(0xfff2); !ok || e.Retry != nil || !e.RetryIndicated() {
		t.Errorf("entry = %+v, %v", e, ok)
	}
}

func TestKeyForms(t *testing.T) {
	doc := `{"version":1,"revision":1,"errors":{
	  "0":{"name":"a","attrs":[]}, "1F":{"name":"b","attrs":[]}, "00a2":{"name":"c","attrs":[]},
	  "ff00":{"name":"d","attrs":[]}, "FFFF":{"name":"e","attrs":[]}, "0000000000000000007ff0":{"name":"f","attrs":[]}}}`
	m := mustParse(t, []byte(doc))
	for s, name := range map[memdx.Status]string{0: "a", 0x1f: "b", 0xa2: "c", 0xff00: "d", 0xffff: "e", 0x7ff0: "f"} {
		if e, ok := m.Lookup(s); !ok || e.Name != name {
			t.Errorf("Lookup(%#x) = %+v, %v; want name %q", uint16(s), e, ok, name)
		}
	}
}

func TestParseCorrupt(t *testing.T) {
	const head = `{"version":1,"revision":1,"errors":`
	entry := func(body string) string { return head + `{"7ff0":` + body + `}}` }
	retry := func(body string) string {
		return entry(`{"name":"N","desc":"D","attrs":["auto-retry"],"retry":` + body + `}`)
	}
	tests := []struct {
		name       string
		in         string
		key, field string
		reason     string // a word the reason must contain
		wantErr    error  // a further error errors.Is must match, if any
	}{
		// Not one JSON object.
		{name: "empty", in: "", reason: "end of input", wantErr: io.ErrUnexpectedEOF},
		{name: "spaces", in: " \n\t", reason: "end of input", wantErr: io.ErrUnexpectedEOF},
		{name: "null", in: "null", reason: "must be an object"},
		{name: "array", in: "[]", reason: "must be an object"},
		{name: "string", in: `"errors"`, reason: "must be an object"},
		{name: "truncated", in: `{"version":1,"revision":1,"errors":{"1":{"name":"x"`, key: "1", field: "", reason: "end of input", wantErr: io.ErrUnexpectedEOF},
		{name: "truncated in unknown field", in: `{"x":[1,2`, field: "x", reason: "end of input", wantErr: io.ErrUnexpectedEOF},
		{name: "bad syntax", in: `{"version" 1}`, reason: "invalid JSON"},
		{name: "trailing comma", in: `{"version":1,}`, reason: "invalid JSON"},
		{name: "bad syntax in entry", in: entry(`{"name":"x","attrs":[}`), key: "7ff0", field: "attrs[0]", reason: "invalid JSON"},
		{name: "bad syntax in unknown field", in: `{"x":{"a" 1}}`, field: "x", reason: "invalid JSON"},
		{name: "single quotes", in: `{'version':1}`, reason: "invalid JSON"},
		{name: "second document", in: head + `{}} {}`, reason: "after the map"},
		{name: "trailing garbage", in: head + `{}} x`, reason: "after the map"},
		{name: "trailing number", in: head + `{}} 1`, reason: "after the map"},
		{name: "deep nesting", in: `{"x":` + strings.Repeat("[", 20000) + strings.Repeat("]", 20000) + `}`, field: "x", reason: "nested more than 1000 deep"},

		// Top level.
		{name: "version missing", in: `{"revision":1,"errors":{}}`, field: "version", reason: "missing"},
		{name: "revision missing", in: `{"version":1,"errors":{}}`, field: "revision", reason: "missing"},
		{name: "errors missing", in: `{"version":1,"revision":1}`, field: "errors", reason: "missing"},
		{name: "version zero", in: `{"version":0,"revision":1,"errors":{}}`, field: "version", reason: "1 or 2"},
		{name: "version negative", in: `{"version":-1,"revision":1,"errors":{}}`, field: "version", reason: "negative"},
		{name: "version 3", in: `{"version":3,"revision":1,"errors":{}}`, field: "version", reason: "highest version", wantErr: ErrUnsupportedVersion},
		{name: "version huge", in: `{"version":99999999999999999999999,"revision":1,"errors":{}}`, field: "version", reason: "out of range"},
		{name: "version string", in: `{"version":"1","revision":1,"errors":{}}`, field: "version", reason: "must be a number, not a string"},
		{name: "version float", in: `{"version":1.0,"revision":1,"errors":{}}`, field: "version", reason: "integer"},
		{name: "version exponent", in: `{"version":1e0,"revision":1,"errors":{}}`, field: "version", reason: "integer"},
		{name: "version null", in: `{"version":null,"revision":1,"errors":{}}`, field: "version", reason: "not null"},
		{name: "version bool", in: `{"version":true,"revision":1,"errors":{}}`, field: "version", reason: "not a boolean"},
		{name: "version twice", in: `{"version":1,"version":2,"revision":1,"errors":{}}`, field: "version", reason: "twice"},
		{name: "revision negative", in: `{"version":1,"revision":-4,"errors":{}}`, field: "revision", reason: "negative"},
		{name: "revision object", in: `{"version":1,"revision":{},"errors":{}}`, field: "revision", reason: "not an object"},
		{name: "revision twice", in: `{"version":1,"revision":1,"revision":2,"errors":{}}`, field: "revision", reason: "twice"},
		{name: "errors array", in: head + `[]}`, field: "errors", reason: "must be an object, not an array"},
		{name: "errors null", in: head + `null}`, field: "errors", reason: "not null"},
		{name: "errors twice", in: head + `{},"errors":{}}`, field: "errors", reason: "twice"},

		// Keys.
		{name: "key empty", in: head + `{"":{"name":"x","attrs":[]}}}`, key: "", field: "errors", reason: "empty key"},
		{name: "key 0x prefix", in: head + `{"0x1f":{"name":"x","attrs":[]}}}`, key: "0x1f", reason: "not a hexadecimal"},
		{name: "key not hex", in: head + `{"zz":{"name":"x","attrs":[]}}}`, key: "zz", reason: "not a hexadecimal"},
		{name: "key name", in: head + `{"KEY_ENOENT":{"name":"x","attrs":[]}}}`, key: "KEY_ENOENT", reason: "not a hexadecimal"},
		{name: "key negative", in: head + `{"-1":{"name":"x","attrs":[]}}}`, key: "-1", reason: "not a hexadecimal"},
		{name: "key space", in: head + `{" 1":{"name":"x","attrs":[]}}}`, key: " 1", reason: "not a hexadecimal"},
		{name: "key 0x10000", in: head + `{"10000":{"name":"x","attrs":[]}}}`, key: "10000", reason: "out of range"},
		{name: "key huge", in: head + `{"ffffffffffffffffffff":{"name":"x","attrs":[]}}}`, key: "ffffffffffffffffffff", reason: "out of range"},
		{name: "key duplicate", in: head + `{"1f":{"name":"x","attrs":[]},"1f":{"name":"y","attrs":[]}}}`, key: "1f", reason: `"1f"`},
		{name: "key duplicate by case", in: head + `{"1f":{"name":"x","attrs":[]},"1F":{"name":"y","attrs":[]}}}`, key: "1F", reason: `"1f"`},
		{name: "key duplicate by padding", in: head + `{"1f":{"name":"x","attrs":[]},"001f":{"name":"y","attrs":[]}}}`, key: "001f", reason: "0x001f"},

		// Entries.
		{name: "entry array", in: entry(`[]`), key: "7ff0", reason: "must be an object, not an array"},
		{name: "entry string", in: entry(`"LOCKED"`), key: "7ff0", reason: "not a string"},
		{name: "entry null", in: entry(`null`), key: "7ff0", reason: "not null"},
		{name: "name missing", in: entry(`{"desc":"D","attrs":[]}`), key: "7ff0", field: "name", reason: "missing"},
		{name: "attrs missing", in: entry(`{"name":"N","desc":"D"}`), key: "7ff0", field: "attrs", reason: "missing"},
		{name: "name number", in: entry(`{"name":7,"attrs":[]}`), key: "7ff0", field: "name", reason: "must be a string, not a number"},
		{name: "name null", in: entry(`{"name":null,"attrs":[]}`), key: "7ff0", field: "name", reason: "not null"},
		{name: "name twice", in: entry(`{"name":"a","name":"b","attrs":[]}`), key: "7ff0", field: "name", reason: "twice"},
		{name: "desc array", in: entry(`{"name":"N","desc":["x"],"attrs":[]}`), key: "7ff0", field: "desc", reason: "not an array"},
		{name: "desc twice", in: entry(`{"name":"N","desc":"a","desc":"b","attrs":[]}`), key: "7ff0", field: "desc", reason: "twice"},
		{name: "attrs string", in: entry(`{"name":"N","attrs":"temp"}`), key: "7ff0", field: "attrs", reason: "must be an array, not a string"},
		{name: "attrs object", in: entry(`{"name":"N","attrs":{"temp":true}}`), key: "7ff0", field: "attrs", reason: "not an object"},
		{name: "attr number", in: entry(`{"name":"N","attrs":["temp",3]}`), key: "7ff0", field: "attrs[1]", reason: "not a number"},
		{name: "attr null", in: entry(`{"name":"N","attrs":[null]}`), key: "7ff0", field: "attrs[0]", reason: "not null"},
		{name: "attr nested array", in: entry(`{"name":"N","attrs":["temp","dcp",["x"]]}`), key: "7ff0", field: "attrs[2]", reason: "not an array"},
		{name: "attrs twice", in: entry(`{"name":"N","attrs":[],"attrs":["temp"]}`), key: "7ff0", field: "attrs", reason: "twice"},

		// Retry specs.
		{name: "retry array", in: retry(`[]`), key: "7ff0", field: "retry", reason: "must be an object"},
		{name: "retry null", in: retry(`null`), key: "7ff0", field: "retry", reason: "not null"},
		{name: "retry twice", in: entry(`{"name":"N","attrs":[],"retry":{"strategy":"constant","after":1,"interval":1},"retry":{}}`), key: "7ff0", field: "retry", reason: "twice"},
		{name: "strategy missing", in: retry(`{"after":1,"interval":1}`), key: "7ff0", field: "retry.strategy", reason: "missing"},
		{name: "after missing", in: retry(`{"strategy":"linear","interval":1}`), key: "7ff0", field: "retry.after", reason: "missing"},
		{name: "interval missing", in: retry(`{"strategy":"linear","after":1,"ceil":5}`), key: "7ff0", field: "retry.interval", reason: "missing"},
		{name: "strategy unknown", in: retry(`{"strategy":"fibonacci","after":1,"interval":1}`), key: "7ff0", field: "retry.strategy", reason: `"fibonacci"`},
		{name: "strategy case", in: retry(`{"strategy":"Linear","after":1,"interval":1}`), key: "7ff0", field: "retry.strategy", reason: "unknown strategy"},
		{name: "strategy number", in: retry(`{"strategy":1,"after":1,"interval":1}`), key: "7ff0", field: "retry.strategy", reason: "must be a string"},
		{name: "strategy twice", in: retry(`{"strategy":"linear","strategy":"constant","after":1,"interval":1}`), key: "7ff0", field: "retry.strategy", reason: "twice"},
		{name: "after negative", in: retry(`{"strategy":"linear","after":-1,"interval":1}`), key: "7ff0", field: "retry.after", reason: "negative"},
		{name: "interval negative", in: retry(`{"strategy":"linear","after":1,"interval":-10}`), key: "7ff0", field: "retry.interval", reason: "negative"},
		{name: "ceil negative", in: retry(`{"strategy":"linear","after":1,"interval":1,"ceil":-1}`), key: "7ff0", field: "retry.ceil", reason: "negative"},
		{name: "max-duration negative", in: retry(`{"strategy":"linear","after":1,"interval":1,"max-duration":-500}`), key: "7ff0", field: "retry.max-duration", reason: "negative"},
		{name: "interval string", in: retry(`{"strategy":"linear","after":1,"interval":"10"}`), key: "7ff0", field: "retry.interval", reason: "not a string"},
		{name: "ceil fraction", in: retry(`{"strategy":"linear","after":1,"interval":1,"ceil":1.5}`), key: "7ff0", field: "retry.ceil", reason: "integer"},
		{name: "interval exponent", in: retry(`{"strategy":"linear","after":1,"interval":1e3}`), key: "7ff0", field: "retry.interval", reason: "integer"},
		{name: "after beyond Duration", in: retry(`{"strategy":"linear","after":9223372036855,"interval":1}`), key: "7ff0", field: "retry.after", reason: "out of range"},
		{name: "max-duration beyond int64", in: retry(`{"strategy":"linear","after":1,"interval":1,"max-duration":99999999999999999999}`), key: "7ff0", field: "retry.max-duration", reason: "out of range"},
		{name: "interval twice", in: retry(`{"strategy":"linear","after":1,"interval":1,"interval":2}`), key: "7ff0", field: "retry.interval", reason: "twice"},
		{name: "bad syntax in retry", in: retry(`{"strategy":"linear","after":1,"interval":1,}`), key: "7ff0", field: "retry", reason: "invalid JSON"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m, err := Parse([]byte(tc.in))
			if err == nil {
				t.Fatalf("Parse accepted it: %+v", m.Entries())
			}
			if m != nil {
				t.Errorf("Parse returned a map with its error")
			}
			if !errors.Is(err, ErrCorrupt) {
				t.Errorf("errors.Is(err, ErrCorrupt) = false: %v", err)
			}
			var pe *ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("error is %T, not *ParseError: %v", err, err)
			}
			if pe.Key != tc.key || pe.Field != tc.field {
				t.Errorf("Key %q Field %q; want %q %q (%v)", pe.Key, pe.Field, tc.key, tc.field, err)
			}
			if !strings.Contains(pe.Reason, tc.reason) {
				t.Errorf("Reason %q does not contain %q", pe.Reason, tc.reason)
			}
			if !strings.Contains(err.Error(), pe.Path()) {
				t.Errorf("Error() %q does not name the path %q", err.Error(), pe.Path())
			}
			if pe.Offset < 0 || pe.Offset > int64(len(tc.in)) {
				t.Errorf("Offset %d outside the input (%d bytes)", pe.Offset, len(tc.in))
			}
			if tc.wantErr != nil && !errors.Is(err, tc.wantErr) {
				t.Errorf("errors.Is(err, %v) = false: %v", tc.wantErr, err)
			}
			if tc.wantErr != ErrUnsupportedVersion && errors.Is(err, ErrUnsupportedVersion) {
				t.Errorf("error matches ErrUnsupportedVersion: %v", err)
			}
		})
	}
}

func TestParseErrorMessage(t *testing.T) {
	_, err := Parse([]byte(`{"version":1,"revision":1,"errors":{"7ff0":{"name":"N","attrs":[],"retry":{"strategy":"linear","after":1,"interval":-5}}}}`))
	const want = `errmap: corrupt error map: errors["7ff0"].retry.interval: must not be negative, got -5 (at offset 116)`
	if err == nil || err.Error() != want {
		t.Errorf("error:\n got %v\nwant %s", err, want)
	}
	for _, tc := range []struct {
		e    ParseError
		want string
	}{
		{ParseError{}, "document"},
		{ParseError{Field: "version"}, "version"},
		{ParseError{Key: "1f"}, `errors["1f"]`},
		{ParseError{Key: "\x00\"", Field: "attrs[3]"}, `errors["\x00\""].attrs[3]`},
	} {
		if got := tc.e.Path(); got != tc.want {
			t.Errorf("Path() = %q, want %q", got, tc.want)
		}
	}
}

func TestRetryIndicated(t *testing.T) {
	tests := []struct {
		attrs Attrs
		want  bool
	}{
		{NewAttrs(AttrRetryNow), true},
		{NewAttrs(AttrRetryLater), true},
		{NewAttrs(AttrAutoRetry), true},
		{NewAttrs(AttrTemp, AttrRetryNow, AttrItemOnly), true},
		{NewAttrs(AttrTemp, AttrRetryLater, AttrRateLimit), true},
		{0, false},
		{NewAttrs(AttrTemp), false},
		{NewAttrs(AttrTemp, AttrRateLimit), false},
		{NewAttrs(AttrFetchConfig, AttrConnStateInvalidated, AttrSpecialHandling), false},
		{NewAttrs(AttrItemOnly, AttrSystemConstraint, AttrNoRetry), false},
		{NewAttrs(AttrRetryNow, AttrNoRetry), false},
		{NewAttrs(AttrRetryLater, AttrAutoRetry, AttrNoRetry), false},
	}
	for _, tc := range tests {
		if got := (Entry{Attrs: tc.attrs}).RetryIndicated(); got != tc.want {
			t.Errorf("RetryIndicated(%q) = %v, want %v", tc.attrs, got, tc.want)
		}
	}
	// A retry spec without a retry attribute indicates nothing.
	if (Entry{Attrs: NewAttrs(AttrTemp), Retry: &mockConstant}).RetryIndicated() {
		t.Error("a retry spec alone indicated a retry")
	}
}

func TestLookupAllocatesNothing(t *testing.T) {
	m := mustParse(t, []byte(smallV2))
	var sink int
	allocs := testing.AllocsPerRun(100, func() {
		e, ok := m.Lookup(0x7ff1)
		_, miss := m.Lookup(0x7ff2)
		if ok && !miss && e.RetryIndicated() {
			sink += int(e.Retry.Delay(3))
		}
	})
	if allocs != 0 {
		t.Errorf("Lookup allocates %v times per run", allocs)
	}
	if sink == 0 {
		t.Error("the lookups did not find what they should")
	}
}

func TestLookupEveryStatus(t *testing.T) {
	// Every status a map holds is found and every other is not, across the
	// whole 16-bit range: catches off-by-one errors in the binary search.
	var b strings.Builder
	b.WriteString(`{"version":2,"revision":1,"errors":{`)
	present := map[memdx.Status]bool{}
	for i, s := range []memdx.Status{0, 1, 2, 3, 0x1f, 0x20, 0x86, 0xd8, 0x7ff0, 0xfffe, 0xffff} {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`"` + hex(s) + `":{"name":"` + hex(s) + `","attrs":[]}`)
		present[s] = true
	}
	b.WriteString(`}}`)
	m := mustParse(t, []byte(b.String()))
	for s := 0; s <= 0xffff; s++ {
		e, ok := m.Lookup(memdx.Status(s))
		if ok != present[memdx.Status(s)] || (ok && (e.Status != memdx.Status(s) || e.Name != hex(memdx.Status(s)))) {
			t.Fatalf("Lookup(%#x) = %+v, %v", s, e, ok)
		}
	}
}

func hex(s memdx.Status) string { return strconv.FormatUint(uint64(s), 16) }
