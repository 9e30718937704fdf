// Package leakcheck fails a test binary that leaves goroutines behind.
//
// Every package that starts goroutines calls it from TestMain:
//
//	func TestMain(m *testing.M) { leakcheck.Main(m) }
//
// After all tests pass it waits (up to Timeout) for goroutines other than the
// runtime's and the testing framework's to exit, and fails the binary with
// their stacks if some remain.
package leakcheck

import (
	"fmt"
	"os"
	"runtime"
	"sort"
	"strings"
	"testing"
	"time"
)

// Timeout is how long Main waits for goroutines to finish after the tests.
var Timeout = 5 * time.Second

// ignored are stack substrings of goroutines that belong to the runtime or
// the testing framework rather than to the code under test.
var ignored = []string{
	"testing.Main(",
	"testing.(*M).Run(",
	"testing.tRunner(",
	"testing.runFuzzTests(",
	"testing.runFuzzing(",
	"testing.(*F).Fuzz",
	"runtime.goexit0",
	"os/signal.signal_recv",
	"os/signal.loop",
	"runtime.ensureSigM",
	"runtime/trace.Start",
	"testing/internal/testdeps",
	"created by testing.(*T).Run",
	"created by testing.runTests",
	"runtime.ReadTrace",
	"internal/synctest",
}

// Main runs the tests, then fails the binary if goroutines leaked.
func Main(m *testing.M) {
	code := m.Run()
	if code == 0 {
		if leaked := Wait(Timeout); leaked != "" {
			fmt.Fprintf(os.Stderr, "leakcheck: goroutines still running after the tests:\n\n%s\n", leaked)
			code = 1
		}
	}
	os.Exit(code)
}

// Wait waits up to timeout for foreign goroutines to exit and returns the
// stacks of those that did not (empty when none leaked).
func Wait(timeout time.Duration) string {
	deadline := time.Now().Add(timeout)
	for {
		leaked := Foreign()
		if len(leaked) == 0 {
			return ""
		}
		if time.Now().After(deadline) {
			return strings.Join(leaked, "\n\n")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Foreign returns the stacks of running goroutines that are neither the
// caller's nor the runtime's or testing framework's.
func Foreign() []string {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	stacks := strings.Split(string(buf), "\n\n")
	var out []string
	for i, s := range stacks {
		if i == 0 { // the calling goroutine
			continue
		}
		if s = strings.TrimSpace(s); s == "" || isIgnored(s) {
			continue
		}
		out = append(out, s)
	}
	sort.Strings(out)
	return out
}

func isIgnored(stack string) bool {
	for _, ig := range ignored {
		if strings.Contains(stack, ig) {
			return true
		}
	}
	return false
}
