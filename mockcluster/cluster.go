package mockcluster

import (
	"crypto/x509"
	"fmt"
	"net"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kvwire/kvwire/memdx"
)

// Cluster is an in-process Couchbase cluster. Create it with New and stop it
// with Close. Every method is safe for concurrent use.
type Cluster struct {
	opts  Options
	clock *Clock
	uuid  string
	name  string
	tls   *tlsMaterial

	mu        sync.Mutex // guards everything below, and Node topology fields
	nodes     []*Node    // by id; nil once removed
	buckets   map[string]*Bucket
	order     []string // bucket names in creation order
	users     map[string]*user
	rev       int64
	epoch     int64
	closed    bool
	rebalance *Rebalance
	global    atomic.Pointer[globalSnap]
	timers    map[*time.Timer]func() // pending sync-write commits
	notes     []note                 // notifications to send after unlocking
	// syncFired, when set (tests only), runs in a sync-write timer's
	// callback after the timer fired and before it takes mu.
	syncFired func()
	// changed is closed, and replaced, whenever a config is published: the
	// HTTP config streams wait on it.
	changed chan struct{}

	disabled       map[memdx.HelloFeature]bool
	syncWriteDelay atomic.Int64
	// notLockedTmpfail: the nodes answer UNLOCK_KEY of a document that is
	// not locked as kv_engine before 7.6 does (Options.Version).
	notLockedTmpfail bool
	// systemScope: a new Couchbase bucket's manifest holds the _system
	// scope (7.6 and later: defaultManifest).
	systemScope bool

	faults faultRegistry
	scans  rangeScans
	wg     sync.WaitGroup

	// restCounts counts the REST requests that passed authentication, by
	// path (string -> *atomic.Uint64).
	restCounts sync.Map
}

// note is a cluster-map change notification waiting to be sent.
type note struct {
	cn     *conn
	bucket string
	ver    memdx.ClusterConfigVersion
	config []byte
	snappy []byte // config compressed
}

// unlock releases c.mu and then sends the notifications that publishing
// queued: a connection whose client does not read can then delay only the
// caller, never the cluster's lock.
func (c *Cluster) unlock() {
	notes := c.notes
	c.notes = nil
	c.mu.Unlock()
	for _, n := range notes {
		n.cn.notify(n.bucket, n.ver, n.config, n.snappy)
	}
}

type globalSnap struct {
	rev          int64
	json, snappy map[int][]byte
}

// New starts a cluster. Close it when done (t.Cleanup(c.Close) in tests).
func New(opts Options) (*Cluster, error) {
	o, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	c := &Cluster{opts: o, clock: newClock(o.Clock), buckets: make(map[string]*Bucket),
		users: make(map[string]*user), epoch: 1, name: "mockcluster", changed: make(chan struct{}),
		disabled: make(map[memdx.HelloFeature]bool), timers: make(map[*time.Timer]func())}
	c.uuid = fmt.Sprintf("%016x%016x", randUint64(), randUint64())
	c.syncWriteDelay.Store(int64(o.SyncWriteDelay))
	for _, f := range o.DisabledFeatures {
		c.disabled[f] = true
	}
	if o.NoRevEpoch {
		c.epoch = -1
	}
	c.notLockedTmpfail = versionBefore(o.Version, 7, 6)
	c.systemScope = !versionBefore(o.Version, 7, 6)
	if o.NoClusterMapNotifications {
		c.disabled[memdx.FeatureClustermapChangeNotification] = true
		c.disabled[memdx.FeatureClustermapChangeNotificationBrief] = true
	}
	if o.TLS {
		if c.tls, err = newTLSMaterial(o.Host); err != nil {
			return nil, err
		}
	}
	c.mu.Lock()
	for i := 0; i < o.Nodes; i++ {
		n := c.newNodeLocked()
		c.nodes = append(c.nodes, n)
		if err := n.listen(); err != nil {
			c.mu.Unlock()
			c.Close()
			return nil, err
		}
	}
	c.publishGlobalLocked()
	for _, bo := range o.Buckets {
		if err := c.addBucketLocked(bo); err != nil {
			c.mu.Unlock()
			c.Close()
			return nil, err
		}
	}
	for _, u := range o.Users {
		if err := c.addUserLocked(u); err != nil {
			c.mu.Unlock()
			c.Close()
			return nil, err
		}
	}
	for _, n := range c.nodes {
		n.serve()
	}
	c.mu.Unlock()
	return c, nil
}

