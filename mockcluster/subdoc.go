package mockcluster

import (
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
		cn.fail(p, memdx.StatusInvalidArgs, subdocDecodeContext(p, err))
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

// subdocDecodeContext is kv_engine's error context for the first thing
// that keeps a sub-document request from parsing (subdoc_validator,
// subdoc_multi_validator and is_valid_multipath_spec in
// daemon/subdocument_validators.cc); err's text when it knows none.
func subdocDecodeContext(p *memdx.Packet, err error) string {
	be16 := func(b []byte) int { return int(b[0])<<8 | int(b[1]) }
	switch p.OpCode {
	case memdx.OpSubdocMultiLookup:
		if len(p.Extras) > 1 {
			return "Request extras invalid"
		}
		for b := p.Value; len(b) > 0; {
			if len(b) < 4 {
				return "Multi lookup spec truncated"
			}
			n := 4 + be16(b[2:4])
			if n > len(b) {
				return "Multi lookup path truncated"
			}
			b = b[n:]
		}
	case memdx.OpSubdocMultiMutation:
		switch len(p.Extras) {
		case 0, 1, 4, 5:
		default:
			return "Request extras invalid"
		}
		for b := p.Value; len(b) > 0; {
			if len(b) < 8 {
				return "Multi mutation spec truncated"
			}
			// In 64 bits: a 4 GiB value length must not wrap.
			n := 8 + uint64(be16(b[2:4])) + uint64(getUint32(b[4:8]))
			if n > uint64(len(b)) {
				return "Multi mutation path and value truncated"
			}
			b = b[n:]
		}
	default:
		switch len(p.Extras) {
		case 3, 4, 7, 8:
		default:
			return "Invalid extras section"
		}
		switch pl := be16(p.Extras[0:2]); {
		case pl > subdocPathMaxLen:
			return "Request path length exceeds maximum"
		case pl > len(p.Value):
			return "Path length can't exceed value"
		}
	}
	return err.Error()
}

// validateSubdoc makes the checks kv_engine's validators make before the
// document is read, in their order (daemon/subdocument_validators.cc:
// subdoc_validator for a single path, subdoc_multi_validator and
// is_valid_multipath_spec for several); a failure is the status of the
// whole command.
func (cn *conn) validateSubdoc(p *memdx.Packet, req *memdx.SubdocRequest, specs []sdSpec, multi, mutator bool) (memdx.Status, string) {
	if !multi {
		return cn.validateSubdocSingle(p, req, &specs[0], mutator)
	}
	// subdoc_multi_validator: the doc flags' combinations first.
	if st, ctx := validateDocFlagCombos(p, req.DocFlags); st != memdx.StatusSuccess {
		return st, ctx
	}
	xattrsAllowed, bodyAllowed := true, true
	n := min(len(specs), memdx.SubdocMultiMaxPaths)
	for i := range n {
		if !bodyAllowed {
			return memdx.StatusSubdocInvalidCombo, "Request contains an invalid combination of commands"
		}
		s := &specs[i]
		tr, ok := sdOps[s.op]
		if !ok {
			return memdx.StatusSubdocInvalidCombo, "Subdoc and MCBP command must not both be invalid"
		}
		if tr.mutator != mutator {
			return memdx.StatusSubdocInvalidCombo, "Mutation opcodes only permitted for mutation commands"
		}
		s.tr = tr
		switch {
		case s.flags&^s.tr.flags != 0:
			return memdx.StatusInvalidArgs, "Request flags invalid"
		case s.op == memdx.OpSubdocReplaceBodyWithXattr && !s.xattr():
			return memdx.StatusInvalidArgs, "Request missing mandatory flags"
		}
		if st, ctx := validateDocFlagsFor(req.DocFlags, mutator); st != memdx.StatusSuccess {
			return st, ctx
		}
		switch {
		case len(s.path) > subdocPathMaxLen:
			return memdx.StatusInvalidArgs, "Request path length exceeds maximum"
		case s.tr.wholeDoc && len(s.path) > 0:
			return memdx.StatusInvalidArgs, "Request must not include path for wholedoc operations"
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
	// The counts come last, after the first 16 specs were judged.
	if len(specs) == 0 {
		return memdx.StatusSubdocInvalidCombo, "Request must contain at least one path"
	}
	if len(specs) > memdx.SubdocMultiMaxPaths {
		return memdx.StatusSubdocInvalidCombo, "Request must contain at most 16 paths"
	}
	return memdx.StatusSuccess, ""
}

// validateSubdocSingle is subdoc_validator, for a single-path command.
func (cn *conn) validateSubdocSingle(p *memdx.Packet, req *memdx.SubdocRequest, s *sdSpec, mutator bool) (memdx.Status, string) {
	df := req.DocFlags
	has := func(f memdx.SubdocDocFlag) bool { return df&f != 0 }
	switch {
	case len(s.path) > subdocPathMaxLen:
		return memdx.StatusInvalidArgs, "Request path length exceeds maximum"
	case s.tr.hasValue && len(s.value) == 0:
		return memdx.StatusInvalidArgs, "Request must include value"
	case !s.tr.hasValue && len(s.value) > 0:
		return memdx.StatusInvalidArgs, "Request must not include value"
	case s.flags&^s.tr.flags != 0:
		return memdx.StatusInvalidArgs, "Request flags invalid"
	case s.op == memdx.OpSubdocReplaceBodyWithXattr && !s.xattr():
		return memdx.StatusInvalidArgs, "Request missing mandatory flags"
	}
	if st, ctx := validateDocFlagsFor(df, mutator); st != memdx.StatusSuccess {
		return st, ctx
	}
	if has(memdx.SubdocDocCreateAsDeleted) && !s.xattr() {
		return memdx.StatusInvalidArgs, "CreateAsDeleted does not support body path"
	}
	if st, ctx := validateDocFlagCombos(p, df); st != memdx.StatusSuccess {
		return st, ctx
	}
	if st, ctx := cn.validateXattrSpec(s); st != memdx.StatusSuccess {
		return st, ctx
	}
	if !s.tr.emptyPath && len(s.path) == 0 {
		return memdx.StatusInvalidArgs, "Request must include path"
	}
	if !mutator && req.HasExpiry {
		// Last in subdoc_validator: a lookup's extras carry no expiry.
		return memdx.StatusInvalidArgs, "Request extras invalid"
	}
	return memdx.StatusSuccess, ""
}

// validateDocFlagsFor checks that the command takes the doc flags ("Request
// document flags invalid") and that CreateAsDeleted comes with Mkdoc or
// Add.
func validateDocFlagsFor(df memdx.SubdocDocFlag, mutator bool) (memdx.Status, string) {
	valid := lookupDocFlags
	if mutator {
		valid = mutationDocFlags
	}
	switch {
	case df&^valid != 0:
		return memdx.StatusInvalidArgs, "Request document flags invalid"
	case df&memdx.SubdocDocCreateAsDeleted != 0 && df&(memdx.SubdocDocAdd|memdx.SubdocDocMkdoc) == 0:
		return memdx.StatusInvalidArgs, "CreateAsDeleted requires Mkdoc or Add"
	}
	return memdx.StatusSuccess, ""
}

// validateDocFlagCombos checks the combinations of doc flags kv_engine
// refuses.
func validateDocFlagCombos(p *memdx.Packet, df memdx.SubdocDocFlag) (memdx.Status, string) {
	has := func(f memdx.SubdocDocFlag) bool { return df&f != 0 }
	switch {
	case has(memdx.SubdocDocAdd) && p.Cas != 0:
		return memdx.StatusInvalidArgs, "Request with add flag must have CAS 0"
	case has(memdx.SubdocDocAdd) && has(memdx.SubdocDocMkdoc):
		return memdx.StatusInvalidArgs, "Request must not contain both add and mkdoc flags"
	case has(memdx.SubdocDocReviveDocument) && !has(memdx.SubdocDocAccessDeleted):
		return memdx.StatusInvalidArgs, "ReviveDocument can't be used without AccessDeleted"
	case has(memdx.SubdocDocReviveDocument) && has(memdx.SubdocDocCreateAsDeleted):
		return memdx.StatusInvalidArgs, "ReviveDocument can't be used with CreateAsDeleted"
	case has(memdx.SubdocDocReplicaRead) && has(memdx.SubdocDocAccessDeleted):
		return memdx.StatusInvalidArgs, "Can't access deleted documents on replicas"
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
