package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/kvwire/kvwire/client"
)

// jsonScanItem is one item of scan --json.
type jsonScanItem struct {
	Key      string  `json:"key"`
	Value    *string `json:"value,omitempty"`
	Encoding string  `json:"encoding,omitempty"`
	Cas      string  `json:"cas,omitempty"`
	Flags    *uint32 `json:"flags,omitempty"`
	Expiry   string  `json:"expiry,omitempty"`
}

// jsonAdmin is the JSON object of stats and flush: one entry per node.
type jsonAdmin struct {
	Op    string          `json:"op"`
	OK    bool            `json:"ok"`
	Nodes []jsonAdminNode `json:"nodes"`
}

type jsonAdminNode struct {
	Node  string            `json:"node"`
	OK    bool              `json:"ok"`
	Stats map[string]string `json:"stats,omitempty"`
	Error string            `json:"error,omitempty"`
}

func cmdScan(ctx context.Context, inv *invocation, args []string) int {
	fs := inv.newFlagSet("scan")
	prefix := fs.String("prefix", "", "scan the keys starting with this")
	from := fs.String("from", "", "scan from this key (included unless --from-exclusive)")
	to := fs.String("to", "", "scan up to this key (included unless --to-exclusive)")
	fromExcl := fs.Bool("from-exclusive", false, "leave out the --from key itself")
	toExcl := fs.Bool("to-exclusive", false, "leave out the --to key itself")
	sample := &numberFlag{bits: 64}
	fs.Var(sample, "sample", "a random sample of about `N` documents (at most N; decimal or hex)")
	seed := &numberFlag{bits: 32}
	fs.Var(seed, "seed", "`SEED` of --sample (0: random; decimal or hex, 32 bits)")
	keysOnly := fs.Bool("keys-only", false, "print keys only (the server sends no values)")
	conc := &intFlag{v: 1}
	fs.Var(conc, "concurrency", "`N` vbuckets scanned at once (decimal or hex)")
	return inv.withSession(ctx, fs, args, 0, 0, func([]string) (func(*session) int, error) {
		set := map[string]bool{}
		fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
		var st client.ScanType
		switch {
		case set["sample"] && (set["prefix"] || set["from"] || set["to"]):
			return nil, errors.New("--sample scans the whole collection: it takes no --prefix, --from or --to")
		case set["prefix"] && (set["from"] || set["to"]):
			return nil, errors.New("--prefix and --from/--to are exclusive")
		case set["sample"]:
			if sample.v == 0 {
				return nil, errors.New("--sample needs a count above 0")
			}
			st = client.SamplingScan{Limit: sample.v, Seed: uint32(seed.v)}
		case set["prefix"]:
			st = client.PrefixScan{Prefix: *prefix}
		default:
			rs := client.RangeScan{}
			if set["from"] {
				rs.From = &client.ScanTerm{Term: *from, Exclusive: *fromExcl}
			}
			if set["to"] {
				rs.To = &client.ScanTerm{Term: *to, Exclusive: *toExcl}
			}
			// Keys sort by their bytes: a swapped range holds nothing,
			// which would read as a collection without documents.
			if c := strings.Compare(*from, *to); set["from"] && set["to"] && c > 0 {
				return nil, fmt.Errorf("the range is empty: --from %q sorts after --to %q (keys sort by their bytes)", *from, *to)
			} else if set["from"] && set["to"] && c == 0 && (*fromExcl || *toExcl) {
				return nil, fmt.Errorf("the range is empty: --from and --to are both %q and an end is excluded", *from)
			}
			st = rs
		}
		if set["seed"] && !set["sample"] {
			return nil, errors.New("--seed goes with --sample")
		}
		if (*fromExcl && !set["from"]) || (*toExcl && !set["to"]) {
			return nil, errors.New("--from-exclusive and --to-exclusive go with --from and --to")
		}
		if conc.v < 1 {
			return nil, fmt.Errorf("--concurrency %d: at least 1", conc.v)
		}
		return func(s *session) int {
			res, err := s.col.Scan(ctx, st, &client.ScanOptions{Timeout: inv.opTimeout, IDsOnly: *keysOnly, Concurrency: intOf(conc.v)})
			if err != nil {
				return inv.fail("", "scan", err)
			}
			defer res.Close()
			return inv.printScan(res)
		}, nil
	})
}

