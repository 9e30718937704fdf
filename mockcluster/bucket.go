package mockcluster

import (
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kvwire/kvwire/internal/kverr"
	"github.com/kvwire/kvwire/memdx"
	"github.com/kvwire/kvwire/vbmap"
)

// Errors returned by the management API.
var (
	// ErrClosed: the cluster was closed.
	ErrClosed = errors.New("mockcluster: cluster closed")
	// ErrNotFound: no bucket, scope, collection, user or node by that name.
	ErrNotFound = errors.New("mockcluster: not found")
	// ErrExists: a bucket, scope, collection, user or node by that name
	// already exists.
	ErrExists = errors.New("mockcluster: already exists")
	// ErrRebalancing: the operation is not possible while a rebalance runs.
	ErrRebalancing = errors.New("mockcluster: a rebalance is in progress")
	// ErrInvalid: the arguments are not valid (the message says why). It
	// is the module's ErrInvalidArgument (client.ErrInvalidArgument).
	ErrInvalid = kverr.ErrInvalidArgument
)

func invalidf(format string, args ...any) error {
	return fmt.Errorf("mockcluster: %w: %s", ErrInvalid, fmt.Sprintf(format, args...))
}

// Bucket is a bucket of the cluster: a couchbase bucket or a memcached
// bucket (Type). Its methods are safe for concurrent use.
type Bucket struct {
	c           *Cluster
	name        string
	uuid        string
	typ         BucketType
	numVbs      int
	numReplicas int
	vbs         []*vbucket
	// stores are a memcached bucket's documents, one store per node (node
	// id -> *vbucket): each node keeps what clients sent it.
	stores  sync.Map
	snap    atomic.Pointer[bucketSnap]
	removed atomic.Bool

	// guarded by c.mu
	nextScopeID      uint32
	nextCollectionID uint32
}

// bucketSnap is one published state of a bucket: ownership, collections
// manifest and the config JSON that describes them. It is immutable; the
// request path loads it without locks.
type bucketSnap struct {
	rev   int64
	epoch int64
	// servers are the node ids of serverList, in order.
	servers []int
	// chains are the node ids holding each vbucket: active first, then
	// replicas; -1 where there is none.
	chains [][]int
	// fwd is the target of a rebalance in progress (vBucketMapForward), nil
	// otherwise.
	fwd      [][]int
	manifest *manifest
	// ring places a memcached bucket's keys on servers (nil for a
	// couchbase bucket, or when the bucket has no server): its server
	// index is an index into servers.
	ring *vbmap.Ketama
	// json is the config as each node serves it (thisNode differs); snappy
	// is the same config snappy-compressed, for SnappyEverywhere clients.
	json, snappy map[int][]byte
}

func (s *bucketSnap) version() memdx.ClusterConfigVersion {
	return memdx.ClusterConfigVersion{Epoch: s.epoch, Revision: s.rev}
}

// vbucket holds the documents of one vbucket: they move with it when a
// rebalance or failover changes its owner.
type vbucket struct {
	mu   sync.Mutex
	id   uint16
	uuid uint64
	// history is the failover log before uuid: the earlier vbucket UUIDs,
	// newest first, each with the seqno at which its successor began.
	history []failoverEntry
	seqno   uint64
	lastCas uint64
	docs    map[string]*document
	// tombs are the deleted documents (tombstones); tombQ lists them in
	// the order they were stored, for purging (an entry whose tombstone
	// has since changed or gone is stale and skipped).
	tombs     map[string]*document
	tombQ     []tombRef
	mutations map[string]uint64
	pending   map[string]*syncWrite
	// memcached marks a memcached bucket's store: default_engine keeps no
	// seqnos and no tombstones.
	memcached bool
	// numVbs is the bucket's vbucket count (bounds the tombstones kept).
	numVbs int
}

// tombRef names a tombstone in vbucket.tombQ: its key and the seqno it
// was stored with.
type tombRef struct {
	mk    string
	seqno uint64
}

