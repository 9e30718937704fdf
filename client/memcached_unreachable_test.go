package client

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvwire/kvwire/internal/faultnode"
)

// A memcached server that refuses connections fails its keys at once with
// ErrNoNodeAvailable naming it, without a retry, while the other servers
// serve theirs. gomemcache does the same; waiting out the timeout for a
// server known to be down only delays the caller's fallback to its source
// of truth.
func TestMemcachedDeadServerFailsItsKeysAtOnce(t *testing.T) {
	live := memcachedAddr(t, false)
	c, dead := connectWithDeadServer(t, live)
	ctx := context.Background()
	col := c.DefaultCollection()

	key := keyOn(t, c, dead)
	start := time.Now()
	_, err := col.Get(ctx, key, nil)
	took := time.Since(start)
	t.Logf("Get of a key on a server that refuses connections: %v after %v", err, took)
	require.ErrorIs(t, err, ErrNoNodeAvailable)
	assert.NotErrorIs(t, err, ErrTimeout)
	assert.ErrorIs(t, err, syscall.ECONNREFUSED, "the cause is the dial error")
	var kv *KeyValueError
	require.ErrorAs(t, err, &kv)
	assert.Equal(t, dead, kv.Node)
	assert.Zero(t, kv.RetryAttempts, "not retried")
	assert.Contains(t, err.Error(), dead)

	_, err = col.Upsert(ctx, key, []byte("v"), nil)
	require.ErrorIs(t, err, ErrNoNodeAvailable)
	assert.NotErrorIs(t, err, ErrAmbiguous, "never sent")

	other := keyOn(t, c, live)
	_, err = col.Upsert(ctx, other, []byte("v"), nil)
	require.NoError(t, err)
	g, err := col.Get(ctx, other, nil)
	require.NoError(t, err)
	assert.Equal(t, "v", string(g.Value))
}

// A server that goes away while the client runs (its connections reset,
// new ones reset as soon as accepted): its keys fail at once from its
// first failed redial, it stays in the ring (removal is opt-in),
// and once it listens again the back-off redial brings its keys back.
func TestMemcachedServerThatGoesAwayFailsFastAndIsRedialed(t *testing.T) {
	p := startProxy(t, memcachedAddr(t, false))
	logs := newLogWatch()
	ctx := context.Background()
	c, err := Connect(ctx, "memcached://"+memcachedAddr(t, false)+","+p.addr, testOptions(&Options{Logger: logs.logger()}))
	require.NoError(t, err)
	defer c.Close()
	col := c.DefaultCollection()
	key := keyOn(t, c, p.addr)
	_, err = col.Upsert(ctx, key, []byte("kept by the server"), nil)
	require.NoError(t, err)

	mark := logs.mark()
	p.stop()
	// Five refused redials: as many as the default server_failure_limit,
	// which removes nothing unless remove_failed_servers is set.
	for i := 0; i < DefaultServerFailureLimit; i++ {
		mark = logs.wait(t, mark, "kvwire: connecting to node failed", p.addr)
	}
	start := time.Now()
	_, err = col.Get(ctx, key, nil)
	t.Logf("Get of a key on a server that went away: %v after %v", err, time.Since(start))
	require.ErrorIs(t, err, ErrNoNodeAvailable)
	assert.NotErrorIs(t, err, ErrTimeout)
	assert.Equal(t, p.addr, c.Route(key).Active, "still in the ring")

	p.restart(t)
	logs.wait(t, mark, "kvwire: memcached server reachable again", p.addr)
	g, err := col.Get(ctx, key, nil)
	require.NoError(t, err)
	assert.Equal(t, "kept by the server", string(g.Value))
}

// remove_failed_servers (libmemcached's auto-eject): after
// server_failure_limit refused attempts in a row the server leaves the
// ring and its keys go to the others; its first successful redial puts it
// back, and its keys go to it again.
func TestMemcachedRemoveFailedServers(t *testing.T) {
	live := memcachedAddr(t, false)
	p := startProxy(t, live)
	logs := newLogWatch()
	rec := &recorder{}
	ctx := context.Background()
	c, err := Connect(ctx, "memcached://"+live+","+p.addr+"?remove_failed_servers=true&server_failure_limit=2",
		testOptions(&Options{Logger: logs.logger(), Observer: rec}))
	require.NoError(t, err)
	defer c.Close()
	col := c.DefaultCollection()
	key := keyOn(t, c, p.addr)

	mark := logs.mark()
	p.stop()
	logs.wait(t, mark, "kvwire: memcached server removed from the ketama ring", p.addr)
	assert.Equal(t, live, c.Route(key).Active, "its keys go to the server left")
	_, err = col.Upsert(ctx, key, []byte("on the other server"), nil)
	require.NoError(t, err)
	g, err := col.Get(ctx, key, nil)
	require.NoError(t, err)
	assert.Equal(t, "on the other server", string(g.Value))
	assert.ElementsMatch(t, []string{live, p.addr}, c.Nodes(), "still redialed")

	mark = logs.mark()
	p.restart(t)
	logs.wait(t, mark, "kvwire: memcached server back in the ketama ring", p.addr)
	assert.Equal(t, p.addr, c.Route(key).Active)
	_, err = col.Get(ctx, key, nil)
	require.NoError(t, err)
	atts := rec.attempts()
	assert.Equal(t, p.addr, atts[len(atts)-1].Node, "the Get went to the server back in the ring")
}

