package client

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvwire/kvwire/mockcluster"
)

// A Meter whose ValueRecorder blocks holds only the operation asking for
// it: another operation, asking for a recorder of its own (another
// operation name), goes through meanwhile (the rule of
// internal/hookguard: a hook that blocks blocks its operation only).
func TestMeterThatBlocksInValueRecorderHoldsOnlyItsOperation(t *testing.T) {
	t.Parallel()
	mc := newMock(t, mockcluster.Options{})
	bm := &blockingMeter{block: "upsert", entered: make(chan struct{}), release: make(chan struct{})}
	c := connect(t, mc, &Options{Meter: bm})
	col := c.DefaultCollection()
	ctx := context.Background()

	held := make(chan error, 1)
	go func() {
		_, err := col.Upsert(ctx, "k", []byte("v"), nil)
		held <- err
	}()
	<-bm.entered // the upsert asks the Meter for its recorder, which blocks
	defer close(bm.release)

	done := make(chan error, 1)
	go func() {
		_, err := col.Get(ctx, "missing", nil)
		done <- err
	}()
	select {
	case err := <-done:
		require.ErrorIs(t, err, ErrDocumentNotFound)
	case <-time.After(30 * time.Second):
		t.Fatal("a get waited for another operation's blocked Meter.ValueRecorder")
	}
	select {
	case err := <-held:
		t.Fatalf("the upsert whose meter blocks returned: %v", err)
	default:
	}
}

// blockingMeter's ValueRecorder blocks, the first time it is asked for
// operation block's recorder, until released.
type blockingMeter struct {
	block            string
	once             sync.Once
	entered, release chan struct{}
}

func (m *blockingMeter) Counter(string, map[string]string) (Counter, error) {
	return noopInstrument{}, nil
}

func (m *blockingMeter) ValueRecorder(_ string, attrs map[string]string) (ValueRecorder, error) {
	if attrs[AttributeOperationName] == m.block {
		first := false
		m.once.Do(func() { first = true })
		if first {
			close(m.entered)
			<-m.release
		}
	}
	return noopInstrument{}, nil
}
