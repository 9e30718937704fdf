package vbmap

import (
	"encoding/json"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"
)

// Limits that keep a hostile config from costing much memory. Couchbase
// Server allows at most 3 replicas and uses 1024 (or 128, or 64) vbuckets.
const (
	maxReplicas   = 3
	maxVbuckets   = 1 << 16 // vbucket ids are uint16
	maxServerList = 1<<15 - 1
)

const hostPlaceholder = "$HOST"

// MaxConfigSize is the largest config Parse accepts, in bytes: 8 MiB. A
// real bucket config is far smaller (1024 vbuckets with 3 replicas and a
// forward map take about 40 KB of map; each node adds about 0.5 KB with
// alternate addresses, so even a 100-node cluster stays within a few
// hundred KB), while parsing costs about 0.17 us per byte and, depending on
// the content, 6 to 33 bytes of allocation per byte (measured: 0.68 s and
// 24 MB for a 3.9 MB config of many node entries; 129 MB for a 3.9 MB one
// of another shape). The limit leaves more than ten times the largest real
// config as headroom and bounds what one broken or hostile config can cost
// (under 1.5 s and 300 MB). Clients should check it before copying or
// scanning a config they received.
const MaxConfigSize = 8 << 20

type rawConfig struct {
	Rev                    *uint64             `json:"rev"`
	RevEpoch               *int64              `json:"revEpoch"`
	Name                   string              `json:"name"`
	UUID                   string              `json:"uuid"`
	NodeLocator            string              `json:"nodeLocator"`
	BucketType             string              `json:"bucketType"`
	NumVBuckets            *int                `json:"numVBuckets"`
	BucketCapabilities     []string            `json:"bucketCapabilities"`
	CollectionsManifestUID string              `json:"collectionsManifestUid"`
	ClusterCapabilities    map[string][]string `json:"clusterCapabilities"`
	ClusterName            string              `json:"clusterName"`
	ClusterUUID            string              `json:"clusterUUID"`
	Nodes                  []rawNode           `json:"nodes"`
	NodesExt               []rawNodeExt        `json:"nodesExt"`
	VBucketServerMap       *rawServerMap       `json:"vBucketServerMap"`
}

type rawServerMap struct {
	HashAlgorithm     string   `json:"hashAlgorithm"`
	NumReplicas       *int     `json:"numReplicas"`
	ServerList        []string `json:"serverList"`
	VBucketMap        [][]int  `json:"vBucketMap"`
	VBucketMapForward [][]int  `json:"vBucketMapForward"`
}

type rawNode struct {
	Hostname string         `json:"hostname"`
	Ports    map[string]int `json:"ports"`
	ThisNode bool           `json:"thisNode"`
}

type rawNodeExt struct {
	Hostname           string                  `json:"hostname"`
	Services           map[string]int          `json:"services"`
	ThisNode           bool                    `json:"thisNode"`
	ServerGroup        string                  `json:"serverGroup"`
	NodeUUID           string                  `json:"nodeUUID"`
	AlternateAddresses map[string]rawAlternate `json:"alternateAddresses"`
}

type rawAlternate struct {
	Hostname string         `json:"hostname"`
	Ports    map[string]int `json:"ports"`
}

// Parse reads one cluster config, terse (CCCP, NOT_MY_VBUCKET bodies,
// /pools/default/b/<bucket>, clustermap notifications) or verbose
// (/pools/default/buckets/<bucket>), bucket or global. sourceHost is the host
// the config was fetched from (a hostname or IP, brackets and a port are
// accepted and dropped): it replaces "$HOST" and missing nodesExt hostnames.
// data is not retained.
//
// Every error is a *ParseError (errors.Is(err, ErrInvalidConfig)) naming the
// field that was wrong. Data longer than MaxConfigSize is rejected unread. The package doc lists what is rejected and what
// parses into a config that routes nothing.
func Parse(data []byte, sourceHost string) (*Config, error) {
	if len(data) > MaxConfigSize {
		return nil, invalid("json", "the config is %d bytes, over the limit of %d (vbmap.MaxConfigSize)", len(data), MaxConfigSize)
	}
	var raw rawConfig
	if err := json.Unmarshal(data, &raw); err != nil {
		return nil, &ParseError{Field: "json", Reason: err.Error(), Err: err}
	}
	p := parser{src: normalizeHost(sourceHost)}
	return p.config(&raw)
}

