package httpconfig

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/iotest"
	"time"

	"github.com/kvwire/kvwire/retry"
)

// Attacks on Fetch by a node (or whatever listens at its address) that
// writes its answer by hand: each fails the fetch with an error naming
// what was wrong, well before the test's guard, or is read as a real
// node's answer would be.
func TestFetchAgainstAHostileNode(t *testing.T) {
	const cfg = `{"rev":1}`
	chunked := "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
	for _, tc := range []struct {
		name   string
		answer string
		want   string // in the error; "" when the fetch succeeds with cfg
	}{
		{"status line of garbage", "SSH-2.0-OpenSSH_9.6\r\n\r\n", "malformed HTTP"},
		{"binary garbage", "\x00\x01\x02\xff\xfe\r\n\r\n", "malformed HTTP"},
		{"no status line at all", "", "EOF"},
		{"401 with a body", "HTTP/1.1 401 Unauthorized\r\nContent-Length: 12\r\n\r\nUnauthorized", "401 Unauthorized: the credentials were refused (\"Unauthorized\")"},
		{"403 with a body", "HTTP/1.1 403 Forbidden\r\nContent-Length: 9\r\n\r\nForbidden", "403 Forbidden"},
		{"404 with a body", "HTTP/1.1 404 Not Found\r\nContent-Length: 29\r\n\r\nRequested resource not found.", "404 Not Found: no such bucket (\"Requested resource not found.\")"},
		{"500 with a long body", "HTTP/1.1 500 Internal Server Error\r\n\r\n" + strings.Repeat("e", 1<<20), "HTTP 500"},
		{"101 switching protocols", "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n", "HTTP 101"},
		{"six interim answers", strings.Repeat("HTTP/1.1 103 Early Hints\r\n\r\n", 6) + "HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\n" + cfg, "more than 5 interim"},
		{"Content-Length shorter than the body", "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n" + cfg, ""},
		{"Content-Length longer than the body", "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n" + cfg, "reading the config: unexpected EOF"},
		{"two Content-Lengths", "HTTP/1.1 200 OK\r\nContent-Length: 9\r\nContent-Length: 10\r\n\r\n" + cfg, "Content-Length"},
		{"negative Content-Length", "HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n" + cfg, "Content-Length"},
		{"huge Content-Length", "HTTP/1.1 200 OK\r\nContent-Length: 99999999999999999999\r\n\r\n" + cfg, "Content-Length"},
		{"chunked, split configs", chunked + "3\r\n{\"r\r\n6\r\nev\":1}\r\n0\r\n\r\n", ""},
		{"chunked, trailers", chunked + "9\r\n" + cfg + "\r\n0\r\nX-Checksum: 1\r\nX-Other: 2\r\n\r\n", ""},
		{"chunked, a trailer without end", chunked + "9\r\n" + cfg + "\r\n0\r\nX-Pad: " + strings.Repeat("t", 1<<20), "trailer"},
		{"chunked, bad hex", chunked + "9z\r\n" + cfg + "\r\n0\r\n\r\n", "reading the config: invalid byte in chunk length"},
		// net/http says "header line too long" (http.ErrLineTooLong).
		{"chunked, a size line without end", chunked + strings.Repeat("9", 1<<20), "reading the config: bad chunked coding: a chunk size line of 4096 bytes or more"},
		{"chunked, a size past 64 bits", chunked + "10000000000000000\r\n" + cfg, "chunk length too large"},
		{"chunked, a huge size and a short body", chunked + "7fffffffffffffff\r\n" + cfg, "reading the config: unexpected EOF"},
		{"chunked, no end", chunked + "9\r\n" + cfg + "\r\n", "reading the config: unexpected EOF"},
		{"unknown transfer coding", "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", "unsupported transfer encoding"},
		{"a config over the limit in one piece", "HTTP/1.1 200 OK\r\n\r\n" + strings.Repeat("x", 2000), "over the size limit (1000 bytes)"},
		{"a config over the limit in many chunks", chunked + strings.Repeat("1\r\nx\r\n", 2000) + "0\r\n\r\n", "over the size limit (1000 bytes)"},
		// Lines that fit, past the bound: http.ReadResponse took the part
		// of the line read when the bound was met for the line, and
		// said "malformed MIME header line: \"X-A: b\\r\"".
		{"headers past the bound", "HTTP/1.1 200 OK\r\n" + strings.Repeat("X-A: b\r\n", 200000) + "Content-Length: 9\r\n\r\n" + cfg, "headers run past"},
		{"many headers", "HTTP/1.1 200 OK\r\n" + strings.Repeat("X-A: b\r\n", 100000) + "Content-Length: 9\r\n\r\n" + cfg, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			addr := scriptedNode(t, func(nc net.Conn) {
				_, _ = io.WriteString(nc, tc.answer)
			})
			ctx, cancel := context.WithTimeout(context.Background(), guard)
			defer cancel()
			c := New(Config{Bucket: "default", Username: "app", Password: "s3cret-hostile", ConnectTimeout: guard, MaxConfigSize: 1000})
			raw, _, err := c.Fetch(ctx, addr)
			t.Logf("raw %.40q err %v", raw, err)
			if ctx.Err() != nil {
				t.Fatalf("Fetch returned only when its context ended (%v)", err)
			}
			if tc.want == "" {
				if err != nil {
					t.Fatalf("err %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), addr) {
				t.Fatalf("err %v, want one naming %s and %q", err, addr, tc.want)
			}
		})
	}
}

// streamAgainst runs Stream on the node at addr alone until its stream
// ends (on a FakeClock never advanced: it is not reopened) and returns
// the configs delivered and the line logged for the end. cfg.Clock
// defaults to a FakeClock.
func streamAgainst(t *testing.T, addr string, cfg Config) (configs []string, end string, logs []string) {
	t.Helper()
	lines := make(logLines, 1024)
	cfg.Bucket = "default"
	if cfg.Clock == nil {
		cfg.Clock = retry.NewFakeClock(time.Unix(1e9, 0))
	}
	cfg.Logger = slog.New(lines)
	c := New(cfg)
	got := make(chan string, 1024)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		c.Stream(ctx, func() []string { return []string{addr} }, nil, nil, func(raw []byte, _, _ string) error {
			got <- string(raw)
			return nil
		})
	}()
	timeout := time.After(guard)
wait:
	for {
		select {
		case l := <-lines:
			logs = append(logs, l)
			if strings.HasPrefix(l, "kvwire: config stream ended") || strings.HasPrefix(l, "kvwire: no config stream from a node") ||
				strings.HasPrefix(l, "kvwire: config stream open for the redial period") {
				end = l
				break wait
			}
		case <-timeout:
			cancel()
			<-done
			t.Fatalf("the stream did not end; logged %q", logs)
		}
	}
	cancel()
	select {
	case <-done:
	case <-time.After(guard):
		t.Fatal("Stream did not return when its context ended")
	}
	close(got)
	for g := range got {
		configs = append(configs, g)
	}
	return configs, end, logs
}

