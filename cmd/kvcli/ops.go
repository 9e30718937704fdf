package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/kvwire/kvwire/client"
)

// withSession parses the command line, lets prepare check the positional
// arguments and flags (its error is a usage error, reported before
// anything connects), connects and runs the operation prepare returned.
func (inv *invocation) withSession(ctx context.Context, fs *flag.FlagSet, args []string, min, max int,
	prepare func(pos []string) (func(s *session) int, error)) int {
	pos, code, ok := inv.parse(fs, args, min, max)
	if !ok {
		return code
	}
	if strings.HasPrefix(inv.cmd.args, "KEY") {
		if k := pos[0]; k == "" || len(k) > client.MaxKeyLength {
			inv.usageError("%s: key of %d bytes: a key has 1 to %d bytes", inv.cmd.name, len(k), client.MaxKeyLength)
			return exitUsage
		}
	}
	op, err := prepare(pos)
	if err != nil && ctx.Err() != nil && errors.Is(err, ctx.Err()) {
		// Interrupted while preparing (reading a value from stdin or a FIFO).
		return inv.fail("", inv.cmd.name, ctx.Err())
	}
	if err != nil {
		inv.usageError("%s: %v", inv.cmd.name, err)
		return exitUsage
	}
	s, code := inv.connect(ctx, nil)
	if s == nil {
		return code
	}
	defer s.Close()
	return op(s)
}

// printMeta prints get's and lock's metadata line on stderr.
func (inv *invocation) printMeta(key string, r client.GetResult, extra string) {
	fmt.Fprintf(inv.diag(), "%s cas=%s flags=0x%08x datatype=%s size=%d%s\n",
		strconv.Quote(inv.redact(key)), fmtCas(r.Cas), r.Flags, r.Datatype, len(r.Value), extra)
}

func (inv *invocation) getResult(op, key string, r client.GetResult) *jsonResult {
	res := &jsonResult{Op: op, Key: key, OK: true, Cas: fmtCas(r.Cas), Flags: &r.Flags, Datatype: r.Datatype.String()}
	res.setValue(r.Value)
	res.setRetries(r.RetryAttempts, r.RetryReasons)
	return res
}

func cmdGet(ctx context.Context, inv *invocation, args []string) int {
	fs := inv.newFlagSet("get")
	touch := fs.Duration("touch", 0, "also set the document's expiry to this (get-and-touch; one KEY only)")
	return inv.withSession(ctx, fs, args, 1, -1, func(pos []string) (func(*session) int, error) {
		key := pos[0]
		if *touch < 0 {
			return nil, fmt.Errorf("--touch %v: want a positive duration", *touch)
		}
		if len(pos) > 1 {
			if *touch > 0 {
				return nil, fmt.Errorf("--touch takes one KEY, got %d", len(pos))
			}
			for _, k := range pos[1:] {
				if k == "" || len(k) > client.MaxKeyLength {
					return nil, fmt.Errorf("key of %d bytes: a key has 1 to %d bytes", len(k), client.MaxKeyLength)
				}
			}
			return func(s *session) int { return inv.getMany(ctx, s, pos) }, nil
		}
		return func(s *session) int {
			var r client.GetResult
			var err error
			if *touch > 0 {
				r, err = s.col.GetAndTouch(ctx, key, *touch, &client.GetAndTouchOptions{Timeout: inv.opTimeout})
			} else {
				r, err = s.col.Get(ctx, key, &client.GetOptions{Timeout: inv.opTimeout})
			}
			if err != nil {
				return inv.fail(key, "get", err)
			}
			if inv.g.json {
				inv.printJSON(inv.getResult("get", key, r))
				return exitOK
			}
			inv.printMeta(key, r, "")
			inv.writeValue(r.Value)
			return exitOK
		}, nil
	})
}

