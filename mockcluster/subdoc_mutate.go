package mockcluster

// The single-path sub-document mutations and SUBDOC_MULTI_MUTATION.

import (
	"bytes"
	"strconv"
	"time"

	"github.com/kvwire/kvwire/memdx"
)

// pendingMacro is a mutation macro written into an xattr as a placeholder,
// replaced by its value once the new document has its CAS and seqno.
type pendingMacro struct {
	placeholder, macro string
}

// sdMutation is one sub-document mutation's working state while its
// vbucket is locked: the document it starts from and what its specs made
// of it.
type sdMutation struct {
	specs []sdSpec
	multi bool
	// mkdirAll: Mkdoc or Add, which create intermediate paths for every
	// spec.
	mkdirAll bool

	base *document
	// wasDeleted: base is a tombstone (AccessDeleted); deleted: the result
	// stays one; created: base is a new, empty document (no document was
	// found).
	wasDeleted, deleted, created bool
	info                         docInfo
	body                         []byte
	// bodyJSON: body path operations may run on the body.
	bodyJSON bool
	xs       []xattr
	// blob is the xattrs rendered as one object once an xattr spec ran.
	blob   []byte
	macros []pendingMacro
	// values are MULTI_MUTATION's results of the specs that return one;
	// result is the last spec's (the single-path answer).
	values, result []byte
	wholeDelete    bool
}

// subdocMutate runs the single-path mutations and MULTI_MUTATION.
func (cn *conn) subdocMutate(p *memdx.Packet, req *memdx.SubdocRequest, specs []sdSpec, multi bool) outcome {
	f, ok := cn.parseFrames(p, true, true)
	if !ok {
		return outcome{}
	}
	t, ok := cn.locateMutation(p, f)
	if !ok {
		return outcome{}
	}
	now := cn.c.clock.Now()
	mk := string(t.mk)
	t.vb.mu.Lock()
	if !cn.pendingCheck(p, t) {
		return outcome{}
	}
	m := &sdMutation{specs: specs, multi: multi,
		mkdirAll: req.DocFlags&(memdx.SubdocDocMkdoc|memdx.SubdocDocAdd) != 0}
	if st := m.start(t, mk, p.Cas, req.DocFlags, now); st != memdx.StatusSuccess {
		t.vb.mu.Unlock()
		cn.fail(p, st, "")
		return outcome{}
	}
	// validate_xattr_privilege (daemon/subdocument.cc): changing a system
	// xattr needs SystemXattrWrite, checked once the document was
	// fetched; a multi-path mutation fails at its first xattr spec
	// (every one is marked EACCESS, and they come first). As for a
	// lookup, the status is sent as it is, XERROR or not.
	if i := firstSystemXattrSpec(specs); i >= 0 && !cn.hasBucketPrivilege("SystemXattrWrite") {
		t.vb.mu.Unlock()
		if !multi {
			cn.failPrivilege(p, "SystemXattrWrite")
			return outcome{}
		}
		for i = 0; !specs[i].xattr(); i++ {
		}
		cn.failSpec(p, m, i, memdx.StatusNoAccess)
		return outcome{}
	}
	if i, st := m.run(); st != memdx.StatusSuccess {
		t.vb.mu.Unlock()
		cn.failSpec(p, m, i, st)
		return outcome{}
	}
	if st := m.finish(t.b.valueLimit()); st != memdx.StatusSuccess {
		t.vb.mu.Unlock()
		cn.fail(p, st, "")
		return outcome{}
	}
	nd := &document{value: m.body, flags: m.base.flags, xattrs: m.xs}
	if len(m.body) > 0 && m.bodyJSON {
		nd.datatype = memdx.DatatypeJSON
	}
	// PreserveTtl keeps the expiry of a document that was found, even
	// when the request carries one (SubdocCommandContext::allocate_document
	// takes the fetched item's expiry whenever preserveTtl is set).
	switch {
	case f.preserveTTL && !m.created && !m.wasDeleted:
		// (A tombstone's expiry is its deletion time: a revived
		// document has none to keep.)
		nd.expiry = m.base.expiry
	case req.HasExpiry:
		nd.expiry = expiry(req.Expiry, now)
	}
	vb := t.vb
	return cn.commitMutation(p, t, f, func(now time.Time) mutResult {
		nd = m.commit(vb, mk, nd, now)
		return mutResult{cas: nd.cas, seqno: nd.seqno, vbUUID: vb.uuid}
	}, func(h *memdx.Packet, r mutResult) { cn.replyMutation(h, m, r) })
}

