package client

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvwire/kvwire/internal/faultnode"
	"github.com/kvwire/kvwire/internal/memcachedtest"
	"github.com/kvwire/kvwire/memdx"
	"github.com/kvwire/kvwire/retry"
)

// Tests of a memcached:// GetMany's text path (internal/multiget, internal/cluster's text.go):
// a server's keys go as one text multi-get on a text connection of its
// own. Most go through textFront, which relays both protocols to a real
// memcached and lets a test answer the multi-gets itself.

// textAction is what textFront does with a multi-get.
type textAction struct {
	reply string        // sent instead of relaying the request, when not ""
	hold  chan struct{} // when not nil: nothing more is sent until it is closed
	close bool          // then the connection is closed
	// later, when not "", is sent once hold is closed, without a request
	// (the connection idle in the client's pool); late is then given the
	// connection, once the write has returned.
	later string
	late  chan net.Conn
	// stray, when not "", is sent as soon as the multi-get arrives, before
	// anything answers it (before its sentinel's VERSION): bytes the
	// server sent before it read the request. strayHold, when not nil,
	// then holds back the rest until it is closed.
	stray     string
	strayHold chan struct{}
}

// textFront listens for memcached connections: a binary one (first byte
// 0x80) is relayed to upstream as it is; a text one is read line by line,
// its version requests answered, and its multi-gets relayed (or answered
// as onGets says); a version request after the connection's first (its
// check) is a multi-get's sentinel, read with the multi-get that follows
// it. It counts text connections and multi-gets.
type textFront struct {
	t         *testing.T
	ln        net.Listener
	upstream  string
	mu        sync.Mutex
	onGets    func(keys []string) textAction
	conns     []net.Conn
	wg        sync.WaitGroup
	textConns atomic.Int32
	multigets atomic.Int32
	texts     []net.Conn    // the text connections accepted (closeTexts)
	got       chan []string // each multi-get's keys, if the test reads them (buffered)
}

func newTextFront(t *testing.T, upstream string) *textFront {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	f := &textFront{t: t, ln: ln, upstream: upstream, got: make(chan []string, 64)}
	f.wg.Add(1)
	go f.accept()
	t.Cleanup(f.close)
	return f
}

func (f *textFront) addr() string { return f.ln.Addr().String() }

func (f *textFront) setOnGets(h func(keys []string) textAction) {
	f.mu.Lock()
	f.onGets = h
	f.mu.Unlock()
}

func (f *textFront) close() {
	_ = f.ln.Close()
	f.mu.Lock()
	for _, c := range f.conns {
		_ = c.Close()
	}
	f.mu.Unlock()
	f.wg.Wait()
}

// closeTexts closes the text connections accepted so far, as a server
// closing idle connections (or restarting) does.
func (f *textFront) closeTexts() {
	f.mu.Lock()
	for _, c := range f.texts {
		_ = c.Close()
	}
	f.texts = nil
	f.mu.Unlock()
}

func (f *textFront) track(c net.Conn) {
	f.mu.Lock()
	f.conns = append(f.conns, c)
	f.mu.Unlock()
}

func (f *textFront) accept() {
	defer f.wg.Done()
	for {
		c, err := f.ln.Accept()
		if err != nil {
			return
		}
		f.track(c)
		f.wg.Add(1)
		go f.serve(c)
	}
}

