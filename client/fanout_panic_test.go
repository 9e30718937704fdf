package client

import (
	"context"
	"testing"

	"github.com/kvwire/kvwire/mockcluster"
)

// panicking is an Observer whose AttemptEnd panics with boom.
type panicking struct{}

const boom = "observer panicked"

func (panicking) AttemptStart(AttemptInfo)      {}
func (panicking) AttemptEnd(AttemptInfo, error) { panic(boom) }

// A panic in the caller's code that a call reading several copies or
// nodes at once runs (an Observer, a RetryStrategy) reaches the caller's
// goroutine, once the call's other reads have ended, as it does from
// Get: the caller may recover it, and no goroutine of the call is left
// behind. Raised on the goroutine of one copy's read, it used to end the
// program, whatever the caller's recover.
func TestPanicInACallbackOfAFannedOutCallReachesTheCaller(t *testing.T) {
	mc := newMock(t, mockcluster.Options{Nodes: 2,
		Buckets: []mockcluster.BucketOptions{{Name: mockcluster.DefaultBucket, NumReplicas: 1}}})
	c := connect(t, mc, &Options{Observer: panicking{}})
	col := c.DefaultCollection()
	ctx := context.Background()
	for name, call := range map[string]func(){
		"GetAnyReplica":       func() { _, _ = col.GetAnyReplica(ctx, "k", nil) },
		"GetAllReplicas":      func() { _, _ = col.GetAllReplicas(ctx, "k", nil) },
		"LookupInAllReplicas": func() { _, _ = col.LookupInAllReplicas(ctx, "k", []LookupInSpec{GetSpec("a", nil)}, nil) },
		"Ping":                func() { _ = c.Ping(ctx) },
		"Stats":               func() { _, _ = c.Stats(ctx, "", nil) },
	} {
		t.Run(name, func(t *testing.T) {
			var got any
			func() {
				defer func() { got = recover() }()
				call()
			}()
			if got != boom {
				t.Fatalf("recovered %v, want the observer's panic", got)
			}
		})
	}
}

// The same for a scan, whose vbuckets are read on goroutines of its own:
// a panic in the caller's code there (here its Observer, on the scan's
// first create) stops the scan and reaches the caller's goroutine in Next,
// once the scan's goroutines have ended.
func TestPanicInACallbackOfAScanReachesTheCaller(t *testing.T) {
	mc := newMock(t, mockcluster.Options{Nodes: 2})
	c := connect(t, mc, &Options{Observer: panicking{}})
	sr, err := c.DefaultCollection().Scan(context.Background(), RangeScan{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var got any
	func() {
		defer func() { got = recover() }()
		for sr.Next() {
		}
	}()
	if got != boom {
		t.Fatalf("recovered %v, want the observer's panic", got)
	}
	if sr.Next() {
		t.Fatal("Next after the panic moved on")
	}
	_ = sr.Close()
}
