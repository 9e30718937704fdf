package mockcluster

// Impersonation: a request with the Impersonate frame info runs as another
// user (kv_engine's Cookie::doExecute and fetchEuidPrivilegeSet,
// daemon/cookie.cc).

import (
	"slices"
	"strconv"

	"github.com/kvwire/kvwire/memdx"
)

// mayAdminister reports whether the request may use the cluster-wide
// privilege priv (Administrator, SystemSettings): of the mock's users only
// those that may use every bucket have them, and an impersonated user must
// have it too, or be granted it by the request (Cookie::checkPrivilege
// checks both users, passing one the request grants the effective user).
func (cn *conn) mayAdminister(priv string) bool {
	u := cn.user.Load()
	return u != nil && u.all && (cn.euid == nil || cn.euid.all || slices.Contains(cn.euidExtra, priv))
}

// impersonate acts on the Impersonate frame info of a request that passed
// validation, as kv_engine does before running it: the connection's user
// needs the Impersonate privilege (EACCESS), an external user ("^name")
// needs an external authentication service, which the mock has not
// (NOT_SUPPORTED), and a local user must exist (EACCESS). It sets cn.euid
// and reports false after answering.
func (cn *conn) impersonate(p *memdx.Packet) bool {
	var name []byte
	found := false
	cn.euidExtra = cn.euidExtra[:0]
	_ = memdx.FrameInfos(p.FramingExtras, func(id uint16, data []byte) error {
		switch memdx.RequestFrameID(id) {
		case memdx.FrameImpersonateUser:
			name, found = data, true
		case memdx.FrameImpersonateUserExtraPrivilege:
			cn.euidExtra = append(cn.euidExtra, string(data))
		}
		return nil
	})
	if !found {
		// Extra privileges extend the impersonated user's privileges
		// only: without one they change nothing (Cookie::checkPrivilege).
		cn.euidExtra = cn.euidExtra[:0]
		return true
	}
	// verifyFrames refused these already for the commands it judges.
	if st, ctx := impersonateFrameValid(name); st != memdx.StatusSuccess {
		cn.fail(p, st, ctx)
		return false
	}
	if u := cn.user.Load(); u == nil || !u.all || !cn.authed.Load() {
		// Before authentication (HELLO, SASL) nobody has the privilege.
		cn.failPrivilege(p, "Impersonate")
		return false
	}
	if name[0] == '^' {
		cn.fail(p, memdx.StatusNotSupported, "External authentication service not configured")
		return false
	}
	u := cn.c.lookupUser(string(name))
	if u == nil {
		cn.fail(p, memdx.StatusNoAccess, "User "+strconv.Quote(string(name))+" is not a Couchbase user")
		return false
	}
	cn.euid = u
	return true
}

// requestUser is whom a request runs as: the connection's user, or the
// user it impersonates (conn.euid) with the privileges it grants
// (conn.euidExtra), which each request handled sets anew.
type requestUser struct {
	euid  *user
	extra []string
}

// requestUser returns the request being handled's requestUser, for a step
// of it that runs later (as).
func (cn *conn) requestUser() requestUser {
	return requestUser{euid: cn.euid, extra: slices.Clone(cn.euidExtra)}
}

// as runs fn, a step of an earlier request, as that request's user u,
// then puts back the connection's: a step that runs once the connection
// has handled other requests (an unordered connection reads on) must
// check its own request's privileges. wmu must be held.
func (cn *conn) as(u requestUser, fn func()) {
	euid, extra := cn.euid, cn.euidExtra
	cn.euid, cn.euidExtra = u.euid, u.extra
	defer func() { cn.euid, cn.euidExtra = euid, extra }()
	fn()
}

// mayRunAs is the privilege check a document command passes before it
// runs (kv_engine's McbpPrivilegeChains, daemon/mcbp_privileges.cc): the
// connection's user may use the bucket it selected, so only an
// impersonated user can fail it, one without access to the bucket, whose
// privileges in it are none. It reports false after answering EACCESS
// naming the privilege the opcode needs first.
//
// A command in a system collection (the request's key's collection,
// validateKey found it) needs SystemCollectionLookup before each Read of
// its chain and SystemCollectionMutation before each write privilege
// (requirePrivilegesOnCurrentDocument: Cookie::isAccessingSystemCollection).
func (cn *conn) mayRunAs(p *memdx.Packet) bool {
	b := cn.bucket.Load()
	if cn.euid == nil || b == nil || cn.euid.mayUse(b.name) {
		return true
	}
	if missing := cn.euidMissingIn(p.OpCode, cn.inSystemCollection(p)); missing != "" {
		cn.refusePrivilege(p, missing)
		return false
	}
	return true
}

// inSystemCollection reports whether p's key is in a system collection of
// the connection's bucket (isSystemCollection).
func (cn *conn) inSystemCollection(p *memdx.Packet) bool {
	s, cid, st := cn.lookupCollection(p)
	return st == memdx.StatusSuccess && s != nil && s.manifest.system(cid)
}

// hasBucketPrivilege reports whether the request holds priv in its bucket:
// the connection's user holds every privilege in the bucket it selected,
// so only an impersonated user without access to the bucket lacks one, one
// the request does not grant (Cookie::checkPrivilege).
func (cn *conn) hasBucketPrivilege(priv string) bool {
	b := cn.bucket.Load()
	return cn.euid == nil || b == nil || cn.euid.mayUse(b.name) || slices.Contains(cn.euidExtra, priv)
}