// Close stops every node, closes every connection and waits for the
// cluster's goroutines to end. It is safe to call more than once.
func (c *Cluster) Close() {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return
	}
	c.closed = true
	if c.rebalance != nil {
		c.rebalance.stopPacer()
	}
	for t := range c.timers {
		t.Stop()
	}
	c.timers = nil
	nodes := append([]*Node(nil), c.nodes...)
	c.mu.Unlock()
	for _, n := range nodes {
		if n != nil {
			n.stop(true)
		}
	}
	c.wg.Wait()
}

func (c *Cluster) logf(format string, args ...any) {
	if c.opts.Logf != nil {
		c.opts.Logf(format, args...)
	}
}

// Clock returns the cluster's clock.
func (c *Cluster) Clock() *Clock { return c.clock }

// ConnString returns a connection string naming every running node's KV
// port: "couchbase://127.0.0.1:p1,127.0.0.1:p2,..." (Options.Host in place
// of 127.0.0.1 when set), or with TLS
// "couchbases://" and the TLS ports.
func (c *Cluster) ConnString() string {
	scheme := "couchbase://"
	if c.tls != nil {
		scheme = "couchbases://"
	}
	addrs := c.Addrs()
	if c.tls != nil {
		addrs = c.TLSAddrs()
	}
	return scheme + strings.Join(addrs, ",")
}

// Addrs returns the KV addresses ("127.0.0.1:port", or Options.Host's) of the cluster's nodes
// that are running, in node order.
func (c *Cluster) Addrs() []string {
	return c.addrs(func(n *Node) int { return n.kvPort })
}

// TLSAddrs returns the TLS KV addresses of the running nodes (nil without
// Options.TLS).
func (c *Cluster) TLSAddrs() []string {
	if c.tls == nil {
		return nil
	}
	return c.addrs(func(n *Node) int { return n.tlsPort })
}

// MgmtAddrs returns the cluster manager (REST, HTTP) addresses of the
// running nodes, in node order.
func (c *Cluster) MgmtAddrs() []string {
	return c.addrs(func(n *Node) int { return n.mgmtPort })
}

// MgmtTLSAddrs returns the cluster manager HTTPS addresses (mgmtSSL) of
// the running nodes (nil without Options.TLS).
func (c *Cluster) MgmtTLSAddrs() []string {
	if c.tls == nil {
		return nil
	}
	return c.addrs(func(n *Node) int { return n.mgmtTLSPort })
}

// HTTPConnString returns a connection string that bootstraps over HTTP
// only, naming every running node's REST port with RFC 0011's "=http"
// type: "couchbase://127.0.0.1:p1=http,127.0.0.1:p2=http" (Options.Host
// in place of 127.0.0.1 when set), or with Options.TLS "couchbases://"
// and the HTTPS (mgmtSSL) ports, each still "=http" (libcouchbase's form:
// the scheme says TLS, the type says the port speaks HTTP).
func (c *Cluster) HTTPConnString() string {
	scheme, addrs := "couchbase://", c.MgmtAddrs()
	if c.tls != nil {
		scheme, addrs = "couchbases://", c.MgmtTLSAddrs()
	}
	for i := range addrs {
		addrs[i] += "=http"
	}
	return scheme + strings.Join(addrs, ",")
}

func (c *Cluster) addrs(port func(*Node) int) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for _, n := range c.nodes {
		if n != nil && n.isRunning() {
			out = append(out, net.JoinHostPort(c.opts.Host, strconv.Itoa(port(n))))
		}
	}
	return out
}

// RootCAs returns a pool holding the CA that signed the nodes' TLS
// certificates (nil without Options.TLS).
func (c *Cluster) RootCAs() *x509.CertPool {
	if c.tls == nil {
		return nil
	}
	p := x509.NewCertPool()
	p.AddCert(c.tls.caCert)
	return p
}

// CACertPEM returns the PEM encoding of the CA certificate (nil without
// Options.TLS).
func (c *Cluster) CACertPEM() []byte {
	if c.tls == nil {
		return nil
	}
	return append([]byte(nil), c.tls.caPEM...)
}

