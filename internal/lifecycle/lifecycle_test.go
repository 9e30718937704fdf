package lifecycle

import (
	"testing"

	"github.com/kvwire/kvwire/internal/leakcheck"
)

func TestMain(m *testing.M) { leakcheck.Main(m) }

// OnOwn is true on a goroutine Go started, however deep its stack, and
// false on others.
func TestOnOwn(t *testing.T) {
	if OnOwn() {
		t.Fatal("the test's goroutine counts as a client's own")
	}
	got := make(chan bool, 2)
	var deep func(int) bool
	deep = func(n int) bool {
		if n == 0 {
			return OnOwn()
		}
		return deep(n - 1)
	}
	Go(func() { got <- OnOwn() })
	Go(func() { got <- deep(1000) }) // deeper than OnOwn's first buffer
	for range 2 {
		if !<-got {
			t.Fatal("a goroutine Go started does not count as the client's own")
		}
	}
	other := make(chan bool)
	go func() { other <- OnOwn() }()
	if <-other {
		t.Fatal("a goroutine go started counts as a client's own")
	}
}

// OnOwn is true inside Run, on the calling goroutine, and false again
// once Run has returned.
func TestRun(t *testing.T) {
	var inside bool
	Run(func() { inside = OnOwn() })
	if !inside {
		t.Fatal("code Run runs does not count as a client's own")
	}
	if OnOwn() {
		t.Fatal("the goroutine counts as a client's own after Run returned")
	}
}
