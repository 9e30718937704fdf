package conn

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvwire/kvwire/internal/kverr"
	"github.com/kvwire/kvwire/internal/memcachedtest"
	"github.com/kvwire/kvwire/memdx"
)

// textKeys turns strings into the [][]byte SendGets takes.
func textKeys(ks ...string) [][]byte {
	out := make([][]byte, len(ks))
	for i, k := range ks {
		out[i] = []byte(k)
	}
	return out
}

// textHits reads the answer to a SendGets of keys: index -> value.
func textHits(t *testing.T, tc *TextConn, ctx context.Context, keys [][]byte) (map[int]string, error) {
	t.Helper()
	hits := map[int]string{}
	err := tc.ReadGets(ctx, time.Now().Add(testTimeout), keys, func(i int, v *memdx.TextValue) {
		_, dup := hits[i]
		require.False(t, dup, "key %d answered twice", i)
		hits[i] = fmt.Sprintf("%s/%d/%t", v.Value, v.Flags, v.Cas != 0)
	})
	return hits, err
}

// Against memcached: version, then multi-gets with hits, misses, a key
// asked twice, an empty value and one larger than the read buffer, one
// after another on the connection.
func TestTextConnReadsMultiGetsFromMemcached(t *testing.T) {
	addr := plainAddr(t)
	ctx := testCtx(t)
	c, err := Dial(ctx, addr, Options{Memcached: true})
	require.NoError(t, err)
	defer c.Close()
	prefix := fmt.Sprintf("textconn-%d-", time.Now().UnixNano())
	large := strings.Repeat("x", 3*textReadBuffer+17)
	for k, v := range map[string]string{"a": "alpha", "empty": "", "large": large} {
		wantStatus(t, op(t, c, memdx.NewStore(memdx.OpSet, []byte(prefix+k), []byte(v), 9, 60)), memdx.StatusSuccess)
	}
	tc, err := DialText(ctx, addr, Options{})
	require.NoError(t, err)
	defer tc.Close()
	version, err := tc.Version(ctx)
	require.NoError(t, err)
	assert.NotEmpty(t, version)
	for range 3 {
		keys := textKeys(prefix+"a", prefix+"missing", prefix+"empty", prefix+"a", prefix+"large", prefix+"missing2")
		require.NoError(t, tc.SendGets(time.Now().Add(testTimeout), keys))
		hits, err := textHits(t, tc, ctx, keys)
		require.NoError(t, err)
		assert.Equal(t, map[int]string{0: "alpha/9/true", 2: "/9/true", 3: "alpha/9/true", 4: large + "/9/true"}, hits)
		require.NoError(t, tc.Err())
	}
}

// fakeText is a text server whose answers the test writes: each line it
// reads goes to lines, and whatever the test sends on answers is written
// back.
type fakeText struct {
	ln      net.Listener
	lines   chan string
	answers chan string
	done    chan struct{}
}

func newFakeText(t *testing.T) *fakeText {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	f := &fakeText{ln: ln, lines: make(chan string, 16), answers: make(chan string, 16), done: make(chan struct{})}
	go func() {
		defer close(f.done)
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		go func() {
			for a := range f.answers {
				if a == "" {
					_ = c.Close()
					return
				}
				if _, err := io.WriteString(c, a); err != nil {
					return
				}
			}
		}()
		r := bufio.NewReader(c)
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				return
			}
			f.lines <- line
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		close(f.answers)
		<-f.done
	})
	return f
}

// sentinelOK is the fake server's answer to a multi-get's sentinel
// (SendGets), which a multi-get's answer begins with.
const sentinelOK = "VERSION fake\r\n"

// request reads the lines of one multi-get: its sentinel, then the
// multi-get, which it returns.
func (f *fakeText) request(t *testing.T) string {
	t.Helper()
	require.Equal(t, "version\r\n", <-f.lines, "the sentinel first")
	return <-f.lines
}

func (f *fakeText) dial(t *testing.T, o Options) *TextConn {
	t.Helper()
	tc, err := DialText(testCtx(t), f.ln.Addr().String(), o)
	require.NoError(t, err)
	t.Cleanup(func() { _ = tc.Close() })
	return tc
}

// Answers that are not a multi-get's answer for the keys asked break the
// connection with an error that names what was wrong; an error line is a
// *memdx.TextError. Each is a *RequestError, written.
func TestTextConnRefusesAnswersThatDoNotFit(t *testing.T) {
	for name, tc := range map[string]struct {
		answer string
		want   error
	}{
		"key not asked":     {"VALUE b 0 1\r\nx\r\nEND\r\n", memdx.ErrMalformed},
		"keys out of order": {"VALUE k2 0 1\r\nx\r\nVALUE k1 0 1\r\ny\r\nEND\r\n", memdx.ErrMalformed},
		"bytes after END":   {"END\r\nVALUE k1 0 1\r\n", memdx.ErrMalformed},
		"not an answer":     {"STORED\r\n", memdx.ErrMalformed},
		"error line":        {"SERVER_ERROR out of memory\r\n", nil},
		"value over limit":  {"VALUE k1 0 2000\r\n", memdx.ErrBodyTooLarge},
	} {
		t.Run(name, func(t *testing.T) {
			f := newFakeText(t)
			c := f.dial(t, Options{MaxBodyLength: 1000})
			keys := textKeys("k1", "k2")
			require.NoError(t, c.SendGets(time.Now().Add(testTimeout), keys))
			assert.Equal(t, "gets k1 k2\r\n", f.request(t))
			f.answers <- sentinelOK + tc.answer
			_, err := textHits(t, c, testCtx(t), keys)
			var re *RequestError
			require.ErrorAs(t, err, &re)
			assert.True(t, re.Written)
			if tc.want != nil {
				require.ErrorIs(t, err, tc.want)
			} else {
				var te *memdx.TextError
				require.ErrorAs(t, err, &te)
				assert.Equal(t, "SERVER_ERROR", te.Kind)
			}
			require.NotErrorIs(t, err, kverr.ErrConnectionClosed)
			require.Equal(t, err, c.Err(), "broken")
			require.Equal(t, err, c.SendGets(time.Now().Add(testTimeout), keys), "not used again")
		})
	}
}

