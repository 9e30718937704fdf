// Package mockcluster is an in-process Couchbase cluster for tests: every
// node speaks the memcached binary protocol as Couchbase Server 7.6 does,
// closely enough that Couchbase's own Go client (gocbcore v10) works against
// it unchanged (the reftest module proves it). It serves kvwire's tests,
// kvcli serve and kvcli demo, and users' own tests, as miniredis does for
// Redis users.
//
// # Starting a cluster
//
//	c, err := mockcluster.New(mockcluster.Options{})
//	if err != nil { t.Fatal(err) }
//	t.Cleanup(c.Close)
//	connStr := c.ConnString() // "couchbase://127.0.0.1:p1,127.0.0.1:p2,127.0.0.1:p3"
//
// The zero Options give 3 nodes, each listening on 127.0.0.1 (Options.Host
// names another IPv4 address) with a port the OS chose; a couchbase bucket "default" with 1024 vbuckets and 1 replica;
// the user "Administrator"/"password" with access to every bucket; and the
// _default scope and collection, and (Version 7.6 and later, the default)
// the _system scope with its _mobile and _query collections (ids 8 and 9;
// manifest uid 1; a user's scopes are numbered from 9 and collections from
// 10), as the cluster manager makes a couchbase bucket (a memcached
// bucket keeps the epoch manifest, uid 0 and _default alone, as kv_engine's
// default_engine answers); as it does, the mock refuses
// to drop them or to add a collection to _system (ErrInvalid). Options.TLS adds a TLS listener per node
// with a certificate signed by a CA generated at start (Cluster.RootCAs,
// Cluster.CACertPEM); ConnString then says "couchbases://". Buckets, users,
// scopes and collections can be added and removed while the cluster runs.
//
// A bucket is a couchbase bucket unless BucketOptions.Type says
// MemcachedBucket (see "Memcached buckets" below).
//
// # The cluster manager's REST endpoints
//
// Every node also serves the config endpoints of the cluster manager on its
// mgmt port (Node.MgmtAddr, Cluster.MgmtAddrs) and, with Options.TLS, over
// HTTPS on its mgmtSSL port (Node.MgmtTLSAddr, Cluster.MgmtTLSAddrs), the
// ports the configs list as mgmt and mgmtSSL. Cluster.HTTPConnString names
// them in a connection string that bootstraps over HTTP only
// ("couchbase://h:p=http,..."). What they serve, as libcouchbase's and
// gocbcore's HTTP bootstrap ask for it:
//
//	GET /pools                                   the pools list, uuid, version
//	GET /pools/default                           the nodes and the buckets' URI
//	GET /pools/default/nodeServices              the cluster (bucketless) config
//	GET /pools/default/nodeServicesStreaming     the same, streamed
//	GET /pools/default/b/<bucket>                the bucket's terse config ("$HOST")
//	GET /pools/default/bs/<bucket>               the same, streamed
//	GET /pools/default/buckets/<bucket>          the bucket's config, host filled in
//	GET /pools/default/bucketsStreaming/<bucket> the same, streamed
//
// Requests authenticate with HTTP Basic auth as the cluster's users (401
// otherwise); a bucket endpoint needs a user that may use the bucket (403,
// naming the missing permission, as ns_server answers; checked before the
// bucket's existence, 404; 404 too when the request's bucket_uuid, which
// the configs' uri and streamingUri carry, is not the bucket's). A
// streamed endpoint answers with chunked
// transfer encoding: the node's current config, then every newer one as
// soon as it is published (each rebalance start, step and end, failover,
// node added or removed, collection change), each followed by
// "\n\n\n\n", until the client leaves, the node stops or the bucket is
// removed. The verbose endpoints serve the same fields as the terse ones,
// with "$HOST" replaced by the host the request came to (what a server
// writes for nodes known by a loopback address), not the verbose
// statistics.
//
// # Memcached buckets
//
// A bucket with Type MemcachedBucket is served as Couchbase Server serves
// one, whose engine is kv_engine's default_engine (memcached.go names the
// file behind each answer):
//
//   - Its config has nodeLocator "ketama", bucketType "memcached",
//     bucketCapabilities cbhello and nodesExt, nodes (the nodes that serve
//     it) and nodesExt, and no vBucketServerMap. It is served over REST
//     only: GET_CLUSTER_CONFIG on it answers KEY_ENOENT and no cluster-map
//     notification carries it, since ns_server gives kv_engine configs for
//     couchbase buckets only. Clients bootstrap a memcached bucket over
//     HTTP.
//   - Each node keeps the documents clients send it; clients place keys
//     with the config's ketama ring, and so does Bucket.NodeForKey (which
//     Bucket.Get and Bucket.Set use), hashing each node's
//     "Options.Host:kvport" (Options.ConfigHost when set) as libcouchbase
//     does. A node failed over or removed takes its keys with it; a node
//     rebalanced in starts empty. During a rebalance the bucket keeps its
//     nodes (nodesExt lists the new ones); the rebalance's end adds them.
//   - Requests use vbucket 0 (another answers NOT_MY_VBUCKET, as does a
//     node that does not serve the bucket, with no config in the body) and
//     the default collection (a reserved id, 1 to 7, answers EINVAL;
//     another UNKNOWN_COLLECTION against manifest uid 0; scopes and collections cannot be added).
//   - GET, SET, ADD, REPLACE, DELETE, APPEND, PREPEND, INCREMENT,
//     DECREMENT, TOUCH, GAT, GET_LOCKED, UNLOCK_KEY, GET_META and
//     sub-document commands are served. Mutation tokens carry vbucket UUID
//     0xdeadbeef and seqno 0; values over 1 MiB answer E2BIG; values are
//     kept and returned inflated; a delete leaves no tombstone; a document
//     expires, and a lock ends, at the second its time names (a TTL of n
//     seconds set at second s ends at s+n; items.cc), a second before a
//     couchbase bucket's.
//   - Durable writes, GET_REPLICA and replica lookups, and range scans
//     answer NOT_SUPPORTED; OBSERVE and OBSERVE_SEQNO UNKNOWN_COMMAND.
//
// # What a test can do
//
//   - Data: Bucket.Get reads a stored document (value, flags, CAS, expiry,
//     lock), Bucket.Set seeds one, Bucket.MutationCount says how many times a
//     key was mutated (to prove a write was applied exactly once).
//   - Time: Cluster.Clock().Advance moves the clock document expiry and lock
//     timeouts use (or pass Options.Clock).
//   - Topology: StartRebalance (then Rebalance.Step and Finish, or a
//     background RebalanceOptions.Pace), AddNode, RemoveNode and Failover.
//     Each publishes a config with a higher revision (a Step that moves no
//     vbucket publishes nothing; a paced rebalance publishes at each step)
//     and sends cluster-map change notifications before the call returns.
//   - Crashes: Node.Stop and Node.Restart, Cluster.DropConnections and
//     Node.DropConnections close connections but publish nothing: the
//     configs still name a stopped node, as the cluster map names a crashed
//     server until it is failed over (Failover).
//   - Faults: AddFault and Control register a matcher (node, opcode, bucket,
//     key or a predicate) and an action (answer a status, delay the answer
//     or hold it until the test releases it, close the connection before or
//     after applying the request), once, n
//     times or until removed, in the shape of franz-go kfake's ControlKey.
//     The error map describes StatusTestRetry and StatusTestNoRetry for
//     tests of a client's handling of statuses it does not know.
//   - Synchronous writes: SetSyncWriteDelay holds durable writes pending,
//     PendingSyncWrites counts them, CommitSyncWrites commits them now.
//   - Counters: Node.RequestCount, Node.RequestCounts and
//     Cluster.RequestCount count requests by opcode; Node.ErrorCount counts
//     answers by (non-success) status, e.g. NOT_MY_VBUCKET.
//
// # Design
//
// Each connection has one goroutine. It reads into a buffer, handles every
// complete request in it in order, appending responses to a write buffer,
// and writes that buffer when no complete request is left (responses to a
// pipelined burst go out in one write). No goroutine is started per request:
// a delayed answer on a connection that negotiated UnorderedExecution uses a
// timer (an answer a fault holds, Action.Hold, a goroutine that waits for
// its release); without it the connection waits, as the server does, before
// it reads on.
//
// Documents live per vbucket, each with its own lock, so they move with the
// vbucket when a rebalance or failover changes its owner. A bucket's
// ownership, collections manifest and config JSON form one immutable
// snapshot replaced at every change; the request path loads it without a
// lock, so a node's answers and the config it hands out always agree.
// Revisions come from one cluster-wide counter (as ns_server's chronicle
// revision); revEpoch is 1, or absent with Options.NoRevEpoch (the nodes'
// config version then has kv_engine's unset epoch, -1).
//
// Node.Stop behaves like a crashed node: connections close and new ones are
// refused. On Linux the listening sockets stay bound (shut down for reading,
// not closed), so no outgoing connection can take a stopped node's port and
// Restart always gets it back.
//
// Notifications are written by the goroutine that changed the topology,
// after the cluster lock is released: a client that stops reading can delay
// that caller, never the cluster.
//
// # Server semantics the mock follows
//
// Facts come from kv_engine's docs/BinaryProtocol.md and Collections.md and
// from its HELLO executor; where the docs are silent the choice is written
// here.
//
//   - HELLO grants the supported subset of the requested features and echoes
//     it in ascending order: TCPNODELAY (TCPDELAY is never granted, as on
//     7.6), MutationSeqno, XERROR, SelectBucket, Snappy, JSON, Duplex,
//     ClustermapChangeNotification and its Brief form (both need Duplex, or
//     EINVAL; asked for together, only Brief is granted),
//     UnorderedExecution, AltRequestSupport, SyncReplication, Collections,
//     SnappyEverywhere (which turns the Snappy datatype on by itself),
//     PreserveTtl, GetClusterConfigWithKnownVersion,
//     DedupeNotMyVbucketClustermap, XATTR, VAttr and the subdoc features
//     CreateAsDeleted, DocumentMacroSupport, ReplaceBodyWithXattr,
//     AllowsAccessOnMultipleXattrKeys and ReplicaRead (informational, as on
//     7.5+), Tracing and NonBlockingThrottlingMode (the mock never
//     throttles). VAttr and DocumentMacroSupport need XATTR in the
//     same HELLO, or EINVAL ("<feature> needs XATTR"); dependencies are
//     checked in ascending feature order. A later HELLO replaces the
//     earlier features; a refused one leaves them.
//   - With Tracing, every response to a command taken up after the HELLO
//     that granted it carries the server duration (kv_engine's
//     variable-precision frame info id 0, magic 0x18): real time from when
//     the node took the request up to when its answer was released, so a
//     fault's Delay and a synchronous write's pending time are part of it
//     (tracing.go).
//   - Before authentication only HELLO, GET_ERROR_MAP and the SASL commands
//     are served; anything else, NOOP, VERSION and QUIT included, answers
//     EACCESS (0x24) with no body (kv_engine's Cookie::validate). After it,
//     key commands without a selected bucket answer NO_BUCKET
//     once their packet checks passed.
//   - The connection-level commands (HELLO, NOOP, VERSION, QUIT, SASL,
//     GET_ERROR_MAP, SELECT_BUCKET, LIST_BUCKETS, GET_CLUSTER_CONFIG, STAT,
//     VERBOSITY and the collections lookups) are validated first as
//     kv_engine's McbpValidator does (validate.go): extras, key, value, CAS,
//     datatype and vbucket as each opcode's validator expects, then the
//     frame infos as verify_header judges them for every opcode (key
//     requests' frames follow the same rules, keyreq.go); a refused packet
//     answers EINVAL (or UNKNOWN_FRAME_INFO, NOT_SUPPORTED,
//     DURABILITY_INVALID_LEVEL) with kv_engine's context and is not run.
//   - GET_ERROR_MAP serves the mock's own table of statuses (kv_engine's
//     names, descriptions and attributes, plus StatusTestRetry 0x7ff0 with
//     retry attributes and a retry spec and StatusTestNoRetry 0x7ff1
//     without) in kv_engine's format: version 2 for requests of 2 or more,
//     version 1 (revision+4, only the 16 v1 attributes) for 1, KEY_ENOENT
//     for 0.
//   - SASL: SASL_LIST_MECHS answers "SCRAM-SHA512 SCRAM-SHA256 SCRAM-SHA1
//     PLAIN"; mechanism names are case-insensitive; a failed login answers
//     AUTH_ERROR (no body), a malformed SCRAM message EINVAL, an unknown
//     mechanism AUTH_ERROR. A SASL_AUTH while a SCRAM exchange waits for its
//     step is EINVAL (the exchange goes on); SASL_STEP continues the
//     exchange whatever mechanism it names. A SASL_AUTH logs the connection
//     out first, so a failed one leaves it unauthenticated; a successful
//     one keeps the selected bucket when the new user may use it.
//   - SELECT_BUCKET answers EACCESS for a name the user may not use and
//     KEY_ENOENT for a bucket it may use that does not exist, as kv_engine's
//     select_bucket_executor.cc checks access first; a failed select keeps
//     the selected bucket ("@no bucket@" deselects).
//   - GET_CLUSTER_CONFIG returns the selected bucket's terse config (the
//     cluster config without a bucket, to administrators only: kv_engine
//     wants SystemSettings there and answers others EACCESS, or closes a
//     connection without XERROR) with datatype JSON. With the 16-byte
//     epoch/revision extras it returns an empty body unless its config is
//     newer: epoch first, then revision, both signed, so that no revision
//     of the unset epoch (-1) is newer than a client's epoch 1
//     (cluster_config_executor.cc, ClustermapVersion); extras whose
//     revision is below 1, or whose epoch is neither -1 nor at least 1,
//     get EINVAL (mcbp_validators.cc). Once SnappyEverywhere is negotiated configs go snappy-compressed
//     with datatype JSON|SNAPPY, here, in NOT_MY_VBUCKET bodies and in full
//     notifications (kv_engine's cluster_config_executor.cc, cookie.cc,
//     push_cluster_config). The versions a connection was given (or said it knew) are its
//     "known" config, used to leave the config out of NOT_MY_VBUCKET answers
//     when the client negotiated DedupeNotMyVbucketClustermap and to skip
//     notifications it does not need.
//   - The config has the shape of a 7.6 server's: rev, revEpoch, name,
//     nodeLocator "vbucket", bucketType "membase", uuid, numVBuckets,
//     bucketCapabilities, collectionsManifestUid, vBucketServerMap
//     (hashAlgorithm CRC, numReplicas, serverList, vBucketMap and, during a
//     rebalance, vBucketMapForward), nodes, nodesExt (services kv, kvSSL with
//     TLS, mgmt; thisNode on the serving node), clusterCapabilities,
//     clusterUUID and clusterName. The host is the "$HOST" placeholder, as a
//     server writes it when its nodes are known by a loopback address: in
//     serverList and nodes[].hostname, while nodesExt entries carry no
//     hostname (which also means "the host you fetched this from"). Every
//     node is on the same host (Options.Host), so a client that substitutes the host it
//     connected to reaches every node. Options.ConfigHost writes a literal
//     host instead. nodesExt lists the bucket's servers first, in serverList
//     order, then the other cluster members. With TLS nodesExt also lists
//     kvSSL and mgmtSSL. The REST endpoints are described above.
//   - Cluster-map change notifications (magic 0x82, opcode 0x01, key the
//     bucket name or empty for the cluster config, 16 bytes of extras:
//     epoch then revision, value the config or nothing for Brief) go to
//     connections that negotiated them, for their selected bucket, on every
//     change that gives a version they do not know.
//   - NOT_MY_VBUCKET: a key request for a vbucket the node is not active for
//     (or, for GET_REPLICA, not a replica of) answers 0x07 with the node's
//     current config as the value (datatype JSON), left out as above. The
//     ownership check comes before the collection check.
//   - Keys are 1 to 250 bytes after the collection prefix in _default, 1
//     to 246 in other collections (kv_engine's MaxCollectionsLogicalKeyLen;
//     EINVAL otherwise). With Collections negotiated the key starts with the
//     canonical LEB128 collection id; the reserved ids 1 to 7 answer
//     EINVAL ("Invalid collection-id:<id>", kv_engine's key validator),
//     before any vbucket check; another id not in the manifest answers
//     UNKNOWN_COLLECTION (0x88) with {"manifest_uid":"<hex>"} as the body,
//     before the command's own checks (kv_engine looks the collection up
//     in its packet validator).
//     COLLECTIONS_GET_ID takes "scope.collection" in the value or the key
//     (empty parts mean _default) and answers extras manifest uid (8) +
//     collection id (4), or UNKNOWN_SCOPE / UNKNOWN_COLLECTION with the
//     manifest uid body; a name kv_engine's Manifest::validName refuses is
//     EINVAL.
//   - Errors carry {"error":{"context":"..."}} (datatype JSON, if the
//     client negotiated JSON) when the mock has something to say, XERROR
//     or not, as kv_engine's Cookie::sendResponse does; otherwise no body.
//     Without XERROR the statuses such a client cannot know are remapped
//     as kv_engine's Connection::remapErrorCode remaps them: NO_BUCKET,
//     EACCESS, DURABILITY_IMPOSSIBLE and SYNC_WRITE_AMBIGUOUS a command
//     ends with (not those of the packet checks, nor the EACCESS before
//     authentication) close the connection unanswered;
//     NOT_LOCKED and
//     SYNC_WRITE_IN_PROGRESS become TMPFAIL, and a locked document answers
//     KEY_EEXISTS to mutations and TOUCH/GAT (kv_engine's locked) but
//     TMPFAIL to GET_LOCKED, UNLOCK_KEY and DELETE with a wrong CAS and
//     sub-document commands without a CAS or with the 0xffffffffffffffff
//     a GET of the locked document showed (its locked_tmpfail). A range
//     scan's VB_UUID_NOT_EQUAL and RANGE_SCAN_CANCELLED close the
//     connection too (RANGE_SCAN_MORE and RANGE_SCAN_COMPLETE are sent
//     as they are). Without Collections, the UNKNOWN_SCOPE and
//     UNKNOWN_COLLECTION a command's execution ends with
//     (COLLECTIONS_GET_ID, a range scan's create or continue, a STAT key
//     group, a request to a dropped default collection) are EINVAL, the
//     manifest uid body unchanged, as remapErrorCode makes them.
//   - SET/REPLACE/DELETE/APPEND/PREPEND with a CAS: a missing document
//     answers KEY_ENOENT (APPEND/PREPEND: NOT_STORED), a different CAS
//     KEY_EEXISTS. ADD of an existing document answers KEY_EEXISTS. ADD,
//     INCREMENT and DECREMENT with a CAS are EINVAL, as kv_engine's request
//     validators make them.
//   - Locks: GET_LOCKED takes the lock time in seconds; 0, or more than
//     MaxLockTime (30), means DefaultLockTime (15), as the protocol doc says.
//     It returns a new CAS, which is the only CAS that mutates (and unlocks)
//     the document until the lock times out on the cluster clock: time is
//     counted in whole seconds and a lock holds through the second it ends
//     in, as kv_engine's does (a lock of n seconds taken at second s holds
//     until s+n+1; StoredValue::isLocked). A plain GET and a GET_META of a
//     locked document return CAS 0xffffffffffffffff. Mutations, TOUCH/GAT
//     and a second GET_LOCKED answer LOCKED (without XERROR KEY_EEXISTS or
//     TMPFAIL, as above), and so does a sub-document lookup without a CAS
//     (one with a CAS runs and answers that CAS). UNLOCK_KEY with the lock
//     CAS answers success with CAS 0 (the document keeps the lock's CAS,
//     as kv_engine's does). UNLOCK_KEY of an unlocked
//     document answers NOT_LOCKED (0x0e; TMPFAIL without XERROR, and on a
//     mock whose Options.Version is before 7.6, as kv_engine did), with a
//     wrong CAS LOCKED, of a missing one KEY_ENOENT, without a CAS (0)
//     EINVAL, as kv_engine's unlock_validator answers. Locks are not
//     replicated: GET_REPLICA, replica sub-document lookups and OBSERVE on
//     a replica node ignore them and see the CAS from before the lock, which the active keeps to
//     itself (after an unlock too) until the next mutation.
//   - Expiry: 0 never; up to 30 days, seconds from now; above, an absolute
//     Unix time (one before the current second expires at once). As in
//     kv_engine, a document lives through the second its expiry names and
//     is expired from the next (a TTL of n seconds set at second s ends at
//     s+n+1; StoredValue::isExpired). An expired document is a deleted
//     one: GET_META answers it deleted=1 with its own metadata until an
//     access (any other command naming it, replica reads and OBSERVE on
//     a replica node excepted) turns it into a tombstone with its system
//     xattrs, a new CAS and seqno, as kv_engine's
//     processExpiredItem does (tombstones below; MutationCount does not
//     count it). In a memcached bucket it is just gone. TOUCH and GAT of a missing document answer
//     KEY_ENOENT; TOUCH answers no value, GAT the document. A touch to
//     the expiry the document already has changes nothing, CAS and seqno
//     included (kv_engine's VBucket::processGetAndUpdateTtl). PreserveTTL
//     (frame info 5) keeps the expiry on SET, REPLACE, counters and
//     sub-document mutations, and is accepted (changing nothing) on APPEND
//     and PREPEND; on other opcodes it answers NOT_SUPPORTED, as
//     kv_engine's is_preserve_ttl_supported decides.
//   - INCREMENT/DECREMENT: extras delta, initial, expiry; a missing document
//     is created with the initial value (answered as the new value) unless
//     the expiry is 0xffffffff (memdx.NoCreate), which answers KEY_ENOENT. A
//     value that is not a decimal uint64 answers DELTA_BADVAL; white space
//     before it, a '+' and white space after it (with anything following)
//     are allowed, as kv_engine's safe_strtoull allows them. Increments
//     wrap at 2^64, decrements stop at 0. The value is stored as decimal
//     text with datatype JSON.
//   - Values are stored inflated; the JSON datatype is detected by the mock,
//     as the server does, and sent only to clients that negotiated JSON. A
//     snappy value (datatype 0x02, only after HELLO Snappy, else EINVAL) is
//     inflated on input (EINVAL when it does not inflate, or would inflate to
//     more than 30 MiB, the server's limit) and, as in the server's passive
//     compression mode, returned compressed to clients that negotiated
//     Snappy. Values over 20 MiB (inflated) answer E2BIG; a write that
//     keeps the document's xattrs counts its user xattrs with the value
//     (the system ones have their own 1 MiB).
//   - Successful mutations carry the mutation token (vbucket UUID, seqno) as
//     extras when MutationSeqno was negotiated. Failover gives the promoted
//     vbuckets a new UUID.
//   - Durability (frame info 1): an invalid level answers
//     DURABILITY_INVALID_LEVEL, a reserved timeout EINVAL, a vbucket whose
//     chain has fewer nodes than a majority of 1+replicas
//     DURABILITY_IMPOSSIBLE. With a sync-write delay (Options.SyncWriteDelay,
//     Cluster.SetSyncWriteDelay) the write stays pending that long, or until
//     Cluster.CommitSyncWrites; other mutations of the key, TOUCH/GAT,
//     GET_LOCKED and UNLOCK_KEY answer SYNC_WRITE_IN_PROGRESS (TMPFAIL
//     without XERROR) meanwhile, and reads see the previous value. Without a
//     delay it commits at once. A durability timeout (milliseconds, in the
//     frame info) shorter than the delay aborts the write when it ends: not
//     applied, answered SYNC_WRITE_AMBIGUOUS, as kv_engine's durability
//     monitor does; a write without a timeout waits for the delay. Without
//     XERROR those two statuses close the connection instead (above).
//   - OBSERVE_SEQNO and OBSERVE are served on the active and the replica
//     nodes of a vbucket (NOT_MY_VBUCKET elsewhere), as kv_engine serves
//     them for the SDKs' PersistTo/ReplicateTo: OBSERVE_SEQNO answers format
//     0 for the current vbucket UUID, format 1 for an earlier UUID of the
//     failover log (each Failover adds one), KEY_ENOENT for a UUID not in
//     it; OBSERVE answers persisted (0x01) with the CAS or not found (0x80,
//     a deleted document too: see tombstones below). OBSERVE has no
//     privilege check of its own: each key needs Read on its collection,
//     checked in turn after the whole list was read (EINVAL first).
//     Nothing is ever waiting for persistence: persisted seqno = current.
//   - KV range scans (RANGE_SCAN_CREATE, _CONTINUE, _CANCEL; the bucket
//     advertises the rangeScan capability): per-vbucket scans of one
//     collection over a key range (inclusive or exclusive ends) or a seeded
//     random sample, keys only or documents, continue limits on items, time
//     (the cluster's Clock) and bytes, cancel, a lifetime from the create
//     (Options.RangeScanLifetime), a bound on scans per node and bucket
//     (Options.MaxRangeScans, EBUSY beyond it), snapshot requirements, and
//     kv_engine's statuses; see rangescan.go. Cluster.OpenRangeScans counts
//     the scans the nodes hold. A sample has exactly the requested size
//     (kv_engine's is only close to it). Documents come without their
//     xattrs and tombstones are not scanned; include_xattrs (HELLO
//     RangeScanIncludeXattr) is not served. Options.NoRangeScans makes a
//     server before 7.2: no capability, the opcodes unknown.
//   - STAT's default group answers pid, uptime, time, version,
//     curr_connections, cmd_get, cmd_set and curr_items, one response each,
//     then a response without key and value. The groups "key <key> <vb>
//     [<scope.collection>]", "key-byid <key> <vb> [<cid>]" and their vkey
//     forms answer a document's key_is_dirty, key_exptime, key_datatype,
//     key_flags, key_cas, key_vb_state and key_is_resident (vkey adds
//     key_valid) as kv_engine's doKeyStats does, KEY_ENOENT for a missing
//     document, NOT_MY_VBUCKET for a vbucket the node does not hold. Other
//     groups answer KEY_ENOENT (the bucket's engine does not know them);
//     without a selected bucket any group answers NO_BUCKET. VERBOSITY
//     answers SUCCESS to an administrator (a user with every bucket),
//     EACCESS (no Administrator privilege) to others.
//   - Impersonation (frame info 4, "name" or "^name" for an external
//     user): only an administrator may impersonate (EACCESS otherwise,
//     before authentication too); an external user answers NOT_SUPPORTED
//     (no external authentication service), an unknown one EACCESS; the
//     command then runs with the privileges both users have, so an
//     impersonated user without the bucket gets EACCESS naming the
//     privilege the command needs (kv_engine's Cookie::doExecute and
//     testPrivilege; the range scan commands check RangeScan, a create
//     after finding its collection, a continue or cancel after finding
//     the scan, as ep-engine does; a command in a system collection, one
//     named "_..." as _system._query, needs SystemCollectionLookup or
//     SystemCollectionMutation before the user privileges, as
//     daemon/mcbp_privileges.cc asks). Frame info 6 grants the impersonated user a
//     privilege for the request (a name kv_engine does not know answers
//     EINVAL; without frame info 4 it changes nothing), so one without the
//     bucket may run a command whose privileges the request grants.
//   - With UnorderedExecution, answers the mock delays (a fault's Delay or
//     Hold, a synchronous write, a range scan waiting for a seqno) may
//     overtake later commands, but a command kv_engine may not reorder
//     (outside is_reorder_supported: HELLO, SELECT_BUCKET, NOOP, STAT,
//     GET_CLUSTER_CONFIG, GET_META, OBSERVE, the quiet commands...) or
//     one with the Barrier frame info waits until every earlier one was
//     answered, and no later command starts before it is answered (one
//     the packet validation refuses is answered at once).
//   - GET_META answers deleted, flags, expiry, the revision seqno (the
//     key's count of client writes, what $document.revid shows; kv_engine
//     also counts touches and expiries; 0 in a memcached bucket), for
//     version 2 the datatype (with the XATTR bit for a document with
//     xattrs), and the CAS (0xffffffffffffffff while the document is
//     locked, as above). A
//     tombstone answers success with deleted=1, its flags, CAS and seqno
//     and, as expiry, the second it was deleted (what kv_engine persists
//     for a deletion and serves once the tombstone is on disk); a key
//     never written, or whose tombstone was purged, answers KEY_ENOENT.
//   - Deletes leave tombstones (couchbase buckets): a DELETE, or a
//     sub-document whole-document delete, keeps the key with its flags,
//     the delete's CAS and seqno and the system xattrs (leading
//     underscore; user xattrs and the body go), as kv_engine's
//     VBucket::deleteItem and RemoveCommandContext do. GET, TOUCH/GAT,
//     GET_LOCKED, REPLACE, DELETE, APPEND/PREPEND and CAS writes see no
//     document; ADD and SET write over it; OBSERVE answers not found
//     (0x80), as kv_engine does once the deletion is persisted (it then
//     drops the tombstone from memory, and the mock persists at once).
//     A tombstone is purged after kv_engine's default metadata purge
//     interval (3 days of the cluster clock); a vbucket keeps at most its
//     share of 262144 per bucket (the oldest go first), so memory stays
//     bounded.
//   - Sub-document commands (the single-path opcodes 0xc5-0xcf, 0xd2, 0xd3
//     and SUBDOC_MULTI_LOOKUP / SUBDOC_MULTI_MUTATION) follow kv_engine's
//     docs/SubDocument.md and its validators and executors: subdoc.go
//     (opcodes and validation), subdoc_lookup.go, subdoc_mutate.go,
//     subdoc_path.go (paths), subdoc_json.go (the JSON edits, which splice
//     text as subjson does) and xattr.go say what is followed and where the
//     mock approximates. A document keeps its xattrs apart from its body;
//     SET, REPLACE, APPEND, PREPEND and INCREMENT keep them; a DELETE
//     leaves a tombstone with the system xattrs only (above), which
//     sub-document commands reach with the access-deleted doc flag (a
//     lookup answers SUBDOC_SUCCESS_DELETED or
//     SUBDOC_MULTI_PATH_FAILURE_DELETED; the body is missing);
//     create-as-deleted makes a tombstone with any xattrs.
//   - QUIT answers and closes; quiet opcodes (GETQ, SETQ, ...) answer only
//     misses (GETQ/GETKQ/GATQ: not even those) or failures.
//   - Malformed input never crashes a node: a header the codec rejects
//     (unknown magic, body over the 20 MiB + 64 KiB limit, lengths that do
//     not fit) or a response magic from the client closes the connection;
//     malformed requests answer EINVAL. memcached's text protocol is not
//     spoken: once 24 bytes of it arrived, their magic closes the
//     connection (a shorter text request waits for the rest of a header,
//     as kv_engine's does).
//   - A client that connects as memcached:// would (no SELECT_BUCKET) gets
//     NO_BUCKET for data commands once authenticated (with XERROR; without
//     it, and so without HELLO, the connection closes instead), EACCESS
//     before.
//
// # What the mock does not do
//
// DCP and the other commands not listed above
// (they answer UNKNOWN_COMMAND); an expiry pager (a document expires
// when a command finds it expired);
// binary xattr values; roles within a bucket (a user that may use a bucket
// holds every privilege in it, the system xattrs' and system collections'
// too: only an impersonated user lacks privileges);
// persistence; replicas that lag (a replica read sees the active's data at
// once).
package mockcluster
