package httpconfig

import (
	"context"
	"testing"
	"time"

	"github.com/kvwire/kvwire/internal/dnsctx/dnsctxtest"
)

// A fetch from a node given by host name whose DNS server does not answer
// ends its lookup when its context ends (a client's Close): the lookup's
// queries do not go on until the resolver's timeout (5 s) past it.
func TestFetchByNameEndsItsLookupWithTheContext(t *testing.T) {
	dns := dnsctxtest.New(t)
	c := New(Config{Bucket: "default", Resolver: dns.Resolver, ConnectTimeout: time.Hour})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	fetched := make(chan error, 1)
	go func() {
		_, _, err := c.Fetch(ctx, "silent.kvwire.test:8091")
		fetched <- err
	}()
	dns.AwaitReading(t, 1)
	ended := time.Now()
	cancel()
	select {
	case err := <-fetched:
		if err == nil {
			t.Fatal("Fetch from a name the DNS does not answer for succeeded")
		}
	case <-time.After(dnsctxtest.Waits):
		t.Fatal("Fetch did not return after its context ended")
	}
	dns.EndedWith(t, ended)
}
