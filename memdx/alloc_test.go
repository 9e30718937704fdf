package memdx

import "testing"

// testingAllocs reports the average allocations of f over 200 runs.
func testingAllocs(f func()) float64 { return testing.AllocsPerRun(200, f) }
