package batch

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvwire/kvwire/retry"
)

func newSchedule(t *testing.T, n int) (*Schedule[int], *retry.FakeClock) {
	t.Helper()
	clk := retry.NewFakeClock(time.Unix(1000, 0))
	s := &Schedule[int]{}
	s.Start(clk, n, 4)
	return s, clk
}

func TestInFlightBoundIsHalfTheConnectionsPendingCapped(t *testing.T) {
	assert.Equal(t, 10, InFlightBound(20))
	assert.Equal(t, 1, InFlightBound(1), "never below one")
	assert.Equal(t, MaxInFlight, InFlightBound(1<<20))
	assert.Equal(t, min(MaxInFlight, 4096/2), InFlightBound(0), "0: the connection's default MaxPending")
}

func TestTagsNameTheirKeyAndGeneration(t *testing.T) {
	s, _ := newSchedule(t, 3)
	s.Keys[2].State, s.Keys[2].Gen = InFlight, 7
	tag := Tag(2, 7)
	require.False(t, IsFence(tag))
	i, live := s.Live(tag)
	assert.True(t, live)
	assert.Equal(t, 2, i)
	_, live = s.Live(Tag(2, 6))
	assert.False(t, live, "an older request of the key is stale")
	s.Keys[2].State = Waiting
	_, live = s.Live(tag)
	assert.False(t, live, "a key no longer in flight")
}

func TestEndedWakesForFailuresTheLastRequestAndRoom(t *testing.T) {
	s, _ := newSchedule(t, 4)
	s.ExpectAdd(3)
	assert.False(t, s.Ended(Tag(0, 1), true), "a clean end with more expected waits")
	assert.True(t, s.Ended(Tag(1, 1), false), "an end that needs judging wakes")
	assert.True(t, s.Ended(Tag(2, 1), true), "the last one expected wakes")
	assert.Equal(t, []uint64{Tag(0, 1), Tag(1, 1), Tag(2, 1)}, s.TakeEnded())

	s.ExpectAdd(3)
	s.Ready = append(s.Ready, 3)
	s.AwaitRoom()
	assert.True(t, s.Ended(Tag(0, 2), true), "keys waiting for room: a clean end wakes")
	assert.False(t, s.Ended(Tag(1, 2), true), "once")
}

func TestExpectAddWakesForEndsLeftWhenNoneIsExpected(t *testing.T) {
	s, _ := newSchedule(t, 2)
	s.ExpectAdd(2)
	s.Ended(Tag(0, 1), true)
	s.ExpectAdd(-1) // the other was taken back
	select {
	case <-s.kick:
	default:
		t.Fatal("an end not collected with none expected must wake the batch")
	}
}

func TestSleepReportsTheEarliestDueWait(t *testing.T) {
	s, clk := newSchedule(t, 3)
	now := clk.Now()
	for i, d := range []time.Duration{3, 1, 2} {
		s.Keys[i].Gen = 1
		s.WaitUntil(i, now.Add(d*time.Millisecond))
	}
	s.Keys[1].Gen++ // key 1 left its wait: its entry is stale
	s.armTimer()    // as Sleep does first: the timer is set before the clock moves
	done := make(chan Event)
	go func() { done <- s.Sleep() }()
	clk.Advance(2 * time.Millisecond)
	assert.Equal(t, EventDue, <-done)
	i, ok := s.PopDue(clk.Now())
	require.True(t, ok)
	assert.Equal(t, 2, i, "the earliest live wait")
	_, ok = s.PopDue(clk.Now())
	assert.False(t, ok, "key 0's wait is not over")
}

func TestNextWokenWatchesTheOpenWake(t *testing.T) {
	s, clk := newSchedule(t, 3)
	closedCh, open := make(chan struct{}), make(chan struct{})
	close(closedCh)
	for i, w := range []chan struct{}{open, closedCh, nil} {
		s.Keys[i].Wake = w
		s.WaitUntil(i, clk.Now().Add(time.Hour))
	}
	s.Unwatch()
	assert.Equal(t, 1, s.NextWoken(0))
	assert.Equal(t, -1, s.NextWoken(2))
	assert.Equal(t, (<-chan struct{})(open), s.watch, "the keys passed over watch the open wake")
	s.Keys[1].State = Ready // resumed
	assert.Equal(t, 0, s.NextWaiting(0))
	assert.Equal(t, 2, s.NextWaiting(1))
}

func TestSleepEndsOnCancelOnceAndOnClosing(t *testing.T) {
	s, _ := newSchedule(t, 1)
	ctx, cancel := context.WithCancel(context.Background())
	closing := make(chan struct{})
	s.Watch(ctx.Done(), closing)
	cancel()
	assert.Equal(t, EventCanceled, s.Sleep())
	s.Canceled = true
	close(closing)
	assert.Equal(t, EventClosing, s.Sleep(), "a canceled batch no longer watches its context")
	s.Wake()
	assert.Equal(t, EventEnded, s.Sleep(), "closing is reported once")
}

func TestResetKeepsNoKeysAndRefusesLargeSchedules(t *testing.T) {
	s, _ := newSchedule(t, 2)
	s.Keys[0].Op, s.Left = 5, 1
	s.CancelFences(errors.New("none"))
	require.True(t, s.Reset())
	assert.Empty(t, s.Keys)
	assert.Zero(t, s.Left)
	big := &Schedule[int]{}
	big.Start(retry.NewFakeClock(time.Now()), maxPooled+1, 1)
	assert.False(t, big.Reset())
}

// A round takes only the ready keys that have room in flight; the rest
// stay ready ahead of the keys that become ready during the round.
func TestTakeRoundKeepsTheKeysWithoutRoomFirst(t *testing.T) {
	s, _ := newSchedule(t, 8) // at most 4 in flight
	s.InFlight = 1
	s.Ready = append(s.Ready, 0, 1, 2, 3, 4)
	s.Groups = append(s.Groups, Group{})
	assert.Equal(t, []int32{0, 1, 2}, s.TakeRound())
	assert.Empty(t, s.Groups, "a round's groups start empty")
	s.Ready = append(s.Ready, 7) // ready again during the round
	assert.Equal(t, []int32{3, 4, 7}, s.Ready)
}
