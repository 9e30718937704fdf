package main

import (
	"encoding/binary"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kvwire/kvwire/memdx"
)

// rawJob is the wire limit: the least a memcached-binary client can do.
// Each of conns goroutines owns one socket and loops: encode window GETs
// (memdx) for the next window keys, send them in one Write, read until all
// window responses have arrived, check each status and value length. No
// multiplexing, no opaque table, no result copies, no timeouts per request.
// With window 1 on one connection it is the unpipelined round trip.
//
// Latency: the recorder (latency.go) is asked once per window for its
// window requests; a window that carries timed requests is timed whole, and
// each of them is recorded with the window's time (for window 1, exactly
// as the clients' loops).
type rawJob struct {
	addr          string
	conns, window int
	ks            *keyset
	ncs           []net.Conn
}

func (j *rawJob) prepare() error {
	if len(j.ncs) > 0 {
		return nil
	}
	for range j.conns {
		nc, err := dialRaw(j.addr)
		if err != nil {
			j.close()
			return err
		}
		j.ncs = append(j.ncs, nc)
	}
	return nil
}

// rawAnswer reads a whole answer packet p's status and value length.
func rawAnswer(p []byte) (status uint16, valueLen int) {
	extras, key := int(p[4]), int(binary.BigEndian.Uint16(p[2:4]))
	return binary.BigEndian.Uint16(p[6:8]), len(p) - memdx.HeaderSize - extras - key
}

// dialRaw connects a raw loop to addr, with Nagle's algorithm off (Go's
// default, set explicitly): a request is sent when it is written.
func dialRaw(addr string) (net.Conn, error) {
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		return nil, err
	}
	if tc, ok := nc.(*net.TCPConn); ok {
		_ = tc.SetNoDelay(true)
	}
	return nc, nil
}

func (j *rawJob) close() {
	for _, nc := range j.ncs {
		_ = nc.Close()
	}
	j.ncs = nil
}

func (j *rawJob) run(gt *gate, recs []*recorder) (int64, error) {
	var (
		wg    sync.WaitGroup
		total atomic.Int64
		first atomic.Pointer[error]
	)
	n := len(j.ks.keys)
	for g, nc := range j.ncs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			gt.wait()
			ops, err := j.loop(nc, g*n/len(j.ncs), recs[g], &gt.stop)
			total.Add(ops)
			if err != nil {
				keepFirst(&first, err)
			}
		}()
	}
	gt.open(len(j.ncs))
	wg.Wait()
	if p := first.Load(); p != nil {
		return total.Load(), *p
	}
	return total.Load(), nil
}

func (j *rawJob) loop(nc net.Conn, idx int, rec *recorder, stop *atomic.Bool) (int64, error) {
	// A hung server must not hang the harness: one deadline for the run.
	_ = nc.SetDeadline(time.Now().Add(time.Minute))
	defer func() { _ = nc.SetDeadline(time.Time{}) }()
	n := len(j.ks.keys)
	want := len(j.ks.value)
	out := make([]byte, 0, j.window*64)
	in := make([]byte, max(256<<10, 2*j.window*(want+64)))
	var ops int64
	for !stop.Load() {
		out = out[:0]
		for range j.window {
			req := memdx.NewGet(j.ks.bkeys[idx])
			var err error
			if out, err = req.AppendTo(out, uint32(idx+1)); err != nil {
				return ops, err
			}
			if idx++; idx == n {
				idx = 0
			}
		}
		k := rec.begin(j.window)
		if _, err := nc.Write(out); err != nil {
			return ops, err
		}
		r, w := 0, 0
		for got := 0; got < j.window; {
			if w-r >= memdx.HeaderSize {
				size, err := memdx.PacketSize(in[r:w], 0)
				if err != nil {
					return ops, err
				}
				if w-r >= size {
					p := in[r : r+size]
					st, vlen := rawAnswer(p)
					if st != 0 {
						return ops, fmt.Errorf("raw GET: status 0x%04x", st)
					}
					if vlen != want {
						return ops, errShortValue
					}
					r += size
					got++
					continue
				}
			}
			w = copy(in, in[r:w])
			r = 0
			m, err := nc.Read(in[w:])
			if err != nil {
				return ops, err
			}
			w += m
		}
		rec.end(k)
		ops += int64(j.window)
	}
	return ops, nil
}
