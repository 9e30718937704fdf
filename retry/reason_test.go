package retry

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestReasonTable encodes RFC 0049 revision 16's RetryReason table row by row:
// name, "Non-idempotent Retry", "Always retry". The last five rows are "todo"
// in the RFC; their values are this package's documented choice.
func TestReasonTable(t *testing.T) {
	rows := []struct {
		reason        Reason
		name          string
		nonIdempotent bool
		always        bool
	}{
		{ReasonUnknown, "UNKNOWN", false, false},
		{ReasonSocketNotAvailable, "SOCKET_NOT_AVAILABLE", true, false},
		{ReasonServiceNotAvailable, "SERVICE_NOT_AVAILABLE", true, false},
		{ReasonNodeNotAvailable, "NODE_NOT_AVAILABLE", true, false},
		{ReasonKVNotMyVbucket, "KV_NOT_MY_VBUCKET", true, true},
		{ReasonKVCollectionOutdated, "KV_COLLECTION_OUTDATED", true, true},
		{ReasonKVErrorMapRetryIndicated, "KV_ERROR_MAP_RETRY_INDICATED", true, false},
		{ReasonKVLocked, "KV_LOCKED", true, false},
		{ReasonKVTemporaryFailure, "KV_TEMPORARY_FAILURE", true, false},
		{ReasonKVSyncWriteInProgress, "KV_SYNC_WRITE_IN_PROGRESS", true, false},
		{ReasonKVSyncWriteReCommitInProgress, "KV_SYNC_WRITE_RE_COMMIT_IN_PROGRESS", true, false},
		{ReasonServiceResponseCodeIndicated, "SERVICE_RESPONSE_CODE_INDICATED", true, false},
		{ReasonSocketClosedWhileInFlight, "SOCKET_CLOSED_WHILE_IN_FLIGHT", false, false},
		{ReasonCircuitBreakerOpen, "CIRCUIT_BREAKER_OPEN", true, false},
		{ReasonQueryPreparedStatementFailure, "QUERY_PREPARED_STATEMENT_FAILURE", true, false},
		{ReasonQueryIndexNotFound, "QUERY_INDEX_NOT_FOUND", true, false},
		{ReasonAnalyticsTemporaryFailure, "ANALYTICS_TEMPORARY_FAILURE", true, false},
		{ReasonSearchTooManyRequests, "SEARCH_TOO_MANY_REQUESTS", true, false},
		{ReasonViewsTemporaryFailure, "VIEWS_TEMPORARY_FAILURE", true, false},
		{ReasonViewsNoActivePartition, "VIEWS_NO_ACTIVE_PARTITION", true, true},
		// "todo" in the RFC: chosen (see the package doc).
		{ReasonAuthenticationError, "AUTHENTICATION_ERROR", true, false},
		{ReasonTLSError, "TLS_ERROR", true, false},
		{ReasonBucketAccessError, "BUCKET_ACCESS_ERROR", true, false},
		{ReasonScopeNotFound, "SCOPE_NOT_FOUND", true, false},
		{ReasonCollectionNotFound, "COLLECTION_NOT_FOUND", true, false},
	}
	require.Len(t, rows, 25, "RFC 0049 rev 16 has 25 reasons")
	// Every reason the package defines is in the table, in the RFC's order.
	var inTable []Reason
	for _, r := range rows {
		inTable = append(inTable, r.reason)
	}
	assert.Equal(t, inTable, Reasons())

	for _, r := range rows {
		t.Run(r.name, func(t *testing.T) {
			assert.True(t, r.reason.Valid())
			assert.Equal(t, r.name, r.reason.String())
			assert.Equal(t, r.nonIdempotent, r.reason.AllowsNonIdempotentRetry(), "Non-idempotent Retry")
			assert.Equal(t, r.always, r.reason.AlwaysRetry(), "Always retry")
		})
	}
}

func TestTerminalReasons(t *testing.T) {
	var terminal []Reason
	for _, r := range Reasons() {
		if r.Terminal() {
			terminal = append(terminal, r)
		}
	}
	assert.Equal(t, []Reason{ReasonAuthenticationError, ReasonTLSError, ReasonBucketAccessError,
		ReasonScopeNotFound, ReasonCollectionNotFound}, terminal)
}

func TestReasonOutOfRange(t *testing.T) {
	r := Reason(200)
	assert.False(t, r.Valid())
	assert.Equal(t, "REASON(200)", r.String())
	assert.False(t, r.AllowsNonIdempotentRetry())
	assert.False(t, r.AlwaysRetry())
	assert.False(t, r.Terminal())
	assert.Equal(t, ReasonSet(0), ReasonSet(0).With(r))
	assert.False(t, ReasonSet(^uint64(0)).Has(r))
}

func TestReasonSet(t *testing.T) {
	var s ReasonSet
	assert.Equal(t, 0, s.Len())
	assert.Equal(t, "[]", s.String())
	s = s.With(ReasonKVNotMyVbucket).With(ReasonKVLocked).With(ReasonKVNotMyVbucket).With(ReasonCollectionNotFound)
	assert.Equal(t, 3, s.Len())
	assert.True(t, s.Has(ReasonKVLocked))
	assert.False(t, s.Has(ReasonUnknown))
	assert.Equal(t, []Reason{ReasonKVNotMyVbucket, ReasonKVLocked, ReasonCollectionNotFound}, slices.Collect(s.All()))
	assert.Equal(t, "[KV_NOT_MY_VBUCKET KV_LOCKED COLLECTION_NOT_FOUND]", s.String())
	// Breaking out of the iteration stops it.
	n := 0
	for range s.All() {
		n++
		break
	}
	assert.Equal(t, 1, n)
	// Every reason fits.
	var all ReasonSet
	for _, r := range Reasons() {
		all = all.With(r)
	}
	assert.Equal(t, len(Reasons()), all.Len())
	assert.Equal(t, Reasons(), slices.Collect(all.All()))
}
