package client

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvwire/kvwire/internal/faultnode"
	"github.com/kvwire/kvwire/memdx"
	"github.com/kvwire/kvwire/mockcluster"
)

// proxiedScan starts a one-node mock with vbs vbuckets and n documents
// "doc-000".. behind a proxy, and connects to it through the proxy.
func proxiedScan(t *testing.T, vbs, n int) (*mockcluster.Cluster, *faultnode.Proxy, *Collection) {
	t.Helper()
	mc := newMock(t, mockcluster.Options{Nodes: 1, Buckets: []mockcluster.BucketOptions{{Name: mockcluster.DefaultBucket, NumVbuckets: vbs}}})
	ps, _ := proxyEach(t, mc)
	c := connectVia(t, ps[0].Addr(), nil)
	col := c.DefaultCollection()
	scanDocs(t, col, n)
	return mc, ps[0], col
}

// keysAnswer is a key-only continue answer to req carrying keys, with
// status st.
func keysAnswer(req *memdx.Packet, st memdx.Status, keys ...string) memdx.Packet {
	var v []byte
	for _, k := range keys {
		v = memdx.AppendRangeScanKey(v, []byte(k))
	}
	p := faultnode.Reply(req, st, v)
	p.Extras = memdx.AppendRangeScanContent(nil, memdx.RangeScanKeys)
	return p
}

// scanUntilError runs a scan and returns the keys it gave, failing the
// test on a key given twice (a server repeating keys would otherwise give
// them without end), and its error.
func scanUntilError(t *testing.T, col *Collection, st ScanType, o *ScanOptions) ([]string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := col.Scan(ctx, st, o)
	require.NoError(t, err)
	defer res.Close()
	seen := map[string]bool{}
	var got []string
	for res.Next() {
		id := res.Item().ID
		require.False(t, seen[id], "key %q given twice", id)
		seen[id] = true
		got = append(got, id)
	}
	return got, res.Err()
}

// A server whose range scan continues lie: each answer repeats the same
// five keys (the stream never increases, and never completes), or carries
// a key outside the range scanned, or more keys than the continue asked
// for. The scan ends with ErrServerFailure naming what was wrong, gives
// the caller no key twice and none outside the range, and leaves no scan
// open on the server.
func TestScanRefusesKeysAServerMustNotSend(t *testing.T) {
	for _, tc := range []struct {
		name string
		lie  func(req *memdx.Packet, n int) memdx.Packet // the n-th continue's answer
		want string
	}{
		{"repeated keys", func(req *memdx.Packet, _ int) memdx.Packet {
			return keysAnswer(req, memdx.StatusRangeScanMore, "doc-000", "doc-001", "doc-002", "doc-003", "doc-004")
		}, `not after the key before it`},
		{"key outside the range", func(req *memdx.Packet, _ int) memdx.Packet {
			return keysAnswer(req, memdx.StatusRangeScanComplete, "doc-000", "zzz-foreign")
		}, `"zzz-foreign" is outside the range scanned`},
		{"more keys than asked for", func(req *memdx.Packet, _ int) memdx.Packet {
			keys := make([]string, 6)
			for i := range keys {
				keys[i] = fmt.Sprintf("doc-%03d", i)
			}
			return keysAnswer(req, memdx.StatusRangeScanComplete, keys...)
		}, `more than the 5 items asked for`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mc, p, col := proxiedScan(t, 1, 20)
			n := 0
			p.OnResponse(func(req, resp *memdx.Packet) faultnode.Action {
				if req.OpCode != memdx.OpRangeScanContinue {
					return faultnode.Action{}
				}
				n++
				return faultnode.Action{Send: []memdx.Packet{tc.lie(req, n)}}
			})
			got, err := scanUntilError(t, col, PrefixScan{Prefix: "doc-"}, &ScanOptions{IDsOnly: true, BatchItemLimit: 5})
			require.ErrorIs(t, err, ErrServerFailure)
			require.ErrorIs(t, err, memdx.ErrMalformed)
			assert.Contains(t, err.Error(), tc.want)
			assert.Regexp(t, `vb(ucket)?[ =]0\b`, err.Error(), "names the vbucket")
			for _, k := range got {
				assert.True(t, strings.HasPrefix(k, "doc-"), k)
			}
			p.OnResponse(nil)
			waitFor(t, "the server's scan cancelled", func() bool { return mc.OpenRangeScans() == 0 })
		})
	}
}

// A sampling scan's continues lie: a key twice in one vbucket's sample.
// The scan ends with ErrServerFailure naming what was wrong.
func TestSamplingScanRefusesKeysAServerMustNotSend(t *testing.T) {
	for _, tc := range []struct {
		name string
		keys []string
		want string
	}{
		{"a key twice", []string{"doc-001", "doc-002", "doc-001"}, `returned key "doc-001" twice`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, p, col := proxiedScan(t, 1, 20)
			p.OnResponse(func(req, resp *memdx.Packet) faultnode.Action {
				if req.OpCode != memdx.OpRangeScanContinue {
					return faultnode.Action{}
				}
				return faultnode.Action{Send: []memdx.Packet{keysAnswer(req, memdx.StatusRangeScanComplete, tc.keys...)}}
			})
			_, err := scanUntilError(t, col, SamplingScan{Limit: 3, Seed: 1}, &ScanOptions{IDsOnly: true})
			require.ErrorIs(t, err, ErrServerFailure)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

// kv_engine samples a vbucket holding more documents than the samples asked
// for by keeping each with probability samples/documents (a Bernoulli draw
// per key, RangeScan::skipItem), so a vbucket's sample may hold more keys
// than the Limit: the scan takes them and returns Limit documents, no
// error.
func TestSamplingScanTakesAVbucketSampleLongerThanItsLimit(t *testing.T) {
	_, p, col := proxiedScan(t, 1, 20)
	p.OnResponse(func(req, resp *memdx.Packet) faultnode.Action {
		if req.OpCode != memdx.OpRangeScanContinue {
			return faultnode.Action{}
		}
		return faultnode.Action{Send: []memdx.Packet{keysAnswer(req, memdx.StatusRangeScanComplete,
			"doc-001", "doc-005", "doc-009", "doc-013")}}
	})
	got, err := scanUntilError(t, col, SamplingScan{Limit: 3, Seed: 1}, &ScanOptions{IDsOnly: true})
	require.NoError(t, err)
	assert.Equal(t, []string{"doc-001", "doc-005", "doc-009"}, got)
}
