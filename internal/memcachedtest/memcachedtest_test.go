package memcachedtest

import (
	"net"
	"os"
	"os/exec"
	"testing"
)

// listening tells a listener of this process from another's, and a port
// nobody listens on: what Start relies on to find a port taken between its
// check and memcached's bind.
func TestListeningOwner(t *testing.T) {
	if _, err := os.Stat("/proc/net/tcp"); err != nil {
		t.Skip("no /proc/net/tcp")
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	_, port, _ := net.SplitHostPort(l.Addr().String())
	if got := listening(os.Getpid(), port); got != ownerOurs {
		t.Errorf("this process's listener: %v, want ownerOurs", got)
	}
	other := exec.Command("sleep", "30")
	if err := other.Start(); err != nil {
		t.Skip(err)
	}
	defer func() { _ = other.Process.Kill(); _ = other.Wait() }()
	if got := listening(other.Process.Pid, port); got != ownerOther {
		t.Errorf("another process asked about this one's listener: %v, want ownerOther", got)
	}
	_ = l.Close()
	if got := listening(os.Getpid(), port); got != ownerNone {
		t.Errorf("a closed port: %v, want ownerNone", got)
	}
}
