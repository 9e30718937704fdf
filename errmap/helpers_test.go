package errmap

import (
	"encoding/json"
	"strconv"
	"testing"
	"time"

	"github.com/kvwire/kvwire/internal/conformance"
)

// readConformance returns the named map of the shared corpus's errmap/
// (see the conformance README), skipping the test when the corpus is absent
// (failing under KVWIRE_REQUIRE_CONFORMANCE=1).
func readConformance(t testing.TB, name string) []byte {
	t.Helper()
	return conformance.Read(t, "errmap/"+name)
}

func mustParse(t testing.TB, b []byte) *Map {
	t.Helper()
	m, err := Parse(b)
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	return m
}

// encode writes m as an error map: the test's own encoder, written from the
// format description, used to check that what Parse returns is what the
// bytes said. Unknown attributes are gone by then, so it writes known ones
// only.
func encode(m *Map) []byte {
	b := []byte(`{"version":` + strconv.Itoa(m.Version) + `,"revision":` + strconv.Itoa(m.Revision) + `,"errors":{`)
	for i, e := range m.Entries() {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendQuote(b, strconv.FormatUint(uint64(e.Status), 16))
		b = append(b, `:{"name":`...)
		b = appendJSONString(b, e.Name)
		b = append(b, `,"desc":`...)
		b = appendJSONString(b, e.Desc)
		b = append(b, `,"attrs":[`...)
		n := 0
		for a := range e.Attrs.All() {
			if n > 0 {
				b = append(b, ',')
			}
			b = appendJSONString(b, a.String())
			n++
		}
		b = append(b, ']')
		if r := e.Retry; r != nil {
			b = append(b, `,"retry":{"strategy":`...)
			b = appendJSONString(b, r.Strategy.String())
			for _, f := range []struct {
				name string
				d    time.Duration
			}{{"after", r.After}, {"interval", r.Interval}, {"ceil", r.Ceil}, {"max-duration", r.MaxDuration}} {
				b = append(b, `,"`+f.name+`":`...)
				b = strconv.AppendInt(b, f.d.Milliseconds(), 10)
			}
			b = append(b, '}')
		}
		b = append(b, '}')
	}
	return append(b, "}}"...)
}

func appendJSONString(b []byte, s string) []byte {
	q, err := json.Marshal(s)
	if err != nil {
		panic(err) // a string always marshals
	}
	return append(b, q...)
}
