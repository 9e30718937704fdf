package client

import (
	"testing"

	"github.com/kvwire/kvwire/conn"
	"github.com/kvwire/kvwire/internal/cluster"
	"github.com/kvwire/kvwire/internal/subdoc"
	"github.com/kvwire/kvwire/internal/transcode"
	"github.com/kvwire/kvwire/memdx"
	"github.com/kvwire/kvwire/retry"
	"github.com/kvwire/kvwire/vbmap"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Client's statuses have the values and names of the codec's: convert.go
// converts by casting.
func TestStatusesMatchTheCodec(t *testing.T) {
	for _, c := range []struct {
		public Status
		wire   memdx.Status
	}{
		{StatusSuccess, memdx.StatusSuccess},
		{StatusKeyNotFound, memdx.StatusKeyNotFound},
		{StatusKeyExists, memdx.StatusKeyExists},
		{StatusTooBig, memdx.StatusTooBig},
		{StatusInvalidArgs, memdx.StatusInvalidArgs},
		{StatusNotStored, memdx.StatusNotStored},
		{StatusBadDelta, memdx.StatusBadDelta},
		{StatusNotMyVbucket, memdx.StatusNotMyVbucket},
		{StatusNoBucket, memdx.StatusNoBucket},
		{StatusLocked, memdx.StatusLocked},
		{StatusNotLocked, memdx.StatusNotLocked},
		{StatusAuthError, memdx.StatusAuthError},
		{StatusNoAccess, memdx.StatusNoAccess},
		{StatusUnknownCommand, memdx.StatusUnknownCommand},
		{StatusOutOfMemory, memdx.StatusOutOfMemory},
		{StatusNotSupported, memdx.StatusNotSupported},
		{StatusInternalError, memdx.StatusInternalError},
		{StatusBusy, memdx.StatusBusy},
		{StatusTmpFail, memdx.StatusTmpFail},
		{StatusUnknownCollection, memdx.StatusUnknownCollection},
		{StatusUnknownScope, memdx.StatusUnknownScope},
		{StatusDurabilityInvalidLevel, memdx.StatusDurabilityInvalidLevel},
		{StatusDurabilityImpossible, memdx.StatusDurabilityImpossible},
		{StatusSyncWriteInProgress, memdx.StatusSyncWriteInProgress},
		{StatusSyncWriteAmbiguous, memdx.StatusSyncWriteAmbiguous},
		{StatusSyncWriteReCommitInProgress, memdx.StatusSyncWriteReCommitInProgress},
		{StatusRangeScanCancelled, memdx.StatusRangeScanCancelled},
		{StatusVbUUIDNotEqual, memdx.StatusVbUUIDNotEqual},
		{StatusSubdocPathNotFound, memdx.StatusSubdocPathNotFound},
		{StatusSubdocPathMismatch, memdx.StatusSubdocPathMismatch},
		{StatusSubdocPathInvalid, memdx.StatusSubdocPathInvalid},
		{StatusSubdocPathTooBig, memdx.StatusSubdocPathTooBig},
		{StatusSubdocDocTooDeep, memdx.StatusSubdocDocTooDeep},
		{StatusSubdocCantInsert, memdx.StatusSubdocCantInsert},
		{StatusSubdocNotJSON, memdx.StatusSubdocNotJSON},
		{StatusSubdocBadRange, memdx.StatusSubdocBadRange},
		{StatusSubdocBadDelta, memdx.StatusSubdocBadDelta},
		{StatusSubdocPathExists, memdx.StatusSubdocPathExists},
		{StatusSubdocValueTooDeep, memdx.StatusSubdocValueTooDeep},
		{StatusSubdocInvalidCombo, memdx.StatusSubdocInvalidCombo},
		{StatusSubdocMultiPathFailure, memdx.StatusSubdocMultiPathFailure},
		{StatusSubdocSuccessDeleted, memdx.StatusSubdocSuccessDeleted},
		{StatusSubdocXattrInvalidFlagCombo, memdx.StatusSubdocXattrInvalidFlagCombo},
		{StatusSubdocXattrInvalidKeyCombo, memdx.StatusSubdocXattrInvalidKeyCombo},
		{StatusSubdocXattrUnknownMacro, memdx.StatusSubdocXattrUnknownMacro},
		{StatusSubdocXattrUnknownVattr, memdx.StatusSubdocXattrUnknownVattr},
		{StatusSubdocXattrCantModifyVattr, memdx.StatusSubdocXattrCantModifyVattr},
		{StatusSubdocMultiPathFailureDeleted, memdx.StatusSubdocMultiPathFailureDeleted},
		{StatusSubdocInvalidXattrOrder, memdx.StatusSubdocInvalidXattrOrder},
		{StatusSubdocXattrUnknownVattrMacro, memdx.StatusSubdocXattrUnknownVattrMacro},
		{StatusSubdocCanOnlyReviveDeletedDocuments, memdx.StatusSubdocCanOnlyReviveDeletedDocuments},
		{StatusSubdocDeletedDocumentCantHaveValue, memdx.StatusSubdocDeletedDocumentCantHaveValue},
		{StatusSubdocFieldNotBinaryValue, memdx.StatusSubdocFieldNotBinaryValue},
	} {
		assert.Equal(t, uint16(c.wire), uint16(c.public), "%s", c.wire)
		assert.Equal(t, c.wire.String(), c.public.String())
		assert.Equal(t, c.public, statusOf(c.wire))
	}
	assert.Equal(t, "KEY_ENOENT", StatusKeyNotFound.String())
	assert.Equal(t, "STATUS(0x7ff1)", Status(0x7ff1).String(), "a status with no name")
	assert.Equal(t, "GET_META", opCodeOf(memdx.OpGetMeta).String())
}

// Formats, common flags and datatype bits are package transcode's and the
// codec's, value for value: FormatOf, Format.String and Datatype.String
// convert by casting.
func TestValueTypesMatchTranscodeAndTheCodec(t *testing.T) {
	for public, internal := range map[Format]transcode.Format{
		FormatUnknown: transcode.FormatUnknown, FormatPrivate: transcode.FormatPrivate,
		FormatJSON: transcode.FormatJSON, FormatBinary: transcode.FormatBinary, FormatString: transcode.FormatString,
	} {
		assert.Equal(t, uint8(internal), uint8(public))
		assert.Equal(t, internal.String(), public.String())
	}
	assert.Equal(t, transcode.FlagsJSON, CommonFlagsJSON)
	assert.Equal(t, transcode.FlagsBinary, CommonFlagsBinary)
	assert.Equal(t, transcode.FlagsString, CommonFlagsString)
	for public, wire := range map[Datatype]memdx.Datatype{
		DatatypeJSON: memdx.DatatypeJSON, DatatypeSnappy: memdx.DatatypeSnappy, DatatypeXattr: memdx.DatatypeXattr,
	} {
		assert.Equal(t, uint8(wire), uint8(public))
	}
	assert.Equal(t, "raw", Datatype(0).String())
	assert.Equal(t, "json|xattr|0x08", (DatatypeJSON | DatatypeXattr | 0x08).String())
}

// StoreSemantics are package subdoc's, value for value: MutateIn converts
// by casting.
func TestStoreSemanticsMatchSubdoc(t *testing.T) {
	assert.Equal(t, uint8(subdoc.StoreReplace), uint8(StoreSemanticsReplace))
	assert.Equal(t, uint8(subdoc.StoreUpsert), uint8(StoreSemanticsUpsert))
	assert.Equal(t, uint8(subdoc.StoreInsert), uint8(StoreSemanticsInsert))
	assert.Equal(t, subdoc.MaxSpecs, MaxSubdocSpecs)
}

func TestDurabilityLevelsMatchTheCodec(t *testing.T) {
	for _, c := range []struct {
		public DurabilityLevel
		wire   memdx.DurabilityLevel
	}{
		{DurabilityNone, memdx.DurabilityNone},
		{DurabilityMajority, memdx.DurabilityMajority},
		{DurabilityMajorityAndPersistOnMaster, memdx.DurabilityMajorityAndPersistOnMaster},
		{DurabilityPersistToMajority, memdx.DurabilityPersistToMajority},
	} {
		assert.Equal(t, c.wire, c.public.wire())
		assert.Equal(t, c.wire.String(), c.public.String())
	}
}

// Every retry reason has a client constant of the same value and name, in
// the same order, and the same properties.
func TestRetryReasonsMatchRetry(t *testing.T) {
	named := []struct {
		public   RetryReason
		internal retry.Reason
	}{
		{RetryReasonUnknown, retry.ReasonUnknown},
		{RetryReasonSocketNotAvailable, retry.ReasonSocketNotAvailable},
		{RetryReasonServiceNotAvailable, retry.ReasonServiceNotAvailable},
		{RetryReasonNodeNotAvailable, retry.ReasonNodeNotAvailable},
		{RetryReasonKVNotMyVbucket, retry.ReasonKVNotMyVbucket},
		{RetryReasonKVCollectionOutdated, retry.ReasonKVCollectionOutdated},
		{RetryReasonKVErrorMapRetryIndicated, retry.ReasonKVErrorMapRetryIndicated},
		{RetryReasonKVLocked, retry.ReasonKVLocked},
		{RetryReasonKVTemporaryFailure, retry.ReasonKVTemporaryFailure},
		{RetryReasonKVSyncWriteInProgress, retry.ReasonKVSyncWriteInProgress},
		{RetryReasonKVSyncWriteReCommitInProgress, retry.ReasonKVSyncWriteReCommitInProgress},
		{RetryReasonServiceResponseCodeIndicated, retry.ReasonServiceResponseCodeIndicated},
		{RetryReasonSocketClosedWhileInFlight, retry.ReasonSocketClosedWhileInFlight},
		{RetryReasonCircuitBreakerOpen, retry.ReasonCircuitBreakerOpen},
		{RetryReasonQueryPreparedStatementFailure, retry.ReasonQueryPreparedStatementFailure},
		{RetryReasonQueryIndexNotFound, retry.ReasonQueryIndexNotFound},
		{RetryReasonAnalyticsTemporaryFailure, retry.ReasonAnalyticsTemporaryFailure},
		{RetryReasonSearchTooManyRequests, retry.ReasonSearchTooManyRequests},
		{RetryReasonViewsTemporaryFailure, retry.ReasonViewsTemporaryFailure},
		{RetryReasonViewsNoActivePartition, retry.ReasonViewsNoActivePartition},
		{RetryReasonAuthenticationError, retry.ReasonAuthenticationError},
		{RetryReasonTLSError, retry.ReasonTLSError},
		{RetryReasonBucketAccessError, retry.ReasonBucketAccessError},
		{RetryReasonScopeNotFound, retry.ReasonScopeNotFound},
		{RetryReasonCollectionNotFound, retry.ReasonCollectionNotFound},
	}
	all := retry.Reasons()
	require.Len(t, named, len(all), "a reason of package retry has no client constant")
	require.Len(t, AllRetryReasons(), len(all))
	for i, r := range all {
		c := named[i]
		assert.Equal(t, r, c.internal, "constants out of retry's order at %d", i)
		assert.Equal(t, uint8(r), uint8(c.public), "%s", r)
		assert.Equal(t, c.public, AllRetryReasons()[i])
		assert.Equal(t, r.String(), c.public.String())
		assert.Equal(t, r.AllowsNonIdempotentRetry(), c.public.AllowsNonIdempotentRetry(), "%s", r)
		assert.Equal(t, r.AlwaysRetry(), c.public.AlwaysRetry(), "%s", r)
		assert.Equal(t, r.Terminal(), c.public.Terminal(), "%s", r)
	}
	assert.Equal(t, "REASON(200)", RetryReason(200).String())
}

func TestRetryReasonsSet(t *testing.T) {
	var s RetryReasons
	assert.Equal(t, "[]", s.String())
	s = s.With(RetryReasonKVLocked).With(RetryReasonKVNotMyVbucket).With(RetryReasonKVLocked).With(RetryReason(200))
	assert.Equal(t, 2, s.Len())
	assert.True(t, s.Has(RetryReasonKVLocked))
	assert.False(t, s.Has(RetryReasonKVTemporaryFailure))
	assert.False(t, s.Has(RetryReason(200)))
	var got []RetryReason
	for r := range s.All() {
		got = append(got, r)
	}
	assert.Equal(t, []RetryReason{RetryReasonKVNotMyVbucket, RetryReasonKVLocked}, got)
	assert.Equal(t, "[KV_NOT_MY_VBUCKET KV_LOCKED]", s.String())
	internal := retry.ReasonSet(0).With(retry.ReasonKVNotMyVbucket).With(retry.ReasonKVLocked)
	assert.Equal(t, s, retryReasonsOf(internal))
	assert.Equal(t, internal.String(), s.String())
}

func TestConfigVersionOrder(t *testing.T) {
	a := ConfigVersion{Epoch: 1, Rev: 9}
	b := ConfigVersion{Epoch: 2, Rev: 1}
	assert.True(t, b.Newer(a))
	assert.False(t, a.Newer(b))
	assert.Equal(t, -1, a.Compare(b))
	assert.Equal(t, 0, a.Compare(ConfigVersion{Epoch: 1, Rev: 9}))
	assert.Equal(t, 1, ConfigVersion{Epoch: 1, Rev: 10}.Compare(a))
	assert.Equal(t, "2/1", b.String())
	v := vbmap.Version{Epoch: 3, Rev: 7}
	assert.Equal(t, v.String(), configVersionOf(v).String())
	assert.Equal(t, v, configVersionOf(v).wire())
}

// The figures the documentation gives for internal limits.
func TestDocumentedLimits(t *testing.T) {
	assert.Equal(t, 4096, conn.DefaultMaxPending, "Options.MaxPendingPerConnection's doc says 4096")
	assert.Equal(t, 8<<20, vbmap.MaxConfigSize, "the package doc says configs of at most 8 MiB")
	assert.Equal(t, conn.DefaultProbeAfter, DefaultProbeAfter, "client's health-check defaults are conn's")
	assert.Equal(t, conn.DefaultProbeTimeout, DefaultProbeTimeout)
}

// The endpoint states are the cluster's, value for value.
func TestEndpointStatesMatchTheCluster(t *testing.T) {
	for c, want := range map[cluster.EndpointState]EndpointState{
		cluster.EndpointConnecting: EndpointConnecting, cluster.EndpointConnected: EndpointConnected,
		cluster.EndpointReconnecting: EndpointReconnecting, cluster.EndpointDisconnecting: EndpointDisconnecting,
		cluster.EndpointDisconnected: EndpointDisconnected,
	} {
		if got := endpointStateOf(c); got != want {
			t.Errorf("cluster state %d is %v, want %v", c, got, want)
		}
	}
}
