package client

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvwire/kvwire/internal/faultnode"
	"github.com/kvwire/kvwire/internal/memcachedtest"
	"github.com/kvwire/kvwire/memdx"
)

// Tests of a memcached GetMany larger than the batch's in-flight bound: its
// keys go in windows of the bound, and the next window's requests are sent
// before the last window's answers are read. Each test's client keeps 2
// keys in flight (MaxPendingPerConnection 4), so that its 8 keys go in 4
// windows of 2: [0,2) [2,4) [4,6) [6,8). Its server holds window 1's
// answer until window 2's whole request has come (windowGate): a client
// that waits for window 1's answer before sending window 2 would wait for
// ever, and the gate's guard lets it go on, failing the test.

// windowGuard bounds how long a gate holds window 1's answer: a failure
// guard no passing run nears, never a wait a test relies on.
const windowGuard = 10 * time.Second

// windowOptions are the options of a windows test's client.
func windowOptions() *Options { return &Options{MaxPendingPerConnection: 4} }

// windowGate holds window 1's answer until window 2's request arrived.
type windowGate struct {
	once       sync.Once
	second     chan struct{}
	overlapped atomic.Bool
}

func newWindowGate() *windowGate { return &windowGate{second: make(chan struct{})} }

// arrived says window 2's request has come.
func (g *windowGate) arrived() { g.once.Do(func() { close(g.second) }) }

// hold waits for window 2's request (or the guard).
func (g *windowGate) hold() {
	select {
	case <-g.second:
		g.overlapped.Store(true)
	case <-time.After(windowGuard):
	}
}

func (g *windowGate) requireOverlapped(t *testing.T) {
	t.Helper()
	require.True(t, g.overlapped.Load(), "window 2's request came while window 1's answer was held")
}

// windowKeys stores the 8 keys of a windows test but keys[1] and keys[6]
// (a miss in window 1, one in window 4).
func windowKeys(t *testing.T, col *Collection, prefix string) []string {
	t.Helper()
	keys := batchKeys(t, col, prefix, 8, 0)
	for i, k := range keys {
		if i != 1 && i != 6 {
			_, err := col.Upsert(context.Background(), k, []byte("v-"+k), nil)
			require.NoError(t, err)
		}
	}
	return keys
}

// requireWindowKeys checks the results of windowKeys' keys but those of
// skip: each reads what a Get reads.
func requireWindowKeys(t *testing.T, res []GetManyResult, skip ...int) {
	t.Helper()
	require.Len(t, res, 8)
	for i, r := range res {
		switch {
		case slices.Contains(skip, i):
			continue
		case i == 1 || i == 6:
			require.ErrorIs(t, r.Err, ErrDocumentNotFound, r.Key)
			continue
		}
		require.NoError(t, r.Err, r.Key)
		assert.Equal(t, "v-"+r.Key, string(r.Value), r.Key)
	}
}

// textWindows is a windows test on the text path: a text front on a
// memcached of its own, with two idle text connections (window 1's and
// window 2's, read at the same time). The front holds window 1's
// multi-get (the one of keys[0]) until another has come (window 2's: they
// go on two connections), then does what then says with it (relays it
// when zero).
func textWindows(t *testing.T, prefix string, then textAction) (*textFront, *Collection, []string, *windowGate) {
	t.Helper()
	f := newTextFront(t, memcachedtest.Start(t))
	c := textClient(t, f.addr(), windowOptions())
	col := c.DefaultCollection()
	keys := windowKeys(t, col, prefix)
	warmText(t, c, keys[0])
	// Its window 2 finds the only text connection in use by window 1,
	// and a second is dialed.
	requireWindowKeys(t, col.GetMany(context.Background(), keys, nil))
	waitFor(t, "two idle text connections", func() bool { return textIdle(c) == 2 })
	g := newWindowGate()
	f.setOnGets(func(ks []string) textAction {
		if ks[0] != keys[0] {
			g.arrived()
			return textAction{}
		}
		g.hold()
		return then
	})
	return f, col, keys, g
}

// The text path: window 2's multi-get goes out, on a second text
// connection, while window 1's answer is awaited; every key reads as a
// Get does, each window by a multi-get.
func TestGetManyMemcachedTextSendsTheNextWindowWhileTheLastIsRead(t *testing.T) {
	f, col, keys, g := textWindows(t, "txwin", textAction{})
	before := f.multigets.Load()
	res := col.GetMany(context.Background(), keys, &GetManyOptions{Timeout: time.Minute})
	g.requireOverlapped(t)
	requireWindowKeys(t, res)
	for _, r := range res {
		assert.Zero(t, r.RetryAttempts, r.Key)
	}
	assert.Equal(t, before+4, f.multigets.Load(), "a multi-get per window")
}

