// Package client is kvwire's public API: a key-value client for a Couchbase
// bucket, or for a set of plain memcached servers, that speaks the memcached
// binary protocol itself.
//
//	c, err := client.Connect(ctx, "couchbase://10.0.0.1,10.0.0.2/travel-sample",
//		&client.Options{Username: "app", Password: pw})
//	if err != nil {
//		return err // errors.Is(err, client.ErrAuthenticationFailure), ...
//	}
//	defer c.Close()
//	users := c.Scope("app").Collection("users")
//	if _, err := client.UpsertJSON(ctx, users, "u:1", User{Name: "Ada"}, nil); err != nil {
//		return err
//	}
//	u, res, err := client.GetJSON[User](ctx, users, "u:1", nil)
//	if errors.Is(err, client.ErrDocumentNotFound) {
//		return err // no such user
//	}
//	fmt.Println(u.Name, res.Cas)
//	_, err = users.Upsert(ctx, "avatar:1", png, nil) // bytes, binary flags
//
// The code examples of this package's documentation, and README.md's, are
// run against the mock cluster by TestDocExamplesRun; they return an
// error where a function of yours would.
//
// Each operation takes its own options type (GetOptions, UpsertOptions,
// IncrementOptions, ...), holding only what it uses; nil means the
// defaults.
//
// # Values
//
// Documents carry Couchbase's common flags, the format of the value in the
// top byte of its flags, so that other SDKs read what kvwire writes and the
// other way round: Upsert, Insert and Replace store bytes as given with
// CommonFlagsBinary (CommonFlagsJSON with the JSON option, the caller's
// Flags when set; flags 0 on memcached://); UpsertJSON, InsertJSON and
// ReplaceJSON encode with encoding/json; UpsertString stores text. GetJSON
// and GetResult.ContentAs decode by the flags (FormatOf): flags 0 read as
// JSON, as gocbcore reads them, and a format the destination cannot hold
// (a binary value into a struct) is ErrDecodingFailure. Options.Transcoder
// replaces the JSONTranscoder that ContentAs and UpsertValue use.
//
// # Connection strings
//
// couchbase://h1,h2:11210/bucket?opt=value, couchbases:// for TLS, and
// memcached://h1:11211,h2 for plain memcached (keys spread with ketama),
// memcacheds:// for memcached over TLS (memcached -Z); SDK RFC 0011's
// older http:// is read as couchbase:// (see ConnStr). couchbases:// trusts
// Couchbase Capella's root CA (CapellaRootCAPEM) besides the system roots
// unless Options.TLSConfig names RootCAs of its own, and
// profile=wan_development (Options.Profile) gives a client far from its
// cluster, as a laptop is from Capella, 20 s KV and connect timeouts.
// ParseConnStr lists the options and the Options field each sets; unknown
// ones are errors, and so is an option without a value. The scheme
// alone decides TLS: Options.TLSConfig or tls_verify with couchbase:// or
// memcached:// is refused by Connect (ErrInvalidArgument), not applied.
// memcached's only SASL mechanism, PLAIN, is sent over TLS, or in clear
// only with Options.AllowPlainAuthWithoutTLS (allow_plain_auth=true). A
// Username is used only with a server that has SASL: one without (it does
// not know SASL_LIST_MECHS) is used unauthenticated and never sent the
// password, as libmemcached does.
// A memcached server that refuses connections fails its keys at once with
// ErrNoNodeAvailable; see MemcachedOptions for taking it out of the ring.
// memcached:// pointed at a Couchbase node's KV port fails at Connect,
// saying to use couchbase://.
//
// As SDK RFC 0011 says: a couchbase:// or couchbases:// string naming one
// host without a port (couchbases://cb.example.cloud) is looked up as the
// DNS SRV record _couchbases._tcp.cb.example.cloud, whose targets become
// the seeds (ConnStr.SRVHost; Options.DisableDNSSRV, Options.Resolver;
// ConnectError.SRV says why a lookup gave none), and which is looked up
// again while no node of the cluster can be reached. A host written
// host:port=http is a cluster manager REST port: the bucket's config is
// read over HTTP (/pools/default/b/BUCKET) and kept current by its stream
// (/pools/default/bs/BUCKET), which is how a memcached bucket, whose KV
// service serves no config, is reached (see BootstrapOn). A memcached
// bucket routes keys by its config's ketama continuum; what it has not
// (sub-documents, synchronous durability, observe, range scans, replica
// reads, named collections) fails at once with ErrFeatureNotAvailable.
//
// # The request path
//
// An operation runs on the caller's goroutine; no goroutine is started for
// it (replica reads and Stats/Version/Flush/Ping, which fan out to nodes, and
// Scan, whose Concurrency goroutines end before ScanResult.Close returns,
// are the exceptions; so is a scan's cancel that must wait behind a
// durable write, which goes on after the scan returned, until the
// client's Close at the latest). Each attempt:
//
//  1. routes the key: CRC32 to a vbucket, then the vbucket's active (or
//     replica) server by the current map or, after a NOT_MY_VBUCKET while a
//     rebalance publishes vBucketMapForward, by the forward map, as RFC 0005
//     says: once on the forward map, the operation stays on it until it is
//     routed by a newer config without one (the rebalance is over);
//     memcached buckets and memcached:// use ketama;
//  2. picks a live connection of that node's pool (round robin);
//  3. resolves the collection id (cached; COLLECTIONS_GET_ID once);
//  4. sends the request on that connection, encoded straight into the
//     connection's coalesced write buffer; the response is decoded on
//     the goroutine reading the connection (its reader goroutine, or the
//     caller itself when it reads its own answer) and its value copied
//     once, into the result the caller owns;
//  5. retries what can be retried, as RFC 0049 revision 16 says (see Retry
//     strategies): NOT_MY_VBUCKET (its body, if newer, goes to the config
//     loop; without one the node is asked for its config),
//     UNKNOWN_COLLECTION (after dropping the cached id, unless the node is
//     behind the manifest that id came from: then with that id again),
//     LOCKED, TMPFAIL,
//     SYNC_WRITE_IN_PROGRESS, statuses the node's error map marks as
//     retryable, and connections that were unavailable or died. Every wait
//     is capped to the deadline; a wait that reaches it ends the operation
//     with a timeout instead of sending it again. Which statuses are
//     retried, which end the operation with which error, and which the
//     error map decides is one table, for operations and the collection-id
//     lookup alike. A status the error map decides whose entry says
//     "conn-state-invalidated" or "special-handling" also drops the
//     connection it came on (RFC 0013); the node's pool dials another
//     (see Redial below for when it waits first).
//     A wait after NOT_MY_VBUCKET or an unavailable node ends when a newer
//     config is installed, or when a node without a connection gets one
//     again (couchbase://, not memcached://), and the operation is routed
//     at once. Close ends every wait with ErrClosed.
//
// # Batches
//
// GetMany, UpsertMany and RemoveMany take many keys in one call and
// return one result per key, in the order given (a key given twice is
// handled twice). Each key is an operation of its own, with exactly the
// rules of the single operation: routing (NOT_MY_VBUCKET, the forward
// map), retries, deadline (the batch's timeout is every key's), ambiguity
// (a write in flight when its connection died or the context ended is
// ambiguous, and never sent again) and errors (a *KeyValueError per key;
// a key the client refuses fails alone with ErrInvalidArgument). One key's
// failure or retry wait never fails or holds back another.
//
// The whole batch runs on the calling goroutine: no goroutine per key. Its
// keys are routed and grouped per connection, and each group is queued
// and written together (one write per connection for up to 64 KiB, so one
// per node with the default ConnectionsPerNode of 1; at most 2048 keys of a
// batch, and at most half of MaxPendingPerConnection, are in flight at
// once, the others start as room frees, so that no connection refuses them
// as overloaded); the
// connections report which requests ended, and the calling goroutine
// judges each as a single operation would and, for a retry, keeps its wait
// in one timer heap on the client's clock. On memcached:// each server's
// keys are read as one request: a text multi-get ("gets k1 k2 ...") on a
// text connection the client keeps for it, or, where text is not taken
// (TLS, SASL, BinaryMultiGet, ...), quiet gets (GETKQ, each answer checked
// against its key) and a NOOP. Either way a miss costs no response: a key
// the multi-get's answer leaves out, or a quiet get still unanswered when
// the NOOP's answer comes, missed (ErrDocumentNotFound). On Couchbase they
// are ordinary pipelined requests. Cancelling the context ends every key: one not sent
// is not written, one in flight is abandoned (a written write is
// ambiguous), and the connections carry on.
//
//	for _, r := range users.GetMany(ctx, []string{"u:1", "u:2", "u:3"}, nil) {
//		if r.Err != nil {
//			continue // errors.Is(r.Err, client.ErrDocumentNotFound), ...
//		}
//		fmt.Printf("%s: %s\n", r.Key, r.Value)
//	}
//
// # Sub-documents
//
// LookupIn reads paths of a JSON document and its extended attributes
// (GetSpec, ExistsSpec, CountSpec; "$document" is the virtual attribute of
// its metadata); MutateIn changes them atomically (InsertSpec, UpsertSpec,
// ReplaceSpec, RemoveSpec, the Array*Spec functions, IncrementSpec,
// DecrementSpec; MutationMacroCAS and its kin expand on the server), with
// store semantics, CAS, expiry, durability and tombstone access in
// MutateInOptions. A lookup's path errors are per path
// (LookupInResult.ValueAt: ErrPathNotFound, ErrPathMismatch, ...;
// LookupInResult.Exists is false without an error only for a missing
// path); a mutation fails as a whole with the failing path's sentinel and
// a *SubdocError naming it and its Status. LookupInAnyReplica and LookupInAllReplicas read
// replicas where the bucket allows it, and GetOptions.Project shapes a Get
// from chosen paths.
//
//	r, err := users.LookupIn(ctx, "u:1", []client.LookupInSpec{
//		client.GetSpec("$document.exptime", &client.GetSpecOptions{IsXattr: true}),
//		client.GetSpec("name", nil), // body paths after xattrs, as kv_engine wants
//	}, nil)
//	if err != nil {
//		return err // the document's: ErrDocumentNotFound, ...
//	}
//	name, err := r.ValueAt(1) // a path's own: ErrPathNotFound, ...
//	if err != nil {
//		return err
//	}
//	fmt.Printf("name %s\n", name)
//
// # Was it applied?
//
// A request whose bytes were never written is retried wherever it can go.
// A request that was written and got no answer (its connection died, or
// the deadline passed while waiting) may have been applied: an idempotent
// one (Get, replica reads, ...) is retried, a mutation is not, and its error
// matches ErrAmbiguous (and, for timeouts, ErrAmbiguousTimeout); so does a
// node's error of Client.Flush, which is never sent again. Errors
// that match neither mean the request changed no data: it was not applied,
// or it only reads (an idempotent read whose last attempt went unanswered
// may have run, and changed nothing). KeyValueError.Ambiguous says the same.
//
// # Retry strategies
//
// Each failure that may be retried has a RetryReason (RFC 0049's). Two are
// always retried, after ControlledBackoff: NOT_MY_VBUCKET and
// UNKNOWN_COLLECTION. For the others the operation's RetryStrategy decides.
// The default, DefaultRetryStrategy() (FailFastOnTerminalErrors): failures
// that waiting cannot fix (refused credentials, a refused bucket, a TLS
// failure, a missing scope or collection) fail at once; everything else is
// retried with exponential backoff (1 ms to 500 ms) until the timeout, a
// mutation only when the reason says it was not applied.
// Options.RetryStrategy and the per-call RetryStrategy replace it: BestEffort,
// FollowErrorMap, or your own RetryStrategy (see RetryStrategyFunc). Results
// and errors say how often an operation was retried and why (RetryAttempts,
// RetryReasons).
//
// # Unresponsive nodes
//
// A node that accepts connections but stops answering (a paused process, a
// black hole in the network) is found by the connection's health check
// (Options.HealthCheck; connection string probe_after, probe_timeout). A
// request whose caller gave up after it was sent and still unanswered
// ProbeAfter (1 s) later makes the connection send a NOOP; when nothing at
// all arrives from the node for ProbeTimeout (1 s) while the probe waits
// (and the connection makes no other progress: the socket taking the
// bytes before the probe, or, on Linux, its queue draining to the node),
// the connection closes with ErrUnresponsive, its requests fail as on any
// dead connection (a mutation in flight is ambiguous), and the node
// redials. A node that is only slow answers the probe and keeps its
// connection. NOOP is a barrier in kv_engine under unordered execution
// (it runs only after every earlier request on its connection): while a
// synchronous write waits for replication there (or a range scan's
// continue runs, at most 1 s), the probe waits until the write is
// answered or its durability timeout has passed, so a node paused then is
// found up to that much later. The other barriers (GET_META for Exists, NOOP for Ping, STAT,
// VERSION, config fetches, collection-id lookups, a range scan's
// continues and cancels) go on a connection
// of the node free of such requests (a config poll, or a lookup, may go
// to another node), and when none is, they are held,
// unsent, until one is free or those bounds have passed: sent, they
// would wait for the write and stall every later request on the
// connection. One still held at its timeout fails with a timeout that
// says so. A connection being bootstrapped fails the same way after
// ProbeTimeout of silence while one of its requests waits (but a login, which
// kv_engine may check against LDAP for seconds, is bounded by
// ConnectTimeout alone; once another node is connected, Connect stops
// waiting for a node still in its first dial ProbeTimeout after it began,
// and that dial goes on). Connect goes on to the next seed, and dials the
// seeds that did not answer in time again, in rounds 10 ms to 500 ms
// apart, until one bootstraps or ConnectTimeout has passed since Connect
// began: a seed that answers late does not fail Connect while another
// seed, or the same one a moment later, would answer. A refused
// connection, a hang-up, refused credentials, bucket or TLS are answers:
// those seeds are not dialed again.
//
// # Redial
//
// A node whose connection ends redials at once if the connection lived 2 s
// or longer, or served requests before the node or the network ended it.
// One that ends sooner having served nothing past its bootstrap, or that the
// client dropped for a status the node's error map marks
// conn-state-invalidated, counts as a failed dial: the first such
// end in a row is redialed at once, each later one after the node's
// back-off, on Options.Clock: 10 ms doubling to 2 s, the back-off of
// failed dials too, reset only by a connection that lived 2 s. A node that
// answers EINTERNAL (which its error map marks conn-state-invalidated) to
// every read of one bad document, or closes each connection after its
// bootstrap, is thus bootstrapped again at most once per 2 s after its
// first few seconds, not once per read, and each drop fails the requests
// in flight on the connection that seldom. While a node waits, its
// requests retry (with reason NodeNotAvailable) or fail at their timeout
// as for any node without a connection; Close does not wait for it.
//
// # Cluster configs
//
// The first config comes with bootstrap (GET_CLUSTER_CONFIG, or, where the
// KV service serves none or with bootstrap_on=http, the cluster manager's
// REST API: see BootstrapOn); Connect fails
// with ErrNoNodeAvailable, naming each node and its error, when no node of
// that config can be connected to within ConnectTimeout. Newer ones come
// from NOT_MY_VBUCKET bodies, from the server's cluster-map change
// notifications (HELLO ClustermapChangeNotificationBrief: a version, then a
// GET_CLUSTER_CONFIG with the known version), and, while the configs come
// from the KV service, from polling every
// ConfigPollInterval and from the node that answered a NOT_MY_VBUCKET
// without a newer config (a GET_CLUSTER_CONFIG at once; one in flight per
// node, 20 ms apart at least), or, when the first one came over HTTP, from
// the cluster manager's config stream. Each is checked for size (at most 8 MiB:
// larger ones are logged and dropped) and version (a scan for revEpoch and
// rev, without a parse) where it arrives, and parsed on the client's config
// goroutine, once per version however many operations meet it (a config
// whose revision the scan cannot read, each time it comes). Only a
// config newer by (revEpoch, rev) replaces the one in use, as one atomic
// swap of an immutable snapshot: routing takes no lock. Nodes the new
// config adds get a pool; nodes it drops stop receiving requests and close
// once their requests in flight have drained. When no node of the config
// can be reached (each failed its dial, or has not connected within
// HealthCheck.ProbeTimeout of joining: a node whose SYNs are lost would
// hold its dial for ConnectTimeout), the seeds and every node known
// before (up to 64) are asked for a newer config, at most every 500 ms.
//
// # Errors
//
// Every error matches one or more sentinels with errors.Is; an operation's
// error is a *KeyValueError (errors.As) saying what was asked, where it
// went, the status, the error-map entry and the retries. The sentinels are
// the module's one set: the connection and retry layers wrap the same
// values, so a cause matches the same sentinel as the error. Statuses are
// kv_engine's names; the status policy (one table) is the one place that
// decides which status gives which sentinel, and which are retried first
// (LOCKED, TMPFAIL, SYNC_WRITE_IN_PROGRESS, ...: the sentinel is then that
// of the last status when the strategy stops retrying, or a timeout).
//
//	Sentinel                           Statuses and conditions behind it
//	ErrDocumentNotFound                KEY_ENOENT; NOT_STORED on APPEND, PREPEND
//	ErrDocumentUnretrievable           the replica reads (GetAnyReplica,
//	                                   GetAllReplicas, their LookupIn forms): no
//	                                   copy was read, and one was missing (the
//	                                   error matches ErrDocumentNotFound too)
//	ErrDocumentExists                  KEY_EEXISTS on ADD and sub-document
//	                                   inserts; NOT_STORED on ADD
//	ErrCasMismatch                     KEY_EEXISTS with a CAS, and on UNLOCK_KEY;
//	                                   LOCKED on UNLOCK_KEY
//	ErrDocumentLocked                  LOCKED (retried as KV_LOCKED until the
//	                                   strategy refuses); KEY_EEXISTS on TOUCH,
//	                                   GAT, and on SET, REPLACE, DELETE, APPEND,
//	                                   PREPEND, INCREMENT, DECREMENT and
//	                                   sub-document mutations other than
//	                                   inserts without a CAS, and ETMPFAIL on
//	                                   GET_LOCKED, sub-document lookups of
//	                                   the active copy, sub-document
//	                                   mutations other than inserts without
//	                                   a CAS and DELETE with one (kv_engine's
//	                                   lock, to a connection without XERROR;
//	                                   retried; plain memcached's ETMPFAIL is
//	                                   a temporary failure)
//	ErrDocumentNotLocked               NOT_LOCKED; ETMPFAIL on UNLOCK_KEY (what
//	                                   a server before 7.6, or any without
//	                                   XERROR, answers; not retried)
//	ErrNotStored                       NOT_STORED on other opcodes
//	ErrValueTooLarge                   E2BIG; an answer longer than the client
//	                                   reads (20 MiB and 64 KiB: memcached -I
//	                                   allows larger values), not retried
//	ErrDeltaInvalid                    DELTA_BADVAL; SUBDOC_DELTA_EINVAL (a path's)
//	ErrInvalidArgument                 EINVAL, ERANGE, XATTR_EINVAL,
//	                                   SUBDOC_INVALID_COMBO,
//	                                   SUBDOC_DELETED_DOCUMENT_CANT_HAVE_VALUE;
//	                                   KEY_ENOENT on STAT (no such group, or
//	                                   a key stat's missing document); an
//	                                   argument refused before sending (a
//	                                   *KeyValueError); a bad option or
//	                                   connection string at Connect
//	ErrTemporaryFailure                ETMPFAIL (retried; not on UNLOCK_KEY,
//	                                   nor, from kv_engine without XERROR,
//	                                   where it is a lock),
//	                                   ENOMEM, EBUSY; any
//	                                   status whose error-map entry has "temp"
//	ErrNoAccess                        EACCESS
//	ErrFeatureNotAvailable             UNKNOWN_COMMAND, NOT_SUPPORTED,
//	                                   UNKNOWN_FRAME_INFO; a feature HELLO did not
//	                                   grant; an opcode or collection memcached lacks;
//	                                   AUTH_ERROR on FLUSH (memcached with flush_all
//	                                   disabled, -F)
//	ErrServerFailure                   any other status (NOT_MY_VBUCKET once not
//	                                   retried; RANGE_SCAN_CANCELLED, on a scan's
//	                                   continue once its vbucket's scan was created
//	                                   again 16 times without progress), unless its error-map entry says
//	                                   "temp"; SUBDOC_MULTI_PATH_FAILURE and
//	                                   SUBDOC_MULTI_PATH_FAILURE_DELETED, whose
//	                                   MutateIn error has the failing path's
//	                                   sentinel instead (a lookup's result)
//	ErrPathNotFound                    SUBDOC_PATH_ENOENT (a path's: in a LookupIn
//	                                   result, or a MutateIn's error with a
//	                                   *SubdocError; so are the rows below)
//	ErrPathMismatch                    SUBDOC_PATH_MISMATCH
//	ErrPathInvalid                     SUBDOC_PATH_EINVAL
//	ErrPathTooBig                      SUBDOC_PATH_E2BIG
//	ErrPathTooDeep                     SUBDOC_PATH_E2DEEP
//	ErrPathExists                      SUBDOC_PATH_EEXISTS
//	ErrValueInvalid                    SUBDOC_VALUE_CANTINSERT
//	ErrValueTooDeep                    SUBDOC_VALUE_ETOODEEP
//	ErrDocumentNotJSON                 SUBDOC_DOC_NOTJSON
//	ErrNumberTooBig                    SUBDOC_NUM_ERANGE
//	ErrXattrInvalidFlagCombo           SUBDOC_XATTR_INVALID_FLAG_COMBO
//	ErrXattrInvalidKeyCombo            SUBDOC_XATTR_INVALID_KEY_COMBO
//	ErrXattrUnknownMacro               SUBDOC_XATTR_UNKNOWN_MACRO,
//	                                   SUBDOC_XATTR_UNKNOWN_VATTR_MACRO
//	ErrXattrUnknownVirtualAttribute    SUBDOC_XATTR_UNKNOWN_VATTR
//	ErrXattrCannotModifyVirtualAttribute SUBDOC_XATTR_CANT_MODIFY_VATTR
//	ErrXattrInvalidOrder               SUBDOC_INVALID_XATTR_ORDER; a spec list with
//	                                   an xattr spec after a body spec, refused
//	                                   before sending (with ErrInvalidArgument)
//	ErrDocumentAlreadyAlive            SUBDOC_CAN_ONLY_REVIVE_DELETED_DOCUMENTS
//	ErrDurabilityAmbiguous             SYNC_WRITE_AMBIGUOUS (also ErrAmbiguous)
//	ErrDurabilityImpossible            DURABILITY_IMPOSSIBLE
//	ErrDurabilityLevelNotAvailable     DURABILITY_INVALID_LEVEL
//	ErrDurableWriteInProgress          SYNC_WRITE_IN_PROGRESS (retried)
//	ErrDurableWriteReCommitInProgress  SYNC_WRITE_RE_COMMIT_IN_PROGRESS (retried)
//	ErrScopeNotFound                   UNKNOWN_SCOPE; retry reason SCOPE_NOT_FOUND
//	ErrCollectionNotFound              UNKNOWN_COLLECTION (retried as
//	                                   KV_COLLECTION_OUTDATED; on COLLECTIONS_GET_ID
//	                                   the reason COLLECTION_NOT_FOUND)
//	ErrAuthenticationFailure           AUTH_ERROR, AUTH_STALE; SASL refused or a
//	                                   local refusal no retry heals (reason
//	                                   AUTHENTICATION_ERROR)
//	ErrPlainAuthRefused                SASL PLAIN needed, not allowed; nothing sent
//	ErrBucketNotFound                  SELECT_BUCKET refused (KEY_ENOENT, EACCESS,
//	                                   or, without XERROR, the connection closed
//	                                   there twice in a row; reason
//	                                   BUCKET_ACCESS_ERROR)
//	ErrTLS                             TLS handshake or certificate verification
//	                                   failed (reason TLS_ERROR)
//	ErrBootstrap                       any failed bootstrap step of a connection
//	ErrConnectionClosed                the connection ended with the request on it
//	                                   (reason SOCKET_CLOSED_WHILE_IN_FLIGHT)
//	ErrOverloaded                      a connection's MaxPending reached; not written
//	ErrProtocol                        the server broke the framing; connection closed
//	ErrUnresponsive                    a health probe went unanswered; connection
//	                                   closed. Also a dial whose TLS handshake or
//	                                   bootstrap heard nothing from the node for
//	                                   the probe timeout (the node's last dial
//	                                   error, which its requests then name)
//	ErrNoNodeAvailable                 no route or live connection until the
//	                                   strategy stopped (NODE_NOT_AVAILABLE); Connect
//	                                   reached no node, or no server of the
//	                                   bootstrap config has a KV address on the
//	                                   client's network (Network, TLS port)
//	ErrInvalidConnStr                  a connection string that does not parse
//	ErrClosed                          the client was closed
//	ErrTimeout                         the deadline passed (with ErrAmbiguousTimeout
//	                                   or ErrUnambiguousTimeout)
//	ErrAmbiguousTimeout                a timeout after a mutation was written
//	                                   and got no answer
//	ErrUnambiguousTimeout              a timeout that changed no data: nothing
//	                                   written unanswered, or a read
//	ErrAmbiguous                       a mutation written with no definite answer:
//	                                   ambiguous timeouts, a connection lost in
//	                                   flight, SYNC_WRITE_AMBIGUOUS
//	ErrRequestCanceled                 the caller's context was canceled
//	ErrNotRetried                      the strategy refused a retry (with the
//	                                   sentinel of what failed)
//	ErrErrorMapMaxDuration             FollowErrorMap: the error map's
//	                                   max-duration left no time to retry
//	ErrEncodingFailure                 a Transcoder could not encode a value;
//	                                   nothing sent (a *KeyValueError naming
//	                                   the operation and key)
//	ErrDecodingFailure                 a Transcoder could not decode a value: its
//	                                   flags' format does not fit the destination,
//	                                   or the bytes do not parse
//
// # Observing
//
// Options.Observer sees the start and end of every attempt sent to a node
// (operation id, attempt number, node, vbucket, whether the forward map was
// used, the reason it was retried, its opaque and status). Attempts that end
// before being sent (no connection to the key's node, a collection id
// lookup that failed) are not reported but still take an attempt number,
// except a barrier's (Exists, Ping, a range scan's continue, ...) refused
// because a synchronous write was queued on its connection first: it is
// held and placed again, no attempt at all (see Observer). Options.Logger receives
// connection, config and retry events through log/slog; the password is
// never logged.
//
// Couchbase SDK RFC 0067's observability, each part an option:
//
//   - Options.Tracer gets a span per operation ("get", "upsert", ...)
//     under its options' ParentSpan or the context's (ContextWithParentSpan;
//     the kvotel module's tracer also takes the OpenTelemetry span the
//     context carries), a child span per request sent (dispatch_to_server:
//     the node, the connection's remote socket and local id (RFC 0067 has
//     no local address on a span), the request's opaque,
//     the server's duration) and for value encoding, an event per retry
//     with its reason (and a "cancelled" event, not a failure, on the read
//     of a copy that GetAnyReplica gave up once another copy answered),
//     RFC 0067's attributes (bucket, scope, collection, retries,
//     error.type). A typed write whose value does not encode (nothing is
//     sent) and a GetJSON whose value does not decode are failed
//     operations all the same, error.type EncodingFailure and
//     DecodingFailure, on the meter too; so is an operation refused
//     before any attempt for its arguments (an empty key, a negative
//     Timeout, a nil context: error.type InvalidArgument) or for a
//     feature its bucket lacks (FeatureNotAvailable), and a Stats,
//     Version or Flush refused before any node was asked, its span ended
//     at once. A Scan is one span, "scan", and one latency, from Scan
//     until its results end or it is closed (or, dropped unclosed, the
//     garbage collector stops it), its requests its dispatch
//     spans. The default records nothing and costs nothing.
//   - Options.Meter records each operation's latency by operation, bucket,
//     scope, collection, cluster (name and uuid, as the config publishes
//     them) and outcome (MetricOperationDuration): GetAnyReplica,
//     GetAllReplicas and their LookupIn forms are one operation each
//     ("get_any_replica", ...), their reads of the copies none; a Ping
//     none of its own, a "ping" per node's NOOP; a call refused because
//     the client is closed none (nor a span). The default is the logging
//     meter, which logs percentiles every 10 minutes.
//   - The slow-operation report (ThresholdLoggingOptions) logs, every 10 s,
//     the operations over 500 ms with their total, dispatch and server
//     times (a Scan is one; so is each replica call, "get_any_replica",
//     ..., with the answering (or last) copy's read's dispatch and server
//     times, opaque and connection, its reads of the copies none of their
//     own); the orphan report (OrphanReportingOptions) the answers that came
//     after their operation gave up (not those of the reads GetAnyReplica
//     gave up once another copy answered, nor those of a scan's requests
//     given up when it was closed, which are expected). Both are on by
//     default, at warn.
//   - Client.Diagnostics reports every connection's state without I/O
//     (RFC 0034; its JSON is RFC 0061's), Client.WaitUntilReady waits until
//     every node (or one: ClusterDegraded) is connected, Client.Ping sends a
//     NOOP to each node.
//
// Tracers and meters are called on the operation's goroutine only (a
// replica call's reads and a Scan's requests: the goroutines they run on;
// a Scan whose ScanResult was dropped unclosed is ended on a goroutine of
// the client's own, which Close waits for), never on a connection's
// reader or writer nor under a lock: one that blocks holds its own
// operation, one that panics loses its call (logged).
package client
