package conn

import (
	"strings"
	"testing"
	"time"

	"github.com/kvwire/kvwire/memdx"
)

// Responses that answer nothing in flight are dropped, counted and logged
// (rate-limited, with opcode, opaque, status and node); the connection and
// its requests in flight are unaffected. Among them, a second answer to a
// GET_COLLECTION_ID already answered, which must not fail the SET in flight
// beside it.
func TestStrayResponsesDropped(t *testing.T) {
	fc := newFakeClock()
	var logs logBuffer
	c, p := dialPipe(t, Options{clock: fc, Logger: logs.logger()}, nil)
	ctx := testCtx(t)

	cid := make(chan error, 1)
	go func() {
		req := memdx.Request{OpCode: memdx.OpCollectionsGetID, Value: []byte("_default._default")}
		cid <- c.Do(ctx, &req, nil)
	}()
	rc := p.read()
	set := make(chan error, 1)
	go func() {
		req := memdx.NewStore(memdx.OpSet, []byte("k"), []byte("v"), 0, 0)
		set <- c.Do(ctx, &req, nil)
	}()
	rs := p.read()
	get := goGet(ctx, c, "g")
	rg := p.read()

	p.write(ok(rc, ""))
	if err := recv(t, cid); err != nil {
		t.Fatal(err)
	}
	wrongOp := ok(rg, "")
	wrongOp.OpCode = memdx.OpDelete
	quiet := memdx.Packet{Magic: memdx.MagicRes, OpCode: memdx.OpGetQ, Opaque: 77, Status: memdx.StatusKeyNotFound}
	unknown := ok(rg, "")
	unknown.Opaque = 0xdead
	p.write(ok(rc, ""), wrongOp, quiet, unknown) // the second GET_COLLECTION_ID answer first
	waitFor(t, "four strays", func() bool { return c.Stats().StrayResponses == 4 })

	p.write(ok(rs, ""), ok(rg, "G"))
	if err := recv(t, set); err != nil {
		t.Fatalf("SET in flight beside the stray answers: %v", err)
	}
	if r := recv(t, get); r.err != nil || r.value != "G" || r.calls != 1 {
		t.Fatalf("GET: %+v", r)
	}
	if st := c.Stats(); c.Err() != nil || st.StrayResponses != 4 || st.LateResponses != 0 || c.Pending() != 0 {
		t.Fatalf("err %v, stats %+v, pending %d", c.Err(), st, c.Pending())
	}
	// One line for the first stray; the three after it within a second are
	// counted in the next line.
	l := logs.String()
	if n := strings.Count(l, "stray response"); n != 1 {
		t.Fatalf("%d log lines about strays, want 1:\n%s", n, l)
	}
	for _, want := range []string{"level=WARN", "node=pipe:11210", "opcode=COLLECTIONS_GET_ID", "opaque=" + itoa(rc.Opaque), "status=SUCCESS"} {
		if !strings.Contains(l, want) {
			t.Fatalf("log lacks %q:\n%s", want, l)
		}
	}
	fc.Advance(time.Second)
	p.write(ok(rc, ""))
	waitFor(t, "a second log line", func() bool { return strings.Count(logs.String(), "stray response") == 2 })
	if l := logs.String(); !strings.Contains(l, "suppressed_since_last=3") {
		t.Fatalf("the second line does not count the three suppressed:\n%s", l)
	}
}

// A framing error still closes the connection, and says so in the log at
// warn level with what was wrong.
func TestProtocolViolationLogged(t *testing.T) {
	var logs logBuffer
	c, p := dialPipe(t, Options{Logger: logs.logger()}, nil)
	ch := goGet(testCtx(t), c, "a")
	p.read()
	go drain(p.nc)
	p.writeRaw([]byte("HTTP/1.1 400 Bad Request\r\n\r\n"))
	recv(t, ch)
	<-c.Done()
	// Logged once the connection has ended.
	waitFor(t, "a warning naming the bad magic", func() bool {
		l := logs.String()
		return strings.Contains(l, "level=WARN") && strings.Contains(l, "protocol violation") && strings.Contains(l, "magic")
	})
}

func itoa(u uint32) string {
	var b []byte
	for {
		b = append([]byte{byte('0' + u%10)}, b...)
		u /= 10
		if u == 0 {
			return string(b)
		}
	}
}
