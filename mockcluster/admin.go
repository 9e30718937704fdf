package mockcluster

import (
	"bytes"
	"errors"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/kvwire/kvwire/internal/kverr"
	"github.com/kvwire/kvwire/memdx"
)

// handle runs one request with wmu held.
func (cn *conn) handle(p *memdx.Packet) outcome {
	cn.euid, cn.euidExtra = nil, cn.euidExtra[:0]
	// Before authentication kv_engine runs the handshake commands only
	// and answers EACCESS, with no error context, to everything else,
	// NOOP, VERSION and QUIT included, before it looks at the opcode
	// (Cookie::validate, daemon/cookie.cc).
	if !cn.authed.Load() {
		switch p.OpCode {
		case memdx.OpHello, memdx.OpSASLListMechs, memdx.OpSASLAuth, memdx.OpSASLStep, memdx.OpGetErrorMap:
		default:
			cn.fail(p, memdx.StatusNoAccess, "")
			return outcome{}
		}
	}
	if !cn.validateConn(p) {
		return outcome{}
	}
	if _, ok := connRules[p.OpCode]; ok && !cn.impersonate(p) {
		return outcome{}
	}
	switch p.OpCode {
	case memdx.OpHello:
		cn.hello(p)
		return outcome{}
	case memdx.OpNoop:
		cn.ok(p)
		return outcome{}
	case memdx.OpVersion:
		cn.reply(p, memdx.StatusSuccess, 0, 0, nil, nil, []byte(cn.c.opts.Version))
		return outcome{}
	case memdx.OpGetErrorMap:
		cn.getErrorMap(p)
		return outcome{}
	case memdx.OpSASLListMechs:
		cn.reply(p, memdx.StatusSuccess, 0, 0, nil, nil, []byte(saslMechs))
		return outcome{}
	case memdx.OpSASLAuth, memdx.OpSASLStep:
		cn.sasl(p)
		return outcome{}
	case memdx.OpQuit:
		cn.ok(p)
		return outcome{close: true}
	case memdx.OpQuitQ:
		return outcome{close: true}
	}
	switch p.OpCode {
	case memdx.OpSelectBucket:
		cn.selectBucket(p)
		return outcome{}
	case memdx.OpListBuckets:
		cn.listBuckets(p)
		return outcome{}
	case memdx.OpGetClusterConfig:
		return cn.getClusterConfig(p)
	case memdx.OpStat:
		cn.stat(p)
		return outcome{}
	case memdx.OpVerbosity:
		// verbosity_executor sets the node's log level; it needs the
		// Administrator privilege (mcbp_privileges.cc), which of the
		// mock's users only one with every bucket (an administrator) has.
		if !cn.mayAdminister("Administrator") {
			cn.refusePrivilege(p, "Administrator")
			return outcome{}
		}
		cn.ok(p)
		return outcome{}
	}
	if cn.bucket.Load() == nil {
		switch {
		case !p.OpCode.Known():
			cn.fail(p, memdx.StatusUnknownCommand, "")
		case !cn.validateKey(p):
			// The packet validator runs before the no-bucket engine
			// could answer (Cookie::validate).
		case !cn.impersonate(p):
		case cn.euid != nil && keyRules[p.OpCode].docKey && cn.euidMissing(p.OpCode) != "":
			// Without a bucket the connection's user has every bucket
			// privilege (so that the engine answers NO_BUCKET), but
			// an impersonated user has none but those the request
			// grants it (Connection::setBucketIndex,
			// Cookie::checkPrivilege).
			cn.refusePrivilege(p, cn.euidMissing(p.OpCode))
		default:
			cn.failExec(p, memdx.StatusNoBucket, "No bucket selected")
		}
		return outcome{}
	}
	switch p.OpCode {
	case memdx.OpCollectionsGetManifest:
		cn.getManifest(p)
		return outcome{}
	case memdx.OpCollectionsGetID, memdx.OpCollectionsGetScopeID:
		cn.getCollectionID(p)
		return outcome{}
	}
	return cn.handleKV(p)
}

