package client

import (
	"context"
	"encoding/binary"
	"strconv"
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
)

// TestUnknownCollectionFromALaggingNodeKeepsTheNewerID: app.users was
// dropped and created again (a new id, in a newer manifest). The client
// holds the new id. A node that has not caught up with the newer manifest
// yet answers UNKNOWN_COLLECTION, naming its older manifest or (a server
// that does not say) naming none, and would answer a lookup with the old
// collection's id. The client must never write with that id: it would be
// acknowledged into the dropped collection and lost, and the next reads
// would miss the document. Naming its manifest, the node gets the write
// again with the id held until it catches up; naming none, the id is
// dropped, and the lookup's answer, by a manifest older than the one the
// dropped id came from, is not cached: the write waits for the node.
func TestUnknownCollectionFromALaggingNodeKeepsTheNewerID(t *testing.T) {
	for _, namesManifest := range []bool{true, false} {
		t.Run(map[bool]string{true: "manifest_uid", false: "no manifest_uid"}[namesManifest], func(t *testing.T) {
			mc := newMock(t, mockcluster.Options{Nodes: 1})
			addCollections(t, mc, "app", "users")
			b := mc.Bucket(mockcluster.DefaultBucket)
			oldID, err := b.CollectionID("app", "users")
			require.NoError(t, err)
			oldUID := b.ManifestUID()
			require.NoError(t, b.DropCollection("app", "users"))
			newID, err := b.AddCollection("app", "users")
			require.NoError(t, err)
			require.Greater(t, b.ManifestUID(), oldUID)

			ps, _ := proxyEach(t, mc)
			c := connectVia(t, ps[0].Addr(), nil)
			users := c.Scope("app").Collection("users")
			ctx := context.Background()
			opts := &UpsertOptions{Timeout: 20 * time.Second}
			_, err = users.Upsert(ctx, "a", []byte("va"), opts)
			require.NoError(t, err, "the client holds the new id")

			// The node lags for its next three answers: a write with the
			// new id is UNKNOWN_COLLECTION, a lookup gives the old id by
			// the old manifest; it would take a write to the old id (it
			// still has that collection).
			var unknownBody []byte
			if namesManifest {
				unknownBody = []byte(`{"manifest_uid":"` + strconv.FormatUint(oldUID, 16) + `"}`)
			}
			lag := lagBehind(ps[0], oldID, oldUID, 3, func(req *memdx.Packet, cid uint32) (faultnode.Action, bool) {
				if cid != newID {
					return faultnode.Action{}, false
				}
				r := faultnode.Reply(req, memdx.StatusUnknownCollection, unknownBody)
				if unknownBody != nil {
					r.Datatype = memdx.DatatypeJSON
				}
				return faultnode.Action{Send: []memdx.Packet{r}}, true
			})
			lag.requireWriteWaited(t, users)
		})
	}
}

// TestLookupOnALaggingNodeAfterAnIDWasDroppedIsNotCached: a node whose
// manifest is newer than the cached id's found that id unknown (the
// collection was dropped and created again), and the id was dropped. The
// next request goes to a node that has not caught up: its lookup answers
// with the dropped collection's id, from its older manifest. That answer
// must not be cached and used, or the write lands in the dropped
// collection: the request waits for the node to catch up.
func TestLookupOnALaggingNodeAfterAnIDWasDroppedIsNotCached(t *testing.T) {
	mc := newMock(t, mockcluster.Options{Nodes: 1})
	addCollections(t, mc, "app", "users")
	b := mc.Bucket(mockcluster.DefaultBucket)
	ps, _ := proxyEach(t, mc)
	c := connectVia(t, ps[0].Addr(), nil)
	users := c.Scope("app").Collection("users")
	ctx := context.Background()
	opts := &UpsertOptions{Timeout: 20 * time.Second}
	_, err := users.Upsert(ctx, "a", []byte("va"), opts)
	require.NoError(t, err, "the client holds the id")
	oldID, err := b.CollectionID("app", "users")
	require.NoError(t, err)
	oldUID := b.ManifestUID()
	require.NoError(t, b.DropCollection("app", "users"))
	_, err = b.AddCollection("app", "users")
	require.NoError(t, err)
	// Another node, at the new manifest, found the old id unknown.
	c.cl.Collections().Outdated(users.path, oldID, c.cl.Collections().Gen(), b.ManifestUID(), true)

	// This node lags: its next two lookups answer with the old id, by the
	// old manifest; it would take a write to the old id.
	lagBehind(ps[0], oldID, oldUID, 2, nil).requireWriteWaited(t, users)
}