// chunks is a chunked 200 answer's head and body carrying each of parts
// as a chunk of its own, and its last chunk.
func chunks(parts ...string) string {
	var b strings.Builder
	b.WriteString("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
	for _, p := range parts {
		fmt.Fprintf(&b, "%x\r\n%s\r\n", len(p), p)
	}
	b.WriteString("0\r\n\r\n")
	return b.String()
}

// Attacks on the config stream's framing (ns_server ends each config with
// "\n\n\n\n"), its chunked coding and its length: whatever a node sends,
// the stream delivers the whole configs it carried, drops the rest, ends
// with an error naming what was wrong, and Stream returns when its
// context ends.
func TestStreamAgainstAHostileNode(t *testing.T) {
	const c1, c2 = `{"rev":1}`, `{"rev":2}`
	sep := "\n\n\n\n"
	over := strings.Repeat("x", 3000) // over the limit of 1000
	for _, tc := range []struct {
		name   string
		answer string
		want   []string // the configs delivered
		end    string   // in the line logged for the end
	}{
		{"a separator split across chunks", chunks(c1+"\n\n", "\n\n"+c2+"\n", "\n", "\n\n"), []string{c1, c2}, "the node closed the stream"},
		{"a config split across chunks", chunks(`{"re`, `v":1`, "}"+sep+`{`, `"rev":2}`+sep), []string{c1, c2}, "the node closed the stream"},
		{"a chunk per byte", chunks(strings.Split(c1+sep+c2+sep, "")...), []string{c1, c2}, "the node closed the stream"},
		{"empty configs between separators", chunks(sep + sep + c1 + sep + " \n" + sep + sep + c2 + sep + sep), []string{c1, c2}, "the node closed the stream"},
		{"only separators", chunks(strings.Repeat(sep, 1000)), nil, "the node closed the stream"},
		// The end said only "the node closed the stream": nothing said
		// that it had sent a config, and that it was over the limit.
		{"no separator at all", chunks(c1, c2, over), nil, "the node closed the stream, cut short 3018 bytes into a config over the size limit (1000 bytes)"},
		{"a config over the limit in one chunk", chunks(c1 + sep + over + sep + c2 + sep), []string{c1, c2}, "the node closed the stream"},
		{"a config over the limit in many chunks", chunks(append(append([]string{c1 + sep}, strings.Split(over, "")...), sep+c2+sep)...), []string{c1, c2}, "the node closed the stream"},
		{"a config cut short by the end", chunks(c1 + sep + `{"rev":`), []string{c1}, "the node closed the stream"},
		{"Content-Length shorter than the body", "HTTP/1.1 200 OK\r\nContent-Length: 15\r\n\r\n" + c1 + sep + c2 + sep, []string{c1}, "the node closed the stream"},
		{"Content-Length longer than the body", "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n" + c1 + sep + c2 + sep, []string{c1, c2}, "unexpected EOF"},
		{"no Content-Length, no chunks", "HTTP/1.0 200 OK\r\n\r\n" + c1 + sep + c2 + sep, []string{c1, c2}, "the node closed the stream"},
		{"bad hex after a config", strings.TrimSuffix(chunks(c1+sep), "0\r\n\r\n") + "zz\r\n", []string{c1}, "invalid byte in chunk length"},
		{"a chunk size line without end", strings.TrimSuffix(chunks(c1+sep), "0\r\n\r\n") + strings.Repeat("1", 1<<20), []string{c1}, "bad chunked coding: a chunk size line of 4096 bytes or more"},
		{"a size past 64 bits", strings.TrimSuffix(chunks(c1+sep), "0\r\n\r\n") + "10000000000000000\r\n", []string{c1}, "chunk length too large"},
		{"a huge chunk cut short", strings.TrimSuffix(chunks(c1+sep), "0\r\n\r\n") + "7fffffffffffffff\r\n" + c2 + sep, []string{c1, c2}, "unexpected EOF"},
		{"trailers", chunks(c1+sep) + "X-A: 1\r\n\r\n", []string{c1}, "the node closed the stream"},
		// net/http returns the trailer's error with the last chunk's
		// bytes, and "invalid Read on closed Body" after it.
		{"a trailer without end", strings.TrimSuffix(chunks(c1+sep), "\r\n") + "X-Pad: " + strings.Repeat("t", 1<<20), []string{c1}, "suspiciously long trailer"},
		{"401 with a body", "HTTP/1.1 401 Unauthorized\r\nContent-Length: 12\r\n\r\nUnauthorized", nil, "401 Unauthorized"},
		{"500 with a body", "HTTP/1.1 500 Internal Server Error\r\nContent-Length: 4\r\n\r\noops", nil, `HTTP 500 ("oops")`},
		{"status line of garbage", "SSH-2.0-OpenSSH_9.6\r\n\r\n", nil, "malformed HTTP response"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			addr := scriptedNode(t, func(nc net.Conn) {
				_, _ = io.WriteString(nc, tc.answer)
			})
			got, end, logs := streamAgainst(t, addr, Config{ConnectTimeout: guard, MaxConfigSize: 1000})
			t.Logf("end: %s", end)
			if strings.Join(got, "|") != strings.Join(tc.want, "|") {
				t.Errorf("configs %q, want %q", got, tc.want)
			}
			if !strings.Contains(end, tc.end) {
				t.Errorf("the end logged %q does not say %q", end, tc.end)
			}
			skips := 0
			for _, l := range logs {
				if strings.HasPrefix(l, "kvwire: ignoring a streamed cluster config over the size limit") {
					skips++
				}
			}
			if want := strings.Count(tc.name, "over the limit"); skips != want {
				t.Errorf("%d configs logged as over the limit, want %d (%q)", skips, want, logs)
			}
		})
	}
}

