package kvotel

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/kvwire/kvwire/client"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

// Many goroutines running operations at once through one client, its
// kvotel tracer and meter (run with the race detector): every span ends
// once, each key's dispatch spans are under its operation's span, and
// the operation metric counts every operation.
func TestConcurrentOperationsThroughKvotel(t *testing.T) {
	mc := newMock(t)
	c, e := connect(t, mc, nil)
	col := c.DefaultCollection()
	const workers, rounds = 6, 20
	var wg sync.WaitGroup
	errs := make(chan error, workers*rounds*4)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, caller := e.tp.Tracer("app").Start(context.Background(), fmt.Sprintf("worker %d", w))
			defer caller.End()
			for r := range rounds {
				k := fmt.Sprintf("w%d-%d", w, r)
				if _, err := col.Upsert(ctx, k, []byte("v"), nil); err != nil {
					errs <- err
				}
				if _, err := col.Get(ctx, k, nil); err != nil {
					errs <- err
				}
				if _, err := col.GetAllReplicas(ctx, k, nil); err != nil {
					errs <- err
				}
				for _, res := range col.GetMany(ctx, []string{k, k + "-missing"}, nil) {
					if res.Err != nil && !errors.Is(res.Err, client.ErrDocumentNotFound) {
						errs <- res.Err
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	e.ledger.check(t)
	ended := e.sr.Ended()
	names := map[string]string{}
	for _, s := range ended {
		names[s.SpanContext().SpanID().String()] = s.Name()
	}
	for _, s := range ended {
		if s.Name() == client.SpanDispatchToServer {
			if p := names[s.Parent().SpanID().String()]; p != "get" && p != "upsert" && p != "get_replica" {
				t.Errorf("a dispatch span under %q", p)
			}
		}
	}
	m := collect(t, e.reader)[client.MetricOperationDuration]
	var total uint64
	for _, dp := range m.Data.(metricdata.Histogram[float64]).DataPoints {
		total += dp.Count
	}
	// Per round: an upsert, a get, GetAllReplicas (one: its reads of the
	// copies are its parts), GetMany's two.
	if want := uint64(workers * rounds * 5); total != want {
		t.Errorf("%d operations recorded, want %d", total, want)
	}
}
