package retry

import (
	"iter"
	"math/bits"
	"strconv"
	"strings"
)

// Reason says why an operation is being handed to the orchestrator: the
// RetryReason of RFC 0049. Every reason knows whether it allows a
// non-idempotent operation to be retried and whether it is always retried,
// whatever the strategy (see the table in the package documentation).
//
// The zero value is ReasonUnknown, which is never retried.
type Reason uint8

// The reasons of RFC 0049 revision 16, in the order of its table. String gives
// the RFC's name (KV_NOT_MY_VBUCKET, ...).
const (
	// ReasonUnknown: an unexpected failure. Never retried, to avoid
	// accidental data loss.
	ReasonUnknown Reason = iota
	// ReasonSocketNotAvailable: no socket was available to write the request
	// into; nothing was sent.
	ReasonSocketNotAvailable
	// ReasonServiceNotAvailable: the service is not available on the node.
	ReasonServiceNotAvailable
	// ReasonNodeNotAvailable: the node the request is routed to is not
	// available.
	ReasonNodeNotAvailable
	// ReasonKVNotMyVbucket: a NOT_MY_VBUCKET (0x07) response.
	ReasonKVNotMyVbucket
	// ReasonKVCollectionOutdated: an UNKNOWN_COLLECTION (0x88) response,
	// which RFC 0049 calls "Collection Outdated".
	ReasonKVCollectionOutdated
	// ReasonKVErrorMapRetryIndicated: a status the client does not know,
	// whose error-map entry indicates a retry.
	ReasonKVErrorMapRetryIndicated
	// ReasonKVLocked: a LOCKED (0x09) response, or what kv_engine answers
	// for a lock on a connection without XERROR (KEY_EEXISTS, ETMPFAIL:
	// which request's status means it is the client's status policy's).
	ReasonKVLocked
	// ReasonKVTemporaryFailure: an ETMPFAIL (0x86) response that is not a
	// lock's.
	ReasonKVTemporaryFailure
	// ReasonKVSyncWriteInProgress: a SYNC_WRITE_IN_PROGRESS (0xa2) response.
	ReasonKVSyncWriteInProgress
	// ReasonKVSyncWriteReCommitInProgress: a SYNC_WRITE_RE_COMMIT_IN_PROGRESS
	// (0xa4) response. (The RFC's response-code list spells it
	// KV_SYNC_RE_COMMIT_IN_PROGRESS; its table's name is used.)
	ReasonKVSyncWriteReCommitInProgress
	// ReasonServiceResponseCodeIndicated: a service's response code asks
	// for a retry.
	ReasonServiceResponseCodeIndicated
	// ReasonSocketClosedWhileInFlight: the connection closed after the
	// request was written and before its response came. The request may
	// have been applied.
	ReasonSocketClosedWhileInFlight
	// ReasonCircuitBreakerOpen: the endpoint's circuit breaker is open and
	// the request was not sent.
	ReasonCircuitBreakerOpen
	// ReasonQueryPreparedStatementFailure: query error 4040, 4050 or 4070.
	ReasonQueryPreparedStatementFailure
	// ReasonQueryIndexNotFound: query error 5000 with
	// "queryport.indexNotFound".
	ReasonQueryIndexNotFound
	// ReasonAnalyticsTemporaryFailure: analytics error 23000, 23003 or 23007.
	ReasonAnalyticsTemporaryFailure
	// ReasonSearchTooManyRequests: search HTTP 429.
	ReasonSearchTooManyRequests
	// ReasonViewsTemporaryFailure: one of the view errors RFC 0049 lists.
	ReasonViewsTemporaryFailure
	// ReasonViewsNoActivePartition: view HTTP 302.
	ReasonViewsNoActivePartition
	// ReasonAuthenticationError: a topology-tracking connection was refused
	// by SASL with AUTH_ERROR (0x20) and has not authenticated since.
	ReasonAuthenticationError
	// ReasonTLSError: a topology-tracking connection failed with an
	// explicitly TLS-related error and has not completed a handshake since.
	ReasonTLSError
	// ReasonBucketAccessError: SELECT_BUCKET for the request's bucket was
	// answered EACCESS (no such bucket, or no rights on it) and has not
	// succeeded since.
	ReasonBucketAccessError
	// ReasonScopeNotFound: the collection manifest, fetched successfully
	// before, has no such scope.
	ReasonScopeNotFound
	// ReasonCollectionNotFound: the collection manifest, fetched
	// successfully before, has no such collection.
	ReasonCollectionNotFound

	numReasons = iota
)

// A ReasonSet holds at most 64 reasons; this fails to compile beyond that.
var _ [64 - numReasons]struct{}

// reasonInfo is one row of RFC 0049's table.
type reasonInfo struct {
	name              string
	nonIdempotentOK   bool
	alwaysRetry       bool
	terminalCondition bool
}

