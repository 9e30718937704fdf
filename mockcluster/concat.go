package mockcluster

// APPEND and PREPEND (and their quiet forms).

import (
	"encoding/json"
	"time"

	"github.com/kvwire/kvwire/memdx"
)

func (cn *conn) concat(p *memdx.Packet) outcome {
	if len(p.Extras) != 0 {
		cn.fail(p, memdx.StatusInvalidArgs, "APPEND/PREPEND take no extras")
		return outcome{}
	}
	// PreserveTTL is accepted and changes nothing: APPEND and PREPEND
	// keep the expiry anyway.
	f, ok := cn.parseFrames(p, true, true)
	if !ok {
		return outcome{}
	}
	t, ok := cn.locateMutation(p, f)
	if !ok {
		return outcome{}
	}
	value, _, _, ok := cn.inValue(p, t)
	if !ok {
		return outcome{}
	}
	now := cn.c.clock.Now()
	t.vb.mu.Lock()
	if !cn.pendingCheck(p, t) {
		return outcome{}
	}
	d := t.vb.live(t.mk, now)
	st := memdx.StatusNotStored
	if d != nil {
		st = casCheck(d, p.Cas, now)
	}
	if st == memdx.StatusSuccess {
		// User xattrs count against the limit with the body, as in
		// kv_engine (the new item's size less its system xattrs).
		if user, _ := xattrsSize(d.xattrs); len(d.value)+len(value)+user > t.b.valueLimit() {
			st = memdx.StatusTooBig
		}
	}
	if st != memdx.StatusSuccess {
		t.vb.mu.Unlock()
		cn.fail(p, st, "")
		return outcome{}
	}
	nv := make([]byte, 0, len(d.value)+len(value))
	if p.OpCode == memdx.OpAppend || p.OpCode == memdx.OpAppendQ {
		nv = append(append(nv, d.value...), value...)
	} else {
		nv = append(append(nv, value...), d.value...)
	}
	nd := &document{value: nv, flags: d.flags, expiry: d.expiry, xattrs: d.xattrs}
	if json.Valid(nv) {
		nd.datatype = memdx.DatatypeJSON
	}
	mk, vb := string(t.mk), t.vb
	return cn.commitMutation(p, t, f, func(now time.Time) mutResult {
		vb.store(mk, nd, now)
		return mutResult{cas: nd.cas, seqno: nd.seqno, vbUUID: vb.uuid}
	}, func(h *memdx.Packet, r mutResult) { cn.mutated(h, r, nil) })
}
