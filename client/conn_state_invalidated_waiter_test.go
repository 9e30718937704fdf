package client

import (
	"context"
	"log/slog"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvwire/kvwire/internal/faultnode"
	"github.com/kvwire/kvwire/memdx"
	"github.com/kvwire/kvwire/mockcluster"
)

// droppedConns is a slog.Handler that keeps the connection ids of the
// "dropping a connection" warnings (dropInvalidated).
type droppedConns struct {
	mu    sync.Mutex
	conns []string
}

func (d *droppedConns) Enabled(context.Context, slog.Level) bool { return true }
func (d *droppedConns) WithAttrs([]slog.Attr) slog.Handler       { return d }
func (d *droppedConns) WithGroup(string) slog.Handler            { return d }
func (d *droppedConns) Handle(_ context.Context, rec slog.Record) error {
	if !strings.Contains(rec.Message, "dropping a connection") {
		return nil
	}
	rec.Attrs(func(a slog.Attr) bool {
		if a.Key == "conn" {
			d.mu.Lock()
			d.conns = append(d.conns, a.Value.String())
			d.mu.Unlock()
		}
		return true
	})
	return nil
}

// TestConnStateInvalidatedLookupDropsOnlyItsConnection: a collection-id
// lookup answered with a status whose error-map entry says
// conn-state-invalidated drops the connection it came on. An operation
// that waited for that lookup on another connection of the node (a pool
// of two) must not drop its own: nothing invalidated it, and its requests
// in flight (a mutation's then ambiguous) would fail with it.
func TestConnStateInvalidatedLookupDropsOnlyItsConnection(t *testing.T) {
	mc := newMock(t, mockcluster.Options{Nodes: 1})
	addCollections(t, mc, "app", "users")
	ps, _ := proxyEach(t, mc)
	drops := &droppedConns{}
	c := connectVia(t, ps[0].Addr(), &Options{ConnectionsPerNode: 2, Logger: slog.New(drops)})
	col := c.Scope("app").Collection("users")
	ctx := context.Background()
	_, err := col.Upsert(ctx, "u", []byte("v"), nil)
	require.NoError(t, err)
	n := c.cl.Topology().Nodes()[0]
	for end := time.Now().Add(time.Minute); len(n.Conns()) < 2; time.Sleep(time.Millisecond) {
		require.True(t, time.Now().Before(end), "the pool's second connection")
	}
	c.cl.Collections().Invalidate(col.path)

	arrived, release := make(chan struct{}, 1), make(chan struct{})
	var once sync.Once
	ps[0].OnRequest(func(req *memdx.Packet) faultnode.Action {
		if req.OpCode != memdx.OpCollectionsGetID {
			return faultnode.Action{}
		}
		first := false
		once.Do(func() { first = true })
		if !first {
			return faultnode.Action{}
		}
		arrived <- struct{}{}
		<-release
		return faultnode.Action{Send: []memdx.Packet{faultnode.Reply(req, memdx.StatusInternalError, nil)}}
	})

	errs := make(chan error, 2)
	get := func(key string) {
		_, err := col.Get(ctx, key, &GetOptions{Timeout: time.Minute})
		errs <- err
	}
	go get("u")
	<-arrived
	go get("u") // the next connection of the pool: waits for the lookup
	awaitStack(t, "(*CollectionIDs).await")
	close(release)
	for range 2 {
		require.ErrorIs(t, <-errs, ErrServerFailure)
	}
	drops.mu.Lock()
	defer drops.mu.Unlock()
	distinct := map[string]bool{}
	for _, id := range drops.conns {
		distinct[id] = true
	}
	assert.Len(t, distinct, 1, "connections dropped: %v", drops.conns)
}

// awaitStack waits (a minute at most) until a goroutine's stack holds frame.
func awaitStack(t *testing.T, frame string) {
	t.Helper()
	buf := make([]byte, 1<<20)
	for end := time.Now().Add(time.Minute); ; time.Sleep(time.Millisecond) {
		if strings.Contains(string(buf[:runtime.Stack(buf, true)]), frame) {
			return
		}
		require.True(t, time.Now().Before(end), "no goroutine reached %s", frame)
	}
}