// Node returns the node with the given id (ids count from 0 in creation
// order and are never reused), or nil.
func (c *Cluster) Node(id int) *Node {
	c.mu.Lock()
	defer c.mu.Unlock()
	if id < 0 || id >= len(c.nodes) {
		return nil
	}
	return c.nodes[id]
}

// Nodes returns the cluster's nodes (not removed ones), by id.
func (c *Cluster) Nodes() []*Node {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []*Node
	for _, n := range c.nodes {
		if n != nil {
			out = append(out, n)
		}
	}
	return out
}

// Bucket returns the named bucket, or nil.
func (c *Cluster) Bucket(name string) *Bucket {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.buckets[name]
}

// Buckets returns the cluster's buckets in creation order.
func (c *Cluster) Buckets() []*Bucket {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]*Bucket, 0, len(c.order))
	for _, n := range c.order {
		out = append(out, c.buckets[n])
	}
	return out
}

// AddBucket creates a bucket and publishes its config: a couchbase bucket
// spread over the nodes that hold data (balanced map, replicas on the
// following nodes), or a memcached bucket served by those nodes.
func (c *Cluster) AddBucket(o BucketOptions) (*Bucket, error) {
	c.mu.Lock()
	defer c.unlock()
	if c.closed {
		return nil, ErrClosed
	}
	if c.rebalance != nil {
		return nil, ErrRebalancing
	}
	if err := c.addBucketLocked(o); err != nil {
		return nil, err
	}
	return c.buckets[o.Name], nil
}

func (c *Cluster) addBucketLocked(o BucketOptions) error {
	o, err := o.withDefaults()
	if err != nil {
		return err
	}
	// Names that differ only in case conflict (ns_bucket:name_conflict).
	for name := range c.buckets {
		if strings.EqualFold(name, o.Name) {
			if name == o.Name {
				return fmt.Errorf("%w: bucket %q", ErrExists, o.Name)
			}
			return fmt.Errorf("%w: bucket %q: bucket %q exists, and names must differ in more than case", ErrExists, o.Name, name)
		}
	}
	b := newBucket(c, o)
	servers := c.dataNodesLocked()
	c.buckets[o.Name] = b
	c.order = append(c.order, o.Name)
	// A memcached bucket has no collections of its own: kv_engine's
	// default_engine answers with the epoch manifest (uid 0, _default
	// alone), 7.6 or not.
	c.publishLocked(b, servers, balancedMap(servers, o.NumVbuckets, o.NumReplicas), nil,
		defaultManifest(c.systemScope && !b.memcached()))
	return nil
}

// dataNodesLocked returns the ids of nodes a new bucket is spread over: the
// servers of an existing bucket, or every cluster member.
func (c *Cluster) dataNodesLocked() []int {
	for _, name := range c.order {
		return append([]int(nil), c.buckets[name].snap.Load().servers...)
	}
	var ids []int
	for _, n := range c.clusterNodesLocked() {
		ids = append(ids, n.id)
	}
	return ids
}

// RemoveBucket deletes a bucket; connections that selected it are closed,
// as the server disconnects them, and apply nothing more once it returns.
func (c *Cluster) RemoveBucket(name string) error {
	c.mu.Lock()
	b := c.buckets[name]
	if b == nil {
		c.mu.Unlock()
		return fmt.Errorf("%w: bucket %q", ErrNotFound, name)
	}
	if c.rebalance != nil {
		c.mu.Unlock()
		return ErrRebalancing
	}
	delete(c.buckets, name)
	for i, n := range c.order {
		if n == name {
			c.order = append(c.order[:i:i], c.order[i+1:]...)
			break
		}
	}
	b.removed.Store(true)
	c.configChangedLocked() // its HTTP config streams end
	nodes := append([]*Node(nil), c.nodes...)
	c.mu.Unlock()
	for _, n := range nodes {
		if n != nil {
			n.closeConnsWhere(func(cn *conn) bool { return cn.bucket.Load() == b })
		}
	}
	return nil
}