// supportedFeatures are the HELLO features a node grants.
var supportedFeatures = map[memdx.HelloFeature]bool{
	// TCPDELAY is not granted (kv_engine since 7.6: TCPDELAY_Unsupported).
	memdx.FeatureTCPNoDelay: true, memdx.FeatureMutationSeqno: true,
	memdx.FeatureXerror: true, memdx.FeatureSelectBucket: true, memdx.FeatureSnappy: true,
	memdx.FeatureJSON: true, memdx.FeatureDuplex: true, memdx.FeatureClustermapChangeNotification: true,
	memdx.FeatureUnorderedExecution: true, memdx.FeatureAltRequests: true,
	memdx.FeatureSyncReplication: true, memdx.FeatureCollections: true,
	memdx.FeatureSnappyEverywhere: true, memdx.FeaturePreserveTTL: true,
	memdx.FeatureGetClusterConfigWithKnownVersion: true, memdx.FeatureDedupeNotMyVbucketClustermap: true,
	memdx.FeatureClustermapChangeNotificationBrief: true,
	memdx.FeatureXattr: true, memdx.FeatureVAttr: true, memdx.FeatureSubdocCreateAsDeleted: true,
	memdx.FeatureSubdocDocumentMacroSupport: true, memdx.FeatureSubdocReplaceBodyWithXattr: true,
	memdx.FeatureSubdocAllowsAccessOnMultipleXattrKeys: true, memdx.FeatureSubdocReplicaRead: true,
	memdx.FeatureTracing: true,
	// Granted to every connection by kv_engine 7.6; the mock never
	// throttles, so it changes nothing.
	memdx.FeatureNonBlockingThrottlingMode: true,
}

// featureNeeds are kv_engine's HELLO dependencies (buildRequestVector in
// daemon/protocol/mcbp/hello_packet_executor.cc): a feature asked for
// without the one it needs fails the whole HELLO with EINVAL, the context
// naming both as kv_engine's format_as does.
var featureNeeds = map[memdx.HelloFeature]struct {
	needs      memdx.HelloFeature
	name, what string
}{
	memdx.FeatureClustermapChangeNotification:      {memdx.FeatureDuplex, "Clustermap change notification", "Duplex"},
	memdx.FeatureClustermapChangeNotificationBrief: {memdx.FeatureDuplex, "ClustermapChangeNotificationBrief", "Duplex"},
	memdx.FeatureVAttr:                             {memdx.FeatureXattr, "VAttr", "XATTR"},
	memdx.FeatureSubdocDocumentMacroSupport:        {memdx.FeatureXattr, "SubdocDocumentMacroSupport", "XATTR"},
}

// hello grants the supported subset of the requested features and echoes
// it in ascending order, as kv_engine does. A second HELLO replaces the
// first one's features; a refused one leaves them.
func (cn *conn) hello(p *memdx.Packet) {
	asked := make(map[memdx.HelloFeature]bool)
	for i := 0; i < len(p.Value); i += 2 {
		asked[memdx.HelloFeature(uint16(p.Value[i])<<8|uint16(p.Value[i+1]))] = true
	}
	order := make([]int, 0, len(asked))
	for f := range asked {
		order = append(order, int(f))
	}
	sort.Ints(order)
	req := make(map[memdx.HelloFeature]bool)
	for _, i := range order {
		f := memdx.HelloFeature(i)
		if !supportedFeatures[f] || cn.c.disabled[f] {
			continue
		}
		req[f] = true
		// kv_engine checks the dependencies in ascending feature order
		// and stops at the first one missing.
		if d, ok := featureNeeds[f]; ok && !asked[d.needs] {
			cn.fail(p, memdx.StatusInvalidArgs, d.name+" needs "+d.what)
			return
		}
	}
	// Asked for both kinds of notification, a client gets the brief one
	// only (kv_engine's buildRequestVector).
	if req[memdx.FeatureClustermapChangeNotificationBrief] {
		delete(req, memdx.FeatureClustermapChangeNotification)
	}
	granted := make([]int, 0, len(req))
	var bits uint64
	for f := range req {
		granted = append(granted, int(f))
		bits |= 1 << f
	}
	// SnappyEverywhere turns the Snappy datatype on by itself (kv_engine's
	// HELLO calls enableDatatype(SNAPPY) for it) without listing Snappy in
	// the answer; where the server has Snappy off it grants neither.
	if req[memdx.FeatureSnappyEverywhere] {
		if cn.c.disabled[memdx.FeatureSnappy] {
			bits &^= 1 << memdx.FeatureSnappyEverywhere
			granted = slices.DeleteFunc(granted, func(f int) bool { return f == int(memdx.FeatureSnappyEverywhere) })
		} else {
			bits |= 1 << memdx.FeatureSnappy
		}
	}
	sort.Ints(granted)
	out := make([]byte, 0, 2*len(granted))
	for _, f := range granted {
		out = append(out, byte(f>>8), byte(f))
	}
	cn.features.Store(bits)
	cn.reply(p, memdx.StatusSuccess, 0, 0, nil, nil, out)
}