// errOnce is a reader that returns data with err, and then fails with
// another error: an error returned with the last bytes (io.Reader allows
// it) need not come again.
type errOnce struct {
	data []byte
	err  error
	done bool
}

func (r *errOnce) Read(p []byte) (int, error) {
	if r.done {
		return 0, errors.New("read after the error")
	}
	r.done = true
	return copy(p, r.data), r.err
}

// An error returned with the last bytes read ends the stream after the
// configs those bytes complete: it was dropped, and the stream ended
// with the next read's error, which said nothing of what was wrong.
func TestConfigReaderKeepsAnErrorReturnedWithData(t *testing.T) {
	bad := errors.New("the bytes' error")
	cr := newConfigReader(&errOnce{data: []byte(`{"rev":1}` + "\n\n\n\n" + `{"rev":`), err: bad}, 1000)
	c, _, err := cr.next()
	if string(c) != `{"rev":1}` || err != nil {
		t.Fatalf("first: %q, %v; want the config", c, err)
	}
	for range 2 {
		if c, _, err = cr.next(); c != nil || err != bad {
			t.Fatalf("then: %q, %v; want the error returned with the bytes", c, err)
		}
	}
}

// endless is a reader of an endless stream: the bytes of unit, again and
// again, until n bytes were read.
type endless struct {
	unit []byte
	n    int
	read int
}

