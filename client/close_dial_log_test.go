package client

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kvwire/kvwire/internal/faultnode"
	"github.com/kvwire/kvwire/mockcluster"
)

// Closing the client while a node's redial is under way (here bootstrapping
// on a node that accepted the connection and answers nothing) ends the
// dial, and that is all: the node did not fail. No "connecting to node
// failed" warning saying "context canceled" is logged, as if the node
// were in trouble, on every Close of a client with a node being redialed.
func TestCloseDuringADialLogsNoDialFailure(t *testing.T) {
	mc := newMock(t, mockcluster.Options{Nodes: 1})
	p, err := faultnode.NewProxy(mc.Node(0).Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	p.RewritePorts(map[string]string{faultnode.Port(mc.Node(0).Addr()): faultnode.Port(p.Addr())})
	var mu sync.Mutex
	var warned []string
	logger := slog.New(recordFunc(func(r slog.Record) {
		if r.Level < slog.LevelWarn {
			return
		}
		line := r.Message
		r.Attrs(func(a slog.Attr) bool { line += " " + a.String(); return true })
		mu.Lock()
		warned = append(warned, line)
		mu.Unlock()
	}))
	o := testOptions(&Options{Username: mockcluster.DefaultUser, Password: mockcluster.DefaultPassword,
		ConnectTimeout: time.Hour, Logger: logger})
	c, err := Connect(context.Background(), "couchbase://"+p.Addr()+"/"+mockcluster.DefaultBucket, o)
	if err != nil {
		t.Fatal(err)
	}
	accepted := p.Accepted()
	p.Blackhole(true)
	p.Reset() // the node's connection ends; its redial meets the black hole
	for deadline := time.Now().Add(time.Minute); p.Accepted() == accepted; {
		if time.Now().After(deadline) {
			t.Fatal("the node was not redialed within a minute")
		}
		time.Sleep(time.Millisecond)
	}
	mu.Lock()
	before := len(warned)
	mu.Unlock()
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, w := range warned[before:] {
		if strings.Contains(w, "connecting to node failed") {
			t.Errorf("Close logged a dial failure: %s", w)
		}
	}
}

// recordFunc is a slog.Handler calling f with each record, attributes
// included.
type recordFunc func(slog.Record)

func (f recordFunc) Enabled(context.Context, slog.Level) bool { return true }
func (f recordFunc) WithAttrs([]slog.Attr) slog.Handler       { return f }
func (f recordFunc) WithGroup(string) slog.Handler            { return f }
func (f recordFunc) Handle(_ context.Context, r slog.Record) error {
	f(r)
	return nil
}
