package panics

import (
	"runtime"
	"testing"
)

var runtimeGoexit = runtime.Goexit

func TestCatchAndRaise(t *testing.T) {
	var p *Ended
	Catch(&p, func() {})
	if p != nil {
		t.Fatalf("a function that returned: %+v, want nil", p)
	}
	p.Raise() // nil: nothing

	Catch(&p, func() { panic("boom") })
	if p == nil || p.Goexit || p.V != "boom" {
		t.Fatalf("a panic: %+v", p)
	}
	func() {
		defer func() {
			if v := recover(); v != "boom" {
				t.Errorf("Raise panicked with %v, want boom", v)
			}
		}()
		p.Raise()
		t.Error("Raise of a panic returned")
	}()

	// A Goexit goes on unwinding: the goroutine's deferred function sees
	// it, and Raise ends the goroutine it is called on.
	got := make(chan *Ended)
	go func() {
		var q *Ended
		defer func() { got <- q }()
		Catch(&q, func() { runtimeGoexit() })
	}()
	q := <-got
	if q == nil || !q.Goexit {
		t.Fatalf("a Goexit: %+v", q)
	}
	ended := make(chan bool)
	go func() {
		returned := false
		defer func() { ended <- returned }()
		q.Raise()
		returned = true
	}()
	if <-ended {
		t.Fatal("Raise of a Goexit returned")
	}
}