// start picks the document the mutation starts from: the live one, a
// tombstone (AccessDeleted), or a new one (Mkdoc or Add); it answers what
// the document's state and the CAS decide. The CAS is checked against a
// document found only: Mkdoc creates a missing one whatever the CAS, as
// kv_engine's fetch_input_document does. t.vb.mu must be held.
func (m *sdMutation) start(t target, mk string, cas uint64, df memdx.SubdocDocFlag, now time.Time) memdx.Status {
	has := func(fl memdx.SubdocDocFlag) bool { return df&fl != 0 }
	vb := t.vb
	base := vb.live(t.mk, now)
	if base == nil && has(memdx.SubdocDocAccessDeleted) {
		if tomb := vb.tomb(mk, now); tomb != nil {
			base, m.wasDeleted = tomb, true
		}
	}
	m.bodyJSON = true
	switch {
	case base != nil:
		if has(memdx.SubdocDocAdd) {
			return memdx.StatusKeyExists
		}
		if has(memdx.SubdocDocReviveDocument) && !m.wasDeleted {
			return memdx.StatusSubdocCanOnlyReviveDeletedDocuments
		}
		if st := casCheck(base, cas, now); st != memdx.StatusSuccess {
			if st == memdx.StatusLocked && (cas == 0 || cas == lockedCas) {
				// kv_engine's get_document_for_searching answers
				// locked_tmpfail (to no CAS and to the hidden one a GET
				// of the locked document showed, as for a lookup); a
				// wrong CAS fails at the store, locked.
				st = statusLockedTmpfail
			}
			return st
		}
		m.body, m.xs = base.value, base.xattrs
		m.info = vb.docInfo(mk, base, m.wasDeleted)
		m.deleted = m.wasDeleted && !has(memdx.SubdocDocReviveDocument)
		m.bodyJSON = base.datatype.Has(memdx.DatatypeJSON)
		if m.wasDeleted && len(m.body) == 0 {
			m.body, m.bodyJSON = initialBody(m.specs), true
		}
	case !has(memdx.SubdocDocMkdoc) && !has(memdx.SubdocDocAdd):
		return memdx.StatusKeyNotFound
	default:
		base, m.created = &document{}, true
		m.info = docInfo{vbUUID: vb.uuid}
		m.deleted = has(memdx.SubdocDocCreateAsDeleted)
		m.body = initialBody(m.specs)
	}
	m.base = base
	return memdx.StatusSuccess
}

// run applies the specs in order: xattr specs (they come first) on the
// xattrs rendered as one object, then body specs on the body. On a failure
// it returns the failing spec's index and status.
func (m *sdMutation) run() (int, memdx.Status) {
	for i := range m.specs {
		s := &m.specs[i]
		m.result = nil
		var st memdx.Status
		switch {
		case s.xattr():
			st = m.applyXattr(s)
		case s.op == memdx.OpSet:
			m.body = append([]byte(nil), s.value...)
			_, jst := parseJSON(m.body, subdocMaxDepth)
			m.bodyJSON = jst == memdx.StatusSuccess
		case s.op == memdx.OpDelete:
			m.wholeDelete = true
		default:
			st = m.applyBody(s)
		}
		if st != memdx.StatusSuccess {
			return i, st
		}
		if s.tr.returnsValue {
			m.values = memdx.AppendSubdocMutateResult(m.values, uint8(i), memdx.StatusSuccess, m.result)
		}
	}
	return 0, memdx.StatusSuccess
}

// applyXattr applies one xattr spec to the xattrs, expanding macros:
// mutation macros (CAS, seqno, CRC) become placeholders filled in at
// commit, virtual ones are expanded now.
func (m *sdMutation) applyXattr(s *sdSpec) memdx.Status {
	if m.blob == nil {
		m.blob = xattrBlob(m.xs)
	}
	comps, st := parseSubdocPath(s.path)
	if st == memdx.StatusSuccess && (len(comps) == 0 || comps[0].isIndex || comps[0].key != xattrKeyOf(s.path)) {
		st = memdx.StatusSubdocPathInvalid
	}
	if st != memdx.StatusSuccess {
		return st
	}
	if s.op == memdx.OpSubdocReplaceBodyWithXattr {
		v, st := sdLookup(memdx.OpSubdocGet, m.blob, comps)
		if st != memdx.StatusSuccess {
			return st
		}
		m.body, m.bodyJSON = v, true
		return memdx.StatusSuccess
	}
	value := s.value
	if s.flags&memdx.SubdocPathExpandMacros != 0 {
		switch string(value) {
		case macroCAS, macroSeqno, macroCRC:
			ph := `"$kvwire-macro-` + strconv.FormatUint(randUint64(), 16) + `"`
			m.macros = append(m.macros, pendingMacro{placeholder: ph, macro: string(value)})
			value = []byte(ph)
		default:
			v, ok := expandVirtualMacro(value, m.info)
			if !ok {
				return memdx.StatusSubdocXattrUnknownVattrMacro
			}
			value = v
		}
	}
	nb, res, st := sdMutate(s.op, m.blob, comps, value, m.mkdirAll || s.flags&memdx.SubdocPathMkdirP != 0)
	if st != memdx.StatusSuccess {
		return st
	}
	m.blob, m.result = nb, res
	return memdx.StatusSuccess
}

// applyBody applies one body path spec to the body.
func (m *sdMutation) applyBody(s *sdSpec) memdx.Status {
	if !m.bodyJSON {
		return memdx.StatusSubdocNotJSON
	}
	comps, st := parseSubdocPath(s.path)
	if st != memdx.StatusSuccess {
		return st
	}
	nb, res, st := sdMutate(s.op, m.body, comps, s.value, m.mkdirAll || s.flags&memdx.SubdocPathMkdirP != 0)
	if st != memdx.StatusSuccess {
		return st
	}
	m.body, m.result = nb, res
	return memdx.StatusSuccess
}

