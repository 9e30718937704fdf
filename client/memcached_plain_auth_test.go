package client

import (
	"context"
	"encoding/binary"
	"io"
	"net"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// memcached:// offers only SASL PLAIN, which carries the password in clear:
// without TLS and without the opt-in, Connect refuses before dialing, so
// the password never reaches the wire, and the error says how to opt in.
// With the opt-in the same recorder sees the password, which shows it
// would have seen it.
func TestMemcachedPlainAuthNeedsTLSOrOptIn(t *testing.T) {
	const user, pass = "wire-user", "wire-secret-5b9e1c"
	ctx := context.Background()

	w := startWireRecorder(t)
	c, err := Connect(ctx, "memcached://"+w.addr, testOptions(&Options{Username: user, Password: pass}))
	if c != nil {
		_ = c.Close()
	}
	sent, accepted := w.stop(), w.connections()
	assert.NotContains(t, string(sent), pass, "the password went out in clear")
	// The recorder keeps only each connection's first request: no
	// connection at all is what shows that nothing, in any order, went out.
	assert.Zero(t, accepted, "Connect dialed although it must refuse first")
	t.Logf("bytes sent without the opt-in: %d", len(sent))
	require.Error(t, err)
	assert.ErrorIs(t, err, ErrAuthenticationFailure)
	assert.ErrorIs(t, err, ErrPlainAuthRefused)
	assert.Contains(t, err.Error(), "allow_plain_auth=true")
	assert.Contains(t, err.Error(), "memcacheds://")
	assert.NotContains(t, err.Error(), pass)

	w = startWireRecorder(t)
	c, err = Connect(ctx, "memcached://"+w.addr+"?allow_plain_auth=true", testOptions(&Options{Username: user, Password: pass}))
	if c != nil {
		_ = c.Close()
	}
	require.Error(t, err, "the recorder hangs up after the first request")
	assert.Contains(t, string(w.stop()), "\x00"+user+"\x00"+pass, "with the opt-in PLAIN is sent")
}

// wireRecorder accepts loopback connections and records the first request
// each sends (a 24-byte header and the body it announces), then hangs up.
type wireRecorder struct {
	addr string
	ln   net.Listener
	wg   sync.WaitGroup
	mu   sync.Mutex
	got  []byte
	n    int // connections accepted
}

// connections returns how many connections the recorder accepted.
func (w *wireRecorder) connections() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.n
}

func startWireRecorder(t *testing.T) *wireRecorder {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	w := &wireRecorder{addr: ln.Addr().String(), ln: ln}
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			w.mu.Lock()
			w.n++
			w.mu.Unlock()
			w.wg.Add(1)
			go w.record(c)
		}
	}()
	t.Cleanup(func() { w.stop() })
	return w
}

func (w *wireRecorder) record(c net.Conn) {
	defer w.wg.Done()
	defer c.Close()
	hdr := make([]byte, 24)
	n, err := io.ReadFull(c, hdr)
	body := []byte(nil)
	if err == nil {
		body = make([]byte, binary.BigEndian.Uint32(hdr[8:12]))
		var m int
		m, _ = io.ReadFull(c, body)
		body = body[:m]
	}
	w.mu.Lock()
	w.got = append(append(w.got, hdr[:n]...), body...)
	w.mu.Unlock()
}

// stop closes the listener, waits for every connection to be recorded and
// returns the bytes received.
func (w *wireRecorder) stop() []byte {
	_ = w.ln.Close()
	w.wg.Wait()
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]byte(nil), w.got...)
}
