package main

import (
	"bufio"
	"encoding/binary"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kvwire/kvwire/memdx"
)

// runLockstep runs j, as the harness runs a job, until stop says so (it
// is polled) or the run ends on an error.
func runLockstep(t *testing.T, j *lockstepJob, stop func() bool) (int64, error) {
	t.Helper()
	if err := j.prepare(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(j.close)
	recs := make([]*recorder, j.conc)
	for i := range recs {
		recs[i] = newRecorder(1, uint64(i+1))
	}
	g := newGate(time.Hour, func() {})
	defer g.end()
	ended := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for !stop() {
			select {
			case <-tick.C:
			case <-ended:
				return
			}
		}
		g.stop.Store(true)
	}()
	defer wg.Wait()
	defer close(ended)
	return j.run(g, recs)
}

func never() bool { return false }

func TestLockstepSendsEachGoroutinesRequestOncePerBatch(t *testing.T) {
	const conc = 8
	ks := newKeyset("t:", 100, 32, 1)
	var (
		mu       sync.Mutex
		opaques  []uint32
		answered atomic.Int64
	)
	addr := fakeServer(t, func(nc net.Conn) {
		r, w := bufio.NewReader(nc), bufio.NewWriter(nc)
		hdr := make([]byte, memdx.HeaderSize)
		for {
			if r.Buffered() == 0 && w.Flush() != nil {
				return
			}
			if _, err := io.ReadFull(r, hdr); err != nil {
				return
			}
			body := make([]byte, binary.BigEndian.Uint32(hdr[8:12]))
			if _, err := io.ReadFull(r, body); err != nil {
				return
			}
			opaque := binary.BigEndian.Uint32(hdr[12:16])
			mu.Lock()
			opaques = append(opaques, opaque)
			mu.Unlock()
			res := make([]byte, memdx.HeaderSize+4)
			res[0], res[1], res[4] = 0x81, hdr[1], 4
			binary.BigEndian.PutUint32(res[8:12], uint32(4+len(ks.value)))
			binary.BigEndian.PutUint32(res[12:16], opaque)
			_, _ = w.Write(res)
			_, _ = w.Write(ks.value)
			answered.Add(1)
		}
	})
	ops, err := runLockstep(t, newLockstepJob(addr, conc, ks), func() bool { return answered.Load() >= 50*conc })
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if ops != int64(len(opaques)) {
		t.Errorf("%d ops counted, the server answered %d requests", ops, len(opaques))
	}
	// Every whole batch of conc requests carries each goroutine's once;
	// after the first goroutine stops, the batches are of the rest.
	whole := 0
	for len(opaques) >= conc {
		seen := map[uint32]bool{}
		for _, o := range opaques[:conc] {
			seen[o] = true
		}
		if len(seen) < conc {
			break
		}
		whole++
		opaques = opaques[conc:]
	}
	if whole < 50 {
		t.Fatalf("only the first %d batches of %d requests had a request from each goroutine; then %v", whole, conc, opaques[:min(len(opaques), 2*conc)])
	}
	for _, o := range opaques {
		if o < 1 || o > conc {
			t.Fatalf("opaque %d: not a goroutine's", o)
		}
	}
}

func TestLockstepEndsWhenTheServerCloses(t *testing.T) {
	const conc = 8
	ks := newKeyset("t:", 100, 32, 1)
	addr := fakeServer(t, func(nc net.Conn) {
		hdr := make([]byte, memdx.HeaderSize)
		_, _ = io.ReadFull(nc, hdr) // the first request, then the end
		_ = nc.Close()
	})
	// Never stopped: the run must end on the connection's error.
	_, err := runLockstep(t, newLockstepJob(addr, conc, ks), never)
	if err == nil || !strings.Contains(err.Error(), "lockstep") {
		t.Fatalf("run: %v, want the connection's error", err)
	}
}

func TestLockstepFailsOnAMiss(t *testing.T) {
	ks := newKeyset("t:", 10, 32, 1)
	miss := map[string]bool{}
	for _, k := range ks.keys {
		miss[k] = true
	}
	_, err := runLockstep(t, newLockstepJob(fakeMemcached(t, ks.value, miss), 4, ks), never)
	if err == nil || !strings.Contains(err.Error(), "status") {
		t.Fatalf("run: %v, want a status error", err)
	}
}

func TestLockstepEndsOnASecondAnswer(t *testing.T) {
	ks := newKeyset("t:", 10, 32, 1)
	addr := fakeServer(t, func(nc net.Conn) {
		// Each answer twice: the reader must not block on a goroutine
		// that has its answer already.
		serveFake(&twice{nc}, ks.value, nil)
	})
	_, err := runLockstep(t, newLockstepJob(addr, 4, ks), never)
	if err == nil || !strings.Contains(err.Error(), "second answer") {
		t.Fatalf("run: %v, want the second answer's error", err)
	}
}

// twice is a connection whose every Write is sent twice.
type twice struct{ net.Conn }

func (c *twice) Write(b []byte) (int, error) {
	if _, err := c.Conn.Write(b); err != nil {
		return 0, err
	}
	return c.Conn.Write(b)
}
