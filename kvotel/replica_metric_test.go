package kvotel

import (
	"context"
	"sort"
	"sync"
	"testing"

	"github.com/kvwire/kvwire/client"
	"github.com/kvwire/kvwire/memdx"
	"github.com/kvwire/kvwire/mockcluster"
)

// RFC 0067's db.client.operation.duration records each operation of the
// caller's, named as its outer span: a GetAnyReplica is one point named
// get_any_replica with the call's outcome (and so for GetAllReplicas and
// the LookupIn forms), not a point per copy read. Before, the call had
// no point of its own, the copy that answered was a get (or get_replica),
// and a copy that failed while another answered (here the replica,
// refused EACCESS, before the active copy's answer is let go) was a
// failed get_replica, though the caller's call succeeded.
func TestReplicaReadsAreOnePointPerCall(t *testing.T) {
	mc := newMock(t)
	if _, err := mc.Bucket(mockcluster.DefaultBucket).Set("_default", "_default", "r", []byte(`{"n":1}`), client.CommonFlagsJSON, 0); err != nil {
		t.Fatal(err)
	}
	bg := context.Background()
	for _, tc := range []struct {
		name   string
		refuse bool // the replica's GET_REPLICA is refused EACCESS, before the active copy answers
		want   []string
		call   func(*client.Collection) error
	}{
		{"get_any_replica", true, []string{"get_any_replica/:1"}, func(col *client.Collection) error {
			_, err := col.GetAnyReplica(bg, "r", nil)
			return err
		}},
		// The replica's copy refused, the active copy's answered: the
		// call succeeds.
		{"get_all_replicas", true, []string{"get_all_replicas/:1"}, func(col *client.Collection) error {
			_, err := col.GetAllReplicas(bg, "r", nil)
			return err
		}},
		{"lookup_in_any_replica", false, []string{"lookup_in_any_replica/:1"}, func(col *client.Collection) error {
			_, err := col.LookupInAnyReplica(bg, "r", []client.LookupInSpec{client.GetSpec("n", nil)}, nil)
			return err
		}},
		{"get_any_replica missing", false, []string{"get_any_replica/DocumentUnretrievable:1"}, func(col *client.Collection) error {
			if _, err := col.GetAnyReplica(bg, "missing", nil); err == nil {
				t.Error("GetAnyReplica of a missing key succeeded")
			}
			return nil
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.refuse {
				refuseReplicaFirst(t, mc, "r")
			}
			c, e := connect(t, mc, nil)
			if err := tc.call(c.DefaultCollection()); err != nil {
				t.Fatal(err)
			}
			e.ledger.check(t)
			got := scanPoints(t, e)
			sort.Strings(got)
			if len(got) != len(tc.want) || got[0] != tc.want[0] {
				t.Errorf("operation duration points %v, want %v", got, tc.want)
			}
		})
	}
}

// refuseReplicaFirst makes mc refuse key's GET_REPLICA with EACCESS and
// hold the answer to its GET until that refusal is on its way.
func refuseReplicaFirst(t *testing.T, mc *mockcluster.Cluster, key string) {
	t.Helper()
	arrived := make(chan struct{})
	var once sync.Once
	rc := mc.Control(mockcluster.Match{OpCodes: []memdx.OpCode{memdx.OpGetReplica}, Key: key}, 0, func(*mockcluster.Request) (mockcluster.Action, bool) {
		once.Do(func() { close(arrived) })
		return mockcluster.Action{Status: memdx.StatusNoAccess}, true
	})
	ac := mc.Control(mockcluster.Match{OpCodes: []memdx.OpCode{memdx.OpGet}, Key: key}, 0, func(*mockcluster.Request) (mockcluster.Action, bool) {
		return mockcluster.Action{Hold: arrived}, true
	})
	t.Cleanup(func() { once.Do(func() { close(arrived) }); rc.Remove(); ac.Remove() })
}
