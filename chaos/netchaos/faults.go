package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"os/exec"
	"strconv"
	"strings"
)

// ruleComment marks every iptables rule the harness adds, so its counters
// can be read back and nothing else is touched.
const ruleComment = "kvwire-chaos-net"

// netTopo names the two namespaces and the veth pair joining them.
type netTopo struct {
	srvNS, cliNS     string // namespaces of the mock cluster and of the workload
	srvIf, cliIf     string // the veth ends in each
	srvAddr, cliAddr string // their addresses (198.51.100.0/24)
}

// rule is one iptables rule in one namespace.
type rule struct {
	ns, table, chain string
	args             []string // match and target, e.g. -i IF -j DROP
}

func (r rule) argv(action string) []string {
	a := []string{"ip", "netns", "exec", r.ns, "iptables", "-w", "5", "-t", r.table, action, r.chain,
		"-m", "comment", "--comment", ruleComment}
	return append(a, r.args...)
}

func (r rule) String() string {
	return fmt.Sprintf("%s: iptables -t %s -A %s %s", r.ns, r.table, r.chain, strings.Join(r.args, " "))
}

// faultSet is a network fault: the rules that make it, added together and
// removed together.
type faultSet struct {
	desc  string
	rules []rule
}

// Loss and partition drop packets where they arrive (INPUT of each
// namespace): a packet dropped in OUTPUT makes the sender's own send fail
// (connect and write return EPERM at once), which no network does, while
// one dropped on arrival is simply never seen, as on a lossy link.

func lossFault(t netTopo, p float64) faultSet {
	prob := strconv.FormatFloat(p, 'f', -1, 64)
	return faultSet{
		desc: fmt.Sprintf("%g%% of packets dropped on arrival, each direction", p*100),
		rules: []rule{
			{t.srvNS, "filter", "INPUT", []string{"-i", t.srvIf, "-m", "statistic", "--mode", "random", "--probability", prob, "-j", "DROP"}},
			{t.cliNS, "filter", "INPUT", []string{"-i", t.cliIf, "-m", "statistic", "--mode", "random", "--probability", prob, "-j", "DROP"}},
		},
	}
}

// dupFault duplicates packets as they leave: TEE sends a copy of the
// packet to the peer (the gateway is the peer itself, on the same link), so
// the peer receives it twice.
func dupFault(t netTopo, p float64) faultSet {
	prob := strconv.FormatFloat(p, 'f', -1, 64)
	return faultSet{
		desc: fmt.Sprintf("%g%% of packets duplicated (iptables TEE), each direction", p*100),
		rules: []rule{
			{t.cliNS, "mangle", "POSTROUTING", []string{"-o", t.cliIf, "-m", "statistic", "--mode", "random", "--probability", prob, "-j", "TEE", "--gateway", t.srvAddr}},
			{t.srvNS, "mangle", "POSTROUTING", []string{"-o", t.srvIf, "-m", "statistic", "--mode", "random", "--probability", prob, "-j", "TEE", "--gateway", t.cliAddr}},
		},
	}
}

func partitionFault(t netTopo) faultSet {
	return faultSet{
		desc: "every packet dropped on arrival, both directions",
		rules: []rule{
			{t.srvNS, "filter", "INPUT", []string{"-i", t.srvIf, "-j", "DROP"}},
			{t.cliNS, "filter", "INPUT", []string{"-i", t.cliIf, "-j", "DROP"}},
		},
	}
}

// runner runs a command and returns its standard output.
type runner func(ctx context.Context, argv []string) ([]byte, error)

func execRunner(ctx context.Context, argv []string) ([]byte, error) {
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("%s: %w: %s", strings.Join(argv, " "), err, strings.TrimSpace(stderr.String()))
	}
	return stdout.Bytes(), nil
}

// apply adds every rule of f; when one fails it removes those it added.
func (f faultSet) apply(ctx context.Context, run runner) error {
	for i, r := range f.rules {
		if _, err := run(ctx, r.argv("-A")); err != nil {
			_ = faultSet{rules: f.rules[:i]}.remove(context.WithoutCancel(ctx), run)
			return err
		}
	}
	return nil
}

