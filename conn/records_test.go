package conn

import (
	"context"
	"crypto/tls"
	"encoding/binary"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/kvwire/kvwire/memdx"
)

// requests encodes one request of each size of body given (a SET of a
// value that makes up the rest) and returns them queued back to back.
func requests(t *testing.T, bodies ...int) []byte {
	t.Helper()
	var b []byte
	for i, n := range bodies {
		key := []byte(fmt.Sprintf("k%d", i))
		req := memdx.NewStore(memdx.OpSet, key, make([]byte, n-8-len(key)), 0, 0)
		var err error
		if b, err = req.AppendTo(b, uint32(i+1)); err != nil {
			t.Fatal(err)
		}
	}
	return b
}

func TestRecordChunkTakesWholeRequestsThatFitOneRecord(t *testing.T) {
	const h = memdx.HeaderSize
	for _, tc := range []struct {
		name   string
		bodies []int
		want   int
		rest   int
	}{
		{"one small", []int{100}, h + 100, 0},
		{"several that fit", []int{100, 200, 300}, 3*h + 600, 0},
		{"exactly a record", []int{tlsRecordChunk/2 - h, tlsRecordChunk/2 - h}, tlsRecordChunk, 0},
		{"stops before the one that does not fit", []int{8000, 8000, 8000}, 2 * (h + 8000), 0},
		{"two a byte over a record: the first", []int{tlsRecordChunk/2 - h, tlsRecordChunk/2 - h + 1}, tlsRecordChunk / 2, 0},
		{"a large first one goes alone", []int{40 << 10, 100}, h + 40<<10, 0},
		{"small ones, then a large one: the small ones", []int{100, 40 << 10}, h + 100, 0},
		{"one a byte over a record", []int{tlsRecordChunk - h + 1, 100}, tlsRecordChunk + 1, 0},
		{"one larger than a Write: its first writeChunk", []int{100 << 10, 100}, writeChunk, h + 100<<10 - writeChunk},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got, rest := recordChunk(requests(t, tc.bodies...), 0); got != tc.want || rest != tc.rest {
				t.Fatalf("recordChunk = %d, %d; want %d, %d", got, rest, tc.want, tc.rest)
			}
		})
	}
	// The rest of a large request goes writeChunk at a time, the last
	// part ending with it; then whole requests again.
	b := requests(t, 200<<10, 100)
	size := memdx.HeaderSize + 200<<10
	var parts []int
	for left, pos := 0, 0; pos < len(b); {
		var n int
		n, left = recordChunk(b[pos:], left)
		parts = append(parts, n)
		pos += n
	}
	want := []int{writeChunk, writeChunk, writeChunk, size - 3*writeChunk, memdx.HeaderSize + 100}
	if fmt.Sprint(parts) != fmt.Sprint(want) {
		t.Fatalf("Writes %v, want %v", parts, want)
	}
	if got, rest := recordChunk(nil, 0); got != 0 || rest != 0 {
		t.Fatalf("recordChunk(nil) = %d, %d", got, rest)
	}
	// Bytes that are not whole requests (never queued by the connection)
	// are cut at a record's size and not lost.
	if got, _ := recordChunk(make([]byte, 10), 0); got != 10 {
		t.Fatalf("recordChunk(10 bytes) = %d", got)
	}
	if got, _ := recordChunk(requests(t, 100)[:50], 0); got != 50 {
		t.Fatalf("recordChunk(a cut request) = %d", got)
	}
}

// recorder keeps what the client wrote on the socket, under TLS.
type recorder struct {
	net.Conn
	mu  sync.Mutex
	out []byte
}

func (r *recorder) Write(b []byte) (int, error) {
	r.mu.Lock()
	r.out = append(r.out, b...)
	r.mu.Unlock()
	return r.Conn.Write(b)
}

func (r *recorder) bytes() []byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]byte(nil), r.out...)
}

