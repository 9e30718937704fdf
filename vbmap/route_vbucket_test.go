package vbmap

import (
	"errors"
	"testing"
)

// RouteVbucket follows RFC 0005 as Route does: the current map first, the
// forward map after NOT_MY_VBUCKET with a config that has one.
func TestRouteVbucketFollowsTheForwardMap(t *testing.T) {
	cur := [][]int{{0, 1}, {1, 0}, {2, 3}, {3, 2}}
	fwd := [][]int{{1, 0}, {2, 1}, {3, 0}, {0, 3}}
	c := smallConfig(t, 1, cur, fwd)
	var rs RouteState
	for vb := range 4 {
		s, err := rs.RouteVbucket(c, uint16(vb), 0)
		if err != nil || s != cur[vb][0] {
			t.Fatalf("vb %d: server %d, %v; want %d by the current map", vb, s, err, cur[vb][0])
		}
	}
	rs.OnNotMyVbucket(c)
	for vb := range 4 {
		s, err := rs.RouteVbucket(c, uint16(vb), 0)
		if err != nil || s != fwd[vb][0] {
			t.Fatalf("vb %d after NMV: server %d, %v; want %d by the forward map", vb, s, err, fwd[vb][0])
		}
	}
	if _, err := rs.RouteVbucket(c, 4, 0); !errors.Is(err, ErrVbucketOutOfRange) {
		t.Errorf("vb 4 of 4: %v", err)
	}
	// The key's vbucket routes as the key does.
	var a, b RouteState
	s1, vb, err1 := a.Route(c, helloKey, 1)
	s2, err2 := b.RouteVbucket(c, vb, 1)
	if s1 != s2 || err1 != nil || err2 != nil {
		t.Errorf("Route %d, %v; RouteVbucket %d, %v", s1, err1, s2, err2)
	}
}

func TestRouteVbucketNeedsAVbucketMap(t *testing.T) {
	c := mustParseFile(t, "configs/memcached_terse_4node_host_placeholder.json", "localhost")
	var rs RouteState
	if _, err := rs.RouteVbucket(c, 0, 0); !errors.Is(err, ErrNoVbucketMap) {
		t.Fatalf("memcached bucket: %v", err)
	}
	if _, err := rs.RouteVbucket(smallConfig(t, 1, nil, nil), 0, 0); !errors.Is(err, ErrNoVbucketMap) {
		t.Fatalf("no partitions: %v", err)
	}
}
