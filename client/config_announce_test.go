package client

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvwire/kvwire/memdx"
	"github.com/kvwire/kvwire/mockcluster"
	"github.com/kvwire/kvwire/retry"
)

// A node that announces a newer config (a brief cluster-map notification)
// is asked for it at once, even when the client fetched from it just
// before: the spacing between fetches bounds what NOT_MY_VBUCKET answers
// cost, not what a node asks for. On a client clock that never moves, the
// announced config is installed.
func TestAnnouncedConfigFetchedDespiteFetchSpacing(t *testing.T) {
	mc := newMock(t, mockcluster.Options{Nodes: 1})
	fc := retry.NewFakeClock(time.Now())
	c := connect(t, mc, &Options{Clock: fakeClock{fc}})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	held := c.ConfigVersion()

	// An NMV without a body makes the client fetch from the node, which
	// starts that node's fetch spacing on the frozen clock.
	nmv := mc.AddFault(mockcluster.Fault{Match: mockcluster.Match{Key: "k"},
		Action: mockcluster.Action{Status: memdx.StatusNotMyVbucket, Value: []byte{}}, Times: 1})
	defer nmv.Remove()
	fetch := mc.AddFault(mockcluster.Fault{Match: mockcluster.Match{OpCodes: []memdx.OpCode{memdx.OpGetClusterConfig}},
		Action: mockcluster.Action{Status: memdx.StatusTmpFail}, Times: 1})
	defer fetch.Remove()
	gctx, gcancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		_, err := c.DefaultCollection().Get(gctx, "k", nil)
		done <- err
	}()
	select {
	case <-fetch.Done():
	case <-ctx.Done():
		t.Fatal("the NMV without a body asked for no config fetch")
	}
	gcancel() // the Get sleeps in its back-off on the frozen clock
	<-done
	require.Equal(t, held, c.ConfigVersion())

	// The node announces a newer config (a node joins the cluster).
	_, err := mc.AddNode()
	require.NoError(t, err)
	want := uint64(mc.Bucket(mockcluster.DefaultBucket).Rev())
	require.Greater(t, want, held.Rev)
	for c.ConfigVersion().Rev < want {
		select {
		case <-ctx.Done():
			t.Fatalf("the announced config (rev %d) was never fetched: the client holds %v", want, c.ConfigVersion())
		case <-time.After(time.Millisecond):
		}
	}
}
