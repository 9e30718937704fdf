package conn

import (
	"errors"
	"strings"
	"testing"

	"github.com/kvwire/kvwire/memdx"
)

// An answer over Options.MaxBodyLength names the request it answers
// (ProtocolError.AnswerTooLarge: the client ends that request with
// ErrValueTooLarge, unretried) only when it is that request's answer by
// the rules dispatch applies to any answer: its opaque and its opcode. A
// header with an in-flight request's opaque and another opcode is a stray
// (dispatchResponse): the request it does not answer is failed with the
// connection, as the others, not told its value is too large.
func TestOversizedAnswerNamesItsRequestByOpaqueAndOpcode(t *testing.T) {
	for name, tc := range map[string]struct {
		op        memdx.OpCode
		following bool // after another answer in the same read
		want      bool
	}{
		"its answer":                {op: memdx.OpGet, want: true},
		"another opcode":            {op: memdx.OpDelete},
		"its answer, following":     {op: memdx.OpGet, following: true, want: true},
		"another opcode, following": {op: memdx.OpSet, following: true},
	} {
		t.Run(name, func(t *testing.T) {
			c, p := dialPipe(t, Options{MaxBodyLength: 1000}, nil)
			a := goGet(testCtx(t), c, "a")
			r1 := p.read()
			b := goGet(testCtx(t), c, "b")
			r2 := p.read()
			big := ok(r2, strings.Repeat("x", 1001))
			big.OpCode = tc.op
			hdr := encode(t, big)[:memdx.HeaderSize] // the header alone is refused
			if tc.following {
				p.writeRaw(append(encode(t, ok(r1, "A")), hdr...))
			} else {
				p.write(ok(r1, "A"))
				if r := recv(t, a); r.err != nil || r.value != "A" {
					t.Fatalf("a: %+v", r)
				}
				p.writeRaw(hdr)
			}
			rb := recv(t, b)
			var re *RequestError
			var pe *ProtocolError
			if !errors.As(rb.err, &re) || !errors.As(rb.err, &pe) {
				t.Fatalf("b: %v, want a RequestError with the ProtocolError", rb.err)
			}
			if got := pe.AnswerTooLarge(re.Opaque); got != tc.want {
				t.Fatalf("AnswerTooLarge(%d) = %v, want %v (%v)", re.Opaque, got, tc.want, rb.err)
			}
			if tc.following {
				recv(t, a)
			}
		})
	}
}
