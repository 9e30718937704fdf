package client

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvwire/kvwire/memdx"
	"github.com/kvwire/kvwire/mockcluster"
)

// A node that left the config while a request is in flight on its
// connection shows that connection as disconnecting (RFC 0034: planned,
// "some requests may still be in flight"), with the id and local id it
// had, until it closes; the cluster is online meanwhile and
// WaitUntilReady does not wait for it (it is no longer the cluster's).
func TestEndpointOfANodeThatLeftIsDisconnectingWhileItDrains(t *testing.T) {
	t.Parallel()
	mc := newMock(t, mockcluster.Options{Nodes: 2})
	// The held request's timeout, and so the drain's bound, an hour:
	// the connection drains for the whole test.
	c := connect(t, mc, &Options{KVTimeout: time.Hour, ConfigPollInterval: 20 * time.Millisecond})
	ctx := context.Background()
	require.NoError(t, c.WaitUntilReady(ctx, nil))
	gone := mc.Node(1).Addr()
	var was EndpointDiagnostics
	for _, e := range c.Diagnostics(nil).Endpoints {
		if e.Node == gone {
			was = e
		}
	}
	require.Equal(t, EndpointConnected, was.State)

	key := keyOn(t, c, gone)
	held := mc.AddFault(mockcluster.Fault{Match: mockcluster.Match{Nodes: []int{1}, Key: key, OpCodes: []memdx.OpCode{memdx.OpGet}},
		Action: mockcluster.Action{Delay: time.Hour}})
	t.Cleanup(held.Remove)
	got := make(chan error, 1)
	go func() {
		_, err := c.DefaultCollection().Get(ctx, key, nil)
		got <- err
	}()
	require.Eventually(t, func() bool { return held.Hits() == 1 }, time.Minute, time.Millisecond, "the Get reached the node")

	require.NoError(t, mc.Failover(1))
	awaitConfig(t, c, mc.Bucket(mockcluster.DefaultBucket).Rev(), time.Minute)
	d := awaitReport(t, c, "with the departed node's connection disconnecting", func(d *DiagnosticsResult) bool {
		for _, e := range d.Endpoints {
			if e.Node == gone && e.State == EndpointDisconnecting {
				return true
			}
		}
		return false
	})
	require.Len(t, d.Endpoints, 2)
	e := d.Endpoints[1]
	assert.Equal(t, was.ID, e.ID)
	assert.Equal(t, was.LocalID, e.LocalID, "the connection it had")
	assert.Equal(t, was.Local, e.Local)
	assert.Equal(t, ClusterOnline, d.State, "a departed node is not the cluster's")
	require.NoError(t, c.WaitUntilReady(ctx, &WaitUntilReadyOptions{Timeout: time.Minute}))

	mc.Node(1).Stop() // the connection ends: nothing of the node is left
	d = awaitReport(t, c, "without the departed node", func(d *DiagnosticsResult) bool { return len(d.Endpoints) == 1 })
	assert.NotEqual(t, gone, d.Endpoints[0].Node)
	// The Get, whose connection ended before an answer, is read again
	// from the node that holds its vbucket now (the key was never
	// written).
	require.ErrorIs(t, <-got, ErrDocumentNotFound)
}

// A node that left and came back at the same address while its old
// connection still drains has two endpoints at once, a connected and a
// disconnecting one: their ids differ (a monitor following an id follows
// one connection), the current node's keeping the address's id.
func TestEndpointIDsOfANodeBackWhileItsOldConnectionDrains(t *testing.T) {
	t.Parallel()
	mc := newMock(t, mockcluster.Options{Nodes: 2})
	c := connect(t, mc, &Options{KVTimeout: time.Hour, ConfigPollInterval: 20 * time.Millisecond})
	ctx := context.Background()
	require.NoError(t, c.WaitUntilReady(ctx, nil))
	gone := mc.Node(1).Addr()
	key := keyOn(t, c, gone)
	held := mc.AddFault(mockcluster.Fault{Match: mockcluster.Match{Nodes: []int{1}, Key: key, OpCodes: []memdx.OpCode{memdx.OpGet}},
		Action: mockcluster.Action{Delay: time.Hour}})
	t.Cleanup(held.Remove)
	go func() { _, _ = c.DefaultCollection().Get(ctx, key, nil) }()
	require.Eventually(t, func() bool { return held.Hits() == 1 }, time.Minute, time.Millisecond, "the Get reached the node")

	require.NoError(t, mc.Failover(1))
	awaitReport(t, c, "the departed node's connection disconnecting", func(d *DiagnosticsResult) bool {
		for _, e := range d.Endpoints {
			if e.Node == gone && e.State == EndpointDisconnecting {
				return true
			}
		}
		return false
	})
	r, err := mc.StartRebalance(mockcluster.RebalanceOptions{Nodes: []int{0, 1}})
	require.NoError(t, err)
	require.NoError(t, r.Finish())
	d := awaitReport(t, c, "the node back, connected, beside its old connection", func(d *DiagnosticsResult) bool {
		var connected, draining bool
		for _, e := range d.Endpoints {
			connected = connected || e.Node == gone && e.State == EndpointConnected
			draining = draining || e.Node == gone && e.State == EndpointDisconnecting
		}
		return connected && draining
	})
	ids := map[string]EndpointState{}
	for _, e := range d.Endpoints {
		_, dup := ids[e.ID]
		assert.False(t, dup, "two endpoints with id %q: %+v", e.ID, d.Endpoints)
		ids[e.ID] = e.State
	}
	assert.Equal(t, EndpointConnected, ids[gone+"/0"], "the current node keeps the address's id")
}
