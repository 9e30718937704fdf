package client

import (
	"context"
	"testing"

	"github.com/kvwire/kvwire/mockcluster"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// MutateIn with StoreSemanticsUpsert and a CAS creates a missing document
// on Couchbase Server (the Mkdoc doc flag; kv_engine checks the CAS only
// against a document it found), and still fails with ErrCasMismatch on an
// existing document whose CAS differs.
func TestMutateInUpsertWithCasCreatesMissing(t *testing.T) {
	mc := newMock(t, mockcluster.Options{})
	col := connect(t, mc, nil).DefaultCollection()
	ctx := context.Background()
	up := []MutateInSpec{UpsertSpec("a", []byte(`1`), nil)}
	opts := &MutateInOptions{StoreSemantic: StoreSemanticsUpsert, Cas: 0x1234}

	_, err := col.MutateIn(ctx, "new", up, opts)
	require.NoError(t, err)
	g, err := col.Get(ctx, "new", nil)
	require.NoError(t, err)
	assert.JSONEq(t, `{"a":1}`, string(g.Value))

	_, err = col.MutateIn(ctx, "new", up, opts)
	assert.ErrorIs(t, err, ErrCasMismatch, "the document exists now: the CAS is checked")
}