// getMany reads several keys in one GetMany. Each key found is one line
// on stdout, KEY<TAB>VALUE (the value quoted, as scan quotes it, when it
// is not one line of UTF-8); each failure is reported on stderr as get
// reports it, after the key when the line does not name it. With --json stdout carries one document, {"op":"get",
// "ok":...,"results":[...]}, a result per key in order, each as get
// --json prints it. The exit code is 0 when every key was read,
// exitNotFound when the only failures are missing documents, and
// otherwise the code of the first other failure.
func (inv *invocation) getMany(ctx context.Context, s *session, keys []string) int {
	res := s.col.GetMany(ctx, keys, &client.GetManyOptions{Timeout: inv.opTimeout})
	code := exitOK
	doc := &jsonResult{Op: "get", OK: true}
	for _, r := range res {
		if r.Err != nil {
			c, jr := inv.failureOf(r.Key, "get", r.Err, true)
			if code == exitOK || (code == exitNotFound && c != exitNotFound) {
				code = c
			}
			doc.OK = false
			doc.Results = append(doc.Results, jr)
			continue
		}
		if inv.g.json {
			doc.Results = append(doc.Results, inv.getResult("get", r.Key, r.GetResult))
			continue
		}
		fmt.Fprintf(inv.env.stdout, "%s\t%s\n", lineField(r.Key), lineField(string(r.Value)))
	}
	if inv.g.json {
		inv.printJSON(doc)
	}
	return code
}

// lineField is s as one field of a tab-separated line: as it is, or
// quoted (strconv.Quote) when it is not valid UTF-8, holds a tab or a line
// break, or starts with a quote.
func lineField(s string) string {
	if !utf8.ValidString(s) || strings.ContainsAny(s, "\t\n\r") || strings.HasPrefix(s, `"`) {
		return strconv.Quote(s)
	}
	return s
}

// parseDecOrHex reads a number in hex (0x...) or decimal; only those: a
// leading 0 is a decimal digit, not octal's prefix (strconv's base 0 would
// read 0123 as 83, and take 0b, 0o and underscores too).
func parseDecOrHex(s string, bits int) (uint64, error) {
	if h, ok := strings.CutPrefix(s, "0x"); ok {
		return strconv.ParseUint(h, 16, bits)
	}
	if h, ok := strings.CutPrefix(s, "0X"); ok {
		return strconv.ParseUint(h, 16, bits)
	}
	return strconv.ParseUint(s, 10, bits)
}

// parseCas reads a CAS in hex (0x...) or decimal.
func parseCas(s string) (uint64, error) {
	v, err := parseDecOrHex(s, 64)
	if err != nil || v == 0 {
		return 0, fmt.Errorf("CAS %q: want a non-zero number, hex (0x...) or decimal", s)
	}
	return v, nil
}

// numberFlag is a --flags or --delta flag: decimal or hex, of bits bits.
type numberFlag struct {
	v    uint64
	bits int
}

func (n *numberFlag) String() string {
	if n == nil {
		return "0"
	}
	return strconv.FormatUint(n.v, 10)
}

func (n *numberFlag) Set(s string) error {
	v, err := parseDecOrHex(s, n.bits)
	if errors.Is(err, strconv.ErrRange) {
		return fmt.Errorf("does not fit %d bits", n.bits)
	}
	if err != nil {
		return errors.New("want a number, decimal or hex (0x...)")
	}
	n.v = v
	return nil
}

// intFlag is a whole-number flag (--concurrency, --ops, --nodes...) read
// as numberFlag reads, decimal or hex (0x...), but signed: a minus sign is
// read, so that the command's range check names the value and what it
// wants. It holds an int64; the command bounds it to its own type.
type intFlag struct{ v int64 }

func (n *intFlag) String() string {
	if n == nil {
		return "0"
	}
	return strconv.FormatInt(n.v, 10)
}

func (n *intFlag) Set(s string) error {
	digits, neg := strings.CutPrefix(s, "-")
	u, err := parseDecOrHex(digits, 63)
	if errors.Is(err, strconv.ErrRange) {
		return errors.New("does not fit 64 bits (signed)")
	}
	if err != nil {
		return errors.New("want a whole number, such as 16 (decimal, or hex 0x...)")
	}
	n.v = int64(u)
	if neg {
		n.v = -n.v
	}
	return nil
}

