package mockcluster

import (
	"bytes"
	"strconv"
	"time"

	"github.com/kvwire/kvwire/memdx"
)

// Sub-document commands, as kv_engine runs them (docs/SubDocument.md;
// daemon/subdocument_validators.cc for the request checks,
// daemon/subdocument_traits.h for what each opcode accepts,
// daemon/subdocument.cc and subdocument_context.cc for execution, virtual
// xattrs and macros).

// sdTraits is what an opcode accepts inside a sub-document command.
type sdTraits struct {
	mutator bool
	// flags are the path flags it accepts.
	flags memdx.SubdocPathFlag
	// hasValue: the spec must carry a value (else must not).
	hasValue bool
	// emptyPath: the path may be empty (a body path; an xattr path never).
	emptyPath bool
	// wholeDoc: GET, SET and DELETE of the whole document, multi-path only
	// and with an empty path.
	wholeDoc bool
	// returnsValue: a success carries a value.
	returnsValue bool
}

const (
	pfM = memdx.SubdocPathMkdirP
	pfX = memdx.SubdocPathXattr
	pfE = memdx.SubdocPathExpandMacros
)

var sdOps = map[memdx.OpCode]sdTraits{
	memdx.OpGet:                  {emptyPath: true, wholeDoc: true, returnsValue: true},
	memdx.OpSubdocGet:            {flags: pfX, returnsValue: true},
	memdx.OpSubdocExists:         {flags: pfX},
	memdx.OpSubdocGetCount:       {flags: pfX, emptyPath: true, returnsValue: true},
	memdx.OpSet:                  {mutator: true, hasValue: true, emptyPath: true, wholeDoc: true},
	memdx.OpDelete:               {mutator: true, emptyPath: true, wholeDoc: true},
	memdx.OpSubdocDictAdd:        {mutator: true, flags: pfM | pfX | pfE, hasValue: true},
	memdx.OpSubdocDictUpsert:     {mutator: true, flags: pfM | pfX | pfE, hasValue: true},
	memdx.OpSubdocDelete:         {mutator: true, flags: pfX},
	memdx.OpSubdocReplace:        {mutator: true, flags: pfX | pfE, hasValue: true},
	memdx.OpSubdocArrayPushLast:  {mutator: true, flags: pfM | pfX | pfE, hasValue: true, emptyPath: true},
	memdx.OpSubdocArrayPushFirst: {mutator: true, flags: pfM | pfX | pfE, hasValue: true, emptyPath: true},
	memdx.OpSubdocArrayInsert:    {mutator: true, flags: pfX | pfE, hasValue: true},
	memdx.OpSubdocArrayAddUnique: {mutator: true, flags: pfM | pfX, hasValue: true, emptyPath: true},
	memdx.OpSubdocCounter:        {mutator: true, flags: pfM | pfX, hasValue: true, returnsValue: true},
	// ReplaceBodyWithXattr requires the XATTR flag (checked in
	// validateSubdoc).
	memdx.OpSubdocReplaceBodyWithXattr: {mutator: true, flags: pfX},
}

// Doc flags each kind of command accepts.
const (
	lookupDocFlags   = memdx.SubdocDocAccessDeleted | memdx.SubdocDocReplicaRead
	mutationDocFlags = memdx.SubdocDocMkdoc | memdx.SubdocDocAdd | memdx.SubdocDocAccessDeleted |
		memdx.SubdocDocCreateAsDeleted | memdx.SubdocDocReviveDocument
)

// sdSpec is one path of a sub-document command.
type sdSpec struct {
	op    memdx.OpCode
	flags memdx.SubdocPathFlag
	path  []byte
	value []byte
	tr    sdTraits
}

func (s *sdSpec) xattr() bool { return s.flags&memdx.SubdocPathXattr != 0 }

// sdResult is the outcome of one spec.
type sdResult struct {
	st    memdx.Status
	value []byte
}