// tombstonePurgeAge is how long a tombstone is kept: kv_engine's default
// metadata purge interval (ep-engine's persistent_metadata_purge_age,
// 3 days), after which compaction drops tombstones.
const tombstonePurgeAge = 3 * 24 * time.Hour

// maxBucketTombstones bounds the tombstones a bucket keeps, spread over
// its vbuckets (see vbucket.maxTombstones): kv_engine keeps them on disk
// until the purge interval, the mock in memory, so a test deleting many
// keys would otherwise grow it without bound. Past the bound the oldest
// go first, as if purged.
const maxBucketTombstones = 1 << 18

// failoverEntry is an earlier branch of a vbucket's history: its UUID and
// the last seqno it saw (where the next UUID began).
type failoverEntry struct {
	uuid, lastSeqno uint64
}

// document is a stored item. Its value slice is never modified in place:
// a mutation stores a new slice, so a reader may use a value after
// releasing the vbucket lock.
type document struct {
	value    []byte
	flags    uint32
	datatype memdx.Datatype // JSON bit only; the value is kept inflated
	cas      uint64
	expiry   uint32 // absolute Unix seconds; 0 never
	seqno    uint64
	// lockedUntil is when a GET_LOCKED lock ends; zero when unlocked.
	lockedUntil time.Time
	// replicaCas is the CAS the replicas hold when a lock gave the active
	// a CAS of its own (a lock is not replicated); zero when they hold cas.
	replicaCas uint64
	// snappy is set when the value arrived compressed: snappy clients get
	// it back compressed (the server's "passive" compression mode).
	snappy []byte
	// xattrs are the extended attributes, kept apart from the value.
	xattrs []xattr
	// deleted marks a tombstone (held in vbucket.tombs): the flags and
	// system xattrs a delete kept, or any xattrs of a document created as
	// deleted. Its expiry is the second it was deleted, as kv_engine
	// persists a deletion (VBucket::queueDirty timestamps it for the
	// tombstone purger) and GET_META then shows it.
	deleted bool
	// memcached marks a document of a memcached bucket, whose engine
	// (default_engine) ends expiry and locks a second earlier than
	// ep-engine (see expired and locked).
	memcached bool
}

// expired says whether the document's expiry has passed. kv_engine counts
// time in whole seconds; ep-engine expires a document when its expiry is
// before the current second (StoredValue::isExpired: exptime <
// ep_real_time()), so a TTL of n seconds keeps it through the nth second.
// A memcached bucket's default_engine expires it at that second
// (do_item_get in engines/default_engine/items.cc: exptime <=
// current_time).
func (d *document) expired(now time.Time) bool {
	if d.expiry == 0 {
		return false
	}
	if d.memcached {
		return now.Unix() >= int64(d.expiry)
	}
	return now.Unix() > int64(d.expiry)
}

// locked says whether a GET_LOCKED lock holds. ep-engine keeps a lock
// through the second it ends in (StoredValue::isLocked: locked unless
// ep_current_time() > lock expiry), so a lock of n seconds holds through
// the nth second; default_engine releases it at that second (locked while
// locktime > current_time, items.cc).
func (d *document) locked(now time.Time) bool {
	if d.lockedUntil.IsZero() {
		return false
	}
	if d.memcached {
		return now.Unix() < d.lockedUntil.Unix()
	}
	return now.Unix() <= d.lockedUntil.Unix()
}

// replicatedCas is the document's CAS on its replicas.
func (d *document) replicatedCas() uint64 {
	if d.replicaCas != 0 {
		return d.replicaCas
	}
	return d.cas
}

func newBucket(c *Cluster, o BucketOptions) *Bucket {
	var u [16]byte
	_, _ = rand.Read(u[:])
	b := &Bucket{c: c, name: o.Name, uuid: hex.EncodeToString(u[:]), typ: o.Type, numVbs: o.NumVbuckets,
		numReplicas: o.NumReplicas, nextScopeID: 8, nextCollectionID: 8}
	if c.systemScope && o.Type != MemcachedBucket {
		// After the _system scope and its collections (defaultManifest).
		b.nextScopeID, b.nextCollectionID = 9, 10
	}
	b.vbs = make([]*vbucket, o.NumVbuckets)
	for i := range b.vbs {
		b.vbs[i] = &vbucket{id: uint16(i), uuid: randUint64(), numVbs: o.NumVbuckets, docs: make(map[string]*document),
			mutations: make(map[string]uint64), pending: make(map[string]*syncWrite)}
	}
	return b
}

