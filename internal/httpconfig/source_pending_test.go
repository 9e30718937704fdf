package httpconfig

import (
	"context"
	"slices"
	"testing"

	"github.com/kvwire/kvwire/internal/cluster"
	"github.com/kvwire/kvwire/mockcluster"
	"github.com/kvwire/kvwire/vbmap"
)

// The node serving the config stream is removed from the cluster: it
// streams the config without it and closes the stream. Stream asks the
// Source whether the node is still listed right then, before the
// cluster's config loop has installed that config; the Source answers
// from the newest config the stream delivered (offered as newer, not yet
// installed), so the node is seen to have left and the stream moves on at
// once (TestStreamMovesOnAtOnceFromANodeThatLeft). Read from the config
// installed, the node looked still listed and the stream was reopened
// only after the back-off meant for streams that end at once. Once the
// cluster installs that version (or a newer one), or when the delivered
// config was not newer than the held one, the installed config is read.
func TestSourceStreamsFromTheNodesOfADeliveredConfigNotYetInstalled(t *testing.T) {
	mc := newMock(t, mockcluster.Options{Nodes: 3})
	mgmt := mc.MgmtAddrs()
	c := New(Config{Bucket: "default", Username: mockcluster.DefaultUser, Password: mockcluster.DefaultPassword})
	fetch := func() ([]byte, *vbmap.Config) {
		t.Helper()
		raw, host, err := c.Fetch(context.Background(), mgmt[0])
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := vbmap.Parse(raw, host)
		if err != nil {
			t.Fatal(err)
		}
		return raw, cfg
	}
	oldRaw, installed := fetch()
	if err := mc.RemoveNode(2); err != nil {
		t.Fatal(err)
	}
	newRaw, newer := fetch()

	sn := streamNodes{s: NewSource(c, []string{mgmt[0]}, 11210, 8091, false), onItsWay: func(vbmap.Version) bool { return true }}
	if got := sn.addrs(func() *vbmap.Config { return installed }, ""); !slices.Equal(got, mgmt) {
		t.Fatalf("before any delivery: %v, want %v", got, mgmt)
	}
	sn.delivered(newRaw, "127.0.0.1", cluster.OfferNewer)
	sn.delivered(oldRaw, "127.0.0.1", cluster.OfferNewer) // an older one after it changes nothing
	if got := sn.addrs(func() *vbmap.Config { return installed }, ""); !slices.Equal(got, mgmt[:2]) {
		t.Fatalf("the config without node 2 delivered, not installed: %v, want %v", got, mgmt[:2])
	}
	if sn.pending == nil {
		t.Fatal("the delivered config was dropped before its install")
	}
	if got := sn.addrs(func() *vbmap.Config { return newer }, ""); !slices.Equal(got, mgmt[:2]) || sn.pending != nil {
		t.Fatalf("once installed: %v (pending kept: %v), want %v read from the installed config", got, sn.pending != nil, mgmt[:2])
	}
	// A config offered as not newer (stale: another node's copy) is
	// not read.
	sn.delivered(oldRaw, "127.0.0.1", cluster.OfferStale)
	if got := sn.addrs(func() *vbmap.Config { return installed }, ""); !slices.Equal(got, mgmt) {
		t.Fatalf("after a stale offer: %v, want %v", got, mgmt)
	}
}