// Every server out of the ring leaves them all in it: their keys fail at
// once instead of having no server at all.
func TestMemcachedRemoveFailedServersKeepsTheLastOnes(t *testing.T) {
	p := startProxy(t, memcachedAddr(t, false))
	logs := newLogWatch()
	ctx := context.Background()
	c, err := Connect(ctx, "memcached://"+p.addr+"?remove_failed_servers=true&server_failure_limit=1",
		testOptions(&Options{Logger: logs.logger()}))
	require.NoError(t, err)
	defer c.Close()
	mark := logs.mark()
	p.stop()
	logs.wait(t, mark, "kvwire: memcached server removed from the ketama ring", p.addr)
	assert.Equal(t, p.addr, c.Route("k").Active)
	_, err = c.DefaultCollection().Get(ctx, "k", nil)
	require.ErrorIs(t, err, ErrNoNodeAvailable)
	assert.NotErrorIs(t, err, ErrTimeout)
}

func TestMemcachedFailureOptionsAreChecked(t *testing.T) {
	for _, s := range []string{
		"memcached://h?server_failure_limit=0",
		"memcached://h?server_failure_limit=-1",
		"memcached://h?remove_failed_servers=maybe",
		"couchbase://h/b?remove_failed_servers=true",
		"couchbases://h/b?server_failure_limit=2",
	} {
		_, err := Connect(context.Background(), s, nil)
		assert.ErrorIs(t, err, ErrInvalidArgument, s)
	}
	_, err := Connect(context.Background(), "memcached://h", &Options{Memcached: MemcachedOptions{ServerFailureLimit: -1}})
	assert.ErrorIs(t, err, ErrInvalidArgument)
}

// connectWithDeadServer connects to memcached://live,dead, dead being an
// address nothing listens on, and closes the client when the test ends.
func connectWithDeadServer(t *testing.T, live string) (*Client, string) {
	t.Helper()
	dead := closedAddr(t)
	c, err := Connect(context.Background(), "memcached://"+live+","+dead, testOptions(nil))
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return c, dead
}

// closedAddr returns a loopback address nothing listens on, held until
// the test ends (see closedPort).
func closedAddr(t *testing.T) string {
	t.Helper()
	return closedPort(t)
}

// keyOn returns a key that c routes to addr.
func keyOn(t *testing.T, c *Client, addr string) string {
	t.Helper()
	for i := 0; i < 10000; i++ {
		k := fmt.Sprintf("kvwire-%s-%d-%d", t.Name(), time.Now().UnixNano(), i)
		if c.Route(k).Active == addr {
			return k
		}
	}
	t.Fatalf("no key routes to %s", addr)
	return ""
}

// downProxy is a faultnode proxy in front of a memcached that can play a
// server that goes away (every connection reset, new ones reset as soon as
// accepted) and comes back on the same address.
type downProxy struct {
	*faultnode.Proxy
	addr string
}

func startProxy(t *testing.T, target string) *downProxy {
	t.Helper()
	p, err := faultnode.NewProxy(target)
	require.NoError(t, err)
	t.Cleanup(p.Close)
	return &downProxy{Proxy: p, addr: p.Addr()}
}

func (p *downProxy) stop() {
	p.RefuseNew(true)
	p.Reset()
}

func (p *downProxy) restart(*testing.T) { p.RefuseNew(false) }

// logWatch is a slog handler that keeps every record's message and node
// attribute, so a test can wait for an event the client logs.
type logWatch struct {
	mu      sync.Mutex
	recs    []logRec
	changed chan struct{} // closed and replaced on every record
}

type logRec struct {
	msg, node string
	err       error // the "err" attribute, when it is an error
}

func newLogWatch() *logWatch { return &logWatch{changed: make(chan struct{})} }

func (w *logWatch) logger() *slog.Logger { return slog.New(w) }

func (w *logWatch) Enabled(context.Context, slog.Level) bool { return true }
func (w *logWatch) WithAttrs([]slog.Attr) slog.Handler       { return w }
func (w *logWatch) WithGroup(string) slog.Handler            { return w }

func (w *logWatch) Handle(_ context.Context, r slog.Record) error {
	rec := logRec{msg: r.Message}
	r.Attrs(func(a slog.Attr) bool {
		switch a.Key {
		case "node":
			rec.node = a.Value.String()
		case "err":
			rec.err, _ = a.Value.Any().(error)
		}
		return true
	})
	w.mu.Lock()
	w.recs = append(w.recs, rec)
	close(w.changed)
	w.changed = make(chan struct{})
	w.mu.Unlock()
	return nil
}

// mark is the position of the next record.
func (w *logWatch) mark() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.recs)
}

// wait returns the position after the first record at or after from with
// msg about node. It fails the test when none comes within 20 s: a bound
// for a broken client, far above the few hundred milliseconds these
// events take.
func (w *logWatch) wait(t *testing.T, from int, msg, node string) int {
	t.Helper()
	limit := time.NewTimer(20 * time.Second)
	defer limit.Stop()
	for {
		w.mu.Lock()
		for i := from; i < len(w.recs); i++ {
			if w.recs[i].msg == msg && w.recs[i].node == node {
				w.mu.Unlock()
				return i + 1
			}
		}
		from = len(w.recs)
		ch := w.changed
		w.mu.Unlock()
		select {
		case <-ch:
		case <-limit.C:
			t.Fatalf("no log %q for node %s", msg, node)
		}
	}
}

// errAt is the "err" attribute of the record before position i (what
// wait returned).
func (w *logWatch) errAt(i int) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.recs[i-1].err
}

// count returns how many records so far have msg about node, and a channel
// closed at the next record.
func (w *logWatch) count(msg, node string) (int, <-chan struct{}) {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for _, r := range w.recs {
		if r.msg == msg && r.node == node {
			n++
		}
	}
	return n, w.changed
}
