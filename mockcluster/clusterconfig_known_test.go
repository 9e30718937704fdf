package mockcluster

import (
	"strings"
	"testing"

	"github.com/kvwire/kvwire/memdx"
)

// TestGetClusterConfigKnownVersionErrorNamesTheField: a GET_CLUSTER_CONFIG
// whose known version is refused says which part was wrong, as kv_engine's
// validator does (GetClusterConfigPayload::validate: the revision first,
// "Revision number must not be less than 1", then the epoch, "Epoch must
// not be less than 1 (or -1)").
func TestGetClusterConfigKnownVersionErrorNamesTheField(t *testing.T) {
	c := newCluster(t, Options{})
	cl := bootstrap(t, c.Node(0).Addr(), DefaultBucket, nil)
	for _, v := range []struct {
		epoch, rev int64
		want       string
	}{
		{1, 0, "Revision number must not be less than 1"},
		{0, 5, "Epoch must not be less than 1 (or -1)"},
		{-2, 5, "Epoch must not be less than 1 (or -1)"},
		{0, 0, "Revision number must not be less than 1"},
	} {
		p := cl.do(memdx.NewGetClusterConfigKnown(v.epoch, v.rev))
		if p.Status != memdx.StatusInvalidArgs || !strings.Contains(string(p.Value), v.want) {
			t.Errorf("known {%d, %d}: %s %q, want EINVAL saying %q", v.epoch, v.rev, p.Status, p.Value, v.want)
		}
	}
}
