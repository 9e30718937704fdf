package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvwire/kvwire/internal/faultnode"
	"github.com/kvwire/kvwire/memdx"
	"github.com/kvwire/kvwire/mockcluster"
	"github.com/kvwire/kvwire/retry"
	"github.com/kvwire/kvwire/vbmap"
)

// These tests impersonate servers other than the mock: a faultnode.Proxy in
// front of each mock node rewrites what the node answers (NOT_MY_VBUCKET
// without a body, huge config bodies, config fetches held back), and a
// faultnode.Server plays a seed whose config is scripted.

// proxyEach puts a fault proxy in front of every node of mc; each proxy
// rewrites every node's port to its proxy's in the configs it relays, so a
// client that bootstraps through ps[0] only ever talks to the proxies.
// ports maps each node's port to its proxy's.
func proxyEach(t *testing.T, mc *mockcluster.Cluster) (ps []*faultnode.Proxy, ports map[string]string) {
	t.Helper()
	ports = map[string]string{}
	for _, n := range mc.Nodes() {
		p, err := faultnode.NewProxy(n.Addr())
		require.NoError(t, err)
		t.Cleanup(p.Close)
		ps = append(ps, p)
		ports[faultnode.Port(n.Addr())] = faultnode.Port(p.Addr())
	}
	for _, p := range ps {
		p.RewritePorts(ports)
	}
	return ps, ports
}

// connectVia opens a client on the default bucket with seed addr.
func connectVia(t *testing.T, addr string, o *Options) *Client {
	t.Helper()
	o = testOptions(o)
	o.Username, o.Password = mockcluster.DefaultUser, mockcluster.DefaultPassword
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := Connect(ctx, "couchbase://"+addr+"/"+mockcluster.DefaultBucket, o)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// withRev returns config with its rev set to rev.
func withRev(t *testing.T, config []byte, rev int64) []byte {
	t.Helper()
	var m map[string]any
	require.NoError(t, json.Unmarshal(config, &m))
	m["rev"] = rev
	raw, err := json.Marshal(m)
	require.NoError(t, err)
	return raw
}

// closedPort returns a loopback address nothing listens on, held (bound,
// never listening) until the test ends so that no listener opened later,
// such as a faultnode seed, is given its port.
func closedPort(t *testing.T) string {
	t.Helper()
	p, err := faultnode.NewClosedPort()
	require.NoError(t, err)
	t.Cleanup(p.Close)
	return p.Addr()
}

// eventLog records, in order, what the proxies' hooks saw.
type eventLog struct {
	mu sync.Mutex
	ev []string
}

func (l *eventLog) add(e string) {
	l.mu.Lock()
	l.ev = append(l.ev, e)
	l.mu.Unlock()
}

func (l *eventLog) all() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.ev...)
}