func (cn *conn) getErrorMap(p *memdx.Packet) {
	v := uint16(p.Value[0])<<8 | uint16(p.Value[1])
	if v == 0 {
		// kv_engine has no map for version 0 (an empty slot in
		// ErrorMapManager), which get_errmap_executor answers with
		// KEY_ENOENT and no context.
		cn.fail(p, memdx.StatusKeyNotFound, "")
		return
	}
	cn.reply(p, memdx.StatusSuccess, 0, cn.outDatatype(memdx.DatatypeJSON), nil, nil, errorMapFor(v))
}

var errorMapV1, errorMapV2 = ErrorMapJSON(1), ErrorMapJSON(2)

func errorMapFor(v uint16) []byte {
	if v == 1 {
		return errorMapV1
	}
	return errorMapV2
}

// saslMechs is what SASL_LIST_MECHS answers.
const saslMechs = "SCRAM-SHA512 SCRAM-SHA256 SCRAM-SHA1 PLAIN"

func (cn *conn) sasl(p *memdx.Packet) {
	// kv_engine upper-cases the mechanism name (SaslAuthCommandContext).
	mech := strings.ToUpper(string(p.Key))
	if p.OpCode == memdx.OpSASLStep {
		// The step continues the connection's exchange whatever
		// mechanism it names (SaslStepCommandContext), which ends with
		// it: a SCRAM exchange never continues past its second step.
		if cn.scram == nil {
			cn.fail(p, memdx.StatusInvalidArgs,
				"Logic error: The server expects the client to start with SASL START before sending SASL STEP")
			return
		}
		s := cn.scram
		cn.scram = nil
		final, err := s.ServerFinal(p.Value)
		if err != nil {
			cn.authFailed(p, err)
			return
		}
		u := cn.c.lookupUser(s.User())
		if u == nil {
			cn.authFailed(p, kverr.ErrAuthenticationFailure)
			return
		}
		cn.authenticated(u)
		cn.reply(p, memdx.StatusSuccess, 0, 0, nil, nil, final)
		return
	}
	if cn.scram != nil {
		// SaslStartCommandContext refuses a new start while an exchange
		// waits for its step, and keeps that exchange.
		cn.fail(p, memdx.StatusInvalidArgs,
			"Logic error: The server expects SASL STEP after returning CONTINUE from SASL START")
		return
	}
	// A start logs the connection out first
	// (Connection::restartAuthentication): until an exchange succeeds it
	// may run the handshake commands only, and a failed one leaves it so.
	cn.authed.Store(false)
	switch mech {
	case memdx.MechPlain:
		parts := bytes.Split(p.Value, []byte{0})
		if len(parts) != 3 {
			cn.fail(p, memdx.StatusInvalidArgs, "PLAIN payload must be authzid NUL user NUL password")
			return
		}
		u := cn.c.lookupUser(string(parts[1]))
		if u == nil || u.password != string(parts[2]) {
			cn.authFailed(p, kverr.ErrAuthenticationFailure)
			return
		}
		cn.authenticated(u)
		cn.ok(p)
	case memdx.MechScramSHA1, memdx.MechScramSHA256, memdx.MechScramSHA512:
		s, err := memdx.NewScramServer(mech, func(name string) (memdx.ScramKeys, bool) {
			u := cn.c.lookupUser(name)
			if u == nil {
				return memdx.ScramKeys{}, false
			}
			return u.scramKeys(mech)
		}, nil)
		if err != nil {
			cn.authFailed(p, err)
			return
		}
		first, err := s.ServerFirst(p.Value)
		if err != nil {
			cn.authFailed(p, err)
			return
		}
		cn.scram = s
		cn.reply(p, memdx.StatusAuthContinue, 0, 0, nil, nil, first)
	default:
		cn.fail(p, memdx.StatusAuthError, `Requested mechanism "`+mech+`" is not supported`)
	}
}

