package mockcluster

import (
	"reflect"
	"testing"

	"github.com/kvwire/kvwire/memdx"
)

// kv_engine's buildRequestVector (daemon/protocol/mcbp/
// hello_packet_executor.cc) keeps only the brief notification when a client
// asks for both kinds.
func TestHelloBriefNotificationSupersedesFull(t *testing.T) {
	c := newCluster(t, Options{Nodes: 1})
	cl := dialRaw(t, c.Node(0).Addr())
	got := cl.hello(memdx.FeatureDuplex, memdx.FeatureClustermapChangeNotification,
		memdx.FeatureClustermapChangeNotificationBrief)
	want := []memdx.HelloFeature{memdx.FeatureDuplex, memdx.FeatureClustermapChangeNotificationBrief}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("granted %v, want %v", got, want)
	}
}
