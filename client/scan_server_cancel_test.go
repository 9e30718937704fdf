package client

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvwire/kvwire/internal/faultnode"
	"github.com/kvwire/kvwire/memdx"
)

// serverCancels makes p answer the key-only continues that cancelled
// picks (by their count, from 1) as kv_engine answers a continue running
// when it drops the scan (its lifetime ended, its vbucket or bucket went):
// the first keep keys of the batch in a SUCCESS packet, then
// RANGE_SCAN_CANCELLED alone; the rest of the batch is never sent
// (RangeScanContinueResultCancelled sends nothing). before, when set, runs
// before that answer is sent. The node behind p still holds its scan: a
// test does not count the node's open scans after a cancel the proxy
// played.
func serverCancels(t *testing.T, p *faultnode.Proxy, cancelled func(n int) bool, keep int, before func()) {
	var n atomic.Int32
	p.OnResponse(func(req, resp *memdx.Packet) faultnode.Action {
		if req == nil || req.OpCode != memdx.OpRangeScanContinue || resp.Status == memdx.StatusSuccess {
			return faultnode.Action{}
		}
		if !cancelled(int(n.Add(1))) {
			return faultnode.Action{}
		}
		keys, err := memdx.DecodeRangeScanKeys(nil, resp.Value)
		if err != nil {
			t.Errorf("a continue's answer: %v", err)
			return faultnode.Action{}
		}
		var send []memdx.Packet
		if k := min(keep, len(keys)); k > 0 {
			sent := make([]string, k)
			for i, key := range keys[:k] {
				sent[i] = string(key)
			}
			send = append(send, keysAnswer(req, memdx.StatusSuccess, sent...))
		}
		send = append(send, faultnode.Reply(req, memdx.StatusRangeScanCancelled, nil))
		if before != nil {
			before()
		}
		return faultnode.Action{Send: send}
	})
}

// The server drops a vbucket's scan while a continue of it runs and ends
// that continue with RANGE_SCAN_CANCELLED, after some of the batch's keys
// or none: the keys sent before the status are returned, the vbucket's
// scan is created again after the last of them, and the scan returns every
// document once, in order, without error. Nothing is cancelled: the server
// no longer holds the scan.
func TestScanResumesWhenTheServerCancelsItsScan(t *testing.T) {
	for _, tc := range []struct {
		name string
		keep int
	}{
		{"keys before the status", 2},
		{"the status alone", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, p, col := proxiedScan(t, 1, 20)
			keys := make([]string, 20)
			for i := range keys {
				keys[i] = fmt.Sprintf("doc-%03d", i)
			}
			serverCancels(t, p, func(n int) bool { return n == 2 }, tc.keep, nil)
			got, err := scanUntilError(t, col, PrefixScan{Prefix: "doc-"}, &ScanOptions{IDsOnly: true, BatchItemLimit: 4})
			require.NoError(t, err)
			assert.Equal(t, keys, got, "every document once, in key order")
			assert.Equal(t, 2, p.Requests(memdx.OpRangeScanCreate), "the vbucket's scan created again once")
			assert.Zero(t, p.Requests(memdx.OpRangeScanCancel), "no cancel of a scan the server dropped")
		})
	}
}

// A sampling scan whose server drops a vbucket's scan mid-continue samples
// the vbucket again, without the keys already returned: it returns its
// Limit of keys, none twice, without error.
func TestSamplingScanResumesWhenTheServerCancelsItsScan(t *testing.T) {
	_, p, col := proxiedScan(t, 1, 20)
	serverCancels(t, p, func(n int) bool { return n == 2 }, 1, nil)
	got, err := scanUntilError(t, col, SamplingScan{Limit: 10, Seed: 1}, &ScanOptions{IDsOnly: true, BatchItemLimit: 3})
	require.NoError(t, err)
	assert.Len(t, got, 10)
	assert.Equal(t, 2, p.Requests(memdx.OpRangeScanCreate), "the vbucket sampled again once")
}

// The caller cancels the scan's context while a continue is in flight and
// the server answers that continue RANGE_SCAN_CANCELLED: the scan ends as
// the caller's cancellation (ErrRequestCanceled), creates nothing again,
// and cancels the scan the node still holds.
func TestScanCancelledByItsCallerEndsAsCancelledWhateverTheServerAnswers(t *testing.T) {
	mc, p, col := proxiedScan(t, 1, 20)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	serverCancels(t, p, func(n int) bool { return n == 2 }, 0, cancel)
	res, err := col.Scan(ctx, PrefixScan{Prefix: "doc-"}, &ScanOptions{IDsOnly: true, BatchItemLimit: 4})
	require.NoError(t, err)
	for res.Next() {
	}
	require.ErrorIs(t, res.Err(), ErrRequestCanceled)
	assert.ErrorIs(t, res.Close(), ErrRequestCanceled)
	assert.Equal(t, 1, p.Requests(memdx.OpRangeScanCreate), "no scan created again")
	// The scan's goroutines have ended (Next returned false), their
	// cancels answered.
	assert.Equal(t, 1, p.Requests(memdx.OpRangeScanCancel), "the node's scan cancelled")
	assert.Zero(t, mc.OpenRangeScans())
}

// A server that drops the vbucket's scan at every continue, before any
// key, ends the scan once it was created again 16 times in a row without
// progress: with ErrServerFailure naming RANGE_SCAN_CANCELLED, not with
// ErrRequestCanceled (the caller cancelled nothing).
func TestScanFailsWhenTheServerKeepsCancellingItsScan(t *testing.T) {
	_, p, col := proxiedScan(t, 1, 20)
	serverCancels(t, p, func(int) bool { return true }, 0, nil)
	got, err := scanUntilError(t, col, PrefixScan{Prefix: "doc-"}, &ScanOptions{IDsOnly: true, BatchItemLimit: 4})
	require.ErrorIs(t, err, ErrServerFailure)
	assert.NotErrorIs(t, err, ErrRequestCanceled)
	assert.Contains(t, err.Error(), "RANGE_SCAN_CANCELLED")
	assert.Contains(t, err.Error(), "without progress")
	assert.Empty(t, got)
	assert.Equal(t, 17, p.Requests(memdx.OpRangeScanCreate), "the first create and 16 restarts")
}
