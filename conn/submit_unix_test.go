//go:build unix

package conn

import (
	"fmt"
	"sync"
	"testing"
)

// Many callers on one connection: once the writer has counted submitAt
// requests in flight, callers submit, and every request still gets its own
// answer. Over loopback TCP (dialTCP), whose raw reads are unix-only.
func TestSubmitUnderLoad(t *testing.T) {
	release := make(chan struct{})
	c := dialTCP(t, Options{}, func(p *peer) {
		<-release // answer nothing until the connection is crowded
		answerAll(p)
	})
	const callers, each = 2 * submitAt, 20
	ctx := testCtx(t)
	var wg sync.WaitGroup
	errs := make(chan error, callers)
	for g := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				key := fmt.Sprintf("k%d-%d", g, i)
				if r := doGet(ctx, c, key); r.err != nil || r.value != key || r.calls != 1 {
					errs <- fmt.Errorf("%s: value %q, calls %d, err %v", key, r.value, r.calls, r.err)
					return
				}
			}
		}()
	}
	waitFor(t, "every caller's first request in flight", func() bool { return c.Pending() == callers })
	close(release)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	// The batch that carried the last of the first requests counted all of
	// them in flight, more than submitAt (nothing was answered before the
	// release): from then on the callers submit.
	if s := c.Stats(); s.Submitted == 0 {
		t.Fatalf("no request went through the submission stack: %+v", s)
	}
	if c.Pending() != 0 {
		t.Fatalf("%d still pending", c.Pending())
	}
}