// balancedMap spreads vbuckets over servers round robin, replicas on the
// following servers; chains have numReplicas+1 entries, -1 where there are
// too few servers.
func balancedMap(servers []int, numVbs, numReplicas int) [][]int {
	chains := make([][]int, numVbs)
	flat := make([]int, numVbs*(numReplicas+1))
	for vb := range chains {
		ch := flat[vb*(numReplicas+1) : (vb+1)*(numReplicas+1) : (vb+1)*(numReplicas+1)]
		for r := range ch {
			ch[r] = -1
			if len(servers) > r {
				ch[r] = servers[(vb+r)%len(servers)]
			}
		}
		chains[vb] = ch
	}
	return chains
}

// publishLocked installs a new state for a bucket with the next revision and
// queues notifications for the clients that asked for cluster-map change
// notifications. c.mu must be held; the caller releases it with c.unlock,
// which sends them.
func (c *Cluster) publishLocked(b *Bucket, servers []int, chains, fwd [][]int, m *manifest) *bucketSnap {
	c.rev++
	s := &bucketSnap{rev: c.rev, epoch: c.epoch, servers: servers, chains: chains, fwd: fwd,
		manifest: m, json: make(map[int][]byte), snappy: make(map[int][]byte)}
	for _, n := range c.nodes {
		if n != nil {
			s.json[n.id] = c.renderBucketConfig(b, s, n.id)
			s.snappy[n.id] = memdx.CompressSnappy(nil, s.json[n.id])
		}
	}
	if b.memcached() {
		s.ring = c.ketamaRingLocked(servers)
		b.dropStores(servers)
	}
	b.snap.Store(s)
	if !b.memcached() {
		// ns_server gives kv_engine no config for a memcached bucket, so
		// no notification carries one (see getClusterConfig).
		c.notifyBucket(b, s)
	}
	c.configChangedLocked()
	return s
}

// configChangedLocked wakes whoever waits for the next published config
// (the HTTP config streams). c.mu must be held.
func (c *Cluster) configChangedLocked() {
	close(c.changed)
	c.changed = make(chan struct{})
}

// configChanged returns a channel closed when the next config is
// published.
func (c *Cluster) configChanged() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.changed
}

// publishGlobalLocked publishes a new cluster (bucketless) config. c.mu must
// be held.
func (c *Cluster) publishGlobalLocked() {
	c.rev++
	g := &globalSnap{rev: c.rev, json: make(map[int][]byte), snappy: make(map[int][]byte)}
	for _, n := range c.nodes {
		if n != nil {
			g.json[n.id] = c.renderGlobalConfig(g.rev, n.id)
			g.snappy[n.id] = memdx.CompressSnappy(nil, g.json[n.id])
		}
	}
	c.global.Store(g)
	c.notifyGlobal(g)
	c.configChangedLocked()
}

// republishAllLocked publishes every bucket again (after a node list
// change), keeping its ownership.
func (c *Cluster) republishAllLocked() {
	c.publishGlobalLocked()
	for _, name := range c.order {
		b := c.buckets[name]
		s := b.snap.Load()
		c.publishLocked(b, s.servers, s.chains, s.fwd, s.manifest)
	}
}

func (c *Cluster) updateManifest(b *Bucket, edit func(*manifest) error) error {
	c.mu.Lock()
	defer c.unlock()
	if c.closed {
		return ErrClosed
	}
	if b.removed.Load() {
		return fmt.Errorf("%w: bucket %q", ErrNotFound, b.name)
	}
	if b.memcached() {
		return invalidf("bucket %q is a memcached bucket: it has only the default scope and collection", b.name)
	}
	s := b.snap.Load()
	m := s.manifest.clone()
	if err := edit(m); err != nil {
		return err
	}
	m.uid++
	c.publishLocked(b, s.servers, s.chains, s.fwd, m.index())
	return nil
}

// notifyBucket queues a cluster-map change notification for b for every
// connection that selected b (conn.notify checks what each negotiated).
// c.mu must be held.
func (c *Cluster) notifyBucket(b *Bucket, s *bucketSnap) {
	for _, n := range c.nodes {
		if n == nil {
			continue
		}
		for _, cn := range n.connList() {
			if cn.bucket.Load() == b {
				c.notes = append(c.notes, note{cn, b.name, s.version(), s.json[n.id], s.snappy[n.id]})
			}
		}
	}
}

