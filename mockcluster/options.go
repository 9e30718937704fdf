package mockcluster

import (
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/kvwire/kvwire/memdx"
)

// Defaults for Options and BucketOptions.
const (
	DefaultNodes       = 3
	DefaultHost        = "127.0.0.1"
	DefaultBucket      = "default"
	DefaultNumVbuckets = 1024
	DefaultNumReplicas = 1
	DefaultUser        = "Administrator"
	DefaultPassword    = "password"
	// DefaultScramIterations is the PBKDF2 iteration count of the users'
	// SCRAM secrets. Couchbase Server uses more; the mock keeps logins cheap.
	DefaultScramIterations = 4096
	// DefaultVersion is what VERSION answers and the nodes' version.
	DefaultVersion = "7.6.4-0000-enterprise"
)

// Options configure a cluster. The zero value gives 3 nodes, a couchbase
// bucket "default" (1024 vbuckets, 1 replica) and the user
// Administrator/password with access to every bucket.
type Options struct {
	// Nodes is the number of nodes to start (DefaultNodes when 0).
	Nodes int
	// Buckets to create; nil creates one bucket named DefaultBucket with
	// default settings.
	Buckets []BucketOptions
	// Users to create; nil creates DefaultUser/DefaultPassword with access to
	// every bucket.
	Users []User
	// Host is the IPv4 address every node listens on (DefaultHost when
	// empty); Addrs and ConnString name it. A test that runs the cluster in
	// a network namespace of its own passes an address that exists there
	// (chaos/netchaos does).
	Host string
	// KVPort, when set, is the KV port of the first node, KVPort+1 of the
	// second, and so on (nodes added later too): a cluster on the
	// standard port 11210 is reached by a connection string that names
	// its hosts without ports, as a DNS SRV test's fallback to a name's
	// address does. 0: ports the system chooses (the other listeners'
	// always are).
	KVPort int
	// TLS adds a TLS KV listener (kvSSL) and an HTTPS REST listener
	// (mgmtSSL) to every node, with a certificate for Host, 127.0.0.1 and
	// localhost signed by a CA generated at start (see Cluster.RootCAs and
	// Cluster.CACertPEM). ConnString then names the TLS ports with
	// "couchbases://", HTTPConnString the HTTPS ones.
	TLS bool
	// Clock is the source of the cluster's time (time.Now when nil); nodes
	// call it from their connection goroutines, so it must be safe for
	// concurrent use. See Clock.
	Clock func() time.Time
	// ConfigHost is the host written into cluster configs. Empty writes the
	// "$HOST" placeholder, which clients replace with the host they fetched
	// the config from (every mock node listens on Host).
	ConfigHost string
	// Version is the server version (DefaultVersion when empty). A
	// version before 7.6 answers UNLOCK_KEY of a document that is not
	// locked TMPFAIL, as kv_engine did before it had NOT_LOCKED; the rest
	// of the mock behaves as 7.6 whatever the version.
	Version string
	// DisabledFeatures are HELLO features the nodes refuse, for testing a
	// client against an older server.
	DisabledFeatures []memdx.HelloFeature
	// NoClusterMapNotifications makes the nodes refuse HELLO's cluster-map
	// change notifications (ClustermapChangeNotification and its Brief
	// form), as older servers do: a client learns of a new config only
	// from NOT_MY_VBUCKET answers and by asking. It adds to DisabledFeatures
	// for callers that do not use the codec's types.
	NoClusterMapNotifications bool
	// NoRevEpoch makes the configs carry no revEpoch, as ns_server's do in
	// a cluster not yet at 7.0 compatibility (a mixed-version one, during
	// an upgrade: ns_server's bucket_info_cache.erl writes revEpoch from
	// 7.0 only), where kv_engine holds them at epoch -1, its "not set"
	// (ClustermapVersion's default, daemon/cluster_config.h; MB-51612).
	// The nodes' config version then has epoch -1: in the notifications'
	// extras and wherever a node compares a client's known version with
	// its own (GET_CLUSTER_CONFIG with a version, the dedupe of
	// NOT_MY_VBUCKET bodies and notifications). A GET_CLUSTER_CONFIG that
	// says it knows epoch 0 is refused (EINVAL), as kv_engine's validator
	// refuses it.
	NoRevEpoch bool
	// SyncWriteDelay, when positive, holds every synchronous (durable) write
	// pending for that long before committing it; meanwhile other mutations
	// of the key answer SYNC_WRITE_IN_PROGRESS. See Cluster.SetSyncWriteDelay.
	SyncWriteDelay time.Duration
	// ScramIterations is the iteration count of the users' SCRAM secrets
	// (DefaultScramIterations when 0).
	ScramIterations int
	// MaxRangeScans bounds the range scans each node holds for each bucket
	// (DefaultMaxRangeScans when 0); a create beyond it answers EBUSY.
	MaxRangeScans int
	// NoRangeScans makes the nodes a server without KV range scans (before
	// 7.2): the bucket configs do not list the rangeScan capability and
	// RANGE_SCAN_* requests answer UNKNOWN_COMMAND.
	NoRangeScans bool
	// RangeScanLifetime is how long a range scan exists after its create
	// before the node cancels it, measured on the cluster's Clock
	// (DefaultRangeScanLifetime when 0).
	RangeScanLifetime time.Duration
	// Logf, when set, receives a line for each connection error the mock
	// sees (malformed input, closed sockets). Nil logs nothing.
	Logf func(format string, args ...any)
}

