package conn

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"strings"
	"testing"

	"github.com/kvwire/kvwire/internal/kverr"
	"github.com/kvwire/kvwire/memdx"
	"github.com/kvwire/kvwire/mockcluster"
)

// A plain Dial (couchbase://) to a TLS port fails naming the likely
// cause: the server answered the plaintext HELLO with a TLS alert record
// (Go's crypto/tls and OpenSSL refuse the first bytes with a fatal alert:
// content type 0x15, version 0x03xx). The error used to be a bare HELLO
// "no response" with the connection's read error, giving no hint.
func TestDialPlainToTLSPortSaysUseTLS(t *testing.T) {
	mc := newMock(t, mockcluster.Options{TLS: true})
	goTLS := func(nc net.Conn) { tls.Server(nc, &tls.Config{}).Handshake() }
	rawAlert := func(nc net.Conn) { // as OpenSSL sends it (TLS 1.2 record version, protocol_version), then closes
		nc.Read(make([]byte, 4096))
		nc.Write([]byte{0x15, 0x03, 0x03, 0x00, 0x02, 0x02, 0x46})
	}
	for name, addr := range map[string]string{
		"mock TLS port":   mc.Node(0).TLSAddr(),
		"crypto/tls":      tlsPeer(t, goTLS),
		"OpenSSL's alert": tlsPeer(t, rawAlert),
	} {
		t.Run(name, func(t *testing.T) {
			_, err := Dial(testCtx(t), addr, adminOpts(mockcluster.DefaultBucket))
			if err == nil || !strings.Contains(err.Error(), "looks like a TLS port") ||
				!strings.Contains(err.Error(), "couchbases://") || !errors.Is(err, kverr.ErrBootstrap) {
				t.Fatalf("Dial: %v; want a bootstrap error saying it looks like a TLS port: use couchbases://", err)
			}
			o := adminOpts("")
			o.Memcached = true
			if _, err := Dial(testCtx(t), addr, o); err == nil || !strings.Contains(err.Error(), "memcacheds://") {
				t.Fatalf("memcached Dial: %v; want it to say memcacheds://", err)
			}
		})
	}
}

// A server that closes without a byte on port 11207, Couchbase's KV TLS
// port, is likely a TLS listener that refused the plaintext HELLO
// silently: the error says so, as a guess.
func TestDialPlainToPort11207ClosedSaysMaybeTLS(t *testing.T) {
	peer := tlsPeer(t, func(nc net.Conn) { nc.Read(make([]byte, 4096)) })
	_, err := Dial(testCtx(t), "node:11207", Options{DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, network, peer)
	}})
	if err == nil || !strings.Contains(err.Error(), "11207") || !strings.Contains(err.Error(), "couchbases://") {
		t.Fatalf("Dial: %v; want a hint that 11207 is the TLS port", err)
	}
}

// couchbases:// to a plain port: the error says to use couchbase://.
// A server that answers the ClientHello with a memcached packet fails the
// handshake with "first record does not look like a TLS handshake"; one
// that closes without a byte (kv_engine drops a connection whose first
// bytes have no valid magic) at port 11210, Couchbase's plain KV port, is
// likely a plain port. Both used to say only that the handshake failed.
func TestDialTLSToPlainPortSaysUsePlain(t *testing.T) {
	answers := tlsPeer(t, func(nc net.Conn) {
		nc.Read(make([]byte, 4096))
		nc.Write(encode(t, memdx.Packet{Magic: memdx.MagicRes, OpCode: memdx.OpHello, Status: memdx.StatusUnknownCommand}))
		io.Copy(io.Discard, nc)
	})
	o := adminOpts(mockcluster.DefaultBucket)
	o.TLSConfig = &tls.Config{InsecureSkipVerify: true}
	_, err := Dial(testCtx(t), answers, o)
	var te *TLSError
	var rh tls.RecordHeaderError
	if !errors.As(err, &te) || !errors.As(err, &rh) || !strings.Contains(err.Error(), "not a TLS port") ||
		!strings.Contains(err.Error(), "use couchbase://") {
		t.Fatalf("Dial: %v; want a *TLSError saying the port does not speak TLS: use couchbase://", err)
	}
	o.Memcached, o.Bucket = true, ""
	if _, err := Dial(testCtx(t), answers, o); err == nil || !strings.Contains(err.Error(), "use memcached://") {
		t.Fatalf("memcached Dial: %v; want it to say memcached://", err)
	}

	mc := newMock(t, mockcluster.Options{})
	o = adminOpts(mockcluster.DefaultBucket)
	o.TLSConfig = &tls.Config{InsecureSkipVerify: true}
	o.DialContext = func(ctx context.Context, network, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, network, mc.Node(0).Addr())
	}
	_, err = Dial(testCtx(t), "node:11210", o)
	if err == nil || !strings.Contains(err.Error(), "11210") || !strings.Contains(err.Error(), "use couchbase://") {
		t.Fatalf("Dial: %v; want a hint that 11210 is the plain port", err)
	}
}