// reasonTable is RFC 0049 revision 16's RetryReason table, row by row. The
// five terminal reasons are "todo" in the RFC; the values here are this
// package's choice (see the package documentation): they describe conditions
// found before anything is sent, so a retry cannot apply a request twice
// (non-idempotent retry allowed), and they are not always retried, so that
// the strategy decides (FailFastOnTerminalErrors fails at once, BestEffort
// waits for the condition to clear until the deadline).
var reasonTable = [numReasons]reasonInfo{
	ReasonUnknown:                       {"UNKNOWN", false, false, false},
	ReasonSocketNotAvailable:            {"SOCKET_NOT_AVAILABLE", true, false, false},
	ReasonServiceNotAvailable:           {"SERVICE_NOT_AVAILABLE", true, false, false},
	ReasonNodeNotAvailable:              {"NODE_NOT_AVAILABLE", true, false, false},
	ReasonKVNotMyVbucket:                {"KV_NOT_MY_VBUCKET", true, true, false},
	ReasonKVCollectionOutdated:          {"KV_COLLECTION_OUTDATED", true, true, false},
	ReasonKVErrorMapRetryIndicated:      {"KV_ERROR_MAP_RETRY_INDICATED", true, false, false},
	ReasonKVLocked:                      {"KV_LOCKED", true, false, false},
	ReasonKVTemporaryFailure:            {"KV_TEMPORARY_FAILURE", true, false, false},
	ReasonKVSyncWriteInProgress:         {"KV_SYNC_WRITE_IN_PROGRESS", true, false, false},
	ReasonKVSyncWriteReCommitInProgress: {"KV_SYNC_WRITE_RE_COMMIT_IN_PROGRESS", true, false, false},
	ReasonServiceResponseCodeIndicated:  {"SERVICE_RESPONSE_CODE_INDICATED", true, false, false},
	ReasonSocketClosedWhileInFlight:     {"SOCKET_CLOSED_WHILE_IN_FLIGHT", false, false, false},
	ReasonCircuitBreakerOpen:            {"CIRCUIT_BREAKER_OPEN", true, false, false},
	ReasonQueryPreparedStatementFailure: {"QUERY_PREPARED_STATEMENT_FAILURE", true, false, false},
	ReasonQueryIndexNotFound:            {"QUERY_INDEX_NOT_FOUND", true, false, false},
	ReasonAnalyticsTemporaryFailure:     {"ANALYTICS_TEMPORARY_FAILURE", true, false, false},
	ReasonSearchTooManyRequests:         {"SEARCH_TOO_MANY_REQUESTS", true, false, false},
	ReasonViewsTemporaryFailure:         {"VIEWS_TEMPORARY_FAILURE", true, false, false},
	ReasonViewsNoActivePartition:        {"VIEWS_NO_ACTIVE_PARTITION", true, true, false},
	ReasonAuthenticationError:           {"AUTHENTICATION_ERROR", true, false, true},
	ReasonTLSError:                      {"TLS_ERROR", true, false, true},
	ReasonBucketAccessError:             {"BUCKET_ACCESS_ERROR", true, false, true},
	ReasonScopeNotFound:                 {"SCOPE_NOT_FOUND", true, false, true},
	ReasonCollectionNotFound:            {"COLLECTION_NOT_FOUND", true, false, true},
}

// Reasons returns every reason this package defines, in the order of RFC
// 0049's table. The caller owns the returned slice.
func Reasons() []Reason {
	out := make([]Reason, numReasons)
	for i := range out {
		out[i] = Reason(i)
	}
	return out
}

// Valid reports whether r is one of the defined reasons.
func (r Reason) Valid() bool { return int(r) < numReasons }

// String gives the RFC 0049 name of the reason, or REASON(n) for a value
// outside the table.
func (r Reason) String() string {
	if !r.Valid() {
		return "REASON(" + strconv.Itoa(int(r)) + ")"
	}
	return reasonTable[r].name
}

// AllowsNonIdempotentRetry reports whether a request that is not idempotent
// may be retried for this reason: true when the request was not sent, or was
// answered with a response saying it was not applied. Undefined reasons
// answer false.
func (r Reason) AllowsNonIdempotentRetry() bool {
	return r.Valid() && reasonTable[r].nonIdempotentOK
}

// AlwaysRetry reports whether the orchestrator retries this reason without
// asking the strategy, with the controlled backoff. Undefined reasons answer
// false.
func (r Reason) AlwaysRetry() bool {
	return r.Valid() && reasonTable[r].alwaysRetry
}

// Terminal reports whether r is one of the five reasons RFC 0049 revision 16
// added for FailFastOnTerminalErrors: AUTHENTICATION_ERROR, TLS_ERROR,
// BUCKET_ACCESS_ERROR, SCOPE_NOT_FOUND, COLLECTION_NOT_FOUND.
func (r Reason) Terminal() bool {
	return r.Valid() && reasonTable[r].terminalCondition
}

// ReasonSet is a set of reasons, the "retry reasons so far" of a request
// (RFC 0049's Set<RetryReason>). It is a value: copying it copies the set,
// and nothing in it allocates.
type ReasonSet uint64

// Has reports whether r is in the set.
func (s ReasonSet) Has(r Reason) bool { return r.Valid() && s&(1<<r) != 0 }

// With returns the set with r added. Undefined reasons are not added.
func (s ReasonSet) With(r Reason) ReasonSet {
	if !r.Valid() {
		return s
	}
	return s | 1<<r
}

// Len is the number of reasons in the set.
func (s ReasonSet) Len() int { return bits.OnesCount64(uint64(s)) }

// All yields the reasons in the set in table order.
func (s ReasonSet) All() iter.Seq[Reason] {
	return func(yield func(Reason) bool) {
		for v := uint64(s); v != 0; v &= v - 1 {
			if !yield(Reason(bits.TrailingZeros64(v))) {
				return
			}
		}
	}
}

// String lists the set like "[KV_LOCKED KV_NOT_MY_VBUCKET]".
func (s ReasonSet) String() string {
	var b strings.Builder
	b.WriteByte('[')
	first := true
	for r := range s.All() {
		if !first {
			b.WriteByte(' ')
		}
		first = false
		b.WriteString(r.String())
	}
	b.WriteByte(']')
	return b.String()
}