func randUint64() uint64 {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return binary.BigEndian.Uint64(b[:]) | 1
}

// Name returns the bucket's name.
func (b *Bucket) Name() string { return b.name }

// UUID returns the bucket's uuid as it appears in its config.
func (b *Bucket) UUID() string { return b.uuid }

// Type returns the bucket's type.
func (b *Bucket) Type() BucketType { return b.typ }

// memcached reports whether b is a memcached bucket.
func (b *Bucket) memcached() bool { return b.typ == MemcachedBucket }

// NumVbuckets returns the number of vbuckets (0 for a memcached bucket).
func (b *Bucket) NumVbuckets() int { return b.numVbs }

// NumReplicas returns the number of replicas.
func (b *Bucket) NumReplicas() int { return b.numReplicas }

// Rev returns the revision of the bucket's current config.
func (b *Bucket) Rev() int64 { return b.snap.Load().rev }

// ConfigJSON returns the bucket's current config as node nodeID serves it
// (thisNode set on that node), with "$HOST" placeholders unless
// Options.ConfigHost was set. The caller owns the returned slice.
func (b *Bucket) ConfigJSON(nodeID int) []byte {
	s := b.snap.Load()
	if j, ok := s.json[nodeID]; ok {
		return append([]byte(nil), j...)
	}
	b.c.mu.Lock()
	defer b.c.mu.Unlock()
	return b.c.renderBucketConfig(b, s, -1)
}

// VbucketMap returns the current owners of every vbucket as node ids: active
// first, then replicas, -1 where there is none. The caller owns the result.
func (b *Bucket) VbucketMap() [][]int { return copyChains(b.snap.Load().chains) }

// ForwardMap returns the target map of a rebalance in progress (node ids), or
// nil.
func (b *Bucket) ForwardMap() [][]int { return copyChains(b.snap.Load().fwd) }

// Servers returns the node ids of the bucket's serverList, in order.
func (b *Bucket) Servers() []int { return append([]int(nil), b.snap.Load().servers...) }

func copyChains(in [][]int) [][]int {
	if in == nil {
		return nil
	}
	out := make([][]int, len(in))
	for i, ch := range in {
		out[i] = append([]int(nil), ch...)
	}
	return out
}

// VbucketForKey returns the vbucket a key maps to (CRC32 as Couchbase
// defines it); 0 in a memcached bucket, which has no vbuckets (clients
// send 0).
func (b *Bucket) VbucketForKey(key []byte) uint16 {
	if b.memcached() {
		return 0
	}
	return vbucketForKey(key, b.numVbs)
}

// storeFor returns the store of key: its vbucket in a couchbase bucket,
// the store of the node the ketama ring gives it in a memcached bucket
// (nil when the bucket has no server).
func (b *Bucket) storeFor(key string) *vbucket {
	if !b.memcached() {
		return b.vbs[vbucketForKey([]byte(key), b.numVbs)]
	}
	id := b.NodeForKey([]byte(key))
	if id < 0 {
		return nil
	}
	return b.nodeStore(id)
}

// vbucketForKey hashes a key the way Couchbase clients do: CRC32 (IEEE),
// bits 16..30, modulo the vbucket count.
func vbucketForKey(key []byte, numVbs int) uint16 {
	crc := crc32.ChecksumIEEE(key)
	return uint16(((crc >> 16) & 0x7fff) % uint32(numVbs))
}

// Document is a stored document, as Bucket.Get reports it.
type Document struct {
	// Value is a copy of the value, never compressed.
	Value    []byte
	Flags    uint32
	Datatype memdx.Datatype
	Cas      uint64
	// Expiry is when the document expires; zero for never.
	Expiry time.Time
	// Locked is true while a GET_LOCKED lock holds.
	Locked bool
	// Seqno is the sequence number of the last mutation.
	Seqno   uint64
	Vbucket uint16
}

