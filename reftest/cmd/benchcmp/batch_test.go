package main

import (
	"bufio"
	"encoding/binary"
	"io"
	"net"
	"strings"
	"sync"
	"testing"

	"github.com/kvwire/kvwire/memdx"
)

// fakeMemcached answers GET, GETKQ and NOOP on one connection as memcached
// does: a hit with the value (and the key for GETKQ), a GET miss with
// KEY_ENOENT, a quiet get's miss with nothing. Keys in miss are missing.
func fakeMemcached(t *testing.T, value []byte, miss map[string]bool) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var conns []net.Conn
	var mu sync.Mutex
	t.Cleanup(func() {
		_ = ln.Close()
		mu.Lock()
		for _, c := range conns {
			_ = c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, nc)
			mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				serveFake(nc, value, miss)
			}()
		}
	}()
	return ln.Addr().String()
}

func serveFake(nc net.Conn, value []byte, miss map[string]bool) {
	r := bufio.NewReader(nc)
	w := bufio.NewWriter(nc)
	hdr := make([]byte, memdx.HeaderSize)
	answer := func(op memdx.OpCode, status uint16, opaque uint32, key, val []byte) {
		h := make([]byte, memdx.HeaderSize)
		h[0] = 0x81
		h[1] = byte(op)
		binary.BigEndian.PutUint16(h[2:4], uint16(len(key)))
		extras := 0
		if status == 0 && op != memdx.OpNoop {
			extras = 4 // flags
		}
		h[4] = byte(extras)
		binary.BigEndian.PutUint16(h[6:8], status)
		binary.BigEndian.PutUint32(h[8:12], uint32(extras+len(key)+len(val)))
		binary.BigEndian.PutUint32(h[12:16], opaque)
		_, _ = w.Write(h)
		_, _ = w.Write(make([]byte, extras))
		_, _ = w.Write(key)
		_, _ = w.Write(val)
	}
	for {
		if r.Buffered() == 0 {
			if w.Flush() != nil {
				return
			}
		}
		if _, err := io.ReadFull(r, hdr); err != nil {
			return
		}
		op := memdx.OpCode(hdr[1])
		keyLen := int(binary.BigEndian.Uint16(hdr[2:4]))
		extLen := int(hdr[4])
		body := make([]byte, binary.BigEndian.Uint32(hdr[8:12]))
		if _, err := io.ReadFull(r, body); err != nil {
			return
		}
		opaque := binary.BigEndian.Uint32(hdr[12:16])
		key := body[extLen : extLen+keyLen]
		switch {
		case op == memdx.OpNoop:
			answer(op, 0, opaque, nil, nil)
		case miss[string(key)] && op.IsQuiet():
		case miss[string(key)]:
			answer(op, 0x0001, opaque, nil, []byte("Not found"))
		case op == memdx.OpGetKQ:
			answer(op, 0, opaque, key, value)
		default:
			answer(op, 0, opaque, nil, value)
		}
	}
}

func TestRawBatchReadsEveryAnswer(t *testing.T) {
	ks := newKeyset("t:", 16, 32, 1)
	for _, quiet := range []memdx.OpCode{memdx.OpGetQ, memdx.OpGetKQ, 0} {
		b := &rawBatch{addr: fakeMemcached(t, ks.value, nil), quiet: quiet, ks: ks}
		if err := b.prepare(); err != nil {
			t.Fatal(err)
		}
		for lo := 0; lo+8 <= 16; lo += 8 {
			if err := b.getBatch(lo, 8); err != nil {
				t.Errorf("quiet %v, keys %d..%d all hits: %v", quiet, lo, lo+7, err)
			}
		}
		b.close()
	}
}

func TestRawBatchFailsOnAMiss(t *testing.T) {
	ks := newKeyset("t:", 16, 32, 1)
	miss := map[string]bool{ks.keys[5]: true}
	for _, tc := range []struct {
		quiet memdx.OpCode
		want  string
	}{{memdx.OpGetQ, "opaque"}, {memdx.OpGetKQ, "opaque"}, {0, "status 0x0001"}} {
		b := &rawBatch{addr: fakeMemcached(t, ks.value, miss), quiet: tc.quiet, ks: ks}
		if err := b.prepare(); err != nil {
			t.Fatal(err)
		}
		err := b.getBatch(0, 8)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("quiet %v, key 5 of 0..7 missing: got %v, want an error with %q", tc.quiet, err, tc.want)
		}
		b.close()
	}
}

func TestRawBatchFailsOnAQuietMissAtTheEnd(t *testing.T) {
	// The last key's miss shows only as the NOOP arriving early.
	ks := newKeyset("t:", 16, 32, 1)
	b := &rawBatch{addr: fakeMemcached(t, ks.value, map[string]bool{ks.keys[7]: true}), quiet: memdx.OpGetQ, ks: ks}
	if err := b.prepare(); err != nil {
		t.Fatal(err)
	}
	defer b.close()
	if err := b.getBatch(0, 8); err == nil || !strings.Contains(err.Error(), "NOOP") {
		t.Errorf("key 7 of 0..7 missing: got %v, want the NOOP's error", err)
	}
}

func TestRawBatchFailsOnAShortValue(t *testing.T) {
	ks := newKeyset("t:", 16, 32, 1)
	for _, quiet := range []memdx.OpCode{memdx.OpGetQ, memdx.OpGetKQ, 0} {
		b := &rawBatch{addr: fakeMemcached(t, ks.value[:31], nil), quiet: quiet, ks: ks}
		if err := b.prepare(); err != nil {
			t.Fatal(err)
		}
		if err := b.getBatch(0, 8); err != errShortValue {
			t.Errorf("quiet %v, 31-byte values: got %v, want errShortValue", quiet, err)
		}
		b.close()
	}
}
