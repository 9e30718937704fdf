package mockcluster

// TOUCH, GAT and GATQ.

import (
	"github.com/kvwire/kvwire/memdx"
)

// touch handles TOUCH, GAT and GATQ: a new expiry and CAS, no new value.
func (cn *conn) touch(p *memdx.Packet) {
	if len(p.Extras) != 4 || len(p.Value) != 0 {
		cn.fail(p, memdx.StatusInvalidArgs, "TOUCH/GAT extras must be the expiry (4 bytes), no value")
		return
	}
	f, ok := cn.parseFrames(p, p.OpCode != memdx.OpGATQ, false)
	if !ok {
		return
	}
	if f.durable {
		// kv_engine's engines answer a durable get_and_touch
		// not_supported before they look at the vbucket
		// (EventuallyPersistentEngine::get_and_touch).
		cn.fail(p, memdx.StatusNotSupported, "")
		return
	}
	t, ok := cn.locate(p, false)
	if !ok {
		return
	}
	now := cn.c.clock.Now()
	t.vb.mu.Lock()
	if !cn.pendingCheck(p, t) {
		return
	}
	d := t.vb.live(t.mk, now)
	if d == nil {
		t.vb.mu.Unlock()
		if p.OpCode != memdx.OpGATQ {
			cn.fail(p, memdx.StatusKeyNotFound, "")
		}
		return
	}
	if d.locked(now) {
		t.vb.mu.Unlock()
		cn.fail(p, memdx.StatusLocked, "")
		return
	}
	nd := *d
	// Only a new expiry is a mutation: the same one leaves the document,
	// its CAS and seqno as they are (VBucket::processGetAndUpdateTtl in
	// engines/ep/src/vbucket.cc updates the stored value, and so takes a
	// new CAS and seqno, only when exptime_mutated).
	if exp := expiry(getUint32(p.Extras), now); exp != d.expiry {
		nd.expiry = exp
		nd.cas = t.vb.nextCas(now)
		nd.replicaCas = 0 // a touch replicates
		nd.seqno = t.vb.nextSeqno()
		t.vb.docs[string(t.mk)] = &nd
	}
	value, dt := cn.docValue(&nd)
	t.vb.mu.Unlock()
	if p.OpCode == memdx.OpTouch {
		cn.reply(p, memdx.StatusSuccess, nd.cas, 0, nil, nil, nil)
		return
	}
	var ext [4]byte
	putUint32(ext[:], nd.flags)
	cn.reply(p, memdx.StatusSuccess, nd.cas, dt, ext[:], nil, value)
}