// A read awaiting a silent server ends with its context (the context's
// error), with its deadline (context.DeadlineExceeded), or when the
// connection is closed from another goroutine (ErrConnectionClosed); a
// server that closes the connection mid-answer ends it too. Each breaks
// the connection.
func TestTextConnReadEndsWithContextDeadlineCloseAndEOF(t *testing.T) {
	keys := textKeys("k1")
	send := func(t *testing.T) (*fakeText, *TextConn) {
		f := newFakeText(t)
		c := f.dial(t, Options{})
		require.NoError(t, c.SendGets(time.Now().Add(testTimeout), keys))
		f.request(t)
		return f, c
	}
	t.Run("context", func(t *testing.T) {
		_, c := send(t)
		ctx, cancel := context.WithCancel(context.Background())
		go cancel()
		err := c.ReadGets(ctx, time.Now().Add(time.Hour), keys, func(int, *memdx.TextValue) {})
		require.ErrorIs(t, err, context.Canceled)
		require.Error(t, c.Err())
	})
	t.Run("deadline", func(t *testing.T) {
		_, c := send(t)
		err := c.ReadGets(context.Background(), time.Now(), keys, func(int, *memdx.TextValue) {})
		require.ErrorIs(t, err, context.DeadlineExceeded)
		require.NotErrorIs(t, err, kverr.ErrConnectionClosed)
	})
	t.Run("close", func(t *testing.T) {
		_, c := send(t)
		go func() { _ = c.Close() }()
		err := c.ReadGets(context.Background(), time.Now().Add(time.Hour), keys, func(int, *memdx.TextValue) {})
		require.ErrorIs(t, err, kverr.ErrConnectionClosed)
	})
	t.Run("EOF mid-answer", func(t *testing.T) {
		f, c := send(t)
		f.answers <- sentinelOK + "VALUE k1 0 5\r\nab"
		f.answers <- ""
		hit := false
		err := c.ReadGets(context.Background(), time.Now().Add(testTimeout), keys, func(int, *memdx.TextValue) { hit = true })
		require.ErrorIs(t, err, kverr.ErrConnectionClosed)
		require.False(t, hit, "a value cut short is no hit")
		var re *RequestError
		require.ErrorAs(t, err, &re)
		assert.True(t, re.Written)
	})
}

// Misuse is refused without breaking the connection: a key the text
// protocol cannot carry (nothing is written), a second SendGets before the
// answer, and ReadGets of other keys than were sent.
func TestTextConnRefusesMisuse(t *testing.T) {
	f := newFakeText(t)
	c := f.dial(t, Options{})
	err := c.SendGets(time.Now().Add(testTimeout), textKeys("ok", "has space"))
	require.ErrorIs(t, err, memdx.ErrInvalidRequest)
	require.NoError(t, c.Err())
	err = c.ReadGets(context.Background(), time.Now().Add(testTimeout), textKeys("k"), func(int, *memdx.TextValue) {})
	require.ErrorIs(t, err, memdx.ErrInvalidRequest, "nothing sent")
	keys := textKeys("k1")
	require.NoError(t, c.SendGets(time.Now().Add(testTimeout), keys))
	assert.Equal(t, "gets k1\r\n", f.request(t), "the refused request wrote nothing")
	require.ErrorIs(t, c.SendGets(time.Now().Add(testTimeout), keys), memdx.ErrInvalidRequest)
	_, err = c.Version(testCtx(t))
	require.ErrorIs(t, err, memdx.ErrInvalidRequest)
	err = c.ReadGets(context.Background(), time.Now().Add(testTimeout), textKeys("k1", "k2"), func(int, *memdx.TextValue) {})
	require.ErrorIs(t, err, memdx.ErrInvalidRequest)
	require.NoError(t, c.Err())
	f.answers <- sentinelOK + "VALUE k1 3 2\r\nhi\r\nEND\r\n"
	hits, err := textHits(t, c, testCtx(t), keys)
	require.NoError(t, err)
	assert.Equal(t, map[int]string{0: "hi/3/false"}, hits)
}

// A memcached that takes no text (-B binary) never answers the version
// request: Version ends with its context, and the connection is broken.
func TestTextConnVersionOfAServerTakingNoTextEndsWithTheContext(t *testing.T) {
	addr := memcachedtest.StartArgs(t, "-B", "binary")
	ctx := testCtx(t)
	tc, err := DialText(ctx, addr, Options{})
	require.NoError(t, err)
	defer tc.Close()
	vctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	_, err = tc.Version(vctx)
	require.True(t, errors.Is(err, context.DeadlineExceeded), "%v", err)
	require.Error(t, tc.Err())
}
