package chaos

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kvwire/kvwire/client"
	"github.com/kvwire/kvwire/internal/faultnode"
	"github.com/kvwire/kvwire/mockcluster"
)

// The http configuration (-chaos.configs http) runs the mock's workload,
// faults and checks with a client that takes its configs from the cluster
// manager (bootstrap_on=http): the first one fetched from a REST seed, the
// rest streamed (GET /pools/default/bs/<bucket>) from the REST ports the
// configs name. Each node's REST port is behind a fault proxy
// (faultnode.Proxy, which relays a connection whose first byte is no
// binary magic byte for byte), and the configs name the proxy's port
// (mockcluster.Node.AdvertiseMgmtPort), so that the seeds, the first fetch
// and every stream go through the proxies; a node the rebalance fault adds
// gets its proxy before the rebalance moves vbuckets to it (the config
// published by AddNode itself names its own port for a moment). The KV
// connections go straight to the nodes, as in every mock configuration.
//
// Two fault kinds act on the proxies besides the mock's: stream-end (every
// connection of one proxy, or of all, reset: the open config stream ends
// mid-way, a fetch in progress fails) and blackhole (one proxy, or all,
// passes nothing on either way for a while: an open stream stalls, a new
// fetch or stream gets no answer; its connections are then reset before it
// relays again, since a stream that lost bytes cannot go on). The mock's
// restart fault stops a node's REST port too (the proxy's dial is refused,
// its streams end), and its rebalance adds and removes nodes, so that the
// streams must follow the configs' node lists. What the configs change
// (vbucket moves, nodes) reaches the client only by the stream and by
// NOT_MY_VBUCKET bodies. The model's checks are the mock's; a stream the
// client fails to reopen only makes operations fail, which the model
// allows, so once the faults end catchUp requires the bucket's latest
// config within catchUpLimit (the stream is then the only way to it).

// restProxies are the fault proxies in front of the nodes' REST ports.
type restProxies struct {
	mu      sync.Mutex
	proxies map[int]*faultnode.Proxy // by node id

	// caughtUp is how long after the faults ended the client held the
	// bucket's latest config (catchUp).
	caughtUp time.Duration

	resets, holes atomic.Int64 // connections reset by stream-end; black holes
}

// add puts a proxy in front of n's REST port and has the configs name it.
func (rp *restProxies) add(n *mockcluster.Node) error {
	p, err := faultnode.NewProxy(n.MgmtAddr())
	if err != nil {
		return err
	}
	port, err := strconv.Atoi(faultnode.Port(p.Addr()))
	if err != nil {
		p.Close()
		return err
	}
	rp.mu.Lock()
	if rp.proxies == nil {
		rp.proxies = map[int]*faultnode.Proxy{}
	}
	rp.proxies[n.ID()] = p
	rp.mu.Unlock()
	n.AdvertiseMgmtPort(port)
	return nil
}

