package client

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvwire/kvwire/conn"
	"github.com/kvwire/kvwire/mockcluster"
)

// The bucket is deleted and made again under its name, with collections
// of its own: its ids start again, so the id the client cached for a
// collection of the old bucket names another collection of the new one.
// The node closes the connections of the deleted bucket; the client
// redials and selects the new bucket. A write to the old bucket's
// collection was sent on the new connection with the cached id before
// the new config was installed (which forgets the ids: its bucket uuid
// differs), and was acknowledged, written into the other collection: the
// data lost where the caller meant it, and a foreign document in the
// other collection. The ids are now forgotten before a connection whose
// bootstrap config names another bucket uuid is used.
func TestBucketMadeAgainCachedCollectionIDNotSentToTheNewBucket(t *testing.T) {
	mc := newMock(t, mockcluster.Options{Nodes: 1})
	addCollections(t, mc, "s", "c1")
	c := connect(t, mc, &Options{ConfigPollInterval: time.Hour})
	c1 := c.Scope("s").Collection("c1")
	_, err := c1.Upsert(context.Background(), "k", []byte(`"old"`), nil)
	require.NoError(t, err)
	oldID, err := mc.Bucket(mockcluster.DefaultBucket).CollectionID("s", "c1")
	require.NoError(t, err)

	old := map[*conn.Conn]bool{}
	for _, e := range c.cl.Endpoints() {
		if e.Conn != nil {
			old[e.Conn] = true
		}
	}
	require.NoError(t, mc.RemoveBucket(mockcluster.DefaultBucket))
	// The client has seen the deleted bucket's connections end (a write
	// sent on one before would have been ambiguous, its outcome unknown).
	waitUntil(t, "the deleted bucket's connections ended", func() bool {
		for _, e := range c.cl.Endpoints() {
			if old[e.Conn] {
				return false
			}
		}
		return true
	})
	nb, err := mc.AddBucket(mockcluster.BucketOptions{Name: mockcluster.DefaultBucket})
	require.NoError(t, err)
	_, err = nb.AddScope("other")
	require.NoError(t, err)
	newID, err := nb.AddCollection("other", "c2")
	require.NoError(t, err)
	require.Equal(t, oldID, newID, "the test needs the new bucket's collection to take the old one's id")

	// A redial made while no bucket had the name failed at SELECT_BUCKET
	// (KEY_ENOENT), and a write fails fast then, as ErrBucketNotFound,
	// unsent, until the node's next redial (after its back-off): it is
	// made again until then, each time at once, so that the one that goes
	// still waits for the node's next connection, the case this test is
	// about.
	waitUntil(t, "a write not refused as ErrBucketNotFound", func() bool {
		_, err = c1.Upsert(context.Background(), "k2", []byte(`"meant for s.c1"`), &UpsertOptions{Timeout: 2 * time.Second})
		return !errors.Is(err, ErrBucketNotFound)
	})
	if d, ok := nb.Get("other", "c2", "k2"); ok {
		t.Fatalf("the write to s.c1 of the deleted bucket (err %v) was written into other.c2 of the new one: %s", err, d.Value)
	}
	if !errors.Is(err, ErrScopeNotFound) {
		t.Fatalf("Upsert to s.c1, whose scope the new bucket does not have: %v; want ErrScopeNotFound", err)
	}
}
