// Command netchaos is the program behind `make chaos-net`
// (scripts/chaos-net.sh): kvwire's client against the mock cluster over real
// sockets, through packet loss, duplication and a partition made with
// iptables between two network namespaces.
//
//	netchaos serve -host 198.51.100.1     the mock cluster, in the server namespace
//	netchaos run -connstr ... [flags]     the workload and the checks, in the client namespace
//
// serve prints one JSON line ({"connstr","user","password"}) and runs until
// SIGINT or SIGTERM, or -lifetime. run connects with the client's default
// options, runs the phases (see phases), prints each phase's figures as it
// ends and the checks at the end, and exits 0 when every check passed, 1
// when one failed, 3 when it could not start. It adds and removes iptables
// rules in the two namespaces itself (ip netns exec), so it knows to the
// millisecond when a fault began and ended. scripts/chaos-net.sh creates
// the namespaces, runs both, and removes everything on exit.
//
// The workload: -workers goroutines, each owning its keys (one at a time,
// a new one every 20 writes). Half the operations write (Insert of a unique
// token for a new key, then Append of one), half read the current key back
// and compare it with the key's model (see keyModel): an acknowledged write
// must be in the document once, a write that failed without matching
// client.ErrAmbiguous never, an ambiguous one at most once. After each
// phase, with no fault in place, every key of the phase is read back and
// checked the same way, and at the end every key of the run.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/kvwire/kvwire/client"
	"github.com/kvwire/kvwire/mockcluster"
)

const (
	exitOK     = 0
	exitFailed = 1
	exitUsage  = 2
	exitSetup  = 3
	// exitInterrupted: SIGINT or SIGTERM stopped the run.
	exitInterrupted = 130
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := realMain(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

func realMain(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprintln(stderr, "usage: netchaos serve|run [flags] (see scripts/chaos-net.sh)")
		return exitUsage
	}
	switch args[0] {
	case "serve":
		return cmdServe(ctx, args[1:], stdout, stderr)
	case "run":
		return cmdRun(ctx, args[1:], stdout, stderr)
	}
	fmt.Fprintf(stderr, "netchaos: unknown command %q (serve or run)\n", args[0])
	return exitUsage
}

// serveInfo is the line serve prints.
type serveInfo struct {
	ConnStr  string `json:"connstr"`
	User     string `json:"user"`
	Password string `json:"password"`
}

func cmdServe(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	host := fs.String("host", "", "IPv4 address to listen on (required)")
	nodes := fs.Int("nodes", 3, "nodes")
	lifetime := fs.Duration("lifetime", 15*time.Minute, "stop after this long even without a signal")
	if err := fs.Parse(args); err != nil {
		return exitUsage
	}
	if *host == "" {
		fmt.Fprintln(stderr, "netchaos serve: -host is required")
		return exitUsage
	}
	mc, err := mockcluster.New(mockcluster.Options{Host: *host, Nodes: *nodes})
	if err != nil {
		fmt.Fprintf(stderr, "netchaos serve: %v\n", err)
		return exitSetup
	}
	defer mc.Close()
	b, _ := json.Marshal(serveInfo{
		ConnStr:  mc.ConnString() + "/" + mockcluster.DefaultBucket,
		User:     mockcluster.DefaultUser,
		Password: mockcluster.DefaultPassword,
	})
	fmt.Fprintf(stdout, "%s\n", b)
	t := time.NewTimer(*lifetime)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
		fmt.Fprintf(stderr, "netchaos serve: stopping after -lifetime %v\n", *lifetime)
	}
	return exitOK
}

