package mockcluster

import (
	"fmt"
	"sync"
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
// call returned. If it then holds the key's ordering lock the second request
// cannot be judged before it was applied; if not, the second request's call
// runs while the first waits, as a loaded machine may order them.
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
	// The lock the second request takes before it is judged.
	mu := c.faults.stripe(&Request{Bucket: DefaultBucket, Key: []byte(key)})
	held := !mu.TryLock()
	if !held {
		mu.Unlock()
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

// stoppedClock returns a cluster clock whose n-th reading after arm(n)
// stops until release is called (at the latest when the test ends, before
// the cluster stops), and a channel closed when that reading is reached.
func stoppedClock() (clock func() time.Time, arm func(n int32), reached <-chan struct{}, release func()) {
	var countdown atomic.Int32
	stop, cont := make(chan struct{}), make(chan struct{})
	var once sync.Once
	release = func() { once.Do(func() { close(cont) }) }
	clock = func() time.Time {
		if countdown.Load() > 0 && countdown.Add(-1) == 0 {
			close(stop)
			<-cont
		}
		return time.Now()
	}
	return clock, func(n int32) { countdown.Store(n) }, stop, release
}

// With a fault registered, a request for one document was handled under
// the cluster's fault lock, so no other connection's request was judged or
// handled meanwhile: a chaos run under faults had no concurrency between
// connections inside the mock. Requests for other documents need not wait
// for it (a Control function orders a document's requests only).
func TestFaultsHandleOtherDocumentsConcurrently(t *testing.T) {
	clock, arm, reached, release := stoppedClock()
	c := newCluster(t, Options{Nodes: 1, Clock: clock})
	t.Cleanup(release) // before the cluster stops
	b := c.Bucket(DefaultBucket)
	const slow = "slow"
	other := "other"
	for i := 0; c.faults.stripe(&Request{Bucket: DefaultBucket, Key: []byte(other)}) ==
		c.faults.stripe(&Request{Bucket: DefaultBucket, Key: []byte(slow)}); i++ {
		other = fmt.Sprintf("other%d", i)
	}
	first := bootstrap(t, c.Node(0).Addr(), DefaultBucket, nil)
	second := bootstrap(t, c.Node(0).Addr(), DefaultBucket, nil)
	ctl := c.Control(Match{OpCodes: []memdx.OpCode{memdx.OpSet}}, 0, func(r *Request) (Action, bool) {
		if string(r.Key) == slow {
			arm(1) // its handling stops in the clock, after this returns
		}
		return Action{}, false
	})
	defer ctl.Remove()
	defer release() // before Remove, which takes the fault lock

	oa := first.send(keyReq(first, b, set(slow, "a")))
	<-reached
	if p := second.do(keyReq(second, b, set(other, "b"))); p.Status != memdx.StatusSuccess {
		t.Fatalf("SET of another document while the first is handled: %s", p.Status)
	}
	release()
	if p := first.recv(oa); p.Status != memdx.StatusSuccess {
		t.Fatalf("first SET: %s", p.Status)
	}
}

// A RANGE_SCAN_CANCEL can reach kv_engine while a continue of the scan
// runs, which then ends RANGE_SCAN_CANCELLED. With a fault registered the
// mock handled the continue under the cluster's fault lock, so the cancel
// always came after it.
func TestFaultsRangeScanCancelDuringContinue(t *testing.T) {
	clock, arm, reached, release := stoppedClock()
	c := newCluster(t, Options{Nodes: 1, Clock: clock,
		Buckets: []BucketOptions{{Name: DefaultBucket, NumVbuckets: 1}}})
	t.Cleanup(release)
	b := c.Bucket(DefaultBucket)
	for _, k := range []string{"a", "b", "c", "d"} {
		if _, err := b.Set("", "", k, []byte(`{}`), 0, 0); err != nil {
			t.Fatal(err)
		}
	}
	scanner := bootstrap(t, c.Node(0).Addr(), DefaultBucket, nil)
	canceller := bootstrap(t, c.Node(0).Addr(), DefaultBucket, nil)
	r, err := memdx.NewRangeScanCreate(&memdx.RangeScanCreate{KeyOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	p := scanner.do(r)
	if p.Status != memdx.StatusSuccess {
		t.Fatalf("create: %s", p.Status)
	}
	id, err := memdx.DecodeRangeScanCreateResponse(&p)
	if err != nil {
		t.Fatal(err)
	}
	ctl := c.Control(Match{OpCodes: []memdx.OpCode{memdx.OpRangeScanContinue}}, 0, func(*Request) (Action, bool) {
		// The continue reads the clock for its lookup, then (under a
		// time limit) after each key: it stops after the first key.
		arm(2)
		return Action{}, false
	})
	defer ctl.Remove()
	defer release() // before Remove, which takes the fault lock

	oc := scanner.send(memdx.NewRangeScanContinue(memdx.RangeScanContinue{ID: id, TimeLimitMs: 60_000}))
	<-reached
	if p := canceller.do(memdx.NewRangeScanCancel(id)); p.Status != memdx.StatusSuccess {
		t.Fatalf("cancel during the continue: %s", p.Status)
	}
	release()
	for {
		p := scanner.recv(oc)
		if p.Status == memdx.StatusSuccess {
			continue
		}
		if p.Status != memdx.StatusRangeScanCancelled {
			t.Fatalf("continue of a scan cancelled meanwhile: %s", p.Status)
		}
		break
	}
}