// Window 1's text connection is lost after window 2's multi-get went out
// and before window 1's END: the key answered before the loss keeps that
// answer; window 1's other key (a miss, not settled by an END that never
// came) is read again, as a read written on a connection that closed;
// window 2, on its own connection, is read as if nothing happened.
func TestGetManyMemcachedTextWindowLostWhileTheNextIsInFlight(t *testing.T) {
	_, col, keys, g := textWindows(t, "txwinlost", textAction{reply: "VALUE txwinlost-000 7 9\r\nfrom-text\r\n", close: true})
	res := col.GetMany(context.Background(), keys, &GetManyOptions{Timeout: time.Minute})
	g.requireOverlapped(t)
	require.NoError(t, res[0].Err)
	assert.Equal(t, "from-text", string(res[0].Value), "the answer read before the loss")
	assert.Equal(t, uint32(7), res[0].Flags)
	assert.Zero(t, res[0].RetryAttempts)
	var kv *KeyValueError
	require.ErrorAs(t, res[1].Err, &kv)
	require.ErrorIs(t, kv, ErrDocumentNotFound)
	assert.True(t, kv.RetryReasons.Has(RetryReasonSocketClosedWhileInFlight), "%v", kv.RetryReasons)
	assert.False(t, kv.Ambiguous)
	requireWindowKeys(t, res, 0)
	for _, r := range res[2:4] {
		assert.Zero(t, r.RetryAttempts, "%s: window 2 is not affected", r.Key)
	}
}

// A malformed answer to window 1 while window 2's multi-get is in flight:
// window 1 gives no hit (not even the value before the fault, which may be
// as foreign as it) and its keys go as binary gets; the server's text path
// goes off, so windows 3 and 4 go as binary gets too; window 2's answer, on
// its own connection, is read.
func TestGetManyMemcachedTextMalformedWindowWhileTheNextIsInFlight(t *testing.T) {
	f, col, keys, g := textWindows(t, "txwinbad", textAction{reply: "VALUE txwinbad-000 0 5\r\nWRONG\r\nGARBAGE\r\n"})
	before := f.multigets.Load()
	res := col.GetMany(context.Background(), keys, &GetManyOptions{Timeout: time.Minute})
	g.requireOverlapped(t)
	requireWindowKeys(t, res)
	assert.Equal(t, before+2, f.multigets.Load(), "windows 1 and 2 by text, then none")
}

// binaryWindows is a windows test on the binary path (quiet gets and a
// NOOP per window), through a fault proxy to a memcached of its own. The
// proxy holds window 1's answer until window 2's gets have come: the
// answer to window 1's NOOP, or with atKey0 the answer to the get of
// keys[0], which then takes the action then returns (nil: passed on).
// gets counts the GETKQs of each key.
func binaryWindows(t *testing.T, prefix string, atKey0 bool, then func(p *faultnode.Proxy, req *memdx.Packet) faultnode.Action) (
	p *faultnode.Proxy, col *Collection, keys []string, g *windowGate, gets func(string) int) {
	t.Helper()
	p = proxied(t)
	c := memcachedClient(t, p.Addr(), windowOptions())
	col = c.DefaultCollection()
	keys = windowKeys(t, col, prefix)
	g = newWindowGate()
	var mu sync.Mutex
	count := map[string]int{}
	var noop atomic.Uint32 // window 1's NOOP's opaque, +1 (0: not seen)
	var sawKey0 atomic.Bool
	p.OnRequest(func(req *memdx.Packet) faultnode.Action {
		switch {
		case req.OpCode == memdx.OpGetKQ:
			mu.Lock()
			count[string(req.Key)]++
			mu.Unlock()
			sawKey0.CompareAndSwap(false, string(req.Key) == keys[0])
		case req.OpCode == memdx.OpNoop && sawKey0.Load():
			if !noop.CompareAndSwap(0, req.Opaque+1) {
				g.arrived() // window 2's NOOP: its whole request came
			}
		}
		return faultnode.Action{}
	})
	var once sync.Once
	p.OnResponse(func(req, resp *memdx.Packet) faultnode.Action {
		var a faultnode.Action
		if req == nil || (atKey0 && (req.OpCode != memdx.OpGetKQ || string(req.Key) != keys[0])) ||
			(!atKey0 && (req.OpCode != memdx.OpNoop || req.Opaque+1 != noop.Load())) {
			return a
		}
		once.Do(func() {
			g.hold()
			if then != nil {
				a = then(p, req)
			}
		})
		return a
	})
	return p, col, keys, g, func(k string) int {
		mu.Lock()
		defer mu.Unlock()
		return count[k]
	}
}

// The binary path: window 2's quiet gets go out, behind window 1's on the
// same connection, while window 1's NOOP is awaited; every key reads as a
// Get does, once.
func TestGetManyMemcachedQuietSendsTheNextWindowWhileTheLastIsRead(t *testing.T) {
	_, col, keys, g, gets := binaryWindows(t, "qwin", false, nil)
	res := col.GetMany(context.Background(), keys, &GetManyOptions{Timeout: time.Minute})
	g.requireOverlapped(t)
	requireWindowKeys(t, res)
	for _, r := range res {
		assert.Zero(t, r.RetryAttempts, r.Key)
		assert.Equal(t, 1, gets(r.Key), r.Key)
	}
}

