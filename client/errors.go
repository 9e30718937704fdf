package client

import (
	"errors"
	"unsafe"

	"github.com/kvwire/kvwire/internal/kverr"
	"github.com/kvwire/kvwire/internal/optrace"
	"github.com/kvwire/kvwire/memdx"
	"github.com/kvwire/kvwire/retry"
	"github.com/kvwire/kvwire/vbmap"
)

// The sentinels: every error kvwire returns matches one or more of these
// through errors.Is. They are the module's one set (each declared once, in
// package internal/kverr; the lower layers wrap the same values), so an
// error's cause, whatever layer made it, matches the same sentinels as the
// error. The table in the package documentation says which server statuses
// and conditions give which.
var (
	// ErrDocumentNotFound: the document does not exist (KEY_ENOENT; for
	// Append/Prepend, NOT_STORED, which memcached also answers when the
	// result would exceed its item size limit: the error's message says so).
	ErrDocumentNotFound = kverr.ErrDocumentNotFound
	// ErrDocumentUnretrievable: a replica read (GetAnyReplica,
	// GetAllReplicas, LookupInAnyReplica, LookupInAllReplicas) read no
	// copy of the document and at least one copy said it does not exist
	// (RFC 0058's DocumentUnretrievable, gocb's error of the same name).
	// The error also matches ErrDocumentNotFound, through the copy's error
	// it wraps.
	ErrDocumentUnretrievable = kverr.ErrDocumentUnretrievable
	// ErrDocumentExists: Insert found the document already there.
	ErrDocumentExists = kverr.ErrDocumentExists
	// ErrCasMismatch: the document changed since the CAS the caller gave
	// (or, for Unlock, the CAS is not the lock's).
	ErrCasMismatch = kverr.ErrCasMismatch
	// ErrDocumentLocked: the document is locked (returned only when the
	// retry strategy refused to wait for the lock; usually the operation
	// retries until the lock is released or it times out).
	ErrDocumentLocked = kverr.ErrDocumentLocked
	// ErrDocumentNotLocked: Unlock of a document that is not locked
	// (NOT_LOCKED; TMPFAIL before Couchbase Server 7.6). On a connection
	// without XERROR the server answers TMPFAIL for a lock held with
	// another CAS too, so there it may also mean that; the error's
	// message says so.
	ErrDocumentNotLocked = kverr.ErrDocumentNotLocked
	// ErrNotStored: the server did not store the value (NOT_STORED).
	ErrNotStored = kverr.ErrNotStored
	// ErrValueTooLarge: the value exceeds the server's limit (E2BIG):
	// nothing was stored, but memcached drops the key's previous value
	// when an Upsert (SET) is refused so: it does not keep a value the
	// caller meant to replace (Replace and Insert leave the key as it
	// was). Or the server's answer is longer than the client reads (20 MiB
	// and 64 KiB: a memcached started with -I over 20m holds such values):
	// that read is not retried (its connection is closed, as for any answer
	// that breaks the framing); a write so answered is Ambiguous, as any
	// write whose answer was not read.
	ErrValueTooLarge = kverr.ErrValueTooLarge
	// ErrDeltaInvalid: Increment/Decrement of a value that is not a number,
	// or a sub-document counter's delta that is 0 or no int64.
	ErrDeltaInvalid = kverr.ErrDeltaInvalid
	// ErrInvalidArgument: the request was refused as invalid (EINVAL), or
	// the caller passed an argument kvwire refuses before sending (then
	// the error is a *KeyValueError whose Cause says what was wrong, or,
	// from Connect, an error naming the option).
	ErrInvalidArgument = kverr.ErrInvalidArgument
	// ErrTemporaryFailure: the server is temporarily unable to serve the
	// request (TMPFAIL, ENOMEM, EBUSY, or a status the node's error map
	// marks "temp") and the strategy did not retry.
	ErrTemporaryFailure = kverr.ErrTemporaryFailure
	// ErrNoAccess: the user may not perform this operation (EACCESS).
	ErrNoAccess = kverr.ErrNoAccess
	// ErrFeatureNotAvailable: the server does not support what was asked
	// (UNKNOWN_COMMAND, NOT_SUPPORTED, or a feature HELLO did not grant).
	ErrFeatureNotAvailable = kverr.ErrFeatureNotAvailable
	// ErrServerFailure: any other failure the server reported.
	ErrServerFailure = kverr.ErrServerFailure
	// ErrDurabilityAmbiguous: a synchronous write's outcome is unknown
	// (SYNC_WRITE_AMBIGUOUS); it also matches ErrAmbiguous.
	ErrDurabilityAmbiguous = kverr.ErrDurabilityAmbiguous
	// ErrDurabilityImpossible: the durability requirement cannot be met
	// (DURABILITY_IMPOSSIBLE).
	ErrDurabilityImpossible = kverr.ErrDurabilityImpossible
	// ErrDurabilityLevelNotAvailable: the durability level is not
	// supported (DURABILITY_INVALID_LEVEL).
	ErrDurabilityLevelNotAvailable = kverr.ErrDurabilityLevelNotAvailable
	// ErrDurableWriteInProgress: a synchronous write to the document is
	// pending (SYNC_WRITE_IN_PROGRESS) and the strategy did not retry.
	ErrDurableWriteInProgress = kverr.ErrDurableWriteInProgress
	// ErrDurableWriteReCommitInProgress: a synchronous write to the
	// document is being re-committed (SYNC_WRITE_RE_COMMIT_IN_PROGRESS)
	// and the strategy did not retry.
	ErrDurableWriteReCommitInProgress = kverr.ErrDurableWriteReCommitInProgress
	// ErrScopeNotFound: the collection manifest has no such scope.
	ErrScopeNotFound = kverr.ErrScopeNotFound
	// ErrCollectionNotFound: the collection manifest has no such
	// collection.
	ErrCollectionNotFound = kverr.ErrCollectionNotFound

	// ErrAuthenticationFailure: the server refused the credentials, or
	// the client refused them for a reason no retry gets past (no SASL
	// mechanism both sides allow, PLAIN not allowed, a NUL in them).
	ErrAuthenticationFailure = kverr.ErrAuthenticationFailure
	// ErrPlainAuthRefused: memcached:// with a Username, to a server with
	// SASL, which offers only PLAIN, which would send the password in
	// clear, and no opt-in (AllowPlainAuthWithoutTLS, allow_plain_auth=true).
	// The password was not sent (only SASL_LIST_MECHS was). Connect's error
	// matches it and ErrAuthenticationFailure.
	ErrPlainAuthRefused = kverr.ErrPlainAuthRefused
	// ErrBucketNotFound: SELECT_BUCKET was refused: the bucket does not
	// exist or the user may not access it (the server does not say which).
	ErrBucketNotFound = kverr.ErrBucketNotFound
	// ErrTLS: the TLS handshake or certificate verification failed.
	ErrTLS = kverr.ErrTLS
	// ErrBootstrap: a connection's bootstrap failed after the connection
	// was made (a refused login, bucket or TLS handshake, or another
	// bootstrap step); matched by the per-node causes of a ConnectError or
	// a NodeError.
	ErrBootstrap = kverr.ErrBootstrap
	// ErrConnectionClosed: the connection that carried the request ended
	// (a network error, a protocol violation, an unresponsive node). Such a
	// request is retried when it is safe; the error reaches the caller
	// only as the cause of a failure that was not retried, next to
	// ErrAmbiguous when the request may have been applied.
	ErrConnectionClosed = kverr.ErrConnectionClosed
	// ErrOverloaded: a connection already had its maximum of requests in
	// flight; the request was not written.
	ErrOverloaded = kverr.ErrOverloaded
	// ErrProtocol: a server broke the protocol's framing; its connection
	// was closed.
	ErrProtocol = kverr.ErrProtocol
	// ErrUnresponsive: a node stopped answering (a health probe went
	// unanswered, or a dial's TLS handshake or bootstrap heard nothing for
	// the probe timeout) and its connection was closed.
	ErrUnresponsive = kverr.ErrUnresponsive
	// ErrNoNodeAvailable: no connection could carry the request (returned
	// once the strategy stops retrying), or Connect reached no node.
	ErrNoNodeAvailable = kverr.ErrNoNodeAvailable
	// ErrInvalidConnStr is matched by every connection-string parse error
	// (a *ConnStrError, which also matches ErrInvalidArgument).
	ErrInvalidConnStr = kverr.ErrInvalidConnStr
	// ErrClosed: the client was closed.
	ErrClosed = kverr.ErrClosed

	// ErrTimeout matches every timeout; ErrAmbiguousTimeout and
	// ErrUnambiguousTimeout say whether the request may have changed data.
	// ErrAmbiguousTimeout: a request that may change data (not a read) was
	// written and got no definite answer. ErrUnambiguousTimeout: it changed
	// nothing: it was never written, every attempt written was answered
	// (and refused), or it only reads (a Get written and left unanswered
	// may have run on the server, which changes nothing). A range scan's
	// requests change no document, so their timeouts are unambiguous (a
	// create written before it timed out may have opened a scan, which the
	// server drops after its idle timeout).
	ErrTimeout            = kverr.ErrTimeout
	ErrAmbiguousTimeout   = kverr.ErrAmbiguousTimeout
	ErrUnambiguousTimeout = kverr.ErrUnambiguousTimeout
	// ErrAmbiguous matches every error after which a mutation may have been
	// applied (written, then no definite answer): ambiguous timeouts, a
	// connection that died with the request in flight, SYNC_WRITE_AMBIGUOUS.
	ErrAmbiguous = kverr.ErrAmbiguous
	// ErrRequestCanceled: the caller's context was canceled.
	ErrRequestCanceled = kverr.ErrRequestCanceled
	// ErrNotRetried: the retry strategy refused to retry. The error also
	// matches the sentinel of what failed (ErrDocumentLocked, say).
	ErrNotRetried = kverr.ErrNotRetried
	// ErrErrorMapMaxDuration: with the error-map strategy
	// (FollowErrorMap), the node's error map allows no more time for
	// retries of the status that came back.
	ErrErrorMapMaxDuration = kverr.ErrErrorMapMaxDuration
)

