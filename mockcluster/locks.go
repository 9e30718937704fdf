package mockcluster

// GET_LOCKED and UNLOCK_KEY.

import (
	"time"

	"github.com/kvwire/kvwire/memdx"
)

// Lock times of GET_LOCKED, in seconds (kv_engine's getl_default_timeout
// and getl_max_timeout).
const (
	DefaultLockTime = 15
	MaxLockTime     = 30
)

func (cn *conn) getLocked(p *memdx.Packet) {
	if (len(p.Extras) != 0 && len(p.Extras) != 4) || len(p.Value) != 0 {
		cn.fail(p, memdx.StatusInvalidArgs, "GET_LOCKED extras must be empty or the lock time (4 bytes)")
		return
	}
	t, ok := cn.locateChecked(p, false)
	if !ok {
		return
	}
	lock := uint32(0)
	if len(p.Extras) == 4 {
		lock = getUint32(p.Extras)
	}
	if lock == 0 || lock > MaxLockTime {
		lock = DefaultLockTime
	}
	now := cn.c.clock.Now()
	t.vb.mu.Lock()
	// A lock taken on the committed version would vanish when the pending
	// sync write commits; kv_engine answers SYNC_WRITE_IN_PROGRESS.
	if !cn.pendingCheck(p, t) {
		return
	}
	d := t.vb.live(t.mk, now)
	if d == nil {
		t.vb.mu.Unlock()
		cn.fail(p, memdx.StatusKeyNotFound, "")
		return
	}
	if d.locked(now) {
		// No error context: kv_engine sets none for a lock
		// (VBucket::getLocked, GetLockedCommandContext).
		t.vb.mu.Unlock()
		cn.fail(p, statusLockedTmpfail, "")
		return
	}
	nd := *d
	nd.replicaCas = d.replicatedCas()
	nd.cas = t.vb.nextCas(now)
	nd.lockedUntil = now.Add(time.Duration(lock) * time.Second)
	t.vb.docs[string(t.mk)] = &nd
	value, dt := cn.docValue(&nd)
	t.vb.mu.Unlock()
	var ext [4]byte
	putUint32(ext[:], nd.flags)
	cn.reply(p, memdx.StatusSuccess, nd.cas, dt, ext[:], nil, value)
}

// unlock runs UNLOCK_KEY as kv_engine 7.6 does (KVBucket::unlockKey,
// engines/ep/src/kv_bucket.cc): the lock CAS unlocks a locked document,
// another CAS answers LOCKED (locked_tmpfail), and a document that exists
// but is not locked answers NOT_LOCKED (0x0e; the engine gives TMPFAIL
// instead only when the cluster setting not_locked_returns_tmpfail is on,
// and it is off by default, daemon/settings.h). What a client sees depends
// on its HELLO alone, not on the error map version it fetched:
// Connection::remapErrorCode (daemon/connection.cc) turns both into TMPFAIL
// for a connection without XERROR (mapStatus). Before 7.6 unlockKey
// answered temporary_failure for a document that is not locked, TMPFAIL
// with XERROR too: so does a mock whose Options.Version is older.
func (cn *conn) unlock(p *memdx.Packet) {
	if len(p.Extras) != 0 || len(p.Value) != 0 {
		cn.fail(p, memdx.StatusInvalidArgs, "UNLOCK_KEY takes no extras and no value")
		return
	}
	if p.Cas == 0 {
		// kv_engine's unlock_validator (daemon/mcbp_validators.cc) wants
		// the CAS set (ExpectedCas::Set).
		cn.fail(p, memdx.StatusInvalidArgs, "Request CAS must be set")
		return
	}
	t, ok := cn.locateChecked(p, false)
	if !ok {
		return
	}
	now := cn.c.clock.Now()
	t.vb.mu.Lock()
	if !cn.pendingCheck(p, t) {
		return
	}
	d := t.vb.live(t.mk, now)
	st := memdx.StatusSuccess
	switch {
	case d == nil:
		st = memdx.StatusKeyNotFound
	case !d.locked(now) && cn.c.notLockedTmpfail:
		st = memdx.StatusTmpFail
	case !d.locked(now):
		st = memdx.StatusNotLocked
	case p.Cas != d.cas:
		st = statusLockedTmpfail
	}
	if st != memdx.StatusSuccess {
		t.vb.mu.Unlock()
		cn.fail(p, st, "")
		return
	}
	nd := *d
	nd.lockedUntil = time.Time{}
	t.vb.docs[string(t.mk)] = &nd
	t.vb.mu.Unlock()
	// A bare success, CAS 0: UnlockCommandContext
	// (daemon/protocol/mcbp/unlock_context.cc) sends
	// Cookie::sendResponse(Success), whose header carries the cookie's
	// CAS, which nothing set (Connection::formatResponseHeaders). The
	// document keeps the lock's CAS.
	cn.ok(p)
}
