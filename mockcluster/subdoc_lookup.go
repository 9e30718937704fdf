package mockcluster

// SUBDOC_GET, _EXISTS, _GET_COUNT and SUBDOC_MULTI_LOOKUP.

import (
	"github.com/kvwire/kvwire/memdx"
)

func (vb *vbucket) docInfo(mk string, d *document, deleted bool) docInfo {
	return docInfo{cas: d.cas, seqno: d.seqno, vbUUID: vb.uuid, revid: vb.mutations[mk],
		exptime: d.expiry, flags: d.flags, body: d.value, datatype: d.datatype,
		hasXattrs: len(d.xattrs) > 0, deleted: deleted}
}

// subdocLookup runs SUBDOC_GET, _EXISTS, _GET_COUNT and MULTI_LOOKUP. It
// checks a lock and the CAS as kv_engine does
// (SubdocExecutionContext::get_document_for_searching): the engine's get
// shows a locked document with CAS 0xffffffffffffffff, so a request without
// a CAS (or with that one) answers LOCKED, and one with any other CAS
// cannot be checked and runs; the answer has the request's CAS when it has
// one. A replica read sees no lock (locks are not replicated) and the CAS
// the replicas hold.
func (cn *conn) subdocLookup(p *memdx.Packet, req *memdx.SubdocRequest, specs []sdSpec, multi bool) {
	replica := req.DocFlags&memdx.SubdocDocReplicaRead != 0
	t, ok := cn.locateChecked(p, replica)
	if !ok {
		return
	}
	now := cn.c.clock.Now()
	mk := string(t.mk)
	t.vb.mu.Lock()
	var d *document
	if replica {
		d = t.vb.replicaLive(t.mk, now)
	} else {
		d = t.vb.live(t.mk, now)
	}
	deleted := false
	if d == nil && req.DocFlags&memdx.SubdocDocAccessDeleted != 0 {
		d = t.vb.tomb(mk, now)
		deleted = d != nil
	}
	if d == nil {
		t.vb.mu.Unlock()
		cn.fail(p, memdx.StatusKeyNotFound, "")
		return
	}
	cas := d.cas
	switch {
	case replica:
		cas = d.replicatedCas()
	case d.locked(now):
		cas = lockedCas
	}
	if cas == lockedCas && (p.Cas == 0 || p.Cas == lockedCas) {
		t.vb.mu.Unlock()
		cn.fail(p, statusLockedTmpfail, "")
		return
	}
	if cas != lockedCas && p.Cas != 0 && p.Cas != cas {
		t.vb.mu.Unlock()
		cn.fail(p, memdx.StatusKeyExists, "")
		return
	}
	// The document's slices are never changed in place: they stay valid
	// after the lock is released.
	info := t.vb.docInfo(mk, d, deleted)
	info.cas = cas // $document.CAS shows what the engine's get showed
	xs := d.xattrs
	t.vb.mu.Unlock()
	if p.Cas != 0 {
		cas = p.Cas
	}

	// validate_xattr_privilege (daemon/subdocument.cc), in the xattr
	// phase: a system xattr needs SystemXattrRead; without it a single
	// path is refused, and every xattr spec of a multi-path lookup fails
	// EACCESS while its body specs run. $XTOC then lists the user xattrs.
	// The refusal is the command's status, sent as it is
	// (SubdocCommandContext::send_response), XERROR or not: unlike a
	// privilege refused before the command runs, remapErrorCode never
	// sees it.
	denied := false
	if !cn.hasBucketPrivilege("SystemXattrRead") {
		xs = userXattrs(xs)
		if firstSystemXattrSpec(specs) >= 0 {
			if !multi {
				cn.failPrivilege(p, "SystemXattrRead")
				return
			}
			denied = true
		}
	}
	results, failed := lookupSpecs(specs, info, xs, uint64(now.UnixNano()))
	if denied {
		for i := range specs {
			if specs[i].xattr() {
				results[i] = sdResult{st: memdx.StatusNoAccess}
			}
		}
		failed = true
	}
	cn.replyLookup(p, specs, results, multi, failed, deleted, cas)
}

// lookupSpecs runs every lookup spec on a document (its body and xattrs as
// info and xs had them); failed is true when any spec failed.
func lookupSpecs(specs []sdSpec, info docInfo, xs []xattr, hlcNow uint64) (results []sdResult, failed bool) {
	var blob []byte
	results = make([]sdResult, len(specs))
	for i := range specs {
		s := &specs[i]
		r := &results[i]
		switch {
		case s.op == memdx.OpGet:
			// A tombstone's empty body counts as missing.
			r.value = info.body
			if info.deleted && len(info.body) == 0 {
				r.st = memdx.StatusSubdocPathNotFound
			}
		case s.xattr():
			if blob == nil {
				blob = xattrBlob(xs)
			}
			r.value, r.st = lookupXattr(s, blob, info, xs, hlcNow)
		case info.deleted && len(info.body) == 0:
			r.st = memdx.StatusSubdocPathNotFound
		case !info.datatype.Has(memdx.DatatypeJSON):
			r.st = memdx.StatusSubdocNotJSON
		default:
			comps, st := parseSubdocPath(s.path)
			if st != memdx.StatusSuccess {
				r.st = st
				break
			}
			r.value, r.st = sdLookup(s.op, info.body, comps)
		}
		failed = failed || r.st != memdx.StatusSuccess
	}
	return results, failed
}

// replyLookup answers a lookup: a single-path command with its one result
// (or its failure), MULTI_LOOKUP with every spec's status and value.
func (cn *conn) replyLookup(p *memdx.Packet, specs []sdSpec, results []sdResult, multi, failed, deleted bool, cas uint64) {
	if !multi {
		r := results[0]
		if r.st != memdx.StatusSuccess {
			cn.fail(p, r.st, "")
			return
		}
		st := memdx.StatusSuccess
		if deleted {
			st = memdx.StatusSubdocSuccessDeleted
		}
		var dt memdx.Datatype
		if specs[0].tr.returnsValue {
			dt = cn.outDatatype(memdx.DatatypeJSON)
		}
		cn.reply(p, st, cas, dt, nil, nil, r.value)
		return
	}
	var body []byte
	for _, r := range results {
		body = memdx.AppendSubdocLookupResult(body, r.st, r.value)
	}
	st := memdx.StatusSuccess
	switch {
	case failed && deleted:
		st = memdx.StatusSubdocMultiPathFailureDeleted
	case failed:
		st = memdx.StatusSubdocMultiPathFailure
	case deleted:
		st = memdx.StatusSubdocSuccessDeleted
	}
	cn.reply(p, st, cas, 0, nil, nil, body)
}

// lookupXattr runs one xattr lookup on the document's xattrs (blob) or a
// virtual xattr.
func lookupXattr(s *sdSpec, blob []byte, info docInfo, xs []xattr, hlcNow uint64) ([]byte, memdx.Status) {
	comps, st := parseSubdocPath(s.path)
	if st != memdx.StatusSuccess {
		return nil, st
	}
	if len(comps) == 0 || comps[0].isIndex || comps[0].key != xattrKeyOf(s.path) {
		return nil, memdx.StatusSubdocPathInvalid
	}
	if comps[0].key[0] == '$' {
		doc, ok := vattrDoc(comps[0].key, info, xs, hlcNow)
		if !ok {
			return nil, memdx.StatusSubdocXattrUnknownVattr
		}
		return sdLookup(s.op, doc, comps)
	}
	return sdLookup(s.op, blob, comps)
}
