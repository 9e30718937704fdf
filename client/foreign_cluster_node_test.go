package client

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvwire/kvwire/memdx"
	"github.com/kvwire/kvwire/mockcluster"
)

// freePortPair returns a port p such that p and p+1 are free on the mock's
// host (a two-node mock cluster on them: KVPort).
func freePortPair(t *testing.T) int {
	t.Helper()
	for range 50 {
		l, err := net.Listen("tcp", mockcluster.DefaultHost+":0")
		require.NoError(t, err)
		p := l.Addr().(*net.TCPAddr).Port
		l2, err := net.Listen("tcp", mockcluster.DefaultHost+":"+strconv.Itoa(p+1))
		l.Close()
		if err == nil {
			l2.Close()
			return p
		}
	}
	t.Fatal("no two consecutive free ports")
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
	p := freePortPair(t)
	a := newMock(t, mockcluster.Options{Nodes: 2, KVPort: p})
	c := connect(t, a, &Options{ConfigPollInterval: time.Hour})
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
		return b.RequestCount(memdx.OpGetClusterConfig) > 0
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
