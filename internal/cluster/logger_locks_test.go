package cluster

import (
	"errors"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvwire/kvwire/memdx"
	"github.com/kvwire/kvwire/vbmap"
)

// The Logger's handler is caller code, and it runs on the cluster's own
// goroutines (the config loop, a node's maintainer, a fetcher, a text
// connection's dial): it may call the cluster (the client's operations,
// Diagnostics, Close), whose methods take the cluster's locks (mu, fetchMu,
// a node's text pool). A record logged with one of them held waited there
// forever for a handler that called a method taking it, and every other
// user of that lock with it. These tests log through lockProbe, whose
// handler calls such a method for each record.

// probeBound bounds a lockProbe's wait for its call: a call blocked for
// that long waits for a lock the handler's own goroutine holds, which a
// handler calling it directly would wait for forever. No healthy run nears
// it.
const probeBound = 10 * time.Second

// lockProbe is a Logger whose handler, for each record, calls call (a
// method of the cluster that takes one of its locks) and waits for it to
// return. The call runs on a goroutine of its own, bounded by probeBound,
// so that the test fails rather than hangs.
type lockProbe struct {
	call func()
	mu   sync.Mutex
	// logged are the messages the handler saw; blocked, those whose call
	// did not return within probeBound (after one, no call is made: the
	// lock is held until the handler returns).
	logged, blocked []string
	seen            chan string // each message, when there is room
}

func newLockProbe(call func()) *lockProbe {
	return &lockProbe{call: call, seen: make(chan string, 64)}
}

func (p *lockProbe) logger() *slog.Logger {
	return slog.New(logHook(func(line string) {
		p.mu.Lock()
		p.logged = append(p.logged, line)
		stuck := len(p.blocked) > 0
		p.mu.Unlock()
		if !stuck {
			done := make(chan struct{})
			go func() {
				defer close(done)
				p.call()
			}()
			select {
			case <-done:
			case <-time.After(probeBound):
				p.mu.Lock()
				p.blocked = append(p.blocked, line)
				p.mu.Unlock()
			}
		}
		select {
		case p.seen <- line:
		default:
		}
	}))
}

// await waits for a record whose message holds what.
func (p *lockProbe) await(t *testing.T, what string) {
	t.Helper()
	deadline := time.After(time.Minute)
	for {
		select {
		case line := <-p.seen:
			if strings.Contains(line, what) {
				return
			}
		case <-deadline:
			t.Fatalf("no record %q within a minute; logged: %q", what, p.lines())
		}
	}
}

func (p *lockProbe) lines() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.logged...)
}

// requireFree fails when a record was logged with the lock held.
func (p *lockProbe) requireFree(t *testing.T, what string) {
	t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	require.Empty(t, p.blocked, "records logged with %s held: a handler calling the cluster waits there forever", what)
}

// bucketConfig is a one-node config of bucket "default" whose vbucket is
// on addr, of revision rev and bucket uuid uuid.
func bucketConfig(t *testing.T, addr string, rev int, uuid string) []byte {
	t.Helper()
	host, port, err := net.SplitHostPort(addr)
	require.NoError(t, err)
	return []byte(`{"rev":` + strconv.Itoa(rev) + `,"name":"default","uuid":"` + uuid + `","nodeLocator":"vbucket",
		"nodesExt":[{"hostname":"` + host + `","services":{"kv":` + port + `}}],
		"vBucketServerMap":{"serverList":["` + addr + `"],"vBucketMap":[[0]]}}`)
}

// A config install logs that the config changed, that the bucket was made
// again (its uuid changed), that the config names no reachable node: each
// with mu held (installLocked), before.
func TestLoggerMayCallTheClusterWhileAConfigIsInstalled(t *testing.T) {
	c, n := clusterHolding(t, `"rev":5`)
	c.nodes[n.addr] = n // the config's node: none is started
	p := newLockProbe(func() {
		c.Node(n.addr) // mu
		c.SeedRefreshes()
	})
	c.cfg.Logger = p.logger()
	for _, step := range []struct {
		raw     []byte
		network string // the client's
		what    string
	}{
		{bucketConfig(t, n.addr, 6, "u1"), vbmap.NetworkDefault, "config updated"},
		{bucketConfig(t, n.addr, 7, "u2"), vbmap.NetworkDefault, "made again"},
		{bucketConfig(t, n.addr, 8, "u2"), "external", "names no reachable KV node"}, // none on that network
	} {
		c.network = step.network
		_, _, _, err := c.applyConfig(step.raw, n.host) // as the config loop does
		require.NoError(t, err)
		p.await(t, step.what)
	}
	p.requireFree(t, "the cluster's mu")
}

// A fetcher that gives up on a version a node announced and never served
// logs it (with fetchMu held, before).
func TestLoggerMayCallTheClusterWhenAnAnnouncedConfigIsGivenUp(t *testing.T) {
	c, n := clusterHolding(t, `"rev":5`)
	p := newLockProbe(func() { c.SeedRefreshes() }) // fetchMu
	c.cfg.Logger = p.logger()
	c.onNotification(n, memdx.ClustermapNotification{Bucket: []byte("default"),
		Version: memdx.ClusterConfigVersion{Epoch: 0, Revision: 6}, HasEpoch: true})
	p.await(t, "does not serve")
	p.requireFree(t, "fetchMu")
}

// A memcached:// server taken out of the ketama ring, put back, or found
// reachable again is logged (with mu held, before).
func TestLoggerMayCallTheClusterWhenTheRingChanges(t *testing.T) {
	c, a := clusterHolding(t, `"rev":5`)
	b := newNode(c, "127.0.0.2:11211")
	c.cfg.Memcached, c.cfg.RemoveFailedServers, c.cfg.ServerFailureLimit = true, true, 2
	c.ring = newRing([]string{a.addr, b.addr}, &Topology{servers: []*Node{a, b}, all: []*Node{a, b}})
	p := newLockProbe(func() { c.Node(a.addr) }) // mu
	c.cfg.Logger = p.logger()
	refused := errors.New("connection refused")

	c.onDialResult(a, refused)
	c.onDialResult(a, nil)
	p.await(t, "reachable again")
	c.onDialResult(a, refused)
	c.onDialResult(a, refused)
	p.await(t, "removed from the ketama ring")
	c.onDialResult(a, nil)
	p.await(t, "back in the ketama ring")
	p.requireFree(t, "the cluster's mu")
}

// A text connection whose server does not answer the version check turns
// the text path off, logged (with the node's text pool locked, before): a
// handler running a GetMany on the client takes a text connection.
func TestLoggerMayTakeATextConnectionWhenTheTextCheckFails(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	accepted := make(chan struct{})
	go func() {
		defer close(accepted)
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			_ = nc.Close() // no text answered
		}
	}()
	defer func() { _ = ln.Close(); <-accepted }()

	c, _ := clusterHolding(t, `"rev":5`)
	c.cfg.Memcached, c.cfg.ConnectTimeout = true, time.Minute
	n := newNode(c, ln.Addr().String())
	p := newLockProbe(func() { n.TakeText() }) // the text pool
	c.cfg.Logger = p.logger()
	n.text.mu.Lock()
	n.text.dialing++
	n.text.mu.Unlock()
	c.wg.Add(1)
	n.dialText()
	p.await(t, "did not answer text")
	p.requireFree(t, "the node's text pool")
}
