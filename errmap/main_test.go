package errmap

import (
	"flag"
	"os"
	"testing"
)

// fuzzMinimizeTime replaces go test's default -fuzzminimizetime (60s) unless
// the command line sets one. FuzzParse's seeds include the conformance
// maps, 10 to 19 KB each; the fuzzing engine's minimizer is quadratic in the
// input's length and so spends its whole budget on every new input found by
// mutating one of them, reporting 0 execs/sec meanwhile (the symptom of
// golang/go#51484). With the default, a 60 s run did a few hundred execs;
// with this, hundreds of thousands. A minimized input is only a convenience:
// a failing input is saved either way.
const fuzzMinimizeTime = "5s"

func TestMain(m *testing.M) {
	flag.Parse()
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "test.fuzzminimizetime" })
	if !set {
		if err := flag.Set("test.fuzzminimizetime", fuzzMinimizeTime); err != nil {
			panic(err) // the flag is the testing package's own
		}
	}
	os.Exit(m.Run())
}