// lag is a node behind the manifest that dropped collection oldID
// (proxied by lagBehind): for its next left answers it gives a lookup the
// old id by the old manifest (oldUID), and newWrite, when set, answers
// the writes it takes (cid: the id they name). It takes a write to the old
// id as a node still holding that collection would, and counts it.
type lag struct {
	mu                sync.Mutex
	left, staleWrites int
}

func lagBehind(p *faultnode.Proxy, oldID uint32, oldUID uint64, left int,
	newWrite func(req *memdx.Packet, cid uint32) (faultnode.Action, bool)) *lag {
	l := &lag{left: left}
	p.OnRequest(func(req *memdx.Packet) faultnode.Action {
		l.mu.Lock()
		defer l.mu.Unlock()
		switch req.OpCode {
		case memdx.OpCollectionsGetID:
			if l.left > 0 {
				l.left--
				r := faultnode.Reply(req, memdx.StatusSuccess, nil)
				r.Extras = binary.BigEndian.AppendUint64(nil, oldUID)
				r.Extras = binary.BigEndian.AppendUint32(r.Extras, oldID)
				return faultnode.Action{Send: []memdx.Packet{r}}
			}
		case memdx.OpSet:
			cid, _, err := memdx.SplitCollectionKey(req.Key)
			switch {
			case err != nil:
			case cid == oldID:
				l.staleWrites++
				return faultnode.Action{Send: []memdx.Packet{faultnode.Reply(req, memdx.StatusSuccess, nil)}}
			case newWrite != nil && l.left > 0:
				if a, ok := newWrite(req, cid); ok {
					l.left--
					return a
				}
			}
		}
		return faultnode.Action{}
	})
	return l
}

// requireWriteWaited writes "b" to users through the lagging node and
// requires that no write named the old id, that the write waited out the
// node's lag, and that the acknowledged value is in the collection.
func (l *lag) requireWriteWaited(t *testing.T, users *Collection) {
	t.Helper()
	ctx := context.Background()
	_, err := users.Upsert(ctx, "b", []byte("vb"), &UpsertOptions{Timeout: 20 * time.Second})
	require.NoError(t, err)
	l.mu.Lock()
	assert.Zero(t, l.staleWrites, "a write went with the dropped collection's id")
	assert.Zero(t, l.left, "the write waited for the node to catch up")
	l.mu.Unlock()
	g, err := users.Get(ctx, "b", &GetOptions{Timeout: 5 * time.Second})
	require.NoError(t, err, "the acknowledged write is in the collection")
	assert.Equal(t, "vb", string(g.Value))
}

