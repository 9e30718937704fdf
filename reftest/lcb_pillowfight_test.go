package reftest

import (
	"bytes"
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kvwire/kvwire/memdx"
	"github.com/kvwire/kvwire/mockcluster"
)

// pillowfightRun is how long cbc-pillowfight's workload runs.
const pillowfightRun = 10 * time.Second

var (
	pfTotalRE  = regexp.MustCompile(`(?m)^0x[0-9a-f]+: total: (\d+), etmpfail: (\d+), eexist: (\d+), etimeout: (\d+), retried: (\d+), rq: (\d+)$`)
	pfServerRE = regexp.MustCompile(`(?m)^  \[srv-(\d+)\] snt: (\d+), rcv: (\d+), q: (\d+), err: (\d+), tmo: (\d+), nmv: (\d+), orph: (\d+)$`)
)

// cbc-pillowfight, libcouchbase's load generator, populates 1000
// documents, then runs its mixed workload (half reads, half writes, 2
// threads each with its own connections) for 10 s until SIGINT stops it
// cleanly. The mock holds every document it populated, with a value in
// its size range; it answered no request with an error status; and the
// operations pillowfight counts (with no failure, timeout or retry) are
// exactly the writes and reads the mock received.
func TestLcbPillowfight(t *testing.T) {
	lcb := findLcbTools(t)
	c, _ := lcbCluster(t, mockcluster.Options{})
	b := c.Bucket(mockcluster.DefaultBucket)
	tg := newLcbTarget(t, c, false)
	const items, minSize, maxSize = 1000, 32, 512
	common := []string{"-t", "2", "-I", strconv.Itoa(items), "-p", "pf-", "-m", strconv.Itoa(minSize), "-M", strconv.Itoa(maxSize)}

	lcb.run(t, tg, "", "cbc-pillowfight", append(common, "--populate-only")...)
	for i := 0; i < items; i++ {
		k := fmt.Sprintf("pf-%020d", i)
		d, ok := b.Get("", "", k)
		if !ok {
			t.Fatalf("the mock holds no %s after the population", k)
		}
		// pillowfight's bodies are '#' repeated, in sizes graded from
		// -m to -M.
		if len(d.Value) < minSize || len(d.Value) > maxSize || bytes.Count(d.Value, []byte("#")) != len(d.Value) {
			t.Fatalf("%s holds %q, want %d to %d bytes of '#'", k, d.Value, minSize, maxSize)
		}
	}
	ops := func() (n uint64) {
		for _, nd := range c.Nodes() {
			n += nd.RequestCount(memdx.OpSet) + nd.RequestCount(memdx.OpGAT)
		}
		return n
	}
	before := ops()

	ctx, cancel := context.WithTimeout(context.Background(), lcbRunLimit)
	defer cancel()
	// -n: no population (done above); -c -1: until stopped; -T: at exit,
	// per-thread counts of operations and failures.
	cmd := lcb.command(ctx, tg, "cbc-pillowfight", append(common, "-n", "-r", "50", "-c", "-1", "-T")...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	timer := time.NewTimer(pillowfightRun)
	defer timer.Stop()
	select {
	case err := <-done:
		t.Fatalf("cbc-pillowfight ended before it was stopped: %v\nstderr:\n%s", err, &stderr)
	case <-timer.C:
	}
	// SIGINT asks the threads to finish their batch and exit.
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	err := <-done
	if ctx.Err() != nil {
		t.Fatalf("cbc-pillowfight did not stop within %v and was killed\nstderr:\n%s", lcbRunLimit, &stderr)
	}
	if err != nil {
		t.Fatalf("cbc-pillowfight: %v\nstderr:\n%s", err, &stderr)
	}
	log := stderr.String()
	if strings.Contains(strings.ToLower(log), "failed") {
		t.Fatalf("cbc-pillowfight reported a failure:\n%s", log)
	}

	totals := pfTotalRE.FindAllStringSubmatch(log, -1)
	if len(totals) != 2 {
		t.Fatalf("cbc-pillowfight printed %d thread totals, want 2:\n%s", len(totals), log)
	}
	var total uint64
	for _, m := range totals {
		n, _ := strconv.ParseUint(m[1], 10, 64)
		total += n
		if m[2] != "0" || m[3] != "0" || m[4] != "0" || m[5] != "0" {
			t.Errorf("a thread counted failures: %s", m[0])
		}
	}
	servers := pfServerRE.FindAllStringSubmatch(log, -1)
	if len(servers) != 2*len(c.Nodes()) {
		t.Fatalf("cbc-pillowfight printed %d server lines, want %d:\n%s", len(servers), 2*len(c.Nodes()), log)
	}
	for _, m := range servers {
		if m[2] != m[3] || m[4] != "0" || m[5] != "0" || m[6] != "0" || m[8] != "0" {
			t.Errorf("a server's packets: %s", m[0])
		}
	}
	received := ops() - before
	t.Logf("cbc-pillowfight ran %v: %d operations, %d requests received by the mock", pillowfightRun, total, received)
	if total == 0 || total != received {
		t.Errorf("cbc-pillowfight counted %d operations; the mock received %d writes and reads", total, received)
	}
	for _, nd := range c.Nodes() {
		for st := memdx.Status(1); st != 0; st++ {
			if e := nd.ErrorCount(st); e != 0 {
				t.Errorf("node %d answered %s %d times", nd.ID(), st, e)
			}
		}
	}
}
