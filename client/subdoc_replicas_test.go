package client

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvwire/kvwire/internal/faultnode"
	"github.com/kvwire/kvwire/memdx"
	"github.com/kvwire/kvwire/mockcluster"
)

// LookupInAllReplicas reads the active copy and each replica with the
// ReplicaRead doc flag (a replica node answers NOT_MY_VBUCKET to a lookup
// without it); LookupInAnyReplica returns one of them.
func TestLookupInReplicas(t *testing.T) {
	mc := newMock(t, mockcluster.Options{Nodes: 3,
		Buckets: []mockcluster.BucketOptions{{Name: mockcluster.DefaultBucket, NumReplicas: 2}}})
	rec := &recorder{}
	var hellos, withReplicaRead atomic.Int32
	mc.Control(mockcluster.Match{OpCodes: []memdx.OpCode{memdx.OpHello}}, 0, func(r *mockcluster.Request) (mockcluster.Action, bool) {
		hellos.Add(1)
		for v := r.Packet.Value; len(v) >= 2; v = v[2:] {
			if memdx.HelloFeature(binary.BigEndian.Uint16(v)) == memdx.FeatureSubdocReplicaRead {
				withReplicaRead.Add(1)
			}
		}
		return mockcluster.Action{}, false
	})
	c := connect(t, mc, &Options{Observer: rec})
	col := c.DefaultCollection()
	ctx := context.Background()
	_, err := col.MutateIn(ctx, "k", []MutateInSpec{
		UpsertSpec("meta", []byte(`"m"`), &UpsertSpecOptions{IsXattr: true}),
		UpsertSpec("a", []byte(`1`), nil),
	}, &MutateInOptions{StoreSemantic: StoreSemanticsUpsert})
	require.NoError(t, err)
	specs := []LookupInSpec{GetSpec("meta", xa()), GetSpec("a", nil), ExistsSpec("b", nil)}

	all, err := col.LookupInAllReplicas(ctx, "k", specs, nil)
	require.NoError(t, err)
	require.Len(t, all, 3)
	ri := c.Route("k")
	assert.False(t, all[0].IsReplica)
	assert.Equal(t, ri.Active, all[0].Node)
	var nodes []string
	for _, r := range all {
		nodes = append(nodes, r.Node)
		v, err := r.ValueAt(0)
		require.NoError(t, err)
		assert.Equal(t, `"m"`, string(v))
		v, err = r.ValueAt(1)
		require.NoError(t, err)
		assert.Equal(t, `1`, string(v))
		ok, err := r.Exists(2)
		require.NoError(t, err)
		assert.False(t, ok)
	}
	assert.ElementsMatch(t, append([]string{ri.Active}, ri.Replicas...), nodes, "each copy read on its node")
	assert.Positive(t, hellos.Load())
	assert.Equal(t, hellos.Load(), withReplicaRead.Load(), "every HELLO asks for SubdocReplicaRead (0x1c), as SDK RFC 0076 says")
	for _, a := range rec.attempts() {
		assert.NotEqual(t, memdx.StatusNotMyVbucket, a.Status, "every copy went to its node with the flag it needs")
	}

	one, err := col.LookupInAnyReplica(ctx, "k", specs, nil)
	require.NoError(t, err)
	v, err := one.ValueAt(1)
	require.NoError(t, err)
	assert.Equal(t, `1`, string(v))
	assert.True(t, slices.Contains(nodes, one.Node))

	_, err = col.LookupInAnyReplica(ctx, "missing", specs, nil)
	assert.ErrorIs(t, err, ErrDocumentNotFound)
	_, err = col.LookupInAllReplicas(ctx, "missing", specs, nil)
	assert.ErrorIs(t, err, ErrDocumentNotFound)
}

// A bucket whose config does not list subdoc.ReplicaRead gets no replica
// lookup: ErrFeatureNotAvailable, nothing sent.
func TestLookupInReplicasNeedTheBucketCapability(t *testing.T) {
	mc := newMock(t, mockcluster.Options{Nodes: 1})
	var cfg map[string]any
	require.NoError(t, json.Unmarshal(mc.Bucket(mockcluster.DefaultBucket).ConfigJSON(0), &cfg))
	var caps []any
	for _, c := range cfg["bucketCapabilities"].([]any) {
		if c != "subdoc.ReplicaRead" {
			caps = append(caps, c)
		}
	}
	require.Len(t, caps, len(cfg["bucketCapabilities"].([]any))-1, "the mock advertises subdoc.ReplicaRead")
	cfg["bucketCapabilities"] = caps
	raw, err := json.Marshal(cfg)
	require.NoError(t, err)
	srv, err := faultnode.NewServer(nil)
	require.NoError(t, err)
	t.Cleanup(srv.Close)
	srv.SetConfig(faultnode.RewriteConfigPorts(raw, map[string]string{faultnode.Port(mc.Node(0).Addr()): faultnode.Port(srv.Addr())}))
	c := connectVia(t, srv.Addr(), &Options{ConfigPollInterval: time.Hour})
	col := c.DefaultCollection()
	ctx := context.Background()
	specs := []LookupInSpec{GetSpec("a", nil)}
	_, err = col.LookupInAnyReplica(ctx, "k", specs, nil)
	assert.ErrorIs(t, err, ErrFeatureNotAvailable)
	assert.ErrorContains(t, err, "subdoc.ReplicaRead")
	var kv *KeyValueError
	assert.ErrorAs(t, err, &kv)
	_, err = col.LookupInAllReplicas(ctx, "k", specs, nil)
	assert.ErrorIs(t, err, ErrFeatureNotAvailable)
	assert.Zero(t, srv.Requests(memdx.OpSubdocMultiLookup), "nothing was sent")
}