func (e *endless) Read(p []byte) (int, error) {
	if e.read >= e.n {
		return 0, io.EOF
	}
	k := 0
	for k < len(p) && e.read < e.n {
		c := copy(p[k:], e.unit[e.read%len(e.unit):])
		if c > e.n-e.read {
			c = e.n - e.read
		}
		k += c
		e.read += c
	}
	return k, nil
}

// A body without end holds no more than a config's worth of it, whatever
// it is made of: no separator ever (one config over the limit without
// end), separators alone, or newlines that never make a separator.
func TestConfigReaderHoldsAnEndlessBodyInBoundedMemory(t *testing.T) {
	const max = 1000
	for _, unit := range []string{"x", "\n\n\n\n", "\n\n\nx", "\n", " ", `{"rev":1}`} {
		// The unit repeated, so that a read copies more than a byte at a time.
		long := []byte(strings.Repeat(unit, 4096/len(unit)+1))
		cr := newConfigReader(iotest.OneByteReader(&endless{unit: long, n: 64 << 10}), max)
		for {
			_, _, err := cr.next()
			if err != nil {
				break
			}
			if c := cap(cr.buf); c > max+len(separator)+8192 {
				t.Fatalf("%q: buffer grew to %d bytes for a limit of %d", unit, c, max)
			}
		}
		cr = newConfigReader(&endless{unit: long, n: 16 << 20}, max)
		for {
			_, _, err := cr.next()
			if err != nil {
				break
			}
			if c := cap(cr.buf); c > max+len(separator)+8192 {
				t.Fatalf("%q: buffer grew to %d bytes for a limit of %d", unit, c, max)
			}
		}
	}
}

// trickle writes head, then unit every 10 ms until the connection closes:
// a slowloris node.
func trickle(nc net.Conn, head, unit string) {
	if _, err := io.WriteString(nc, head); err != nil {
		return
	}
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for range tick.C {
		if _, err := io.WriteString(nc, unit); err != nil {
			return
		}
	}
}