// Get returns the committed document at scope.collection/key. It reports
// false when there is none (or it expired, or the collection is unknown).
// In a memcached bucket it looks on the node NodeForKey names, where a
// client that routes by the config's ketama ring stores the key.
func (b *Bucket) Get(scope, collection, key string) (Document, bool) {
	cid, ok := b.snap.Load().manifest.lookup(scope, collection)
	if !ok {
		return Document{}, false
	}
	vbid := b.VbucketForKey([]byte(key))
	vb := b.storeFor(key)
	if vb == nil {
		return Document{}, false
	}
	mk := mapKey(cid, key)
	now := b.c.clock.Now()
	vb.mu.Lock()
	defer vb.mu.Unlock()
	d := vb.docs[mk]
	if d == nil || d.expired(now) {
		return Document{}, false
	}
	out := Document{Value: append([]byte{}, d.value...), Flags: d.flags, Datatype: d.datatype,
		Cas: d.cas, Locked: d.locked(now), Seqno: d.seqno, Vbucket: vbid}
	if d.expiry != 0 {
		out.Expiry = time.Unix(int64(d.expiry), 0)
	}
	return out, true
}

// Set stores a document directly (as an unconditional SET would, keeping
// its xattrs), for seeding test data. It returns the new CAS. It is counted
// in MutationCount. In a memcached bucket it stores on the node
// NodeForKey names.
func (b *Bucket) Set(scope, collection, key string, value []byte, flags uint32, expiry time.Duration) (uint64, error) {
	cid, ok := b.snap.Load().manifest.lookup(scope, collection)
	if !ok {
		return 0, fmt.Errorf("%w: collection %s.%s in bucket %q", ErrNotFound, scope, collection, b.name)
	}
	if max := maxLogicalKeyLen(cid); key == "" || len(key) > max {
		return 0, invalidf("key length %d is not in 1..%d", len(key), max)
	}
	vb := b.storeFor(key)
	if vb == nil {
		return 0, fmt.Errorf("%w: memcached bucket %q has no server", ErrNotFound, b.name)
	}
	now := b.c.clock.Now()
	var exp uint32
	if expiry > 0 {
		exp = uint32(now.Add(expiry).Unix())
	}
	d := &document{value: append([]byte{}, value...), flags: flags, expiry: exp}
	if json.Valid(value) {
		d.datatype = memdx.DatatypeJSON
	}
	mk := mapKey(cid, key)
	vb.mu.Lock()
	defer vb.mu.Unlock()
	if old := vb.live([]byte(mk), now); old != nil {
		d.xattrs = old.xattrs // as SET keeps them
	}
	vb.store(mk, d, now)
	return d.cas, nil
}

// MutationCount returns how many mutations were applied to
// scope.collection/key since the cluster started: every applied SET, ADD,
// REPLACE, DELETE, APPEND, PREPEND, INCREMENT, DECREMENT and sub-document
// mutation (and Set) counts once; TOUCH, GAT, locks and the expiry of the
// document do not. Tests use it to prove that a write was applied exactly
// once.
func (b *Bucket) MutationCount(scope, collection, key string) uint64 {
	cid, ok := b.snap.Load().manifest.lookup(scope, collection)
	if !ok {
		return 0
	}
	vb := b.storeFor(key)
	if vb == nil {
		return 0
	}
	vb.mu.Lock()
	defer vb.mu.Unlock()
	return vb.mutations[mapKey(cid, key)]
}

// VbucketUUID returns the current UUID of a vbucket (it changes on
// failover). A memcached bucket answers the constant its mutation tokens
// carry (0xdeadbeef, as default_engine does).
func (b *Bucket) VbucketUUID(vb uint16) uint64 {
	if b.memcached() {
		return memcachedVbucketUUID
	}
	v := b.vbs[vb]
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.uuid
}