// jsonScanEnd closes scan --json's document: what follows the items.
type jsonScanEnd struct {
	Count uint64     `json:"count"`
	OK    bool       `json:"ok"`
	Error *jsonError `json:"error,omitempty"`
}

// printScan prints the scan's documents as they come and returns the exit
// code. With --json stdout carries one JSON document, written as the scan
// goes so that a large scan is not held in memory:
//
//	{"op":"scan","items":[
//	{"key":"k1",...},
//	{"key":"k2",...}
//	],"count":2,"ok":true}
//
// A scan that fails midway still closes the document, with "ok":false and
// the "error" get --json would give.
func (inv *invocation) printScan(res *client.ScanResult) int {
	w := inv.env.stdout
	if inv.g.json {
		_, _ = io.WriteString(w, `{"op":"scan","items":[`)
	}
	var count atomic.Uint64
	stopProgress := inv.startProgress(inv.scanProgressWanted, scanProgress(&count))
	var n uint64
	for res.Next() {
		if inv.g.json {
			sep := ",\n"
			if n == 0 {
				sep = "\n"
			}
			_, _ = io.WriteString(w, sep)
		}
		inv.printScanItem(res.Item())
		n++
		count.Store(n)
	}
	stopProgress()
	code := exitOK
	end := jsonScanEnd{Count: n, OK: true}
	if err := res.Err(); err != nil {
		var jr *jsonResult
		code, jr = inv.failure("", "scan", err)
		end.OK, end.Error = false, jr.Error
	}
	if inv.g.json {
		b, err := json.Marshal(end)
		if err != nil { // a jsonScanEnd always marshals
			b = []byte(`{}`)
		}
		_, _ = fmt.Fprintf(w, "\n],%s\n", b[1:])
	}
	if inv.g.verbose && code == exitOK {
		fmt.Fprintf(inv.diag(), "kvcli: scan returned %d document(s)\n", n)
	}
	return code
}

// scanProgressWanted says whether scan shows a progress line: when
// stderr is a terminal and stdout is not, so that a person who sent the
// documents to a file or a pipe sees the scan advance; on a terminal the
// documents themselves show it.
func (inv *invocation) scanProgressWanted() bool {
	return inv.env.isTerminal(inv.env.stderr) && !inv.env.isTerminal(inv.env.stdout)
}

// scanProgress is scan's progress line: the documents so far, and how many
// a second since the last line.
func scanProgress(count *atomic.Uint64) func(now time.Time) string {
	last, lastN := time.Now(), uint64(0)
	return func(now time.Time) string {
		n := count.Load()
		s := fmt.Sprintf("kvcli scan: %d documents (%.0f/s)", n, rate(n-lastN, last, now))
		last, lastN = now, n
		return s
	}
}

// printScanItem prints one scanned document: its key alone (--keys-only),
// or the key, a tab and the value, each as stored when it is valid UTF-8
// without tabs or newlines and not starting with a quote, and Go-quoted
// otherwise (lineField); with --json an
// object, without a line break (printScan separates them).
func (inv *invocation) printScanItem(it client.ScanItem) {
	w := inv.env.stdout
	if inv.g.json {
		j := jsonScanItem{Key: it.ID}
		if !it.IDOnly {
			r := &jsonResult{}
			r.setValue(it.Value)
			j.Value, j.Encoding = r.Value, r.Encoding
			j.Cas = fmtCas(it.Cas)
			j.Flags = &it.Flags
			if !it.Expiry.IsZero() {
				j.Expiry = it.Expiry.UTC().Format(time.RFC3339)
			}
		}
		b, err := json.Marshal(j)
		if err != nil { // a jsonScanItem always marshals
			b = []byte(`{}`)
		}
		_, _ = w.Write(b)
		return
	}
	// The key is a field of the line as the value is (a key is any bytes
	// to the server): a key holding a line break must not print as two.
	if it.IDOnly {
		fmt.Fprintln(w, lineField(it.ID))
		return
	}
	fmt.Fprintf(w, "%s\t%s\n", lineField(it.ID), lineField(string(it.Value)))
}