// casFlag is a --cas flag: hex or decimal.
type casFlag uint64

func (c *casFlag) String() string {
	if c == nil || *c == 0 {
		return ""
	}
	return fmtCas(uint64(*c))
}

func (c *casFlag) Set(s string) error {
	v, err := parseCas(s)
	if err != nil {
		return err
	}
	*c = casFlag(v)
	return nil
}

// cmdStore is set, add, replace, append and prepend.
func cmdStore(name string) func(context.Context, *invocation, []string) int {
	return func(ctx context.Context, inv *invocation, args []string) int {
		fs := inv.newFlagSet(name)
		raw := fs.Bool("raw", false, "take VALUE literally (no - or @FILE)")
		var cas casFlag
		var expiry *time.Duration
		var flags *numberFlag
		var jsonDoc *bool
		if name != "add" {
			fs.Var(&cas, "cas", "write only if the document's CAS is still this (hex or decimal)")
		}
		if name == "set" || name == "add" || name == "replace" {
			expiry = fs.Duration("expiry", 0, "time to live (0: never expires)")
			flags = &numberFlag{bits: 32}
			fs.Var(flags, "flags", "the document's 32-bit flags (decimal or hex)")
			jsonDoc = fs.Bool("json-doc", false, "mark the value as JSON (datatype bit)")
		}
		return inv.withSession(ctx, fs, args, 2, 2, func(pos []string) (func(*session) int, error) {
			key := pos[0]
			var exp time.Duration
			var fl uint32
			var isJSON bool
			if expiry != nil {
				if *expiry < 0 {
					return nil, fmt.Errorf("--expiry %v: want a positive duration", *expiry)
				}
				exp, fl, isJSON = *expiry, uint32(flags.v), *jsonDoc
			}
			value, err := inv.readValue(ctx, pos[1], *raw)
			if err != nil {
				return nil, err
			}
			return func(s *session) int {
				t, c := inv.opTimeout, uint64(cas)
				var r client.MutationResult
				var err error
				verb := "stored"
				switch name {
				case "set":
					r, err = s.col.Upsert(ctx, key, value, &client.UpsertOptions{Timeout: t, Cas: c, Expiry: exp, Flags: fl, JSON: isJSON})
				case "add":
					r, err = s.col.Insert(ctx, key, value, &client.InsertOptions{Timeout: t, Expiry: exp, Flags: fl, JSON: isJSON})
				case "replace":
					r, err = s.col.Replace(ctx, key, value, &client.ReplaceOptions{Timeout: t, Cas: c, Expiry: exp, Flags: fl, JSON: isJSON})
				case "append":
					r, err = s.col.Append(ctx, key, value, &client.AppendOptions{Timeout: t, Cas: c})
					verb = "appended to"
				case "prepend":
					r, err = s.col.Prepend(ctx, key, value, &client.PrependOptions{Timeout: t, Cas: c})
					verb = "prepended to"
				}
				if err != nil {
					return inv.fail(key, name, err)
				}
				inv.mutated(name, verb, key, r)
				return exitOK
			}, nil
		})
	}
}

// mutated prints a mutation's result.
func (inv *invocation) mutated(op, verb, key string, r client.MutationResult) {
	if inv.g.json {
		res := &jsonResult{Op: op, Key: key, OK: true}
		res.setMutation(r)
		inv.printJSON(res)
		return
	}
	if r.Cas != 0 {
		fmt.Fprintf(inv.env.stdout, "%s %q cas=%s\n", verb, key, fmtCas(r.Cas))
	} else {
		fmt.Fprintf(inv.env.stdout, "%s %q\n", verb, key)
	}
}