// A server that never sends a config in NOT_MY_VBUCKET (every NMV body
// stripped by the proxies) and never pushes one: a Get whose vbucket moved
// succeeds, on a client clock that never moves (so no poll and no back-off
// ever ends), after exactly one GET_CLUSTER_CONFIG, sent to the node that
// answered NOT_MY_VBUCKET after that answer.
func TestFaultnodeNMVWithoutBodyFetchesConfigOnce(t *testing.T) {
	mc := newMock(t, mockcluster.Options{Nodes: 2, DisabledFeatures: noPushes})
	ps, _ := proxyEach(t, mc)
	fc := retry.NewFakeClock(time.Now())
	c := connectVia(t, ps[0].Addr(), fakeClockOptions(fc))
	col := c.DefaultCollection()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := col.Upsert(ctx, "k", []byte("v"), nil)
	require.NoError(t, err)

	log := &eventLog{}
	var nmvs atomic.Int64
	for i, p := range ps {
		p.OnResponse(func(req, resp *memdx.Packet) faultnode.Action {
			if resp.Status != memdx.StatusNotMyVbucket {
				return faultnode.Action{}
			}
			nmvs.Add(1)
			log.add("nmv from " + mc.Node(i).Addr())
			return faultnode.Action{Send: []memdx.Packet{faultnode.NotMyVbucket(req, nil)}}
		})
		p.OnRequest(func(req *memdx.Packet) faultnode.Action {
			if req.OpCode == memdx.OpGetClusterConfig {
				log.add("fetch from " + mc.Node(i).Addr())
			}
			return faultnode.Action{}
		})
	}
	from := moveVbucket(t, mc, "k", 1-owner(mc, "k"))
	var fetchesBefore int
	for _, p := range ps {
		fetchesBefore += p.Requests(memdx.OpGetClusterConfig)
	}
	fetch := ps[from].NextRequest(memdx.OpGetClusterConfig)

	_, err = col.Get(ctx, "k", nil)
	require.NoError(t, err)
	select {
	case <-fetch:
	default:
		t.Fatal("no GET_CLUSTER_CONFIG reached the node that answered NOT_MY_VBUCKET")
	}
	var fetches int
	for _, p := range ps {
		fetches += p.Requests(memdx.OpGetClusterConfig)
	}
	assert.Equal(t, 1, fetches-fetchesBefore, "GET_CLUSTER_CONFIG requests caused by the Get")
	ev := log.all()
	require.GreaterOrEqual(t, len(ev), 2, "events: %v", ev)
	assert.Equal(t, []string{"nmv from " + mc.Node(from).Addr(), "fetch from " + mc.Node(from).Addr()}, ev[:2])
	assert.Positive(t, nmvs.Load())
	assert.Equal(t, uint64(mc.Bucket(mockcluster.DefaultBucket).Rev()), c.ConfigVersion().Rev)
}

// An operation sleeping in its NOT_MY_VBUCKET back-off (the proxy answers
// NMV without a body and holds back the GET_CLUSTER_CONFIG the NMV asked
// for) is woken as soon as the proxy lets the newer config through: on a
// client clock that never moves, the retry reaches the vbucket's new owner
// right after the held answer is released, and the Get succeeds.
func TestFaultnodeHeldConfigReleasedDuringBackoffWakesOperation(t *testing.T) {
	mc := newMock(t, mockcluster.Options{Nodes: 2, DisabledFeatures: noPushes})
	ps, ports := proxyEach(t, mc)
	fc := retry.NewFakeClock(time.Now())
	// The NMV's back-off (an hour) reaches past the Get's deadline: it
	// sleeps until that deadline, a timer on fc no other is due at.
	o := fakeClockOptions(fc)
	o.NMVRetryInterval = time.Hour
	c := connectVia(t, ps[0].Addr(), o)
	col := c.DefaultCollection()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := col.Upsert(ctx, "k", []byte("v"), nil)
	require.NoError(t, err)
	a := owner(mc, "k")
	to := 1 - a
	held := c.ConfigVersion()

	log := &eventLog{}
	var mu sync.Mutex
	var fetchReq *memdx.Packet
	fetched := make(chan struct{})
	// The owner answers every GET with NOT_MY_VBUCKET and no body (the
	// vbucket is about to move) and never answers a GET_CLUSTER_CONFIG.
	ps[a].OnResponse(func(req, resp *memdx.Packet) faultnode.Action {
		if resp.OpCode != memdx.OpGet {
			return faultnode.Action{}
		}
		log.add("nmv")
		return faultnode.Action{Send: []memdx.Packet{faultnode.NotMyVbucket(req, nil)}}
	})
	ps[a].OnRequest(func(req *memdx.Packet) faultnode.Action {
		if req.OpCode != memdx.OpGetClusterConfig {
			return faultnode.Action{}
		}
		mu.Lock()
		defer mu.Unlock()
		if fetchReq == nil {
			cp := *req
			fetchReq = &cp
			close(fetched)
		}
		log.add("fetch held")
		return faultnode.Action{Drop: true}
	})
	ps[to].OnRequest(func(req *memdx.Packet) faultnode.Action {
		if req.OpCode == memdx.OpGet {
			log.add("get at new owner")
		}
		return faultnode.Action{}
	})

	g := getAsync(ctx, col, "k")
	select {
	case <-fetched:
	case <-ctx.Done():
		t.Fatal("the NMV without a body asked for no config fetch")
	}
	dl, _ := ctx.Deadline()
	requireInBackoff(t, ctx, fc, g, dl.Equal, "before the config arrived")
	assert.Zero(t, ps[to].Requests(memdx.OpGet), "a GET reached the new owner before the config did")

	moveVbucket(t, mc, "k", to)
	mu.Lock()
	ans := faultnode.Reply(fetchReq, memdx.StatusSuccess,
		faultnode.RewriteConfigPorts(mc.Bucket(mockcluster.DefaultBucket).ConfigJSON(a), ports))
	mu.Unlock()
	ans.Datatype = memdx.DatatypeJSON
	log.add("config released")
	n, err := ps[a].InjectResponse(ans)
	require.NoError(t, err)
	require.Positive(t, n)
	select {
	case err := <-g.done:
		require.NoError(t, err)
	case <-ctx.Done():
		t.Fatal("the Get still sleeps in its back-off after the held config was let through")
	}
	ev := log.all()
	i := indexOf(ev, "config released")
	require.GreaterOrEqual(t, i, 0, "events: %v", ev)
	assert.Equal(t, -1, indexOf(ev[:i], "get at new owner"), "events: %v", ev)
	assert.NotEqual(t, -1, indexOf(ev[i:], "get at new owner"), "events: %v", ev)
	assert.Equal(t, 1, ps[to].Requests(memdx.OpGet), "GETs at the new owner")
	assert.Greater(t, c.ConfigVersion().Rev, held.Rev, "a newer config was installed")
}