// BucketType is the kind of a bucket.
type BucketType int

const (
	// CouchbaseBucket is a couchbase ("membase") bucket: vbuckets,
	// replicas, collections, durability, range scans. The default.
	CouchbaseBucket BucketType = iota
	// MemcachedBucket is a memcached bucket, as Couchbase Server serves one
	// with its default_engine: no vbuckets (clients place keys on the
	// nodes with the config's ketama ring), no replicas, the default
	// collection only, no cluster config over KV (clients bootstrap over
	// HTTP). See the package doc for what it refuses.
	MemcachedBucket
)

func (t BucketType) String() string {
	switch t {
	case CouchbaseBucket:
		return "couchbase"
	case MemcachedBucket:
		return "memcached"
	}
	return "BucketType(" + strconv.Itoa(int(t)) + ")"
}

// BucketOptions configure one bucket.
type BucketOptions struct {
	// Name of the bucket (required): at most 100 characters from A-Z a-z
	// 0-9 _ . - %, not starting with a dot, as Couchbase Server allows.
	Name string
	// Type is the bucket's type (CouchbaseBucket when zero).
	Type BucketType
	// NumVbuckets is the number of vbuckets (DefaultNumVbuckets when 0).
	// A memcached bucket has none: leave it 0.
	NumVbuckets int
	// NumReplicas is the number of replicas (DefaultNumReplicas when 0; pass
	// NoReplicas for none). A memcached bucket has none: leave it 0 (or
	// NoReplicas).
	NumReplicas int
}

// NoReplicas as BucketOptions.NumReplicas creates a bucket without replicas.
const NoReplicas = -1

// User is a user of the cluster.
type User struct {
	Name     string
	Password string
	// Buckets the user may select; "*" means every bucket. A user without
	// buckets can authenticate but select none.
	Buckets []string
}

func (o *Options) withDefaults() (Options, error) {
	out := *o
	if out.Nodes == 0 {
		out.Nodes = DefaultNodes
	}
	if out.Host == "" {
		out.Host = DefaultHost
	}
	if ip := net.ParseIP(out.Host); ip == nil || ip.To4() == nil {
		return out, fmt.Errorf("mockcluster: Host %q is not an IPv4 address", out.Host)
	}
	if out.Nodes < 1 || out.Nodes > 64 {
		return out, fmt.Errorf("mockcluster: %d nodes is not in 1..64", out.Nodes)
	}
	if out.KVPort < 0 || out.KVPort+out.Nodes-1 > 65535 {
		return out, fmt.Errorf("mockcluster: KVPort %d for %d nodes is not in 1..65535", out.KVPort, out.Nodes)
	}
	if out.Buckets == nil {
		out.Buckets = []BucketOptions{{Name: DefaultBucket}}
	}
	if out.Users == nil {
		out.Users = []User{{Name: DefaultUser, Password: DefaultPassword, Buckets: []string{"*"}}}
	}
	if out.Version == "" {
		out.Version = DefaultVersion
	}
	if out.ScramIterations == 0 {
		out.ScramIterations = DefaultScramIterations
	}
	return out, nil
}