func (cn *conn) authFailed(p *memdx.Packet, err error) {
	if errors.Is(err, memdx.ErrMalformed) {
		cn.fail(p, memdx.StatusInvalidArgs, "Malformed SASL message: "+err.Error())
		return
	}
	// kv_engine's authFailure sends no context (one only when an
	// external authentication service is configured).
	cn.fail(p, memdx.StatusAuthError, "")
}

// authenticated switches the connection to user u. As kv_engine's
// SaslAuthCommandContext::tryHandleSaslOk, the selected bucket stays when u
// may use it and is left otherwise.
func (cn *conn) authenticated(u *user) {
	cn.user.Store(u)
	cn.authed.Store(true)
	if b := cn.bucket.Load(); b != nil && !u.mayUse(b.name) {
		cn.bucket.Store(nil)
		cn.hasKnow = false
	}
}

func (cn *conn) selectBucket(p *memdx.Packet) {
	name := string(p.Key)
	if name == "" {
		cn.fail(p, memdx.StatusInvalidArgs, "SELECT_BUCKET takes the bucket name as key")
		return
	}
	if name == "@no bucket@" {
		cn.bucket.Store(nil)
		cn.hasKnow = false
		cn.ok(p)
		return
	}
	// As kv_engine's select_bucket (daemon/protocol/mcbp/
	// select_bucket_executor.cc): the user's access to the name is checked
	// first (EACCESS), then that the bucket exists (KEY_ENOENT), so a user
	// who may use any bucket learns that a name does not exist and one who
	// may not learns nothing.
	u := cn.user.Load()
	if !u.mayUse(name) {
		cn.failExec(p, memdx.StatusNoAccess, "No access to bucket "+strconv.Quote(name))
		return
	}
	b := cn.c.Bucket(name)
	if b == nil {
		cn.fail(p, memdx.StatusKeyNotFound, "No bucket "+strconv.Quote(name))
		return
	}
	cn.bucket.Store(b)
	cn.hasKnow = false
	cn.ok(p)
}

func (cn *conn) listBuckets(p *memdx.Packet) {
	u := cn.user.Load()
	var names []string
	for _, b := range cn.c.Buckets() {
		if u.mayUse(b.name) {
			names = append(names, b.name)
		}
	}
	cn.reply(p, memdx.StatusSuccess, 0, 0, nil, nil, []byte(strings.Join(names, " ")))
}