func indexOf(s []string, v string) int {
	for i, e := range s {
		if e == v {
			return i
		}
	}
	return -1
}

// deadlineCtx is a context whose deadline passes when the test says so
// (pass), not on the wall clock: Deadline reports at, and Done closes, with
// Err context.DeadlineExceeded, when pass is called. An operation given it
// plans its retries against at and ends when pass is called, however long
// the machine takes to get there.
type deadlineCtx struct {
	context.Context
	at   time.Time
	done chan struct{}
	once sync.Once
}

func newDeadlineCtx(at time.Time) *deadlineCtx {
	return &deadlineCtx{Context: context.Background(), at: at, done: make(chan struct{})}
}

func (c *deadlineCtx) Deadline() (time.Time, bool) { return c.at, true }
func (c *deadlineCtx) Done() <-chan struct{}       { return c.done }
func (c *deadlineCtx) Err() error {
	select {
	case <-c.done:
		return context.DeadlineExceeded
	default:
		return nil
	}
}
func (c *deadlineCtx) pass() { c.once.Do(func() { close(c.done) }) }

// nmvWatch is an Observer counting the attempts answered NOT_MY_VBUCKET.
// AttemptEnd runs once the client has handled the response, its body
// included (recognised on the reader, or copied for the operation to
// offer).
type nmvWatch struct {
	n    atomic.Int64
	more chan struct{} // capacity 1: n grew
}

func newNMVWatch() *nmvWatch { return &nmvWatch{more: make(chan struct{}, 1)} }

func (w *nmvWatch) AttemptStart(AttemptInfo) {}
func (w *nmvWatch) AttemptEnd(info AttemptInfo, _ error) {
	if info.Status != StatusNotMyVbucket {
		return
	}
	w.n.Add(1)
	select {
	case w.more <- struct{}{}:
	default:
	}
}

// wait returns once n attempts were answered NOT_MY_VBUCKET.
func (w *nmvWatch) wait(t *testing.T, ctx context.Context, n int64) {
	t.Helper()
	for w.n.Load() < n {
		select {
		case <-w.more:
		case <-ctx.Done():
			t.Fatalf("%d of %d attempts were answered NOT_MY_VBUCKET", w.n.Load(), n)
		}
	}
}