// A slowloris node, sending a byte at a time for ever, holds a request no
// longer than its bound: its TLS handshake and headers ConnectTimeout
// (real time, however the bytes keep coming: a deadline, not an idle
// timeout), an error answer's body the same deadline, a fetched body the
// fetch's context (bootstrap's: Options.ConnectTimeout), a stream's body
// the redial period (10 s on the Clock) from its headers.
func TestSlowlorisNodeHoldsARequestNoLongerThanItsBound(t *testing.T) {
	t.Run("headers", func(t *testing.T) {
		addr := scriptedNode(t, func(nc net.Conn) { trickle(nc, "HTTP/1.1 200 OK\r\nX-A: ", "a") })
		c := New(Config{Bucket: "default", ConnectTimeout: 200 * time.Millisecond})
		ctx, cancel := context.WithTimeout(context.Background(), guard)
		defer cancel()
		_, _, err := c.Fetch(ctx, addr)
		if ctx.Err() != nil || err == nil || !strings.Contains(err.Error(), "no answer within the connect timeout (200ms)") {
			t.Fatalf("err %v, want the connect timeout named", err)
		}
	})
	t.Run("TLS handshake", func(t *testing.T) {
		// A record header announcing a handshake record, then its
		// bytes a byte at a time: the client speaks first, nothing is
		// read from it.
		addr := rawNode(t, func(nc net.Conn) { trickle(nc, "\x16\x03\x03\x40\x00", "\x02") })
		c := New(Config{Bucket: "default", ConnectTimeout: 200 * time.Millisecond, TLS: &tls.Config{}})
		ctx, cancel := context.WithTimeout(context.Background(), guard)
		defer cancel()
		_, _, err := c.Fetch(ctx, addr)
		if ctx.Err() != nil || err == nil || !strings.Contains(err.Error(), "no answer within the connect timeout (200ms)") {
			t.Fatalf("err %v, want the connect timeout named", err)
		}
	})
	t.Run("fetched body", func(t *testing.T) {
		addr := scriptedNode(t, func(nc net.Conn) {
			trickle(nc, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n", "1\r\n \r\n")
		})
		c := New(Config{Bucket: "default", ConnectTimeout: guard})
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		start := time.Now()
		_, _, err := c.Fetch(ctx, addr)
		if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > guard {
			t.Fatalf("err %v after %v, want the context's deadline", err, time.Since(start))
		}
	})
	t.Run("error body", func(t *testing.T) {
		addr := scriptedNode(t, func(nc net.Conn) {
			trickle(nc, "HTTP/1.1 503 Service Unavailable\r\nContent-Length: 1000000\r\n\r\n", "b")
		})
		c := New(Config{Bucket: "default", ConnectTimeout: 200 * time.Millisecond})
		ctx, cancel := context.WithTimeout(context.Background(), guard)
		defer cancel()
		_, _, err := c.Fetch(ctx, addr)
		var he *Error
		if ctx.Err() != nil || !errors.As(err, &he) || he.Status != http.StatusServiceUnavailable {
			t.Fatalf("err %v, want the 503", err)
		}
	})
	for _, first := range []bool{false, true} {
		t.Run(fmt.Sprintf("streamed body, a config first: %v", first), func(t *testing.T) {
			head := "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
			if first {
				head += "d\r\n{\"rev\":1}\n\n\n\n\r\n"
			}
			addr := scriptedNode(t, func(nc net.Conn) { trickle(nc, head, "1\r\n{\r\n") })
			clock := retry.NewFakeClock(time.Unix(1e9, 0))
			ctx, cancel := context.WithTimeout(context.Background(), guard)
			defer cancel()
			go func() {
				// The first timer is the stream's redial period.
				if clock.BlockUntilTimers(ctx, 1) == nil {
					clock.Advance(10 * time.Second)
				}
			}()
			got, end, _ := streamAgainst(t, addr, Config{Clock: clock, ConnectTimeout: guard, MaxConfigSize: 1 << 30})
			t.Logf("end: %s", end)
			// With a config first, the stream reopened at once (it lived)
			// may deliver it again before Stream is ended.
			if first != (len(got) > 0) || !strings.Contains(end, "redial period") {
				t.Fatalf("configs %q, end %q; want the redial period named", got, end)
			}
		})
	}
	// A config over the limit still coming at the redial period: the
	// end says so, where it said only that no config came.
	t.Run("streamed body over the limit", func(t *testing.T) {
		head := "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n400\r\n" + strings.Repeat("x", 1024) + "\r\n"
		var sent atomic.Bool
		addr := scriptedNode(t, func(nc net.Conn) {
			if sent.CompareAndSwap(false, true) {
				trickle(nc, head, "1\r\nx\r\n")
			}
		})
		clock := retry.NewFakeClock(time.Unix(1e9, 0))
		ctx, cancel := context.WithTimeout(context.Background(), guard)
		defer cancel()
		read := make(chan struct{})
		var once sync.Once
		go func() {
			if clock.BlockUntilTimers(ctx, 1) != nil {
				return
			}
			select {
			case <-read: // the client has read past the limit
			case <-ctx.Done():
				return
			}
			clock.Advance(10 * time.Second)
		}()
		_, end, _ := streamAgainst(t, addr, Config{Clock: clock, ConnectTimeout: guard, MaxConfigSize: 1000,
			DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
				nc, err := (&net.Dialer{}).DialContext(ctx, network, addr)
				if err != nil {
					return nil, err
				}
				return &readHook{Conn: nc, before: func(n int) {
					// The limit's worth and a byte past it read: the
					// reader has judged them before it reads again.
					if n >= len(head)+6 {
						once.Do(func() { close(read) })
					}
				}}, nil
			}})
		t.Logf("end: %s", end)
		if !strings.Contains(end, "redial period (10s) without sending a config, cut short ") || !strings.Contains(end, " bytes into a config over the size limit (1000 bytes)") {
			t.Fatalf("end %q; want the redial period and the config over the limit named", end)
		}
	})
}

