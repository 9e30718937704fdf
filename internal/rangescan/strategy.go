package rangescan

import (
	"slices"

	"github.com/kvwire/kvwire/internal/cluster"
	"github.com/kvwire/kvwire/memdx"
	"github.com/kvwire/kvwire/retry"
)

// Restart is Requests.Restart's rule for a continue that failed with a
// KV error of status st (0: no status came), unreachable saying whether
// the node could not be reached or its connection ended: one that met
// NOT_MY_VBUCKET (the vbucket moved), KEY_ENOENT (the scan is gone: it
// expired, or the vbucket changed state), RANGE_SCAN_CANCELLED or an
// unreachable node is created again; the node may still hold the scan
// when no status came.
//
// RANGE_SCAN_CANCELLED is KEY_ENOENT met by a continue already running:
// kv_engine removes a scan cancelled by a RANGE_SCAN_CANCEL, by its
// lifetime (range_scan_max_lifetime, RangeScanTimeoutTask), or with its
// vbucket or bucket, and a continue running then ends with it, one that
// comes after finds no scan (VB::RangeScanOwner::continueScan,
// EPVBucket::continueRangeScan). The scan never cancels a scan while a
// continue of it is in flight, so the status says the server dropped the
// scan; the keys sent before it (SUCCESS packets) are the scan's, the
// batch the server still held is dropped, and a scan created after the
// last key returned reads it again. A scan whose caller stopped it ends
// as stopped whatever the continue met.
func Restart(st memdx.Status, unreachable bool) (restart, cancel bool) {
	restart = st == memdx.StatusNotMyVbucket || st == memdx.StatusKeyNotFound ||
		st == memdx.StatusRangeScanCancelled || unreachable
	return restart, restart && st == 0
}

// ContinueStrategy decides the retries of a continue: S (the scan's
// strategy) those of a status the server refused it with; none after its
// node or connection was lost, when the scan creates the vbucket's scan
// again instead (Requests.Restart).
type ContinueStrategy struct{ S retry.Strategy }

func (cs ContinueStrategy) RetryAfter(req retry.Request, reason retry.Reason) retry.Action {
	switch reason {
	case retry.ReasonNodeNotAvailable, retry.ReasonSocketNotAvailable, retry.ReasonSocketClosedWhileInFlight:
		return retry.NoRetry()
	}
	return cs.S.RetryAfter(req, reason)
}

// CancelStrategy decides the retries of a cancel of a scan on node N: S's
// (the scan's strategy), while N is a node of Cl's topology. A node that
// left the cluster is never waited for: it has no connection again (a
// node that comes back is a new one), so the wait could only end at the
// request's timeout, holding the vbucket's scan back that long before it
// is created again elsewhere.
type CancelStrategy struct {
	S  retry.Strategy
	Cl *cluster.Cluster
	N  *cluster.Node
}

func (cs CancelStrategy) RetryAfter(req retry.Request, reason retry.Reason) retry.Action {
	if t := cs.Cl.Topology(); t != nil && !slices.Contains(t.Nodes(), cs.N) {
		return retry.NoRetry()
	}
	return cs.S.RetryAfter(req, reason)
}