// TestCollectionLookupOnAHungNodeDoesNotHoldAnotherNodes: a Get with a
// long timeout looks its collection's id up on node 0, which does not
// answer. A Get of a key on node 1 needs the same id: it looks it up on
// node 1, whose answer it gets at once, instead of waiting for node 0's
// lookup until its own deadline (on the client's clock, which does not
// move here: it would wait for ever).
func TestCollectionLookupOnAHungNodeDoesNotHoldAnotherNodes(t *testing.T) {
	mc := newMock(t, mockcluster.Options{Nodes: 2})
	addCollections(t, mc, "app", "users")
	b := mc.Bucket(mockcluster.DefaultBucket)
	vbm := b.VbucketMap()
	keyOn := func(node int) string {
		for i := 0; ; i++ {
			if k := "k" + strconv.Itoa(i); vbm[b.VbucketForKey([]byte(k))][0] == node {
				return k
			}
		}
	}
	k0, k1 := keyOn(0), keyOn(1)
	_, err := b.Set("app", "users", k1, []byte("v1"), 0, 0)
	require.NoError(t, err)
	ps, _ := proxyEach(t, mc)
	fc := retry.NewFakeClock(time.Now())
	c := connectVia(t, ps[0].Addr(), &Options{Clock: fakeClock{fc}})
	users := c.Scope("app").Collection("users")
	held, release := heldLookups(t, ps[0])

	hung := make(chan error, 1)
	go func() {
		_, err := users.Get(context.Background(), k0, &GetOptions{Timeout: time.Hour})
		hung <- err
	}()
	select {
	case <-held:
	case <-time.After(10 * time.Second):
		t.Fatal("node 0's lookup never reached it")
	}

	got := make(chan error, 1)
	go func() {
		g, err := users.Get(context.Background(), k1, &GetOptions{Timeout: 2 * time.Second})
		if err == nil && string(g.Value) != "v1" {
			err = assert.AnError
		}
		got <- err
	}()
	select {
	case err := <-got:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		release()
		<-got
		t.Fatal("the Get on node 1 waited for node 0's lookup")
	}
	release()
	require.ErrorIs(t, <-hung, ErrDocumentNotFound, "node 0's Get ends once its lookup is answered")
}

// TestLateLookupByAnOlderManifestDoesNotReplaceTheID: node 0's lookup is
// answered by a manifest older than node 1's (the collection was dropped
// and created again in between), and its answer arrives last. The id from
// the newer manifest stands: no request names the dropped collection's id,
// node 0's Get included.
func TestLateLookupByAnOlderManifestDoesNotReplaceTheID(t *testing.T) {
	mc := newMock(t, mockcluster.Options{Nodes: 2})
	addCollections(t, mc, "app", "users")
	b := mc.Bucket(mockcluster.DefaultBucket)
	vbm := b.VbucketMap()
	keyOn := func(node int) string {
		for i := 0; ; i++ {
			if k := "k" + strconv.Itoa(i); vbm[b.VbucketForKey([]byte(k))][0] == node {
				return k
			}
		}
	}
	k0, k1 := keyOn(0), keyOn(1)
	oldID, err := b.CollectionID("app", "users")
	require.NoError(t, err)
	ps, _ := proxyEach(t, mc)
	c := connectVia(t, ps[0].Addr(), nil)
	users := c.Scope("app").Collection("users")
	held, release := heldLookups(t, ps[0])

	got0 := make(chan error, 1)
	go func() {
		g, err := users.Get(context.Background(), k0, &GetOptions{Timeout: time.Hour})
		if err == nil && string(g.Value) != "v0" {
			err = assert.AnError
		}
		got0 <- err
	}()
	select {
	case <-held:
	case <-time.After(10 * time.Second):
		t.Fatal("node 0's lookup never reached it")
	}
	require.NoError(t, b.DropCollection("app", "users"))
	_, err = b.AddCollection("app", "users")
	require.NoError(t, err)
	for k, v := range map[string]string{k0: "v0", k1: "v1"} {
		_, err = b.Set("app", "users", k, []byte(v), 0, 0)
		require.NoError(t, err)
	}
	var stale atomic.Int32
	mc.Control(mockcluster.Match{Func: func(r *mockcluster.Request) bool {
		return r.OpCode == memdx.OpGet && r.CollectionID == oldID
	}}, 0, func(*mockcluster.Request) (mockcluster.Action, bool) {
		stale.Add(1)
		return mockcluster.Action{}, false
	})

	g, err := users.Get(context.Background(), k1, &GetOptions{Timeout: 10 * time.Second})
	require.NoError(t, err, "node 1's lookup gives the new id")
	assert.Equal(t, "v1", string(g.Value))
	release()
	select {
	case err := <-got0:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("node 0's Get did not end once its lookup was answered")
	}
	_, err = users.Get(context.Background(), k1, &GetOptions{Timeout: 10 * time.Second})
	require.NoError(t, err)
	assert.Zero(t, stale.Load(), "a Get named the dropped collection's id")
}