// getsUntilDeadline starts n Gets of key with ctx dl and returns where their
// errors arrive.
func getsUntilDeadline(col *Collection, dl *deadlineCtx, key string, n int) <-chan error {
	done := make(chan error, n)
	for range n {
		go func() {
			_, err := col.Get(dl, key, nil)
			done <- err
		}()
	}
	return done
}

// requireTimedOut requires each of n Gets behind done to end with a
// timeout; why says what they must not be waiting for.
func requireTimedOut(t *testing.T, ctx context.Context, done <-chan error, n int, why string) {
	t.Helper()
	for range n {
		select {
		case err := <-done:
			assert.ErrorIs(t, err, ErrUnambiguousTimeout)
		case <-ctx.Done():
			t.Fatalf("a Get did not end when its deadline passed: it waits for %s", why)
		}
	}
}

// A server whose NOT_MY_VBUCKET bodies carry a valid-looking config padded
// to 9 MiB (over vbmap.MaxConfigSize): four Gets each meet one such answer
// (on a client clock that never moves, their back-off never ends, so each
// sends one request), the client logs one error for all the answers and
// never parses nor installs the config, and the Gets end with a timeout when
// their deadline passes; once the server answers, Gets succeed.
func TestFaultnodeConfigOverSizeLimitEndsByDeadline(t *testing.T) {
	t.Parallel()
	mc := newMock(t, mockcluster.Options{Nodes: 1, DisabledFeatures: noPushes})
	ps, ports := proxyEach(t, mc)
	logs := &logCapture{}
	fc := retry.NewFakeClock(time.Now())
	nmvs := newNMVWatch()
	// The Gets' deadline is dl's; KVTimeout is longer so as not to cut it.
	c := connectVia(t, ps[0].Addr(), &Options{Logger: slog.New(logs), Clock: fakeClock{fc}, Observer: nmvs, KVTimeout: time.Hour})
	col := c.DefaultCollection()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err := col.Upsert(ctx, "k", []byte("v"), nil)
	require.NoError(t, err)
	b := mc.Bucket(mockcluster.DefaultBucket)
	held := c.ConfigVersion()
	cfg := faultnode.RewriteConfigPorts(paddedConfig(t, mc, b.Rev()+1, 0), ports)
	huge := append(cfg, bytes.Repeat([]byte(" "), 9<<20-len(cfg))...)
	require.Greater(t, len(huge), vbmap.MaxConfigSize)
	ps[0].OnResponse(func(req, resp *memdx.Packet) faultnode.Action {
		if resp.OpCode != memdx.OpGet {
			return faultnode.Action{}
		}
		return faultnode.Action{Send: []memdx.Packet{faultnode.NotMyVbucket(req, huge)}}
	})
	parses := c.cl.ConfigParses()

	const gets = 4
	dl := newDeadlineCtx(time.Now().Add(30 * time.Minute))
	done := getsUntilDeadline(col, dl, "k", gets)
	nmvs.wait(t, ctx, gets)
	assert.Len(t, logs.find("over the size limit"), 1, "one error for every answer")
	dl.pass()
	requireTimedOut(t, ctx, done, gets, "something the config over the limit started")
	assert.Equal(t, int64(gets), nmvs.n.Load(), "attempts answered NOT_MY_VBUCKET: one per Get")
	assert.Zero(t, c.cl.ConfigParses()-parses, "a config over the limit was parsed")
	assert.Equal(t, held, c.ConfigVersion(), "the config over the limit was installed")
	assert.Len(t, logs.find("over the size limit"), 1, "one error for every answer")

	ps[0].OnResponse(nil)
	_, err = col.Get(ctx, "k", nil)
	require.NoError(t, err)
}