type parser struct {
	src string
}

// host substitutes $HOST (and an empty host when emptyIsSource) and strips
// IPv6 brackets.
func (p *parser) host(h, field string, emptyIsSource bool) (string, error) {
	if h == "" && emptyIsSource {
		h = hostPlaceholder
	}
	if strings.Contains(h, hostPlaceholder) {
		if p.src == "" {
			return "", invalid(field, "%q needs the host the config came from, and none was given", h)
		}
		h = strings.ReplaceAll(h, hostPlaceholder, p.src)
	}
	h = stripBrackets(h)
	if h == "" {
		return "", invalid(field, "empty hostname")
	}
	return h, nil
}

func (p *parser) config(raw *rawConfig) (*Config, error) {
	c := &Config{
		bucketName:  raw.Name,
		bucketUUID:  raw.UUID,
		bucketType:  raw.BucketType,
		bucketCaps:  raw.BucketCapabilities,
		clusterName: raw.ClusterName,
		clusterUUID: raw.ClusterUUID,
	}
	if raw.RevEpoch != nil {
		c.version.Epoch, c.hasRevEpoch = *raw.RevEpoch, true
	}
	if raw.Rev != nil {
		c.version.Rev = *raw.Rev
	}
	if len(raw.ClusterCapabilities) > 0 {
		c.clusterCaps = raw.ClusterCapabilities
	}
	if s := raw.CollectionsManifestUID; s != "" {
		uid, err := strconv.ParseUint(s, 16, 64)
		if err != nil {
			return nil, &ParseError{Field: "collectionsManifestUid", Reason: strconv.Quote(s) + " is not a hex uint64", Err: err}
		}
		c.manifestUID, c.hasManifestUID = uid, true
	}

	switch raw.NodeLocator {
	case "vbucket":
		c.locator = LocatorVbucket
	case "ketama":
		c.locator = LocatorKetama
	case "":
		switch {
		case raw.VBucketServerMap != nil:
			c.locator = LocatorVbucket
		case raw.BucketType == "memcached":
			c.locator = LocatorKetama
		case raw.Name == "":
			c.locator = LocatorNone
		default:
			return nil, invalid("nodeLocator", "bucket %q has no nodeLocator and no vBucketServerMap", raw.Name)
		}
	default:
		return nil, invalid("nodeLocator", "unknown locator %q", raw.NodeLocator)
	}

	fromExt := len(raw.NodesExt) > 0
	var err error
	if fromExt {
		c.nodes, err = p.nodesExt(raw.NodesExt)
	} else {
		c.nodes, err = p.nodesVerbose(raw.Nodes)
	}
	if err != nil {
		return nil, err
	}

	switch c.locator {
	case LocatorNone:
		if len(c.nodes) == 0 {
			return nil, invalid("nodesExt", "global config lists no nodes")
		}
	case LocatorKetama:
		if err := p.ketama(c, raw, fromExt); err != nil {
			return nil, err
		}
	case LocatorVbucket:
		if raw.VBucketServerMap == nil {
			return nil, invalid("vBucketServerMap", "missing from a %q bucket config", raw.NodeLocator)
		}
		if err := p.vbuckets(c, raw, fromExt); err != nil {
			return nil, err
		}
	}
	c.formatServerAddrs()
	return c, nil
}

