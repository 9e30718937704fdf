package mockcluster

import (
	"encoding/json"
	"net"
	"net/url"
	"slices"
	"strconv"
)

// The terse config JSON, field for field in the order Couchbase Server 7.6
// writes it (see the package doc for what the mock leaves out). The URIs it
// names escape the bucket name as a path segment, as ns_server's
// bucket_info_cache:build_pools_uri does ('%' is valid in a bucket name).

type cfgNodeJSON struct {
	Hostname string         `json:"hostname"`
	Ports    map[string]int `json:"ports"`
}

type cfgNodeExtJSON struct {
	Services map[string]int `json:"services"`
	ThisNode bool           `json:"thisNode,omitempty"`
	Hostname string         `json:"hostname,omitempty"`
}

type vbServerMapJSON struct {
	HashAlgorithm     string   `json:"hashAlgorithm"`
	NumReplicas       int      `json:"numReplicas"`
	ServerList        []string `json:"serverList"`
	VBucketMap        [][]int  `json:"vBucketMap"`
	VBucketMapForward [][]int  `json:"vBucketMapForward,omitempty"`
}

type bucketConfigJSON struct {
	Rev                    int64               `json:"rev"`
	RevEpoch               *int64              `json:"revEpoch,omitempty"`
	Name                   string              `json:"name"`
	NodeLocator            string              `json:"nodeLocator"`
	BucketType             string              `json:"bucketType"`
	StorageBackend         string              `json:"storageBackend"`
	UUID                   string              `json:"uuid"`
	URI                    string              `json:"uri"`
	StreamingURI           string              `json:"streamingUri"`
	NumVBuckets            int                 `json:"numVBuckets"`
	BucketCapabilitiesVer  string              `json:"bucketCapabilitiesVer"`
	BucketCapabilities     []string            `json:"bucketCapabilities"`
	CollectionsManifestUID string              `json:"collectionsManifestUid"`
	VBucketServerMap       vbServerMapJSON     `json:"vBucketServerMap"`
	Nodes                  []cfgNodeJSON       `json:"nodes"`
	NodesExt               []cfgNodeExtJSON    `json:"nodesExt"`
	ClusterCapabilitiesVer []int               `json:"clusterCapabilitiesVer"`
	ClusterCapabilities    map[string][]string `json:"clusterCapabilities"`
	ClusterUUID            string              `json:"clusterUUID"`
	ClusterName            string              `json:"clusterName"`
}

// memcachedConfigJSON is a memcached bucket's terse config, field for
// field in the order a 7.6 server writes one: no vBucketServerMap, no
// collections manifest, nodeLocator "ketama".
type memcachedConfigJSON struct {
	Rev                    int64               `json:"rev"`
	RevEpoch               *int64              `json:"revEpoch,omitempty"`
	Name                   string              `json:"name"`
	NodeLocator            string              `json:"nodeLocator"`
	BucketType             string              `json:"bucketType"`
	UUID                   string              `json:"uuid"`
	URI                    string              `json:"uri"`
	StreamingURI           string              `json:"streamingUri"`
	BucketCapabilitiesVer  string              `json:"bucketCapabilitiesVer"`
	BucketCapabilities     []string            `json:"bucketCapabilities"`
	Nodes                  []cfgNodeJSON       `json:"nodes"`
	NodesExt               []cfgNodeExtJSON    `json:"nodesExt"`
	ClusterCapabilitiesVer []int               `json:"clusterCapabilitiesVer"`
	ClusterCapabilities    map[string][]string `json:"clusterCapabilities"`
	ClusterUUID            string              `json:"clusterUUID"`
	ClusterName            string              `json:"clusterName"`
}

// memcachedBucketCapabilities are what a 7.6 memcached bucket advertises.
var memcachedBucketCapabilities = []string{"cbhello", "nodesExt"}

type globalConfigJSON struct {
	Rev                    int64               `json:"rev"`
	RevEpoch               *int64              `json:"revEpoch,omitempty"`
	NodesExt               []cfgNodeExtJSON    `json:"nodesExt"`
	ClusterCapabilitiesVer []int               `json:"clusterCapabilitiesVer"`
	ClusterCapabilities    map[string][]string `json:"clusterCapabilities"`
	ClusterUUID            string              `json:"clusterUUID"`
	ClusterName            string              `json:"clusterName"`
}

