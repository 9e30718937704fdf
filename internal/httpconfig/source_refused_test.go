package httpconfig

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kvwire/kvwire/conn"
	"github.com/kvwire/kvwire/internal/cluster"
	"github.com/kvwire/kvwire/memdx"
	"github.com/kvwire/kvwire/mockcluster"
	"github.com/kvwire/kvwire/retry"
	"github.com/kvwire/kvwire/vbmap"
)

// The stream delivers a config newer than the one held that parses but
// that the cluster refuses (here one without a vbucket map, naming other
// nodes: applyConfig keeps routing by the map held). The Source read the
// nodes to stream from out of it until the cluster installed that
// version or a newer one, which, the config refused, might never come:
// the stream went on to nodes the cluster never took. A config the
// cluster refused no longer steers where the stream goes.
func TestSourceDoesNotStreamFromTheNodesOfARefusedConfig(t *testing.T) {
	a := newMock(t, mockcluster.Options{Nodes: 2, DisabledFeatures: []memdx.HelloFeature{
		memdx.FeatureClustermapChangeNotification, memdx.FeatureClustermapChangeNotificationBrief}})
	b := newMock(t, mockcluster.Options{Nodes: 3}) // the nodes the refused config names
	hc := New(Config{Bucket: "default", Username: mockcluster.DefaultUser, Password: mockcluster.DefaultPassword})
	src := NewSource(hc, []string{a.MgmtAddrs()[0]}, 11210, 8091, false)
	lines := make(logLines, 256)
	cl, err := cluster.Connect(context.Background(), cluster.Config{
		Seeds: a.Addrs(), Bucket: "default", Network: "auto",
		ConnectTimeout: 10 * time.Second, KVTimeout: 2500 * time.Millisecond, PollInterval: time.Hour,
		ConnectionsPerNode: 1,
		Conn: conn.Options{Username: mockcluster.DefaultUser, Password: mockcluster.DefaultPassword, Bucket: "default",
			ProbeTimeout: time.Minute,
			Features:     []memdx.HelloFeature{memdx.FeatureXerror, memdx.FeatureSelectBucket, memdx.FeatureJSON}},
		Clock:     retry.NewFakeClock(time.Unix(1e9, 0)),
		Logger:    slog.New(lines),
		NodeError: func(addr string, err error) error { return fmt.Errorf("node %s: %v", addr, err) },
	})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	held := cl.Topology().Config()

	// b's config, of the cluster's uuid and a newer revision, without a
	// vbucket map or node locator (a cluster-level config).
	bb := b.Bucket("default")
	for i := 0; uint64(bb.Rev()) <= held.Version().Rev; i++ {
		if _, err := bb.AddScope(fmt.Sprint("s", i)); err != nil {
			t.Fatal(err)
		}
	}
	var m map[string]any
	if err := json.Unmarshal(bb.ConfigJSON(0), &m); err != nil {
		t.Fatal(err)
	}
	m["clusterUUID"] = held.ClusterUUID()
	delete(m, "vBucketServerMap")
	delete(m, "nodeLocator")
	delete(m, "name") // a cluster-level config: a global one
	raw, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := vbmap.Parse(raw, "127.0.0.1"); err != nil {
		t.Fatalf("the config without a map does not parse: %v", err)
	}
	if err := cl.OtherCluster(raw, "127.0.0.1"); err != nil {
		t.Fatalf("the config is taken for another cluster's: %v", err)
	}

	sn := streamNodes{s: src, onItsWay: cl.OnItsWay}
	installed := func() *vbmap.Config { return cl.Topology().Config() }
	want := a.MgmtAddrs()
	if got := sn.addrs(installed, cl.Network()); !slices.Equal(got, want) {
		t.Fatalf("before any delivery: %v, want %v", got, want)
	}
	sn.delivered(raw, "127.0.0.1", cl.Offer(raw, "127.0.0.1", "http stream test"))
	for refused := false; !refused; {
		select {
		case line := <-lines:
			refused = strings.Contains(line, "ignoring a cluster config") && strings.Contains(line, "no vbucket map")
		case <-time.After(time.Minute):
			t.Fatal("the config without a map was not refused within a minute")
		}
	}
	// The loop logs the refusal before it marks the parse done.
	v, _ := vbmap.PeekVersion(raw)
	for deadline := time.Now().Add(time.Minute); cl.OnItsWay(v); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the config refused is still on its way after a minute")
		}
	}
	if got := cl.Topology().Config(); got != held {
		t.Fatalf("the config without a map was installed: rev %v", got.Version())
	}
	if got := sn.addrs(installed, cl.Network()); !slices.Equal(got, want) {
		t.Fatalf("the config refused named the nodes to stream from: %v, want the held config's %v", got, want)
	}
}