// A 3xx answer is not followed, to another host or anywhere: the
// credentials go only to the addresses the client was given (ns_server
// never redirects its config endpoints), and the error names the status
// and where it pointed (a proxy sending http:// to https://, say: its
// body, nginx's, said only "301 Moved Permanently").
func TestRedirectIsNotFollowed(t *testing.T) {
	var asked atomic.Int32
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		asked.Add(1)
		w.Write([]byte(`{"rev":1}` + "\n\n\n\n"))
	}))
	defer other.Close()
	for _, status := range []int{301, 302, 303, 307, 308} {
		body := fmt.Sprintf("<html>\r\n<head><title>%d %s</title></head>\r\n</html>", status, http.StatusText(status))
		answer := fmt.Sprintf("HTTP/1.1 %d %s\r\nLocation: %s/pools/default/b/default\r\nContent-Length: %d\r\n\r\n%s",
			status, http.StatusText(status), other.URL, len(body), body)
		addr := scriptedNode(t, func(nc net.Conn) { _, _ = io.WriteString(nc, answer) })
		says := fmt.Sprintf("HTTP %d, a redirect to %q (not followed)", status, other.URL+"/pools/default/b/default")
		c := New(Config{Bucket: "default", Username: "app", Password: "s3cret-hostile", ConnectTimeout: guard})
		_, _, err := c.Fetch(context.Background(), addr)
		var he *Error
		if !errors.As(err, &he) || he.Status != status || !strings.Contains(err.Error(), says) {
			t.Errorf("Fetch: err %v, want %s", err, says)
		}
		_, end, _ := streamAgainst(t, addr, Config{Username: "app", Password: "s3cret-hostile", ConnectTimeout: guard})
		if !strings.Contains(end, says) {
			t.Errorf("Stream: ended %q, want %s", end, says)
		}
	}
	// Fetch and Stream returned: a redirect followed would have been.
	if n := asked.Load(); n != 0 {
		t.Fatalf("the host redirected to was asked %d times", n)
	}
}

