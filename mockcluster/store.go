package mockcluster

// SET, ADD and REPLACE (and their quiet forms).

import (
	"time"

	"github.com/kvwire/kvwire/memdx"
)

func (cn *conn) store(p *memdx.Packet) outcome {
	op := p.OpCode
	if len(p.Extras) != 8 {
		cn.fail(p, memdx.StatusInvalidArgs, "SET/ADD/REPLACE extras must be flags and expiry (8 bytes)")
		return outcome{}
	}
	isAdd := op == memdx.OpAdd || op == memdx.OpAddQ
	isReplace := op == memdx.OpReplace || op == memdx.OpReplaceQ
	if isAdd && p.Cas != 0 {
		cn.fail(p, memdx.StatusInvalidArgs, "ADD takes no CAS")
		return outcome{}
	}
	f, ok := cn.parseFrames(p, true, !isAdd)
	if !ok {
		return outcome{}
	}
	t, ok := cn.locateMutation(p, f)
	if !ok {
		return outcome{}
	}
	value, raw, dt, ok := cn.inValue(p, t)
	if !ok {
		return outcome{}
	}
	now := cn.c.clock.Now()
	flags := getUint32(p.Extras[0:4])
	exp := expiry(getUint32(p.Extras[4:8]), now)
	t.vb.mu.Lock()
	if !cn.pendingCheck(p, t) {
		return outcome{}
	}
	d := t.vb.live(t.mk, now)
	st := memdx.StatusSuccess
	switch {
	case d == nil && (isReplace || p.Cas != 0):
		st = memdx.StatusKeyNotFound
	case d != nil && isAdd:
		st = memdx.StatusKeyExists
	case d != nil:
		st = casCheck(d, p.Cas, now)
	}
	if st != memdx.StatusSuccess {
		t.vb.mu.Unlock()
		cn.fail(p, st, "")
		return outcome{}
	}
	nd := &document{value: value, flags: flags, datatype: dt, expiry: exp, snappy: raw}
	if d != nil {
		// A write of the body keeps the document's xattrs (kv_engine's
		// MutationCommandContext copies them to the new item), and its
		// user xattrs count against the size limit with the body (the
		// engine's itemAllocate leaves out the system ones only).
		nd.xattrs = d.xattrs
		if user, _ := xattrsSize(d.xattrs); len(value)+user > t.b.valueLimit() {
			t.vb.mu.Unlock()
			cn.fail(p, memdx.StatusTooBig, "")
			return outcome{}
		}
		if f.preserveTTL {
			nd.expiry = d.expiry
		}
	}
	mk, vb := string(t.mk), t.vb
	return cn.commitMutation(p, t, f, func(now time.Time) mutResult {
		vb.store(mk, nd, now)
		return mutResult{cas: nd.cas, seqno: nd.seqno, vbUUID: vb.uuid}
	}, func(h *memdx.Packet, r mutResult) { cn.mutated(h, r, nil) })
}
