package mockcluster

import (
	"math/bits"
	"slices"
	"strconv"
	"strings"

	"github.com/kvwire/kvwire/memdx"
)

// statKey answers STAT "key <key> <vbucket> [<scope.collection>]",
// "key-byid <key> <vbucket> [<collection id>]" and their "vkey" forms as
// kv_engine's ep engine does (EventuallyPersistentEngine::doKeyStats,
// doVKeyStats and parseStatKeyArg in engines/ep/src/ep_engine.cc;
// VBucket::getKeyStats for the values): one stat per field, then the
// terminating response. The statuses are the engine's, through
// handle_executor_status: EINVAL for arguments it cannot parse,
// UNKNOWN_SCOPE or UNKNOWN_COLLECTION for the collection named,
// NOT_MY_VBUCKET for a vbucket the node holds in no state, KEY_ENOENT for a
// missing, deleted or expired document. wmu must be held.
func (cn *conn) statKey(p *memdx.Packet, b *Bucket, group string) {
	validate := strings.HasPrefix(group, "v")
	base := "key"
	if validate {
		base = "vkey"
	}
	// boost::split on single spaces of the trimmed group: 3 or 4 words.
	args := strings.Split(strings.TrimSpace(group), " ")
	if len(args) != 3 && len(args) != 4 {
		cn.failExec(p, memdx.StatusInvalidArgs, "")
		return
	}
	vbid, ok := stoiUint16(args[2])
	if !ok {
		cn.failExec(p, memdx.StatusInvalidArgs, "")
		return
	}
	s := b.snap.Load()
	m := s.manifest
	cid := uint32(0)
	if len(args) == 4 {
		var st memdx.Status
		if cid, st = statKeyCollection(m, base, args[0], args[3]); st != memdx.StatusSuccess {
			switch {
			case st == memdx.StatusUnknownCollection:
				cn.failManifestExec(p, st, m.uid, "")
			case st == memdx.StatusUnknownScope && !cn.has(memdx.FeatureCollections):
				// remapErrorCode: a client without collections gets EINVAL.
				cn.failExec(p, memdx.StatusInvalidArgs, "")
			default:
				cn.failExec(p, st, "")
			}
			return
		}
	}
	if !cn.holdsVbucket(s, vbid) {
		cn.nmv(p, s)
		return
	}
	// checkCollectionAccess: Read in the document's collection, which an
	// impersonated user without the bucket has only when granted.
	if cn.euid != nil && !cn.euid.mayUse(b.name) && !slices.Contains(cn.euidExtra, "Read") {
		cn.refusePrivilege(p, "Read")
		return
	}
	active := s.chains[vbid][0] == cn.n.id
	vb := b.vbs[vbid]
	now := cn.c.clock.Now()
	mk := []byte(mapKey(cid, args[1]))
	vb.mu.Lock()
	var d *document
	if active {
		d = vb.live(mk, now)
	} else {
		d = vb.replicaLive(mk, now)
	}
	var stats [][2]string
	if d != nil {
		dt := d.datatype
		if len(d.xattrs) > 0 {
			dt |= memdx.DatatypeXattr
		}
		if d.snappy != nil {
			dt |= memdx.DatatypeSnappy
		}
		casv, state := d.cas, "active"
		if !active {
			casv, state = d.replicatedCas(), "replica"
		}
		stats = [][2]string{
			{"key_is_dirty", "false"}, // every mock write is persisted when applied
			{"key_exptime", strconv.FormatUint(uint64(d.expiry), 10)},
			{"key_datatype", datatypeString(dt)},
			// kv_engine keeps the flags in network byte order and prints
			// them as a number on a little-endian host.
			{"key_flags", strconv.FormatUint(uint64(bits.ReverseBytes32(d.flags)), 10)},
			{"key_cas", strconv.FormatUint(casv, 10)},
			{"key_vb_state", state},
			{"key_is_resident", "true"},
		}
		if validate {
			stats = append(stats, [2]string{"key_valid", "valid"})
		}
	}
	vb.mu.Unlock()
	if d == nil {
		cn.failExec(p, memdx.StatusKeyNotFound, "")
		return
	}
	for _, st := range stats {
		cn.reply(p, memdx.StatusSuccess, 0, 0, nil, []byte(st[0]), []byte(st[1]))
	}
	cn.ok(p)
}

// statKeyCollection resolves the collection argument of a key stat group
// (parseKeyStatCollection): a "scope.collection" path after "key", a hex
// id (N, 0xN or 0XN, more than 2 characters) after "key-byid".
func statKeyCollection(m *manifest, base, word, arg string) (uint32, memdx.Status) {
	switch word {
	case base:
		scope, coll, dotted := strings.Cut(arg, ".")
		if !dotted || strings.Contains(coll, ".") ||
			(scope != "" && !lookupName(scope)) || (coll != "" && !lookupName(coll)) {
			return 0, memdx.StatusInvalidArgs
		}
		if _, ok := m.scope(scope); !ok {
			return 0, memdx.StatusUnknownScope
		}
		cid, ok := m.lookup(scope, coll)
		if !ok {
			return 0, memdx.StatusUnknownCollection
		}
		return cid, memdx.StatusSuccess
	case base + "-byid":
		if len(arg) <= 2 {
			return 0, memdx.StatusInvalidArgs
		}
		h := strings.TrimPrefix(strings.TrimPrefix(arg, "0x"), "0X")
		id, err := strconv.ParseUint(h, 16, 32)
		if err != nil {
			return 0, memdx.StatusInvalidArgs
		}
		if !m.has(uint32(id)) {
			return 0, memdx.StatusUnknownCollection
		}
		return uint32(id), memdx.StatusSuccess
	}
	return 0, memdx.StatusInvalidArgs
}

// stoiUint16 reads s as std::stoi does (leading blanks, a sign, the digits
// up to the first other character) narrowed to a vbucket id.
func stoiUint16(s string) (uint16, bool) {
	s = strings.TrimLeft(s, " \t\n\v\f\r")
	neg := false
	if s != "" && (s[0] == '+' || s[0] == '-') {
		neg = s[0] == '-'
		s = s[1:]
	}
	n := 0
	for n < len(s) && s[n] >= '0' && s[n] <= '9' {
		n++
	}
	if n == 0 {
		return 0, false
	}
	v, err := strconv.ParseUint(s[:n], 10, 64)
	if err != nil || v > 0xffff || (neg && v != 0) {
		return 0, false
	}
	return uint16(v), true
}

// datatypeString is cb::mcbp::datatype::to_string: "raw" without a bit,
// else the bits' names, comma-separated.
func datatypeString(dt memdx.Datatype) string {
	var names []string
	if dt.Has(memdx.DatatypeSnappy) {
		names = append(names, "snappy")
	}
	if dt.Has(memdx.DatatypeJSON) {
		names = append(names, "json")
	}
	if dt.Has(memdx.DatatypeXattr) {
		names = append(names, "xattr")
	}
	if len(names) == 0 {
		return "raw"
	}
	return strings.Join(names, ",")
}