// checkPorts validates the ports kvwire reads (nodesExt services and
// alternate ports; "direct" and "httpsMgmt" of verbose nodes) and returns
// the nodesExt ones.
func checkPorts(m map[string]int, field string) (Ports, error) {
	for _, k := range []string{"kv", "kvSSL", "mgmt", "mgmtSSL", "direct", "httpsMgmt"} {
		if v, ok := m[k]; ok && (v < 0 || v > 65535) {
			return Ports{}, invalid(field+"."+k, "port %d out of range", v)
		}
	}
	return Ports{KV: m["kv"], KVTLS: m["kvSSL"], Mgmt: m["mgmt"], MgmtTLS: m["mgmtSSL"]}, nil
}

func (p *parser) nodesExt(raw []rawNodeExt) ([]Node, error) {
	nodes := make([]Node, len(raw))
	for i := range raw {
		r := &raw[i]
		field := "nodesExt[" + strconv.Itoa(i) + "]"
		h, err := p.host(r.Hostname, field+".hostname", true)
		if err != nil {
			return nil, err
		}
		ports, err := checkPorts(r.Services, field+".services")
		if err != nil {
			return nil, err
		}
		n := Node{Hostname: h, Ports: ports, ThisNode: r.ThisNode, ServerGroup: r.ServerGroup, UUID: r.NodeUUID}
		names := make([]string, 0, len(r.AlternateAddresses))
		for name := range r.AlternateAddresses {
			names = append(names, name)
		}
		slices.Sort(names)
		for _, name := range names {
			a := r.AlternateAddresses[name]
			af := field + ".alternateAddresses." + name
			if name == "" || name == NetworkDefault {
				return nil, invalid(af, "alternate network may not be named %q", name)
			}
			ah, err := p.host(a.Hostname, af+".hostname", false)
			if err != nil {
				return nil, err
			}
			ap := ports
			if len(a.Ports) > 0 {
				if ap, err = checkPorts(a.Ports, af+".ports"); err != nil {
					return nil, err
				}
			}
			n.Alternates = append(n.Alternates, Alternate{Network: name, Hostname: ah, Ports: ap})
		}
		nodes[i] = n
	}
	return nodes, nil
}

func (p *parser) nodesVerbose(raw []rawNode) ([]Node, error) {
	nodes := make([]Node, len(raw))
	for i := range raw {
		r := &raw[i]
		field := "nodes[" + strconv.Itoa(i) + "]"
		h, port := splitHostMaybePort(r.Hostname)
		mgmt := 0
		if port != "" {
			v, err := strconv.Atoi(port)
			if err != nil || v < 0 || v > 65535 {
				return nil, invalid(field+".hostname", "bad port in %q", r.Hostname)
			}
			mgmt = v
		}
		h, err := p.host(h, field+".hostname", false)
		if err != nil {
			return nil, err
		}
		if _, err := checkPorts(r.Ports, field+".ports"); err != nil {
			return nil, err
		}
		nodes[i] = Node{
			Hostname: h,
			Ports:    Ports{KV: r.Ports["direct"], Mgmt: mgmt, MgmtTLS: r.Ports["httpsMgmt"]},
			ThisNode: r.ThisNode,
		}
	}
	return nodes, nil
}

// ketama builds a memcached bucket's ring from the nodes that serve the
// bucket: nodesExt lists them first, in the order of nodes, so the first
// len(nodes) entries of nodesExt are taken (a node in nodesExt but not in
// nodes is not ready for the bucket). Nodes without a non-TLS KV port on the
// default network cannot be placed on the ring and are left out.
func (p *parser) ketama(c *Config, raw *rawConfig, fromExt bool) error {
	candidates := len(c.nodes)
	if fromExt && len(raw.Nodes) > 0 && len(raw.Nodes) < candidates {
		candidates = len(raw.Nodes)
	}
	var auth []string
	seen := make(map[string]int, candidates)
	for i := 0; i < candidates; i++ {
		n := &c.nodes[i]
		if n.Ports.KV <= 0 {
			continue
		}
		a := net.JoinHostPort(n.Hostname, strconv.Itoa(n.Ports.KV))
		if j, dup := seen[a]; dup {
			field := "nodes[" + strconv.Itoa(i) + "].ports.direct"
			if fromExt {
				field = "nodesExt[" + strconv.Itoa(i) + "].services.kv"
			}
			return invalid(field, "ketama server %s is node %d's too: the ring would place no key on one of them", a, j)
		}
		seen[a] = i
		c.servers = append(c.servers, n.clone())
		c.serverNode = append(c.serverNode, i)
		auth = append(auth, a)
	}
	if len(auth) > 0 {
		k, err := NewKetama(auth)
		if err != nil {
			return err
		}
		c.ketama = k
	}
	return nil
}