// phases is the run's schedule. Loss and duplication are in place for the
// whole phase; the partition starts `before` into its phase, lasts
// `partition`, and the phase runs `afterHeal` more to measure recovery.
func phases(t netTopo, base, loss, dup, before, partition, afterHeal time.Duration) []phaseSpec {
	l5, l30, d, p := lossFault(t, 0.05), lossFault(t, 0.30), dupFault(t, 0.20), partitionFault(t)
	return []phaseSpec{
		{name: "baseline", dur: base},
		{name: "loss-5%", dur: loss, fault: &l5, to: loss},
		{name: "loss-30%", dur: loss, fault: &l30, to: loss},
		{name: "duplicate-20%", dur: dup, fault: &d, to: dup},
		{name: "partition-" + partition.String(), dur: before + partition + afterHeal, fault: &p, from: before, to: before + partition, recover: true},
	}
}

func cmdRun(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	fs.SetOutput(stderr)
	connstr := fs.String("connstr", "", "the cluster's connection string (required)")
	user := fs.String("user", mockcluster.DefaultUser, "user")
	password := fs.String("password", mockcluster.DefaultPassword, "password")
	var t netTopo
	fs.StringVar(&t.srvNS, "srv-ns", "kvwire-cn-srv", "the cluster's namespace")
	fs.StringVar(&t.cliNS, "cli-ns", "kvwire-cn-cli", "the workload's namespace (this program's)")
	fs.StringVar(&t.srvIf, "srv-if", "kvwcn-srv", "the veth end in the cluster's namespace")
	fs.StringVar(&t.cliIf, "cli-if", "kvwcn-cli", "the veth end in the workload's namespace")
	fs.StringVar(&t.srvAddr, "srv-addr", "198.51.100.1", "the cluster's address")
	fs.StringVar(&t.cliAddr, "cli-addr", "198.51.100.2", "the workload's address")
	workers := fs.Int("workers", 8, "workload goroutines")
	seed := fs.Uint64("seed", 1, "seed of the operation mix")
	maxOps := fs.Int("max-ops", 1000000, "operations per phase at most")
	base := fs.Duration("baseline", 5*time.Second, "baseline phase (no fault)")
	loss := fs.Duration("loss", 10*time.Second, "each loss phase")
	dup := fs.Duration("dup", 10*time.Second, "duplication phase")
	before := fs.Duration("before-partition", 2*time.Second, "time before the partition starts in its phase")
	partition := fs.Duration("partition", 10*time.Second, "partition length")
	afterHeal := fs.Duration("after-heal", 8*time.Second, "time the partition phase runs after the heal")
	limit := fs.Duration("recovery-limit", time.Second, "operations must succeed again within this long of the heal")
	maxRun := fs.Duration("max-run", 10*time.Minute, "stop (and fail) after this long whatever happens")
	jsonOut := fs.String("json", "", "also write the figures as JSON to this file")
	only := fs.String("only", "", "run only the phases whose names start with one of these (comma-separated: baseline, loss, duplicate, partition)")
	if err := fs.Parse(args); err != nil {
		return exitUsage
	}
	if *connstr == "" || *workers < 1 {
		fmt.Fprintln(stderr, "netchaos run: -connstr is required and -workers must be at least 1")
		return exitUsage
	}
	ctx, cancel := context.WithTimeoutCause(ctx, *maxRun, fmt.Errorf("-max-run %v reached", *maxRun))
	defer cancel()

	cctx, ccancel := context.WithTimeout(ctx, 30*time.Second)
	c, err := client.Connect(cctx, *connstr, &client.Options{Username: *user, Password: *password})
	ccancel()
	if err != nil {
		fmt.Fprintf(stderr, "netchaos run: connecting to %s: %v\n", *connstr, err)
		return exitSetup
	}
	defer c.Close()

	lat := startLateness()
	defer lat.close()
	cfg := config{
		workers:        *workers,
		timeout:        client.DefaultKVTimeout,
		writeRatio:     0.5,
		writesPerKey:   20,
		maxOpsPerPhase: *maxOps,
		verifyAttempts: 5,
		recoveryLimit:  *limit,
		seed:           *seed,
		run:            execRunner,
		keyPrefix:      fmt.Sprintf("netchaos-%d-", time.Now().UnixNano()),
	}
	h := newHarness(cfg, clientStore{c.DefaultCollection()}, lat)
	fmt.Fprintf(stdout, "netchaos: %d workers, client defaults (KVTimeout %v), cluster %s from %s\n", cfg.workers, cfg.timeout, *connstr, t.cliAddr)
	specs := phases(t, *base, *loss, *dup, *before, *partition, *afterHeal)
	if *only != "" {
		var sel []phaseSpec
		for _, sp := range specs {
			for _, p := range strings.Split(*only, ",") {
				if p = strings.TrimSpace(p); p != "" && strings.HasPrefix(sp.name, p) {
					sel = append(sel, sp)
					break
				}
			}
		}
		if len(sel) == 0 {
			fmt.Fprintf(stderr, "netchaos run: -only %q selects no phase\n", *only)
			return exitUsage
		}
		specs = sel
	}
	var results []*phaseResult
	for i, spec := range specs {
		if ctx.Err() != nil {
			break
		}
		pr := h.runPhase(ctx, i, spec, t)
		results = append(results, pr)
		printPhase(stdout, i, len(specs), pr, cfg)
	}
	var final []violation
	finalVerified := 0
	if ctx.Err() == nil {
		finalVerified, final = h.verify(ctx, func(int) bool { return true })
		fmt.Fprintf(stdout, "== final read-back: %d keys of the whole run, %d violations\n", finalVerified, len(final))
		printViolations(stdout, final)
	}
	interrupted := ctx.Err()
	sum := summarize(results, final, interrupted)
	failed := printChecks(stdout, sum)
	if *jsonOut != "" {
		if err := writeJSON(*jsonOut, results, sum, cfg); err != nil {
			fmt.Fprintf(stderr, "netchaos run: %v\n", err)
		}
	}
	if interrupted != nil {
		fmt.Fprintf(stdout, "netchaos: stopped early: %v\n", context.Cause(ctx))
		if errors.Is(interrupted, context.Canceled) {
			return exitInterrupted
		}
		return exitFailed
	}
	if failed > 0 {
		return exitFailed
	}
	return exitOK
}

