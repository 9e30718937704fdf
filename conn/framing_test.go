package conn

import (
	"encoding/binary"
	"errors"
	"strings"
	"testing"

	"github.com/kvwire/kvwire/internal/kverr"
	"github.com/kvwire/kvwire/memdx"
)

// lengthen adds extra to the body length of the packet at the start of b.
func lengthen(b []byte, extra uint32) []byte {
	binary.BigEndian.PutUint32(b[8:12], binary.BigEndian.Uint32(b[8:12])+extra)
	return b
}

// A response whose body length claims 100 bytes more than its value has
// swallows the start of the response after it. When the bytes after the
// claimed end arrived with it, they must be a packet's header, and here
// they are the middle of the next response's value: the connection closes
// as a protocol violation before the first response is delivered, and both
// GETs end with the connection's error (written: a read is retried by the
// client), never with 100 foreign bytes appended to a value.
func TestResponseSwallowingTheNextIsNotDelivered(t *testing.T) {
	for name, next := range map[string]string{
		"a whole header of value bytes": strings.Repeat("v", 150),
		"a few bytes of value":          strings.Repeat("w", 100+5), // 5 bytes after the claimed end
	} {
		t.Run(name, func(t *testing.T) {
			c, p := dialPipe(t, Options{}, nil)
			ctx := testCtx(t)
			a := goGet(ctx, c, "a")
			ra := p.read()
			b := goGet(ctx, c, "b")
			rb := p.read()
			go drain(p.nc)
			first := lengthen(encode(t, ok(ra, "A")), 100)
			// The 100 bytes the first claims are the second's header, and
			// 76 bytes of its value.
			p.writeRaw(append(first, encode(t, ok(rb, next))...))
			for _, ch := range []<-chan result{a, b} {
				r := recv(t, ch)
				if r.err == nil || r.calls != 0 {
					t.Fatalf("GET delivered %d times (value %q, err %v); want no delivery and a protocol error", r.calls, r.value, r.err)
				}
				if !errors.Is(r.err, kverr.ErrConnectionClosed) || !requestError(t, r.err).Written {
					t.Fatalf("err %v; want the connection's end, written", r.err)
				}
			}
			<-c.Done()
			var pe *ProtocolError
			if !errors.As(c.Err(), &pe) || !strings.Contains(pe.What, "after") {
				t.Fatalf("connection ended with %v; want a protocol violation about the bytes after a response", c.Err())
			}
		})
	}
}

// What follows a response in the same read and is a packet's header lets
// it through, stray or not: a response, then a stray answer with an
// unknown opaque, then the answer to the second GET, all in one write,
// deliver both values and keep the connection.
func TestResponseFollowedByHeadersIsDelivered(t *testing.T) {
	c, p := dialPipe(t, Options{}, nil)
	ctx := testCtx(t)
	a := goGet(ctx, c, "a")
	ra := p.read()
	b := goGet(ctx, c, "b")
	rb := p.read()
	stray := ok(ra, "S")
	stray.Opaque = 0xdead
	p.write(ok(ra, "A"), stray, ok(rb, "B"))
	if r := recv(t, a); r.err != nil || r.value != "A" {
		t.Fatalf("a: %+v", r)
	}
	if r := recv(t, b); r.err != nil || r.value != "B" {
		t.Fatalf("b: %+v", r)
	}
	if c.Err() != nil || c.Stats().StrayResponses != 1 {
		t.Fatalf("err %v, strays %d", c.Err(), c.Stats().StrayResponses)
	}
	_ = memdx.HeaderSize
}