func (cn *conn) subdoc(p *memdx.Packet) outcome {
	req, err := memdx.DecodeSubdocRequest(p)
	if err != nil {
		cn.fail(p, memdx.StatusInvalidArgs, err.Error())
		return outcome{}
	}
	multi := p.OpCode == memdx.OpSubdocMultiLookup || p.OpCode == memdx.OpSubdocMultiMutation
	mutator := p.OpCode == memdx.OpSubdocMultiMutation
	var specs []sdSpec
	if multi {
		for _, l := range req.Lookups {
			specs = append(specs, sdSpec{op: l.Op, flags: l.Flags, path: l.Path})
		}
		for _, m := range req.Mutations {
			specs = append(specs, sdSpec{op: m.Op, flags: m.Flags, path: m.Path, value: m.Value})
		}
	} else {
		tr := sdOps[p.OpCode]
		mutator = tr.mutator
		if !mutator && req.HasExpiry {
			cn.fail(p, memdx.StatusInvalidArgs, "Request extras invalid")
			return outcome{}
		}
		specs = []sdSpec{{op: p.OpCode, flags: req.Flags, path: req.Path, value: req.Value, tr: tr}}
	}
	if st, ctx := cn.validateSubdoc(p, &req, specs, multi, mutator); st != memdx.StatusSuccess {
		cn.fail(p, st, ctx)
		return outcome{}
	}
	if !mutator {
		cn.subdocLookup(p, &req, specs, multi)
		return outcome{}
	}
	return cn.subdocMutate(p, &req, specs, multi)
}

// validateSubdoc makes the checks kv_engine's validators make before the
// document is read; a failure is the status of the whole command.
func (cn *conn) validateSubdoc(p *memdx.Packet, req *memdx.SubdocRequest, specs []sdSpec, multi, mutator bool) (memdx.Status, string) {
	df := req.DocFlags
	valid := lookupDocFlags
	if mutator {
		valid = mutationDocFlags
	}
	has := func(f memdx.SubdocDocFlag) bool { return df&f != 0 }
	switch {
	case df&^valid != 0:
		return memdx.StatusInvalidArgs, "Request document flags invalid"
	case has(memdx.SubdocDocAdd) && p.Cas != 0:
		return memdx.StatusInvalidArgs, "Request with add flag must have CAS 0"
	case has(memdx.SubdocDocAdd) && has(memdx.SubdocDocMkdoc):
		return memdx.StatusInvalidArgs, "Request must not contain both add and mkdoc flags"
	case has(memdx.SubdocDocCreateAsDeleted) && !has(memdx.SubdocDocAdd) && !has(memdx.SubdocDocMkdoc):
		return memdx.StatusInvalidArgs, "CreateAsDeleted requires Mkdoc or Add"
	case has(memdx.SubdocDocReviveDocument) && !has(memdx.SubdocDocAccessDeleted):
		return memdx.StatusInvalidArgs, "ReviveDocument can't be used without AccessDeleted"
	case has(memdx.SubdocDocReviveDocument) && has(memdx.SubdocDocCreateAsDeleted):
		return memdx.StatusInvalidArgs, "ReviveDocument can't be used with CreateAsDeleted"
	case has(memdx.SubdocDocReplicaRead) && has(memdx.SubdocDocAccessDeleted):
		return memdx.StatusInvalidArgs, "Can't access deleted documents on replicas"
	}
	if multi {
		if len(specs) == 0 {
			return memdx.StatusSubdocInvalidCombo, "Request must contain at least one path"
		}
		if len(specs) > memdx.SubdocMultiMaxPaths {
			return memdx.StatusSubdocInvalidCombo, "Request must contain at most 16 paths"
		}
	}
	xattrsAllowed, bodyAllowed := true, true
	for i := range specs {
		s := &specs[i]
		if multi {
			tr, ok := sdOps[s.op]
			if !ok {
				return memdx.StatusSubdocInvalidCombo, "Unknown opcode " + s.op.String() + " in spec " + strconv.Itoa(i)
			}
			if tr.mutator != mutator {
				return memdx.StatusSubdocInvalidCombo, "Mutation opcodes only permitted for mutation commands"
			}
			s.tr = tr
		}
		switch {
		case s.flags&^s.tr.flags != 0:
			return memdx.StatusInvalidArgs, "Request flags invalid"
		case len(s.path) > subdocPathMaxLen:
			return memdx.StatusInvalidArgs, "Request path length exceeds maximum"
		case s.tr.wholeDoc && len(s.path) > 0:
			return memdx.StatusInvalidArgs, "Request must not include path for wholedoc operations"
		case !multi && has(memdx.SubdocDocCreateAsDeleted) && !s.xattr():
			return memdx.StatusInvalidArgs, "CreateAsDeleted does not support body path"
		case s.op == memdx.OpSubdocReplaceBodyWithXattr && !s.xattr():
			return memdx.StatusInvalidArgs, "Request missing mandatory flags"
		}
		if st, ctx := cn.validateXattrSpec(s); st != memdx.StatusSuccess {
			return st, ctx
		}
		switch {
		case !s.xattr() && !s.tr.emptyPath && len(s.path) == 0:
			return memdx.StatusInvalidArgs, "Request must include path"
		case s.tr.hasValue && len(s.value) == 0:
			return memdx.StatusInvalidArgs, "Request must include value"
		case !s.tr.hasValue && len(s.value) > 0:
			return memdx.StatusInvalidArgs, "Request must not include value"
		}
		if !bodyAllowed {
			return memdx.StatusSubdocInvalidCombo, "Request contains an invalid combination of commands"
		}
		if xattrsAllowed {
			xattrsAllowed = s.xattr()
		} else if s.xattr() {
			return memdx.StatusSubdocInvalidXattrOrder, ""
		} else if s.op == memdx.OpDelete {
			return memdx.StatusSubdocInvalidCombo, "Request contains an invalid combination of commands"
		}
		if s.op == memdx.OpDelete {
			bodyAllowed = false
		}
	}
	return memdx.StatusSuccess, ""
}

