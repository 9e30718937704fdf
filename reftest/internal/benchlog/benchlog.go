// Package benchlog is the line benchcmp logs for each measurement, which
// benchab reads back from builds of other revisions, and the median both
// take of their rounds. The line is written and parsed here so that the
// two cannot drift apart.
package benchlog

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
)

// Figures are one measurement's figures as the line carries them; a
// figure not known is < 0.
type Figures struct {
	OpsPerSec   float64
	P50         float64 // µs
	CPUPerOp    float64 // µs
	AllocsPerOp float64
	WritesPerOp float64
	ReadsPerOp  float64
	// MutexWaitPerOp: µs goroutines spent waiting for a lock (a
	// sync.Mutex or RWMutex, or the runtime's own), per op. A build from before it was logged ends its line at reads/op;
	// Parse gives -1 then.
	MutexWaitPerOp float64
}

// Line is the log line of measurement id in round (1-based) of rounds.
func Line(round, rounds int, id string, f Figures) string {
	return fmt.Sprintf("round %d/%d %-40s %10.0f ops/s  p50 %7.1fµs  cpu %6.2fµs/op  %5.2f allocs/op  %5.3f writes/op %5.3f reads/op  %5.2fµs mutex wait/op",
		round, rounds, id, f.OpsPerSec, f.P50, f.CPUPerOp, f.AllocsPerOp, f.WritesPerOp, f.ReadsPerOp, f.MutexWaitPerOp)
}

// Failed is the log line of measurement id failing in round.
func Failed(round, rounds int, id string, err error) string {
	return fmt.Sprintf("round %d/%d %-40s FAILED: %v", round, rounds, id, err)
}

var (
	line   = regexp.MustCompile(`^round \d+/\d+ (\S+)\s+([0-9.]+) ops/s\s+p50\s+(-?[0-9.]+)µs\s+cpu\s+([0-9.]+)µs/op\s+([0-9.]+) allocs/op\s+(-?[0-9.]+) writes/op\s+(-?[0-9.]+) reads/op(?:\s+(-?[0-9.]+)µs mutex wait/op)?$`)
	failed = regexp.MustCompile(`^round \d+/\d+ (\S+)\s+FAILED: (.*)$`)
)

// Parse reads one line of benchcmp's log: ok with the measurement's id
// and figures from a Line, an error naming the measurement from a Failed
// line, neither from any other line.
func Parse(s string) (id string, f Figures, ok bool, err error) {
	if m := failed.FindStringSubmatch(s); m != nil {
		return "", Figures{}, false, fmt.Errorf("%s failed: %s", m[1], m[2])
	}
	m := line.FindStringSubmatch(s)
	if m == nil {
		return "", Figures{}, false, nil
	}
	var v [7]float64
	v[6] = -1
	for i, x := range m[2:] {
		if x == "" { // the mutex wait, from an older build
			continue
		}
		if v[i], err = strconv.ParseFloat(x, 64); err != nil {
			return "", Figures{}, false, fmt.Errorf("%q: %w", s, err)
		}
	}
	return m[1], Figures{OpsPerSec: v[0], P50: v[1], CPUPerOp: v[2], AllocsPerOp: v[3],
		WritesPerOp: v[4], ReadsPerOp: v[5], MutexWaitPerOp: v[6]}, true, nil
}

// MedianKnown is the median of the xs that are known: a figure is < 0 in a
// round it is unknown in (p50 when no operation was timed, a count an older
// build did not report). -1 when none is known.
func MedianKnown(xs []float64) float64 {
	known := make([]float64, 0, len(xs))
	for _, x := range xs {
		if x >= 0 {
			known = append(known, x)
		}
	}
	if len(known) == 0 {
		return -1
	}
	return Median(known)
}

// Median returns the median of xs (the mean of the middle two for an even
// count); 0 for none. xs is not modified.
func Median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	m := len(s) / 2
	if len(s)%2 == 1 {
		return s[m]
	}
	return (s[m-1] + s[m]) / 2
}