// bucketCapabilities are the capabilities a 7.6 couchbase bucket advertises
// that the mock implements (subdoc.ReplicaRead: a SUBDOC_MULTI_LOOKUP with
// the ReplicaRead doc flag runs on a replica node). A 7.6 bucket also lists
// dcp, among others; the mock has no DCP, and a client that believed it
// would try a feature that then fails, so it is left out.
var bucketCapabilities = []string{
	"collections", "durableWrite", "preserveExpiry", "cbhello", "touch",
	"cccp", "nodesExt", "xattr", "tombstonedUserXAttrs", "subdoc.ReplaceBodyWithXattr",
	"subdoc.DocumentMacroSupport", "subdoc.ReviveDocument", "subdoc.ReplicaRead", "rangeScan",
}

// bucketCapabilities are the capabilities the cluster's bucket configs
// list: all of bucketCapabilities but rangeScan with Options.NoRangeScans.
func (c *Cluster) bucketCapabilities() []string {
	if !c.opts.NoRangeScans {
		return bucketCapabilities
	}
	return slices.DeleteFunc(slices.Clone(bucketCapabilities), func(s string) bool { return s == "rangeScan" })
}

// configHost is the host the configs name: "$HOST" unless
// Options.ConfigHost is set.
func (c *Cluster) configHost() string {
	if c.opts.ConfigHost != "" {
		return c.opts.ConfigHost
	}
	return "$HOST"
}

func (c *Cluster) hostPort(port int) string {
	h := c.configHost()
	if h == "$HOST" {
		return h + ":" + strconv.Itoa(port)
	}
	return net.JoinHostPort(h, strconv.Itoa(port))
}

// nodeExt renders one nodesExt entry. c.mu must be held.
func (c *Cluster) nodeExt(n *Node, thisNode int) cfgNodeExtJSON {
	svc := map[string]int{"kv": n.kvPort, "mgmt": n.mgmtPortNamed()}
	if n.tlsPort != 0 {
		svc["kvSSL"] = n.tlsPort
	}
	if n.mgmtTLSPort != 0 {
		svc["mgmtSSL"] = n.mgmtTLSPort
	}
	e := cfgNodeExtJSON{Services: svc, ThisNode: n.id == thisNode}
	// With the placeholder, the server writes no hostname in nodesExt: the
	// client uses the host it fetched the config from.
	if h := c.configHost(); h != "$HOST" {
		e.Hostname = h
	}
	return e
}

// clusterNodesLocked returns the nodes that are members of the cluster (not
// removed, not failed over), by id. c.mu must be held.
func (c *Cluster) clusterNodesLocked() []*Node {
	var out []*Node
	for _, n := range c.nodes {
		if n != nil && !n.failedOver {
			out = append(out, n)
		}
	}
	return out
}

// renderBucketConfig renders the bucket's config as node thisNode serves it.
// c.mu must be held.
func (c *Cluster) renderBucketConfig(b *Bucket, s *bucketSnap, thisNode int) []byte {
	if b.memcached() {
		return c.renderMemcachedConfig(b, s, thisNode)
	}
	idx := make(map[int]int, len(s.servers))
	cfg := bucketConfigJSON{
		Rev: s.rev, RevEpoch: revEpoch(s.epoch), Name: b.name, NodeLocator: "vbucket", BucketType: "membase",
		StorageBackend: "magma", UUID: b.uuid,
		URI:                    "/pools/default/buckets/" + url.PathEscape(b.name) + "?bucket_uuid=" + b.uuid,
		StreamingURI:           "/pools/default/bucketsStreaming/" + url.PathEscape(b.name) + "?bucket_uuid=" + b.uuid,
		NumVBuckets:            b.numVbs,
		BucketCapabilities:     c.bucketCapabilities(),
		CollectionsManifestUID: uidString(s.manifest.uid),
		ClusterCapabilitiesVer: []int{1, 0},
		ClusterCapabilities:    map[string][]string{},
		ClusterUUID:            c.uuid,
		ClusterName:            c.name,
	}
	cfg.VBucketServerMap = vbServerMapJSON{HashAlgorithm: "CRC", NumReplicas: b.numReplicas,
		ServerList: make([]string, 0, len(s.servers))}
	for i, id := range s.servers {
		idx[id] = i
		cfg.VBucketServerMap.ServerList = append(cfg.VBucketServerMap.ServerList, c.hostPort(c.nodes[id].kvPort))
	}
	// Cluster members that hold no part of the bucket follow the bucket's
	// servers in nodesExt, so that nodesExt[i] and serverList[i] name the
	// same node.
	cfg.Nodes, cfg.NodesExt = c.renderNodesLocked(s.servers, thisNode)
	toIdx := func(chains [][]int) [][]int {
		out := make([][]int, len(chains))
		flat := make([]int, 0, len(chains)*(b.numReplicas+1))
		for vb, ch := range chains {
			start := len(flat)
			for _, id := range ch {
				if i, ok := idx[id]; ok && id >= 0 {
					flat = append(flat, i)
				} else {
					flat = append(flat, -1)
				}
			}
			out[vb] = flat[start:len(flat):len(flat)]
		}
		return out
	}
	cfg.VBucketServerMap.VBucketMap = toIdx(s.chains)
	if s.fwd != nil {
		cfg.VBucketServerMap.VBucketMapForward = toIdx(s.fwd)
	}
	out, err := json.Marshal(&cfg)
	if err != nil {
		panic("mockcluster: bucket config does not marshal: " + err.Error())
	}
	return out
}

