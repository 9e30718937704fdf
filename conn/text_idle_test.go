//go:build unix

package conn

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvwire/kvwire/internal/kverr"
	"github.com/kvwire/kvwire/memdx"
)

// CheckIdle passes a connection on which nothing arrived since its last
// answer (and leaves it usable), and breaks one on which bytes arrived
// (memdx.ErrMalformed) or that the server closed (ErrConnectionClosed),
// each a *RequestError not written: nothing was sent. It takes nothing
// from the socket, and allocates nothing.
func TestTextConnCheckIdle(t *testing.T) {
	keys := textKeys("k1")
	answer := "VALUE k1 0 1\r\nx\r\nEND\r\n"
	for _, tc := range []struct {
		name  string
		after string // sent once the answer was read ("" closes)
		want  error
	}{
		{"nothing arrived", "-", nil},
		{"bytes arrived", answer, memdx.ErrMalformed},
		{"closed by the server", "", kverr.ErrConnectionClosed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeText(t)
			c := f.dial(t, Options{})
			require.NotNil(t, c.idle, "a TCP connection is peeked at")
			require.NoError(t, c.SendGets(time.Now().Add(testTimeout), keys))
			f.request(t)
			f.answers <- sentinelOK + answer
			hits, err := textHits(t, c, testCtx(t), keys)
			require.NoError(t, err)
			require.Len(t, hits, 1)
			if tc.after != "-" {
				f.answers <- tc.after
				waitFor(t, "the server's bytes or end", func() bool {
					data, ended, _ := c.idle.waiting()
					return data || ended
				})
			}
			if tc.want == nil {
				assert.Zero(t, testing.AllocsPerRun(10, func() { _ = c.CheckIdle() }))
				require.NoError(t, c.CheckIdle())
				require.NoError(t, c.SendGets(time.Now().Add(testTimeout), keys), "usable")
				return
			}
			err = c.CheckIdle()
			var re *RequestError
			require.ErrorAs(t, err, &re)
			assert.False(t, re.Written)
			require.ErrorIs(t, err, tc.want)
			require.Equal(t, err, c.Err(), "broken")
			if errors.Is(tc.want, memdx.ErrMalformed) {
				data, _, _ := c.idle.waiting()
				assert.True(t, data, "the bytes are still in the socket: peeked, not read")
			}
		})
	}
}

// BenchmarkTextConnCheckIdle is the idle check a batch makes before a
// multi-get: one recv with MSG_PEEK that finds nothing.
func BenchmarkTextConnCheckIdle(b *testing.B) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err == nil {
			accepted <- c
		}
	}()
	c, err := DialText(context.Background(), ln.Addr().String(), Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	defer (<-accepted).Close()
	b.ReportAllocs()
	for b.Loop() {
		if err := c.CheckIdle(); err != nil {
			b.Fatal(err)
		}
	}
}
