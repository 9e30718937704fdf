package client

import (
	"context"
	"encoding/binary"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvwire/kvwire/memdx"
	"github.com/kvwire/kvwire/mockcluster"
)

// A synchronous write whose caller set no durability timeout sends one of
// 90% of the time the operation has left, so that the server answers
// (SYNC_WRITE_AMBIGUOUS at worst) before the client's deadline instead of
// keeping the write pending for its own, longer default; one the caller set
// is sent as it is.
func TestSyncWriteSendsDurabilityTimeoutWithinOperationTimeout(t *testing.T) {
	mc := newMock(t, mockcluster.Options{})
	c := connect(t, mc, nil)
	col := c.DefaultCollection()

	var mu sync.Mutex
	var sent []int // ms; -1: a durability frame without a timeout
	h := mc.Control(mockcluster.Match{OpCodes: []memdx.OpCode{memdx.OpSet}}, 0, func(r *mockcluster.Request) (mockcluster.Action, bool) {
		_ = memdx.FrameInfos(r.Packet.FramingExtras, func(id uint16, data []byte) error {
			if memdx.RequestFrameID(id) != memdx.FrameDurability {
				return nil
			}
			ms := -1
			if len(data) == 3 {
				ms = int(binary.BigEndian.Uint16(data[1:]))
			}
			mu.Lock()
			sent = append(sent, ms)
			mu.Unlock()
			return nil
		})
		return mockcluster.Action{}, false // the node handles the write
	})
	defer h.Remove()

	ctx := context.Background()
	_, err := col.Upsert(ctx, "k", []byte("v"), &UpsertOptions{Durability: DurabilityMajority, Timeout: time.Second})
	require.NoError(t, err)
	_, err = col.Upsert(ctx, "k", []byte("w"), &UpsertOptions{Durability: DurabilityMajority, Timeout: time.Second,
		DurabilityTimeout: 5 * time.Second})
	require.NoError(t, err)

	mu.Lock()
	defer mu.Unlock()
	require.Len(t, sent, 2)
	assert.LessOrEqual(t, sent[0], 900, "90%% of the 1 s the operation had")
	assert.Greater(t, sent[0], 0, "a durability timeout is sent")
	assert.Equal(t, 5000, sent[1], "the caller's durability timeout")
}

func TestDefaultDurabilityTimeoutRange(t *testing.T) {
	assert.Equal(t, uint16(900), defaultDurabilityTimeout(time.Second))
	assert.Equal(t, uint16(1), defaultDurabilityTimeout(0), "at least 1 ms: 0 would mean the server's default")
	assert.Equal(t, uint16(1), defaultDurabilityTimeout(-time.Second))
	assert.Equal(t, uint16(65534), defaultDurabilityTimeout(time.Hour), "capped to what the frame can carry")
}

// An operation timeout so long that 90% of it overflows a time.Duration
// when computed as left*9/10 (over some 32 years: a caller's "no timeout",
// a century, say) still asks the server for the longest durability timeout
// the frame carries, not 1 ms: the server would abort the write almost at
// once and answer SYNC_WRITE_AMBIGUOUS to a write that had all the time in
// the world.
func TestSyncWriteWithAVeryLongTimeoutSendsTheLongestDurabilityTimeout(t *testing.T) {
	assert.Equal(t, uint16(65534), defaultDurabilityTimeout(math.MaxInt64), "math.MaxInt64 left")
	assert.Equal(t, uint16(65534), defaultDurabilityTimeout(100*365*24*time.Hour), "a century left")

	mc := newMock(t, mockcluster.Options{})
	c := connect(t, mc, nil)
	col := c.DefaultCollection()
	var mu sync.Mutex
	var sent []int
	h := mc.Control(mockcluster.Match{OpCodes: []memdx.OpCode{memdx.OpSet}}, 0, func(r *mockcluster.Request) (mockcluster.Action, bool) {
		_ = memdx.FrameInfos(r.Packet.FramingExtras, func(id uint16, data []byte) error {
			if memdx.RequestFrameID(id) == memdx.FrameDurability && len(data) == 3 {
				mu.Lock()
				sent = append(sent, int(binary.BigEndian.Uint16(data[1:])))
				mu.Unlock()
			}
			return nil
		})
		return mockcluster.Action{}, false // the node handles the write
	})
	defer h.Remove()
	_, err := col.Upsert(context.Background(), "k", []byte("v"),
		&UpsertOptions{Durability: DurabilityMajority, Timeout: 100 * 365 * 24 * time.Hour})
	require.NoError(t, err)
	mu.Lock()
	defer mu.Unlock()
	assert.Equal(t, []int{65534}, sent, "the durability timeout sent for an operation with all the time in the world")
}