// Over TLS each record the connection writes holds whole requests, or a
// piece of a request too large for one record, the last piece ending with
// it; and the TLS memcached (1.6.18), which stalls on a record it read in
// part, answers every request of a large pipelined batch. The records are
// read off the socket: under TLS 1.3 with crypto/tls's AEAD suites a
// record's data is its length less the content type byte and the 16-byte
// tag.
func TestTLSRecordsHoldWholeRequests(t *testing.T) {
	addr, user, pass, pool := tlsEnv(t)
	var rec *recorder
	c := dialMemcached(t, addr, Options{Memcached: true, Username: user, Password: pass,
		TLSConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS13},
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			var d net.Dialer
			nc, err := d.DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			rec = &recorder{Conn: nc}
			return rec, nil
		}})
	from := len(rec.bytes()) // Dial's records end here: nothing else is in flight

	// One batch, corked: runs of small SETs worth more than a record, each
	// run followed by a value larger than a record (every fifth one larger
	// than a Write), so that the writer has small requests to cut at a
	// record's size, large ones to send alone, and larger ones to send a
	// Write at a time. A small request is 1,640 bytes: ten of them (16,400) are just
	// over a record, nine (14,760) fit.
	var sizes []int
	n := make(tagNotifier, 1000)
	c.Cork()
	var pend []Pending
	for i := range 600 {
		key := uniqueKey(t, fmt.Sprint(i))
		size := 1640 - memdx.HeaderSize - 8 - len(key)
		switch {
		case i%100 == 99:
			size = 150 << 10 // more than one Write
		case i%20 == 19:
			size = 40 << 10
		}
		// An expiry: the memcached is shared with the other tests.
		req := memdx.NewStore(memdx.OpSet, key, make([]byte, size), 0, 60)
		p, err := c.Start(time.Now().Add(10*time.Second), &req, nil, n, uint64(i), nil)
		if err != nil {
			t.Fatal(err)
		}
		pend = append(pend, p)
		sizes = append(sizes, memdx.HeaderSize+8+len(key)+size)
	}
	writes := c.Stats().Writes
	c.Uncork()
	for range pend {
		<-n
	}
	for i, p := range pend {
		if answered, err := p.Result(); !answered || err != nil {
			t.Fatalf("SET %d (%d bytes): answered %v, %v", i, sizes[i], answered, err)
		}
	}

	// The Writes were cut as recordChunk says: whole requests up to a
	// record, a larger request alone, and one larger than a Write a Write
	// at a time, so that the health check sees progress through it.
	want, run := 0, 0
	for _, n := range sizes {
		switch {
		case n > tlsRecordChunk:
			if run > 0 {
				want++
			}
			want += (n + writeChunk - 1) / writeChunk
			run = 0
		case run+n > tlsRecordChunk:
			want++
			run = n
		default:
			run += n
		}
	}
	if run > 0 {
		want++
	}
	if got := c.Stats().Writes - writes; got != uint64(want) {
		t.Fatalf("%d Writes for the batch, want %d", got, want)
	}

	// Walk the records against the requests.
	wire := rec.bytes()[from:]
	req, left := 0, sizes[0] // the request the next record starts in, and its bytes not yet in a record
	for off := 0; off < len(wire); {
		if len(wire)-off < 5 {
			t.Fatalf("a torn record header at %d", off)
		}
		typ, l := wire[off], int(binary.BigEndian.Uint16(wire[off+3:off+5]))
		off += 5 + l
		if typ != 23 {
			t.Fatalf("record type %d after the handshake", typ)
		}
		data := l - 1 - 16
		if data > tlsRecordChunk {
			t.Fatalf("a record of %d bytes", data)
		}
		if left < sizes[req] { // a large request's later piece: it fills the record or ends it
			if data > left || (data < left && data != tlsRecordChunk) {
				t.Fatalf("request %d (%d bytes, %d still to send) in a record of %d", req, sizes[req], left, data)
			}
			left -= data
			if left == 0 {
				req++
				if req < len(sizes) {
					left = sizes[req]
				}
			}
			continue
		}
		// A record that starts a request: whole requests, or the first
		// piece of one that does not fit alone.
		if sizes[req] > tlsRecordChunk {
			if data != tlsRecordChunk {
				t.Fatalf("request %d (%d bytes) starts a record of %d", req, sizes[req], data)
			}
			left -= data
			continue
		}
		for data > 0 {
			if req >= len(sizes) || sizes[req] > data || sizes[req] > tlsRecordChunk {
				t.Fatalf("a record ends inside request %d (%d bytes) with %d bytes of the record left", req, sizes[req], data)
			}
			data -= sizes[req]
			req++
		}
		if req < len(sizes) {
			left = sizes[req]
		}
	}
	if req != len(sizes) {
		t.Fatalf("the records hold %d of %d requests", req, len(sizes))
	}
}
