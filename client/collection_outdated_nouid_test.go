package client

import (
	"context"
	"encoding/binary"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvwire/kvwire/internal/faultnode"
	"github.com/kvwire/kvwire/memdx"
	"github.com/kvwire/kvwire/mockcluster"
)

// TestUnknownCollectionWithoutManifestUIDKeepsOffTheDroppedID: as
// TestUnknownCollectionFromALaggingNodeKeepsTheNewerID, but the lagging
// node's UNKNOWN_COLLECTION body does not name its manifest (a server that
// sends no manifest_uid). The client drops the new id it held, and the
// node's lookup then answers with the dropped collection's id, by a
// manifest older than the one the dropped id came from: that answer must
// not be cached, or the write lands in the dropped collection. The request
// waits for the node to catch up.
func TestUnknownCollectionWithoutManifestUIDKeepsOffTheDroppedID(t *testing.T) {
	mc := newMock(t, mockcluster.Options{Nodes: 1})
	addCollections(t, mc, "app", "users")
	b := mc.Bucket(mockcluster.DefaultBucket)
	oldID, err := b.CollectionID("app", "users")
	require.NoError(t, err)
	oldUID := b.ManifestUID()
	require.NoError(t, b.DropCollection("app", "users"))
	newID, err := b.AddCollection("app", "users")
	require.NoError(t, err)

	ps, _ := proxyEach(t, mc)
	c := connectVia(t, ps[0].Addr(), nil)
	users := c.Scope("app").Collection("users")
	ctx := context.Background()
	opts := &UpsertOptions{Timeout: 20 * time.Second}
	_, err = users.Upsert(ctx, "a", []byte("va"), opts)
	require.NoError(t, err, "the client holds the new id")

	// The node lags for its next three answers: a write with the new id
	// is UNKNOWN_COLLECTION (no manifest uid in the body), a lookup gives
	// the old id by the old manifest; it would take a write to the old id.
	var mu sync.Mutex
	lagLeft, staleWrites := 3, 0
	ps[0].OnRequest(func(req *memdx.Packet) faultnode.Action {
		mu.Lock()
		defer mu.Unlock()
		switch req.OpCode {
		case memdx.OpCollectionsGetID:
			if lagLeft > 0 {
				lagLeft--
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
				staleWrites++
				return faultnode.Action{Send: []memdx.Packet{faultnode.Reply(req, memdx.StatusSuccess, nil)}}
			case cid == newID && lagLeft > 0:
				lagLeft--
				return faultnode.Action{Send: []memdx.Packet{faultnode.Reply(req, memdx.StatusUnknownCollection, nil)}}
			}
		}
		return faultnode.Action{}
	})

	_, err = users.Upsert(ctx, "b", []byte("vb"), opts)
	require.NoError(t, err)
	mu.Lock()
	assert.Zero(t, staleWrites, "a write went with the dropped collection's id")
	mu.Unlock()
	g, err := users.Get(ctx, "b", &GetOptions{Timeout: 5 * time.Second})
	require.NoError(t, err, "the acknowledged write is in the collection")
	assert.Equal(t, "vb", string(g.Value))
}