func printPhase(w io.Writer, i, n int, pr *phaseResult, cfg config) {
	desc := "no fault"
	if pr.spec.fault != nil {
		desc = pr.spec.fault.desc
		if pr.spec.from > 0 || pr.spec.to < pr.spec.dur {
			desc += fmt.Sprintf(", from +%v to +%v", pr.spec.from, pr.spec.to)
		}
	}
	fmt.Fprintf(w, "== phase %d/%d %s: %v, %s\n", i+1, n, pr.spec.name, pr.spec.dur, desc)
	gets, writes := 0, 0
	for _, o := range pr.ops {
		if o.write {
			writes++
		} else {
			gets++
		}
	}
	secs := pr.wall.Seconds()
	fmt.Fprintf(w, "   ops        %d in %.1fs: %.0f ops/s (gets %d, writes %d)\n", len(pr.ops), secs, float64(len(pr.ops))/secs, gets, writes)
	if pr.capped {
		fmt.Fprintf(w, "   note       workers stopped at the cap of %d operations before the phase's end\n", cfg.maxOpsPerPhase)
	}
	fmt.Fprintf(w, "   results    %s\n", classLine(pr.classes))
	fmt.Fprintf(w, "   writes     acknowledged %d, ambiguous %d, failed (not ambiguous) %d\n", pr.writes[acked], pr.writes[ambiguous], pr.writes[failed])
	over := "none ended past its deadline"
	if pr.maxOver > 0 {
		over = fmt.Sprintf("max overshoot %v past the %v deadline (allowed %v + 2 x scheduler lateness; worst lateness around an overshooting deadline %v)",
			pr.maxOver.Round(time.Millisecond), cfg.timeout, baseMargin, pr.maxLate.Round(time.Millisecond))
	} else {
		over = fmt.Sprintf("%s (latest end %v before it)", over, (-pr.maxOver).Round(time.Millisecond))
	}
	fmt.Fprintf(w, "   deadline   %s\n", over)
	if pr.spec.fault != nil {
		var parts []string
		for j, r := range pr.spec.fault.rules {
			if j < len(pr.matched) {
				parts = append(parts, fmt.Sprintf("%s %s %d", r.ns, r.chain, pr.matched[j]))
			}
		}
		fmt.Fprintf(w, "   faults     packets matched: %s; TCP retransmitted segments: workload %d, cluster %d; duplicates received (D-SACKs sent): workload %d, cluster %d\n",
			strings.Join(parts, ", "), pr.tcpCli.retransSegs, pr.tcpSrv.retransSegs, pr.tcpCli.dsackSent, pr.tcpSrv.dsackSent)
		for _, e := range pr.faultErrors {
			fmt.Fprintf(w, "   fault error %v\n", e)
		}
	}
	if pr.spec.recover {
		switch {
		case pr.heal.IsZero():
			fmt.Fprintf(w, "   recovery   not measured (the partition did not end)\n")
		case !pr.recovered:
			fmt.Fprintf(w, "   recovery   NOT RECOVERED within the %v run after the heal (first success of any worker after %v)\n",
				pr.start.Add(pr.spec.dur).Sub(pr.heal).Round(time.Millisecond), durOrNone(pr.firstOK))
		default:
			fmt.Fprintf(w, "   recovery   every worker succeeding again %v after the heal (first success %v after; limit %v)\n",
				pr.recovery.Round(time.Millisecond), durOrNone(pr.firstOK), cfg.recoveryLimit)
		}
		printFailuresAfterHeal(w, pr)
	}
	fmt.Fprintf(w, "   read-back  %d keys of the phase read back; %d violations in the phase\n", pr.verified, len(pr.violations))
	var cls []string
	for c := range pr.examples {
		if c != "not-found" && c != "exists" {
			cls = append(cls, c)
		}
	}
	sort.Strings(cls)
	for _, c := range cls {
		fmt.Fprintf(w, "   e.g. %-20s %s\n", c, pr.examples[c])
	}
	printViolations(w, pr.violations)
}