// validateXattrSpec is kv_engine's validate_xattr_section.
func (cn *conn) validateXattrSpec(s *sdSpec) (memdx.Status, string) {
	if !s.xattr() {
		if s.flags&memdx.SubdocPathExpandMacros != 0 {
			return memdx.StatusSubdocXattrInvalidFlagCombo, "EXPAND_MACROS flag requires XATTR flag to be set"
		}
		return memdx.StatusSuccess, ""
	}
	if !cn.has(memdx.FeatureXattr) {
		return memdx.StatusNotSupported, "Connection not XATTR enabled"
	}
	key := xattrKeyOf(s.path)
	if !validXattrKey(key) {
		return memdx.StatusXattrInvalid, "Request XATTR key invalid"
	}
	if key[0] == '$' && s.tr.mutator {
		return memdx.StatusSubdocXattrCantModifyVattr, ""
	}
	if s.flags&memdx.SubdocPathExpandMacros != 0 && !validMacro(s.value) {
		return memdx.StatusSubdocXattrUnknownMacro, ""
	}
	return memdx.StatusSuccess, ""
}

func (vb *vbucket) docInfo(mk string, d *document, deleted bool) docInfo {
	return docInfo{cas: d.cas, seqno: d.seqno, vbUUID: vb.uuid, revid: vb.mutations[mk],
		exptime: d.expiry, flags: d.flags, body: d.value, datatype: d.datatype,
		hasXattrs: len(d.xattrs) > 0, deleted: deleted}
}

