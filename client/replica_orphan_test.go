package client

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvwire/kvwire/conn"
	"github.com/kvwire/kvwire/memdx"
	"github.com/kvwire/kvwire/mockcluster"
	"github.com/kvwire/kvwire/retry"
)

// A GetAnyReplica whose active copy answers while the replica's read is
// out: the replica's answer, which comes later, is expected (the read was
// given up because another copy answered) and is no orphan in the orphan
// report (at warn). A Ping whose NOOPs are held past its deadline,
// released after the replica's answer (a NOOP is a barrier: on the
// replica's connection it is answered after the held read), makes orphans
// that are reported: every report up to the last of them has no
// get_replica.
func TestReplicaReadLosersLateAnswersAreNoOrphans(t *testing.T) {
	t.Parallel()
	mc := newMock(t, mockcluster.Options{})
	logger, logs := newReportLog()
	c := connect(t, mc, &Options{Logger: logger, HealthCheck: HealthCheckOptions{Disabled: true},
		OrphanReporting: OrphanReportingOptions{Interval: 10 * time.Millisecond}})
	col := c.DefaultCollection()
	bg := context.Background()
	_, err := col.Upsert(bg, "r", []byte("v"), nil)
	require.NoError(t, err)

	replicaArrived, holdReplica, holdNoops := make(chan struct{}), make(chan struct{}), make(chan struct{})
	rc := mc.Control(mockcluster.Match{OpCodes: []memdx.OpCode{memdx.OpGetReplica}, Key: "r"}, 0, func(*mockcluster.Request) (mockcluster.Action, bool) {
		close(replicaArrived)
		return mockcluster.Action{Hold: holdReplica}, true
	})
	defer rc.Remove()
	ac := mc.Control(mockcluster.Match{OpCodes: []memdx.OpCode{memdx.OpGet}, Key: "r"}, 0, func(*mockcluster.Request) (mockcluster.Action, bool) {
		return mockcluster.Action{Hold: replicaArrived}, true
	})
	defer ac.Remove()
	r, err := col.GetAnyReplica(bg, "r", nil)
	require.NoError(t, err)
	require.False(t, r.IsReplica, "the active copy answers first")

	noops := mc.Control(mockcluster.Match{OpCodes: []memdx.OpCode{memdx.OpNoop}}, 0, func(*mockcluster.Request) (mockcluster.Action, bool) {
		return mockcluster.Action{Hold: holdNoops}, true
	})
	defer noops.Remove()
	// The NOOPs end at the Ping's deadline, held; those written are
	// orphans once released (the one behind the held read among them).
	// (Pinged again until one was: a NOOP not yet written at the deadline
	// is withdrawn.)
	nodes := 0
	for nodes == 0 {
		for _, p := range c.Ping(ctxTimeout(t, 100*time.Millisecond)) {
			var te *retry.TimeoutError
			var re *conn.RequestError
			if errors.As(p.Err, &te) && errors.As(te.LastErr, &re) && re.Written {
				nodes++
			}
		}
	}
	close(holdReplica)
	close(holdNoops)

	pings := 0 // the NOOPs' orphans reported
	for pings < nodes {
		rep := logs.next(t, OrphanReportMessage)
		for _, e := range rep.KV.TopRequests {
			switch e["operation_name"] {
			case "ping":
				pings++
			default:
				t.Errorf("orphan %v: only the Ping's NOOPs are orphans", e)
			}
		}
	}
}

// ctxTimeout is a context that ends d from now, canceled when the test ends.
func ctxTimeout(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}
