package mockcluster

// GET, GETQ, GETK, GETKQ and GET_REPLICA.

import (
	"github.com/kvwire/kvwire/memdx"
)

func (cn *conn) get(p *memdx.Packet) {
	op := p.OpCode
	quiet := op == memdx.OpGetQ || op == memdx.OpGetKQ
	if len(p.Extras) != 0 || len(p.Value) != 0 {
		cn.fail(p, memdx.StatusInvalidArgs, "GET takes no extras and no value")
		return
	}
	t, ok := cn.locateChecked(p, op == memdx.OpGetReplica)
	if !ok {
		return
	}
	t.vb.mu.Lock()
	d := t.vb.docs[string(t.mk)]
	cas := uint64(0)
	if d != nil {
		cas = d.cas
		if op == memdx.OpGetReplica {
			cas = d.replicatedCas()
		}
		// Only documents with an expiry or a lock need the time.
		if d.expiry != 0 || !d.lockedUntil.IsZero() {
			now := cn.c.clock.Now()
			if d.expired(now) {
				if op != memdx.OpGetReplica {
					// The active processes the expiry; a replica
					// only reports the document missing.
					t.vb.expire(string(t.mk), d, now)
				}
				d = nil
			} else if op != memdx.OpGetReplica && d.locked(now) {
				cas = lockedCas
			}
		}
	}
	if d == nil {
		t.vb.mu.Unlock()
		switch {
		case quiet:
		case op == memdx.OpGetK:
			// GetCommandContext::noSuchItem sends a GETK's key with
			// the miss.
			cn.reply(p, memdx.StatusKeyNotFound, 0, 0, nil, p.Key, nil)
		default:
			cn.fail(p, memdx.StatusKeyNotFound, "")
		}
		return
	}
	value, dt := cn.docValue(d)
	var ext [4]byte
	putUint32(ext[:], d.flags)
	t.vb.mu.Unlock()
	var key []byte
	if op == memdx.OpGetK || op == memdx.OpGetKQ {
		key = p.Key
	}
	cn.reply(p, memdx.StatusSuccess, cas, dt, ext[:], key, value)
}
