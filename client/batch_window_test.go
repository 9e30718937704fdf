package client

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvwire/kvwire/memdx"
	"github.com/kvwire/kvwire/mockcluster"
)

// A batch keeps at most batchInFlight keys in flight; a key that ends
// frees its room for the next one at once, whatever the other keys in
// flight are doing. Here one key's node holds its answer (a node that
// stopped answering): every key of the other node must still be read
// while it is held, not only once the held key ends (at its deadline,
// by which time the keys that waited for room could only time out).
func TestGetManyAKeyThatEndsFreesItsRoomWhileAnotherIsHeld(t *testing.T) {
	mc := newMock(t, mockcluster.Options{Nodes: 2})
	c := connect(t, mc, &Options{MaxPendingPerConnection: 4}) // 2 keys in flight per batch
	col := c.DefaultCollection()
	held := keyOn(t, c, mc.Node(0).Addr())
	var keys []string
	for i := 0; len(keys) < 8; i++ {
		k := fmt.Sprintf("window-%d", i)
		if c.Route(k).Active != mc.Node(1).Addr() {
			continue
		}
		_, err := col.Upsert(context.Background(), k, []byte("v-"+k), nil)
		require.NoError(t, err)
		keys = append(keys, k)
	}
	faultGets(t, mc, held, mockcluster.Action{Delay: time.Minute}, 0)
	var read atomic.Int32
	all := make(chan struct{})
	count := mc.AddFault(mockcluster.Fault{Match: mockcluster.Match{Nodes: []int{1}, OpCodes: []memdx.OpCode{memdx.OpGet},
		Func: func(*mockcluster.Request) bool {
			if read.Add(1) == int32(len(keys)) {
				close(all)
			}
			return false // only counts
		}}})
	defer count.Remove()

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan []GetManyResult, 1)
	go func() {
		done <- col.GetMany(ctx, append([]string{held}, keys...), &GetManyOptions{Timeout: time.Minute})
	}()
	select {
	case <-all:
	case <-time.After(10 * time.Second):
	}
	got := read.Load()
	if got == int32(len(keys)) {
		// Their answers are in: cancelling now leaves their outcomes.
		waitFor(t, "the answers of the node that answers", func() bool {
			for _, cn := range c.cl.Node(mc.Node(1).Addr()).Conns() {
				if cn.Pending() > 0 {
					return false
				}
			}
			return true
		})
	}
	cancel()
	res := <-done
	require.Equal(t, int32(len(keys)), got, "keys of the answering node read while the other key was held")
	require.ErrorIs(t, res[0].Err, ErrRequestCanceled)
	for i, k := range keys {
		require.NoError(t, res[i+1].Err, k)
		require.Equal(t, "v-"+k, string(res[i+1].Value))
	}
}