// A node that completes the TLS handshake and then answers in plaintext
// (a TLS-terminating proxy misconfigured to pass the handshake, a port
// shared by two services) fails the request with the TLS layer's error,
// not a hang and not an HTTP parse of decrypted garbage.
func TestTLSNodeAnsweringInPlaintext(t *testing.T) {
	srv := httptest.NewUnstartedServer(http.NotFoundHandler())
	srv.StartTLS()
	cert := srv.TLS.Certificates
	roots := srv.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs
	srv.Close()
	addr := scriptedTLSNode(t, &tls.Config{Certificates: cert}, func(tc *tls.Conn, raw net.Conn) {
		_, _ = io.WriteString(raw, "HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\n{\"rev\":1}")
	})
	c := New(Config{Bucket: "default", ConnectTimeout: guard, TLS: &tls.Config{RootCAs: roots, ServerName: "example.com"}})
	ctx, cancel := context.WithTimeout(context.Background(), guard)
	defer cancel()
	_, _, err := c.Fetch(ctx, addr)
	t.Logf("%v", err)
	if ctx.Err() != nil || err == nil || !strings.Contains(err.Error(), "tls: ") {
		t.Fatalf("Fetch: err %v, want the TLS layer's", err)
	}
	_, end, _ := streamAgainst(t, addr, Config{ConnectTimeout: guard, TLS: &tls.Config{RootCAs: roots, ServerName: "example.com"}})
	if !strings.Contains(end, "tls: ") {
		t.Fatalf("Stream: ended %q, want the TLS layer's error", end)
	}
}

// scriptedTLSNode is scriptedNode over TLS: answer gets the TLS connection
// and the TCP one under it, once the request was read.
func scriptedTLSNode(t *testing.T, cfg *tls.Config, answer func(tc *tls.Conn, raw net.Conn)) string {
	t.Helper()
	return rawNode(t, func(nc net.Conn) {
		tc := tls.Server(nc, cfg)
		if _, err := http.ReadRequest(bufio.NewReader(tc)); err != nil {
			return
		}
		answer(tc, nc)
	})
}

// Whatever a node is sending when the client is closed (Stream's context
// ends), Stream returns with its connection closed and nothing of the
// request left running: the headers sent a byte at a time, an error
// answer's body likewise, a stream's body a byte at a time or as fast as
// the node can, a TLS handshake of garbage a byte at a time.
func TestStreamEndsWithItsContextWhateverTheNodeSends(t *testing.T) {
	chunked := "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
	const errHead = "HTTP/1.1 503 Service Unavailable\r\nContent-Length: 1000000\r\n\r\n"
	for _, tc := range []struct {
		name   string
		tls    bool
		answer func(nc net.Conn)
		after  int // the context ends once the client has read this many bytes
	}{
		{"headers a byte at a time", false, func(nc net.Conn) { trickle(nc, "HTTP/1.1 200 OK\r\nX-A: ", "a") }, 30},
		{"an error body a byte at a time", false, func(nc net.Conn) { trickle(nc, errHead, "b") }, len(errHead) + 3},
		{"a body a byte at a time", false, func(nc net.Conn) { trickle(nc, chunked, "1\r\n{\r\n") }, len(chunked) + 20},
		{"an endless body as fast as it goes", false, func(nc net.Conn) {
			unit := fmt.Sprintf("10000\r\n%s\r\n", strings.Repeat("x", 0x10000))
			if _, err := io.WriteString(nc, chunked); err != nil {
				return
			}
			for {
				if _, err := io.WriteString(nc, unit); err != nil {
					return
				}
			}
		}, 4 << 20},
		{"a TLS handshake of garbage a byte at a time", true, func(nc net.Conn) { trickle(nc, "", "\x16") }, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var addr string
			if tc.tls {
				// The client speaks first: no request is read.
				addr = rawNode(t, tc.answer)
			} else {
				addr = scriptedNode(t, tc.answer)
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			d := newDialer(false)
			cfg := Config{Bucket: "default", ConnectTimeout: guard, MaxConfigSize: 1000,
				Clock: retry.NewFakeClock(time.Unix(1e9, 0)),
				DialContext: func(dctx context.Context, network, addr string) (net.Conn, error) {
					nc, err := d.DialContext(dctx, network, addr)
					if err != nil {
						return nil, err
					}
					return &readHook{Conn: nc, before: func(n int) {
						if n >= tc.after {
							cancel()
						}
					}}, nil
				}}
			if tc.tls {
				cfg.TLS = &tls.Config{}
			}
			c := New(cfg)
			done := make(chan struct{})
			go func() {
				defer close(done)
				c.Stream(ctx, func() []string { return []string{addr} }, nil, nil, func([]byte, string, string) error { return nil })
			}()
			select {
			case <-done:
			case <-time.After(guard):
				t.Fatal("Stream did not return after its context ended")
			}
			requireNothingLeft(t, d, "Stream")
		})
	}
}