// mapKey is the key of a document in its vbucket's map: the collection id
// as LEB128, then the key (what a collections-enabled client sends).
func mapKey(cid uint32, key string) string {
	b := memdx.AppendULEB128(make([]byte, 0, memdx.MaxLEB128Len+len(key)), cid)
	return string(append(b, key...))
}

// nextCas returns a CAS greater than every earlier one in the vbucket, from
// a hybrid logical clock: nanoseconds with the low 16 bits as a counter.
func (vb *vbucket) nextCas(now time.Time) uint64 {
	cas := uint64(now.UnixNano()) &^ 0xffff
	if cas <= vb.lastCas {
		cas = vb.lastCas + 1
	}
	if cas == 0 || cas == lockedCas {
		cas = vb.lastCas + 1
	}
	vb.lastCas = cas
	return cas
}

// nextSeqno gives a mutation its seqno: the vbucket's next. A memcached
// bucket's store has none: default_engine reports seqno 0 for every
// mutation and item (engines/default_engine/default_engine.cc,
// get_item_info and remove).
func (vb *vbucket) nextSeqno() uint64 {
	if vb.memcached {
		return 0
	}
	vb.seqno++
	return vb.seqno
}

// store installs d as the new version of mk: it takes a new CAS and seqno
// and counts the mutation. vb.mu must be held.
func (vb *vbucket) store(mk string, d *document, now time.Time) {
	d.memcached = vb.memcached
	d.cas, d.replicaCas = vb.nextCas(now), 0
	d.seqno = vb.nextSeqno()
	vb.docs[mk] = d
	delete(vb.tombs, mk)
	vb.mutations[mk]++
}

// storeTomb installs d as the tombstone of mk (the live document, if any,
// goes): it takes a new CAS and seqno and counts the mutation. vb.mu must
// be held.
func (vb *vbucket) storeTomb(mk string, d *document, now time.Time) {
	if vb.memcached {
		// default_engine keeps no deleted documents (keep_deleted is off):
		// storing one unlinks the key (default_engine.cc, store).
		vb.drop(mk, d, now)
		return
	}
	vb.installTomb(mk, d, now)
	vb.mutations[mk]++
}

// expire turns d, the expired document at mk, into a tombstone, as
// kv_engine does when an access or its expiry pager finds it
// (VBucket::processExpiredItem: a deletion with a new CAS and seqno; the
// pre-expiry hook keeps the system xattrs only). It is not a client's
// mutation: MutationCount does not count it. A memcached bucket just
// forgets the document (default_engine unlinks it). vb.mu must be held.
func (vb *vbucket) expire(mk string, d *document, now time.Time) {
	if vb.memcached {
		delete(vb.docs, mk)
		return
	}
	vb.installTomb(mk, &document{flags: d.flags, xattrs: systemXattrs(d.xattrs)}, now)
}

// installTomb installs d as the tombstone of mk (the live document, if
// any, goes) with a new CAS and seqno. vb.mu must be held.
func (vb *vbucket) installTomb(mk string, d *document, now time.Time) {
	d.cas, d.replicaCas = vb.nextCas(now), 0
	d.seqno = vb.nextSeqno()
	d.deleted = true
	d.value, d.snappy, d.datatype, d.lockedUntil = nil, nil, 0, time.Time{}
	d.expiry = uint32(now.Unix())
	delete(vb.docs, mk)
	if vb.tombs == nil {
		vb.tombs = make(map[string]*document)
	}
	vb.tombs[mk] = d
	vb.tombQ = append(vb.tombQ, tombRef{mk: mk, seqno: d.seqno})
	vb.purgeTombs(now)
}

// maxTombstones is how many tombstones the vbucket keeps: its share of
// maxBucketTombstones, at least 64.
func (vb *vbucket) maxTombstones() int {
	return max(64, maxBucketTombstones/max(1, vb.numVbs))
}

// tombPurged says whether tombstone d has outlived the purge age.
func tombPurged(d *document, now time.Time) bool {
	return now.Unix() >= int64(d.expiry)+int64(tombstonePurgeAge/time.Second)
}

