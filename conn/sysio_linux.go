//go:build linux && !race

package conn

import (
	"syscall"
	"unsafe"
)

// The plain TCP socket's reads (rawReader: the reader goroutine's and a
// borrower's) and writes (sysWriter: the writer goroutine's and a
// caller's inline write) are made with syscall.RawSyscall, without
// telling the runtime, when the socket is non-blocking (as every socket of
// package net is) and the buffer at most directMax: such a call returns at
// once (EAGAIN when there is nothing to read or no room to write, and the
// goroutine then waits in the poller, as net.Conn's Read and Write do), so
// the runtime need not hand the processor to another thread meanwhile,
// which is what syscall.Read and syscall.Write prepare for. That
// preparation (entersyscall, exitsyscall) also woke sysmon from its idle
// sleep and kept it polling every 20 µs while a lone caller's reads and
// writes came and went: 15-20% of the process's CPU per request at one
// goroutine, with 0.8 more context switches per request. At 16 goroutines
// the reader and writer goroutines' direct calls took the client's CPU per
// request to 0.84-0.95x (four interleaved A/Bs, s6-busy; at 256 no
// change beyond the controls'). A caller's inline write that did not
// borrow the role (a group's, or one among other callers) is direct too,
// as the writer goroutine's: kept apart, it measured no different (0.966x
// CPU/op at memcached 16 goroutines, mock 0.988x, controls 1.004 and
// 0.984; 1 goroutine and GetMany 1.00x).
//
// Under the race detector the calls stay syscall.Read and syscall.Write,
// which tell the detector what the kernel read and wrote (and order a
// write before the read of its bytes in the same process, as a test's
// in-process server relies on); only the system call's entry differs.

// directIO: reads and writes may be direct on this platform.
const directIO = true

// directMax bounds a direct call's buffer: a larger copy keeps the
// processor long enough that the runtime should be told (a large value is
// read or written the usual way).
const directMax = 64 << 10

// directRead is read(2) on a non-blocking socket.
func directRead(fd uintptr, b []byte) (int, error) {
	n, _, e := syscall.RawSyscall(syscall.SYS_READ, fd, uintptr(unsafe.Pointer(unsafe.SliceData(b))), uintptr(len(b)))
	if e != 0 {
		return 0, e
	}
	return int(n), nil
}

// directWrite is write(2) on a non-blocking socket.
func directWrite(fd uintptr, b []byte) (int, error) {
	n, _, e := syscall.RawSyscall(syscall.SYS_WRITE, fd, uintptr(unsafe.Pointer(unsafe.SliceData(b))), uintptr(len(b)))
	if e != 0 {
		return 0, e
	}
	return int(n), nil
}