// KeyValueError is the error of a failed key-value operation: it says what
// was asked, where it went, what the server answered and how often it was
// tried. errors.Is matches its Err (one of the sentinels above) and
// everything its Cause wraps (the server's status, a timeout, a
// connection's failure, ...), which wraps the same sentinels.
//
// An argument refused before anything was sent (an empty or too long key,
// a negative lock time, an expiry the protocol cannot express, ...) is a
// KeyValueError too: Err is ErrInvalidArgument, Cause says what was wrong,
// RetryAttempts is 0 and Node is "". So is GetJSON's error for a value it
// read but cannot decode: Err is ErrDecodingFailure, Cause the
// Transcoder's error, RetryAttempts and RetryReasons the read's; the read
// succeeded, so Status is 0, and Node, Vbucket and Opaque are not filled
// in.
type KeyValueError struct {
	// Op is the operation ("Get", "Upsert", ...); OpCode its last opcode.
	Op     string
	OpCode OpCode
	Key    string
	// Bucket, Scope and Collection name where the document lives.
	Bucket, Scope, Collection string
	// Vbucket, Node, Opaque, Status, ErrorName, ErrorDescription,
	// ServerContext and ServerErrorRef describe one attempt: the last one
	// whose request was sent (gocb's LastDispatchedTo). Node and Vbucket
	// are where it went, Opaque its request's id on that connection,
	// Status what the server answered to it (0 when no answer came: its
	// connection ended, or its deadline passed first), with the node's
	// error-map name and description when the map had them, and the
	// error context the server sent with it. A later attempt that was
	// never sent (its node had no connection, its collection-id lookup
	// failed, ...) shows in Cause, which names its node, and in
	// RetryReasons, never in these fields. When no attempt was sent, Node
	// and Vbucket are where the last one was routed (Node "" when none
	// was: an argument refused, no route) and the others are zero. An
	// operation that addresses no vbucket (Ping, Stats, Version, Flush,
	// a memcached bucket's key) has Vbucket 0, which Error does not show.
	Vbucket          uint16
	Node             string
	Opaque           uint32
	Status           Status
	ErrorName        string
	ErrorDescription string
	ServerContext    string
	ServerErrorRef   string
	// RetryAttempts (gocb's name) is the number of retries: attempts after the first (0: the
	// operation was tried once, or ended before its first attempt), as in
	// the results' RetryAttempts, and the number Error reports ("after 2
	// retries"). RetryReasons says why they were made. A retry counts
	// whether or not its request reached a connection (see Observer),
	// but not one whose wait the context or Close ended, nor a wait that
	// ran into the deadline: that one was never tried, and its reason is
	// in RetryReasons only if an earlier retry had it too (Status and
	// Cause say what the last attempt failed with).
	RetryAttempts int
	RetryReasons  RetryReasons
	// StatusReason is the retry reason the client's status policy gave
	// Status (KV_LOCKED for LOCKED, KV_ERROR_MAP_RETRY_INDICATED for a
	// status the node's error map says to retry, such as EBUSY), whether
	// or not that retry was then made (RetryReasons has it if one was);
	// RetryReasonUnknown when Status ends an operation or no answer came.
	StatusReason RetryReason
	// Ambiguous is true when the request may have changed data: a
	// mutation written that got no definite answer. False: it changed no
	// data (never applied, or only a read, which may have run).
	Ambiguous bool
	// Err is the sentinel, never nil: the status's or condition's (see
	// the package documentation's table), for a timeout its kind
	// (ErrAmbiguousTimeout, ErrUnambiguousTimeout), for a mutation lost
	// with its connection ErrAmbiguous. Cause is the underlying error.
	Err   error
	Cause error

	// noVbucket: the operation addresses no vbucket; Error names none.
	noVbucket bool
	// parts are Err and Cause as the client made or last changed them
	// (seal): Unwrap's answer, a slice of them, while they are still what
	// those fields hold (samePart), so that errors.Is and errors.As
	// allocate nothing.
	parts [2]error
	// noXerror: Status came on a connection without XERROR; lockTmpFail:
	// the status policy read Status, TMPFAIL, as a lock (statusNote).
	noXerror, lockTmpFail bool
}

