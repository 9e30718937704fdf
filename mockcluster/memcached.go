package mockcluster

// Memcached buckets: what Couchbase Server answers for a bucket of type
// memcached, whose engine is kv_engine's default_engine
// (engines/default_engine/default_engine.cc) behind the same daemon
// executors as a couchbase bucket, and the per-node stores and ketama ring
// the mock keeps for one. Each decision names the file that made it.

import (
	"net"
	"slices"
	"strconv"

	"github.com/kvwire/kvwire/memdx"
	"github.com/kvwire/kvwire/vbmap"
)

const (
	// memcachedVbucketUUID is the vbucket UUID of every mutation token a
	// memcached bucket gives (DEFAULT_ENGINE_VBUCKET_UUID in
	// default_engine.cc); its seqno is always 0.
	memcachedVbucketUUID = 0xdeadbeef
	// memcachedMaxValue is the largest value a memcached bucket stores:
	// default_engine's item_size_max, 1 MiB (default_engine.cc,
	// default_engine_constructor; ns_server does not raise it). Larger
	// values answer E2BIG.
	memcachedMaxValue = 1 << 20
)

// newMemcachedStore returns an empty store for one node of a memcached
// bucket.
func newMemcachedStore() *vbucket {
	return &vbucket{uuid: memcachedVbucketUUID, docs: make(map[string]*document),
		mutations: make(map[string]uint64), pending: make(map[string]*syncWrite), memcached: true}
}

// nodeStore returns node id's store of a memcached bucket, creating it on
// first use.
func (b *Bucket) nodeStore(id int) *vbucket {
	if v, ok := b.stores.Load(id); ok {
		return v.(*vbucket)
	}
	v, _ := b.stores.LoadOrStore(id, newMemcachedStore())
	return v.(*vbucket)
}

// dropStores forgets the documents of the nodes that no longer serve a
// memcached bucket: a memcached bucket has no replicas, so a node failed
// over or removed takes its keys with it, and one added back starts empty.
func (b *Bucket) dropStores(servers []int) {
	b.stores.Range(func(k, _ any) bool {
		if !slices.Contains(servers, k.(int)) {
			b.stores.Delete(k)
		}
		return true
	})
}

// valueLimit is the largest value the bucket stores.
func (b *Bucket) valueLimit() int {
	if b.memcached() {
		return memcachedMaxValue
	}
	return maxValue
}

// ketamaRingLocked builds a memcached bucket's ring over its servers with
// the hashing clients use (vbmap.NewKetama: libcouchbase's and SDK RFC
// 26's), hashing "host:port" of each node's non-TLS KV port, the host
// being the one clients put in place of "$HOST": Options.ConfigHost, or
// Options.Host where every node listens. nil for no servers. c.mu must be
// held.
func (c *Cluster) ketamaRingLocked(servers []int) *vbmap.Ketama {
	if len(servers) == 0 {
		return nil
	}
	host := c.opts.ConfigHost
	if host == "" {
		host = c.opts.Host
	}
	addrs := make([]string, len(servers))
	for i, id := range servers {
		addrs[i] = net.JoinHostPort(host, strconv.Itoa(c.nodes[id].kvPort))
	}
	k, err := vbmap.NewKetama(addrs)
	if err != nil { // unreachable: the list is not empty
		return nil
	}
	return k
}

// NodeForKey returns the id of the node that holds key: in a couchbase
// bucket the active node of the key's vbucket (-1 when it has none); in a
// memcached bucket the node the bucket's ketama ring gives it, as a client
// routing by the bucket's config places it (-1 when the bucket has no
// server).
func (b *Bucket) NodeForKey(key []byte) int {
	s := b.snap.Load()
	if !b.memcached() {
		return s.chains[vbucketForKey(key, b.numVbs)][0]
	}
	if s.ring == nil {
		return -1
	}
	return s.servers[s.ring.Server(key)]
}

// locateMemcached is locate for a memcached bucket, after the key's checks.
// It reports false after answering:
//
//   - a replica read (GET_REPLICA, or a lookup with the ReplicaRead doc
//     flag) answers NOT_SUPPORTED: default_engine has no get_replica, and
//     EngineIface's default answers not_supported
//     (engines/utilities/engine.cc);
//   - a vbucket other than 0 answers NOT_MY_VBUCKET: ns_server creates
//     memcached buckets with vb0=true, so only vbucket 0 is active
//     (default_engine.cc, initalize_configuration and VBUCKET_GUARD);
//   - so does a node that does not serve the bucket (not in its server
//     list: added and not yet rebalanced in, or failed over), where the
//     server has no such bucket. Neither answer carries a config: ns_server
//     gives kv_engine a cluster config for couchbase buckets only
//     (ns_server's terse_bucket_info_uploader.erl starts only for them);
//   - a collection other than the default answers UNKNOWN_COLLECTION
//     against manifest uid 0 (default_engine.cc, "MB-35696: Only the
//     default collection is permitted").
func (cn *conn) locateMemcached(p *memdx.Packet, t target, replica bool) (target, bool) {
	if replica {
		cn.fail(p, memdx.StatusNotSupported, "Replica reads are not supported on a memcached bucket")
		return t, false
	}
	t.s = t.b.snap.Load()
	if p.Vbucket != 0 || !slices.Contains(t.s.servers, cn.n.id) {
		cn.reply(p, memdx.StatusNotMyVbucket, 0, 0, nil, nil, nil)
		return t, false
	}
	if t.cid != 0 {
		cn.failManifest(p, memdx.StatusUnknownCollection, 0,
			"Unknown collection id 0x"+strconv.FormatUint(uint64(t.cid), 16)+": a memcached bucket has only the default collection")
		return t, false
	}
	t.vb = t.b.nodeStore(cn.n.id)
	return t, true
}

// refuseOnMemcached answers the commands a memcached bucket does not
// serve, and reports whether it did:
//
//   - OBSERVE and OBSERVE_SEQNO answer UNKNOWN_COMMAND: the daemon hands
//     them to the engine's unknown_command, which default_engine answers
//     UnknownCommand (default_engine.cc, unknown_command);
//   - RANGE_SCAN_CREATE, _CONTINUE and _CANCEL answer NOT_SUPPORTED:
//     default_engine has no range scans, and EngineIface's defaults answer
//     not_supported (engines/utilities/engine.cc).
func (cn *conn) refuseOnMemcached(p *memdx.Packet) bool {
	if b := cn.bucket.Load(); b == nil || !b.memcached() {
		return false
	}
	switch p.OpCode {
	case memdx.OpObserve, memdx.OpObserveSeqno:
		cn.fail(p, memdx.StatusUnknownCommand, "")
	case memdx.OpRangeScanCreate, memdx.OpRangeScanContinue, memdx.OpRangeScanCancel:
		cn.fail(p, memdx.StatusNotSupported, "Range scans are not supported on a memcached bucket")
	default:
		return false
	}
	return true
}

// refuseDurable answers NOT_SUPPORTED for a durable write to a memcached
// bucket (default_engine's store, remove and get_and_touch answer
// not_supported when given durability requirements, default_engine.cc)
// and reports whether it did.
func (cn *conn) refuseDurable(p *memdx.Packet, t target, f frames) bool {
	if !f.durable || !t.b.memcached() {
		return false
	}
	cn.fail(p, memdx.StatusNotSupported, "Durability is not supported on a memcached bucket")
	return true
}
