package mockcluster

import (
	"testing"

	"github.com/kvwire/kvwire/memdx"
)

// kv_engine keeps error maps for versions 1 and 2 and an empty slot for
// version 0: GET_ERROR_MAP of version 0 answers KEY_ENOENT with no body
// (get_errmap_executor, daemon/mcbp_executors.cc; ErrorMapManager).
func TestGetErrorMapVersion0IsNotFound(t *testing.T) {
	c := newCluster(t, Options{Nodes: 1})
	cl := dialRaw(t, c.Node(0).Addr())
	cl.hello(memdx.FeatureXerror, memdx.FeatureJSON)
	p := cl.do(memdx.NewGetErrorMap(0))
	if p.Status != memdx.StatusKeyNotFound || len(p.Value) != 0 {
		t.Fatalf("version 0: %s %q, want KEY_ENOENT and no body", p.Status, p.Value)
	}
}