// tomb returns the tombstone of mk, nil when there is none or it has
// outlived the purge age. vb.mu must be held.
func (vb *vbucket) tomb(mk string, now time.Time) *document {
	d := vb.tombs[mk]
	if d != nil && tombPurged(d, now) {
		delete(vb.tombs, mk)
		return nil
	}
	return d
}

// purgeTombs drops the oldest tombstones while there are more than the
// vbucket keeps or they have outlived the purge age, and the queue's stale
// entries. vb.mu must be held.
func (vb *vbucket) purgeTombs(now time.Time) {
	limit := vb.maxTombstones()
	for len(vb.tombQ) > 0 {
		r := vb.tombQ[0]
		d := vb.tombs[r.mk]
		live := d != nil && d.seqno == r.seqno
		if live && len(vb.tombs) <= limit && !tombPurged(d, now) {
			break
		}
		if live {
			delete(vb.tombs, r.mk)
		}
		vb.tombQ[0] = tombRef{}
		vb.tombQ = vb.tombQ[1:]
	}
	if len(vb.tombQ) > 2*len(vb.tombs)+64 {
		// Revived or rewritten tombstones left stale entries behind a
		// live one: keep the live entries only.
		q := make([]tombRef, 0, len(vb.tombs))
		for _, r := range vb.tombQ {
			if d := vb.tombs[r.mk]; d != nil && d.seqno == r.seqno {
				q = append(q, r)
			}
		}
		vb.tombQ = q
	}
}

// remove deletes mk, taking a new CAS and seqno; it returns the CAS of the
// deletion. d, the document the DELETE was checked against, leaves a
// tombstone with its flags and system xattrs (its body and user xattrs
// go), as kv_engine's DELETE does (VBucket::deleteItem soft-deletes the
// stored value; RemoveCommandContext prunes the user xattrs, into the
// prepare of a durable delete). vb.mu must be held.
func (vb *vbucket) remove(mk string, d *document, now time.Time) (cas, seqno uint64) {
	t := &document{flags: d.flags, xattrs: systemXattrs(d.xattrs)}
	vb.storeTomb(mk, t, now)
	return t.cas, t.seqno
}

// lockedCas is the CAS kv_engine shows of a locked document: a GET, a
// GET_META (VBucket::getMetaData) and the item a sub-document command reads
// all have it (HIDE_LOCKED_CAS).
const lockedCas = ^uint64(0)

// maxKeyLen is the longest document key (without collection prefix) in
// the default collection.
const maxKeyLen = 250

// maxNamedCollectionKeyLen is the longest key (without collection prefix)
// in any other collection: kv_engine's MaxCollectionsLogicalKeyLen, which
// leaves room for the longest (5-byte) collection id within the 251 bytes a
// collection-aware key may have (mcbp_validators.cc, is_document_key_valid).
const maxNamedCollectionKeyLen = 246

// maxLogicalKeyLen is the longest key kv_engine accepts in collection cid.
func maxLogicalKeyLen(cid uint32) int {
	if cid == 0 {
		return maxKeyLen
	}
	return maxNamedCollectionKeyLen
}

// manifest is an immutable collections manifest.
type manifest struct {
	uid    uint64
	scopes []scopeDef
	// ids are the collections by id, true for a system collection
	// (isSystemCollection).
	ids map[uint32]bool
}

type scopeDef struct {
	name        string
	uid         uint32
	collections []collectionDef
}

type collectionDef struct {
	name string
	uid  uint32
}

// defaultManifest is a new Couchbase bucket's manifest, as the cluster
// manager makes it (ns_server's collections:default_manifest; kv_engine
// has no scope of its own). From 7.6 (system) it also holds the _system
// scope (id 8) with the _mobile (8) and _query (9) collections
// (manifest_with_system_scope, is_system_scope_enabled: cluster compat 7.6),
// and its uid is 1; before, only _default, uid 0.
func defaultManifest(system bool) *manifest {
	m := &manifest{uid: 0, scopes: []scopeDef{{name: "_default", uid: 0,
		collections: []collectionDef{{name: "_default", uid: 0}}}}}
	if system {
		m.uid = 1
		m.scopes = append(m.scopes, scopeDef{name: systemScope, uid: 8,
			collections: []collectionDef{{name: "_query", uid: 9}, {name: "_mobile", uid: 8}}})
	}
	return m.index()
}

