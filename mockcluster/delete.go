package mockcluster

// DELETE and DELETEQ.

import (
	"time"

	"github.com/kvwire/kvwire/memdx"
)

func (cn *conn) del(p *memdx.Packet) outcome {
	if len(p.Extras) != 0 || len(p.Value) != 0 {
		cn.fail(p, memdx.StatusInvalidArgs, "DELETE takes no extras and no value")
		return outcome{}
	}
	f, ok := cn.parseFrames(p, true, false)
	if !ok {
		return outcome{}
	}
	t, ok := cn.locateMutation(p, f)
	if !ok {
		return outcome{}
	}
	now := cn.c.clock.Now()
	t.vb.mu.Lock()
	if !cn.pendingCheck(p, t) {
		return outcome{}
	}
	d := t.vb.live(t.mk, now)
	st := memdx.StatusKeyNotFound
	if d != nil {
		st = casCheck(d, p.Cas, now)
	}
	if st == memdx.StatusLocked && p.Cas != 0 {
		// Without a CAS kv_engine's RemoveCommandContext answers locked
		// itself; a wrong CAS reaches VBucket::deleteItem, which answers
		// locked_tmpfail (TMPFAIL, not KEY_EEXISTS, without XERROR).
		st = statusLockedTmpfail
	}
	if st != memdx.StatusSuccess {
		t.vb.mu.Unlock()
		cn.fail(p, st, "")
		return outcome{}
	}
	mk, vb := string(t.mk), t.vb
	return cn.commitMutation(p, t, f, func(now time.Time) mutResult {
		cas, seqno := vb.remove(mk, d, now)
		return mutResult{cas: cas, seqno: seqno, vbUUID: vb.uuid}
	}, func(h *memdx.Packet, r mutResult) { cn.mutated(h, r, nil) })
}
