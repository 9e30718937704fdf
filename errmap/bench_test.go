package errmap

import (
	"strconv"
	"strings"
	"testing"

	"github.com/kvwire/kvwire/memdx"
)

// benchMap has 83 entries (as many as kv_engine's v2 map) at the codes
// 0x00..0xa4 step 2, so it does not depend on the conformance corpus.
func benchMap(b *testing.B) *Map {
	var sb strings.Builder
	sb.WriteString(`{"version":2,"revision":9,"errors":{`)
	for i := 0; i < 83; i++ {
		if i > 0 {
			sb.WriteByte(',')
		}
		k := strconv.FormatUint(uint64(2*i), 16)
		sb.WriteString(`"` + k + `":{"name":"CODE_` + k + `","desc":"d","attrs":["temp","retry-later"]}`)
	}
	sb.WriteString(`}}`)
	return mustParse(b, []byte(sb.String()))
}

func BenchmarkLookup(b *testing.B) {
	m := benchMap(b)
	for _, bc := range []struct {
		name   string
		status memdx.Status
	}{{"hit", 0x86}, {"miss", 0x87}, {"miss-above", 0x7ff0}} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			n := 0
			for b.Loop() {
				if e, ok := m.Lookup(bc.status); ok && e.RetryIndicated() {
					n++
				}
			}
			_ = n
		})
	}
}

func BenchmarkDelay(b *testing.B) {
	b.ReportAllocs()
	var sink int64
	for i := 0; b.Loop(); i++ {
		sink += int64(mockExponential.Delay(i&63 + 1))
	}
	_ = sink
}

func BenchmarkParseKVEngineV2(b *testing.B) {
	data := readConformance(b, "kv_engine_error_map_v2.json")
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Parse(data); err != nil {
			b.Fatal(err)
		}
	}
}