// A server whose NOT_MY_VBUCKET bodies carry a newer 3.5 MB config (it
// answers every GET so): eight Gets each meet one such answer, the config
// is parsed once for all of them, off their goroutines (the parse is held
// until the Gets have ended, and they end with a timeout when their
// deadline passes, on a client clock that never moves), and installed once
// let go; once the server answers, Gets succeed.
func TestFaultnodeLargeNewerConfigParsedOnceWithinDeadline(t *testing.T) {
	mc := newMock(t, mockcluster.Options{Nodes: 1, DisabledFeatures: noPushes})
	ps, ports := proxyEach(t, mc)
	var hold atomic.Bool
	parsing, release := make(chan struct{}, 1), make(chan struct{})
	testHookParse = func() {
		if hold.Load() {
			select {
			case parsing <- struct{}{}:
			default:
			}
			<-release
		}
	}
	t.Cleanup(func() { testHookParse = nil }) // after the client's Close
	fc := retry.NewFakeClock(time.Now())
	nmvs := newNMVWatch()
	c := connectVia(t, ps[0].Addr(), &Options{Clock: fakeClock{fc}, Observer: nmvs, KVTimeout: time.Hour})
	var releaseOnce sync.Once
	let := func() { releaseOnce.Do(func() { close(release) }) }
	t.Cleanup(let) // before the client's Close, which waits for the config loop
	col := c.DefaultCollection()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err := col.Upsert(ctx, "k", []byte("v"), nil)
	require.NoError(t, err)
	b := mc.Bucket(mockcluster.DefaultBucket)
	big := faultnode.RewriteConfigPorts(paddedConfig(t, mc, b.Rev()+1, 3500<<10), ports)
	require.Less(t, len(big), vbmap.MaxConfigSize)
	ps[0].OnResponse(func(req, resp *memdx.Packet) faultnode.Action {
		if resp.OpCode != memdx.OpGet {
			return faultnode.Action{}
		}
		return faultnode.Action{Send: []memdx.Packet{faultnode.NotMyVbucket(req, big)}}
	})
	parses := c.cl.ConfigParses()
	hold.Store(true)

	const gets = 8
	dl := newDeadlineCtx(time.Now().Add(30 * time.Minute))
	done := getsUntilDeadline(col, dl, "k", gets)
	nmvs.wait(t, ctx, gets)
	select {
	case <-parsing:
	case <-ctx.Done():
		t.Fatal("the config the NOT_MY_VBUCKET bodies carried was never parsed")
	}
	dl.pass()
	requireTimedOut(t, ctx, done, gets, "the config's parse")
	assert.Equal(t, int64(gets), nmvs.n.Load(), "attempts answered NOT_MY_VBUCKET: one per Get")
	assert.Equal(t, int64(1), c.cl.ConfigParses()-parses, "parses started for the answers")
	let()
	require.Eventually(t, func() bool { return c.ConfigVersion().Rev == uint64(b.Rev()+1) },
		time.Minute, time.Millisecond, "the config was not installed")
	assert.Equal(t, int64(1), c.cl.ConfigParses()-parses, "parses of the config the NMV bodies carried")
	ps[0].OnResponse(nil)
	_, err = col.Get(ctx, "k", nil)
	require.NoError(t, err)
}