func cmdDelete(ctx context.Context, inv *invocation, args []string) int {
	fs := inv.newFlagSet("delete")
	var cas casFlag
	fs.Var(&cas, "cas", "delete only if the document's CAS is still this")
	return inv.withSession(ctx, fs, args, 1, 1, func(pos []string) (func(*session) int, error) {
		key := pos[0]
		return func(s *session) int {
			r, err := s.col.Remove(ctx, key, &client.RemoveOptions{Timeout: inv.opTimeout, Cas: uint64(cas)})
			if err != nil {
				return inv.fail(key, "delete", err)
			}
			if inv.g.json {
				res := &jsonResult{Op: "delete", Key: key, OK: true}
				res.setMutation(r)
				inv.printJSON(res)
				return exitOK
			}
			fmt.Fprintf(inv.env.stdout, "deleted %q\n", key)
			return exitOK
		}, nil
	})
}

func cmdTouch(ctx context.Context, inv *invocation, args []string) int {
	fs := inv.newFlagSet("touch")
	return inv.withSession(ctx, fs, args, 2, 2, func(pos []string) (func(*session) int, error) {
		key := pos[0]
		exp, err := parseExpiry(pos[1])
		if err != nil {
			return nil, err
		}
		return func(s *session) int {
			r, err := s.col.Touch(ctx, key, exp, &client.TouchOptions{Timeout: inv.opTimeout})
			if err != nil {
				return inv.fail(key, "touch", err)
			}
			inv.mutated("touch", "touched", key, r)
			return exitOK
		}, nil
	})
}

// parseExpiry reads a duration; a bare "0" means no expiry.
func parseExpiry(s string) (time.Duration, error) {
	if s == "0" {
		return 0, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return 0, fmt.Errorf("expiry %q: want a duration such as 90s, 10m or 24h (0: never)", s)
	}
	return d, nil
}

func cmdLock(ctx context.Context, inv *invocation, args []string) int {
	fs := inv.newFlagSet("lock")
	lockTime := fs.Duration("lock-time", 15*time.Second, "how long the lock holds, 1s to 30s, rounded up to whole seconds")
	return inv.withSession(ctx, fs, args, 1, 1, func(pos []string) (func(*session) int, error) {
		key := pos[0]
		if *lockTime < time.Second || *lockTime > 30*time.Second {
			return nil, fmt.Errorf("--lock-time %v: want 1s to 30s", *lockTime)
		}
		// The lock time goes as whole seconds, rounded up (as the client
		// sends it): say that one, not the one typed.
		sent := (*lockTime + time.Second - 1).Truncate(time.Second)
		return func(s *session) int {
			r, err := s.col.GetAndLock(ctx, key, *lockTime, &client.GetAndLockOptions{Timeout: inv.opTimeout})
			if err != nil {
				return inv.fail(key, "lock", err)
			}
			if inv.g.json {
				res := inv.getResult("lock", key, r)
				res.LockTime = sent.Seconds()
				inv.printJSON(res)
				return exitOK
			}
			inv.printMeta(key, r, fmt.Sprintf(" locked for %v; unlock with: kvcli unlock %s %s", sent, quoteArg(key), fmtCas(r.Cas)))
			inv.writeValue(r.Value)
			return exitOK
		}, nil
	})
}

// quoteArg quotes a key for a shell command line when it needs it.
func quoteArg(s string) string {
	if s == "" {
		return "''"
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_:./", r)) {
			return shellQuote(s)
		}
	}
	if s[0] == '-' {
		return "-- " + s
	}
	return s
}

func cmdUnlock(ctx context.Context, inv *invocation, args []string) int {
	fs := inv.newFlagSet("unlock")
	return inv.withSession(ctx, fs, args, 2, 2, func(pos []string) (func(*session) int, error) {
		key := pos[0]
		cas, err := parseCas(pos[1])
		if err != nil {
			return nil, err
		}
		return func(s *session) int {
			if err := s.col.Unlock(ctx, key, cas, &client.UnlockOptions{Timeout: inv.opTimeout}); err != nil {
				return inv.fail(key, "unlock", err)
			}
			if inv.g.json {
				inv.printJSON(&jsonResult{Op: "unlock", Key: key, OK: true})
				return exitOK
			}
			fmt.Fprintf(inv.env.stdout, "unlocked %q\n", key)
			return exitOK
		}, nil
	})
}