func (e *KeyValueError) Error() string {
	m := kverr.Message{
		Op:               e.Op,
		Key:              e.Key,
		Err:              e.Err,
		Status:           uint16(e.Status),
		StatusName:       e.ErrorName,
		ErrorDescription: e.ErrorDescription,
		StatusNote:       statusNote(e.OpCode.wire(), e.Status.wire(), e.noXerror, e.lockTmpFail),
		ServerContext:    e.ServerContext,
		ServerRef:        e.ServerErrorRef,
		Node:             e.Node,
		Vbucket:          e.Vbucket,
		NoVbucket:        e.noVbucket,
		RetryAttempts:    e.RetryAttempts,
		Ambiguous:        e.Ambiguous,
		Cause:            e.Cause,
	}
	if e.Status != 0 && m.StatusName == "" {
		m.StatusName = e.Status.String()
	}
	if e.RetryAttempts > 0 && e.RetryReasons.Len() > 0 {
		m.RetryReasons = e.RetryReasons.String()
	}
	var se *memdx.StatusError
	m.CauseIsStatus = e.Cause != nil && errors.As(e.Cause, &se) && se.Status == e.Status.wire() && e.Cause == error(se)
	if !m.CauseIsStatus && (e.ServerContext != "" || e.ServerErrorRef != "") {
		if se = e.causeRepeatsServer(se); se != nil {
			bare := *se
			bare.Context, bare.Ref = "", ""
			m.CauseServerText, m.CauseServerBare = se.Error(), bare.Error()
		}
	}
	return m.String()
}

