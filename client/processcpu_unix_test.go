//go:build unix

package client

import (
	"syscall"
	"time"
)

// processCPU is the user and system CPU time this process has used; ok is
// false when getrusage fails.
func processCPU() (cpu time.Duration, ok bool) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, false
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), true
}
