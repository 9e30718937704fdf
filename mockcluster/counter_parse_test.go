package mockcluster

import (
	"testing"

	"github.com/kvwire/kvwire/memdx"
)

// INCREMENT reads the document as kv_engine's safe_strtoull does (parseInt
// in utilities/util.cc): white space before the number, a '+', and white
// space after it (with anything following) are allowed. A value written by
// a shell ("7\n") is a counter on a server; the mock used to answer
// DELTA_BADVAL for anything strconv.ParseUint refused.
func TestCounterParsesAsServer(t *testing.T) {
	e := newKVEnv(t, Options{}, nil)
	for _, c := range []struct {
		value string
		want  uint64 // after +1; 0: DELTA_BADVAL
	}{
		{"7", 8}, {"7\n", 8}, {"7\r\n", 8}, {" \t7", 8}, {"+7", 8}, {"7 apples", 8}, {"007", 8},
		{"18446744073709551615", 0 /* wraps to 0 */},
		{"", 0}, {"-1", 0}, {"7x", 0}, {"0x10", 0}, {"+", 0}, {" ", 0}, {"++7", 0}, {"+-7", 0},
		{"18446744073709551616", 0}, {"7.0", 0},
	} {
		e.expect("set", e.do(set("n", c.value)), memdx.StatusSuccess)
		p := e.do(memdx.NewCounter(memdx.OpIncrement, []byte("n"), 1, 0, 0))
		wrap := c.value == "18446744073709551615"
		switch {
		case c.want == 0 && !wrap:
			if p.Status != memdx.StatusBadDelta {
				t.Errorf("incr of %q: %s, want DELTA_BADVAL", c.value, p.Status)
			}
		default:
			v, err := memdx.DecodeCounterValue(&p)
			if p.Status != memdx.StatusSuccess || err != nil || v != c.want {
				t.Errorf("incr of %q: %s %d (%v), want %d", c.value, p.Status, v, err, c.want)
			}
		}
	}
}