// causeRepeatsServer is the status error within e's Cause that says
// ServerContext and ServerErrorRef again (the last answer's: a refused
// retry wraps it, se when errors.As found it; a timeout names it as its
// LastErr, which it does not wrap), or nil: the message says the server's
// words once, beside the status, and leaves them out of the cause's text.
func (e *KeyValueError) causeRepeatsServer(se *memdx.StatusError) *memdx.StatusError {
	same := func(s *memdx.StatusError) bool {
		return s.Context == e.ServerContext && s.Ref == e.ServerErrorRef
	}
	if se != nil && same(se) {
		return se
	}
	var te *retry.TimeoutError
	if errors.As(e.Cause, &te) && errors.As(te.LastErr, &se) && same(se) {
		return se
	}
	return nil
}

// Unwrap returns the sentinel and the cause, so errors.Is and errors.As see
// both. For an error the client made it builds nothing: callers test
// every failure with errors.Is, which calls Unwrap for each sentinel it
// is asked about.
func (e *KeyValueError) Unwrap() []error {
	if samePart(e.parts[0], e.Err) && samePart(e.parts[1], e.Cause) {
		p := e.parts[:]
		if p[1] == nil {
			p = p[:1]
		}
		if p[0] == nil {
			p = p[1:]
		}
		return p
	}
	out := make([]error, 0, 2) // made or changed by the caller
	if e.Err != nil {
		out = append(out, e.Err)
	}
	if e.Cause != nil {
		out = append(out, e.Cause)
	}
	return out
}

// seal makes Unwrap's answer of e what its Err and Cause hold now: the
// client calls it when it made e (newKVError) or changed either after.
func (e *KeyValueError) seal() { e.parts = [2]error{e.Err, e.Cause} }

// samePart reports whether a and b are one interface value, word for
// word: the same dynamic type and the same data. It never compares the
// values themselves, which panics for a type that is not comparable (a
// cause is anybody's error).
func samePart(a, b error) bool {
	return *(*[2]unsafe.Pointer)(unsafe.Pointer(&a)) == *(*[2]unsafe.Pointer)(unsafe.Pointer(&b))
}

