package mockcluster

import "github.com/kvwire/kvwire/memdx"

// getMeta answers GET_META: the document's metadata without its value.
// Extras of the request: nothing (version 1) or one byte, 1 or 2; version 2
// adds the datatype to the response. Response extras: deleted (4), flags
// (4), expiry (4), revision seqno (8) [, datatype (1)]; the CAS is in the header,
// 0xffffffffffffffff while the document is locked, as a GET's
// (VBucket::getMetaData, engines/ep/src/vbucket.cc, hides a lock's CAS).
//
// A tombstone (a deleted document) and an expired document answer success
// with deleted=1, as VBucket::getMetaData answers a deleted or expired
// stored value; a never-written key
// or a purged tombstone answers KEY_ENOENT. The datatype has the XATTR bit
// when the document has xattrs.
func (cn *conn) getMeta(p *memdx.Packet) {
	version := byte(1)
	switch len(p.Extras) {
	case 0:
	case 1:
		version = p.Extras[0]
		if version != 1 && version != 2 {
			cn.fail(p, memdx.StatusInvalidArgs, "GET_META version must be 1 or 2")
			return
		}
	default:
		cn.fail(p, memdx.StatusInvalidArgs, "GET_META takes 0 or 1 byte of extras")
		return
	}
	if len(p.Value) != 0 {
		cn.fail(p, memdx.StatusInvalidArgs, "GET_META takes no value")
		return
	}
	t, ok := cn.locateChecked(p, false)
	if !ok {
		return
	}
	now := cn.c.clock.Now()
	t.vb.mu.Lock()
	d := t.vb.docs[string(t.mk)]
	// An expired document is reported deleted, with its own metadata,
	// until an access turns it into a tombstone (getMetaData checks
	// isExpired and does not process the expiry).
	deleted := d != nil && d.expired(now)
	if deleted && t.vb.memcached {
		// default_engine's get drops an expired item: it is missing.
		d, deleted = nil, false
	}
	if d == nil {
		d = t.vb.tomb(string(t.mk), now)
		deleted = d != nil
	}
	if d == nil {
		t.vb.mu.Unlock()
		cn.fail(p, memdx.StatusKeyNotFound, "")
		return
	}
	var ext [21]byte
	if deleted {
		putUint32(ext[0:4], 1)
	}
	putUint32(ext[4:8], d.flags)
	putUint32(ext[8:12], d.expiry)
	// The seqno is the revision seqno (getMetaData's revSeqno): the
	// key's write count, as $document.revid has it; default_engine keeps
	// none (0).
	if !t.vb.memcached {
		putUint64(ext[12:20], t.vb.mutations[string(t.mk)])
	}
	ext[20] = byte(d.datatype)
	if len(d.xattrs) > 0 {
		ext[20] |= byte(memdx.DatatypeXattr)
	}
	cas := d.cas
	if d.locked(now) {
		cas = lockedCas
	}
	t.vb.mu.Unlock()
	n := 20
	if version == 2 {
		n = 21
	}
	cn.reply(p, memdx.StatusSuccess, cas, 0, ext[:n], nil, nil)
}
