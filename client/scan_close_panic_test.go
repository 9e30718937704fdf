package client

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvwire/kvwire/mockcluster"
)

// A Close deferred in a function whose loop over a scan's Next panics
// never stops the panic, whatever its value: the function does not return
// to its caller, and the panic goes on with the value it had. Under
// GODEBUG=panicnil=1 (a setting a program may choose, by its environment
// or a //go:debug line), recover returns nil for panic(nil), and stops
// it: a Close that recovered there turned a panic into a normal return,
// and the caller's code after the loop ran as if the loop had finished.
func TestScanCloseDeferredNeverStopsAPanic(t *testing.T) {
	mc := newMock(t, mockcluster.Options{})
	col := connect(t, mc, nil).DefaultCollection() // observed: the default meter and slow-operation report
	scanDocs(t, col, 4)
	// loop scans, panics with v in the loop's body, and reports whether
	// it returned (it must not) and what the panic's recover saw.
	loop := func(t *testing.T, v any) (returned bool, recovered any) {
		res, err := col.Scan(context.Background(), PrefixScan{Prefix: "doc-"}, &ScanOptions{BatchItemLimit: 1})
		require.NoError(t, err)
		require.NotNil(t, res.call, "the scan is not observed: Close has nothing to tell")
		func() {
			defer func() { recovered = recover() }()
			func() {
				defer res.Close()
				for res.Next() {
					panic(v)
				}
			}()
			returned = true
		}()
		return returned, recovered
	}
	t.Run("value", func(t *testing.T) {
		v := &struct{ n int }{1}
		returned, got := loop(t, v)
		if returned || got != v {
			t.Errorf("returned %v, recovered %v: want the panic going on with %p", returned, got, v)
		}
	})
	t.Run("nil, panicnil=1", func(t *testing.T) {
		t.Setenv("GODEBUG", "panicnil=1")
		if returned, got := loop(t, nil); returned {
			t.Errorf("the function returned (recovered %v): Close stopped a panic(nil)", got)
		}
	})
}
