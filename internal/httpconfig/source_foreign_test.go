package httpconfig

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kvwire/kvwire/conn"
	"github.com/kvwire/kvwire/internal/cluster"
	"github.com/kvwire/kvwire/memdx"
	"github.com/kvwire/kvwire/mockcluster"
	"github.com/kvwire/kvwire/retry"
)

// logLines is a slog handler that sends each record's message and
// attributes, as one line, on a channel (dropped when it is full).
type logLines chan string

func (h logLines) Enabled(context.Context, slog.Level) bool { return true }
func (h logLines) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	b.WriteString(r.Message)
	r.Attrs(func(a slog.Attr) bool {
		b.WriteString(" " + a.String())
		return true
	})
	select {
	case h <- b.String():
	default:
	}
	return nil
}
func (h logLines) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h logLines) WithGroup(string) slog.Handler      { return h }

// The node the config stream is read from now answers for another
// cluster (its address given to another cluster's node, with a bucket of
// the same name and the same credentials): every config it streams is
// refused as another cluster's. The stream moves to another node of the
// cluster, as it does from a node that fails, and the cluster's configs
// keep coming. It stayed on that node until the redial period (10 s, on
// the Clock, here never), the cluster's own configs unseen meanwhile.
func TestStreamMovesOffANodeServingAnotherClustersConfigs(t *testing.T) {
	a := newMock(t, mockcluster.Options{Nodes: 2, DisabledFeatures: []memdx.HelloFeature{
		memdx.FeatureClustermapChangeNotification, memdx.FeatureClustermapChangeNotificationBrief}})
	b := newMock(t, mockcluster.Options{Nodes: 1}) // another cluster, a bucket of the same name
	taken, other := a.MgmtAddrs()[0], b.MgmtAddrs()[0]
	var dialer net.Dialer
	var mu sync.Mutex
	dialed := map[string]int{}
	streamLog := make(logLines, 256)
	hc := New(Config{Bucket: "default", Username: mockcluster.DefaultUser, Password: mockcluster.DefaultPassword,
		Logger: slog.New(streamLog),
		Clock:  retry.NewFakeClock(time.Unix(1e9, 0)), // no redial period ends: only a refusal can move the stream
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			mu.Lock()
			dialed[addr]++
			mu.Unlock()
			if addr == taken {
				addr = other
			}
			return dialer.DialContext(ctx, network, addr)
		}})
	lines := make(logLines, 256)
	// The bootstrap config comes from the node not taken.
	src := NewSource(hc, []string{a.MgmtAddrs()[1]}, 11210, 8091, false)
	cl, err := cluster.Connect(context.Background(), cluster.Config{
		Seeds: a.Addrs(), Bucket: "default", Network: "auto",
		ConnectTimeout: 10 * time.Second, KVTimeout: 2500 * time.Millisecond, PollInterval: time.Hour,
		ConnectionsPerNode: 1,
		Conn: conn.Options{Username: mockcluster.DefaultUser, Password: mockcluster.DefaultPassword, Bucket: "default",
			ProbeTimeout: time.Minute, NoClusterConfig: true,
			Features: []memdx.HelloFeature{memdx.FeatureXerror, memdx.FeatureSelectBucket, memdx.FeatureJSON}},
		Clock:       retry.NewFakeClock(time.Unix(1e9, 0)),
		Logger:      slog.New(lines),
		NodeError:   func(addr string, err error) error { return fmt.Errorf("node %s: %v", addr, err) },
		Sources:     []cluster.ConfigSource{src},
		NoKVConfigs: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	// The stream starts on the config's first node: the taken address.
	held := cl.Topology()
	if got := held.Config().ClusterUUID(); got == "" {
		t.Fatal("the mock's config names no cluster uuid")
	}
	ab := a.Bucket("default")
	if _, err := ab.AddScope("moved-on"); err != nil {
		t.Fatal(err)
	}
	want := uint64(ab.Rev())
	deadline := time.After(time.Minute)
	for top := held; top.Config().Version().Rev < want; top = cl.Topology() {
		select {
		case <-top.Changed():
		case <-deadline:
			mu.Lock()
			defer mu.Unlock()
			t.Fatalf("the cluster's config rev %d was not streamed within a minute (holding %v; stream dials %v)",
				want, cl.Topology().Config().Version(), dialed)
		}
	}
	if got := cl.Topology().Config().ClusterUUID(); got != held.Config().ClusterUUID() {
		t.Fatalf("installed a config of cluster %s, not %s", got, held.Config().ClusterUUID())
	}
	for said := false; !said; {
		select {
		case line := <-streamLog:
			said = strings.Contains(line, "no config stream from a node") && strings.Contains(line, taken) &&
				strings.Contains(line, "another cluster")
		default:
			t.Fatal("the stream's move off the node was not logged saying it serves another cluster")
		}
	}
}
