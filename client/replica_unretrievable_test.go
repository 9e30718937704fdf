package client

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvwire/kvwire/mockcluster"
)

// A read of every copy that finds none, because the document does not
// exist, ends alike whether it wanted any copy or all of them: RFC 0053
// (sdk-rfcs rfc/0053-sdk3-crud.md) defines GetAnyReplica's
// DocumentUnretrievable as the empty answer of GetAllReplicas, and gocb's
// GetAnyReplica is that empty answer. The call's error names the call and
// matches ErrDocumentUnretrievable; ErrDocumentNotFound still matches
// through the copy's error it wraps, for callers that test that.
func TestReadsOfAllCopiesOfAMissingDocumentAreUnretrievable(t *testing.T) {
	t.Parallel()
	mc := newMock(t, mockcluster.Options{})
	col := connect(t, mc, nil).DefaultCollection()
	ctx := context.Background()
	specs := []LookupInSpec{GetSpec("n", nil)}

	for _, tc := range []struct {
		op  string
		run func() error
	}{
		{"GetAnyReplica", func() error { _, err := col.GetAnyReplica(ctx, "missing", nil); return err }},
		{"GetAllReplicas", func() error { _, err := col.GetAllReplicas(ctx, "missing", nil); return err }},
		{"LookupInAnyReplica", func() error { _, err := col.LookupInAnyReplica(ctx, "missing", specs, nil); return err }},
		{"LookupInAllReplicas", func() error { _, err := col.LookupInAllReplicas(ctx, "missing", specs, nil); return err }},
	} {
		err := tc.run()
		require.Error(t, err, tc.op)
		assert.ErrorIs(t, err, ErrDocumentUnretrievable, tc.op)
		assert.ErrorIs(t, err, ErrDocumentNotFound, tc.op)
		var kv *KeyValueError
		require.True(t, errors.As(err, &kv), tc.op)
		assert.Equal(t, tc.op, kv.Op)
		assert.Equal(t, ErrDocumentUnretrievable, kv.Err, tc.op)
		assert.Equal(t, "missing", kv.Key, tc.op)
	}
}