// finish settles the new document's body and xattrs once every spec ran,
// and checks its size against the bucket's limit.
func (m *sdMutation) finish(limit int) memdx.Status {
	if m.blob != nil {
		m.xs = xattrsFromBlob(m.blob)
	}
	switch {
	case m.wholeDelete:
	case m.deleted:
		if bodyChanged(m.specs) {
			return memdx.StatusSubdocDeletedDocumentCantHaveValue
		}
		m.body = nil
	case m.wasDeleted && !bodyChanged(m.specs):
		// A revived document keeps its (empty) body unless a spec set one.
		m.body = m.base.value
	}
	user, system := xattrsSize(m.xs)
	if len(m.body)+user > limit || system > maxSystemXattrSize {
		return memdx.StatusTooBig
	}
	return memdx.StatusSuccess
}

// commit installs nd (or deletes the document) and fills in the mutation
// macros; it returns the document as stored. vb.mu must be held.
func (m *sdMutation) commit(vb *vbucket, mk string, nd *document, now time.Time) *document {
	switch {
	case m.wholeDelete:
		// A tombstone with the system xattrs, as a DELETE leaves.
		nd = &document{flags: nd.flags, xattrs: systemXattrs(nd.xattrs)}
		vb.storeTomb(mk, nd, now)
	case m.deleted:
		vb.storeTomb(mk, nd, now)
	default:
		vb.store(mk, nd, now)
	}
	expandMacros(nd, m.macros)
	return nd
}

// failSpec answers a spec's failure: its status for a single-path command,
// MULTI_PATH_FAILURE with the spec's index and status for MULTI_MUTATION.
func (cn *conn) failSpec(p *memdx.Packet, m *sdMutation, i int, st memdx.Status) {
	if !m.multi {
		cn.fail(p, st, "")
		return
	}
	// MULTI_PATH_FAILURE even on a tombstone: kv_engine says
	// _DELETED for a lookup only (send_multi_mutation_response sends the
	// overall status as it is).
	cn.reply(p, memdx.StatusSubdocMultiPathFailure, 0, 0, nil, nil, memdx.AppendSubdocMutateResult(nil, uint8(i), st, nil))
}

// replyMutation answers a committed mutation: the mutation token with
// MutationSeqno, and the values of the specs that return one.
func (cn *conn) replyMutation(h *memdx.Packet, m *sdMutation, r mutResult) {
	st := memdx.StatusSuccess
	if m.deleted && !m.wholeDelete {
		st = memdx.StatusSubdocSuccessDeleted
	}
	var ext [16]byte
	extras := cn.tokenExtras(&ext, r)
	value, dt := m.values, memdx.Datatype(0)
	if !m.multi {
		value = nil
		if m.specs[0].tr.returnsValue {
			value, dt = m.result, cn.outDatatype(memdx.DatatypeJSON)
		}
	}
	cn.reply(h, st, r.cas, dt, extras, nil, value)
}

// initialBody is the empty document a command starts from when it creates
// one (kv_engine picks the root from the first body path): an array when
// the first body spec is an array operation on the root or its path starts
// with an index, else an object.
func initialBody(specs []sdSpec) []byte {
	for i := range specs {
		s := &specs[i]
		if s.xattr() || s.tr.wholeDoc {
			continue
		}
		switch {
		case len(s.path) > 0 && s.path[0] == '[',
			len(s.path) == 0 && (s.op == memdx.OpSubdocArrayPushFirst || s.op == memdx.OpSubdocArrayPushLast ||
				s.op == memdx.OpSubdocArrayAddUnique):
			return []byte("[]")
		}
		break
	}
	return []byte("{}")
}

// bodyChanged reports whether any spec writes the body.
func bodyChanged(specs []sdSpec) bool {
	for i := range specs {
		if !specs[i].xattr() || specs[i].op == memdx.OpSubdocReplaceBodyWithXattr {
			return true
		}
	}
	return false
}

// expandMacros replaces the mutation macros' placeholders in d's xattrs
// with their values, now that d has its CAS and seqno.
func expandMacros(d *document, macros []pendingMacro) {
	if len(macros) == 0 {
		return
	}
	for i := range d.xattrs {
		v := d.xattrs[i].value
		for _, m := range macros {
			if bytes.Contains(v, []byte(m.placeholder)) {
				v = bytes.ReplaceAll(v, []byte(m.placeholder),
					[]byte(macroExpansion(m.macro, d.cas, d.seqno, d.value)))
			}
		}
		d.xattrs[i].value = v
	}
}

// drop deletes mk and its tombstone outright, taking a new CAS and seqno
// into d. vb.mu must be held.
func (vb *vbucket) drop(mk string, d *document, now time.Time) {
	d.cas = vb.nextCas(now)
	d.seqno = vb.nextSeqno()
	delete(vb.docs, mk)
	delete(vb.tombs, mk)
	vb.mutations[mk]++
}
