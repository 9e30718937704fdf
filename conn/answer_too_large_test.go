package conn

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/kvwire/kvwire/internal/kverr"
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

// An answer read just before an oversized answer's header, in the same
// read, is delivered when that header is the answer of another request in
// flight (its opaque and its opcode) and breaks no rule but the body
// limit: such a header is where the answer before it says its end is, so
// that answer's length is true. The SET's SUCCESS was held back with the
// header and the SET ended with the connection's error, written, outcome
// unknown (memcached -I above 20 MB: an Upsert before a large value's Get
// was reported "may have been applied"). The GET still ends as too large.
// A header that also fails another check, or is no in-flight request's
// answer, is no such proof: the answer before it is held back as before.
func TestAnswerBeforeOversizedHeaderIsDelivered(t *testing.T) {
	for name, tc := range map[string]struct {
		op        memdx.OpCode // the oversized header's opcode
		sameAsSet bool         // the oversized header has the SET's opaque
		badKeyLen bool         // its key length exceeds its body length too
		delivered bool
	}{
		"the GET's answer":             {op: memdx.OpGet, delivered: true},
		"the GET's, key length wrong":  {op: memdx.OpGet, badKeyLen: true},
		"another opcode":               {op: memdx.OpDelete},
		"the SET's opaque, SET opcode": {op: memdx.OpSet, sameAsSet: true},
	} {
		t.Run(name, func(t *testing.T) {
			c, p := dialPipe(t, Options{MaxBodyLength: 1000}, nil)
			set := make(chan error, 1)
			go func() {
				req := memdx.NewStore(memdx.OpSet, []byte("a"), []byte("v"), 0, 0)
				set <- c.Do(testCtx(t), &req, func(p *memdx.Packet) error { return memdx.NewStatusError(p) })
			}()
			r1 := p.read()
			b := goGet(testCtx(t), c, "b")
			r2 := p.read()
			big := ok(r2, strings.Repeat("x", 1001))
			big.OpCode = tc.op
			if tc.sameAsSet {
				big.Opaque = r1.Opaque
			}
			hdr := encode(t, big)[:memdx.HeaderSize]
			if tc.badKeyLen {
				hdr[2], hdr[3] = 0xff, 0xff
			}
			p.writeRaw(append(encode(t, ok(r1, "")), hdr...))
			err := recv(t, set)
			if tc.delivered && err != nil {
				t.Fatalf("SET: %v, want its SUCCESS, read before the GET's oversized header", err)
			}
			if !tc.delivered && err == nil {
				t.Fatal("SET succeeded, its answer followed by a header that proves nothing")
			}
			rb := recv(t, b)
			var re *RequestError
			var pe *ProtocolError
			if !errors.As(rb.err, &re) || !errors.As(rb.err, &pe) {
				t.Fatalf("b: %v, want a RequestError with the ProtocolError", rb.err)
			}
			if got, want := pe.AnswerTooLarge(re.Opaque), tc.op == memdx.OpGet; got != want {
				t.Fatalf("AnswerTooLarge(%d) = %v, want %v (%v)", re.Opaque, got, want, rb.err)
			}
		})
	}
}

// The same within a group of gets: a get's answer read just before
// another get's oversized answer's header is handed to the sink (the group
// ends as the connection does, with that get's value kept); and the
// header's get is named too large. But a NOOP's answer before the
// oversized answer of a quiet get sent before it is held back: dispatched,
// it would settle that very get as a miss.
func TestGroupAnswerBeforeOversizedHeader(t *testing.T) {
	t.Run("another get's", func(t *testing.T) {
		c, peer := dialPipe(t, Options{MaxBodyLength: 1000}, nil)
		n := make(tagNotifier, 4)
		s := newTestSink()
		keys := []string{"k0", "k1"}
		pg := startGets(t, c, memdx.OpGetKQ, keys, s, n, 5)
		reqs := readGroup(t, peer, pg, memdx.OpGetKQ, keys)
		go drain(peer.nc)
		small := ok(reqs[0], "v0")
		small.Key = reqs[0].Key
		big := ok(reqs[1], strings.Repeat("x", 1001))
		peer.writeRaw(append(encode(t, small), encode(t, big)[:memdx.HeaderSize]...))
		recv(t, (<-chan uint64)(n))
		_, err := pg.Result()
		var pe *ProtocolError
		if !errors.As(err, &pe) || !pe.AnswerTooLarge(reqs[1].Opaque) {
			t.Fatalf("group: %v; want the ProtocolError naming get 1's answer too large", err)
		}
		s.wantAnswers(t, 5, map[int]string{0: "v0"})
	})
	t.Run("a quiet get the NOOP settles", func(t *testing.T) {
		c, peer := dialPipe(t, Options{MaxBodyLength: 1000}, nil)
		n := make(tagNotifier, 4)
		var v string
		c.Cork()
		pq := startGet(t, c, memdx.OpGetQ, "k0", n, 1, &v)
		noop := memdx.Request{OpCode: memdx.OpNoop}
		pn, err := c.Start(time.Time{}, &noop, nil, n, 2, nil)
		if err != nil {
			t.Fatal(err)
		}
		c.Uncork()
		rq, rn := peer.read(), peer.read()
		go drain(peer.nc)
		big := ok(rq, strings.Repeat("x", 1001))
		peer.writeRaw(append(encode(t, ok(rn, "")), encode(t, big)[:memdx.HeaderSize]...))
		for range 2 {
			recv(t, (<-chan uint64)(n))
		}
		for name, p := range map[string]Pending{"quiet get": pq, "NOOP": pn} {
			answered, err := p.Result()
			if answered || !errors.Is(err, kverr.ErrConnectionClosed) || !errors.Is(err, kverr.ErrProtocol) {
				t.Fatalf("%s: answered %v, %v; want the connection's end by the protocol violation, not settled", name, answered, err)
			}
		}
	})
}
