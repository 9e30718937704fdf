package conn

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvwire/kvwire/memdx"
)

// The text protocol has no opaque: bytes a server sent after the
// connection's idle check and before it read the next multi-get (a late or
// duplicated answer to an earlier request) would be read as that
// multi-get's answer, with the values of then. Each multi-get is sent
// after a sentinel (version), whose answer the server writes before the
// multi-get's; bytes that come before it are a foreign answer: the read
// ends malformed (written, the connection broken) and the stale value
// reaches no one, whether the stray answer is a hit, an all-miss answer
// (which would hide the key's value) or cut into pieces. The real answer,
// sent only once the read has ended, is never read.
func TestTextConnForeignAnswerBeforeTheSentinelIsRefused(t *testing.T) {
	for name, stray := range map[string][]string{
		"a stale hit":         {"VALUE k1 0 3\r\nold\r\nEND\r\n"},
		"a stale miss":        {"END\r\n"},
		"a stale hit, pieces": {"VALU", "E k1 0 3\r", "\nold\r\nEND\r\n"},
	} {
		t.Run(name, func(t *testing.T) {
			f := newFakeText(t)
			c := f.dial(t, Options{})
			keys := textKeys("k1")
			require.NoError(t, c.SendGets(time.Now().Add(testTimeout), keys))
			assert.Equal(t, "gets k1\r\n", f.request(t))
			for _, b := range stray {
				f.answers <- b
			}
			got := map[int]string{}
			err := c.ReadGets(testCtx(t), time.Now().Add(testTimeout), keys, func(i int, v *memdx.TextValue) {
				got[i] = string(v.Value)
			})
			f.answers <- sentinelOK + "VALUE k1 0 3\r\nnew\r\nEND\r\n"
			require.ErrorIs(t, err, memdx.ErrMalformed, "stray bytes read as the multi-get's answer: hits %v", got)
			assert.Empty(t, got, "no hit from the stray answer")
			var re *RequestError
			require.ErrorAs(t, err, &re)
			assert.True(t, re.Written)
			require.Equal(t, err, c.Err(), "broken")
		})
	}
}

// An error line where the sentinel's answer should be is the server's
// refusal (a *memdx.TextError, as an error line answering the multi-get
// is): the connection is broken, no hit is read.
func TestTextConnErrorLineBeforeTheSentinel(t *testing.T) {
	f := newFakeText(t)
	c := f.dial(t, Options{})
	keys := textKeys("k1")
	require.NoError(t, c.SendGets(time.Now().Add(testTimeout), keys))
	f.request(t)
	f.answers <- "SERVER_ERROR out of memory\r\nVALUE k1 0 3\r\nold\r\nEND\r\n"
	hits, err := textHits(t, c, testCtx(t), keys)
	var te *memdx.TextError
	require.ErrorAs(t, err, &te)
	assert.Equal(t, "SERVER_ERROR", te.Kind)
	assert.Empty(t, hits)
	require.Equal(t, err, c.Err(), "broken")
}

// A multi-get and its answer, sentinel included, allocate nothing on the
// client once its buffers are grown (the server here allocates nothing
// either: the count is the process's). Not under -race, whose
// instrumentation allocates. (main's ReadGets allocated its item once per
// multi-get: 1.0 here.)
func TestTextConnMultiGetAllocatesNothing(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	answer := []byte(sentinelOK + "VALUE k1 0 3 7\r\nabc\r\nEND\r\n")
	served := make(chan struct{})
	go func() {
		defer close(served)
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		buf := make([]byte, 4096)
		lines := 0
		for {
			n, err := c.Read(buf)
			if err != nil {
				return
			}
			for _, b := range buf[:n] {
				if b != '\n' {
					continue
				}
				if lines++; lines%2 == 0 { // the sentinel, then the multi-get
					if _, err := c.Write(answer); err != nil {
						return
					}
				}
			}
		}
	}()
	c, err := DialText(testCtx(t), ln.Addr().String(), Options{})
	require.NoError(t, err)
	defer func() { _ = c.Close(); <-served }()
	keys := textKeys("k1")
	got := 0
	hit := func(int, *memdx.TextValue) { got++ }
	ctx := context.Background()
	do := func() {
		if err := c.SendGets(time.Now().Add(testTimeout), keys); err != nil {
			t.Fatal(err)
		}
		if err := c.ReadGets(ctx, time.Time{}, keys, hit); err != nil {
			t.Fatal(err)
		}
	}
	for range 10 {
		do()
	}
	const runs = 1000
	perOp := mallocsPer(runs, do)
	require.Equal(t, runs+10, got)
	// An allocation on the path is one per multi-get at least; the bound
	// leaves room for the few the runtime's own goroutines may make
	// meanwhile.
	assert.Less(t, perOp, 0.5, "%.4f allocations per multi-get", perOp)
}