// The connection closes after window 2's gets were written and before
// window 1's NOOP is answered: window 1's hit, answered before, is kept;
// its miss (no NOOP settled it) and window 2's keys (written, their
// answers lost) are each read again once, as reads written on a
// connection that closed, never reported a miss they were not; windows 3
// and 4 read as Gets do.
func TestGetManyMemcachedQuietConnectionLostWhileTheNextWindowIsInFlight(t *testing.T) {
	p, col, keys, g, gets := binaryWindows(t, "qwinlost", false, func(p *faultnode.Proxy, _ *memdx.Packet) faultnode.Action {
		for _, cn := range p.Conns() {
			cn.Close()
		}
		return faultnode.Action{Drop: true}
	})
	res := col.GetMany(context.Background(), keys, &GetManyOptions{Timeout: time.Minute})
	g.requireOverlapped(t)
	requireWindowKeys(t, res)
	assert.Zero(t, res[0].RetryAttempts, "answered before the loss")
	assert.Equal(t, 1, gets(keys[0]))
	for i := 1; i < 4; i++ {
		r := &res[i]
		reasons := r.RetryReasons
		if r.Err != nil {
			var kv *KeyValueError
			require.ErrorAs(t, r.Err, &kv)
			reasons = kv.RetryReasons
			assert.False(t, kv.Ambiguous, r.Key)
		}
		assert.True(t, reasons.Has(RetryReasonSocketClosedWhileInFlight), "%s: written, then lost: %v", r.Key, reasons)
		assert.Equal(t, 2, gets(r.Key), "%s: read again once", r.Key)
	}
	assert.Equal(t, 2, p.Accepted(), "one new connection")
}

// A foreign answer to window 1 (a hit naming another key, with another
// value) while window 2's gets are in flight on the same connection: it is
// no key's hit; the connection closes at it, and every key whose answer it
// had not passed, of both windows, is read again.
func TestGetManyMemcachedQuietForeignAnswerWhileTheNextWindowIsInFlight(t *testing.T) {
	_, col, keys, g, gets := binaryWindows(t, "qwinbad", true, func(_ *faultnode.Proxy, req *memdx.Packet) faultnode.Action {
		a := faultnode.Reply(req, memdx.StatusSuccess, []byte("WRONG"))
		a.Key, a.Extras = []byte("somebody-else"), make([]byte, 4)
		return faultnode.Action{Send: []memdx.Packet{a}}
	})
	res := col.GetMany(context.Background(), keys, &GetManyOptions{Timeout: time.Minute})
	g.requireOverlapped(t)
	requireWindowKeys(t, res)
	for i := range 4 {
		assert.Equal(t, 2, gets(keys[i]), "%s: read again once", keys[i])
	}
}

// Two windows in flight, neither answered: the batch's context ending or
// the client closing (once both windows' requests came), or the batch's
// deadline, ends every key (both windows', and those of the windows never
// sent) as it ends a Get, and nothing is left behind (TestMain's leak
// check).
func TestGetManyMemcachedWindowsInFlightEndWithTheBatch(t *testing.T) {
	for _, path := range []string{"text", "quiet"} {
		for _, how := range []string{"cancel", "close", "deadline"} {
			t.Run(path+"/"+how, func(t *testing.T) {
				var col *Collection
				var keys []string
				both := make(chan struct{}) // closed once both windows' requests came
				hold := make(chan struct{})
				defer close(hold)
				if path == "text" {
					var f *textFront
					f, col, keys, _ = textWindows(t, "txwinend", textAction{})
					var n atomic.Int32
					f.setOnGets(func([]string) textAction {
						if n.Add(1) == 2 {
							close(both)
						}
						return textAction{hold: hold}
					})
				} else {
					var p *faultnode.Proxy
					p, col, keys, _, _ = binaryWindows(t, "qwinend", false, nil)
					var n atomic.Int32
					p.OnRequest(func(req *memdx.Packet) faultnode.Action {
						if req.OpCode == memdx.OpNoop && n.Add(1) == 2 {
							close(both)
						}
						return faultnode.Action{Drop: req.OpCode == memdx.OpGetKQ || req.OpCode == memdx.OpNoop}
					})
				}
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				timeout, want := time.Minute, ErrRequestCanceled
				ended := make(chan error, 1)
				switch how {
				case "cancel":
					go func() { <-both; cancel(); ended <- nil }()
				case "close":
					want = ErrClosed
					go func() { <-both; ended <- col.c.Close() }()
				case "deadline":
					timeout, want = 300*time.Millisecond, ErrTimeout
					ended <- nil
				}
				res := col.GetMany(ctx, keys, &GetManyOptions{Timeout: timeout})
				require.NoError(t, <-ended)
				for _, r := range res {
					require.ErrorIs(t, r.Err, want, r.Key)
					require.NotErrorIs(t, r.Err, ErrDocumentNotFound, r.Key)
				}
			})
		}
	}
}