// remove deletes every rule of f (each once), and returns every error.
func (f faultSet) remove(ctx context.Context, run runner) error {
	var errs []error
	for _, r := range f.rules {
		if _, err := run(ctx, r.argv("-D")); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// matched returns how many packets each rule of f has matched (the
// iptables counters), by its position in f.rules.
func (f faultSet) matched(ctx context.Context, run runner) ([]uint64, error) {
	out := make([]uint64, len(f.rules))
	for i, r := range f.rules {
		save, err := run(ctx, []string{"ip", "netns", "exec", r.ns, "iptables-save", "-c", "-t", r.table})
		if err != nil {
			return nil, err
		}
		out[i] = ruleCounter(save, r)
	}
	return out, nil
}

// ruleCounter finds r's packet counter in iptables-save -c output: lines
// "[pkts:bytes] -A CHAIN ... --comment kvwire-chaos-net ..." whose chain and
// interface are r's.
func ruleCounter(save []byte, r rule) uint64 {
	var n uint64
	sc := bufio.NewScanner(bytes.NewReader(save))
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "[") || !strings.Contains(line, ruleComment) {
			continue
		}
		end := strings.IndexByte(line, ']')
		if end < 0 {
			continue
		}
		fields := strings.Fields(line[end+1:])
		if len(fields) < 2 || fields[0] != "-A" || fields[1] != r.chain || !sameMatch(fields, r.args) {
			continue
		}
		pk, _, _ := strings.Cut(line[1:end], ":")
		v, err := strconv.ParseUint(pk, 10, 64)
		if err == nil {
			n += v
		}
	}
	return n
}

// sameMatch reports whether a saved rule has r's interface, probability
// and target (and no probability when r has none).
func sameMatch(fields, args []string) bool {
	want := map[string]string{}
	for i := 0; i+1 < len(args); i++ {
		switch args[i] {
		case "-i", "-o", "-j", "--probability":
			want[args[i]] = args[i+1]
		}
	}
	got := map[string]string{}
	for i := 0; i+1 < len(fields); i++ {
		switch fields[i] {
		case "-i", "-o", "-j", "--probability":
			got[fields[i]] = fields[i+1]
		}
	}
	if len(got) != len(want) {
		return false
	}
	for k, v := range want {
		g, ok := got[k]
		if !ok {
			return false
		}
		if k == "--probability" {
			a, err1 := strconv.ParseFloat(v, 64)
			b, err2 := strconv.ParseFloat(g, 64)
			// The kernel keeps the probability in 32 bits: 0.05 is saved
			// as 0.04999999981.
			if err1 != nil || err2 != nil || math.Abs(a-b) > 1e-6 {
				return false
			}
			continue
		}
		if g != v {
			return false
		}
	}
	return true
}

// tcpStats are a namespace's TCP counters that show the faults acting.
type tcpStats struct {
	retransSegs uint64 // segments retransmitted (loss, partition)
	dsackSent   uint64 // D-SACKs sent: duplicate segments received
}

func (a tcpStats) sub(b tcpStats) tcpStats {
	return tcpStats{a.retransSegs - b.retransSegs, a.dsackSent - b.dsackSent}
}

func readTCPStats(ctx context.Context, run runner, ns string) (tcpStats, error) {
	snmp, err := run(ctx, []string{"ip", "netns", "exec", ns, "cat", "/proc/net/snmp", "/proc/net/netstat"})
	if err != nil {
		return tcpStats{}, err
	}
	v := procCounters(snmp)
	return tcpStats{retransSegs: v["Tcp:RetransSegs"], dsackSent: v["TcpExt:TCPDSACKOldSent"] + v["TcpExt:TCPDSACKOfoSent"]}, nil
}

// procCounters parses /proc/net/snmp and /proc/net/netstat: pairs of lines
// "Prefix: name name ..." and "Prefix: value value ...".
func procCounters(b []byte) map[string]uint64 {
	out := map[string]uint64{}
	lines := strings.Split(string(b), "\n")
	for i := 0; i+1 < len(lines); i++ {
		h, v := strings.Fields(lines[i]), strings.Fields(lines[i+1])
		if len(h) < 2 || len(h) != len(v) || h[0] != v[0] || !strings.HasSuffix(h[0], ":") {
			continue
		}
		if _, err := strconv.ParseInt(v[1], 10, 64); err != nil {
			continue
		}
		for j := 1; j < len(h); j++ {
			if n, err := strconv.ParseUint(v[j], 10, 64); err == nil {
				out[h[0]+h[j]] = n
			}
		}
		i++
	}
	return out
}