// cmdCounter is incr and decr.
func cmdCounter(name string) func(context.Context, *invocation, []string) int {
	return func(ctx context.Context, inv *invocation, args []string) int {
		fs := inv.newFlagSet(name)
		delta := &numberFlag{v: 1, bits: 64}
		fs.Var(delta, "delta", "amount to add or subtract, decimal or hex (0 reads the counter)")
		initial := fs.String("initial", "", "create a missing document with this value, decimal or hex (the delta is not applied)")
		expiry := fs.Duration("expiry", 0, "time to live of a document the counter creates")
		return inv.withSession(ctx, fs, args, 1, 1, func(pos []string) (func(*session) int, error) {
			key := pos[0]
			if *expiry < 0 {
				return nil, fmt.Errorf("--expiry %v: want a positive duration", *expiry)
			}
			var init *uint64
			if *initial != "" {
				v, err := parseDecOrHex(*initial, 64)
				if err != nil {
					return nil, fmt.Errorf("--initial %q: want a number, decimal or hex (0x...)", *initial)
				}
				init = &v
			} else if *expiry != 0 {
				return nil, errors.New("--expiry needs --initial: it is the time to live of a counter --initial creates")
			}
			return func(s *session) int {
				var r client.CounterResult
				var err error
				if name == "incr" {
					r, err = s.col.Increment(ctx, key, &client.IncrementOptions{Timeout: inv.opTimeout, Delta: delta.v, Initial: init, Expiry: *expiry})
				} else {
					r, err = s.col.Decrement(ctx, key, &client.DecrementOptions{Timeout: inv.opTimeout, Delta: delta.v, Initial: init, Expiry: *expiry})
				}
				if err != nil {
					return inv.fail(key, name, err)
				}
				if inv.g.json {
					res := &jsonResult{Op: name, Key: key, OK: true, Counter: &r.Value}
					res.setMutation(r.MutationResult)
					inv.printJSON(res)
					return exitOK
				}
				fmt.Fprintf(inv.env.stdout, "%d\n", r.Value)
				return exitOK
			}, nil
		})
	}
}

func cmdExists(ctx context.Context, inv *invocation, args []string) int {
	fs := inv.newFlagSet("exists")
	return inv.withSession(ctx, fs, args, 1, 1, func(pos []string) (func(*session) int, error) {
		key := pos[0]
		return func(s *session) int {
			r, err := s.col.Exists(ctx, key, &client.ExistsOptions{Timeout: inv.opTimeout})
			if err != nil {
				return inv.fail(key, "exists", err)
			}
			code := exitOK
			if !r.Exists {
				code = exitNotFound
			}
			if inv.g.json {
				res := &jsonResult{Op: "exists", Key: key, OK: true, Exists: &r.Exists}
				if r.Exists {
					res.Cas = fmtCas(r.Cas)
				}
				res.setRetries(r.RetryAttempts, r.RetryReasons)
				inv.printJSON(res)
				return code
			}
			fmt.Fprintf(inv.env.stdout, "%t\n", r.Exists)
			return code
		}, nil
	})
}

