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

// VAttr and SubdocDocumentMacroSupport need XATTR in the same HELLO:
// kv_engine refuses the HELLO with EINVAL ("<feature> needs XATTR") and keeps
// the features the connection had.
func TestHelloXattrDependents(t *testing.T) {
	c := newCluster(t, Options{Nodes: 1})
	cl := dialRaw(t, c.Node(0).Addr())
	cl.hello(memdx.FeatureXerror, memdx.FeatureJSON)
	for _, tc := range []struct {
		f    memdx.HelloFeature
		want string
	}{
		{memdx.FeatureVAttr, "VAttr needs XATTR"},
		{memdx.FeatureSubdocDocumentMacroSupport, "SubdocDocumentMacroSupport needs XATTR"},
	} {
		p := cl.do(memdx.NewHello(nil, []memdx.HelloFeature{memdx.FeatureXerror, tc.f}))
		if p.Status != memdx.StatusInvalidArgs {
			t.Fatalf("HELLO %s without XATTR: %s, want EINVAL", tc.f, p.Status)
		}
		if ec, ok := memdx.DecodeErrorContext(p.Datatype, p.Value); !ok || ec.Context != tc.want {
			t.Errorf("HELLO %s without XATTR: context %q, want %q", tc.f, p.Value, tc.want)
		}
	}
	// The refused HELLOs left the connection's features alone.
	if p := cl.do(memdx.NewGetErrorMap(99)); p.Datatype != memdx.DatatypeJSON {
		t.Fatalf("JSON no longer negotiated after a refused HELLO: datatype %s", p.Datatype)
	}
	got := cl.hello(memdx.FeatureXattr, memdx.FeatureVAttr, memdx.FeatureSubdocDocumentMacroSupport)
	want := []memdx.HelloFeature{memdx.FeatureXattr, memdx.FeatureVAttr, memdx.FeatureSubdocDocumentMacroSupport}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("with XATTR: granted %v, want %v", got, want)
	}
}

// The Duplex dependency names each notification feature as kv_engine's
// format_as does.
func TestHelloNotificationNeedsDuplexContext(t *testing.T) {
	c := newCluster(t, Options{Nodes: 1})
	cl := dialRaw(t, c.Node(0).Addr())
	cl.hello(memdx.FeatureXerror)
	for f, want := range map[memdx.HelloFeature]string{
		memdx.FeatureClustermapChangeNotification:      "Clustermap change notification needs Duplex",
		memdx.FeatureClustermapChangeNotificationBrief: "ClustermapChangeNotificationBrief needs Duplex",
	} {
		p := cl.do(memdx.NewHello(nil, []memdx.HelloFeature{memdx.FeatureXerror, f}))
		if ec, ok := memdx.DecodeErrorContext(p.Datatype, p.Value); p.Status != memdx.StatusInvalidArgs || !ok || ec.Context != want {
			t.Errorf("HELLO %s without Duplex: %s %q, want EINVAL %q", f, p.Status, p.Value, want)
		}
	}
}

// kv_engine grants SnappyEverywhere on its own and turns on the Snappy
// datatype with it (connection.enableDatatype(SNAPPY)), without listing
// Snappy in the answer: the client may then send compressed values and gets
// compressed configs.
func TestHelloSnappyEverywhereAlone(t *testing.T) {
	c := newCluster(t, Options{Nodes: 1})
	cl := dialRaw(t, c.Node(0).Addr())
	got := cl.hello(memdx.FeatureXerror, memdx.FeatureSnappyEverywhere)
	want := []memdx.HelloFeature{memdx.FeatureXerror, memdx.FeatureSnappyEverywhere}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("granted %v, want %v", got, want)
	}
	if st := cl.authPlain(DefaultUser, DefaultPassword); st != memdx.StatusSuccess {
		t.Fatal(st)
	}
	if st := cl.selectBucket(DefaultBucket); st != memdx.StatusSuccess {
		t.Fatal(st)
	}
	p := cl.do(memdx.NewGetClusterConfig())
	if p.Status != memdx.StatusSuccess || p.Datatype != memdx.DatatypeSnappy {
		t.Fatalf("GET_CLUSTER_CONFIG: %s datatype %s, want a snappy config", p.Status, p.Datatype)
	}
	b := c.Bucket(DefaultBucket)
	set := keyReq(cl, b, memdx.NewStore(memdx.OpSet, []byte("k"), memdx.CompressSnappy(nil, []byte("hello")), 0, 0))
	set.Datatype = memdx.DatatypeSnappy
	if p := cl.do(set); p.Status != memdx.StatusSuccess {
		t.Fatalf("snappy SET: %s %s", p.Status, p.Value)
	}
	if d, ok := b.Get("", "", "k"); !ok || string(d.Value) != "hello" {
		t.Fatalf("stored %+v %v", d, ok)
	}
}

// Every kv_engine that has ClustermapChangeNotificationBrief (7.6 on)
// treats TCPDELAY as unsupported: it is never granted, and asking for it
// with TCPNODELAY is no longer an error (hello_packet_executor.cc,
// TCPDELAY_Unsupported).
func TestHelloTCPDelayIsNotGranted(t *testing.T) {
	c := newCluster(t, Options{Nodes: 1})
	cl := dialRaw(t, c.Node(0).Addr())
	got := cl.hello(memdx.FeatureTCPNoDelay, memdx.FeatureTCPDelay, memdx.FeatureXerror)
	want := []memdx.HelloFeature{memdx.FeatureTCPNoDelay, memdx.FeatureXerror}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("granted %v, want %v", got, want)
	}
}

// kv_engine 7.6 grants NonBlockingThrottlingMode to every connection
// (hello_packet_executor.cc); the mock never throttles, so a client asking
// for it loses nothing.
func TestHelloNonBlockingThrottlingMode(t *testing.T) {
	c := newCluster(t, Options{Nodes: 1})
	cl := dialRaw(t, c.Node(0).Addr())
	got := cl.hello(memdx.FeatureXerror, memdx.FeatureNonBlockingThrottlingMode)
	want := []memdx.HelloFeature{memdx.FeatureXerror, memdx.FeatureNonBlockingThrottlingMode}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("granted %v, want %v", got, want)
	}
}
