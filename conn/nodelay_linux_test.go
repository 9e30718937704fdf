package conn

import (
	"context"
	"net"
	"syscall"
	"testing"
)

// Dial turns TCP_NODELAY on, even when the dialer's connection had it off.
func TestTCPNoDelay(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		nc, err := ln.Accept()
		if err != nil {
			return
		}
		defer nc.Close()
		serveMemcachedBoot(newPeer(t, nc))
		drain(nc)
	}()
	var tcp *net.TCPConn
	c, err := Dial(testCtx(t), ln.Addr().String(), Options{Memcached: true,
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			var d net.Dialer
			nc, err := d.DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			tcp = nc.(*net.TCPConn)
			return nc, tcp.SetNoDelay(false)
		}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	raw, err := tcp.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var v int
	var serr error
	if err := raw.Control(func(fd uintptr) {
		v, serr = syscall.GetsockoptInt(int(fd), syscall.IPPROTO_TCP, syscall.TCP_NODELAY)
	}); err != nil || serr != nil {
		t.Fatal(err, serr)
	}
	if v == 0 {
		t.Fatal("TCP_NODELAY is off")
	}
}