func cmdPing(ctx context.Context, inv *invocation, args []string) int {
	fs := inv.newFlagSet("ping")
	reportID := fs.String("report-id", "", "with --json, the id of the ping report (`ID`; default: a random one)")
	return inv.withSession(ctx, fs, args, 0, 0, func([]string) (func(*session) int, error) {
		return func(s *session) int {
			report := s.c.PingReport(ctx, &client.PingOptions{ReportID: *reportID})
			code := exitOK
			res := &jsonResult{Op: "ping", OK: true}
			for _, p := range report.Endpoints {
				jp := jsonPing{Node: p.Node, OK: p.Err == nil, State: p.State().String(), Local: p.Local, Remote: p.Remote, LocalID: p.LocalID}
				if p.Err != nil {
					code = nodeFailureCode(code, inv.explain("", p.Err).code)
					res.OK = false
					jp.Error = inv.redact(p.Err.Error())
					if !inv.g.json {
						fmt.Fprintf(inv.env.stdout, "%-22s FAILED  %s\n", p.Node, jp.Error)
					}
				} else {
					us := uint64(max(p.Latency, 0) / time.Microsecond)
					jp.LatencyUS = &us
					if !inv.g.json {
						fmt.Fprintf(inv.env.stdout, "%-22s ok      %s\n", p.Node, fmtDuration(p.Latency))
					}
				}
				res.Ping = append(res.Ping, jp)
			}
			if inv.g.json {
				// The errors in the report are redacted as the lines'
				// (keeping what they match: the state is read from them).
				for i := range report.Endpoints {
					if e := &report.Endpoints[i]; e.Err != nil {
						e.Err = redactedError{msg: inv.redact(e.Err.Error()), err: e.Err}
					}
				}
				raw, err := json.Marshal(report)
				if err != nil {
					return inv.fail("", "ping", err)
				}
				res.PingReport = raw
				inv.printJSON(res)
			}
			return code
		}, nil
	})
}

// redactedError is err with its message redacted: it still matches what
// err matches.
type redactedError struct {
	msg string
	err error
}

func (e redactedError) Error() string { return e.msg }
func (e redactedError) Unwrap() error { return e.err }

// nodeFailureCode is the exit code of a command asking every node (ping,
// stats, flush) once one more node failed with code c, after code: the
// first failure's, except that an interrupt (Ctrl-C, which fails every
// node still waiting) wins.
func nodeFailureCode(code, c int) int {
	if code == exitOK || c == exitInterrupted {
		return c
	}
	return code
}

func cmdRoute(ctx context.Context, inv *invocation, args []string) int {
	fs := inv.newFlagSet("route")
	return inv.withSession(ctx, fs, args, 1, 1, func(pos []string) (func(*session) int, error) {
		key := pos[0]
		return func(s *session) int {
			ri := s.c.Route(key)
			if inv.g.json {
				jr := &jsonRoute{Active: ri.Active, Replicas: ri.Replicas, HasForwardMap: ri.HasForwardMap,
					ForwardActive: ri.ForwardActive, ForwardReplicas: ri.ForwardReplicas, Ketama: ri.Ketama}
				if !ri.Ketama {
					vb := ri.Vbucket
					jr.Vbucket = &vb
					jr.ConfigRev = ri.ConfigRev.Rev
				}
				inv.printJSON(&jsonResult{Op: "route", Key: key, OK: true, Route: jr})
				return exitOK
			}
			w := inv.env.stdout
			fmt.Fprintf(w, "key       %q\n", key)
			if ri.Ketama {
				fmt.Fprintf(w, "server    %s (ketama)\n", orNone(ri.Active))
				return exitOK
			}
			fmt.Fprintf(w, "vbucket   %d (config rev %d)\n", ri.Vbucket, ri.ConfigRev.Rev)
			fmt.Fprintf(w, "active    %s\n", orNone(ri.Active))
			fmt.Fprintf(w, "replicas  %s\n", joinNodes(ri.Replicas))
			if ri.HasForwardMap {
				fmt.Fprintf(w, "forward   active %s, replicas %s (a rebalance is moving the vbucket)\n",
					orNone(ri.ForwardActive), joinNodes(ri.ForwardReplicas))
			} else {
				fmt.Fprintf(w, "forward   none (no rebalance in progress)\n")
			}
			return exitOK
		}, nil
	})
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}

func joinNodes(ns []string) string {
	if len(ns) == 0 {
		return "(none)"
	}
	out := make([]string, len(ns))
	for i, n := range ns {
		out[i] = orNone(n)
	}
	return strings.Join(out, ", ")
}
