// Package memcachedtest starts a memcached of a test's own, for tests that
// change a whole server's state (FLUSH) and so must not use the instances
// scripts/memcached.sh shares between test runs.
package memcachedtest

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"strconv"
	"strings"
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
//
// The port is found free by listening on it and closing the listener, then
// given to memcached: in that gap another process (a parallel test
// package's mock cluster) may take it, memcached then fails to bind and
// exits, and the readiness dial reaches the other process. On Linux the
// listener found is checked to be memcached's own (its socket among the
// process's descriptors); a port taken so is given up and another tried.
func StartArgs(t testing.TB, extra ...string) string {
	t.Helper()
	bin, err := exec.LookPath("memcached")
	if err != nil {
		if os.Getenv("KVWIRE_REQUIRE_MEMCACHED") == "1" {
			t.Fatalf("no memcached binary but KVWIRE_REQUIRE_MEMCACHED=1: %v", err)
		}
		t.Skipf("no memcached binary (scripts/memcached.sh up installs it): %v", err)
	}
	for attempt := 1; ; attempt++ {
		addr, err := start(t, bin, extra)
		if err == nil {
			return addr
		}
		if !errors.Is(err, errPortTaken) || attempt == 5 {
			t.Fatal(err)
		}
	}
}

// errPortTaken: another process listens on the port memcached was given.
var errPortTaken = errors.New("the port was taken by another process")

// start runs memcached once, on a port found free, and waits until it
// accepts connections.
func start(t testing.TB, bin string, extra []string) (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
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
		return "", fmt.Errorf("starting memcached: %w", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	stop := func() {
		_ = cmd.Process.Kill()
		<-exited
	}
	deadline := time.Now().Add(StartTimeout)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			_ = c.Close()
			switch listening(cmd.Process.Pid, port) {
			case ownerOther:
				stop()
				return "", fmt.Errorf("memcached -p %s: %w", port, errPortTaken)
			case ownerOurs, ownerUnknown:
				t.Cleanup(stop)
				return addr, nil
			}
			// ownerNone: memcached has not listened yet; the listener
			// dialled went away. Wait as for a refused dial.
		}
		select {
		case werr := <-exited:
			exited <- werr
			if listening(-1, port) == ownerOther {
				return "", fmt.Errorf("memcached -p %s exited (%v): %w", port, werr, errPortTaken)
			}
			return "", fmt.Errorf("memcached -p %s exited before accepting connections: %w", port, errors.Join(werr, err))
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			stop()
			return "", fmt.Errorf("memcached on %s did not accept connections within %v: %v", addr, StartTimeout, err)
		}
	}
}

type owner int

const (
	ownerUnknown owner = iota // no /proc to tell
	ownerNone                 // nobody listens on the port
	ownerOurs                 // process pid does
	ownerOther                // another process does
)

// listening says who listens on 127.0.0.1:port, from /proc/net/tcp's
// listening sockets and process pid's descriptors (Linux).
func listening(pid int, port string) owner {
	data, err := os.ReadFile("/proc/net/tcp")
	if err != nil {
		return ownerUnknown
	}
	p, err := strconv.Atoi(port)
	if err != nil {
		return ownerUnknown
	}
	local := fmt.Sprintf("0100007F:%04X", p)
	inode := ""
	for _, line := range strings.Split(string(data), "\n")[1:] {
		f := strings.Fields(line)
		if len(f) > 9 && f[1] == local && f[3] == "0A" {
			inode = f[9]
		}
	}
	if inode == "" {
		return ownerNone
	}
	if pid < 0 {
		return ownerOther
	}
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return ownerUnknown
	}
	for _, fd := range fds {
		if l, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, fd.Name())); err == nil && l == "socket:["+inode+"]" {
			return ownerOurs
		}
	}
	return ownerOther
}
