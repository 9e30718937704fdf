package client

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvwire/kvwire/mockcluster"
)

// A tracer that blocks blocks its own operation only (docs/ARCHITECTURE.md:
// "a hook that blocks blocks its operation only ... other operations go
// through its connection meanwhile"; RequestTracer: "a slow tracer slows
// only the operations it traces"). In a batch, a key's dispatch span is
// started while the batch holds its connection's writes (Cork, sendGroup):
// a dispatch span start that blocks must not hold another goroutine's Get
// on that connection unwritten.
func TestBatchTracerThatBlocksHoldsNoConnection(t *testing.T) {
	mc := newMock(t, mockcluster.Options{Nodes: 1})
	bt := &dispatchBlocker{entered: make(chan struct{}), release: make(chan struct{})}
	c := connect(t, mc, &Options{Tracer: bt})
	col := c.DefaultCollection()
	ctx := context.Background()
	_, err := col.Upsert(ctx, "k", []byte("v"), nil)
	require.NoError(t, err)

	bt.armed.Store(true)
	batch := make(chan []GetManyResult, 1)
	go func() { batch <- col.GetMany(ctx, []string{"k"}, &GetManyOptions{Timeout: time.Minute}) }()
	<-bt.entered // the batch's dispatch span is starting, and blocks
	defer func() {
		close(bt.release)
		r := <-batch
		require.NoError(t, r[0].Err)
	}()
	// The same node's one connection. Its answer comes at once when the
	// Get's request is written; it is never written while the batch
	// holds the connection's writes, and then times out.
	r, err := col.Get(ctx, "k", &GetOptions{Timeout: 10 * time.Second})
	require.NoError(t, err, "a Get on the connection of a batch whose tracer blocks")
	require.Equal(t, "v", string(r.Value))
}

// dispatchBlocker blocks the first dispatch span started once armed, until
// released.
type dispatchBlocker struct {
	armed            atomic.Bool
	once             sync.Once
	entered, release chan struct{}
}

func (b *dispatchBlocker) RequestSpan(_ context.Context, name string, _ RequestSpan, _ time.Time) RequestSpan {
	if name == SpanDispatchToServer && b.armed.Load() {
		first := false
		b.once.Do(func() { first = true })
		if first {
			close(b.entered)
			<-b.release
		}
	}
	return noopSpan{} // NoopTracer's
}
