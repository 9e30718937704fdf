package cluster

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvwire/kvwire/memdx"
	"github.com/kvwire/kvwire/mockcluster"
)

// Endpoints read while the cluster closes are those of a closed cluster,
// every one disconnected, once a node was read after the close ended its
// context. Such a node used to show as one that left the config
// (disconnecting), which the cluster's state leaves out: with the nodes
// read before still connected, the state was online, and a client's
// WaitUntilReady returned nil from a Close while a node had never
// connected (TestConnectNotHeldByANodePausedInItsLogin, under load).
func TestEndpointsReadAsTheClusterClosesAreDisconnected(t *testing.T) {
	mc := newMock(t, mockcluster.Options{Nodes: 3})
	c := connectCluster(t, testConfig(mc))
	all := c.Topology().all
	require.Len(t, all, 3)
	last := all[len(all)-1]
	// The last node goes down: its endpoint is not connected (it redials).
	mc.Node(len(all) - 1).Stop()
	awaitEndpoint(t, c, last.addr, func(e Endpoint) bool { return e.State == EndpointReconnecting })
	last.mu.Lock()
	locked := true
	defer func() {
		if locked {
			last.mu.Unlock()
		}
	}()
	got := make(chan []Endpoint, 1)
	go readEndpoints(c, got)
	// Endpoints has read the cluster open, and waits for the last node.
	waitForStack(t, "Endpoints waits for the last node", "cluster.readEndpoints", "cluster.(*Node).endpoints", "sync.(*Mutex).Lock")
	c.Cancel() // as Close does first
	last.mu.Unlock()
	locked = false
	var eps []Endpoint
	select {
	case eps = <-got:
	case <-time.After(time.Minute):
		t.Fatal("Endpoints did not return")
	}
	require.Len(t, eps, 3)
	for _, e := range eps {
		assert.Equal(t, EndpointDisconnected, e.State, "endpoint %s/%d of a closed cluster", e.Node, e.Slot)
	}
}

// Endpoints read while a config replaces a node are those of one topology:
// when a node read was made to leave by a config installed meanwhile, they
// are read again from that config's. They used to be the replaced
// topology's, the node that left among them shown as disconnecting (which
// the cluster's state leaves out) and the node that replaced it missing:
// the cluster was online, and a client's WaitUntilReady returned nil,
// while that node, of the config now held, had not connected.
func TestEndpointsReadAsANodeIsReplacedAreTheNewConfigs(t *testing.T) {
	mc := newMock(t, mockcluster.Options{Nodes: 3})
	require.NoError(t, mc.Failover(2)) // the config names nodes 0 and 1
	// Node 2's logins wait until the test ends: it does not connect.
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	mc.Control(mockcluster.Match{Nodes: []int{2}, OpCodes: []memdx.OpCode{memdx.OpSASLAuth, memdx.OpSASLStep}}, 0,
		func(*mockcluster.Request) (mockcluster.Action, bool) { return mockcluster.Action{Hold: release}, true })
	c := connectCluster(t, testConfig(mc))
	all := c.Topology().all
	require.Len(t, all, 2)
	leaving := all[1]
	require.Equal(t, mc.Node(1).Addr(), leaving.addr)
	leaving.mu.Lock()
	locked := true
	defer func() {
		if locked {
			leaving.mu.Unlock()
		}
	}()
	got := make(chan []Endpoint, 1)
	go readEndpoints(c, got)
	// Endpoints has read the topology of nodes 0 and 1, and waits for 1.
	waitForStack(t, "Endpoints waits for node 1", "cluster.readEndpoints", "cluster.(*Node).endpoints", "sync.(*Mutex).Lock")
	r, err := mc.StartRebalance(mockcluster.RebalanceOptions{Nodes: []int{0, 2}})
	require.NoError(t, err)
	require.NoError(t, r.Finish())
	select {
	case <-leaving.ctx.Done(): // node 1 left the config installed
	case <-time.After(time.Minute):
		t.Fatal("node 1 did not leave the config within a minute")
	}
	leaving.mu.Unlock()
	locked = false
	var eps []Endpoint
	select {
	case eps = <-got:
	case <-time.After(time.Minute):
		t.Fatal("Endpoints did not return")
	}
	states := map[string]EndpointState{}
	for _, e := range eps {
		if e.State != EndpointDisconnecting {
			states[e.Node] = e.State
		}
	}
	assert.Equal(t, map[string]EndpointState{mc.Node(0).Addr(): EndpointConnected, mc.Node(2).Addr(): EndpointConnecting}, states,
		"the nodes of the config held: %+v", eps)
}

// awaitEndpoint waits (woken by each change, no polling) until ok holds
// for the endpoint of node addr; a minute is a bound no healthy run nears.
func awaitEndpoint(t *testing.T, c *Cluster, addr string, ok func(Endpoint) bool) {
	t.Helper()
	deadline := time.NewTimer(time.Minute)
	defer deadline.Stop()
	for {
		changed := c.HealthChanged()
		for _, e := range c.Endpoints() {
			if e.Node == addr && ok(e) {
				return
			}
		}
		select {
		case <-changed:
		case <-deadline.C:
			t.Fatalf("the endpoint of node %s is not as awaited after a minute: %+v", addr, c.Endpoints())
		}
	}
}

// readEndpoints sends c's endpoints to out; its name marks its goroutine's
// stack (waitForStack).
func readEndpoints(c *Cluster, out chan<- []Endpoint) { out <- c.Endpoints() }