func (p *parser) vbuckets(c *Config, raw *rawConfig, fromExt bool) error {
	vs := raw.VBucketServerMap
	const f = "vBucketServerMap"
	if vs.HashAlgorithm != "" && !strings.EqualFold(vs.HashAlgorithm, "CRC") {
		return invalid(f+".hashAlgorithm", "unsupported hash algorithm %q (only CRC)", vs.HashAlgorithm)
	}
	if len(vs.ServerList) > maxServerList {
		return invalid(f+".serverList", "%d entries; at most %d supported", len(vs.ServerList), maxServerList)
	}
	if len(vs.VBucketMap) > maxVbuckets {
		return invalid(f+".vBucketMap", "%d entries; at most %d vbuckets exist", len(vs.VBucketMap), maxVbuckets)
	}
	declared := -1
	if vs.NumReplicas != nil {
		declared = *vs.NumReplicas
		if declared < 0 || declared > maxReplicas {
			return invalid(f+".numReplicas", "%d is not in 0..%d", declared, maxReplicas)
		}
	}

	if err := p.serverList(c, vs.ServerList, fromExt); err != nil {
		return err
	}

	n := len(vs.VBucketMap)
	if n == 0 {
		if len(vs.VBucketMapForward) > 0 {
			return invalid(f+".vBucketMapForward", "%d entries but vBucketMap is empty", len(vs.VBucketMapForward))
		}
		if len(vs.ServerList) > 0 {
			return invalid(f+".vBucketMap", "empty, but serverList names %d servers", len(vs.ServerList))
		}
		// No partitions yet: the config parses and routes nothing.
		if declared >= 0 {
			c.numReplicas = declared
		}
		return nil
	}
	if raw.NumVBuckets != nil && *raw.NumVBuckets != n {
		return invalid("numVBuckets", "%d, but vBucketMap has %d entries", *raw.NumVBuckets, n)
	}
	if len(vs.VBucketMapForward) > 0 && len(vs.VBucketMapForward) != n {
		return invalid(f+".vBucketMapForward", "%d entries, vBucketMap has %d", len(vs.VBucketMapForward), n)
	}

	longest := 0
	for _, m := range [][][]int{vs.VBucketMap, vs.VBucketMapForward} {
		for _, e := range m {
			longest = max(longest, len(e))
		}
	}
	stride := max(longest, declared+1)
	if stride > maxReplicas+1 {
		return invalid(f+".vBucketMap", "entries of %d servers; at most %d (1 active, %d replicas)", stride, maxReplicas+1, maxReplicas)
	}
	c.numVbuckets = n
	c.stride = stride
	c.numReplicas = declared
	if declared < 0 {
		c.numReplicas = stride - 1
	}
	var err error
	if c.cur, err = flatten(vs.VBucketMap, stride, len(vs.ServerList), f+".vBucketMap"); err != nil {
		return err
	}
	if len(vs.VBucketMapForward) > 0 {
		if c.fwd, err = flatten(vs.VBucketMapForward, stride, len(vs.ServerList), f+".vBucketMapForward"); err != nil {
			return err
		}
	}
	return nil
}

