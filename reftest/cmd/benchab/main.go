// Command benchab compares two builds of benchcmp, interleaved: a change
// to kvwire measured against the code it changes, on the same servers, in
// the same minutes. scripts/bench.sh runs it when BENCH_BASE names a git
// revision (it builds benchcmp there and in the working tree, and starts
// the servers); run by hand:
//
//	benchab -base OLD -new NEW [-rounds 12] -- BENCHCMP-FLAGS...
//
// Each round runs each build once (benchcmp -rounds 1 and the flags after
// --, e.g. -memcached, -mock, -only, -duration), the two in turn and the
// first of them alternating between rounds, and reads the figures benchcmp
// logs for each measurement. For every measurement both builds made it
// prints the medians of each build's rounds, and the medians of the
// rounds' own ratios (new ÷ old: ops/s, client CPU per op, writes per
// op), with how many rounds the new build used less CPU per op in.
//
// Every client of a measured cell runs in both builds, so a client that
// kvwire's change does not touch (gocbcore, gomemcache, the raw loops) is
// the control: its ratios show how far the machine moved between the two
// builds' turns. A change is measured when kvwire's ratio stands apart
// from its control's, in most rounds.
package main

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strings"

	"github.com/kvwire/kvwire/reftest/internal/benchlog"
)

func main() {
	base := flag.String("base", "", "benchcmp built from the code compared against")
	next := flag.String("new", "", "benchcmp built from the changed code")
	rounds := flag.Int("rounds", 12, "rounds; each runs both builds once")
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "usage: benchab -base OLD -new NEW [-rounds N] -- BENCHCMP-FLAGS...\n")
		flag.PrintDefaults()
	}
	flag.Parse()
	if *base == "" || *next == "" || *rounds < 1 {
		flag.Usage()
		os.Exit(2)
	}
	if err := run(os.Stdout, *base, *next, *rounds, flag.Args()); err != nil {
		fmt.Fprintln(os.Stderr, "benchab:", err)
		os.Exit(1)
	}
}

// build is one of the two benchcmp binaries and its figures:
// samples[id] holds one a round.
type build struct {
	name, path string
	samples    map[string][]sample
}

type sample struct {
	round int
	benchlog.Figures
}

func run(out io.Writer, basePath, newPath string, rounds int, args []string) error {
	builds := []*build{
		{name: "old", path: basePath, samples: map[string][]sample{}},
		{name: "new", path: newPath, samples: map[string][]sample{}},
	}
	for r := range rounds {
		for k := range builds {
			b := builds[(k+r)%len(builds)]
			if err := b.measure(r, args); err != nil {
				return fmt.Errorf("round %d, %s build (%s): %w", r+1, b.name, b.path, err)
			}
		}
		fmt.Fprintf(os.Stderr, "benchab: round %d/%d done\n", r+1, rounds)
	}
	writeTable(out, compare(builds[0], builds[1]))
	return nil
}

// measure runs b once (one benchcmp round) and keeps its figures.
func (b *build) measure(round int, args []string) error {
	cmd := exec.Command(b.path, append(append([]string{}, args...), "-rounds", "1")...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return err
	}
	cmd.Stdout = io.Discard
	if err := cmd.Start(); err != nil {
		return err
	}
	var failed []string
	var tail []string
	sc := bufio.NewScanner(stderr)
	for sc.Scan() {
		line := sc.Text()
		tail = append(tail, line)
		if len(tail) > 5 {
			tail = tail[1:]
		}
		id, f, ok, err := benchlog.Parse(line)
		switch {
		case err != nil:
			failed = append(failed, err.Error())
		case ok:
			b.samples[id] = append(b.samples[id], sample{round: round, Figures: f})
		}
	}
	if err := sc.Err(); err != nil {
		failed = append(failed, "reading its log: "+err.Error())
		io.Copy(io.Discard, stderr) // let it finish
	}
	if err := cmd.Wait(); err != nil {
		return fmt.Errorf("%w; its last lines:\n%s", err, strings.Join(tail, "\n"))
	}
	if len(failed) > 0 {
		return errors.New(strings.Join(failed, "; "))
	}
	return nil
}

// comparison is one measurement's figures in both builds.
type comparison struct {
	id                   string
	n                    int     // rounds both builds measured
	oldOps, newOps       float64 // medians
	oldCPU, newCPU       float64
	oldWrites, newWrites float64
	opsRatio, cpuRatio   float64 // medians of the rounds' own ratios
	writesRatio          float64 // < 0: not measured
	cheaper              int     // rounds the new build used less CPU per op in
	oldP50, p50Ratio     float64
	oldWait, newWait     float64 // medians; < 0: not logged
}

