// Package conn is one connection to one node: it dials (TCP or TLS),
// bootstraps, and multiplexes requests over the socket by opaque, with
// writes coalesced and one goroutine at a time reading. It speaks raw memcached binary framing
// through memdx and keeps the node's error map (errmap).
//
// # Bootstrap (Dial)
//
// Couchbase mode sends, pipelined where the protocol allows it:
//
//	write 1: HELLO (agent, connection id, requested features + XERROR),
//	         padding (SASL_LIST_MECHS; see below), GET_ERROR_MAP (version 2; not on
//	         the redial without XERROR),
//	         SASL_LIST_MECHS (when a Username is set)
//	write 2: SASL_AUTH with the SCRAM client-first message    (SCRAM only)
//	write 3: SASL_AUTH PLAIN or SASL_STEP (SCRAM client-final), VERSION,
//	         SELECT_BUCKET (when Bucket is set), GET_CLUSTER_CONFIG
//
// Each write waits only for the answers it depends on: the mechanism comes
// from LIST_MECHS, the SCRAM final message from the server-first message.
// Before a login kv_engine (7.x) runs only HELLO, SASL_LIST_MECHS,
// SASL_AUTH, SASL_STEP and GET_ERROR_MAP and answers anything else EACCESS:
// the padding is SASL_LIST_MECHS, which it runs, and
// VERSION, SELECT_BUCKET and GET_CLUSTER_CONFIG ride behind the last SASL message;
// if authentication fails their answers are ignored and the error is the
// authentication's. The error map is used only when XERROR was asked for
// and granted; a failed GET_CLUSTER_CONFIG or VERSION is not fatal (no config,
// no version). The mechanism is the first of Options.SASLMechanisms
// (SCRAM-SHA512, SCRAM-SHA256, SCRAM-SHA1, PLAIN by default) that the
// server lists; PLAIN only over TLS or with AllowPlainAuthWithoutTLS. SCRAM
// checks the server's final signature: a server that cannot prove it knows
// the password fails the Dial.
//
// Failures a fail-fast strategy needs are typed: *AuthError (an explicit
// refusal: AUTH_ERROR at SASL, a SCRAM refusal or bad server proof, or a
// local one that will not heal such as no common mechanism; a malformed
// SASL answer is a *BootstrapError instead), *BucketAccessError
// (EACCESS or KEY_ENOENT at SELECT_BUCKET, or, without XERROR, a hang-up
// there on two connections in a row: below), *TLSError (a TLS failure
// proper: verification, an alert, a peer that does not speak TLS; a
// network failure during the handshake is a plain dial error, as a refused
// connection is); anything else after connecting is a *BootstrapError
// naming the step and status. On a connection without XERROR (memcached
// mode, or the redial after an unusable error map) kv_engine answers
// EACCESS and NO_BUCKET by closing the connection: a step it hung up on
// is a *BootstrapError naming the refusal that most likely stands behind
// it (the user's access to the bucket at SELECT_BUCKET, SystemSettings at
// a bucketless GET_CLUSTER_CONFIG, a Couchbase node at memcached mode's
// get), worded as a likelihood since no status came. All these errors
// match kverr.ErrBootstrap. One hang-up at SELECT_BUCKET after the login may be
// the network's, so Dial then dials once more; the same hang-up on that
// connection is the node's refusal: a *BucketAccessError whose HungUp is
// the second hang-up (no Status), matching kverr.ErrBucketNotFound.
//
// # Plain memcached
//
// Memcached mode (Options.Memcached, the memcached:// scheme) sends no
// Couchbase-only opcode. With a Username it first asks SASL_LIST_MECHS,
// which carries no secret: a server that answers UNKNOWN_COMMAND has no
// SASL (memcached without -S), and the connection goes on without logging
// in, the password unsent, as libmemcached does; a server that lists
// mechanisms gets SASL_AUTH PLAIN only when PLAIN is allowed, as in
// Couchbase mode, and otherwise Dial fails with an *AuthError
// (kverr.ErrPlainAuthRefused) having sent nothing else. A server whose list
// leaves PLAIN out (Cyrus SASL configured for CRAM-MD5, say) would refuse
// it as it refuses a wrong password: Dial fails with an *AuthError naming
// the list, the password unsent. Then one write:
// [SASL_AUTH PLAIN], VERSION, GET, NOOP. Memcached answers VERSION without
// authentication and refuses the GET with AUTH_ERROR (then closes) when it
// requires SASL, so a missing login is an *AuthError at Dial rather than
// on the first operation. A failed SASL_AUTH leaves memcached's connection
// open; Dial closes it. The GET (of "kvwire:memcached-probe") tells
// memcached from a Couchbase Server KV port, which a memcached-mode
// connection could not use (no bucket selected): before a login Couchbase
// answers it EACCESS (a status memcached does not have, as it answers
// VERSION and NOOP), and Dial fails with a *NotMemcachedError; so it does,
// before any password is sent, when the server lists kv_engine's SCRAM-SHA*
// mechanisms. After a login (a Couchbase node listing PLAIN only) its
// NO_BUCKET reaches a connection without XERROR as a hang-up, and Dial
// fails with a *BootstrapError that says the address is most likely a
// Couchbase node and names the couchbase:// to use.
//
// Facts measured against memcached 1.6.18 shape the Couchbase-mode
// bootstrap. Memcached answers an opcode it does not know (HELLO,
// GET_ERROR_MAP, SELECT_BUCKET, GET_CLUSTER_CONFIG) with UNKNOWN_COMMAND,
// but when that request has a key or extras it then skips that many bytes
// more than the body, eating the start of the next request; it sends the
// UNKNOWN_COMMAND only after skipping them, and when the bytes it then
// misreads are not a request it closes the connection without sending
// anything. A HELLO sent alone would therefore get no answer at all, and one
// followed by arbitrary requests might get none either. The rule here:
//
//   - The HELLO key is padded with JSON whitespace to a multiple of 24
//     bytes and followed, in the same write, by one SASL_LIST_MECHS (24
//     bytes, no body) per 24 key bytes. Memcached swallows exactly the
//     padding and answers HELLO; Couchbase answers it (SASL_LIST_MECHS,
//     not NOOP, because kv_engine refuses NOOP with EACCESS before a
//     login). Every other request in that write has neither key nor
//     extras, so memcached reads all of them in step.
//   - A HELLO answered with anything but SUCCESS ends that connection: no
//     further byte is sent on it. UNKNOWN_COMMAND (memcached without SASL)
//     or AUTH_ERROR (memcached with SASL, which refuses every command
//     before authentication and then closes) makes Dial redial once in
//     memcached mode: without credentials after UNKNOWN_COMMAND (that
//     server has no SASL), with SASL PLAIN after AUTH_ERROR if PLAIN is
//     allowed (in Options.SASLMechanisms, and TLS or
//     AllowPlainAuthWithoutTLS); otherwise Dial fails with an *AuthError
//     and the password is never sent, since anything can answer HELLO with
//     AUTH_ERROR. A Bucket cannot be selected on plain memcached, so with
//     one Dial fails instead.
//
// # Error map
//
// The map GET_ERROR_MAP returns is parsed with errmap.Parse and kept for
// this node (ErrorMap; which statuses are looked up in it is the client's
// status policy, not conn's). A map that fails to parse, or whose response
// is over Options.MaxBodyLength, is dropped, the connection closed, and the
// node dialled once more without XERROR, so that it sends only statuses the
// client knows; the reason is logged at warn. That second connection does
// not ask for a map at all, so a node that grants XERROR unasked cannot fail
// the Dial with a second corrupt one.
//
// # Requests
//
// Do encodes the request with a fresh opaque straight into the connection's
// write buffer, under a mutex, and registers it in the connection's
// in-flight table (by opaque). A writer goroutine takes everything queued since its last
// batch and writes it, in Write calls of at most 64 KiB: callers that
// arrive while a write is in progress share the next one. Two exceptions,
// on a plain TCP socket only: a group of gets (StartGets) queued into an
// empty buffer while nothing is being written and no Cork is held, and a
// lone request (the only one in flight, with no caller answered just
// before it who might join it), are written by their caller itself, with
// one non-blocking attempt per 64 KiB; what the socket does not take at
// once is left to the writer goroutine, so that a caller never waits for
// the socket; the caller and the writer goroutine never write at the same
// time, and bytes go out in the order they were queued.
//
// On a crowded connection (the writer counted at least 48 requests in
// flight when it last took a batch) a caller in Do does not take the mutex:
// it pushes its request onto a lock-free stack, and the writer goroutine,
// holding the mutex for its batch anyway, queues everything pushed since it
// last looked, in the order it was pushed (submit.go). Against memcached
// with 256 goroutines on one connection, two cores, callers waited 5.5–8
// µs per request for the mutex, several times the best raw loop's CPU
// for a whole request (make bench's mutex wait and CPU); the stack takes
// about a fifth off the CPU per request there, and adds a sixth to a
// third to the throughput. A request on the stack has no opaque yet: its
// cancel withdraws it, unwritten; its deadline holds (the monitor queues
// what is on the stack when it sweeps, should the writer be stuck in a
// Write); the connection's end fails it, unwritten.
//
// The writer coalesces: callers blocked in Do send again as soon as their
// answers come, so after a burst of answers it waits for the reader to
// finish dispatching it (at most 50 µs) and then yields while the callers
// the burst answered have not queued again, as long as each yield brings
// requests (at most 8 yields); against memcached with 16 goroutines on one
// connection that takes the writes per request from 0.13 to 0.08. When more
// requests are in flight than are queued, it yields once more before
// taking the batch; when more requests are written and unanswered than
// are queued, it also holds the batch until the reader has dispatched its
// next burst of answers (at most twice, at most 50 µs each), so batches
// merge instead of circulating as fragments that each cost a write and a
// read on both ends (against memcached with 256 goroutines on one
// connection the hold takes the writes per request from 0.06 to 0.01, and
// throughput up by a third). A request waits that long only while more of
// the connection's requests are out than queued.
//
// One goroutine at a time reads the socket and decodes responses, matching
// them to requests by opaque, never by position, so responses may come in
// any order (HELLO UnorderedExecution): the reader goroutine, which lends
// that role to a lone caller when it can (readrole.go). When a burst of
// answers handed one caller in Do its outcome and left nothing in flight,
// the reader goroutine stops reading; if that caller's next request comes
// alone, on a plain TCP socket, the caller writes it, reads its own answer
// and dispatches whatever else comes meanwhile (until its context is done,
// if it can be: a cancel interrupts the read, and the caller gives the
// role back and cancels as any other caller does), as a request-response
// loop on a socket of its own would
// (against memcached at one goroutine that halves the client's CPU per
// request: the reader goroutine's hand-off woke a second thread per
// request). Any other request queued meanwhile gives the role back to the
// reader goroutine, which also takes it back after 1 ms without a borrow;
// a caller that takes a role lent 20 µs ago or longer first reads what
// came meanwhile (a server's request, the connection's end) before it
// writes. Server-initiated packets (magic 0x82) go to
// OnClustermapNotification or OnServerRequest. The caller's goroutine waits
// in Do: no goroutine is started per request (a lone caller's context that
// can be cancelled is watched with context.AfterFunc, whose goroutine runs
// only on a cancel), and the request records and their wait channels are
// pooled.
//
// Handles and callbacks run on the goroutine reading the connection: the
// reader goroutine, or a caller in Do that borrowed the read role (for its
// own request's handle, and for whatever else it reads meanwhile). While
// one runs no other packet is read, so they must be quick and must not
// block, and they must not call Close (which waits for the reading to end)
// or Do on the same connection. Callbacks (OnClose and the
// server-request ones) fire only for a connection Dial returns, not for the
// ones it discards (a failed bootstrap, the first connection of a redial):
// server requests that arrive during the bootstrap are kept and delivered,
// in order, on Dial's goroutine just before it returns, while the reader
// holds back newer ones, so no two callbacks ever run at once.
//
// # Request lifecycle
//
// A request on a connection is in one of five states, and each move
// between them happens in one function (request.go), under the
// connection's mutex:
//
//	queued ──▶ sending ──▶ written ──▶ ended (answered)
//	  │           │           │
//	  │           └──────┬────┘
//	  ▼                  ▼
//	ended             abandoned ──▶ ended (late answer, forgotten, or
//	(withdrawn)                          the connection ended)
//
// The states:
//
//   - queued: encoded in a write buffer; no byte handed to a Write call yet.
//   - sending: some of its bytes handed to Write, not all accepted yet.
//   - written: the socket accepted all of its bytes.
//   - abandoned: its caller left (ctx, or its DoDeadline deadline) after it
//     was sent: a tombstone that keeps its opaque until the late answer,
//     which is then dropped.
//   - ended: answered, withdrawn (cancelled or expired while queued: the
//     server never sees it), or failed with the connection.
//
// # Written or not
//
// Every request ends exactly once: handle is called with its response, or
// Do returns a *RequestError, never both. A RequestError says whether the
// request's bytes were written. "Written" means accepted by the socket: the
// writer hands each batch to the socket in Write calls of at most 64 KiB
// and, after each, moves the requests whose last byte it accepted to
// written; a large value stalled behind a slow reader therefore holds back
// only the requests in its own 64 KiB, and those queued after it can still
// be withdrawn. A request whose write failed part-way cannot have been
// executed (the server never had all of it) and counts as not written.
// Not written means safe to send again, here or elsewhere; written (or
// sending, when the caller gives up: its bytes may still reach the server)
// means the outcome is unknown. When the connection fails, the reader waits
// for the last Write (the writer goroutine's, or a caller's write of a
// group) to return before failing the pending requests, so the count is
// exact.
//
// # Cancellation, deadlines and overload
//
// When ctx ends before the response: a queued request is withdrawn (cut out
// of its buffer; Written is false); a request being sent or written is
// abandoned (Written is true) and the connection stays up. If the reader has
// already taken the response, Do waits for handle to return and reports
// that outcome instead.
//
// DoDeadline's deadline ends a request the same way, with
// context.DeadlineExceeded, without a context or timer per request: the
// live requests that have a deadline form a list ordered by deadline
// (under the same mutex; requests share one timeout, so joining at the tail
// and leaving by an unlink cost O(1)), and one monitor goroutine per
// connection wakes at the earliest deadline and ends what is due through
// the request's own done channel, as a response would. A multi-packet
// request (STAT, RANGE_SCAN_CONTINUE) keeps a timer of its own, since its handle may be running
// when it expires.
//
// At most Options.MaxPending live requests (queued, sending or written) are
// in flight; past that Do fails at once with kverr.ErrOverloaded, not written.
// Tombstones do not count: a node that lost thousands of requests does not
// block new ones. They are bounded by Options.MaxAbandoned (4096 by
// default): past it the oldest is forgotten, and its answer, should it ever
// come, is dropped as a stray (an opaque is reused only after 2^32 further
// requests, so it cannot be mistaken for a newer request's). The bootstrap's
// requests are not bounded: its first write alone holds up to 13 (HELLO, at
// most 10 padding requests, GET_ERROR_MAP, SASL_LIST_MECHS), and plain
// memcached answers HELLO only once it has read all of its padding, so a
// limit there would make Dial fail or hang.
//
// # Health
//
// A node that stops answering (a paused process, a network black hole)
// leaves abandoned requests behind. When the oldest tombstone not yet
// vouched for has waited Options.ProbeAfter (1 s), or tombstones reach
// half of MaxAbandoned, the connection sends a NOOP probe. The probe
// decides: answered (with any status), the node is alive, and the
// tombstones abandoned before it was sent trigger no further probe (a slow
// durable write or a large value is the server's business). A request the
// server answers by a bound of its own, a synchronous write by its
// durability timeout (memdx.Request.DurabilityTimeout, or a durability
// frame info in FramingExtras; counted from when the socket took it: the
// server counts from when it runs the write, which is no earlier) or a
// RANGE_SCAN_CONTINUE by its time limit, is different: its tombstone
// counts as waiting only from that bound. NOOP is a barrier in kv_engine
// on a connection with UnorderedExecution (it runs once every earlier
// command has finished, and no later one starts before it): a probe due
// while such a request is in flight waits until the latest of those
// bounds, so that it neither stalls the connection behind a synchronous
// write waiting for replication nor reads that wait as silence; it is sent
// then whatever came meanwhile (or as soon as none of those requests is
// pending any more, if a tombstone still calls for it), and its silence counts from the latest bound of the
// requests still pending ahead of it. A synchronous write with the server's
// default timeout (0) has no known bound and holds nothing. Unanswered
// while the connection makes no progress for Options.ProbeTimeout (1 s):
// nothing read; while the probe is not yet written, nothing accepted by
// the socket; and on Linux (x86, arm, riscv64, loong64, s390x), none of the bytes before the probe acknowledged
// by the node (the socket's SIOCOUTQ count: a probe behind a large value a
// live node reads slowly over a slow link waits while the value drains;
// elsewhere such a probe closes the connection once the drain outlasts
// ProbeTimeout). Over TLS the bytes counted are those the TCP socket under
// the TLS layer takes, per system call on unix, so a Write waiting inside the TLS
// layer for room does not hide the node's progress; on a DialContext's own
// connection type (not a *net.TCPConn) a Write is seen only when it
// returns (under TLS one record, 16 KiB of data; without, up to 64 KiB), so
// a node reading slower than that per ProbeTimeout is closed. Without any
// progress, the connection is closed with kverr.ErrUnresponsive (logged at warn)
// and its requests fail by the written/not-written rule, as on any dead
// connection; the client redials. During the bootstrap the bootstrap's own
// requests are the probe: a node that sends nothing for ProbeTimeout while
// one of them waits fails the Dial with kverr.ErrUnresponsive, and so does
// one that sends nothing for ProbeTimeout while a TLS handshake waits for
// its first bytes (a plain dial error, not a *TLSError). A login is the
// exception: while a SASL_AUTH or SASL_STEP waits (a PLAIN login checked
// against LDAP through ns_server, during which kv_engine answers nothing on
// the connection), Dial's context bounds it, not ProbeTimeout. A negative
// ProbeAfter turns the health check off. The health check's time is
// Options.Clock's when it is set (a caller's fake clock drives it); the
// bootstrap's watch, like the dial and requests' deadlines, keeps the
// system clock.
//
// # Stray responses
//
// A well-framed response that answers nothing in flight is a stray: an
// opaque that matches no request (a second answer to one already answered,
// an answer to a quiet opcode, an answer to a forgotten tombstone), an
// opcode that differs from its request's, an answer to a request the
// socket has not taken whole (queued, or sending with bytes after the
// Write in progress: the server cannot have read it; a group of gets
// (StartGets) takes its gets' answers as soon as any of its bytes are in
// a Write), and the late answer to an abandoned request. Strays are dropped and counted per connection
// (Stats.StrayResponses, of which LateResponses), and logged at warn with
// the node, opcode, opaque, status and why, at most once a second per
// connection (the next line says how many were not logged). The connection
// and its requests in flight are unaffected.
//
// # Protocol violations
//
// Only a framing error closes the connection: a bad magic (or one only a
// client sends), a body over Options.MaxBodyLength, a malformed header or
// lengths that do not add up. It is logged at warn, and the connection ends
// with a *ProtocolError (errors.Is(err, kverr.ErrProtocol)) that says what was
// wrong. Every pending request then fails as above. When the violation is
// an answer over Options.MaxBodyLength, ProtocolError.AnswerTooLarge names
// the request it answers (a resend would get the same answer), and the
// answers read before its header are delivered first (unless one of them
// ends that same request).
package conn
