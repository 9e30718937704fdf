package vbmap

import (
	"net"
	"slices"
	"strconv"
)

// Locator says how a config places keys on servers.
type Locator int

const (
	// LocatorNone: a global (bucketless) config. It lists the cluster's
	// nodes and routes nothing.
	LocatorNone Locator = iota
	// LocatorVbucket: a couchbase or ephemeral bucket; keys hash to vbuckets
	// (VbucketForKey) and the vbucket map names each vbucket's servers.
	LocatorVbucket
	// LocatorKetama: a memcached bucket; keys go to servers on a Ketama ring.
	LocatorKetama
)

func (l Locator) String() string {
	switch l {
	case LocatorNone:
		return "none"
	case LocatorVbucket:
		return "vbucket"
	case LocatorKetama:
		return "ketama"
	}
	return "Locator(" + strconv.Itoa(int(l)) + ")"
}

// Network names. Any other name is an alternate-address network as the config
// spells it under nodesExt[].alternateAddresses.
const (
	NetworkDefault  = "default"
	NetworkExternal = "external"
)

// Ports are a node's service ports on one network. 0 means the service is not
// offered there.
type Ports struct {
	KV      int // "kv" (nodes[].ports.direct in configs without nodesExt)
	KVTLS   int // "kvSSL"
	Mgmt    int // "mgmt" (the port of nodes[].hostname without nodesExt)
	MgmtTLS int // "mgmtSSL" ("httpsMgmt" without nodesExt)
}

// Alternate is a node's address on an alternate network.
type Alternate struct {
	Network  string // "external", or whatever name the config uses
	Hostname string // IPv6 literals without brackets
	// Ports are the alternate's own ports when the config lists any for it;
	// otherwise a copy of the node's default ports. When the config lists
	// some ports, services it does not list are NOT reachable on that network
	// (the default ports are not used for them).
	Ports Ports
}

// Node is one cluster node as a config describes it.
type Node struct {
	// Hostname on the default network. "$HOST" and a missing nodesExt
	// hostname are replaced by the host the config came from. IPv6 literals
	// have no brackets.
	Hostname string
	Ports    Ports
	// Alternates are the node's addresses on other networks, sorted by
	// Network.
	Alternates []Alternate
	// ThisNode is true for the node that served the config.
	ThisNode    bool
	ServerGroup string // nodesExt[].serverGroup (Server 7.6.2+), or ""
	UUID        string // nodesExt[].nodeUUID, or ""
}

// KVAddr returns the node's KV address ("host:port", IPv6 in brackets) on a
// network ("" means "default"), with the TLS port when tls is set. ok is false
// when the node has no address on that network or does not offer KV there
// (with or without TLS, as asked).
func (n *Node) KVAddr(network string, tls bool) (addr string, ok bool) {
	return n.addr(network, func(p Ports) int {
		if tls {
			return p.KVTLS
		}
		return p.KV
	})
}

// MgmtAddr returns the node's cluster manager (REST) address ("host:port",
// IPv6 in brackets) on a network ("" means "default"), the HTTPS port
// (mgmtSSL) when tls is set, under the same rules as KVAddr.
func (n *Node) MgmtAddr(network string, tls bool) (addr string, ok bool) {
	return n.addr(network, func(p Ports) int {
		if tls {
			return p.MgmtTLS
		}
		return p.Mgmt
	})
}

// addr is the node's address on network for the port port picks.
func (n *Node) addr(network string, port func(Ports) int) (string, bool) {
	host, ports := n.Hostname, n.Ports
	if network != "" && network != NetworkDefault {
		i := slices.IndexFunc(n.Alternates, func(a Alternate) bool { return a.Network == network })
		if i < 0 {
			return "", false
		}
		host, ports = n.Alternates[i].Hostname, n.Alternates[i].Ports
	}
	p := port(ports)
	if host == "" || p <= 0 {
		return "", false
	}
	return net.JoinHostPort(host, strconv.Itoa(p)), true
}

func (n Node) clone() Node {
	n.Alternates = slices.Clone(n.Alternates)
	return n
}