// kvErrorParts gives optrace.ErrorType a KeyValueError's sentinel and
// cause, without Unwrap, which allocates for an error made or changed by
// the caller.
func kvErrorParts(err error) (sentinel, cause error, ok bool) {
	if e, ok := err.(*KeyValueError); ok {
		return e.Err, e.Cause, true
	}
	return nil, nil, false
}

func init() { optrace.SetErrorParts(kvErrorParts) }

// Is makes a KeyValueError marked Ambiguous match ErrAmbiguous even when
// its cause does not say so itself.
func (e *KeyValueError) Is(target error) bool { return target == ErrAmbiguous && e.Ambiguous }

// sentinelOf is kverr.SentinelOf, a replica the bucket does not have
// being an argument refused.
func sentinelOf(err error) error { return kverr.SentinelOf(err, vbmap.ErrReplicaOutOfRange) }

// newKVError is the one constructor of *KeyValueError: the error of
// operation o (its last attempt, when it made one) with sentinel (nil: the
// one cause names, sentinelOf) and cause.
func newKVError(o *op, sentinel, cause error) *KeyValueError {
	if sentinel == nil {
		sentinel = sentinelOf(cause)
	}
	e := &KeyValueError{
		Op:               o.name,
		OpCode:           opCodeOf(o.req.OpCode),
		Key:              o.keyStr,
		Vbucket:          o.vb,
		Opaque:           o.opaque,
		Status:           statusOf(o.status),
		ErrorName:        o.errName,
		ErrorDescription: o.errDesc,
		ServerContext:    o.errCtx.Context,
		ServerErrorRef:   o.errCtx.Ref,
		RetryAttempts:    o.st.Attempts(),
		RetryReasons:     retryReasonsOf(o.st.Reasons()),
		StatusReason:     retryReasonOf(o.outcome.Reason),
		Ambiguous:        o.st.Ambiguous() || errors.Is(cause, ErrAmbiguous),
		Err:              sentinel,
		Cause:            cause,
		noVbucket:        o.noVbucket,
		noXerror:         o.noXerror,
		lockTmpFail:      o.status == memdx.StatusTmpFail && o.outcome.Sentinel == ErrDocumentLocked,
	}
	if e.Err == nil {
		e.Err = otherSentinel(cause, e.Ambiguous)
	}
	if o.c != nil {
		e.Bucket = o.c.opts.Bucket
	}
	if o.node != nil {
		e.Node = o.node.Addr()
	}
	if o.coll != nil {
		e.Scope, e.Collection = o.coll.scope, o.coll.name
	}
	e.seal()
	return e
}

// timeoutSentinels and failureSentinels are what an operation's error
// names when its cause names none of the sentinels sentinelOf looks for
// (otherSentinel).
var (
	timeoutSentinels = []error{ErrAmbiguousTimeout, ErrUnambiguousTimeout, ErrTimeout}
	failureSentinels = []error{ErrConnectionClosed, ErrOverloaded, ErrProtocol, ErrUnresponsive, ErrClosed, ErrNotRetried}
)

// otherSentinel is the Err of an error whose cause names no sentinel
// sentinelOf finds (ambiguous: the request may have been applied), so that
// KeyValueError.Err is never nil: a timeout's kind; else ErrAmbiguous when
// the request may have been applied (its connection ended with it in
// flight); else the connection's or the retry's failure the cause matches;
// else ErrServerFailure.
func otherSentinel(cause error, ambiguous bool) error {
	for _, s := range timeoutSentinels {
		if errors.Is(cause, s) {
			return s
		}
	}
	if ambiguous {
		return ErrAmbiguous
	}
	for _, s := range failureSentinels {
		if errors.Is(cause, s) {
			return s
		}
	}
	return ErrServerFailure
}

// refused is the error of operation name (opc: its opcode, 0 when it has
// none of its own; col and key: what it addressed, when anything) that
// ended before its operation record existed, or had none of its own: an
// argument or a feature refused, the client closed, a scan that stopped,
// a replica read (of any copy or all) that found none.
func (c *Client) refused(name string, opc memdx.OpCode, col *Collection, key string, sentinel, cause error) *KeyValueError {
	o := op{opHot: opHot{c: c, name: name, coll: col, keyStr: key}}
	o.req.OpCode = opc
	return newKVError(&o, sentinel, cause)
}