func (c *Cluster) notifyGlobal(g *globalSnap) {
	for _, n := range c.nodes {
		if n == nil {
			continue
		}
		for _, cn := range n.connList() {
			if cn.bucket.Load() == nil && cn.authed.Load() {
				c.notes = append(c.notes, note{cn, "", memdx.ClusterConfigVersion{Epoch: c.epoch, Revision: g.rev}, g.json[n.id], g.snappy[n.id]})
			}
		}
	}
}

// SetSyncWriteDelay sets how long synchronous writes stay pending before
// they commit (0 commits at once). It applies to writes that start later.
func (c *Cluster) SetSyncWriteDelay(d time.Duration) { c.syncWriteDelay.Store(int64(d)) }

// user is a cluster user. Its SCRAM secrets are derived on first use, so
// that starting a cluster costs no PBKDF2 rounds.
type user struct {
	name       string
	password   string
	all        bool
	buckets    map[string]bool
	iterations int

	mu    sync.Mutex
	scram map[string]memdx.ScramKeys
}

func (u *user) mayUse(bucket string) bool { return u.all || u.buckets[bucket] }

// scramKeys returns the user's secrets for a SCRAM mechanism.
func (u *user) scramKeys(mech string) (memdx.ScramKeys, bool) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if k, ok := u.scram[mech]; ok {
		return k, true
	}
	var salt [16]byte
	putUint64(salt[0:8], randUint64())
	putUint64(salt[8:16], randUint64())
	k, err := memdx.DeriveScramKeys(mech, u.password, salt[:], u.iterations)
	if err != nil {
		return memdx.ScramKeys{}, false
	}
	u.scram[mech] = k
	return k, true
}

// AddUser creates a user.
func (c *Cluster) AddUser(u User) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return ErrClosed
	}
	return c.addUserLocked(u)
}

func (c *Cluster) addUserLocked(u User) error {
	if u.Name == "" {
		return invalidf("a user needs a name")
	}
	if _, ok := c.users[u.Name]; ok {
		return fmt.Errorf("%w: user %q", ErrExists, u.Name)
	}
	nu := &user{name: u.Name, password: u.Password, buckets: make(map[string]bool),
		iterations: c.opts.ScramIterations, scram: make(map[string]memdx.ScramKeys)}
	for _, b := range u.Buckets {
		if b == "*" {
			nu.all = true
		}
		nu.buckets[b] = true
	}
	c.users[u.Name] = nu
	return nil
}

// RemoveUser deletes a user and closes its connections, which apply nothing
// more once it returns.
func (c *Cluster) RemoveUser(name string) error {
	c.mu.Lock()
	u := c.users[name]
	if u == nil {
		c.mu.Unlock()
		return fmt.Errorf("%w: user %q", ErrNotFound, name)
	}
	delete(c.users, name)
	nodes := append([]*Node(nil), c.nodes...)
	c.mu.Unlock()
	for _, n := range nodes {
		if n != nil {
			n.closeConnsWhere(func(cn *conn) bool { return cn.user.Load() == u })
		}
	}
	return nil
}

func (c *Cluster) lookupUser(name string) *user {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.users[name]
}

// Users returns the names of the cluster's users, sorted.
func (c *Cluster) Users() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]string, 0, len(c.users))
	for n := range c.users {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// RequestCount returns how many requests with opcode op the cluster's
// current nodes received (see Node.RequestCount).
func (c *Cluster) RequestCount(op memdx.OpCode) uint64 {
	var n uint64
	for _, nd := range c.Nodes() {
		n += nd.RequestCount(op)
	}
	return n
}

// RESTRequestCount returns how many requests for path (without the query,
// "/pools/default/bs/default" say) the nodes' REST endpoints received with
// credentials they accepted, whatever the answer.
func (c *Cluster) RESTRequestCount(path string) uint64 {
	if v, ok := c.restCounts.Load(path); ok {
		return v.(*atomic.Uint64).Load()
	}
	return 0
}

func (c *Cluster) countREST(path string) {
	v, ok := c.restCounts.Load(path)
	if !ok {
		v, _ = c.restCounts.LoadOrStore(path, new(atomic.Uint64))
	}
	v.(*atomic.Uint64).Add(1)
}

// DropConnections closes every client connection on every node; the nodes
// keep listening. When it returns, the closed connections apply nothing
// more.
func (c *Cluster) DropConnections() {
	for _, n := range c.Nodes() {
		n.DropConnections()
	}
}
