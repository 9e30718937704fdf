package client

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvwire/kvwire/memdx"
	"github.com/kvwire/kvwire/mockcluster"
)

// A node that holds a vbucket's scan leaves the cluster between two of the
// scan's continues: the next continue finds no connection to it, and the
// vbucket's scan is created again where the vbucket went. The cancel of
// the old scan has nothing to carry it (a node that left never has a
// connection again), so it is not waited for: the scan goes on at once,
// not at the request timeout (here a minute, past the test's bound).
func TestScanGoesOnAtOnceWhenTheNodeHoldingItsScanLeaves(t *testing.T) {
	mc, c := scanMock(t, mockcluster.Options{}, 8)
	col := c.DefaultCollection()
	keys := scanDocs(t, col, 200)
	// The scan's requests, as the nodes see them: the continues (and the
	// node and vbucket of the last one) and the creates per vbucket.
	var mu sync.Mutex
	var continues, node, vb int
	creates := map[int]int{}
	f := mc.AddFault(mockcluster.Fault{Match: mockcluster.Match{
		OpCodes: []memdx.OpCode{memdx.OpRangeScanContinue, memdx.OpRangeScanCreate},
		Func: func(r *mockcluster.Request) bool {
			mu.Lock()
			defer mu.Unlock()
			if r.OpCode == memdx.OpRangeScanCreate {
				creates[int(r.Vbucket)]++
			} else {
				continues, node, vb = continues+1, r.Node, int(r.Vbucket)
			}
			return false // only watches
		}}})
	defer f.Remove()
	res, err := col.Scan(context.Background(), PrefixScan{Prefix: "doc-"},
		&ScanOptions{BatchItemLimit: 1, Timeout: time.Minute})
	require.NoError(t, err)
	defer res.Close()
	var items []ScanItem
	require.True(t, res.Next())
	items = append(items, res.Item())

	// The scan runs ahead of the caller by two batches (of one item): once
	// its third continue is answered, it waits for the caller, with
	// nothing in flight on the node holding the scan of its first vbucket
	// (which has more than three documents: the scan is not over).
	idle := func() bool {
		mu.Lock()
		n, cs := node, continues
		mu.Unlock()
		if cs < 3 {
			return false
		}
		for _, cn := range c.cl.Node(mc.Node(n).Addr()).Conns() {
			if cn.Pending() > 0 {
				return false
			}
		}
		return true
	}
	waitFor(t, "the scan waiting for its caller", idle)
	mu.Lock()
	left, scanned := node, vb
	mu.Unlock()
	addr := mc.Node(left).Addr()
	require.NoError(t, mc.RemoveNode(left))
	waitFor(t, "the node gone from the client's topology", func() bool { return !slices.Contains(c.Nodes(), addr) })

	done := make(chan error, 1)
	go func() {
		for res.Next() {
			items = append(items, res.Item())
		}
		done <- res.Err()
	}()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(20 * time.Second):
		t.Fatal("the scan waited for a cancel to a node that left the cluster")
	}
	assert.Equal(t, keys, ids(t, items))
	mu.Lock()
	defer mu.Unlock()
	assert.GreaterOrEqual(t, creates[scanned], 2, "vbucket %d's scan created again where it went", scanned)
}