// rawNode is a node that runs answer on each connection as it is
// accepted (scriptedNode and scriptedTLSNode read the request first); the
// connections close when answer returns or when the test ends.
func rawNode(t *testing.T, answer func(nc net.Conn)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, nc)
			mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer nc.Close()
				answer(nc)
			}()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, nc := range conns {
			nc.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return ln.Addr().String()
}

// cutReader reads r in reads whose sizes are taken from sizes in turn
// (0 stands for 1), as a node's packets or chunks would cut the stream.
type cutReader struct {
	r     io.Reader
	sizes []byte
	i     int
}

func (c *cutReader) Read(p []byte) (int, error) {
	n := 1
	if len(c.sizes) > 0 {
		n = max(1, int(c.sizes[c.i%len(c.sizes)]))
		c.i++
	}
	return c.r.Read(p[:min(n, len(p))])
}

// The config reader splits any stream, cut anywhere, as splitting it
// whole at each separator does: whole configs within the limit, trimmed,
// empty ones dropped, those over it skipped with their size, the piece
// the end cut short dropped; and its buffer holds no more than a config,
// a separator and a read.
func FuzzConfigReader(f *testing.F) {
	f.Add([]byte(`{"rev":1}`+"\n\n\n\n\n\n\n\n"+` {"rev":2} `+"\n\n\n\n"+`{"rev":`), []byte{1, 2, 3})
	f.Add([]byte(strings.Repeat("x", 100)+"\n\n\n\n"+`{"rev":1}`+"\n\n\n"), []byte{7})
	f.Add([]byte(strings.Repeat("\n", 37)), []byte{3, 1})
	f.Add([]byte(strings.Repeat("ab\n\n\n", 30)+"\n"), []byte{0, 200})
	const limit = 40
	f.Fuzz(func(t *testing.T, body, sizes []byte) {
		var want []string
		var wantSkipped []int
		pieces := bytes.Split(body, separator)
		for _, p := range pieces[:len(pieces)-1] {
			switch {
			case len(p) > limit:
				wantSkipped = append(wantSkipped, len(p))
			case len(bytes.TrimSpace(p)) > 0:
				want = append(want, string(bytes.TrimSpace(p)))
			}
		}
		cr := newConfigReader(&cutReader{r: bytes.NewReader(body), sizes: sizes}, limit)
		var got []string
		var skipped []int
		for {
			c, s, err := cr.next()
			if s > 0 {
				skipped = append(skipped, s)
			}
			if c != nil {
				got = append(got, string(c))
			}
			if cap(cr.buf) > limit+len(separator)+8192 {
				t.Fatalf("buffer grew to %d bytes for a limit of %d", cap(cr.buf), limit)
			}
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatalf("next: %v", err)
			}
		}
		if !slices.Equal(got, want) || !slices.Equal(skipped, wantSkipped) {
			t.Fatalf("configs %q skipped %v; want %q skipped %v", got, skipped, want, wantSkipped)
		}
	})
}