// subdocLookup runs SUBDOC_GET, _EXISTS, _GET_COUNT and MULTI_LOOKUP.
func (cn *conn) subdocLookup(p *memdx.Packet, req *memdx.SubdocRequest, specs []sdSpec, multi bool) {
	t, ok := cn.locateChecked(p, req.DocFlags&memdx.SubdocDocReplicaRead != 0)
	if !ok {
		return
	}
	now := cn.c.clock.Now()
	mk := string(t.mk)
	t.vb.mu.Lock()
	d := t.vb.live(t.mk, now)
	deleted := false
	if d == nil && req.DocFlags&memdx.SubdocDocAccessDeleted != 0 {
		d = t.vb.tombs[mk]
		deleted = d != nil
	}
	if d == nil {
		t.vb.mu.Unlock()
		cn.fail(p, memdx.StatusKeyNotFound, "")
		return
	}
	if d.locked(now) && p.Cas != d.cas {
		t.vb.mu.Unlock()
		cn.fail(p, memdx.StatusLocked, "")
		return
	}
	if p.Cas != 0 && p.Cas != d.cas {
		t.vb.mu.Unlock()
		cn.fail(p, memdx.StatusKeyExists, "")
		return
	}
	// The document's slices are never changed in place: they stay valid
	// after the lock is released.
	info := t.vb.docInfo(mk, d, deleted)
	xs, cas := d.xattrs, d.cas
	t.vb.mu.Unlock()

	var blob []byte
	results := make([]sdResult, len(specs))
	failed := false
	for i := range specs {
		s := &specs[i]
		r := &results[i]
		switch {
		case s.op == memdx.OpGet:
			// A tombstone's empty body counts as missing.
			r.value = info.body
			if deleted && len(info.body) == 0 {
				r.st = memdx.StatusSubdocPathNotFound
			}
		case s.xattr():
			if blob == nil {
				blob = xattrBlob(xs)
			}
			r.value, r.st = lookupXattr(s, blob, info, xs, uint64(now.UnixNano()))
		case deleted && len(info.body) == 0:
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

// pendingMacro is a mutation macro written into an xattr as a placeholder,
// replaced by its value once the new document has its CAS and seqno.
type pendingMacro struct {
	placeholder, macro string
}

// subdocMutate runs the single-path mutations and MULTI_MUTATION.
func (cn *conn) subdocMutate(p *memdx.Packet, req *memdx.SubdocRequest, specs []sdSpec, multi bool) outcome {
	f, ok := cn.parseFrames(p, true, true)
	if !ok {
		return outcome{}
	}
	t, ok := cn.locate(p, false)
	if !ok {
		return outcome{}
	}
	df := req.DocFlags
	has := func(fl memdx.SubdocDocFlag) bool { return df&fl != 0 }
	now := cn.c.clock.Now()
	mk := string(t.mk)
	t.vb.mu.Lock()
	if !cn.pendingCheck(p, t) {
		return outcome{}
	}
	fail := func(st memdx.Status, ctx string) outcome {
		t.vb.mu.Unlock()
		cn.fail(p, st, ctx)
		return outcome{}
	}
	base := t.vb.live(t.mk, now)
	wasDeleted := false
	if base == nil && has(memdx.SubdocDocAccessDeleted) {
		if tomb := t.vb.tombs[mk]; tomb != nil {
			base, wasDeleted = tomb, true
		}
	}
	var body []byte
	var xs []xattr
	var info docInfo
	deleted := false
	// bodyJSON: body path operations may run on the body.
	bodyJSON := true
	switch {
	case base != nil:
		if has(memdx.SubdocDocAdd) {
			return fail(memdx.StatusKeyExists, "")
		}
		if has(memdx.SubdocDocReviveDocument) && !wasDeleted {
			return fail(memdx.StatusSubdocCanOnlyReviveDeletedDocuments, "")
		}
		if st := casCheck(base, p.Cas, now); st != memdx.StatusSuccess {
			return fail(st, "")
		}
		body, xs = base.value, base.xattrs
		info = t.vb.docInfo(mk, base, wasDeleted)
		deleted = wasDeleted && !has(memdx.SubdocDocReviveDocument)
		bodyJSON = base.datatype.Has(memdx.DatatypeJSON)
		if wasDeleted && len(body) == 0 {
			body, bodyJSON = initialBody(specs), true
		}
	case p.Cas != 0 || !has(memdx.SubdocDocMkdoc) && !has(memdx.SubdocDocAdd):
		return fail(memdx.StatusKeyNotFound, "")
	default:
		base = &document{}
		info = docInfo{vbUUID: t.vb.uuid}
		deleted = has(memdx.SubdocDocCreateAsDeleted)
		body = initialBody(specs)
	}
	mkdirAll := has(memdx.SubdocDocMkdoc) || has(memdx.SubdocDocAdd)

	// Run the specs: xattr specs (they come first) on the xattrs rendered
	// as one object, then body specs on the body.
	var blob []byte
	var macros []pendingMacro
	var values []byte
	wholeDelete := false
	failAt := func(i int, st memdx.Status) outcome {
		t.vb.mu.Unlock()
		if !multi {
			cn.fail(p, st, "")
			return outcome{}
		}
		fst := memdx.StatusSubdocMultiPathFailure
		if wasDeleted {
			fst = memdx.StatusSubdocMultiPathFailureDeleted
		}
		cn.reply(p, fst, 0, 0, nil, nil, memdx.AppendSubdocMutateResult(nil, uint8(i), st, nil))
		return outcome{}
	}
	var result []byte
	for i := range specs {
		s := &specs[i]
		mkdirP := mkdirAll || s.flags&memdx.SubdocPathMkdirP != 0
		result = nil
		switch {
		case s.xattr():
			if blob == nil {
				blob = xattrBlob(xs)
			}
			comps, st := parseSubdocPath(s.path)
			if st == memdx.StatusSuccess && (len(comps) == 0 || comps[0].isIndex || comps[0].key != xattrKeyOf(s.path)) {
				st = memdx.StatusSubdocPathInvalid
			}
			if st != memdx.StatusSuccess {
				return failAt(i, st)
			}
			if s.op == memdx.OpSubdocReplaceBodyWithXattr {
				v, st := sdLookup(memdx.OpSubdocGet, blob, comps)
				if st != memdx.StatusSuccess {
					return failAt(i, st)
				}
				body, bodyJSON = v, true
				continue
			}
			value := s.value
			if s.flags&memdx.SubdocPathExpandMacros != 0 {
				switch string(value) {
				case macroCAS, macroSeqno, macroCRC:
					ph := `"$kvwire-macro-` + strconv.FormatUint(randUint64(), 16) + `"`
					macros = append(macros, pendingMacro{placeholder: ph, macro: string(value)})
					value = []byte(ph)
				default:
					v, ok := expandVirtualMacro(value, info)
					if !ok {
						return failAt(i, memdx.StatusSubdocXattrUnknownVattrMacro)
					}
					value = v
				}
			}
			nb, res, st := sdMutate(s.op, blob, comps, value, mkdirP)
			if st != memdx.StatusSuccess {
				return failAt(i, st)
			}
			blob, result = nb, res
		case s.op == memdx.OpSet:
			body = append([]byte(nil), s.value...)
			_, st := parseJSON(body, subdocMaxDepth)
			bodyJSON = st == memdx.StatusSuccess
		case s.op == memdx.OpDelete:
			wholeDelete = true
		default:
			if !bodyJSON {
				return failAt(i, memdx.StatusSubdocNotJSON)
			}
			comps, st := parseSubdocPath(s.path)
			if st != memdx.StatusSuccess {
				return failAt(i, st)
			}
			nb, res, st := sdMutate(s.op, body, comps, s.value, mkdirP)
			if st != memdx.StatusSuccess {
				return failAt(i, st)
			}
			body, result = nb, res
		}
		if s.tr.returnsValue {
			values = memdx.AppendSubdocMutateResult(values, uint8(i), memdx.StatusSuccess, result)
		}
	}
	if blob != nil {
		xs = xattrsFromBlob(blob)
	}
	switch {
	case wholeDelete:
	case deleted:
		if bodyChanged(specs) {
			return fail(memdx.StatusSubdocDeletedDocumentCantHaveValue, "")
		}
		body = nil
	case wasDeleted && !bodyChanged(specs):
		// A revived document keeps its (empty) body unless a spec set one.
		body = base.value
	}
	user, system := xattrsSize(xs)
	if len(body)+user > maxValue || system > maxSystemXattrSize {
		return fail(memdx.StatusTooBig, "")
	}

	nd := &document{value: body, flags: base.flags, xattrs: xs}
	if len(body) > 0 && bodyJSON {
		nd.datatype = memdx.DatatypeJSON
	}
	switch {
	case req.HasExpiry:
		nd.expiry = expiry(req.Expiry, now)
	case f.preserveTTL:
		nd.expiry = base.expiry
	}
	vb := t.vb
	resultDeleted := deleted
	return cn.commitMutation(p, t, f, func(now time.Time) mutResult {
		switch {
		case wholeDelete:
			if sys := systemXattrs(nd.xattrs); len(sys) > 0 {
				nd = &document{flags: nd.flags, xattrs: sys}
				vb.storeTomb(mk, nd, now)
			} else {
				nd = &document{}
				vb.drop(mk, nd, now)
			}
		case resultDeleted:
			vb.storeTomb(mk, nd, now)
		default:
			vb.store(mk, nd, now)
		}
		expandMacros(nd, macros)
		return mutResult{cas: nd.cas, seqno: nd.seqno, vbUUID: vb.uuid}
	}, func(h *memdx.Packet, r mutResult) {
		st := memdx.StatusSuccess
		if resultDeleted && !wholeDelete {
			st = memdx.StatusSubdocSuccessDeleted
		}
		var ext [16]byte
		var extras []byte
		if cn.has(memdx.FeatureMutationSeqno) {
			putUint64(ext[0:8], r.vbUUID)
			putUint64(ext[8:16], r.seqno)
			extras = ext[:]
		}
		value, dt := values, memdx.Datatype(0)
		if !multi {
			value = nil
			if specs[0].tr.returnsValue {
				value, dt = result, cn.outDatatype(memdx.DatatypeJSON)
			}
		}
		cn.reply(h, st, r.cas, dt, extras, nil, value)
	})
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
	vb.seqno++
	d.seqno = vb.seqno
	delete(vb.docs, mk)
	delete(vb.tombs, mk)
	vb.mutations[mk]++
}