// printFailuresAfterHeal lists, per half second after the heal, how many
// operations that started then failed: the shape of the recovery.
func printFailuresAfterHeal(w io.Writer, pr *phaseResult) {
	if pr.heal.IsZero() {
		return
	}
	const slot = 500 * time.Millisecond
	n := int(pr.start.Add(pr.spec.dur).Sub(pr.heal)/slot) + 1
	started, bad := make([]int, n), make([]int, n)
	for _, o := range pr.ops {
		d := o.start.Sub(pr.heal)
		if d < 0 || int(d/slot) >= n {
			continue
		}
		started[d/slot]++
		if !o.answered {
			bad[d/slot]++
		}
	}
	var parts []string
	for i := range n {
		if started[i] > 0 {
			parts = append(parts, fmt.Sprintf("+%.1fs %d/%d", float64(i)*slot.Seconds(), bad[i], started[i]))
		}
	}
	fmt.Fprintf(w, "   after heal operations started per 0.5 s that failed/all: %s\n", strings.Join(parts, ", "))
}

func durOrNone(d time.Duration) string {
	if d < 0 {
		return "none"
	}
	return d.Round(time.Millisecond).String()
}

func printViolations(w io.Writer, v []violation) {
	const show = 10
	for i, x := range v {
		if i == show {
			fmt.Fprintf(w, "   ... and %d more\n", len(v)-show)
			break
		}
		fmt.Fprintf(w, "   VIOLATION  %s\n", x)
	}
}

// summary counts violations by check over the whole run.
type summary struct {
	counts      map[string]int
	interrupted error
}

var allChecks = []string{checkLost, checkTwice, checkUnreported, checkForeign, checkDeadline, checkRecovery, checkUnverified, checkVacuous}