func (f *textFront) serve(c net.Conn) {
	defer f.wg.Done()
	defer c.Close()
	up, err := net.Dial("tcp", f.upstream)
	if err != nil {
		return
	}
	f.track(up)
	defer up.Close()
	r := bufio.NewReader(c)
	first, err := r.Peek(1)
	if err != nil {
		return
	}
	if first[0] == byte(memdx.MagicReq) {
		f.wg.Add(1)
		go func() {
			defer f.wg.Done()
			_, _ = io.Copy(c, up)
			_ = c.Close()
		}()
		_, _ = io.Copy(up, r)
		_ = up.Close()
		return
	}
	f.textConns.Add(1)
	f.mu.Lock()
	f.texts = append(f.texts, c)
	f.mu.Unlock()
	upr := bufio.NewReader(up)
	versions := 0
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return
		}
		sentinel := false
		if line == "version\r\n" {
			if versions++; versions > 1 {
				// A multi-get's sentinel: the multi-get follows.
				sentinel = true
				if line, err = r.ReadString('\n'); err != nil {
					return
				}
			}
		}
		switch {
		case line == "version\r\n":
			if _, err := io.WriteString(c, "VERSION front\r\n"); err != nil {
				return
			}
		case strings.HasPrefix(line, "gets "):
			keys := strings.Fields(line)[1:]
			f.multigets.Add(1)
			select {
			case f.got <- keys:
			default:
			}
			f.mu.Lock()
			h := f.onGets
			f.mu.Unlock()
			var a textAction
			if h != nil {
				a = h(keys)
			}
			if a.stray != "" {
				if _, err := io.WriteString(c, a.stray); err != nil {
					return
				}
				if a.strayHold != nil {
					<-a.strayHold
				}
			}
			if sentinel {
				if _, err := io.WriteString(c, "VERSION front\r\n"); err != nil {
					return
				}
			}
			if a.reply == "" && a.hold == nil && !a.close {
				if err := relayTextGets(up, upr, c, line); err != nil {
					return
				}
				continue
			}
			if a.reply != "" {
				if _, err := io.WriteString(c, a.reply); err != nil {
					return
				}
			}
			if a.hold != nil {
				<-a.hold
			}
			if a.later != "" {
				if _, err := io.WriteString(c, a.later); err != nil {
					return
				}
				a.late <- c
			}
			if a.close {
				return
			}
		default:
			_, _ = io.WriteString(c, "ERROR\r\n")
			return
		}
	}
}

// relayTextGets sends a multi-get upstream and copies its answer back.
func relayTextGets(up net.Conn, upr *bufio.Reader, c net.Conn, line string) error {
	if _, err := io.WriteString(up, line); err != nil {
		return err
	}
	var buf []byte
	var v memdx.TextValue
	for {
		n, end, err := memdx.ParseTextGet(buf, 0, &v)
		if err != nil {
			return err
		}
		if n > 0 {
			if _, err := c.Write(buf[:n]); err != nil {
				return err
			}
			buf = buf[n:]
			if end {
				return nil
			}
			continue
		}
		b, err := upr.ReadByte()
		if err != nil {
			return err
		}
		buf = append(buf, b)
		if upr.Buffered() > 0 {
			more, _ := upr.Peek(upr.Buffered())
			buf = append(buf, more...)
			_, _ = upr.Discard(len(more))
		}
	}
}

// requireStored checks the results of a GetMany of keys made by batchKeys
// with stored of them stored: those read "v-"+key, the others miss.
func requireStored(t *testing.T, res []GetManyResult, stored int) {
	t.Helper()
	for i, r := range res {
		if i < stored {
			require.NoError(t, r.Err, r.Key)
			assert.Equal(t, "v-"+r.Key, string(r.Value), r.Key)
			continue
		}
		require.ErrorIs(t, r.Err, ErrDocumentNotFound, r.Key)
	}
}

