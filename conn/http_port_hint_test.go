package conn

import (
	"net"
	"strings"
	"testing"

	"github.com/kvwire/kvwire/mockcluster"
)

// A Dial to an HTTP port (the cluster manager's 8091 or cluster_run's
// 9000, given as a KV port) gets an HTTP answer to its HELLO: the error
// says so and what to write, rather than only that 0x48 ('H') is no
// memcached magic.
func TestDialToHTTPPortSaysItIsHTTP(t *testing.T) {
	peer := tlsPeer(t, func(nc net.Conn) {
		nc.Read(make([]byte, 4096))
		nc.Write([]byte("HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n"))
	})
	_, err := Dial(testCtx(t), peer, adminOpts(mockcluster.DefaultBucket))
	if err == nil || !strings.Contains(err.Error(), "answered in HTTP") || !strings.Contains(err.Error(), "=http") {
		t.Fatalf("Dial: %v; want it to say the server answered in HTTP, and how to bootstrap over HTTP", err)
	}
	o := adminOpts("")
	o.Memcached = true
	if _, err := Dial(testCtx(t), peer, o); err == nil || !strings.Contains(err.Error(), "answered in HTTP") {
		t.Fatalf("memcached Dial: %v; want it to say the server answered in HTTP", err)
	}
}