// systemScope is the scope of the cluster's system collections (7.6).
const systemScope = "_system"

func (m *manifest) index() *manifest {
	m.ids = make(map[uint32]bool)
	for _, s := range m.scopes {
		for _, c := range s.collections {
			m.ids[c.uid] = isSystemCollection(c.name, c.uid)
		}
	}
	return m
}

func (m *manifest) has(cid uint32) bool {
	_, ok := m.ids[cid]
	return ok
}

// system reports whether cid is a system collection of the manifest.
func (m *manifest) system(cid uint32) bool { return m.ids[cid] }

// isSystemCollection reports whether the collection named name with id
// cid is a system collection, one whose documents need the
// SystemCollectionLookup and SystemCollectionMutation privileges besides
// the user ones: kv_engine's Collections::isSystemCollection
// (engines/ep/src/collections/collections_types.h), a name starting with
// '_' but the default collection's (_system._mobile, _system._query).
func isSystemCollection(name string, cid uint32) bool {
	return cid != 0 && strings.HasPrefix(name, "_")
}

func (m *manifest) scope(name string) (scopeDef, bool) {
	if name == "" {
		name = "_default"
	}
	for _, s := range m.scopes {
		if s.name == name {
			return s, true
		}
	}
	return scopeDef{}, false
}

func (m *manifest) lookup(scope, collection string) (uint32, bool) {
	s, ok := m.scope(scope)
	if !ok {
		return 0, false
	}
	if collection == "" {
		collection = "_default"
	}
	for _, c := range s.collections {
		if c.name == collection {
			return c.uid, true
		}
	}
	return 0, false
}

func (m *manifest) clone() *manifest {
	out := &manifest{uid: m.uid, scopes: make([]scopeDef, len(m.scopes))}
	for i, s := range m.scopes {
		s.collections = append([]collectionDef(nil), s.collections...)
		out.scopes[i] = s
	}
	return out
}

// uidString formats a manifest uid as the server does: hex, no 0x.
func uidString(u uint64) string { return strconv.FormatUint(u, 16) }

type manifestJSON struct {
	UID    string `json:"uid"`
	Scopes []struct {
		Name        string `json:"name"`
		UID         string `json:"uid"`
		Collections []struct {
			Name string `json:"name"`
			UID  string `json:"uid"`
		} `json:"collections"`
	} `json:"scopes"`
}

// json renders the manifest as COLLECTIONS_GET_MANIFEST returns it.
func (m *manifest) json() []byte {
	var out manifestJSON
	out.UID = uidString(m.uid)
	for _, s := range m.scopes {
		var sj struct {
			Name        string `json:"name"`
			UID         string `json:"uid"`
			Collections []struct {
				Name string `json:"name"`
				UID  string `json:"uid"`
			} `json:"collections"`
		}
		sj.Name, sj.UID = s.name, strconv.FormatUint(uint64(s.uid), 16)
		sj.Collections = make([]struct {
			Name string `json:"name"`
			UID  string `json:"uid"`
		}, 0, len(s.collections))
		for _, c := range s.collections {
			sj.Collections = append(sj.Collections, struct {
				Name string `json:"name"`
				UID  string `json:"uid"`
			}{c.name, strconv.FormatUint(uint64(c.uid), 16)})
		}
		out.Scopes = append(out.Scopes, sj)
	}
	b, _ := json.Marshal(out)
	return b
}

// Manifest returns the bucket's collections manifest as
// COLLECTIONS_GET_MANIFEST returns it.
func (b *Bucket) Manifest() []byte { return b.snap.Load().manifest.json() }

// ManifestUID returns the uid of the current collections manifest.
func (b *Bucket) ManifestUID() uint64 { return b.snap.Load().manifest.uid }

// CollectionID returns the id of scope.collection.
func (b *Bucket) CollectionID(scope, collection string) (uint32, error) {
	cid, ok := b.snap.Load().manifest.lookup(scope, collection)
	if !ok {
		return 0, fmt.Errorf("%w: collection %s.%s in bucket %q", ErrNotFound, scope, collection, b.name)
	}
	return cid, nil
}