// textClient connects to memcached://addr with the text path on.
func textClient(t *testing.T, addr string, o *Options) *Client {
	t.Helper()
	c, err := Connect(context.Background(), "memcached://"+addr, testOptions(o))
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// textIdle is the text connections idle on c's nodes.
func textIdle(c *Client) int {
	n := 0
	for _, nd := range c.cl.Topology().Nodes() {
		idle, _, _ := nd.TextState()
		n += idle
	}
	return n
}

// textSettled reports whether no node of c is dialing a text connection.
func textSettled(c *Client) bool {
	for _, nd := range c.cl.Topology().Nodes() {
		if _, d, _ := nd.TextState(); d > 0 {
			return false
		}
	}
	return true
}

// waitFor polls cond until it holds; the bound is a failure guard, not a
// wait the test relies on.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	guard := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(guard) {
			t.Fatalf("%s: not within a minute", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// warmText makes col's first GetMany (binary: no text connection yet)
// and waits until the text connection it started dialing is idle.
func warmText(t *testing.T, c *Client, key string) {
	t.Helper()
	c.DefaultCollection().GetMany(context.Background(), []string{key}, nil)
	waitFor(t, "a text connection", func() bool { return textIdle(c) > 0 })
}

// A text multi-get reads what a Get reads: values (an empty one, one with
// the answer's own delimiters inside, a large one), flags and CAS; a miss
// is a Get's miss, with the same error; a key given twice is read twice;
// a key the text protocol cannot carry goes as a binary get. The keys of
// one batch are one multi-get, and the first batch (with no text
// connection yet) reads in binary.
func TestGetManyMemcachedTextMultiGetReadsAsGetsDo(t *testing.T) {
	f := newTextFront(t, memcachedtest.Start(t))
	c := textClient(t, f.addr(), nil)
	col := c.DefaultCollection()
	ctx := context.Background()
	keys := batchKeys(t, col, "tx", 40, 30)
	special := map[string][]byte{
		"tx-empty": {},
		"tx-delim": []byte("a\r\nEND\r\nVALUE tx-000 0 1\r\nz"),
		"tx-large": []byte(strings.Repeat("L", 300<<10)),
		"tx space": []byte("binary only"),
	}
	for k, v := range special {
		_, err := col.Upsert(ctx, k, v, &UpsertOptions{Flags: 0xfeedface})
		require.NoError(t, err)
		keys = append(keys, k)
	}
	keys = append(keys, keys[3], "tx-missing", keys[3])

	check := func(res []GetManyResult) {
		t.Helper()
		require.Len(t, res, len(keys))
		for i, r := range res {
			require.Equal(t, keys[i], r.Key)
			single, serr := col.Get(ctx, r.Key, nil)
			if serr != nil {
				require.ErrorIs(t, serr, ErrDocumentNotFound, r.Key)
				require.ErrorIs(t, r.Err, ErrDocumentNotFound, r.Key)
				var kv *KeyValueError
				require.ErrorAs(t, r.Err, &kv)
				assert.Equal(t, r.Key, kv.Key)
				continue
			}
			require.NoError(t, r.Err, r.Key)
			assert.Equal(t, single.Value, r.Value, r.Key)
			assert.NotNil(t, r.Value, r.Key)
			assert.Equal(t, single.Flags, r.Flags, r.Key)
			assert.Equal(t, single.Cas, r.Cas, r.Key)
		}
	}
	check(col.GetMany(ctx, keys, nil))
	require.Zero(t, f.multigets.Load(), "the first batch has no text connection")
	waitFor(t, "a text connection", func() bool { return textIdle(c) > 0 })
	check(col.GetMany(ctx, keys, nil))
	require.Equal(t, int32(1), f.multigets.Load(), "one multi-get for the batch")
	got := <-f.got
	assert.NotContains(t, got, "tx space")
	assert.Len(t, got, len(keys)-1)
	assert.Equal(t, int32(1), f.textConns.Load())
}

// A server that answers a multi-get with an error line, or with what is
// not a multi-get's answer, does not fail a key: the keys go as binary
// gets, and the server's text path is off (for a second), with no more
// multi-gets nor text connections meanwhile.
func TestGetManyMemcachedTextRefusedFallsBackToBinary(t *testing.T) {
	for name, reply := range map[string]string{
		"error line":     "SERVER_ERROR out of memory storing object\r\n",
		"key not asked":  "VALUE nobody 0 1\r\nx\r\nEND\r\n",
		"not an answer":  "STORED\r\n",
		"client error":   "CLIENT_ERROR bad command line format\r\n",
		"bytes past END": "END\r\nEND\r\n",
	} {
		t.Run(name, func(t *testing.T) {
			f := newTextFront(t, memcachedtest.Start(t))
			// On a fake clock: the text path stays off until it moves.
			fc := retry.NewFakeClock(time.Now())
			c := textClient(t, f.addr(), &Options{Clock: fakeClock{fc}})
			col := c.DefaultCollection()
			keys := batchKeys(t, col, "txref", 12, 8)
			warmText(t, c, keys[0])
			f.setOnGets(func([]string) textAction { return textAction{reply: reply} })
			for range 3 {
				requireStored(t, col.GetMany(context.Background(), keys, nil), 8)
			}
			assert.Equal(t, int32(1), f.multigets.Load(), "no multi-get after the refusal")
			assert.Equal(t, int32(1), f.textConns.Load(), "no text connection after the refusal")
			assert.Zero(t, textIdle(c), "the refused connection is closed")
		})
	}
}

// A memcached that takes no text (started with -B binary) never answers
// the version request a new text connection begins with: the node's text
// path goes off once that check times out, for 1 s, then 2 s after the
// next check fails (on the client's clock, a fake one here), and every
// batch, meanwhile and after, reads its keys in binary.
func TestGetManyMemcachedServerTakingNoTextReadsInBinary(t *testing.T) {
	t.Parallel()
	addr := memcachedtest.StartArgs(t, "-B", "binary")
	fc := retry.NewFakeClock(time.Now())
	c := textClient(t, addr, &Options{Clock: fakeClock{fc}, ConnectTimeout: 200 * time.Millisecond})
	col := c.DefaultCollection()
	keys := batchKeys(t, col, "txbin", 20, 10)
	readAll := func() {
		t.Helper()
		requireStored(t, col.GetMany(context.Background(), keys, nil), 10)
	}
	nd := c.cl.Topology().Nodes()[0]
	offFor := func() time.Duration {
		_, _, offUntil := nd.TextState()
		return offUntil.Sub(fc.Now())
	}
	for _, want := range []time.Duration{time.Second, 2 * time.Second} {
		readAll() // starts a text dial and its check
		readAll() // while the check waits
		waitFor(t, "the text check to end", func() bool { return textSettled(c) })
		require.Equal(t, want, offFor(), "text path off")
		readAll()
		assert.True(t, textSettled(c), "no text dial while off")
		assert.Zero(t, textIdle(c))
		fc.Advance(want)
	}
}

// A text connection lost in the middle of an answer: the keys answered
// before keep their values, the others are retried (as binary gets) and
// read; the lost connection is not used again.
func TestGetManyMemcachedTextConnectionLostRetriesTheUnansweredKeys(t *testing.T) {
	f := newTextFront(t, memcachedtest.Start(t))
	c := textClient(t, f.addr(), nil)
	col := c.DefaultCollection()
	keys := batchKeys(t, col, "txlost", 10, 8)
	warmText(t, c, keys[0])
	f.setOnGets(func(ks []string) textAction {
		return textAction{reply: fmt.Sprintf("VALUE %s 7 9\r\nfrom-text\r\n", ks[0]), close: true}
	})
	res := col.GetMany(context.Background(), keys, &GetManyOptions{Timeout: 10 * time.Second})
	require.NoError(t, res[0].Err)
	assert.Equal(t, "from-text", string(res[0].Value), "the answer read before the loss")
	assert.Equal(t, uint32(7), res[0].Flags)
	requireStored(t, res[1:], 7)
	assert.Zero(t, textIdle(c), "the lost connection is closed")
}

// A text connection the server closed while it was idle: the multi-get
// goes out (or its write fails) and the answer is the connection's end,
// with no hit. Nothing was read, so the keys go as binary gets at once,
// not as retries: a strategy that retries nothing still reads them all.
func TestGetManyMemcachedTextStaleConnectionFallsBackAtOnce(t *testing.T) {
	f := newTextFront(t, memcachedtest.Start(t))
	c := textClient(t, f.addr(), nil)
	col := c.DefaultCollection()
	keys := batchKeys(t, col, "txstale", 10, 6)
	warmText(t, c, keys[0])
	f.setOnGets(func([]string) textAction { return textAction{close: true} })
	noRetry := RetryStrategyFunc(func(RetryRequest, RetryReason) RetryAction { return NoRetry() })
	for i, r := range col.GetMany(context.Background(), keys, &GetManyOptions{RetryStrategy: noRetry, Timeout: 10 * time.Second}) {
		if i < 6 {
			require.NoError(t, r.Err, r.Key)
			assert.Equal(t, "v-"+r.Key, string(r.Value))
			continue
		}
		require.ErrorIs(t, r.Err, ErrDocumentNotFound, r.Key)
		var kv *KeyValueError
		require.ErrorAs(t, r.Err, &kv)
		assert.Zero(t, kv.RetryAttempts, r.Key)
	}
	require.Equal(t, int32(1), f.multigets.Load())
	assert.Zero(t, textIdle(c), "the closed connection is not kept")
}

// A server that never answers the multi-get: every key ends at the
// batch's deadline as a Get that timed out does, naming the request.
func TestGetManyMemcachedTextSilentServerTimesOut(t *testing.T) {
	t.Parallel()
	f := newTextFront(t, memcachedtest.Start(t))
	c := textClient(t, f.addr(), nil)
	col := c.DefaultCollection()
	keys := batchKeys(t, col, "txsilent", 6, 3)
	warmText(t, c, keys[0])
	hold := make(chan struct{})
	defer close(hold)
	f.setOnGets(func([]string) textAction { return textAction{hold: hold} })
	for _, r := range col.GetMany(context.Background(), keys, &GetManyOptions{Timeout: 200 * time.Millisecond}) {
		require.ErrorIs(t, r.Err, ErrTimeout, r.Key)
		require.ErrorIs(t, r.Err, ErrUnambiguousTimeout, r.Key)
		var kv *KeyValueError
		require.ErrorAs(t, r.Err, &kv)
		assert.Equal(t, OpCode(memdx.OpGet), kv.OpCode, r.Key)
	}
	assert.Zero(t, textIdle(c), "the timed-out connection is closed")
}

// The batch's context ends while the multi-get's answer is awaited: every
// key ends ErrRequestCanceled at once; so does Close, with ErrClosed.
// Either way the connection is closed, and nothing is left behind
// (TestMain's leak check).
func TestGetManyMemcachedTextCancelAndCloseEndTheRead(t *testing.T) {
	for _, how := range []string{"cancel", "close"} {
		t.Run(how, func(t *testing.T) {
			f := newTextFront(t, memcachedtest.Start(t))
			c := textClient(t, f.addr(), nil)
			col := c.DefaultCollection()
			keys := batchKeys(t, col, "txcancel", 6, 3)
			warmText(t, c, keys[0])
			hold := make(chan struct{})
			defer close(hold)
			f.setOnGets(func([]string) textAction { return textAction{hold: hold} })
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			closed := make(chan error, 1)
			go func() {
				<-f.got
				if how == "cancel" {
					cancel()
					closed <- nil
					return
				}
				closed <- c.Close()
			}()
			want := ErrRequestCanceled
			if how == "close" {
				want = ErrClosed
			}
			for _, r := range col.GetMany(ctx, keys, &GetManyOptions{Timeout: time.Minute}) {
				require.ErrorIs(t, r.Err, want, r.Key)
				require.NotErrorIs(t, r.Err, ErrTimeout, r.Key)
				require.NotErrorIs(t, r.Err, ErrDocumentNotFound, r.Key)
			}
			require.NoError(t, <-closed)
			assert.Zero(t, textIdle(c))
		})
	}
}

// binary_multiget=true in the connection string sets BinaryMultiGet, and
// with it no text connection is made.
func TestGetManyMemcachedBinaryMultiGetOption(t *testing.T) {
	f := newTextFront(t, memcachedtest.Start(t))
	c, err := Connect(context.Background(), "memcached://"+f.addr()+"?binary_multiget=true", testOptions(nil))
	require.NoError(t, err)
	defer c.Close()
	require.True(t, c.opts.Memcached.BinaryMultiGet)
	col := c.DefaultCollection()
	keys := batchKeys(t, col, "txopt", 4, 2)
	for range 3 {
		for i, r := range col.GetMany(context.Background(), keys, nil) {
			if i < 2 {
				require.NoError(t, r.Err)
			} else {
				require.True(t, errors.Is(r.Err, ErrDocumentNotFound))
			}
		}
	}
	assert.True(t, textSettled(c))
	assert.Zero(t, f.textConns.Load())
}

// A write to a server that is unanswered on the client's connection (here
// cancelled after it was written, its answer never to come: a tombstone)
// keeps GetMany off the text path for that server: a multi-get on the text
// connection could overtake the write, so that reading an ambiguous write
// back would find it not applied and then see it applied. The keys go as
// binary gets on the connection the write is on, behind it. Once the
// connection is replaced, the text path is taken again.
func TestGetManyMemcachedTextWaitsForWritesInFlight(t *testing.T) {
	p := proxied(t)
	c := textClient(t, p.Addr(), nil)
	col := c.DefaultCollection()
	keys := batchKeys(t, col, "txorder", 4, 4)
	warmText(t, c, keys[0])
	p.OnRequest(func(req *memdx.Packet) faultnode.Action {
		return faultnode.Action{Drop: req.OpCode == memdx.OpSet && string(req.Key) == keys[0]}
	})
	set := p.NextRequest(memdx.OpSet)
	ctx, cancel := context.WithCancel(context.Background())
	go func() { <-set; cancel() }()
	_, err := col.Upsert(ctx, keys[0], []byte("new"), &UpsertOptions{Timeout: time.Minute})
	require.ErrorIs(t, err, ErrAmbiguous)
	require.Equal(t, 1, c.cl.Topology().Nodes()[0].WritesInFlight(), "the cancelled write's tombstone")

	getq, text := p.Requests(memdx.OpGetKQ), p.TextGets()
	for _, r := range col.GetMany(context.Background(), keys, nil) {
		require.NoError(t, r.Err, r.Key)
		assert.Equal(t, "v-"+r.Key, string(r.Value), "the dropped write was never applied")
	}
	assert.Equal(t, text, p.TextGets(), "no text multi-get while the write is unanswered")
	assert.Equal(t, getq+len(keys), p.Requests(memdx.OpGetKQ), "binary gets behind the write")

	p.OnRequest(nil)
	p.Reset() // the tombstone goes with its connection
	waitFor(t, "a new connection", func() bool {
		nd := c.cl.Topology().Nodes()[0]
		return nd.Down() == nil && nd.WritesInFlight() == 0
	})
	// The old text connection went too: the first batch finds it closed
	// (its keys go binary) and a new one is dialed for the next.
	waitFor(t, "the text path again", func() bool {
		for _, r := range col.GetMany(context.Background(), keys, nil) {
			require.NoError(t, r.Err, r.Key)
		}
		return p.TextGets() > text
	})
}

// kill makes the front's server die: no new connection is accepted and
// every open one is closed. It does not wait, so an onGets hook may call
// it.
func (f *textFront) kill() {
	_ = f.ln.Close()
	f.mu.Lock()
	for _, c := range f.conns {
		_ = c.Close()
	}
	f.mu.Unlock()
}

// 100 keys over two memcached servers read by text multi-gets, one server
// dying (every connection closed, new ones refused) while its multi-get is
// in flight, then staying dead: only that server's keys fail, naming it;
// the live server's keys are read as hits and misses in the same batch, by
// a multi-get each time.
func TestGetManyMemcachedTextDeadServersKeysFailAlone(t *testing.T) {
	live := newTextFront(t, memcachedtest.Start(t))
	dying := newTextFront(t, memcachedtest.Start(t))
	c := textClient(t, live.addr()+","+dying.addr(), nil)
	col := c.DefaultCollection()
	ctx := context.Background()
	keys := make([]string, 100)
	onLive := map[string]bool{}
	nLive := 0
	for i := range keys {
		keys[i] = fmt.Sprintf("txdead-%03d", i)
		if onLive[keys[i]] = c.Route(keys[i]).Active == live.addr(); onLive[keys[i]] {
			nLive++
		}
		if i%2 == 0 {
			_, err := col.Upsert(ctx, keys[i], []byte("v-"+keys[i]), nil)
			require.NoError(t, err)
		}
	}
	require.True(t, nLive > 10 && nLive < 90, "%d of 100 keys on the live server", nLive)
	col.GetMany(ctx, keys, nil)
	waitFor(t, "a text connection to each server", func() bool { return textIdle(c) == 2 })
	check := func(name string, deadFails bool) {
		t.Helper()
		before := live.multigets.Load()
		res := col.GetMany(ctx, keys, &GetManyOptions{Timeout: 3 * time.Second})
		for i, r := range res {
			switch {
			case !onLive[r.Key] && deadFails:
				require.Error(t, r.Err, "%s: %s", name, r.Key)
				require.NotErrorIs(t, r.Err, ErrDocumentNotFound, "%s: %s", name, r.Key)
				var kv *KeyValueError
				require.ErrorAs(t, r.Err, &kv)
				assert.Equal(t, dying.addr(), kv.Node, "%s: %s", name, r.Key)
			case i%2 == 0:
				require.NoError(t, r.Err, "%s: %s", name, r.Key)
				assert.Equal(t, "v-"+r.Key, string(r.Value), name)
			default:
				require.ErrorIs(t, r.Err, ErrDocumentNotFound, "%s: %s", name, r.Key)
			}
		}
		assert.Equal(t, before+1, live.multigets.Load(), "%s: the live server's keys in one multi-get", name)
	}
	check("both up", false)
	require.Equal(t, int32(1), dying.multigets.Load())

	dying.setOnGets(func([]string) textAction {
		dying.kill()
		return textAction{close: true}
	})
	check("dies in flight", true)
	require.Equal(t, int32(2), dying.multigets.Load(), "the dying server got its multi-get")
	check("dead", true)
}
