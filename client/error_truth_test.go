package client

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvwire/kvwire/memdx"
	"github.com/kvwire/kvwire/mockcluster"
)

// A Get in flight when the client closes is not sent again: its error
// must not report a retry ("after 1 retry (for [...])") that was decided
// but never made.
func TestErrClosedDoesNotCountARetryNeverSent(t *testing.T) {
	t.Parallel()
	mc := newMock(t, mockcluster.Options{Nodes: 1})
	c := connect(t, mc, nil)
	held := mc.AddFault(mockcluster.Fault{Match: mockcluster.Match{OpCodes: []memdx.OpCode{memdx.OpGet}},
		Action: mockcluster.Action{Delay: time.Hour}})
	t.Cleanup(held.Remove)
	errs := make(chan error, 1)
	go func() {
		_, err := c.DefaultCollection().Get(context.Background(), "k", nil)
		errs <- err
	}()
	require.Eventually(t, func() bool { return held.Hits() == 1 }, time.Minute, time.Millisecond)
	require.NoError(t, c.Close())
	err := <-errs
	require.ErrorIs(t, err, ErrClosed)
	var kv *KeyValueError
	require.True(t, errors.As(err, &kv))
	assert.Equal(t, 0, kv.RetryAttempts, "no retry was sent: %v", err)
	assert.NotContains(t, err.Error(), "retry", "no retry was sent")
	assert.Equal(t, 1, held.Hits(), "sent once")
}

// Ping, Stats and Version address a node, not a vbucket: their errors
// must not name one ("vb=0").
func TestNodeOperationErrorsNameNoVbucket(t *testing.T) {
	t.Parallel()
	mc := newMock(t, mockcluster.Options{Nodes: 1})
	c := connect(t, mc, nil)
	f := mc.AddFault(mockcluster.Fault{Match: mockcluster.Match{OpCodes: []memdx.OpCode{memdx.OpNoop, memdx.OpStat, memdx.OpVersion}},
		Action: mockcluster.Action{Status: memdx.StatusNoAccess}})
	t.Cleanup(f.Remove)
	ping := c.Ping(context.Background())
	require.Len(t, ping, 1)
	_, statsErr := c.Stats(context.Background(), "", nil)
	_, versionErr := c.Version(context.Background(), nil)
	for name, err := range map[string]error{"Ping": ping[0].Err, "Stats": statsErr, "Version": versionErr} {
		require.Error(t, err, name)
		assert.Contains(t, err.Error(), "node="+mc.Node(0).Addr(), name)
		assert.NotContains(t, err.Error(), "vb=", "%s has no vbucket: %v", name, err)
	}
}

// A memcached bucket has no vbuckets: a key's error names its node only.
func TestMemcachedBucketErrorsNameNoVbucket(t *testing.T) {
	t.Parallel()
	mc := newMemcachedBucketMock(t)
	c, err := connectString(t, mc.HTTPConnString()+"/cache", nil)
	require.NoError(t, err)
	_, err = c.DefaultCollection().Get(context.Background(), "missing", nil)
	require.ErrorIs(t, err, ErrDocumentNotFound)
	assert.Contains(t, err.Error(), "node=")
	assert.NotContains(t, err.Error(), "vb=", "a memcached bucket has no vbuckets: %v", err)
}

// A range scan whose request's connection ended with it in flight changed
// no data: its error must not say "may have been applied" nor match
// ErrAmbiguous.
func TestScanCutOffIsNotAmbiguous(t *testing.T) {
	t.Parallel()
	for _, opc := range []memdx.OpCode{memdx.OpRangeScanCreate, memdx.OpRangeScanContinue} {
		t.Run(opc.String(), func(t *testing.T) {
			t.Parallel()
			mc := newMock(t, mockcluster.Options{Nodes: 1})
			c := connect(t, mc, nil)
			col := c.DefaultCollection()
			for i := range 8 {
				_, err := col.Upsert(context.Background(), "scan-"+string(rune('a'+i)), []byte("v"), nil)
				require.NoError(t, err)
			}
			f := mc.AddFault(mockcluster.Fault{Match: mockcluster.Match{OpCodes: []memdx.OpCode{opc}},
				Action: mockcluster.Action{Close: mockcluster.CloseAfterApply}})
			t.Cleanup(f.Remove)
			res, err := col.Scan(context.Background(), RangeScan{}, &ScanOptions{Concurrency: 1, Timeout: time.Minute})
			if err == nil {
				for res.Next() {
				}
				err = res.Err()
				res.Close()
			}
			require.Error(t, err)
			assert.NotErrorIs(t, err, ErrAmbiguous, "%v", err)
			assert.NotContains(t, err.Error(), "may have been applied")
			if opc == memdx.OpRangeScanCreate {
				assert.Contains(t, err.Error(), "may stay on the server", "says what the cut-off create may have left")
			}
		})
	}
}

// A range-scan create that timed out after it was written may have opened
// a scan: its error says it changed no data (no document), never "not
// applied".
func TestScanCreateTimeoutDoesNotSayNotApplied(t *testing.T) {
	t.Parallel()
	mc := newMock(t, mockcluster.Options{Nodes: 1})
	c := connect(t, mc, nil)
	col := c.DefaultCollection()
	_, err := col.Upsert(context.Background(), "scan-a", []byte("v"), nil)
	require.NoError(t, err)
	f := mc.AddFault(mockcluster.Fault{Match: mockcluster.Match{OpCodes: []memdx.OpCode{memdx.OpRangeScanCreate}},
		Action: mockcluster.Action{Delay: time.Hour}})
	t.Cleanup(f.Remove)
	res, err := col.Scan(context.Background(), RangeScan{}, &ScanOptions{Concurrency: 1, Timeout: 50 * time.Millisecond})
	if err == nil {
		for res.Next() {
		}
		err = res.Err()
		res.Close()
	}
	require.ErrorIs(t, err, ErrTimeout)
	assert.NotErrorIs(t, err, ErrAmbiguous, "%v", err)
	assert.Contains(t, err.Error(), "retry: unambiguous timeout (the request changed no data)")
	assert.Contains(t, err.Error(), "may stay on the server", "says what the timed-out create may have left")
	assert.NotContains(t, err.Error(), "not applied", "a create that may have opened a scan: %v", err)
	assert.ErrorIs(t, err, ErrUnambiguousTimeout)
}
