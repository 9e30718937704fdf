package mockcluster

import (
	"encoding/binary"
	"strconv"

	"github.com/kvwire/kvwire/memdx"
)

// holdsVbucket reports whether this node holds vbucket vb of the snapshot,
// as its active or as a replica (OBSERVE and OBSERVE_SEQNO serve both: the
// SDKs' PersistTo/ReplicateTo durability asks the replicas).
func (cn *conn) holdsVbucket(s *bucketSnap, vb uint16) bool {
	if int(vb) >= len(s.chains) {
		return false
	}
	for _, id := range s.chains[vb] {
		if id == cn.n.id {
			return true
		}
	}
	return false
}

// observeSeqno answers OBSERVE_SEQNO as kv_engine's ep engine does
// (EventuallyPersistentEngine::observe_seqno in engines/ep/src/ep_engine.cc,
// FailoverTable::getLastSeqnoForUUID in engines/ep/src/failover-table.cc):
// the value is the vbucket UUID the client knows (8 bytes). The answer is
// format 0: format (1), vbucket (2), current UUID (8), persisted seqno (8),
// current seqno (8); when the given UUID is an earlier one of the
// vbucket's failover log, format 1 adds that UUID and the last seqno it saw
// (8 each); a UUID the log does not hold answers KEY_ENOENT. A node that
// holds the vbucket neither as active nor as replica answers
// NOT_MY_VBUCKET. The mock persists nothing, so it reports everything
// persisted: the persisted seqno is the current one.
func (cn *conn) observeSeqno(p *memdx.Packet) {
	if len(p.Extras) != 0 || len(p.Key) != 0 || len(p.Value) != 8 {
		cn.fail(p, memdx.StatusInvalidArgs, "OBSERVE_SEQNO takes the 8-byte vbucket UUID as its value, nothing else")
		return
	}
	s := cn.bucket.Load().snap.Load()
	if !cn.holdsVbucket(s, p.Vbucket) {
		cn.nmv(p, s)
		return
	}
	given := binary.BigEndian.Uint64(p.Value)
	vb := cn.bucket.Load().vbs[p.Vbucket]
	vb.mu.Lock()
	uuid, seqno := vb.uuid, vb.seqno
	old, found := failoverEntry{}, given == uuid
	if !found {
		for _, e := range vb.history {
			if e.uuid == given {
				old, found = e, true
				break
			}
		}
	}
	vb.mu.Unlock()
	if !found {
		cn.fail(p, memdx.StatusKeyNotFound, "Vbucket UUID "+strconv.FormatUint(given, 10)+" is not in the failover log")
		return
	}
	out := make([]byte, 27, 43)
	binary.BigEndian.PutUint16(out[1:3], p.Vbucket)
	binary.BigEndian.PutUint64(out[3:11], uuid)
	binary.BigEndian.PutUint64(out[11:19], seqno)
	binary.BigEndian.PutUint64(out[19:27], seqno)
	if given != uuid {
		out[0] = 1
		out = binary.BigEndian.AppendUint64(out, old.uuid)
		out = binary.BigEndian.AppendUint64(out, old.lastSeqno)
	}
	cn.reply(p, memdx.StatusSuccess, 0, 0, nil, nil, out)
}

// observe answers OBSERVE (observe via CAS) as kv_engine does
// (daemon/protocol/mcbp/observe_context.cc, and the ep engine's observe):
// the value lists vbucket (2), key length (2) and key (with the collection
// prefix when Collections was negotiated) per key; the answer repeats each
// with its state (1) and CAS (8): 0x01 persisted (the mock persists
// everything at once), 0x80 not found (CAS 0). A malformed list answers
// EINVAL before any key is observed (ObserveCommandContext::initialize
// reads it whole). OBSERVE has no privilege chain (McbpPrivilegeChains):
// each key in turn is checked as EventuallyPersistentEngine::handleObserve
// does (checkCollectionAccess, engines/ep/src/ep_engine.cc): for a
// collection other than the default one, a vbucket this node holds
// neither as active nor as replica answers NOT_MY_VBUCKET and an unknown
// collection UNKNOWN_COLLECTION, then the key's collection needs Read
// (SystemCollectionLookup first for a system collection: EACCESS), and a
// key of the default collection answers NOT_MY_VBUCKET only after its
// Read. The response's CAS (kv_engine's persistence-time hint) is 0.
func (cn *conn) observe(p *memdx.Packet) {
	if len(p.Extras) != 0 || len(p.Key) != 0 {
		cn.fail(p, memdx.StatusInvalidArgs, "OBSERVE takes its keys in the value, no key and no extras")
		return
	}
	type observeKey struct {
		vb  uint16
		key []byte
	}
	var keys []observeKey
	for v := p.Value; len(v) > 0; {
		if len(v) < 4 {
			cn.fail(p, memdx.StatusInvalidArgs, "Requires vbid and keylen.")
			return
		}
		vbid := binary.BigEndian.Uint16(v[0:2])
		kl := int(binary.BigEndian.Uint16(v[2:4]))
		if len(v)-4 < kl {
			cn.fail(p, memdx.StatusInvalidArgs, "Incorrect keylen")
			return
		}
		keys = append(keys, observeKey{vbid, v[4 : 4+kl]})
		v = v[4+kl:]
	}
	b := cn.bucket.Load()
	s := b.snap.Load()
	now := cn.c.clock.Now()
	var out []byte
	for _, k := range keys {
		vbid, key := k.vb, k.key
		kl := len(key)
		var cid uint32
		var mk []byte
		if cn.has(memdx.FeatureCollections) {
			var err error
			if cid, _, err = memdx.SplitCollectionKey(key); err != nil {
				cn.fail(p, memdx.StatusInvalidArgs, "Invalid collection id prefix: "+err.Error())
				return
			}
			mk = key
		} else {
			mk = append([]byte{0}, key...)
		}
		if cid != 0 {
			if !cn.holdsVbucket(s, vbid) {
				cn.nmv(p, s)
				return
			}
			if !s.manifest.has(cid) {
				cn.failManifest(p, memdx.StatusUnknownCollection, s.manifest.uid,
					"Unknown collection id 0x"+strconv.FormatUint(uint64(cid), 16))
				return
			}
		}
		if missing := cn.collectionPrivilegeMissing(s, cid, "Read"); missing != "" {
			cn.refusePrivilege(p, missing)
			return
		}
		if !cn.holdsVbucket(s, vbid) {
			cn.nmv(p, s)
			return
		}
		if !s.manifest.has(cid) {
			cn.failManifest(p, memdx.StatusUnknownCollection, s.manifest.uid,
				"Unknown collection id 0x"+strconv.FormatUint(uint64(cid), 16))
			return
		}
		vb := b.vbs[vbid]
		vb.mu.Lock()
		active := s.chains[vbid][0] == cn.n.id
		var d *document
		if active {
			d = vb.live(mk, now)
		} else {
			d = vb.replicaLive(mk, now)
		}
		state, cas := byte(memdx.ObserveNotFound), uint64(0)
		if d != nil {
			state, cas = byte(memdx.ObservePersisted), d.cas
			if !active {
				// A replica holds the CAS from before a lock, which
				// is not replicated.
				cas = d.replicatedCas()
			}
		}
		vb.mu.Unlock()
		out = binary.BigEndian.AppendUint16(out, vbid)
		out = binary.BigEndian.AppendUint16(out, uint16(kl))
		out = append(out, key...)
		out = append(out, state)
		out = binary.BigEndian.AppendUint64(out, cas)
	}
	cn.reply(p, memdx.StatusSuccess, 0, 0, nil, nil, out)
}