func (b BucketOptions) withDefaults() (BucketOptions, error) {
	if b.Name == "" {
		return b, fmt.Errorf("mockcluster: a bucket needs a name")
	}
	if len(b.Name) > 100 {
		return b, fmt.Errorf("mockcluster: bucket name %q is longer than 100 bytes", b.Name[:20]+"...")
	}
	if err := validBucketName(b.Name); err != nil {
		return b, err
	}
	switch b.Type {
	case CouchbaseBucket:
	case MemcachedBucket:
		if b.NumVbuckets != 0 {
			return b, fmt.Errorf("mockcluster: bucket %q: a memcached bucket has no vbuckets (NumVbuckets %d)", b.Name, b.NumVbuckets)
		}
		if b.NumReplicas != 0 && b.NumReplicas != NoReplicas {
			return b, fmt.Errorf("mockcluster: bucket %q: a memcached bucket has no replicas (NumReplicas %d)", b.Name, b.NumReplicas)
		}
		b.NumReplicas = 0
		return b, nil
	default:
		return b, fmt.Errorf("mockcluster: bucket %q: unknown bucket type %d", b.Name, int(b.Type))
	}
	if b.NumVbuckets == 0 {
		b.NumVbuckets = DefaultNumVbuckets
	}
	if b.NumVbuckets < 1 || b.NumVbuckets > 65536 {
		return b, fmt.Errorf("mockcluster: bucket %q: %d vbuckets is not in 1..65536", b.Name, b.NumVbuckets)
	}
	switch {
	case b.NumReplicas == 0:
		b.NumReplicas = DefaultNumReplicas
	case b.NumReplicas == NoReplicas:
		b.NumReplicas = 0
	case b.NumReplicas < 0 || b.NumReplicas > 3:
		return b, fmt.Errorf("mockcluster: bucket %q: %d replicas is not in 0..3", b.Name, b.NumReplicas)
	}
	return b, nil
}

// validBucketName refuses the names Couchbase Server refuses to create a
// bucket with (ns_bucket:is_valid_bucket_name): characters other than
// A-Z a-z 0-9 _ . - %, a leading dot, the reserved _users.couch. and
// _replicator.couch. prefixes (in any case).
func validBucketName(name string) error {
	for _, r := range name {
		if !('A' <= r && r <= 'Z' || 'a' <= r && r <= 'z' || '0' <= r && r <= '9' || strings.ContainsRune("_.-%", r)) {
			return fmt.Errorf("mockcluster: bucket name %q: it can only contain A-Z, a-z, 0-9, underscore, period, dash and percent (not %q)", name, r)
		}
	}
	if strings.HasPrefix(name, ".") {
		return fmt.Errorf("mockcluster: bucket name %q: it cannot start with a dot", name)
	}
	if l := strings.ToLower(name); strings.HasPrefix(l, "_users.couch.") || strings.HasPrefix(l, "_replicator.couch.") {
		return fmt.Errorf("mockcluster: bucket name %q is reserved for internal use", name)
	}
	return nil
}

// versionBefore reports whether the server version v ("7.2.4-7070-
// enterprise") is older than major.minor; a version that does not begin
// with two numbers is not.
func versionBefore(v string, major, minor int) bool {
	parts := strings.SplitN(v, ".", 3)
	if len(parts) < 2 {
		return false
	}
	ma, err1 := strconv.Atoi(parts[0])
	mi, err2 := strconv.Atoi(strings.SplitN(parts[1], "-", 2)[0])
	if err1 != nil || err2 != nil {
		return false
	}
	return ma < major || (ma == major && mi < minor)
}
