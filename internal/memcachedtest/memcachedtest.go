// Package memcachedtest starts a memcached of a test's own, for tests that
// change a whole server's state (FLUSH) and so must not use the instances
// scripts/memcached.sh shares between test runs.
package memcachedtest

import (
	"errors"
	"net"
	"os"
	"os/exec"
	"os/user"
	"testing"
	"time"
)

// StartTimeout bounds how long Start waits for the server to accept
// connections: a failure bound, not a wait the test relies on.
const StartTimeout = 10 * time.Second

// Start runs memcached (from PATH: Debian's package, which
// scripts/memcached.sh installs) on a free loopback port, without
// authentication, and stops it when the test ends. It returns the
// server's host:port once it accepts connections. Without a memcached
// binary the test is skipped, or fails under KVWIRE_REQUIRE_MEMCACHED=1.
func Start(t testing.TB) string {
	t.Helper()
	return StartArgs(t)
}

// StartArgs is Start with more memcached arguments (e.g. "-B", "binary").
func StartArgs(t testing.TB, extra ...string) string {
	t.Helper()
	bin, err := exec.LookPath("memcached")
	if err != nil {
		if os.Getenv("KVWIRE_REQUIRE_MEMCACHED") == "1" {
			t.Fatalf("no memcached binary but KVWIRE_REQUIRE_MEMCACHED=1: %v", err)
		}
		t.Skipf("no memcached binary (scripts/memcached.sh up installs it): %v", err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_, port, _ := net.SplitHostPort(addr)
	_ = l.Close()
	args := append([]string{"-l", "127.0.0.1", "-p", port, "-U", "0", "-m", "16", "-t", "1"}, extra...)
	if os.Geteuid() == 0 {
		// memcached refuses to run as root without -u.
		as := "nobody"
		if _, err := user.Lookup("memcache"); err == nil {
			as = "memcache"
		}
		args = append(args, "-u", as)
	}
	cmd := exec.Command(bin, args...)
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting memcached: %v", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
	})
	deadline := time.Now().Add(StartTimeout)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			_ = c.Close()
			return addr
		}
		select {
		case werr := <-exited:
			exited <- werr
			t.Fatalf("memcached -p %s exited before accepting connections: %v", port, errors.Join(werr, err))
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("memcached on %s did not accept connections within %v: %v", addr, StartTimeout, err)
		}
	}
}