// getClusterConfig answers the selected bucket's config (the cluster config
// without a bucket). With the 16-byte known-version extras it answers an
// empty body unless its config is newer.
func (cn *conn) getClusterConfig(p *memdx.Packet) outcome {
	known, hasKnown, err := memdx.DecodeClusterConfigKnown(p.Extras)
	if err != nil {
		cn.fail(p, memdx.StatusInvalidArgs, err.Error())
		return outcome{}
	}
	// kv_engine's validator (mcbp_validators.cc,
	// GetClusterConfigPayload::validate) refuses a known version whose
	// revision is below 1, then one whose epoch is neither -1 nor at
	// least 1, each saying so.
	if hasKnown && known.Revision < 1 {
		cn.fail(p, memdx.StatusInvalidArgs, "Revision number must not be less than 1")
		return outcome{}
	}
	if hasKnown && known.Epoch < 1 && known.Epoch != -1 {
		cn.fail(p, memdx.StatusInvalidArgs, "Epoch must not be less than 1 (or -1)")
		return outcome{}
	}
	b := cn.bucket.Load()
	// The global config is for users with the SystemSettings privilege
	// (check_access_to_global_config in kv_engine's
	// daemon/protocol/mcbp/cluster_config_executor.cc), of the mock's users
	// those that may use every bucket: another gets EACCESS, and a client
	// without XERROR, which cannot be told, loses its connection.
	if b == nil && !cn.mayAdminister("SystemSettings") {
		if !cn.has(memdx.FeatureXerror) {
			cn.c.logf("mockcluster: node %d: closing connection: no access to the global cluster config, XERROR not enabled", cn.n.id)
			return outcome{close: true}
		}
		cn.failPrivilege(p, "SystemSettings")
		return outcome{}
	}
	var ver memdx.ClusterConfigVersion
	var body, snappyBody []byte
	if b != nil && b.memcached() {
		// kv_engine answers KEY_ENOENT when it holds no config for the
		// bucket (daemon/protocol/mcbp/cluster_config_executor.cc), and
		// ns_server gives it none for a memcached bucket (its
		// terse_bucket_info_uploader.erl starts only for couchbase
		// buckets): clients bootstrap a memcached bucket over HTTP.
		cn.fail(p, memdx.StatusKeyNotFound, "")
		return outcome{}
	} else if b != nil {
		s := b.snap.Load()
		ver, body, snappyBody = s.version(), s.json[cn.n.id], s.snappy[cn.n.id]
	} else {
		g := cn.c.global.Load()
		ver = memdx.ClusterConfigVersion{Epoch: cn.c.epoch, Revision: g.rev}
		body, snappyBody = g.json[cn.n.id], g.snappy[cn.n.id]
	}
	if hasKnown {
		cn.learn(known)
		if !newer(ver, known) {
			cn.ok(p)
			return outcome{}
		}
	}
	cn.learn(ver)
	value, dt := cn.configBody(body, snappyBody)
	cn.reply(p, memdx.StatusSuccess, 0, dt, nil, nil, value)
	return outcome{}
}

// lookupName is kv_engine's Manifest::validName, which a scope or
// collection name in a lookup path must pass: 1 to 251 bytes of A-Z a-z 0-9
// _ - % $, not starting with '$'. (Creating one is stricter: validName.)
func lookupName(n string) bool {
	if n == "" || len(n) > 251 || n[0] == '$' {
		return false
	}
	for i := 0; i < len(n); i++ {
		c := n[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '%' || c == '$') {
			return false
		}
	}
	return true
}

var processStart = time.Now()

// stat answers the default STAT group with a few keys, one response each,
// and the terminating response with no key and no value; the key groups a
// document's metadata (statKey); another group KEY_ENOENT (the bucket's
// engine does not know it); without a bucket, NO_BUCKET whatever the
// group.
func (cn *conn) stat(p *memdx.Packet) {
	b := cn.bucket.Load()
	if b == nil {
		// The default group asks the bucket's engine first
		// (stat_all_stats), and so does a group the daemon does not
		// serve itself (stat_bucket_stats): the no-bucket engine
		// answers NO_BUCKET.
		cn.failExec(p, memdx.StatusNoBucket, "No bucket selected")
		return
	}
	if cn.euid != nil && !cn.euid.mayUse(b.name) && !slices.Contains(cn.euidExtra, "SimpleStats") {
		cn.refusePrivilege(p, "SimpleStats")
		return
	}
	if g := string(p.Key); !b.memcached() && (strings.HasPrefix(g, "key ") || strings.HasPrefix(g, "key-byid ") ||
		strings.HasPrefix(g, "vkey ") || strings.HasPrefix(g, "vkey-byid ")) {
		cn.statKey(p, b, g)
		return
	}
	if len(p.Key) != 0 {
		cn.fail(p, memdx.StatusKeyNotFound, "Unknown stat group "+strconv.Quote(string(p.Key)))
		return
	}
	now := cn.c.clock.Now()
	stats := [][2]string{
		{"pid", strconv.Itoa(os.Getpid())},
		{"uptime", strconv.FormatInt(int64(time.Since(processStart)/time.Second), 10)},
		{"time", strconv.FormatInt(now.Unix(), 10)},
		{"version", cn.c.opts.Version},
		{"curr_connections", strconv.Itoa(cn.n.NumConnections())},
		{"cmd_get", strconv.FormatUint(cn.n.RequestCount(memdx.OpGet), 10)},
		{"cmd_set", strconv.FormatUint(cn.n.RequestCount(memdx.OpSet), 10)},
	}
	stats = append(stats, [2]string{"curr_items", strconv.Itoa(b.itemCount(cn.n.id, now))})
	for _, s := range stats {
		cn.reply(p, memdx.StatusSuccess, 0, 0, nil, []byte(s[0]), []byte(s[1]))
	}
	cn.ok(p)
}

