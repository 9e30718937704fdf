// Package vbmap parses Couchbase cluster configs and routes keys with them:
// CRC32 vbucket hashing, the current and forward vbucket maps (RFC 0005),
// replicas by index, and Ketama for memcached buckets and plain memcached
// server lists. It does no I/O and starts no goroutines.
//
// # Snapshots
//
// Parse returns a *Config that is never modified afterwards. Whoever keeps
// the current one (the client, per bucket) keeps it behind an
// atomic.Pointer: a newer config (Config.Newer: epoch, then rev) is a
// pointer swap, never a move backwards, and readers take no lock. Routing
// (RouteState.Route, Config.VbucketServer, Ketama.Server, VbucketForKey)
// takes no lock and allocates nothing.
//
// # What Parse accepts
//
// Terse configs (CCCP, NOT_MY_VBUCKET bodies, clustermap notifications,
// /pools/default/b/<bucket>) and verbose ones (/pools/default/buckets/<bucket>)
// have the same routing fields and are parsed alike:
//
//   - rev (uint64, up to 2^64-1; missing = 0) and revEpoch (int64; missing =
//     0, which Config.HasRevEpoch tells apart) form the Version; configs
//     order by epoch, then rev.
//   - Nodes come from nodesExt when present (services.kv, kvSSL, mgmt,
//     mgmtSSL, alternateAddresses, thisNode, serverGroup, nodeUUID), else
//     from nodes (hostname "host:8091", ports.direct, ports.httpsMgmt).
//   - "$HOST" anywhere in a hostname, and a nodesExt entry with no hostname,
//     mean the host the config came from (Parse's sourceHost, which may be an
//     IPv6 literal). IPv6 hosts are stored without brackets; addresses are
//     built with net.JoinHostPort.
//   - vBucketServerMap.serverList is the index space of vBucketMap and
//     vBucketMapForward. Each entry is matched to a node: by hostname and
//     non-TLS KV port; failing that (TLS-only clusters list port 0, nodesExt
//     may omit the hostname) by position, because the server lists the
//     bucket's nodes first in nodesExt in serverList order; failing that the
//     entry's own host:port is used (no TLS port, no alternates).
//   - A memcached bucket (nodeLocator "ketama") routes over the nodes that
//     serve the bucket: the first len(nodes) entries of nodesExt (a node in
//     nodesExt but not yet in nodes is left out, as gocbcore and the Java SDK
//     do), those with a non-TLS KV port on the default network. The ring
//     hashes "host:port" of that port, whatever network or TLS setting the
//     client connects with, with IPv6 hosts in brackets (libcouchbase's
//     form, SDK RFC 26's; the Java SDK hashes IPv6 hosts without
//     brackets). gocbcore v10.8 hashes "couchbase://host:port" instead
//     (with TLS, "couchbases://" and the TLS port), which places 754 of the
//     corpus's 1024 keys elsewhere, and takes the ring's server index (into
//     the names sorted) as an index into the servers in config order (the
//     reftest module checks both against gocbcore); the corpus's gocbcore
//     expectations predate that form. Two nodes with the same "host:port" are rejected:
//     the ring would place no key on one of them.
//   - A global (bucketless) config has no vBucketServerMap: it parses, lists
//     the nodes and routes nothing (ErrNoVbucketMap).
//
// Parse rejects, with a *ParseError naming the field:
//
//   - more than MaxConfigSize (8 MiB) bytes, before reading any of them;
//   - bytes that are not one JSON object of the right shape: a whole HTTP
//     stream of several configs, each ended by "\n\n\n\n", is rejected (this
//     package does not read HTTP streams); so are rev < 0 or > 2^64-1 and
//     non-integer ports or map entries;
//   - an unknown nodeLocator; a named bucket with neither nodeLocator nor
//     vBucketServerMap (unless bucketType is "memcached"); a vbucket bucket
//     without vBucketServerMap; a global config without nodes;
//   - a hashAlgorithm other than CRC; a serverList entry that is not
//     host:port, or more than 32767 of them; numReplicas outside 0..3;
//   - an empty vBucketMap while serverList names servers; more than 65536
//     vbuckets; an empty map entry, or one longer than 4 (1 active and 3
//     replicas); an entry below -1 or not below len(serverList); a
//     non-empty vBucketMapForward whose length differs from vBucketMap's;
//     numVBuckets disagreeing with the map;
//   - a memcached bucket whose ring would list one "host:port" twice;
//   - a port outside 0..65535; "$HOST" or a missing nodesExt hostname when
//     no sourceHost was given; an alternate address without a hostname or
//     named "default"; a collectionsManifestUid that is not hex.
//
// A bucket config whose serverList and vBucketMap are both empty (the bucket
// has no partitions yet) parses into a config that routes nothing
// (ErrNoVbucketMap), as the Java SDK handles it gracefully; an empty
// vBucketMap with servers listed is rejected, as libcouchbase rejects it.
// An empty vBucketMapForward means no forward map. Map entries shorter than
// the longest entry (or numReplicas+1) are padded with -1.
//
// Per conformance file, TestConformanceConfigs states the outcome: every
// file of the corpus parses except cb_terse_empty_vbmap_invalid.json
// (rejected at vBucketServerMap.vBucketMap) and
// http_terse_streaming_two_configs.txt (rejected at "json"; its two configs
// parse once the stream is split); cb_terse_no_partitions_4nodes.json and the
// global_* files parse and route nothing.
//
// # Key to vbucket to server
//
// The vbucket of a key is (crc32.ChecksumIEEE(key) >> 16) & 0x7fff modulo the
// number of vbuckets, where key is the document key WITHOUT its collection-id
// prefix. VbucketServer(vb, replica, forward) reads the current or forward
// map: replica 0 is the active copy, 1..NumReplicas the replicas, -1 in the
// map is ErrNoServer.
//
// # RFC 0005: current map, then forward map
//
// RouteState carries one operation's choice of map across its attempts:
//
//  1. The first attempt, and every attempt until rule 2 applies, is routed
//     by the current map (vBucketMap) of the config it is routed with.
//  2. After an attempt fails with NOT_MY_VBUCKET the caller calls
//     OnNotMyVbucket(c), c being the config the next attempt will use. If c
//     has a forward map the operation moves to the forward map and remembers
//     c's Version; if not, it stays on the current map and simply retries
//     (the retry layer decides when), the NMV kept pending: if the config
//     a later attempt is routed with has a forward map (it arrived between
//     the NMV and the retry), the operation moves to it then.
//  3. On the forward map, every later attempt uses the forward map of the
//     config it is routed with, including a newer config that still has one;
//     further NMVs keep it there.
//  4. It goes back to the current map only when routed with a config that
//     has no forward map and is newer than the remembered one: such a config
//     says the current map is valid again. An older config without a forward
//     map is ErrStaleConfig and changes nothing.
//  5. A config with no vbucket map yields ErrNoVbucketMap and changes
//     nothing; memcached buckets route by Ketama and ignore the state.
//
// The retry layer owns the waits between attempts; this package only says
// which map and server each attempt uses.
//
// # Networks
//
// Node.KVAddr(network, tls) gives a node's KV address on "default" (hostname
// and services) or on an alternate network such as "external"
// (alternateAddresses.<network>.hostname with its own ports; if it lists no
// ports at all, the default ports; if it lists some, only those: a service it
// does not list is not reachable there, as the Java SDK reads it).
// Config.DetectNetwork implements network=auto as other SDKs do: "default"
// when the bootstrap host is a node's default hostname, else an alternate
// network whose hostname matches, else "default".
package vbmap