// Config is one parsed cluster config: an immutable snapshot. Every method is
// safe for concurrent use. Slices and maps a method returns are new copies
// the caller may keep or change; the *Ketama from Ketama is shared and
// immutable. Whoever holds the current config replaces it with a newer one
// (Newer) by a pointer swap.
//
// The server index space: a couchbase bucket's vbucket map names servers by
// their position in vBucketServerMap.serverList; Servers, NumServers,
// ServerKVAddr, VbucketServer and RouteState.Route all use those positions.
// A memcached bucket's positions are those of its Ketama ring (the nodes
// that serve the bucket and have a non-TLS KV port, in config order).
type Config struct {
	version     Version
	hasRevEpoch bool
	locator     Locator
	bucketName  string
	bucketUUID  string
	bucketType  string
	numReplicas int

	nodes      []Node
	servers    []Node       // resolved serverList entries (or ketama servers)
	serverNode []int        // index into nodes of each server, -1 when synthesised from serverList
	serverAddr [][]netAddrs // per server: its KV addresses on each network, default first

	numVbuckets int
	stride      int     // entries per vbucket in cur and fwd: max(numReplicas+1, longest entry)
	cur         []int16 // numVbuckets*stride server indexes, -1 for none
	fwd         []int16 // same shape, nil without a forward map
	ketama      *Ketama

	manifestUID    uint64
	hasManifestUID bool
	bucketCaps     []string
	clusterCaps    map[string][]string
	// clusterName and clusterUUID are the cluster's labels (Server 7.6.4
	// and later), "" when absent.
	clusterName, clusterUUID string
}

// Version returns the config's {revEpoch, rev}.
func (c *Config) Version() Version { return c.version }

// HasRevEpoch reports whether the config carried revEpoch. Without it
// Version's Epoch is 0, while the server that served the config holds it
// at epoch -1, "not set" (kv_engine's ClustermapVersion; ns_server writes
// revEpoch from cluster compatibility 7.0 on): what a client tells that
// server it knows must say -1.
func (c *Config) HasRevEpoch() bool { return c.hasRevEpoch }

// Newer reports whether c is strictly newer than old. A non-nil config is
// newer than nil; nil is never newer than anything.
func (c *Config) Newer(old *Config) bool {
	if c == nil {
		return false
	}
	if old == nil {
		return true
	}
	return c.version.Newer(old.version)
}

// Locator says how the config places keys.
func (c *Config) Locator() Locator { return c.locator }

// BucketName is the bucket's name ("" for a global config).
func (c *Config) BucketName() string { return c.bucketName }

// BucketUUID is the bucket's uuid, or "".
func (c *Config) BucketUUID() string { return c.bucketUUID }

// ClusterName is the cluster's name (clusterName, Server 7.6.4 and
// later), or "".
func (c *Config) ClusterName() string { return c.clusterName }

// ClusterUUID is the cluster's uuid (clusterUUID, Server 7.6.4 and
// later), or "".
func (c *Config) ClusterUUID() string { return c.clusterUUID }

// BucketType is the config's bucketType field as sent ("membase",
// "ephemeral", "memcached"; "" when absent, as before Server 7.1).
func (c *Config) BucketType() string { return c.bucketType }

// NumReplicas is the number of replica copies each vbucket map entry holds
// (vBucketServerMap.numReplicas, or the entry length minus one when the field
// is absent). 0 for memcached buckets and global configs.
func (c *Config) NumReplicas() int { return c.numReplicas }

// NumVbuckets is the length of the vbucket map; 0 when there is none.
func (c *Config) NumVbuckets() int { return c.numVbuckets }

// HasVbucketMap reports whether the config can route by vbucket.
func (c *Config) HasVbucketMap() bool { return c.numVbuckets > 0 }

// HasForwardMap reports whether the config carries a non-empty
// vBucketMapForward (a rebalance is moving vbuckets).
func (c *Config) HasForwardMap() bool { return c.fwd != nil }

// VbucketForKey returns the key's vbucket under this config (see the
// package-level VbucketForKey); 0 when the config has no vbucket map.
func (c *Config) VbucketForKey(key []byte) uint16 {
	return VbucketForKey(key, c.numVbuckets)
}

// VbucketServer returns the server index (see Config) that holds copy replica
// of vbucket vb: replica 0 is the active copy, 1..NumReplicas the replicas.
// forward selects vBucketMapForward instead of vBucketMap. Errors:
// ErrNoVbucketMap, ErrNoForwardMap, ErrVbucketOutOfRange,
// ErrReplicaOutOfRange, ErrNoServer (the map says -1). It takes no lock and
// allocates nothing.
func (c *Config) VbucketServer(vb uint16, replica int, forward bool) (int, error) {
	if c.numVbuckets == 0 {
		return -1, ErrNoVbucketMap
	}
	m := c.cur
	if forward {
		if c.fwd == nil {
			return -1, ErrNoForwardMap
		}
		m = c.fwd
	}
	if int(vb) >= c.numVbuckets {
		return -1, ErrVbucketOutOfRange
	}
	if replica < 0 || replica > c.numReplicas { // numReplicas < stride
		return -1, ErrReplicaOutOfRange
	}
	s := m[int(vb)*c.stride+replica]
	if s < 0 {
		return -1, ErrNoServer
	}
	return int(s), nil
}

