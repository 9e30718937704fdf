package conn

import (
	"testing"
	"time"

	"github.com/kvwire/kvwire/memdx"
	"github.com/kvwire/kvwire/mockcluster"
)

// A connection that asked for HELLO Tracing hands its handler responses
// that carry the server's time: the mock's injected delay shows up in
// Packet.ServerDuration, at least the delay and at most the round trip.
func TestServerDurationReachesHandler(t *testing.T) {
	const delay = 100 * time.Millisecond
	mc := newMock(t, mockcluster.Options{})
	b := mc.Bucket(mockcluster.DefaultBucket)
	o := adminOpts(mockcluster.DefaultBucket)
	o.Features = []memdx.HelloFeature{memdx.FeatureTracing, memdx.FeatureAltRequests}
	c := dialMemcached(t, mc.Node(0).Addr(), o)
	if !c.Features().Has(memdx.FeatureTracing) {
		t.Fatalf("Tracing not granted: %v", c.Features())
	}
	key := []byte("slow")
	if _, err := b.Set("", "", string(key), []byte("v"), 0, 0); err != nil {
		t.Fatal(err)
	}
	h := mc.AddFault(mockcluster.Fault{Match: mockcluster.Match{OpCodes: []memdx.OpCode{memdx.OpGet}, Key: "slow"},
		Action: mockcluster.Action{Delay: delay}, Times: 1})
	defer h.Remove()

	get := memdx.NewGet(key)
	get.Vbucket = b.VbucketForKey(key)
	var d time.Duration
	var ok bool
	start := time.Now()
	if err := c.Do(testCtx(t), &get, func(p *memdx.Packet) error {
		d, ok = p.ServerDuration()
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	rtt := time.Since(start)
	// The 2-byte encoding is within 0.2% at these magnitudes.
	if !ok || float64(d) < 0.998*float64(delay) || float64(d) > 1.002*float64(rtt) {
		t.Fatalf("server duration %v (present %v), want at least %v and at most the %v round trip", d, ok, delay, rtt)
	}
}