func summarize(results []*phaseResult, final []violation, interrupted error) summary {
	s := summary{counts: map[string]int{}, interrupted: interrupted}
	for _, pr := range results {
		for _, v := range pr.violations {
			s.counts[v.check]++
		}
	}
	for _, v := range final {
		s.counts[v.check]++
	}
	return s
}

func printChecks(w io.Writer, s summary) (failed int) {
	fmt.Fprintln(w, "== checks")
	passed := 0
	for _, c := range allChecks {
		verdict := "PASS"
		if s.counts[c] > 0 {
			verdict = "FAIL"
			failed++
		} else {
			passed++
		}
		fmt.Fprintf(w, "%s  %-48s %d\n", verdict, c, s.counts[c])
	}
	if s.interrupted != nil {
		failed++
	}
	fmt.Fprintf(w, "chaos-net: %d passed, %d failed\n", passed, failed)
	return failed
}

type jsonPhase struct {
	Name          string            `json:"name"`
	Fault         string            `json:"fault,omitempty"`
	Seconds       float64           `json:"seconds"`
	Ops           int               `json:"ops"`
	OpsPerSec     float64           `json:"ops_per_s"`
	Results       map[string]int    `json:"results"`
	Acked         int               `json:"writes_acknowledged"`
	Ambiguous     int               `json:"writes_ambiguous"`
	Failed        int               `json:"writes_failed"`
	MaxOvershoot  float64           `json:"max_overshoot_ms"`
	RecoveryMs    *float64          `json:"recovery_ms,omitempty"`
	Recovered     *bool             `json:"recovered,omitempty"`
	Matched       []uint64          `json:"packets_matched,omitempty"`
	RetransCli    uint64            `json:"tcp_retrans_workload"`
	RetransSrv    uint64            `json:"tcp_retrans_cluster"`
	DupCli        uint64            `json:"dsack_sent_workload"`
	DupSrv        uint64            `json:"dsack_sent_cluster"`
	KeysVerified  int               `json:"keys_read_back"`
	Violations    []string          `json:"violations"`
	ErrorExamples map[string]string `json:"error_examples"`
}

func writeJSON(path string, results []*phaseResult, s summary, cfg config) error {
	out := struct {
		Workers   int            `json:"workers"`
		TimeoutMs float64        `json:"timeout_ms"`
		Phases    []jsonPhase    `json:"phases"`
		Checks    map[string]int `json:"violations_by_check"`
	}{cfg.workers, float64(cfg.timeout.Milliseconds()), nil, s.counts}
	for _, pr := range results {
		j := jsonPhase{Name: pr.spec.name, Seconds: pr.wall.Seconds(), Ops: len(pr.ops),
			OpsPerSec: float64(len(pr.ops)) / pr.wall.Seconds(), Results: pr.classes,
			Acked: pr.writes[acked], Ambiguous: pr.writes[ambiguous], Failed: pr.writes[failed],
			MaxOvershoot: float64(pr.maxOver.Microseconds()) / 1000, Matched: pr.matched,
			RetransCli: pr.tcpCli.retransSegs, RetransSrv: pr.tcpSrv.retransSegs,
			DupCli: pr.tcpCli.dsackSent, DupSrv: pr.tcpSrv.dsackSent, KeysVerified: pr.verified,
			Violations: []string{}, ErrorExamples: pr.examples}
		if pr.spec.fault != nil {
			j.Fault = pr.spec.fault.desc
		}
		if pr.spec.recover && !pr.heal.IsZero() {
			ms := float64(pr.recovery.Microseconds()) / 1000
			rec := pr.recovered
			j.RecoveryMs, j.Recovered = &ms, &rec
		}
		for _, v := range pr.violations {
			j.Violations = append(j.Violations, v.String())
		}
		out.Phases = append(out.Phases, j)
	}
	b, err := json.MarshalIndent(out, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}
