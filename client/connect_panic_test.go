package client

import (
	"context"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/kvwire/kvwire/internal/leakcheck"
	"github.com/kvwire/kvwire/mockcluster"
)

// panickingResolver is a Resolver whose lookup panics.
type panickingResolver struct{}

const resolverPanic = "resolver panicked"

func (panickingResolver) LookupSRV(context.Context, string, string, string) (string, []*net.SRV, error) {
	panic(resolverPanic)
}

// A panic in the caller's code that Connect runs (its DNS SRV Resolver
// before any dial; its Logger's handler once the nodes are connected)
// reaches Connect's caller, and leaves nothing of the client running:
// Connect had started the reports' goroutines, and the nodes' maintainers
// with their connections, which nothing would ever stop.
func TestConnectThatPanicsLeavesNothingRunning(t *testing.T) {
	mc := newMock(t, mockcluster.Options{Nodes: 2})
	t.Run("resolver", func(t *testing.T) {
		connectPanics(t, "couchbase://cluster.test/default", &Options{Resolver: panickingResolver{}}, resolverPanic)
	})
	t.Run("logger", func(t *testing.T) {
		const loggerPanic = "logger panicked"
		logger := slog.New(recordFunc(func(r slog.Record) {
			if r.Message == "kvwire: connected" {
				panic(loggerPanic)
			}
		}))
		connectPanics(t, mc.ConnString()+"/"+mockcluster.DefaultBucket, &Options{Logger: logger}, loggerPanic)
	})
}

// connectPanics requires Connect to panic with want, and no goroutine of
// the client to be left.
func connectPanics(t *testing.T, cs string, o *Options, want any) {
	t.Helper()
	o.Username, o.Password = mockcluster.DefaultUser, mockcluster.DefaultPassword
	var got any
	func() {
		defer func() { got = recover() }()
		_, _ = Connect(context.Background(), cs, testOptions(o))
	}()
	if got != want {
		t.Fatalf("recovered %v, want %v", got, want)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		var mine []string
		for _, g := range leakcheck.Foreign() {
			if strings.Contains(g, "kvwire/internal/logreport") || strings.Contains(g, "kvwire/internal/cluster") ||
				strings.Contains(g, "kvwire/conn.") {
				mine = append(mine, g)
			}
		}
		if len(mine) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("goroutines left 10 s after Connect panicked:\n%s", strings.Join(mine, "\n\n"))
		}
	}
}