// A seed that is not the mock (a faultnode.Server) bootstraps the client
// with a config naming the mock's node (through a proxy); the node then
// answers a Get with NOT_MY_VBUCKET carrying a newer config that names only
// a closed port, which strands the client. Once the seed serves a still
// newer config naming the node again, the client gets it from the seed and
// serves operations.
func TestFaultnodeSeedServerRecoversStrandedClient(t *testing.T) {
	mc := newMock(t, mockcluster.Options{Nodes: 1, DisabledFeatures: noPushes})
	ps, ports := proxyEach(t, mc)
	b := mc.Bucket(mockcluster.DefaultBucket)
	rev := b.Rev()
	good := faultnode.RewriteConfigPorts(b.ConfigJSON(0), ports)
	dead := closedPort(t)
	bad := withRev(t, faultnode.RewriteConfigPorts(b.ConfigJSON(0),
		map[string]string{faultnode.Port(mc.Node(0).Addr()): faultnode.Port(dead)}), rev+1)

	seed, err := faultnode.NewServer(nil)
	require.NoError(t, err)
	t.Cleanup(seed.Close)
	seed.SetConfig(good)
	c := connectVia(t, seed.Addr(), nil)
	col := c.DefaultCollection()
	ctx := context.Background()
	_, err = col.Upsert(ctx, "k", []byte("v"), nil)
	require.NoError(t, err)
	for _, addr := range c.Nodes() {
		require.Equal(t, ps[0].Addr(), addr, "the client is on the proxied node")
	}

	var sent atomic.Bool
	ps[0].OnResponse(func(req, resp *memdx.Packet) faultnode.Action {
		if resp.OpCode != memdx.OpGet || !sent.CompareAndSwap(false, true) {
			return faultnode.Action{}
		}
		return faultnode.Action{Send: []memdx.Packet{faultnode.NotMyVbucket(req, bad)}}
	})
	short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	_, _ = col.Get(short, "k", nil)
	cancel()
	require.Eventually(t, func() bool { return c.ConfigVersion().Rev == uint64(rev+1) },
		10*time.Second, 5*time.Millisecond, "the config naming only %s was not installed", dead)
	require.Equal(t, []string{dead}, c.Nodes(), "the client is stranded")
	asked := seed.Requests(memdx.OpGetClusterConfig)

	seed.SetConfig(withRev(t, good, rev+2))
	deadline := time.Now().Add(10 * time.Second)
	for {
		short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		_, err = col.Get(short, "k", nil)
		cancel()
		if err == nil {
			break
		}
		require.True(t, time.Now().Before(deadline), "the client never recovered: %v (config rev %s, nodes %v)",
			err, c.ConfigVersion(), c.Nodes())
	}
	assert.Equal(t, uint64(rev+2), c.ConfigVersion().Rev)
	assert.Equal(t, []string{ps[0].Addr()}, c.Nodes())
	assert.Greater(t, seed.Requests(memdx.OpGetClusterConfig), asked, "the seed was asked for its config")
}

// Connect against a seed (a faultnode.Server) whose config names only a
// closed port fails within the connect timeout, with ErrNoNodeAvailable
// and an error naming the node it tried.
func TestFaultnodeConnectFailsWhenSeedConfigNamesOnlyUnreachableNodes(t *testing.T) {
	mc := newMock(t, mockcluster.Options{Nodes: 1})
	dead := closedPort(t)
	cfg := faultnode.RewriteConfigPorts(mc.Bucket(mockcluster.DefaultBucket).ConfigJSON(0),
		map[string]string{faultnode.Port(mc.Node(0).Addr()): faultnode.Port(dead)})
	seed, err := faultnode.NewServer(nil)
	require.NoError(t, err)
	t.Cleanup(seed.Close)
	seed.SetConfig(cfg)

	const connectTimeout = 2 * time.Second
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := Connect(ctx, "couchbase://"+seed.Addr()+"/"+mockcluster.DefaultBucket,
		testOptions(&Options{Username: faultnode.DefaultUser, Password: faultnode.DefaultPassword, ConnectTimeout: connectTimeout}))
	if err == nil {
		_ = c.Close()
		t.Fatal("Connect returned a client that can reach no node")
	}
	t.Log(err)
	assert.ErrorIs(t, err, ErrNoNodeAvailable)
	var ce *ConnectError
	assert.True(t, errors.As(err, &ce), "%T", err)
	assert.Contains(t, err.Error(), dead, "the error names the node tried")
	assert.False(t, strings.Contains(err.Error(), mc.Node(0).Addr()), "the error names the mock's real address")
	assert.NoError(t, ctx.Err(), "Connect used the whole context")
}
