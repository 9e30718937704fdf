package client

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	sched "github.com/kvwire/kvwire/internal/batch"
	"github.com/kvwire/kvwire/internal/cluster"
	"github.com/kvwire/kvwire/memdx"
	"github.com/kvwire/kvwire/mockcluster"
	"github.com/kvwire/kvwire/retry"
)

// pairingObserver records the Observer's calls and what is wrong with
// their pairing: an AttemptEnd must end an attempt its AttemptStart began
// (same operation id and attempt number) and not ended yet.
type pairingObserver struct {
	mu      sync.Mutex
	running map[[2]uint64]bool
	wrong   []string
	ends    chan AttemptInfo
}

func (p *pairingObserver) AttemptStart(i AttemptInfo) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.running[[2]uint64{i.OperationID, uint64(i.Attempt)}] = true
}

func (p *pairingObserver) AttemptEnd(i AttemptInfo, err error) {
	p.mu.Lock()
	k := [2]uint64{i.OperationID, uint64(i.Attempt)}
	if !p.running[k] {
		p.wrong = append(p.wrong, fmt.Sprintf("%s %s: AttemptEnd of attempt %d (duration %v, err %v) without its AttemptStart",
			i.Op, i.Key, i.Attempt, i.Duration, err))
	}
	delete(p.running, k)
	p.mu.Unlock()
	p.ends <- i
}

// A key whose retry wait ends when its deadline has passed too (the clock
// jumps over both) ends with a timeout, and the Observer sees every attempt
// as a pair, AttemptStart then AttemptEnd, as for a single Get: never an
// AttemptEnd alone for an attempt that was not reported as started.
func TestGetManyObserverSeesNoAttemptEndWithoutItsStart(t *testing.T) {
	mc := newMock(t, mockcluster.Options{Nodes: 1})
	fc := retry.NewFakeClock(time.Now())
	obs := &pairingObserver{running: map[[2]uint64]bool{}, ends: make(chan AttemptInfo, 100)}
	c := connect(t, mc, &Options{Clock: fakeClock{fc}, ConfigPollInterval: time.Hour, Observer: obs})
	col := c.DefaultCollection()
	key := "pairing"
	faultGets(t, mc, key, mockcluster.Action{Status: memdx.StatusTmpFail}, 0)

	for name, call := range map[string]func() error{
		"Get": func() error {
			_, err := col.Get(context.Background(), key, &GetOptions{Timeout: time.Second})
			return err
		},
		"GetMany": func() error {
			return col.GetMany(context.Background(), []string{key}, &GetManyOptions{Timeout: time.Second})[0].Err
		},
	} {
		deadline := fc.Now().Add(time.Second)
		done := make(chan error, 1)
		go func() { done <- call() }()
		a := within(t, obs.ends, name+": the first attempt's AttemptEnd")
		require.Equal(t, StatusTmpFail, a.Status, name)
		// The retry wait, due before the deadline: not any timer armed
		// meanwhile (the config loop arms its poll's after connect
		// returns), or the clock would move before the wait is armed,
		// which would then last from the new time on, for good.
		awaitTimerBy(t, fc, deadline, name+": the retry wait")
		// The wait ends before the deadline, but the clock jumps past both.
		fc.Advance(2 * time.Second)
		err := within(t, done, name+": the end of the operation, its deadline passed")
		require.ErrorIs(t, err, ErrTimeout, name)
		for len(obs.ends) > 0 {
			<-obs.ends
		}
		obs.mu.Lock()
		require.Empty(t, obs.wrong, name)
		require.Empty(t, obs.running, "%s: attempts started and never ended", name)
		obs.mu.Unlock()
	}
}

// holdObserver blocks the batch's goroutine in the first AttemptEnd of
// key until release is closed, after closing held.
type holdObserver struct {
	key     string
	once    sync.Once
	held    chan struct{}
	release chan struct{}
}

func (h *holdObserver) AttemptStart(AttemptInfo) {}

func (h *holdObserver) AttemptEnd(i AttemptInfo, _ error) {
	if i.Key != h.key {
		return
	}
	h.once.Do(func() {
		close(h.held)
		<-h.release
	})
}

// A key waiting out the rest of its time after NOT_MY_VBUCKET (the retry
// interval reaches past its deadline: a wait that ends in a timeout, which
// a new config may still turn into a retry before the deadline) ends with
// a timeout, with no retry, when its wait has ended by the time the batch
// sees the new config: a wait that is over is not woken, as a single
// operation's is not. The batch's goroutine is held (in the Observer) while
// the clock passes the deadline and a new config is installed, so that
// both are pending when it resumes; which of the two it takes first is up
// to select, hence the rounds.
func TestGetManyWaitEndedBeforeANewConfigIsATimeoutNotARetry(t *testing.T) {
	t.Parallel()
	mc := newMock(t, mockcluster.Options{Nodes: 1})
	fc := retry.NewFakeClock(time.Now())
	for round := 0; round < 8; round++ {
		obs := &holdObserver{key: fmt.Sprintf("held-%d", round), held: make(chan struct{}), release: make(chan struct{})}
		c := connect(t, mc, &Options{Clock: fakeClock{fc}, ConfigPollInterval: time.Hour, Observer: obs,
			NMVRetryInterval: 10 * time.Second})
		col := c.DefaultCollection()
		waiting := []string{fmt.Sprintf("nmv-a-%d", round), fmt.Sprintf("nmv-b-%d", round)}
		for _, k := range waiting {
			faultGets(t, mc, k, mockcluster.Action{Status: memdx.StatusNotMyVbucket}, 0)
		}
		t0 := c.cl.Topology()
		done := make(chan []GetManyResult, 1)
		go func() {
			done <- col.GetMany(context.Background(), append(waiting, obs.key), &GetManyOptions{Timeout: time.Second})
		}()
		<-obs.held // the NOT_MY_VBUCKET keys wait; the batch's goroutine is in the Observer
		fc.Advance(2 * time.Second)
		_, err := mc.Bucket(mockcluster.DefaultBucket).AddScope(fmt.Sprintf("s%d", round))
		require.NoError(t, err)
		// The node announces it; a fetch from the node may have begun at
		// this very instant of the fake clock (the NMV's, on the
		// Advance), so the announcement's waits for the spacing.
		guard := time.Now().Add(10 * time.Second)
		for !sched.Closed(t0.Changed()) {
			require.True(t, time.Now().Before(guard), "the client did not install the new config")
			fc.Advance(cluster.ConfigFetchInterval)
			select {
			case <-t0.Changed():
			case <-time.After(time.Millisecond):
			}
		}
		close(obs.release)
		res := <-done
		for _, r := range res[:2] {
			require.ErrorIs(t, r.Err, ErrTimeout, "round %d %s", round, r.Key)
			var kv *KeyValueError
			require.ErrorAs(t, r.Err, &kv)
			require.Zero(t, kv.RetryAttempts, "round %d %s: retried after its wait had ended with the deadline: %v", round, r.Key, r.Err)
		}
		require.NoError(t, c.Close())
	}
}