// validName checks a scope or collection name as the server does: 1 to 251
// bytes (the server allows 251 since 7.0) of A-Z a-z 0-9 _ - %, not
// starting with _ or %.
func validName(n string) error {
	if n == "" || len(n) > 251 {
		return invalidf("name %q must be 1..251 bytes", n)
	}
	if n[0] == '_' || n[0] == '%' {
		return invalidf("name %q must not start with _ or %%", n)
	}
	for i := 0; i < len(n); i++ {
		c := n[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '%') {
			return invalidf("name %q has a character outside A-Z a-z 0-9 _ - %%", n)
		}
	}
	return nil
}

// AddScope creates a scope and publishes the new manifest (and a config with
// the new collectionsManifestUid). It returns the scope's id.
func (b *Bucket) AddScope(name string) (uint32, error) {
	if err := validName(name); err != nil {
		return 0, err
	}
	var id uint32
	err := b.c.updateManifest(b, func(m *manifest) error {
		if _, ok := m.scope(name); ok {
			return fmt.Errorf("%w: scope %q", ErrExists, name)
		}
		id = b.nextScopeID
		b.nextScopeID++
		m.scopes = append(m.scopes, scopeDef{name: name, uid: id})
		return nil
	})
	return id, err
}

// AddCollection creates a collection in an existing scope and publishes the
// new manifest. It returns the collection's id.
func (b *Bucket) AddCollection(scope, name string) (uint32, error) {
	if err := validName(name); err != nil {
		return 0, err
	}
	if scope == systemScope {
		// ns_server's verify_oper: cannot_create_collection_in_system_scope.
		return 0, invalidf("no collection can be created in the %s scope", systemScope)
	}
	var id uint32
	err := b.c.updateManifest(b, func(m *manifest) error {
		for i := range m.scopes {
			if m.scopes[i].name != scope {
				continue
			}
			for _, c := range m.scopes[i].collections {
				if c.name == name {
					return fmt.Errorf("%w: collection %s.%s", ErrExists, scope, name)
				}
			}
			id = b.nextCollectionID
			b.nextCollectionID++
			m.scopes[i].collections = append(m.scopes[i].collections, collectionDef{name: name, uid: id})
			return nil
		}
		return fmt.Errorf("%w: scope %q", ErrNotFound, scope)
	})
	return id, err
}

// DropCollection removes a collection (its documents become unreachable)
// and publishes the new manifest.
func (b *Bucket) DropCollection(scope, name string) error {
	if scope == systemScope && strings.HasPrefix(name, "_") {
		// ns_server's verify_oper: cannot_drop_system_collection.
		return invalidf("the system collection %s.%s cannot be dropped", scope, name)
	}
	return b.c.updateManifest(b, func(m *manifest) error {
		for i := range m.scopes {
			if m.scopes[i].name != scope {
				continue
			}
			cs := m.scopes[i].collections
			for j, c := range cs {
				if c.name == name {
					m.scopes[i].collections = append(cs[:j:j], cs[j+1:]...)
					return nil
				}
			}
			return fmt.Errorf("%w: collection %s.%s", ErrNotFound, scope, name)
		}
		return fmt.Errorf("%w: scope %q", ErrNotFound, scope)
	})
}

// DropScope removes a scope and its collections and publishes the new
// manifest.
func (b *Bucket) DropScope(name string) error {
	if name == "_default" {
		return invalidf("the _default scope cannot be dropped")
	}
	if name == systemScope {
		// ns_server's verify_oper: cannot_drop_system_scope.
		return invalidf("the %s scope cannot be dropped", systemScope)
	}
	return b.c.updateManifest(b, func(m *manifest) error {
		for i, s := range m.scopes {
			if s.name == name {
				m.scopes = append(m.scopes[:i:i], m.scopes[i+1:]...)
				return nil
			}
		}
		return fmt.Errorf("%w: scope %q", ErrNotFound, name)
	})
}
