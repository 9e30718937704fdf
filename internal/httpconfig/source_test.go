package httpconfig

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/kvwire/kvwire/internal/kverr"
	"github.com/kvwire/kvwire/mockcluster"
	"github.com/kvwire/kvwire/vbmap"
)

// The REST addresses a Source asks: the =http seeds, then the REST port
// of each KV seed at the scheme's default KV port (the cluster's usual
// layout), never one of a KV seed at another port.
func TestSourceAddresses(t *testing.T) {
	s := NewSource(New(Config{}), []string{"h1:9000"}, 11210, 8091, false)
	got := s.addrs([]string{"h1:11210", "h2:11210", "h3:12000", "[::1]:11210", "h2:11210"})
	want := []string{"h1:9000", "h1:8091", "h2:8091", "[::1]:8091"}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("addrs %v, want %v", got, want)
	}
	if !s.CanServe(nil) {
		t.Error("an =http seed: CanServe false")
	}
	none := NewSource(New(Config{}), nil, 11210, 8091, false)
	if none.CanServe([]string{"h3:12000"}) {
		t.Error("no =http seed, no KV seed at 11210: CanServe true")
	}
	if _, err := none.FirstConfig(context.Background(), nil); err == nil || !strings.Contains(err.Error(), "=http") {
		t.Errorf("FirstConfig with nowhere to ask: %v", err)
	}
}

// FirstConfig asks the seeds in turn: a seed that does not answer is
// passed over for the next; refused credentials end it at once (every node
// would refuse them), and its error names each address asked.
func TestSourceFirstConfig(t *testing.T) {
	mc := newMock(t, mockcluster.Options{Nodes: 2})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := ln.Addr().String()
	ln.Close()
	seeds := []string{dead, mc.MgmtAddrs()[1], mc.MgmtAddrs()[0]}
	s := NewSource(New(Config{Bucket: "default", Username: mockcluster.DefaultUser, Password: mockcluster.DefaultPassword}),
		seeds, 11210, 8091, false)
	sc, err := s.FirstConfig(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if sc.From != mc.MgmtAddrs()[1] || sc.Host != "127.0.0.1" || len(sc.Raw) == 0 {
		t.Errorf("config from %q (host %q, %d bytes), want the second seed's", sc.From, sc.Host, len(sc.Raw))
	}

	s = NewSource(New(Config{Bucket: "default", Username: mockcluster.DefaultUser, Password: "wrong"}), seeds[1:], 11210, 8091, false)
	_, err = s.FirstConfig(context.Background(), nil)
	if !errors.Is(err, kverr.ErrAuthenticationFailure) || !strings.Contains(err.Error(), seeds[1]) {
		t.Fatalf("wrong password: %v", err)
	}
	if strings.Contains(err.Error(), seeds[2]) {
		t.Errorf("the seed after the refusal was asked too: %v", err)
	}
}

// A seed that answers 200 with something that is not a config (a web
// page, a truncated body, an empty one) is passed over for the next seed,
// as a KV seed whose config does not parse is, and the error of a
// bootstrap that found no valid config says what was wrong with it.
func TestSourceFirstConfigPassesOverAnInvalidConfig(t *testing.T) {
	mc := newMock(t, mockcluster.Options{Nodes: 1})
	page := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte("<html>Couchbase Console</html>"))
	}))
	defer page.Close()
	bad := strings.TrimPrefix(page.URL, "http://")
	cfg := Config{Bucket: "default", Username: mockcluster.DefaultUser, Password: mockcluster.DefaultPassword}
	s := NewSource(New(cfg), []string{bad, mc.MgmtAddrs()[0]}, 11210, 8091, false)
	sc, err := s.FirstConfig(context.Background(), nil)
	if err != nil {
		t.Fatalf("the second seed serves a config: %v", err)
	}
	if sc.From != mc.MgmtAddrs()[0] {
		t.Errorf("config from %q, want the second seed's", sc.From)
	}

	s = NewSource(New(cfg), []string{bad}, 11210, 8091, false)
	_, err = s.FirstConfig(context.Background(), nil)
	if err == nil || !strings.Contains(err.Error(), bad) || !errors.Is(err, vbmap.ErrInvalidConfig) {
		t.Fatalf("only an invalid config: %v", err)
	}
}
