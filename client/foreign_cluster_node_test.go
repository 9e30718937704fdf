package client

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvwire/kvwire/memdx"
	"github.com/kvwire/kvwire/mockcluster"
)

// freePorts returns a port p such that p to p+n-1 are free on the mock's
// host (a mock cluster of n nodes on them: KVPort).
func freePorts(t *testing.T, n int) int {
	t.Helper()
next:
	for range 50 {
		l, err := net.Listen("tcp", mockcluster.DefaultHost+":0")
		require.NoError(t, err)
		p := l.Addr().(*net.TCPAddr).Port
		l.Close()
		for i := 1; i < n; i++ {
			li, err := net.Listen("tcp", mockcluster.DefaultHost+":"+strconv.Itoa(p+i))
			if err != nil {
				continue next
			}
			li.Close()
		}
		return p
	}
	t.Fatalf("no %d consecutive free ports", n)
	return 0
}

// A node of the cluster stops, and a node of another cluster, with a
// bucket of the same name and the same credentials, comes up at its
// address (a container or a pod of another cluster given the address).
// The client redials the address as the node's: the connection it makes
// there answers for the other cluster (its config's clusterUUID says so),
// and must not be used as the node's. It was: the keys of the node's
// vbuckets were read from the other cluster's bucket (its documents
// returned as hits) and written into it (acknowledged, and lost to the
// cluster the client was using).
func TestNodeAddressTakenByAnotherClusterIsNotUsed(t *testing.T) {
	nodeAddressTakenByAnotherCluster(t, func(a *mockcluster.Cluster) *Client {
		return connect(t, a, &Options{ConfigPollInterval: time.Hour})
	})
}

// The same with bootstrap_on=http: the configs come from the cluster
// manager, and the KV connections asked for none at bootstrap, so there
// was nothing to vet the node's connection by. It was used: the other
// cluster's documents read as hits, the writes acknowledged there.
func TestNodeAddressTakenByAnotherClusterIsNotUsedHTTP(t *testing.T) {
	nodeAddressTakenByAnotherCluster(t, func(a *mockcluster.Cluster) *Client {
		c, err := connectString(t, a.HTTPConnString()+"/"+mockcluster.DefaultBucket+"?bootstrap_on=http",
			&Options{ConfigPollInterval: time.Hour})
		require.NoError(t, err)
		return c
	})
}

// nodeAddressTakenByAnotherCluster runs the test above on a client that
// connect opens on a mock cluster.
func nodeAddressTakenByAnotherCluster(t *testing.T, connect func(*mockcluster.Cluster) *Client) {
	p := freePorts(t, 2)
	a := newMock(t, mockcluster.Options{Nodes: 2, KVPort: p})
	c := connect(a)
	col := c.DefaultCollection()
	ab := a.Bucket(mockcluster.DefaultBucket)
	key := ""
	for i := 0; key == ""; i++ {
		k := fmt.Sprint("k", i)
		if ab.VbucketMap()[ab.VbucketForKey([]byte(k))][0] == 1 {
			key = k
		}
	}
	_, err := col.Upsert(context.Background(), key, []byte(`"A"`), nil)
	require.NoError(t, err)
	node1 := a.Addrs()[1]

	a.Node(1).Stop()
	b := newMock(t, mockcluster.Options{Nodes: 1, KVPort: p + 1})
	bb := b.Bucket(mockcluster.DefaultBucket)
	_, err = bb.Set("_default", "_default", key, []byte(`"B"`), 0, 0)
	require.NoError(t, err)
	require.Equal(t, node1, b.Addrs()[0])

	// The client has dialed the address anew and bootstrapped there: its
	// node has a connection again, or its dial failed.
	waitUntil(t, "the client's bootstrap at the other cluster's node", func() bool {
		return b.RequestCount(memdx.OpSelectBucket) > 0
	})
	waitUntil(t, "the dial's outcome", func() bool {
		for _, e := range c.cl.Endpoints() {
			if e.Node == node1 && (e.Conn != nil || e.Err != nil && strings.Contains(e.Err.Error(), "another cluster")) {
				return true
			}
		}
		return false
	})

	r, err := col.Get(context.Background(), key, &GetOptions{Timeout: 200 * time.Millisecond})
	if err == nil {
		t.Fatalf("Get(%q) returned %s from the node now at %s, which answers for another cluster", key, r.Value, node1)
	}
	if !strings.Contains(err.Error(), "another cluster") {
		t.Errorf("Get's error does not say the node's address answers for another cluster: %v", err)
	}
	_, err = col.Upsert(context.Background(), key, []byte(`"A2"`), &UpsertOptions{Timeout: 200 * time.Millisecond})
	if d, ok := bb.Get("_default", "_default", key); ok && string(d.Value) != `"B"` {
		t.Fatalf("Upsert(%q) (err %v) wrote %s into the other cluster's bucket", key, err, d.Value)
	}
	if err == nil || errors.Is(err, ErrAmbiguous) {
		t.Fatalf("Upsert(%q): %v; want a failure that is not ambiguous (nothing was sent)", key, err)
	}
}

// A node leaves the cluster, the others stop, and a node of another
// cluster, with a bucket of the same name, comes up at the address of the
// node that left, which the recovery rounds ask for a config (a seed, a
// node once known). The config it serves, newer by its revision, is of
// another cluster (its clusterUUID) and must not be installed. It was, as
// a bucket made again under its name: the client moved its whole topology
// to the other cluster, reading its documents as hits and writing into it.
func TestConfigOfAnotherClusterIsNotInstalled(t *testing.T) {
	p := freePorts(t, 3)
	a := newMock(t, mockcluster.Options{Nodes: 3, KVPort: p})
	logs := &logCapture{}
	c := connect(t, a, &Options{ConfigPollInterval: time.Hour, Logger: slog.New(logs)})
	col := c.DefaultCollection()
	const key = "k"
	_, err := col.Upsert(context.Background(), key, []byte(`"A"`), nil)
	require.NoError(t, err)
	left := a.Addrs()[0]
	require.NoError(t, a.RemoveNode(0))
	waitUntil(t, "the config without the node that left", func() bool { return !slices.Contains(c.Nodes(), left) })
	held := c.ConfigVersion()

	a.Node(1).Stop()
	a.Node(2).Stop()
	b := newMock(t, mockcluster.Options{Nodes: 1, KVPort: p})
	require.Equal(t, left, b.Addrs()[0])
	bb := b.Bucket(mockcluster.DefaultBucket)
	for i := 0; uint64(bb.Rev()) <= held.Rev; i++ {
		_, err := bb.AddScope("s" + strconv.Itoa(i))
		require.NoError(t, err)
	}
	_, err = bb.Set("_default", "_default", key, []byte(`"B"`), 0, 0)
	require.NoError(t, err)

	// Gets find the nodes unavailable, which starts the recovery rounds;
	// wait until the other cluster's config was judged.
	waitUntil(t, "the other cluster's config judged", func() bool {
		if r, err := col.Get(context.Background(), key, &GetOptions{Timeout: 20 * time.Millisecond}); err == nil && string(r.Value) == `"B"` {
			t.Fatalf("Get(%q) returned %s, the other cluster's document", key, r.Value)
		}
		// Refused where it would be installed, or dropped by the round
		// before it is offered: either says another cluster.
		return c.ConfigVersion() != held || len(logs.find("another cluster")) > 0
	})
	if v := c.ConfigVersion(); v != held {
		t.Fatalf("the config of another cluster (rev %v, bucket %q of the same name) was installed in place of rev %v", v, mockcluster.DefaultBucket, held)
	}
}
