//go:build unix && (!linux || race)

package conn

import "syscall"

// directIO: no direct reads or writes here (sysio_linux.go says why they
// are made on Linux, and why not under the race detector).
const directIO = false

const directMax = 0

func directRead(fd uintptr, b []byte) (int, error) { return syscall.Read(int(fd), b) }

func directWrite(fd uintptr, b []byte) (int, error) { return syscall.Write(int(fd), b) }
