package client

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvwire/kvwire/memdx"
	"github.com/kvwire/kvwire/mockcluster"
)

// scanDecision is one question a RetryStrategy was asked.
type scanDecision struct {
	op     string
	reason RetryReason
}

// askedStrategy records what it is asked and answers with answer.
func askedStrategy(answer RetryAction) (RetryStrategy, func() []scanDecision) {
	var mu sync.Mutex
	var asked []scanDecision
	s := RetryStrategyFunc(func(req RetryRequest, reason RetryReason) RetryAction {
		mu.Lock()
		defer mu.Unlock()
		asked = append(asked, scanDecision{req.Operation(), reason})
		return answer
	})
	return s, func() []scanDecision {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(asked)
	}
}

// ScanOptions.RetryStrategy decides a create's retries: refusing, it fails
// the scan with the status's sentinel, where the client's strategy would
// have waited.
func TestScanRetryStrategyDecidesTheCreate(t *testing.T) {
	mc, c := scanMock(t, mockcluster.Options{}, 4)
	col := c.DefaultCollection()
	scanDocs(t, col, 10)
	mc.AddFault(mockcluster.Fault{Match: mockcluster.Match{OpCodes: []memdx.OpCode{memdx.OpRangeScanCreate}},
		Action: mockcluster.Action{Status: memdx.StatusTmpFail}, Times: 1})
	strategy, asked := askedStrategy(NoRetry())
	res, err := col.Scan(context.Background(), RangeScan{}, &ScanOptions{RetryStrategy: strategy})
	require.NoError(t, err)
	for res.Next() {
	}
	assert.ErrorIs(t, res.Err(), ErrTemporaryFailure)
	assert.ErrorIs(t, res.Err(), ErrNotRetried)
	assert.Equal(t, []scanDecision{{"Scan", RetryReasonKVTemporaryFailure}}, asked())
}

// A continue the server refuses for a while (TMPFAIL) is sent again to the
// same scan as ScanOptions.RetryStrategy says, and the scan returns every
// document once; refused by the strategy, it fails the scan.
func TestScanRetryStrategyDecidesAContinue(t *testing.T) {
	for _, retries := range []bool{true, false} {
		t.Run(fmt.Sprintf("retries=%v", retries), func(t *testing.T) {
			mc, c := scanMock(t, mockcluster.Options{}, 4)
			col := c.DefaultCollection()
			keys := scanDocs(t, col, 30)
			mc.AddFault(mockcluster.Fault{Match: mockcluster.Match{OpCodes: []memdx.OpCode{memdx.OpRangeScanContinue}},
				Action: mockcluster.Action{Status: memdx.StatusTmpFail}, Times: 2})
			answer := NoRetry()
			if retries {
				answer = RetryAfter(time.Millisecond)
			}
			strategy, asked := askedStrategy(answer)
			res, err := col.Scan(context.Background(), PrefixScan{Prefix: "doc-"}, &ScanOptions{RetryStrategy: strategy, BatchItemLimit: 4})
			require.NoError(t, err)
			var items []ScanItem
			for res.Next() {
				items = append(items, res.Item())
			}
			creates := uint64(0)
			for _, n := range mc.Nodes() {
				creates += n.RequestCount(memdx.OpRangeScanCreate)
			}
			if retries {
				require.NoError(t, res.Err())
				assert.Equal(t, keys, ids(t, items))
				assert.Equal(t, []scanDecision{{"Scan", RetryReasonKVTemporaryFailure}, {"Scan", RetryReasonKVTemporaryFailure}}, asked())
				assert.Equal(t, uint64(4), creates, "the refused continues were sent again, not restarted")
			} else {
				require.ErrorIs(t, res.Err(), ErrTemporaryFailure)
				assert.ErrorIs(t, res.Err(), ErrNotRetried)
				assert.Equal(t, []scanDecision{{"Scan", RetryReasonKVTemporaryFailure}}, asked())
			}
			assert.Zero(t, mc.OpenRangeScans())
		})
	}
}
