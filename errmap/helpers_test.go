package errmap

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// conformanceDir holds the shared error maps (see the conformance README);
// it is outside the repository and may be absent.
var conformanceDir = filepath.Join("..", "..", "shared", "conformance", "errmap")

// readConformance returns the named conformance map, skipping the test when
// the corpus is absent.
func readConformance(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(conformanceDir, name))
	if os.IsNotExist(err) {
		t.Skipf("conformance file %s absent; tests with real maps skipped", filepath.Join(conformanceDir, name))
	}
	if err != nil {
		t.Fatal(err)
	}
	return b
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