// itemCount counts the live documents in the vbuckets node owns (in its
// store, for a memcached bucket).
func (b *Bucket) itemCount(node int, now time.Time) int {
	if b.memcached() {
		if v, ok := b.stores.Load(node); ok {
			return v.(*vbucket).liveCount(now)
		}
		return 0
	}
	s := b.snap.Load()
	n := 0
	for i, vb := range b.vbs {
		if s.chains[i][0] == node {
			n += vb.liveCount(now)
		}
	}
	return n
}

// liveCount counts the vbucket's documents that have not expired.
func (vb *vbucket) liveCount(now time.Time) int {
	vb.mu.Lock()
	defer vb.mu.Unlock()
	n := 0
	for _, d := range vb.docs {
		if !d.expired(now) {
			n++
		}
	}
	return n
}

func (cn *conn) getManifest(p *memdx.Packet) {
	m := cn.bucket.Load().snap.Load().manifest
	cn.reply(p, memdx.StatusSuccess, 0, cn.outDatatype(memdx.DatatypeJSON), nil, nil, m.json())
}

// getCollectionID answers COLLECTIONS_GET_ID ("scope.collection") and
// COLLECTIONS_GET_SCOPE_ID ("scope"), the path in the key or the value
// (the validator refused both): extras are the manifest uid (8 bytes) and
// the id (4 bytes). As kv_engine's Collections::Manager and Manifest
// decide: the number of dots first, then the scope's name and existence,
// then the collection's; an empty part is the default; a name
// Manifest::validName refuses is EINVAL (no manifest uid). A client that
// did not negotiate Collections gets EINVAL for an unknown scope or
// collection (remapErrorCode).
func (cn *conn) getCollectionID(p *memdx.Packet) {
	m := cn.bucket.Load().snap.Load().manifest
	path := string(p.Value)
	if len(p.Key) != 0 {
		path = string(p.Key)
	}
	scope, coll, dotted := strings.Cut(path, ".")
	if p.OpCode == memdx.OpCollectionsGetID && (!dotted || strings.Contains(coll, ".")) {
		cn.fail(p, memdx.StatusInvalidArgs, "The path must be scope.collection")
		return
	}
	if p.OpCode == memdx.OpCollectionsGetScopeID && strings.Contains(coll, ".") {
		cn.fail(p, memdx.StatusInvalidArgs, "The path must be a scope (optionally .collection)")
		return
	}
	if scope != "" && !lookupName(scope) {
		cn.fail(p, memdx.StatusInvalidArgs, "Invalid scope name "+strconv.Quote(scope))
		return
	}
	s, ok := m.scope(scope)
	if !ok {
		cn.failManifestExec(p, memdx.StatusUnknownScope, m.uid, "Unknown scope "+strconv.Quote(scope))
		return
	}
	id := s.uid
	if p.OpCode == memdx.OpCollectionsGetID {
		if coll != "" && !lookupName(coll) {
			cn.fail(p, memdx.StatusInvalidArgs, "Invalid collection name "+strconv.Quote(coll))
			return
		}
		cid, ok := m.lookup(scope, coll)
		if !ok {
			cn.failManifestExec(p, memdx.StatusUnknownCollection, m.uid, "Unknown collection "+strconv.Quote(path))
			return
		}
		id = cid
	}
	var ext [12]byte
	putUint64(ext[0:8], m.uid)
	putUint32(ext[8:12], id)
	cn.reply(p, memdx.StatusSuccess, 0, 0, ext[:], nil, nil)
}
