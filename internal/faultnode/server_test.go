package faultnode_test

import (
	"bytes"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/kvwire/kvwire/conn"
	"github.com/kvwire/kvwire/internal/faultnode"
	"github.com/kvwire/kvwire/internal/kverr"
	"github.com/kvwire/kvwire/memdx"
)

func newServer(t *testing.T, h faultnode.Handler) *faultnode.Server {
	t.Helper()
	s, err := faultnode.NewServer(h)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

// conn.Dial bootstraps against the impersonation with each mechanism, gets
// the scripted config, and the handler answers what follows.
func TestServerBootstrapsKvwireThenHandlerAnswers(t *testing.T) {
	s := newServer(t, func(c *faultnode.ServerConn, req *memdx.Packet) bool {
		if req.OpCode != memdx.OpGet {
			return false
		}
		// Two answers to one request: the handler decides everything.
		c.Send(faultnode.Reply(req, memdx.StatusSuccess, append([]byte("value of "), req.Key...)))
		return true
	})
	cfg := []byte(`{"rev":7,"name":"default"}`)
	s.SetConfig(cfg)
	for _, mech := range []string{memdx.MechScramSHA512, memdx.MechScramSHA1, memdx.MechPlain} {
		o := opts()
		o.SASLMechanisms = []string{mech}
		o.AllowPlainAuthWithoutTLS = true
		o.Features = []memdx.HelloFeature{memdx.FeatureJSON, memdx.FeatureDuplex}
		c := dial(t, s.Addr(), o)
		if c.Mechanism() != mech || c.Bucket() != "default" || !bytes.Equal(c.ClusterConfig(), cfg) ||
			!c.Features().Has(memdx.FeatureDuplex) {
			t.Fatalf("%s: mechanism %q bucket %q config %q features %v", mech, c.Mechanism(), c.Bucket(), c.ClusterConfig(), c.Features())
		}
		st, val, err := get(testCtx(t), c, 0, "k")
		if err != nil || st != memdx.StatusSuccess || string(val) != "value of k" {
			t.Fatalf("%s: GET %s %q %v", mech, st, val, err)
		}
	}
	if s.Requests(memdx.OpGet) != 3 || s.Requests(memdx.OpHello) != 3 {
		t.Fatalf("GET %d HELLO %d", s.Requests(memdx.OpGet), s.Requests(memdx.OpHello))
	}

	o := opts()
	o.Password = "wrong"
	if _, err := conn.Dial(testCtx(t), s.Addr(), o); !errors.Is(err, kverr.ErrAuthenticationFailure) {
		t.Fatalf("wrong password: %v", err)
	}
}

func TestServerGrantsOnlySetFeaturesAndServesErrorMap(t *testing.T) {
	s := newServer(t, nil)
	s.SetFeatures([]memdx.HelloFeature{memdx.FeatureJSON, memdx.FeatureXerror})
	s.SetErrorMap([]byte(`{"version":1,"revision":1,"errors":{"7ff0":{"name":"TEST","desc":"test","attrs":["temp"]}}}`))
	o := opts()
	o.Features = []memdx.HelloFeature{memdx.FeatureJSON, memdx.FeatureDuplex}
	c := dial(t, s.Addr(), o)
	f := c.Features()
	if !f.Has(memdx.FeatureJSON) || f.Has(memdx.FeatureDuplex) || !f.Has(memdx.FeatureXerror) {
		t.Fatalf("features %v", f)
	}
	if e, ok := c.ErrorMap().Lookup(0x7ff0); !ok || e.Name != "TEST" {
		t.Fatalf("error map lookup: %+v %v", e, ok)
	}
	if len(c.ClusterConfig()) != 0 {
		t.Fatalf("config %q without SetConfig", c.ClusterConfig())
	}
}

// A handler that never answers makes the request time out; Reset gives the
// client an error.
func TestServerSilentHandlerAndReset(t *testing.T) {
	seen := make(chan struct{}, 1)
	s := newServer(t, func(c *faultnode.ServerConn, req *memdx.Packet) bool {
		if req.OpCode == memdx.OpGet {
			seen <- struct{}{}
			return true
		}
		return false
	})
	c := dial(t, s.Addr(), opts())
	done := make(chan error, 1)
	go func() { _, _, err := get(testCtx(t), c, 0, "k"); done <- err }()
	recv(t, seen)
	if len(s.Conns()) != 1 {
		t.Fatalf("%d connections", len(s.Conns()))
	}
	s.Conns()[0].Reset()
	if err := recv(t, done); err == nil {
		t.Fatal("GET succeeded on a reset connection")
	}
	recv(t, c.Done())
}

// A connection whose first byte is not a binary magic is served as text:
// the text handler answers its lines, the Server answers "version" and,
// with ERROR, what the handler leaves; binary connections to the same
// port are served as before.
func TestServerServesTextConnections(t *testing.T) {
	s := newServer(t, nil)
	s.SetTextHandler(func(c *faultnode.ServerConn, line string) bool {
		if line != "gets a b" {
			return false
		}
		_ = c.Write([]byte("VALUE b 5 2 9\r\nhi\r\nEND\r\n"))
		return true
	})
	tc, err := conn.DialText(testCtx(t), s.Addr(), conn.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer tc.Close()
	if v, err := tc.Version(testCtx(t)); err != nil || v != "1.6.18-faultnode" {
		t.Fatalf("Version: %q, %v", v, err)
	}
	keys := [][]byte{[]byte("a"), []byte("b")}
	if err := tc.SendGets(time.Now().Add(testTimeout), keys); err != nil {
		t.Fatal(err)
	}
	var hits []string
	err = tc.ReadGets(testCtx(t), time.Now().Add(testTimeout), keys, func(i int, v *memdx.TextValue) {
		hits = append(hits, fmt.Sprintf("%d %s %d %d", i, v.Value, v.Flags, v.Cas))
	})
	if err != nil || len(hits) != 1 || hits[0] != "1 hi 5 9" {
		t.Fatalf("ReadGets: %q, %v", hits, err)
	}
	keys = [][]byte{[]byte("c")}
	if err := tc.SendGets(time.Now().Add(testTimeout), keys); err != nil {
		t.Fatal(err)
	}
	var te *memdx.TextError
	if err := tc.ReadGets(testCtx(t), time.Now().Add(testTimeout), keys, func(int, *memdx.TextValue) {}); !errors.As(err, &te) {
		t.Fatalf("a line the handler left: %v, want the ERROR line", err)
	}
	c := dial(t, s.Addr(), opts())
	if _, _, err := get(testCtx(t), c, 0, "k"); err != nil {
		t.Fatalf("a binary connection: %v", err)
	}
}
