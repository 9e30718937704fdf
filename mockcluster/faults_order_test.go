package mockcluster

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/kvwire/kvwire/memdx"
)

// A Control function that reads what the requests before it did (the chaos
// harness reads Bucket.MutationCount to tell which request was applied)
// must find the request it saw last applied, even when the next one came on
// another connection: the function and the node's handling of the request
// are one step. Before, the node handled the request after releasing the
// fault lock, so with two connections the second request's call could run
// first: it saw the count without the first request, and the chaos run
// credited the first request's mutation to the second ("duplicated 1,
// resent 1" under -chaos.configs=pool).
//
// The first request's handling is stopped in the cluster's clock, after its
// call returned. If it then holds the fault lock the second request cannot
// be judged before it was applied; if not, the second request's call runs
// while the first waits, as a loaded machine may order them.
func TestControlSeesEarlierRequestApplied(t *testing.T) {
	type gate struct{ reached, release chan struct{} }
	var armed atomic.Pointer[gate]
	c := newCluster(t, Options{Clock: func() time.Time {
		if g := armed.Swap(nil); g != nil {
			close(g.reached)
			<-g.release
		}
		return time.Now()
	}})
	b := c.Bucket(DefaultBucket)
	const key = "ordered"
	addr := c.Node(ownerOf(b, key)).Addr()
	first := bootstrap(t, addr, DefaultBucket, nil)
	second := bootstrap(t, addr, DefaultBucket, nil)

	g := &gate{reached: make(chan struct{}), release: make(chan struct{})}
	var countAtB uint64
	bSeen := make(chan struct{})
	ctl := c.Control(Match{OpCodes: []memdx.OpCode{memdx.OpSet}, Key: key}, 0, func(r *Request) (Action, bool) {
		n := b.MutationCount("", "", key)
		switch string(r.Packet.Value) {
		case "a":
			armed.Store(g) // its handling stops in the clock, after this returns
		case "b":
			countAtB = n
			close(bSeen)
		}
		return Action{}, false
	})
	defer ctl.Remove()

	oa := first.send(keyReq(first, b, set(key, "a")))
	<-g.reached
	held := !c.faults.mu.TryLock()
	if !held {
		c.faults.mu.Unlock()
	}
	ob := second.send(keyReq(second, b, set(key, "b")))
	if !held {
		<-bSeen // the second request is judged while the first waits
	}
	close(g.release)
	if p := first.recv(oa); p.Status != memdx.StatusSuccess {
		t.Fatalf("first SET: %s", p.Status)
	}
	if p := second.recv(ob); p.Status != memdx.StatusSuccess {
		t.Fatalf("second SET: %s", p.Status)
	}
	<-bSeen
	if countAtB != 1 {
		t.Fatalf("the Control function saw %d mutations at the second SET, after it had seen the first one: "+
			"the first was not applied yet, so its mutation counts as the second's", countAtB)
	}
	if n := b.MutationCount("", "", key); n != 2 {
		t.Fatalf("%d mutations, want 2", n)
	}
}
