package client

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/kvwire/kvwire/internal/faultnode"
	"github.com/kvwire/kvwire/mockcluster"
)

// A seed serves a config whose only node accepts connections and answers
// nothing (its connection is still bootstrapping), and the caller cancels
// Connect's context meanwhile. Connect fails at once, and its error says
// the context ended, and matches context.Canceled: not that the node was
// "still connecting after" the hour of ConnectTimeout, which had not
// passed.
func TestConnectCanceledWhileTheConfigsNodesDialSaysSo(t *testing.T) {
	mc := newMock(t, mockcluster.Options{Nodes: 1})
	seed, err := faultnode.NewProxy(mc.Node(0).Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(seed.Close)
	node, err := faultnode.NewProxy(mc.Node(0).Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(node.Close)
	// The seed's config names the node behind the second proxy, which
	// forwards nothing.
	seed.RewritePorts(map[string]string{faultnode.Port(mc.Node(0).Addr()): faultnode.Port(node.Addr())})
	node.Blackhole(true)
	o := testOptions(&Options{Username: mockcluster.DefaultUser, Password: mockcluster.DefaultPassword,
		ConnectTimeout: time.Hour})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		for deadline := time.Now().Add(time.Minute); node.Accepted() == 0 && time.Now().Before(deadline); {
			time.Sleep(time.Millisecond)
		}
		cancel() // the node's dial is under way
	}()
	c, err := Connect(ctx, "couchbase://"+seed.Addr()+"/"+mockcluster.DefaultBucket, o)
	if err == nil {
		c.Close()
		t.Fatal("Connect succeeded")
	}
	if node.Accepted() == 0 {
		t.Fatalf("Connect failed before the config's node was dialed: %v", err)
	}
	if !errors.Is(err, context.Canceled) {
		t.Errorf("the error does not match context.Canceled: %v", err)
	}
	if strings.Contains(err.Error(), "after 1h0m0s") {
		t.Errorf("the error blames a ConnectTimeout that did not pass: %v", err)
	}
}