// compare pairs the two builds' samples by round.
func compare(base, next *build) []comparison {
	var ids []string
	for id := range base.samples {
		if _, ok := next.samples[id]; ok {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	var cs []comparison
	for _, id := range ids {
		byRound := map[int]sample{}
		for _, s := range next.samples[id] {
			byRound[s.round] = s
		}
		var o, n []sample
		for _, s := range base.samples[id] {
			if t, ok := byRound[s.round]; ok {
				o, n = append(o, s), append(n, t)
			}
		}
		if len(o) == 0 {
			continue
		}
		c := comparison{id: id, n: len(o), writesRatio: -1}
		// col is the median of f over the rounds that have it: a figure
		// is < 0 in a round it is unknown in (p50 when no operation was
		// timed, mutex wait from an older build); -1 when none has it.
		col := func(ss []sample, f func(sample) float64) float64 {
			xs := make([]float64, len(ss))
			for i, s := range ss {
				xs[i] = f(s)
			}
			return benchlog.MedianKnown(xs)
		}
		ratios := func(f func(sample) float64) float64 {
			var xs []float64
			for i := range o {
				if f(o[i]) > 0 && f(n[i]) >= 0 {
					xs = append(xs, f(n[i])/f(o[i]))
				}
			}
			if len(xs) == 0 {
				return -1
			}
			return benchlog.Median(xs)
		}
		ops := func(s sample) float64 { return s.OpsPerSec }
		cpu := func(s sample) float64 { return s.CPUPerOp }
		writes := func(s sample) float64 { return s.WritesPerOp }
		p50 := func(s sample) float64 { return s.P50 }
		c.oldOps, c.newOps = col(o, ops), col(n, ops)
		c.oldCPU, c.newCPU = col(o, cpu), col(n, cpu)
		c.oldWrites, c.newWrites = col(o, writes), col(n, writes)
		c.oldP50 = col(o, p50)
		wait := func(s sample) float64 { return s.MutexWaitPerOp }
		c.oldWait, c.newWait = col(o, wait), col(n, wait)
		c.opsRatio, c.cpuRatio = ratios(ops), ratios(cpu)
		c.writesRatio, c.p50Ratio = ratios(writes), ratios(p50)
		for i := range o {
			if n[i].CPUPerOp < o[i].CPUPerOp {
				c.cheaper++
			}
		}
		cs = append(cs, c)
	}
	return cs
}

func writeTable(w io.Writer, cs []comparison) {
	ratio := func(v float64) string {
		if v < 0 {
			return "n/a"
		}
		return fmt.Sprintf("%.3f", v)
	}
	wait := func(v float64) string {
		if v < 0 {
			return "n/a"
		}
		return fmt.Sprintf("%.2f", v)
	}
	fmt.Fprintf(w, "%-40s %6s  %10s %10s %7s  %8s %8s %7s %9s  %7s %7s %7s  %7s %7s  %8s %8s\n",
		"measurement", "rounds", "old ops/s", "new ops/s", "new÷old",
		"old CPU", "new CPU", "new÷old", "cheaper", "old w/op", "new w/op", "new÷old", "old p50", "new÷old", "old wait", "new wait")
	for _, c := range cs {
		fmt.Fprintf(w, "%-40s %6d  %10.0f %10.0f %7s  %8.2f %8.2f %7s %9s  %7.3f %7.3f %7s  %7.1f %7s  %8s %8s\n",
			c.id, c.n, c.oldOps, c.newOps, ratio(c.opsRatio),
			c.oldCPU, c.newCPU, ratio(c.cpuRatio), fmt.Sprintf("%d of %d", c.cheaper, c.n),
			c.oldWrites, c.newWrites, ratio(c.writesRatio), c.oldP50, ratio(c.p50Ratio), wait(c.oldWait), wait(c.newWait))
	}
	fmt.Fprintln(w, "\nCPU: client CPU µs/op; w/op: write system calls per op; wait: µs waiting for a lock (sync.Mutex, RWMutex or the runtime's own) per op (medians);")
	fmt.Fprintln(w, "every new÷old is the median of the rounds' own ratios;")
	fmt.Fprintln(w, "cheaper: rounds in which the new build used less CPU per op. Clients kvwire's change does not touch are the control.")
}