// serverList resolves each vBucketServerMap.serverList entry to a node
// (matchServer), making the config's server index space.
func (p *parser) serverList(c *Config, list []string, fromExt bool) error {
	c.servers = make([]Node, len(list))
	c.serverNode = make([]int, len(list))
	for i, s := range list {
		field := "vBucketServerMap.serverList[" + strconv.Itoa(i) + "]"
		h, ps, err := net.SplitHostPort(s)
		if err != nil {
			return &ParseError{Field: field, Reason: strconv.Quote(s) + " is not host:port", Err: err}
		}
		port, err := strconv.Atoi(ps)
		if err != nil || port < 0 || port > 65535 {
			return invalid(field, "bad port in %q", s)
		}
		if h, err = p.host(h, field, false); err != nil {
			return err
		}
		j := matchServer(c.nodes, i, h, port, fromExt)
		c.serverNode[i] = j
		if j >= 0 {
			c.servers[i] = c.nodes[j].clone()
		} else {
			c.servers[i] = Node{Hostname: h, Ports: Ports{KV: port}}
		}
	}
	return nil
}

// flatten checks a vbucket map and lays it out as n*stride int16s, padding
// short entries with -1.
func flatten(m [][]int, stride, servers int, field string) ([]int16, error) {
	out := make([]int16, len(m)*stride)
	for vb, e := range m {
		if len(e) == 0 {
			return nil, invalid(field+"["+strconv.Itoa(vb)+"]", "empty entry")
		}
		base := vb * stride
		for r := 0; r < stride; r++ {
			if r >= len(e) {
				out[base+r] = -1
				continue
			}
			s := e[r]
			if s < -1 || s >= servers {
				return nil, invalid(field+"["+strconv.Itoa(vb)+"]["+strconv.Itoa(r)+"]",
					"server index %d; serverList has %d entries", s, servers)
			}
			out[base+r] = int16(s)
		}
	}
	return out, nil
}

// matchServer finds the node behind serverList[i] = host:port.
//
//  1. The node whose default hostname is host and whose non-TLS KV port is
//     port (port 0 never matches: TLS-only clusters list ":0").
//  2. With nodesExt, the node at the same position, if it offers KV (with or
//     without TLS): the server lists the bucket's nodes first in nodesExt, in
//     serverList order. This covers TLS-only configs (serverList ports are
//     0, hostnames may repeat) and nodesExt entries without a hostname.
//  3. Otherwise none (-1): the caller uses host:port itself, with no TLS port
//     and no alternate addresses.
func matchServer(nodes []Node, i int, host string, port int, fromExt bool) int {
	if port > 0 {
		for j := range nodes {
			if nodes[j].Ports.KV == port && sameHost(nodes[j].Hostname, host) {
				return j
			}
		}
	}
	if fromExt && i < len(nodes) && (nodes[i].Ports.KV > 0 || nodes[i].Ports.KVTLS > 0) {
		return i
	}
	return -1
}

// splitHostMaybePort splits "host:port", "[v6]:port", "host", "[v6]" and a
// bare IPv6 literal; port is "" when there is none.
func splitHostMaybePort(s string) (host, port string) {
	if h, p, err := net.SplitHostPort(s); err == nil {
		return h, p
	}
	return stripBrackets(s), ""
}

func stripBrackets(h string) string {
	if len(h) >= 2 && h[0] == '[' && h[len(h)-1] == ']' {
		return h[1 : len(h)-1]
	}
	return h
}

// normalizeHost drops a port and IPv6 brackets.
func normalizeHost(h string) string {
	host, _ := splitHostMaybePort(h)
	return host
}

// sameHost compares two hosts: as IP addresses when both are IP literals
// (so "::1" and "0:0::1" match), otherwise as case-insensitive names.
func sameHost(a, b string) bool {
	if a == b {
		return true
	}
	if x, err := netip.ParseAddr(a); err == nil {
		if y, err := netip.ParseAddr(b); err == nil {
			return x == y
		}
		return false
	}
	return strings.EqualFold(a, b)
}
