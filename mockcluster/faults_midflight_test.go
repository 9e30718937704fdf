package mockcluster

import (
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/kvwire/kvwire/memdx"
)

// A Control registered while a request no fault judged (none was
// registered when it came) is being handled waits for that request:
// Control's promise, a request for a document handled before the call for
// the next request for it, holds for requests that came before the
// Control too. The mock's path for a cluster without faults took no
// ordering lock, so a Control registered meanwhile could judge the next
// request for the document while the first was still being applied.
func TestControlRegisteredWhileARequestIsMidFlight(t *testing.T) {
	t.Cleanup(func() { testHookUnjudged = nil })
	reached, release := make(chan struct{}), make(chan struct{})
	var reachOnce, releaseOnce sync.Once
	testHookUnjudged = func(p *memdx.Packet) {
		if p.OpCode == memdx.OpSet && strings.HasSuffix(string(p.Key), "k") {
			reachOnce.Do(func() { close(reached); <-release })
		}
	}
	c := newCluster(t, Options{Nodes: 1})
	unblock := func() { releaseOnce.Do(func() { close(release) }) }
	t.Cleanup(unblock) // before Close, which waits for the held request
	b := c.Bucket(DefaultBucket)
	first := bootstrap(t, c.Node(0).Addr(), DefaultBucket, nil)
	second := bootstrap(t, c.Node(0).Addr(), DefaultBucket, nil)

	op1 := first.send(keyReq(first, b, set("k", "1")))
	<-reached // the first SET is being handled, judged by no fault

	var mu sync.Mutex
	var seen []string
	registered := make(chan struct{})
	var ctl *Control
	go func() {
		ctl = c.Control(Match{Key: "k", OpCodes: []memdx.OpCode{memdx.OpSet}}, 0, func(*Request) (Action, bool) {
			d, _ := b.Get("", "", "k")
			mu.Lock()
			seen = append(seen, string(d.Value))
			mu.Unlock()
			return Action{}, false
		})
		close(registered)
	}()
	// Control must wait for the SET in flight: it returned (the bug), or
	// its goroutine blocks in the registry's ordering lock.
	for !blockedRegistering() {
		select {
		case <-registered:
			unblock()
			t.Fatal("Control returned while a request it could not judge was still being handled")
		default:
		}
		runtime.Gosched()
	}
	unblock()
	<-registered
	defer ctl.Remove()
	if p := first.recv(op1); p.Status != memdx.StatusSuccess {
		t.Fatalf("first SET: %s", p.Status)
	}
	if p := second.do(keyReq(second, b, set("k", "2"))); p.Status != memdx.StatusSuccess {
		t.Fatalf("second SET: %s", p.Status)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != 1 || seen[0] != "1" {
		t.Fatalf("the Control judged the second SET seeing %q, want the first applied (\"1\")", seen)
	}
}

// blockedRegistering reports whether a goroutine waits in the fault
// registry's add for its ordering lock.
func blockedRegistering() bool {
	buf := make([]byte, 1<<20)
	for _, g := range strings.Split(string(buf[:runtime.Stack(buf, true)]), "\n\n") {
		if strings.Contains(g, "(*faultRegistry).add") && strings.Contains(g, "sync.(*RWMutex).Lock") {
			return true
		}
	}
	return false
}