// Ketama returns the ring of a memcached bucket, nil for other configs and
// for a memcached bucket none of whose nodes has a non-TLS KV port.
func (c *Config) Ketama() *Ketama { return c.ketama }

// NumServers is the size of the server index space.
func (c *Config) NumServers() int { return len(c.servers) }

// Servers returns the node behind each server index, in a new slice. An entry
// of serverList that matches no node yields a Node with only Hostname and
// Ports.KV, taken from the entry.
func (c *Config) Servers() []Node {
	out := make([]Node, len(c.servers))
	for i := range c.servers {
		out[i] = c.servers[i].clone()
	}
	return out
}

// ServerNode returns the index into Nodes of server i, or -1 when the server
// was synthesised from its serverList entry or i is out of range.
func (c *Config) ServerNode(i int) int {
	if i < 0 || i >= len(c.serverNode) {
		return -1
	}
	return c.serverNode[i]
}

// ServerKVAddr is Servers()[i].KVAddr(network, tls) without the copy: the
// addresses are formatted once, by Parse, and this allocates nothing. ok is
// false when i is out of range.
func (c *Config) ServerKVAddr(i int, network string, tls bool) (addr string, ok bool) {
	if i < 0 || i >= len(c.serverAddr) {
		return "", false
	}
	if network == "" {
		network = NetworkDefault
	}
	for _, a := range c.serverAddr[i] {
		if a.network == network {
			if tls {
				return a.tls, a.tls != ""
			}
			return a.plain, a.plain != ""
		}
	}
	return "", false
}

// netAddrs are one server's formatted KV addresses on one network ("" for
// none).
type netAddrs struct {
	network, plain, tls string
}

func (c *Config) formatServerAddrs() {
	c.serverAddr = make([][]netAddrs, len(c.servers))
	for i := range c.servers {
		n := &c.servers[i]
		nets := make([]netAddrs, 0, 1+len(n.Alternates))
		for _, name := range append([]string{NetworkDefault}, alternateNames(n)...) {
			plain, _ := n.KVAddr(name, false)
			tls, _ := n.KVAddr(name, true)
			nets = append(nets, netAddrs{name, plain, tls})
		}
		c.serverAddr[i] = nets
	}
}

func alternateNames(n *Node) []string {
	names := make([]string, len(n.Alternates))
	for i, a := range n.Alternates {
		names[i] = a.Network
	}
	return names
}

// Nodes returns every node of the config (nodesExt, or nodes when the config
// has no nodesExt), in config order, in a new slice.
func (c *Config) Nodes() []Node {
	out := make([]Node, len(c.nodes))
	for i := range c.nodes {
		out[i] = c.nodes[i].clone()
	}
	return out
}

// CollectionsManifestUID returns the bucket's collections manifest uid
// (collectionsManifestUid, a hex string in the config); ok is false when the
// config has none.
func (c *Config) CollectionsManifestUID() (uid uint64, ok bool) {
	return c.manifestUID, c.hasManifestUID
}

// BucketCapabilities returns bucketCapabilities in a new slice.
func (c *Config) BucketCapabilities() []string { return slices.Clone(c.bucketCaps) }

// HasBucketCapability reports whether bucketCapabilities lists name.
func (c *Config) HasBucketCapability(name string) bool {
	return slices.Contains(c.bucketCaps, name)
}

// ClusterCapabilities returns clusterCapabilities (service -> capabilities)
// as a new map.
func (c *Config) ClusterCapabilities() map[string][]string {
	out := make(map[string][]string, len(c.clusterCaps))
	for k, v := range c.clusterCaps {
		out[k] = slices.Clone(v)
	}
	return out
}

// HasClusterCapability reports whether clusterCapabilities[service] lists
// name.
func (c *Config) HasClusterCapability(service, name string) bool {
	return slices.Contains(c.clusterCaps[service], name)
}

// DetectNetwork chooses the network to connect on for a client that
// bootstrapped against host (a hostname or IP, with or without a port), the
// way other Couchbase SDKs do for network=auto:
//
//   - "default" when host is the default hostname of some node;
//   - otherwise the name of an alternate network for which host is some
//     node's alternate hostname ("external" in practice; the smallest name if
//     several match);
//   - otherwise "default".
func (c *Config) DetectNetwork(host string) string {
	host = normalizeHost(host)
	for i := range c.nodes {
		if sameHost(c.nodes[i].Hostname, host) {
			return NetworkDefault
		}
	}
	best := ""
	for i := range c.nodes {
		for _, a := range c.nodes[i].Alternates {
			if sameHost(a.Hostname, host) && (best == "" || a.Network < best) {
				best = a.Network
			}
		}
	}
	if best == "" {
		return NetworkDefault
	}
	return best
}
