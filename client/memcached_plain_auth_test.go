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

// memcached:// offers only SASL PLAIN, which carries the password in clear.
// Against a server with SASL, without TLS and without the opt-in, Connect
// asks for the mechanisms (no secret) and refuses: the password never
// reaches the wire, and the error says how to opt in. With the opt-in the
// same recorder sees the password, which shows it would have seen it.
func TestMemcachedPlainAuthNeedsTLSOrOptIn(t *testing.T) {
	const user, pass = "wire-user", "wire-secret-5b9e1c"
	ctx := context.Background()

	w := startSASLRecorder(t)
	c, err := Connect(ctx, "memcached://"+w.addr, testOptions(&Options{Username: user, Password: pass}))
	if c != nil {
		_ = c.Close()
	}
	sent := w.stop()
	assert.NotContains(t, string(sent), pass, "the password went out in clear")
	assert.Equal(t, []byte{opSASLListMechs}, w.opcodes(), "only SASL_LIST_MECHS may go out before the refusal")
	require.Error(t, err)
	assert.ErrorIs(t, err, ErrAuthenticationFailure)
	assert.ErrorIs(t, err, ErrPlainAuthRefused)
	assert.Contains(t, err.Error(), "allow_plain_auth=true")
	assert.Contains(t, err.Error(), "memcacheds://")
	assert.NotContains(t, err.Error(), pass)

	w = startSASLRecorder(t)
	c, err = Connect(ctx, "memcached://"+w.addr+"?allow_plain_auth=true", testOptions(&Options{Username: user, Password: pass}))
	if c != nil {
		_ = c.Close()
	}
	require.Error(t, err, "the recorder refuses the login")
	assert.Contains(t, string(w.stop()), "\x00"+user+"\x00"+pass, "with the opt-in PLAIN is sent")
}

// A user given for a memcached without SASL (a user meant for another
// server, say, from the environment) is not sent and does not stop
// Connect: the client works unauthenticated, as libmemcached's does.
func TestMemcachedUserIgnoredWithoutSASL(t *testing.T) {
	addr := memcachedAddr(t, false)
	ctx := context.Background()
	c, err := Connect(ctx, "memcached://"+addr, &Options{Username: "Administrator", Password: "password"})
	require.NoError(t, err)
	defer c.Close()
	key := "client-test:" + t.Name()
	_, err = c.DefaultCollection().Upsert(ctx, key, []byte("v"), nil)
	require.NoError(t, err)
	r, err := c.DefaultCollection().Get(ctx, key, nil)
	require.NoError(t, err)
	assert.Equal(t, "v", string(r.Value))
}

const (
	opSASLListMechs = 0x20
	opSASLAuth      = 0x21
)

// saslRecorder is a memcached with SASL as far as a login goes: it answers
// SASL_LIST_MECHS with PLAIN, records every request's bytes, and refuses
// SASL_AUTH (then hangs up, as does anything else).
type saslRecorder struct {
	addr string
	ln   net.Listener
	wg   sync.WaitGroup
	mu   sync.Mutex
	got  []byte
	ops  []byte
}

func startSASLRecorder(t *testing.T) *saslRecorder {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	w := &saslRecorder{addr: ln.Addr().String(), ln: ln}
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			w.wg.Add(1)
			go w.serve(c)
		}
	}()
	t.Cleanup(func() { w.stop() })
	return w
}

func (w *saslRecorder) serve(c net.Conn) {
	defer w.wg.Done()
	defer c.Close()
	for {
		hdr := make([]byte, 24)
		if _, err := io.ReadFull(c, hdr); err != nil {
			return
		}
		body := make([]byte, binary.BigEndian.Uint32(hdr[8:12]))
		if _, err := io.ReadFull(c, body); err != nil {
			return
		}
		w.mu.Lock()
		w.got = append(append(w.got, hdr...), body...)
		w.ops = append(w.ops, hdr[1])
		w.mu.Unlock()
		var status uint16
		var value []byte
		switch hdr[1] {
		case opSASLListMechs:
			value = []byte("PLAIN")
		case opSASLAuth:
			status = 0x20 // AUTH_ERROR
		default:
			return
		}
		res := make([]byte, 24, 24+len(value))
		res[0], res[1] = 0x81, hdr[1]
		binary.BigEndian.PutUint16(res[6:], status)
		binary.BigEndian.PutUint32(res[8:], uint32(len(value)))
		copy(res[12:16], hdr[12:16]) // opaque
		if _, err := c.Write(append(res, value...)); err != nil {
			return
		}
	}
}

// opcodes returns the opcodes of the requests received, in order.
func (w *saslRecorder) opcodes() []byte {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]byte(nil), w.ops...)
}

// stop closes the listener, waits for every connection to end and
// returns the bytes received.
func (w *saslRecorder) stop() []byte {
	_ = w.ln.Close()
	w.wg.Wait()
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]byte(nil), w.got...)
}