// renderMemcachedConfig renders a memcached bucket's config as node
// thisNode serves it: nodes lists the bucket's servers, nodesExt those
// first (in the same order) and then the other cluster members. c.mu must
// be held.
func (c *Cluster) renderMemcachedConfig(b *Bucket, s *bucketSnap, thisNode int) []byte {
	cfg := memcachedConfigJSON{
		Rev: s.rev, RevEpoch: revEpoch(s.epoch), Name: b.name, NodeLocator: "ketama", BucketType: "memcached",
		UUID:                   b.uuid,
		URI:                    "/pools/default/buckets/" + url.PathEscape(b.name) + "?bucket_uuid=" + b.uuid,
		StreamingURI:           "/pools/default/bucketsStreaming/" + url.PathEscape(b.name) + "?bucket_uuid=" + b.uuid,
		BucketCapabilities:     memcachedBucketCapabilities,
		ClusterCapabilitiesVer: []int{1, 0},
		ClusterCapabilities:    map[string][]string{},
		ClusterUUID:            c.uuid,
		ClusterName:            c.name,
	}
	cfg.Nodes, cfg.NodesExt = c.renderNodesLocked(s.servers, thisNode)
	out, err := json.Marshal(&cfg)
	if err != nil {
		panic("mockcluster: memcached bucket config does not marshal: " + err.Error())
	}
	return out
}

// renderNodesLocked renders nodes (the bucket's servers) and nodesExt (the
// servers first, in the same order, so that nodesExt[i] and nodes[i] name
// the same node, then the other cluster members). c.mu must be held.
func (c *Cluster) renderNodesLocked(servers []int, thisNode int) ([]cfgNodeJSON, []cfgNodeExtJSON) {
	nodes := make([]cfgNodeJSON, 0, len(servers))
	ext := make([]cfgNodeExtJSON, 0, len(servers))
	for _, id := range servers {
		n := c.nodes[id]
		nodes = append(nodes, cfgNodeJSON{Hostname: c.hostPort(n.mgmtPortNamed()), Ports: map[string]int{"direct": n.kvPort}})
		ext = append(ext, c.nodeExt(n, thisNode))
	}
	for _, n := range c.clusterNodesLocked() {
		if !slices.Contains(servers, n.id) {
			ext = append(ext, c.nodeExt(n, thisNode))
		}
	}
	return nodes, ext
}

// revEpoch is the revEpoch a config of epoch e carries: none while the
// epoch is not set (-1, Options.NoRevEpoch).
func revEpoch(e int64) *int64 {
	if e < 0 {
		return nil
	}
	return &e
}

// renderGlobalConfig renders the cluster (bucketless) config. c.mu must be
// held.
func (c *Cluster) renderGlobalConfig(rev int64, thisNode int) []byte {
	cfg := globalConfigJSON{Rev: rev, RevEpoch: revEpoch(c.epoch), ClusterCapabilitiesVer: []int{1, 0},
		ClusterCapabilities: map[string][]string{}, ClusterUUID: c.uuid, ClusterName: c.name}
	for _, n := range c.clusterNodesLocked() {
		cfg.NodesExt = append(cfg.NodesExt, c.nodeExt(n, thisNode))
	}
	out, err := json.Marshal(&cfg)
	if err != nil {
		panic("mockcluster: global config does not marshal: " + err.Error())
	}
	return out
}
