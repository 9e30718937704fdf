//go:build !unix

package client

import "time"

// processCPU: no getrusage here; the benchmarks report no CPU time.
func processCPU() (cpu time.Duration, ok bool) { return 0, false }
