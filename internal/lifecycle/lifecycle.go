// Package lifecycle marks the goroutines a client's Close waits for, so
// that a Close called on one of them can tell.
//
// A client runs caller code on goroutines of its own: a slog handler on a
// node's connection upkeep, a connection's reader or a report, a TLS
// callback on a redial's handshake, a Resolver on the DNS SRV re-lookup.
// Close waits for those goroutines to exit; called from that code, it
// would wait for the goroutine it runs on, for ever. Every such goroutine
// is started with Go, and OnOwn, which looks for Go's frame on the calling
// goroutine's stack, tells Close that it must not wait.
package lifecycle

import (
	"reflect"
	"runtime"
)

// Go runs f on a new goroutine marked as a client's own.
func Go(f func()) { go run(f) }

// Run runs f on the calling goroutine, marked as a client's own until f
// returns: for Close's shutdown, which runs caller code (a Logger's
// handler logging the reports' last lines, the connections' ends) that
// may call Close again, which must not wait for the shutdown it runs in.
func Run(f func()) { run(f) }

// run is the bottom frame of every goroutine Go starts, and Run's: OnOwn
// finds it.
//
//go:noinline
func run(f func()) { f() }

// runName is run's function name, as a stack frame names it.
var runName = runtime.FuncForPC(reflect.ValueOf(run).Pointer()).Name()

// OnOwn reports whether the calling goroutine was started by Go: by any
// client, not only the one asking (a client's callback closing another
// client that waits for the first one's goroutine would deadlock the
// two). It walks the goroutine's stack: meant for Close, not for a hot
// path.
func OnOwn() bool {
	pcs := make([]uintptr, 128)
	for {
		n := runtime.Callers(1, pcs)
		if n < len(pcs) {
			pcs = pcs[:n]
			break
		}
		pcs = make([]uintptr, 2*len(pcs))
	}
	frames := runtime.CallersFrames(pcs)
	for {
		f, more := frames.Next()
		if f.Function == runName {
			return true
		}
		if !more {
			return false
		}
	}
}
