//go:build linux

package faultnode

import (
	"errors"
	"net"
	"syscall"
	"testing"
)

// A ClosedPort refuses connections, and while it is open no listener, not
// even one using SO_REUSEADDR as Go's do, gets its port: a test that names
// it as a node that is down is not answered by a listener opened later.
func TestClosedPortRefusesAndHoldsItsPort(t *testing.T) {
	p, err := NewClosedPort()
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	c, err := net.Dial("tcp", p.Addr())
	if err == nil {
		c.Close()
		t.Fatal("a dial to the ClosedPort connected")
	}
	if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("dial: %v, want connection refused", err)
	}
	ln, err := net.Listen("tcp", p.Addr())
	if err == nil {
		ln.Close()
		t.Fatal("a listener got the ClosedPort's port while it was open")
	}
	if !errors.Is(err, syscall.EADDRINUSE) {
		t.Fatalf("listen: %v, want address in use", err)
	}
}
