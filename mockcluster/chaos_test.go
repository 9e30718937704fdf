package mockcluster

import (
	"fmt"
	"math/rand"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kvwire/kvwire/memdx"
)

// Workers hammer every node with pipelined requests while the test changes
// the topology, injects faults and drops connections: under -race this
// looks for data races and deadlocks in the mock itself. Afterwards every
// acknowledged SET (with its CAS) must be readable unless a later write
// replaced it.
func TestChaos(t *testing.T) {
	c := newCluster(t, Options{Buckets: []BucketOptions{{Name: DefaultBucket, NumVbuckets: 32}}})
	b := c.Bucket(DefaultBucket)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var acked sync.Map // key -> cas of the last acknowledged SET
	var ops atomic.Int64
	feats := append([]memdx.HelloFeature{memdx.FeatureUnorderedExecution, memdx.FeatureClustermapChangeNotificationBrief}, stdFeatures...)
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			rng := rand.New(rand.NewSource(int64(w)))
			for {
				select {
				case <-stop:
					return
				default:
				}
				nodes := c.Nodes()
				n := nodes[rng.Intn(len(nodes))]
				nc, err := net.DialTimeout("tcp", n.Addr(), time.Second)
				if err != nil {
					continue // stopped or removed node
				}
				chaosSession(nc, b, w, rng, feats, stop, &acked, &ops)
				nc.Close()
			}
		}(w)
	}
	rng := rand.New(rand.NewSource(99))
	// Six rounds of each change, each paced by the workers' answers (64 a
	// round), not by time: as much traffic meets every change on a loaded
	// machine as on a fast one. The minute bounds a failure.
	bound := time.Now().Add(time.Minute)
	for round := 0; round < 36; round++ {
		from := ops.Load()
		for ops.Load() < from+64 {
			if time.Now().After(bound) {
				t.Fatalf("round %d: the workers got %d answers in all within a minute", round, ops.Load())
			}
			time.Sleep(time.Millisecond)
		}
		switch round % 6 {
		case 0:
			if _, err := c.AddNode(); err != nil {
				t.Fatal(err)
			}
		case 1:
			r, err := c.StartRebalance(RebalanceOptions{})
			if err != nil {
				t.Fatal(err)
			}
			for r.Remaining() > 0 {
				if _, err := r.Step(3); err != nil {
					t.Fatal(err)
				}
			}
			if err := r.Finish(); err != nil {
				t.Fatal(err)
			}
		case 2:
			h := c.AddFault(Fault{Match: Match{OpCodes: []memdx.OpCode{memdx.OpGet}}, Action: Action{Status: memdx.StatusTmpFail, Delay: time.Millisecond}, Times: 5})
			defer h.Remove()
		case 3:
			ns := c.Nodes()
			c.DropConnections()
			n := ns[rng.Intn(len(ns))]
			n.Stop()
			if err := n.Restart(); err != nil {
				t.Fatal(err)
			}
		case 4:
			if _, err := b.AddCollection("_default", fmt.Sprintf("c%d", round)); err != nil {
				t.Fatal(err)
			}
		case 5:
			ns := c.Nodes()
			if len(ns) > 3 {
				if err := c.RemoveNode(ns[len(ns)-1].ID()); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	close(stop)
	wg.Wait()
	if ops.Load() == 0 {
		t.Fatal("the workers got no answer at all")
	}
	// Every acknowledged SET's CAS is either the stored CAS or older than
	// it (a later SET of the same key, by the same worker, replaced it).
	acked.Range(func(k, v any) bool {
		d, ok := b.Get("", "", k.(string))
		if !ok || d.Cas < v.(uint64) {
			t.Errorf("key %s: acknowledged CAS %d, stored %v %d", k, v, ok, d.Cas)
		}
		return true
	})
	t.Logf("%d answers", ops.Load())
}

func chaosSession(nc net.Conn, b *Bucket, w int, rng *rand.Rand, feats []memdx.HelloFeature,
	stop chan struct{}, acked *sync.Map, ops *atomic.Int64) {
	cl := &rawClient{t: nopTB{}, nc: nc, feats: map[memdx.HelloFeature]bool{memdx.FeatureCollections: true}}
	var boot []byte
	for i, r := range []memdx.Request{
		memdx.NewHello(nil, feats),
		memdx.NewSASLAuth(memdx.MechPlain, memdx.PlainPayload(DefaultUser, DefaultPassword)),
		memdx.NewSelectBucket(DefaultBucket),
	} {
		boot, _ = r.AppendTo(boot, uint32(i))
	}
	_ = nc.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := nc.Write(boot); err != nil {
		return
	}
	pending := map[uint32]string{}
	opaque := uint32(100)
	for {
		select {
		case <-stop:
			return
		default:
		}
		var buf []byte
		for i := 0; i < 8; i++ {
			key := fmt.Sprintf("w%d-k%d", w, rng.Intn(20))
			var r memdx.Request
			switch rng.Intn(4) {
			case 0, 1:
				r = memdx.NewStore(memdx.OpSet, []byte(key), []byte("v"), 0, 0)
			case 2:
				r = memdx.NewGet([]byte(key))
			default:
				r = memdx.NewGetLocked([]byte(key), 1)
			}
			r = keyReq(cl, b, r)
			opaque++
			if r.OpCode == memdx.OpSet {
				pending[opaque] = key
			}
			buf, _ = r.AppendTo(buf, opaque)
		}
		if _, err := nc.Write(buf); err != nil {
			return
		}
		// Read until the last request of the batch is answered.
		for {
			p, err := cl.read(5 * time.Second)
			if err != nil {
				return
			}
			if p.Magic != memdx.MagicRes {
				continue
			}
			ops.Add(1)
			if key, ok := pending[p.Opaque]; ok {
				delete(pending, p.Opaque)
				if p.Status == memdx.StatusSuccess {
					acked.Store(key, p.Cas)
				}
			}
			if p.Opaque == opaque {
				break
			}
		}
	}
}

// nopTB lets rawClient's helpers run outside a test goroutine; chaos
// sessions use only read, which reports errors instead of failing.
type nopTB struct{ testing.TB }

func (nopTB) Helper() {}
