package httpconfig

import (
	"bufio"
	"context"
	"errors"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// scriptedNode is a cluster manager node that reads each request's
// headers and then runs answer on the connection; the connections close
// when answer returns or when the test ends.
func scriptedNode(t *testing.T, answer func(nc net.Conn)) string {
	t.Helper()
	return rawNode(t, func(nc net.Conn) {
		if _, err := http.ReadRequest(bufio.NewReader(nc)); err != nil {
			return
		}
		answer(nc)
	})
}

// net/http's Transport refuses a response whose headers run past
// MaxResponseHeaderBytes. http.ReadResponse has no such bound: a port
// that is not a cluster manager's and sends bytes without end (a seed's
// =http on the wrong port, a broken proxy) had them all read into memory
// as one header line until ConnectTimeout. The headers are now bounded.
func TestFetchRefusesEndlessHeaders(t *testing.T) {
	const total = 4 << 20 // four times the bound
	addr := scriptedNode(t, func(nc net.Conn) {
		if _, err := nc.Write([]byte("HTTP/1.1 200 OK\r\nX-Pad: ")); err != nil {
			return
		}
		chunk := []byte(strings.Repeat("a", 64<<10))
		for written := 0; written < total; written += len(chunk) {
			if _, err := nc.Write(chunk); err != nil {
				return
			}
		}
	})
	var read atomic.Int64
	c := New(Config{Bucket: "default", ConnectTimeout: guard,
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			nc, err := (&net.Dialer{}).DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			return &readHook{Conn: nc, before: func(n int) { read.Store(int64(n)) }}, nil
		}})
	_, _, err := c.Fetch(context.Background(), addr)
	if err == nil {
		t.Fatal("Fetch succeeded")
	}
	t.Logf("%v", err)
	if !strings.Contains(err.Error(), "headers") {
		t.Errorf("err %v does not say the headers were too long", err)
	}
	if n := read.Load(); n >= total {
		t.Errorf("the client read %d bytes of the endless header line without stopping", n)
	}
}

// The wait for an error answer's body is bounded as the wait for its
// headers is: a node (or a proxy in front of it) that sends a 503's
// headers and then nothing held Fetch until its context ended, and a
// config stream on that node (whose context ends only with the client)
// for ever, the redial period starting only once a 200 came.
func TestFetchGivesUpOnAnErrorBodyThatNeverComes(t *testing.T) {
	addr := scriptedNode(t, func(nc net.Conn) {
		_, _ = nc.Write([]byte("HTTP/1.1 503 Service Unavailable\r\nContent-Length: 100\r\n\r\nbusy"))
		_, _ = nc.Read(make([]byte, 1)) // holds until the client closes
	})
	ctx, cancel := context.WithTimeout(context.Background(), guard)
	defer cancel()
	c := New(Config{Bucket: "default", ConnectTimeout: 50 * time.Millisecond})
	_, _, err := c.Fetch(ctx, addr)
	if ctx.Err() != nil {
		t.Fatalf("Fetch returned only when its context ended (%v)", err)
	}
	var he *Error
	if !errors.As(err, &he) || he.Status != http.StatusServiceUnavailable || he.Body != "busy" {
		t.Fatalf("err %v, want the node's 503 with the body it sent", err)
	}
}

// readHook is a connection that calls before ahead of each Read, given
// how many bytes were read before it.
type readHook struct {
	net.Conn
	n      int
	before func(n int)
}

func (c *readHook) Read(b []byte) (int, error) {
	c.before(c.n)
	k, err := c.Conn.Read(b)
	c.n += k
	return k, err
}

// A Fetch whose context ends while the config's body is being read says
// that it ended (errors.Is the context's cause), as net/http's did; the
// raw path's read on a connection the watcher closed said only "use of
// closed network connection".
func TestFetchEndedDuringTheBodySaysByWhat(t *testing.T) {
	const answer = "HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n{\"rev\":"
	addr := scriptedNode(t, func(nc net.Conn) {
		_, _ = nc.Write([]byte(answer))
		_, _ = nc.Read(make([]byte, 1)) // holds until the client closes
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c := New(Config{Bucket: "default", ConnectTimeout: guard,
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			nc, err := (&net.Dialer{}).DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			return &readHook{Conn: nc, before: func(n int) {
				if n >= len(answer) {
					cancel() // everything sent was read: the body waits
				}
			}}, nil
		}})
	_, _, err := c.Fetch(ctx, addr)
	t.Logf("%v", err)
	if !errors.Is(err, context.Canceled) {
		t.Errorf("err %v does not match context.Canceled", err)
	}
}

// RFC 9110 (15.2): a client parses any number of 1xx answers before the
// final one, even when it asked for none, and net/http's Transport skipped
// them (a proxy's 103 Early Hints, a server's unasked 100 Continue). The
// raw path took the first for the answer: Fetch failed with "HTTP 103".
func TestFetchSkipsInterimAnswers(t *testing.T) {
	addr := scriptedNode(t, func(nc net.Conn) {
		_, _ = nc.Write([]byte("HTTP/1.1 100 Continue\r\n\r\n" +
			"HTTP/1.1 103 Early Hints\r\nLink: </style.css>; rel=preload\r\n\r\n" +
			"HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\n{\"rev\":1}"))
	})
	c := New(Config{Bucket: "default", ConnectTimeout: guard})
	raw, _, err := c.Fetch(context.Background(), addr)
	if err != nil || string(raw) != `{"rev":1}` {
		t.Fatalf("Fetch: %q, %v; want the 200's body", raw, err)
	}
}

// A node that sends part of its answer's headers and then nothing (an
// overloaded node, a link that stalls) fails the request at
// ConnectTimeout, and the error says so. http.ReadResponse hands on the
// part of the line read before the deadline as if it were the line: the
// error said "malformed MIME header line: Content-Ty", blaming the node's
// answer for what was the wait's end.
func TestFetchCutShortByTheConnectTimeoutSaysSo(t *testing.T) {
	for _, sent := range []string{"HTTP/1.1 200 OK\r\nContent-Ty", "HTTP/1.1 20"} {
		addr := scriptedNode(t, func(nc net.Conn) {
			_, _ = nc.Write([]byte(sent))
			_, _ = nc.Read(make([]byte, 1)) // holds until the client closes
		})
		c := New(Config{Bucket: "default", ConnectTimeout: 50 * time.Millisecond})
		_, _, err := c.Fetch(context.Background(), addr)
		if err == nil || !strings.Contains(err.Error(), "no answer within the connect timeout (50ms)") {
			t.Errorf("after %q: err %v, want the connect timeout named", sent, err)
		}
	}
}