func cmdStats(ctx context.Context, inv *invocation, args []string) int {
	fs := inv.newFlagSet("stats")
	node := fs.String("node", "", "ask only this node (host:port, as ping lists them)")
	return inv.withSession(ctx, fs, args, 0, 1, func(pos []string) (func(*session) int, error) {
		group := ""
		if len(pos) == 1 {
			group = pos[0]
		}
		return func(s *session) int {
			res, err := s.c.Stats(ctx, group, &client.StatsOptions{Timeout: inv.opTimeout, Node: *node})
			if res == nil && err != nil {
				return inv.fail("", "stats", err)
			}
			out := jsonAdmin{Op: "stats", OK: err == nil}
			code := exitOK
			for _, ns := range res {
				jn := jsonAdminNode{Node: ns.Node, OK: ns.Err == nil, Stats: ns.Stats}
				if ns.Err != nil {
					p := inv.explain("", ns.Err)
					code = nodeFailureCode(code, p.code)
					jn.Error = inv.redact(ns.Err.Error())
					fmt.Fprintf(inv.diag(), "kvcli: %s: %s\n", inv.redact(ns.Node), p.line)
				} else if !inv.g.json {
					names := make([]string, 0, len(ns.Stats))
					for k := range ns.Stats {
						names = append(names, k)
					}
					slices.Sort(names)
					for _, k := range names {
						fmt.Fprintf(inv.env.stdout, "%s %s %s\n", ns.Node, k, ns.Stats[k])
					}
				}
				out.Nodes = append(out.Nodes, jn)
			}
			if inv.g.json {
				inv.printJSON(out)
			}
			if err != nil && code == exitOK {
				code = exitError
			}
			return code
		}, nil
	})
}

func cmdFlush(ctx context.Context, inv *invocation, args []string) int {
	fs := inv.newFlagSet("flush")
	node := fs.String("node", "", "flush only this server (host:port)")
	delay := fs.Duration("delay", 0, "drop the items after this long instead of at once")
	yes := fs.Bool("yes", false, "confirm: every item of every server (or --node) is dropped")
	return inv.withSession(ctx, fs, args, 0, 0, func([]string) (func(*session) int, error) {
		if !*yes {
			return nil, errors.New("drops every item of the servers and cannot be undone: add --yes to confirm")
		}
		if *delay < 0 {
			return nil, fmt.Errorf("--delay %v: want a positive duration", *delay)
		}
		return func(s *session) int {
			res, err := s.c.Flush(ctx, &client.FlushOptions{Timeout: inv.opTimeout, Node: *node, Delay: *delay})
			if res == nil && err != nil {
				return inv.fail("", "flush", err)
			}
			out := jsonAdmin{Op: "flush", OK: err == nil}
			code := exitOK
			for _, nr := range res {
				jn := jsonAdminNode{Node: nr.Node, OK: nr.Err == nil}
				if nr.Err != nil {
					p := inv.explain("", nr.Err)
					code = nodeFailureCode(code, p.code)
					jn.Error = inv.redact(nr.Err.Error())
					fmt.Fprintf(inv.diag(), "kvcli: %s: %s\n", inv.redact(nr.Node), p.line)
				} else if !inv.g.json {
					if *delay > 0 {
						// Sent as whole seconds, rounded up (as the
						// client sends an expiry).
						fmt.Fprintf(inv.env.stdout, "%s flushes in %s\n", nr.Node, (*delay + time.Second - 1).Truncate(time.Second))
					} else {
						fmt.Fprintf(inv.env.stdout, "%s flushed\n", nr.Node)
					}
				}
				out.Nodes = append(out.Nodes, jn)
			}
			if inv.g.json {
				inv.printJSON(out)
			}
			if err != nil && code == exitOK {
				code = exitError
			}
			return code
		}, nil
	})
}
