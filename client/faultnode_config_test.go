package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net"
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
	if o == nil {
		o = &Options{}
	}
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

// closedPort returns a loopback address nothing listens on.
func closedPort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	return addr
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
	c := connectVia(t, ps[0].Addr(), &Options{Clock: fakeClock{fc}})
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
	c := connectVia(t, ps[0].Addr(), &Options{Clock: fakeClock{fc}})
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

	done := getAsync(ctx, col, "k")
	select {
	case <-fetched:
	case <-ctx.Done():
		t.Fatal("the NMV without a body asked for no config fetch")
	}
	requireInBackoff(t, ctx, fc, done, "before the config arrived")
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
	case err := <-done:
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

// overshoot is how far past its deadline an operation may end: a fixed
// allowance for scheduling and for the size check and version scan an
// operation does on a body it meets (under 1 ms without the race detector,
// up to 150 ms with it on a loaded 2-core machine), below what parsing a
// multi-megabyte config on the operation's goroutine costs (0.7 to 2.5 s
// with the race detector).
const overshoot = 400 * time.Millisecond

// getsByDeadline runs n Gets of key concurrently, each with timeout, and
// returns their errors and the latest any of them ended past its deadline.
func getsByDeadline(col *Collection, key string, n int, timeout time.Duration) ([]error, time.Duration) {
	var mu sync.Mutex
	var errs []error
	var late time.Duration
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), timeout)
			defer cancel()
			deadline, _ := ctx.Deadline()
			_, err := col.Get(ctx, key, nil)
			d := time.Since(deadline)
			mu.Lock()
			errs = append(errs, err)
			late = max(late, d)
			mu.Unlock()
		}()
	}
	wg.Wait()
	return errs, late
}

// A server whose NOT_MY_VBUCKET bodies carry a valid-looking config padded
// to 9 MiB (over vbmap.MaxConfigSize): operations meeting it end by their
// deadline, the config is never parsed nor installed, and the client logs
// one error for all the answers; once the server answers, Gets succeed.
func TestFaultnodeConfigOverSizeLimitEndsByDeadline(t *testing.T) {
	mc := newMock(t, mockcluster.Options{Nodes: 1, DisabledFeatures: noPushes})
	ps, ports := proxyEach(t, mc)
	logs := &logCapture{}
	c := connectVia(t, ps[0].Addr(), &Options{Logger: slog.New(logs)})
	col := c.DefaultCollection()
	_, err := col.Upsert(context.Background(), "k", []byte("v"), nil)
	require.NoError(t, err)
	b := mc.Bucket(mockcluster.DefaultBucket)
	held := c.ConfigVersion()
	cfg := faultnode.RewriteConfigPorts(paddedConfig(t, mc, b.Rev()+1, 0), ports)
	huge := append(cfg, bytes.Repeat([]byte(" "), 9<<20-len(cfg))...)
	require.Greater(t, len(huge), vbmap.MaxConfigSize)
	var answers atomic.Int64
	ps[0].OnResponse(func(req, resp *memdx.Packet) faultnode.Action {
		if resp.OpCode != memdx.OpGet {
			return faultnode.Action{}
		}
		answers.Add(1)
		return faultnode.Action{Send: []memdx.Packet{faultnode.NotMyVbucket(req, huge)}}
	})
	parses := c.configParses.Load()

	errs, late := getsByDeadline(col, "k", 4, 300*time.Millisecond)
	t.Logf("%d NOT_MY_VBUCKET answers with 9 MiB bodies; latest end %v past the deadline", answers.Load(), late)
	for _, err := range errs {
		assert.Error(t, err, "a Get succeeded against a node answering only NOT_MY_VBUCKET")
	}
	assert.Less(t, late, overshoot, "a Get ended that far past its deadline")
	// Every Get's first request is answered, if after its deadline.
	require.Eventually(t, func() bool { return answers.Load() >= 4 },
		10*time.Second, time.Millisecond, "answers to the Gets' first requests")
	assert.Zero(t, c.configParses.Load()-parses, "a config over the limit was parsed")
	assert.Equal(t, held, c.ConfigVersion(), "the config over the limit was installed")
	require.Eventually(t, func() bool { return len(logs.find("over the size limit")) > 0 },
		10*time.Second, time.Millisecond, "no error logged for the config over the limit")
	assert.Len(t, logs.find("over the size limit"), 1, "one error for every answer")

	ps[0].OnResponse(nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = col.Get(ctx, "k", nil)
	require.NoError(t, err)
}

// A server whose NOT_MY_VBUCKET bodies carry a newer 3.5 MB config (it
// answers every GET so): eight Gets with a 300 ms timeout each end by their
// deadline, and the config is parsed once for all the answers and
// installed; once the server answers, Gets succeed.
func TestFaultnodeLargeNewerConfigParsedOnceWithinDeadline(t *testing.T) {
	mc := newMock(t, mockcluster.Options{Nodes: 1, DisabledFeatures: noPushes})
	ps, ports := proxyEach(t, mc)
	c := connectVia(t, ps[0].Addr(), nil)
	col := c.DefaultCollection()
	_, err := col.Upsert(context.Background(), "k", []byte("v"), nil)
	require.NoError(t, err)
	b := mc.Bucket(mockcluster.DefaultBucket)
	big := faultnode.RewriteConfigPorts(paddedConfig(t, mc, b.Rev()+1, 3500<<10), ports)
	require.Less(t, len(big), vbmap.MaxConfigSize)
	var answers atomic.Int64
	ps[0].OnResponse(func(req, resp *memdx.Packet) faultnode.Action {
		if resp.OpCode != memdx.OpGet {
			return faultnode.Action{}
		}
		answers.Add(1)
		return faultnode.Action{Send: []memdx.Packet{faultnode.NotMyVbucket(req, big)}}
	})
	parses := c.configParses.Load()

	errs, late := getsByDeadline(col, "k", 8, 300*time.Millisecond)
	var failed int
	for _, err := range errs {
		if err != nil {
			failed++
		}
	}
	t.Logf("%d NOT_MY_VBUCKET answers with %d-byte bodies; %d of 8 Gets failed; latest end %v past the deadline",
		answers.Load(), len(big), failed, late)
	assert.Less(t, late, overshoot, "a Get ended that far past its deadline")
	// Every Get's first request is answered, if after its deadline.
	require.Eventually(t, func() bool { return answers.Load() >= 8 },
		10*time.Second, time.Millisecond, "answers to the Gets' first requests")
	require.Eventually(t, func() bool { return c.ConfigVersion().Rev == uint64(b.Rev()+1) },
		10*time.Second, time.Millisecond, "the config was not installed")
	assert.Equal(t, int64(1), c.configParses.Load()-parses, "parses of the config the NMV bodies carried")
	ps[0].OnResponse(nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
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
		&Options{Username: faultnode.DefaultUser, Password: faultnode.DefaultPassword, ConnectTimeout: connectTimeout})
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