// seeds returns the connection string's hosts: every proxy, "=http".
func (rp *restProxies) seeds() string {
	rp.mu.Lock()
	defer rp.mu.Unlock()
	ids := make([]int, 0, len(rp.proxies))
	for id := range rp.proxies {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	var hs []string
	for _, id := range ids {
		hs = append(hs, rp.proxies[id].Addr()+"=http")
	}
	return strings.Join(hs, ",")
}

// list returns the proxies of the nodes in ids (all when ids is nil), by
// node id.
func (rp *restProxies) list() []*faultnode.Proxy {
	rp.mu.Lock()
	defer rp.mu.Unlock()
	ids := make([]int, 0, len(rp.proxies))
	for id := range rp.proxies {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	out := make([]*faultnode.Proxy, len(ids))
	for i, id := range ids {
		out[i] = rp.proxies[id]
	}
	return out
}

// accepted returns how many connections the proxies accepted.
func (rp *restProxies) accepted() int {
	n := 0
	for _, p := range rp.list() {
		n += p.Accepted()
	}
	return n
}

// close closes every proxy.
func (rp *restProxies) close() {
	for _, p := range rp.list() {
		p.Close()
	}
}

// episode runs a stream-end or blackhole fault and reports whether it
// acted: on a proxy (or all) with a connection open, for stream-end; on
// any, for blackhole (a stream stalls, or the fetch or stream the client
// opens meanwhile gets nothing).
func (rp *restProxies) episode(s *scheduler, e *episode) bool {
	ps := rp.list()
	if len(ps) == 0 {
		return false
	}
	if !e.all {
		ps = ps[e.pick%len(ps):][:1]
	}
	switch e.kind {
	case fkStreamEnd:
		n := 0
		for _, p := range ps {
			n += len(p.Conns())
			p.Reset()
		}
		rp.resets.Add(int64(n))
		return n > 0
	case fkBlackhole:
		for _, p := range ps {
			p.Blackhole(true)
		}
		rp.holes.Add(1)
		time.Sleep(e.dur)
		for _, p := range ps {
			// Reset first: no connection relays again after losing
			// bytes; one accepted meanwhile loses its request (no
			// answer, as in the black hole) and is reset as well.
			p.Reset()
			p.Blackhole(false)
			p.Reset()
		}
		return true
	}
	return false
}

// catchUpLimit bounds how long after the faults end the client may take to
// hold the bucket's latest config: a stream's reopen waits at most
// maxRoundWait (10 s, internal/httpconfig) and a stream that stalls is
// redialed after its RedialPeriod (10 s), so three times that is far
// beyond what a client that recovers needs, on any machine.
const catchUpLimit = 30 * time.Second

// catchUp checks, once the workers stopped and the faults ended, that the
// client comes to hold the bucket's latest config: the workers no longer
// make NOT_MY_VBUCKET answers that carry one, so the stream is the only
// way it can (a stream the faults left for good, or never reopened, fails
// the run; the model cannot see it, a client on an old map only fails
// more operations).
// limit is catchUpLimit but in TestChaosDetectsStaleConfig.
func (rp *restProxies) catchUp(h *harness, cl *client.Client, b *mockcluster.Bucket, limit time.Duration) {
	start := time.Now()
	for {
		want := uint64(b.Rev())
		got := cl.ConfigVersion()
		if got.Rev >= want {
			rp.caughtUp = time.Since(start)
			return
		}
		if time.Since(start) > limit {
			h.problem("stale-config", "the client still holds config rev %d (epoch %d) %v after the faults ended; the bucket's is %d",
				got.Rev, got.Epoch, limit, want)
			rp.caughtUp = time.Since(start)
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// summary describes what the proxies did, and the config requests the
// nodes served (the proxies' connections should carry them all, but for a
// node's first moments in the cluster, before its proxy is named).
func (rp *restProxies) summary(mc *mockcluster.Cluster) string {
	return fmt.Sprintf(" rest-proxies=%d rest-proxy-connections=%d stream-end-resets=%d rest-blackholes=%d rest-requests-at-nodes=(fetch %d, stream %d) latest-config-after=%v",
		len(rp.list()), rp.accepted(), rp.resets.Load(), rp.holes.Load(),
		mc.RESTRequestCount("/pools/default/b/"+mockcluster.DefaultBucket), mc.RESTRequestCount("/pools/default/bs/"+mockcluster.DefaultBucket), rp.caughtUp.Round(time.Millisecond))
}

// TestChaosDetectsStaleConfig: catchUp fails a client whose config
// stream cannot bring the latest config (every REST proxy a black hole
// while a new config is published), and passes it once the proxies relay
// again.
func TestChaosDetectsStaleConfig(t *testing.T) {
	mc, err := mockcluster.New(mockcluster.Options{Nodes: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer mc.Close()
	b := mc.Bucket(mockcluster.DefaultBucket)
	rp := &restProxies{}
	defer rp.close()
	for _, n := range mc.Nodes() {
		if err := rp.add(n); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl, err := client.Connect(ctx, "couchbase://"+rp.seeds()+"?bootstrap_on=http", &client.Options{
		Username: mockcluster.DefaultUser, Password: mockcluster.DefaultPassword, Bucket: mockcluster.DefaultBucket})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	newHarness := func() *harness { return &harness{problems: map[string]int{}, batchProblems: map[string]int{}} }

	for _, p := range rp.list() {
		p.Blackhole(true)
		p.Reset() // the open stream ends; its reopening gets nothing
	}
	if _, err := b.AddScope("after"); err != nil { // a new config
		t.Fatal(err)
	}
	h := newHarness()
	rp.catchUp(h, cl, b, 200*time.Millisecond)
	if h.problems["stale-config"] != 1 {
		t.Fatalf("a client that cannot stream the latest config passed: problems %v", h.problems)
	}

	for _, p := range rp.list() {
		p.Blackhole(false)
		p.Reset() // a request swallowed meanwhile is never answered
	}
	h = newHarness()
	rp.catchUp(h, cl, b, catchUpLimit)
	if len(h.problems) != 0 {
		t.Fatalf("after the black holes: %v", h.details)
	}
}
