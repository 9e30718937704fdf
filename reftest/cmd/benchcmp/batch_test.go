package main

import (
	"bufio"
	"encoding/binary"
	"fmt"
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
	return fakeServer(t, func(nc net.Conn) { serveFake(nc, value, miss) })
}

// fakeServer listens on a loopback port and runs serve for each connection
// accepted, until the test ends (then every connection is closed and every
// goroutine waited for). It returns the address.
func fakeServer(t *testing.T, serve func(net.Conn)) string {
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
				serve(nc)
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
		b := &rawBatch{rawConn: rawConn{addr: fakeMemcached(t, ks.value, nil)}, quiet: quiet, ks: ks}
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
		b := &rawBatch{rawConn: rawConn{addr: fakeMemcached(t, ks.value, miss)}, quiet: tc.quiet, ks: ks}
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
	b := &rawBatch{rawConn: rawConn{addr: fakeMemcached(t, ks.value, map[string]bool{ks.keys[7]: true})}, quiet: memdx.OpGetQ, ks: ks}
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
		b := &rawBatch{rawConn: rawConn{addr: fakeMemcached(t, ks.value[:31], nil)}, quiet: quiet, ks: ks}
		if err := b.prepare(); err != nil {
			t.Fatal(err)
		}
		if err := b.getBatch(0, 8); err != errShortValue {
			t.Errorf("quiet %v, 31-byte values: got %v, want errShortValue", quiet, err)
		}
		b.close()
	}
}

// fakeTextMemcached answers "gets" on one connection as memcached does: a
// VALUE line (flags 0, a cas) and the data for every key in order that is
// not in miss, then END. A key in fail makes it answer SERVER_ERROR instead.
func fakeTextMemcached(t *testing.T, value []byte, miss map[string]bool, fail string) string {
	t.Helper()
	return fakeServer(t, func(nc net.Conn) {
		r := bufio.NewReader(nc)
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				return
			}
			var out []byte
			keys := strings.Fields(line)[1:]
			for i, k := range keys {
				switch {
				case k == fail:
					out = []byte("SERVER_ERROR out of memory\r\n")
				case !miss[k]:
					out = fmt.Appendf(out, "VALUE %s 0 %d %d\r\n", k, len(value), 1000+i)
					out = append(append(out, value...), "\r\n"...)
				}
				if k == fail {
					break
				}
			}
			if fail == "" || !strings.Contains(line, " "+fail) {
				out = append(out, "END\r\n"...)
			}
			// Byte by byte: the client must wait for whole items.
			for i := range out {
				if _, err := nc.Write(out[i : i+1]); err != nil {
					return
				}
			}
		}
	})
}

func TestRawTextBatchReadsEveryAnswer(t *testing.T) {
	ks := newKeyset("t:", 16, 32, 1)
	b := &rawTextBatch{rawConn: rawConn{addr: fakeTextMemcached(t, ks.value, nil, "")}, ks: ks}
	if err := b.prepare(); err != nil {
		t.Fatal(err)
	}
	defer b.close()
	for lo := 0; lo+8 <= 16; lo += 8 {
		if err := b.getBatch(lo, 8); err != nil {
			t.Errorf("keys %d..%d all hits: %v", lo, lo+7, err)
		}
	}
}

func TestRawTextBatchFailsOnAMissAShortValueOrAnErrorLine(t *testing.T) {
	ks := newKeyset("t:", 16, 32, 1)
	for _, tc := range []struct {
		name  string
		value []byte
		miss  map[string]bool
		fail  string
		want  string
	}{
		{"key 5 missing", ks.value, map[string]bool{ks.keys[5]: true}, "", "is key " + ks.keys[6] + ", want " + ks.keys[5]},
		{"key 7 (the last) missing", ks.value, map[string]bool{ks.keys[7]: true}, "", "END after 7 of 8 keys"},
		{"31-byte values", ks.value[:31], nil, "", errShortValue.Error()},
		{"SERVER_ERROR at key 3", ks.value, nil, ks.keys[3], `"SERVER_ERROR out of memory"`},
	} {
		b := &rawTextBatch{rawConn: rawConn{addr: fakeTextMemcached(t, tc.value, tc.miss, tc.fail)}, ks: ks}
		if err := b.prepare(); err != nil {
			t.Fatal(err)
		}
		err := b.getBatch(0, 8)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want an error with %q", tc.name, err, tc.want)
		}
		b.close()
	}
}

func TestParseTextGetsUsesWholeItemsOnly(t *testing.T) {
	keys := [][]byte{[]byte("a"), []byte("bc")}
	answer := "VALUE a 0 3 7\r\nxyz\r\nVALUE bc 5 3\r\n\r\n\r\r\nEND\r\n"
	item2, end := len("VALUE a 0 3 7\r\nxyz\r\n"), len(answer)-len("END\r\n")
	// Every prefix of the answer is used up to its last whole item.
	for n := range len(answer) + 1 {
		used, answered, done, err := parseTextGets([]byte(answer[:n]), keys, 0, 3)
		if err != nil {
			t.Fatalf("%d bytes: %v", n, err)
		}
		wantUsed, wantAnswered := 0, 0
		switch {
		case n == len(answer):
			wantUsed, wantAnswered = n, 2
		case n >= end:
			wantUsed, wantAnswered = end, 2
		case n >= item2:
			wantUsed, wantAnswered = item2, 1
		}
		if used != wantUsed || answered != wantAnswered || done != (n == len(answer)) {
			t.Errorf("%d bytes: used %d, answered %d, end %v; want %d, %d, %v",
				n, used, answered, done, wantUsed, wantAnswered, n == len(answer))
		}
	}
	// Going on from the first item's end reads the rest.
	used, answered, done, err := parseTextGets([]byte(answer[item2:]), keys, 1, 3)
	if err != nil || used != len(answer)-item2 || answered != 2 || !done {
		t.Errorf("from item 2: used %d, answered %d, end %v, err %v; want %d, 2, true, nil",
			used, answered, done, err, len(answer)-item2)
	}
}

func TestParseTextGetsRejectsIllFormedAnswers(t *testing.T) {
	keys := [][]byte{[]byte("a")}
	for _, tc := range []struct{ answer, want string }{
		{"ERROR\r\n", `"ERROR"`},
		{"CLIENT_ERROR line too long\r\n", `"CLIENT_ERROR line too long"`},
		{"END\n", "not ended by CRLF"},
		{"END\r\n", "END after 0 of 1 keys"},
		{"VALUE a 0 x 1\r\n", "no byte count"},
		{"VALUE a 0\r\n", "no byte count"},
		{"VALUE a 0 3 1\r\nxyzEND\r\n", "not followed by CRLF"},
		{"VALUE a 0 3 1\r\nxyz\r\nVALUE a 0 3 1\r\nxyz\r\n", "after all 1 keys"},
	} {
		if _, _, _, err := parseTextGets([]byte(tc.answer), keys, 0, 3); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: got %v, want an error with %q", tc.answer, err, tc.want)
		}
	}
}