// collectionPrivilegeMissing is the privilege an access to collection cid
// with priv lacks ("" when none): SystemCollectionLookup first when cid is
// a system collection of s, then priv (kv_engine's checkCollectionAccess,
// as RangeScan::hasPrivilege calls it).
func (cn *conn) collectionPrivilegeMissing(s *bucketSnap, cid uint32, priv string) string {
	if s.manifest.system(cid) && !cn.hasBucketPrivilege(systemCollectionLookup) {
		return systemCollectionLookup
	}
	if !cn.hasBucketPrivilege(priv) {
		return priv
	}
	return ""
}

// The privileges a command in a system collection needs besides the user
// ones (rbac/privileges.cc).
const (
	systemCollectionLookup   = "SystemCollectionLookup"
	systemCollectionMutation = "SystemCollectionMutation"
)

// euidMissing is euidMissingIn for a command outside the system
// collections.
func (cn *conn) euidMissing(op memdx.OpCode) string { return cn.euidMissingIn(op, false) }

// euidMissingIn is the first privilege of op's chain that an impersonated
// user without privileges in the bucket lacks ("" when the request's
// ImpersonateUserExtraPrivilege frame infos grant them all): kv_engine's
// Cookie::checkPrivilege passes a privilege the connection's user holds
// and the request grants, and McbpPrivilegeChains checks each privilege of
// the opcode's chain in turn; system: the command's collection is a system
// collection, whose privilege comes before each of the chain's
// (requirePrivilegesOnCurrentDocument, daemon/mcbp_privileges.cc).
func (cn *conn) euidMissingIn(op memdx.OpCode, system bool) string {
	has := func(p string) bool { return slices.Contains(cn.euidExtra, p) }
	if op == memdx.OpAdd || op == memdx.OpAddQ {
		// requireInsertOrUpsertOnCurrentDocument: the system
		// collection's privilege, then Insert, else Upsert, the failure
		// of which the error context names.
		if system && !has(systemCollectionMutation) {
			return systemCollectionMutation
		}
		if has("Insert") || has("Upsert") {
			return ""
		}
		return "Upsert"
	}
	for _, priv := range opPrivileges(op) {
		if system {
			sys := systemCollectionMutation
			if priv == "Read" {
				sys = systemCollectionLookup
			}
			if !has(sys) {
				return sys
			}
		}
		if !has(priv) {
			return priv
		}
	}
	return ""
}

// opPrivileges is the chain of privileges an opcode's command checks
// (McbpPrivilegeChains, daemon/mcbp_privileges.cc): GAT and the counters
// read and write the document, Read then Upsert; a write needs Upsert (a
// sub-document multi-mutation included), a delete Delete, anything else
// Read (GET_META included: kv_engine has no MetaRead; OBSERVE_SEQNO's is
// Read "in at least one collection", requirePrivilegeInAtLeastOneCollection,
// which the mock's users, holding every privilege in a bucket or only those
// a request grants, pass exactly when they hold Read in the bucket).
// OBSERVE has none: the engine checks Read on each key's collection
// (observe). The range scan commands have none: ep-engine checks the RangeScan
// privilege on the scan's collection, at create once it has found the
// collection (createScan), at continue and cancel once it has found the
// scan (rangeScanContinue, rangeScanCancel).
func opPrivileges(op memdx.OpCode) []string {
	switch op {
	case memdx.OpObserve, memdx.OpRangeScanCreate, memdx.OpRangeScanContinue, memdx.OpRangeScanCancel:
		return nil
	case memdx.OpGAT, memdx.OpGATQ, memdx.OpIncrement, memdx.OpIncrementQ, memdx.OpDecrement, memdx.OpDecrementQ,
		memdx.OpSubdocCounter:
		return []string{"Read", "Upsert"}
	case memdx.OpSet, memdx.OpSetQ, memdx.OpReplace, memdx.OpReplaceQ, memdx.OpAppend, memdx.OpAppendQ,
		memdx.OpPrepend, memdx.OpPrependQ, memdx.OpTouch,
		memdx.OpSubdocDictAdd, memdx.OpSubdocDictUpsert, memdx.OpSubdocDelete, memdx.OpSubdocReplace,
		memdx.OpSubdocArrayPushLast, memdx.OpSubdocArrayPushFirst, memdx.OpSubdocArrayInsert,
		memdx.OpSubdocArrayAddUnique, memdx.OpSubdocReplaceBodyWithXattr, memdx.OpSubdocMultiMutation:
		return []string{"Upsert"}
	case memdx.OpDelete, memdx.OpDeleteQ:
		return []string{"Delete"}
	}
	return []string{"Read"}
}

// knownPrivilege reports whether name is a privilege kv_engine knows
// (cb::rbac::to_privilege, rbac/privileges.cc).
func knownPrivilege(name string) bool {
	switch name {
	case "Read", "Insert", "Delete", "Upsert", "SimpleStats", "Stats", "NodeSupervisor", "Administrator",
		"Audit", "DcpConsumer", "DcpProducer", "DcpStream", "MetaWrite", "IdleConnection",
		"SystemXattrRead", "SystemXattrWrite", "BucketThrottleManagement", "Unthrottled", "Unmetered",
		"Impersonate", "Settings", "SystemSettings", "SystemCollectionLookup", "SystemCollectionMutation",
		"RangeScan":
		return true
	}
	return false
}

// impersonateFrameValid judges the Impersonate frame info's data as
// parseFrameExtras and Cookie::setEffectiveUser do.
func impersonateFrameValid(data []byte) (memdx.Status, string) {
	switch {
	case len(data) == 0:
		return memdx.StatusInvalidArgs, "Impersonated user must be set"
	case len(data) == 1 && data[0] == '^':
		return memdx.StatusInvalidArgs, "Username must be at least one character"
	}
	return memdx.StatusSuccess, ""
}
