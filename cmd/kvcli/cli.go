package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"sort"
	"strings"
	"sync"
	"time"
)

// Exit codes. doc.go and `kvcli help` list them; keep the three in step.
const (
	exitOK          = 0
	exitError       = 1 // the operation failed (or could not connect)
	exitUsage       = 2 // bad command line
	exitNotFound    = 3 // the document does not exist (exists: it does not)
	exitConflict    = 4 // CAS mismatch, document exists (add), not locked (unlock)
	exitInterrupted = 130
)

// Environment variables read by kvcli.
const (
	envConnStr  = "KVCLI_CONNSTR"
	envUser     = "KVCLI_USER"
	envPassword = "KVCLI_PASSWORD"
	envCACert   = "KVCLI_CACERT"
)

// defaultConnStr is used when neither -c nor KVCLI_CONNSTR is given.
const defaultConnStr = "couchbase://127.0.0.1/default"

// env is everything a command touches outside its arguments, so tests run
// commands in-process with buffers and their own environment.
type env struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	getenv         func(string) string
	// newTicker and terminal, when set, replace time.NewTicker and the
	// character-device check, so that tests drive progress lines.
	newTicker func(d time.Duration) ticker
	terminal  func(w io.Writer) bool
}

// globals are the flags every command accepts, before or after its name.
type globals struct {
	connStr        string
	user           string
	password       string
	bucket         string
	collection     string
	cacert         string
	allowPlainAuth bool
	timeout        time.Duration
	connectTimeout time.Duration
	json           bool
	verbose        bool
}

// globalFlagNames are the names addGlobalFlags registers (for usage output).
var globalFlagNames = map[string]bool{}

func init() {
	fs := flag.NewFlagSet("", flag.ContinueOnError)
	addGlobalFlags(fs, &globals{})
	fs.VisitAll(func(f *flag.Flag) { globalFlagNames[f.Name] = true })
}

// addGlobalFlags registers the global flags on fs, with g's current values
// as defaults, so a flag given before the command name survives unless it
// is given again after it.
func addGlobalFlags(fs *flag.FlagSet, g *globals) {
	for _, n := range []string{"c", "connstr"} {
		fs.StringVar(&g.connStr, n, g.connStr, "connection string (env "+envConnStr+")")
	}
	for _, n := range []string{"u", "user"} {
		fs.StringVar(&g.user, n, g.user, "user name (env "+envUser+")")
	}
	for _, n := range []string{"p", "password"} {
		fs.StringVar(&g.password, n, g.password, "password; visible in the process list, prefer env "+envPassword)
	}
	for _, n := range []string{"b", "bucket"} {
		fs.StringVar(&g.bucket, n, g.bucket, "bucket (overrides the connection string's path)")
	}
	fs.StringVar(&g.collection, "collection", g.collection, "collection as scope.collection (or collection in _default)")
	fs.StringVar(&g.cacert, "cacert", g.cacert, "PEM file of CA certificates to trust for couchbases:// and memcacheds:// (env "+envCACert+")")
	fs.BoolVar(&g.allowPlainAuth, "allow-plain-auth", g.allowPlainAuth, "memcached:// with a user: send the password in clear (SASL PLAIN without TLS)")
	for _, n := range []string{"t", "timeout"} {
		fs.DurationVar(&g.timeout, n, g.timeout, "timeout of each operation, retries included")
	}
	fs.DurationVar(&g.connectTimeout, "connect-timeout", g.connectTimeout, "timeout of connecting (without it the connection string's connect_timeout applies)")
	fs.BoolVar(&g.json, "json", g.json, "print one JSON document per command on stdout")
	fs.BoolVar(&g.verbose, "v", g.verbose, "print every attempt (node, vbucket, map, retry reason, status) and the client's debug log on stderr")
}

// command is one subcommand.
type command struct {
	name    string
	args    string // synopsis of the positional arguments
	summary string
	// run parses its own flags (with the globals) through inv.parse and
	// returns the exit code.
	run func(ctx context.Context, inv *invocation, args []string) int
}

var commands []*command

func init() {
	commands = []*command{
		{"get", "KEY...", "print a document's value (metadata on stderr); several keys in one batch", cmdGet},
		{"set", "KEY VALUE", "write a document, creating or replacing it (upsert)", cmdStore("set")},
		{"add", "KEY VALUE", "create a document; exit 4 if it exists (insert)", cmdStore("add")},
		{"replace", "KEY VALUE", "replace an existing document; exit 3 if missing", cmdStore("replace")},
		{"delete", "KEY", "delete a document; exit 3 if missing", cmdDelete},
		{"touch", "KEY EXPIRY", "set a document's expiry (0: never expires)", cmdTouch},
		{"lock", "KEY", "read and lock a document; prints the CAS that unlocks it", cmdLock},
		{"unlock", "KEY CAS", "unlock a document locked with lock", cmdUnlock},
		{"incr", "KEY", "add to a counter document; prints the new value", cmdCounter("incr")},
		{"decr", "KEY", "subtract from a counter document (stops at 0)", cmdCounter("decr")},
		{"append", "KEY VALUE", "append bytes to an existing document", cmdStore("append")},
		{"prepend", "KEY VALUE", "prepend bytes to an existing document", cmdStore("prepend")},
		{"exists", "KEY", "print true or false; exit 0 if it exists, 3 if not", cmdExists},
		{"lookup", "KEY PATH...", "read paths of a JSON document (sub-document lookup)", cmdLookup},
		{"mutate", "KEY OP PATH [VALUE]...", "change paths of a JSON document atomically (sub-document)", cmdMutate},
		{"ping", "", "send NOOP to every node and print the latencies", cmdPing},
		{"diag", "", "print every connection's state, sockets and last activity (no I/O); --wait for readiness", cmdDiag},
		{"route", "KEY", "print the key's vbucket and nodes by the current and forward map", cmdRoute},
		{"scan", "", "print the documents (or keys) of a key range, a prefix or a random sample", cmdScan},
		{"stats", "[GROUP]", "print every node's statistics (a group: settings, items, slabs...)", cmdStats},
		{"flush", "", "memcached: drop every item of every server (needs --yes)", cmdFlush},
		{"bench", "", "generate load: concurrent gets and sets with latency percentiles", cmdBench},
		{"serve", "", "run a mock Couchbase cluster in the foreground", cmdServe},
		{"demo", "", "show retries through a rebalance, a lock and TMPFAIL on a mock cluster", cmdDemo},
		{"help", "[COMMAND]", "print this help, or a command's", nil}, // run set below
	}
	commands[len(commands)-1].run = cmdHelp
}

func lookupCommand(name string) *command {
	for _, c := range commands {
		if c.name == name {
			return c
		}
	}
	return nil
}

// invocation is one run of kvcli: its environment, globals and command.
type invocation struct {
	*env
	g   globals
	cmd *command
	// passwordFlag is set when -p was used on the command line;
	// timeoutFlag when -t was; cacertFlag when --cacert was (rather than
	// KVCLI_CACERT).
	passwordFlag       bool
	timeoutFlag        bool
	cacertFlag         bool
	connectTimeoutFlag bool
	// userFrom and connStrFrom say where the user name and the
	// connection string came from: "" (none, or the default), the
	// environment variable, or the flag, so that an error can say.
	userFrom    string
	connStrFrom string
	// opTimeout is the timeout each operation gets and connectTimeout the
	// one connecting gets, with where it came from (set by connect).
	opTimeout          time.Duration
	connectTimeout     time.Duration
	connectTimeoutFrom string
	// errMu serializes writes to stderr (see diag).
	errMu sync.Mutex
	// reports, when set (bench), keeps the client's slow-operation and
	// orphan reports.
	reports *reports
}

// run is kvcli: it parses args (without the program name) and returns the
// exit code. ctx is canceled on SIGINT/SIGTERM.
func run(ctx context.Context, args []string, e *env) int {
	// stdout remembers its first write error: a result that did not
	// reach it (a full disk) is a failure, not exit 0.
	out := &outWriter{w: e.stdout}
	ec := *e
	ec.stdout = out
	e = &ec
	inv := &invocation{env: e}
	code := inv.run(ctx, args)
	if out.err != nil {
		done := ""
		if code == exitOK {
			// A write did happen: a script must not redo it (incr, append).
			done, code = " (the command itself succeeded)", exitError
		}
		fmt.Fprintf(inv.diag(), "kvcli: writing the output: %s%s\n", inv.redact(out.err.Error()), done)
	}
	return code
}

// outWriter is stdout; it keeps the first write error.
type outWriter struct {
	w   io.Writer
	mu  sync.Mutex
	err error
}

func (o *outWriter) Write(p []byte) (int, error) {
	n, err := o.w.Write(p)
	if err != nil {
		o.mu.Lock()
		if o.err == nil {
			o.err = err
		}
		o.mu.Unlock()
	}
	return n, err
}

// run is run's parsing and command, on inv's environment.
func (inv *invocation) run(ctx context.Context, args []string) int {
	e := inv.env
	inv.g = globals{
		connStr:        e.getenv(envConnStr),
		user:           e.getenv(envUser),
		password:       e.getenv(envPassword),
		cacert:         e.getenv(envCACert),
		collection:     "_default._default",
		timeout:        2500 * time.Millisecond,
		connectTimeout: 10 * time.Second,
	}
	if inv.g.connStr == "" {
		inv.g.connStr = defaultConnStr
	} else {
		inv.connStrFrom = envConnStr
	}
	if inv.g.user != "" {
		inv.userFrom = envUser
	}
	// Global flags before the command name.
	fs := inv.newFlagSet("kvcli")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			printUsage(e.stdout)
			return exitOK
		}
		inv.usageError("%s", flagError(fs, err))
		return exitUsage
	}
	inv.noteFlags(fs)
	rest := fs.Args()
	if len(rest) == 0 {
		printUsage(e.stderr)
		return exitUsage
	}
	cmd := lookupCommand(rest[0])
	if cmd == nil {
		inv.usageError("unknown command %q (see kvcli help)", rest[0])
		return exitUsage
	}
	inv.cmd = cmd
	return cmd.run(ctx, inv, rest[1:])
}

// newFlagSet returns a flag set carrying the global flags.
func (inv *invocation) newFlagSet(name string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard) // errors are reported by usageError
	addGlobalFlags(fs, &inv.g)
	return fs
}

// noteFlags records which global flags the command line set.
func (inv *invocation) noteFlags(fs *flag.FlagSet) {
	fs.Visit(func(f *flag.Flag) {
		switch f.Name {
		case "p", "password":
			inv.passwordFlag = true
		case "u", "user":
			inv.userFrom = "-u"
		case "c", "connstr":
			inv.connStrFrom = "-c"
		case "t", "timeout":
			inv.timeoutFlag = true
		case "cacert":
			inv.cacertFlag = true
		case "connect-timeout":
			inv.connectTimeoutFlag = true
		}
	})
}

// parse parses a command's arguments: flags (the command's and the global
// ones) may come before, between or after the positional arguments; "--"
// ends the flags. It checks the number of positional arguments (max < 0:
// no upper bound). ok is false when the command should return code (help
// was asked for, or the command line is wrong).
func (inv *invocation) parse(fs *flag.FlagSet, args []string, min, max int) (pos []string, code int, ok bool) {
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				inv.printCommandUsage(inv.env.stdout, fs)
				return nil, exitOK, false
			}
			msg := flagError(fs, err)
			// A negative number (a delta, a value) is read as a flag:
			// say how to pass it.
			if name, ok := strings.CutPrefix(err.Error(), "flag provided but not defined: -"); ok && name != "" && name[0] >= '0' && name[0] <= '9' {
				msg = strings.TrimSuffix(msg, ")") + "; an argument that starts with - goes after --, as in kvcli " + inv.cmd.name + " -- " + inv.cmd.args + ")"
			}
			inv.usageError("%s: %s", inv.cmd.name, msg)
			return nil, exitUsage, false
		}
		rest := fs.Args()
		if len(rest) == 0 {
			break
		}
		consumed := len(args) - len(rest)
		if consumed > 0 && args[consumed-1] == "--" {
			pos = append(pos, rest...)
			break
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
	inv.noteFlags(fs)
	if len(pos) < min || (max >= 0 && len(pos) > max) {
		want := inv.cmd.args
		if want == "" {
			want = "no arguments"
		}
		inv.usageError("%s takes %s, got %d argument(s)\n%s", inv.cmd.name, want, len(pos),
			strings.TrimSpace("usage: kvcli "+inv.cmd.name+" [flags] "+inv.cmd.args))
		return nil, exitUsage, false
	}
	return pos, exitOK, true
}

// Messages of the flag package, whose flags it names with one dash.
var (
	flagInvalidValue = regexp.MustCompile(`^invalid (?:boolean )?value "(.*)" for (?:flag )?-([^\s:]+): (.*)$`)
	flagName         = regexp.MustCompile(`(^|[\s(]|: )-([A-Za-z][A-Za-z0-9-]+)\b`)
)

// flagError rewrites a flag-parsing error of fs the way kvcli's help
// writes flags (--timeout, -t) and, for a value that does not parse, says
// what the flag wants, with an example.
func flagError(fs *flag.FlagSet, err error) string {
	msg := err.Error()
	if name, ok := strings.CutPrefix(msg, "flag provided but not defined: -"); ok {
		return "unknown flag " + dashed(name) + " (-h lists the flags)"
	}
	if name, ok := strings.CutPrefix(msg, "flag needs an argument: -"); ok {
		return dashed(name) + " needs a value"
	}
	m := flagInvalidValue.FindStringSubmatch(msg)
	if m == nil {
		return flagName.ReplaceAllString(msg, "$1--$2")
	}
	value, name, why := m[1], m[2], m[3]
	shown := dashed(name)
	if f := fs.Lookup(name); f != nil {
		if g, ok := f.Value.(flag.Getter); ok {
			switch g.Get().(type) {
			case time.Duration:
				why = "want a duration such as 2.5s, 500ms, 1m or 1h30m (units ns, us, ms, s, m, h)"
			case bool:
				why = "want true or false (--" + name + " alone means true)"
			case int, int64, uint, uint64:
				why = "want a whole number, such as 16"
			case float64:
				why = "want a number, such as 0.5"
			}
		}
		if why == "parse error" {
			why = "not a valid value"
		}
	}
	return fmt.Sprintf("%s %q: %s", shown, value, why)
}

// dashed is a flag name as kvcli's help writes it: -t, --timeout.
func dashed(name string) string {
	if len(name) == 1 {
		return "-" + name
	}
	return "--" + name
}

// usageError prints a usage error on stderr. format is kvcli's own text;
// the arguments are redacted (see redact).
func (inv *invocation) usageError(format string, args ...any) {
	fmt.Fprintf(inv.diag(), "kvcli: "+format+"\n", inv.redactArgs(args)...)
}

// warnf prints a warning on stderr, as usageError does.
func (inv *invocation) warnf(format string, args ...any) {
	fmt.Fprintf(inv.diag(), "kvcli: warning: "+format+"\n", inv.redactArgs(args)...)
}

func cmdHelp(_ context.Context, inv *invocation, args []string) int {
	fs := inv.newFlagSet("help")
	pos, code, ok := inv.parse(fs, args, 0, 1)
	if !ok {
		return code
	}
	if len(pos) == 0 {
		printUsage(inv.env.stdout)
		return exitOK
	}
	cmd := lookupCommand(pos[0])
	if cmd == nil {
		inv.usageError("unknown command %q", pos[0])
		return exitUsage
	}
	// Ask the command for its own help, which knows its flags.
	sub := &invocation{env: inv.env, g: inv.g, cmd: cmd}
	return cmd.run(context.Background(), sub, []string{"-h"})
}

// commandHelp has the long help of commands, printed by kvcli CMD -h.
var commandHelp = map[string]string{
	"get": "Prints the value on stdout exactly as stored (a newline is added only on a terminal)\nand `KEY cas=0x... flags=0x... datatype=... size=N` on stderr.\n" +
		"With several keys they are read in one batch (GetMany): each key found is one line\n" +
		"KEY<TAB>VALUE (each Go-quoted when not one line of UTF-8, or when holding a tab or\n" +
		"starting with \"; with --json one document whose\n" +
		"\"results\" hold an object per key), each failure is reported on stderr; exit 0 when every\n" +
		"key was read, 3 when the only failures are missing documents, else the first other\n" +
		"failure's code.",
	"set":     "VALUE is the value itself, - for stdin, or @FILE for a file's contents (--raw: literally).",
	"add":     "VALUE is the value itself, - for stdin, or @FILE for a file's contents (--raw: literally).",
	"replace": "VALUE is the value itself, - for stdin, or @FILE for a file's contents (--raw: literally).",
	"append":  "VALUE is the value itself, - for stdin, or @FILE for a file's contents (--raw: literally).",
	"prepend": "VALUE is the value itself, - for stdin, or @FILE for a file's contents (--raw: literally).",
	"touch":   "EXPIRY is a duration (90s, 10m, 24h); 0 removes the expiry.",
	"lock": "Prints the value on stdout and the lock's CAS on stderr (with --json: in the object).\n" +
		"Only that CAS writes or unlocks the document until the lock expires.\n" +
		"The server (kv_engine) gives a lock time of 0 or over its maximum (30s by default) its\n" +
		"default of 15s, not the maximum: where the bucket's maximum is set lower, a longer\n" +
		"--lock-time locks for 15s.",
	"unlock": "CAS is the one lock printed, in hex (0x...) or decimal.",
	"exists": "Exit status 0 when the document exists, 3 when it does not.",
	"incr":   "Prints the counter's new value. Without --initial a missing document is an error (exit 3).",
	"decr":   "Prints the counter's new value. Without --initial a missing document is an error (exit 3).",
	"route":  "Sends nothing: shows where the client would send KEY under the config it fetched.",
	"ping":   "Exit status 1 when any node did not answer.",
	"diag": "Sends nothing: prints each node's connections as the client sees them (SDK RFC 0034):\n" +
		"ID (node/place in its pool), state (connecting, connected, reconnecting, disconnecting,\n" +
		"disconnected), local socket and id, time since the last request, and why one is not\n" +
		"connected; then the cluster's state (online, degraded, offline). --wait D first waits up to\n" +
		"D for every connection (--degraded: one per service) to be up. --json prints RFC 0061's\n" +
		"report under \"diagnostics\". Exit status 1 when the cluster is not online (or --wait\n" +
		"ran out).",
	"scan": "Scans the collection (Couchbase Server 7.2+ range scans): the whole of it, --from/--to,\n" +
		"--prefix, or --sample N. Prints KEY<TAB>VALUE per document (each Go-quoted when it is\n" +
		"not one line of UTF-8, or holds a tab or starts with \"), the key alone with --keys-only;\n" +
		"with --json one JSON document, {\"op\":\"scan\",\"items\":[...],\"count\":N,\"ok\":true}, an item\n" +
		"per line, written as it goes.\n" +
		"Documents come in key order within a vbucket, interleaved across vbuckets. When stdout is\n" +
		"a file or a pipe and stderr a terminal, a progress line on stderr counts them (not with --json).",
	"stats": "Prints NODE NAME VALUE per statistic of every node (--node: one). memcached's groups:\n" +
		"settings, items, slabs, sizes; Couchbase Server needs the Stats privilege. A key group\n" +
		"(\"key DOC VB\", key-byid, vkey) asks only the node holding vbucket VB (--node: that one).\n" +
		"Exit status 1 when any node failed.",
	"flush": "memcached:// only (a Couchbase bucket is flushed through its REST API). Without --yes it\n" +
		"does nothing and exits 2. --delay D drops the items after D instead of at once.",
	"bench": "Runs --concurrency workers doing gets (--ratio of them) and sets of --value-size bytes over\n" +
		"--keys keys for --duration (or --ops operations), prints a progress line every second on\n" +
		"stderr (the preload's too; none with --json) and a summary with latency percentiles. Only\n" +
		"operations that succeeded count in ops/s and the percentiles; failed ones are errors by kind. Ctrl-C stops it early (in the preload too); the summary is still printed and the exit status is 0.\n" +
		"--rate N starts operation i at i/N seconds (a fixed schedule: after a stall the workers catch\n" +
		"up) and the summary says when the client could not keep up. --key-dist zipfian draws key k\n" +
		"with probability proportional to (1+k)^-s (--zipf-s). --seed repeats a worker's choices.\n" +
		"--batch N sends a worker's gets as one GetMany of N keys and its sets as one UpsertMany.",
	"serve": "Starts an in-process mock cluster and prints its connection string and credentials\n" +
		"(the mock's own test credentials, printed on purpose) as shell exports, then runs until\n" +
		"Ctrl-C or SIGTERM.",
	"demo": "Starts a mock cluster and runs a workload through a rebalance (with a forward map),\n" +
		"a held lock and injected TMPFAIL answers, then prints what was retried and why.\n" +
		"Exit status 0 only when every operation succeeded and every write is on the cluster.",
	"lookup": "Prints one line per path: the path and its JSON value, or its error. PATH is N1QL-style\n" +
		"(a.b[0].c, backticks quote a key with dots); \"\" is the whole document. --xattr PATH reads an\n" +
		"extended attribute ($document.CAS, ... are the document's metadata). At most 16 paths.\n" +
		"Exit status 0 when every path was read, 3 when the document or a path is missing, 1 when a\n" +
		"path failed otherwise (the other paths are still printed).",
	"mutate": "Applies every OP PATH [VALUE] in one atomic change: all or nothing. OP is insert, upsert,\n" +
		"replace, remove, append, prepend (arrays), array-insert (PATH ends in [i]), add-unique,\n" +
		"incr or decr (VALUE a decimal delta); OP-xattr (upsert-xattr, ...) works on an extended\n" +
		"attribute, and those come first. VALUE is JSON text ('\"Ada\"', 42, '{\"a\":1}'); an\n" +
		"xattr VALUE of ${Mutation.CAS}, ${Mutation.seqno} or ${Mutation.value_crc32c} is expanded\n" +
		"by the server. replace \"\" VALUE sets the whole document, remove \"\" deletes it.\n" +
		"Prints the new CAS and the counters' new values. Exit status 3 when the document or a\n" +
		"path is missing, 4 on a CAS mismatch, an existing document (--insert-doc) or an existing\n" +
		"path (insert, add-unique).",
}

// printCommandUsage prints kvcli CMD -h: synopsis, help and the command's
// own flags (the global flags are listed by kvcli help).
func (inv *invocation) printCommandUsage(w io.Writer, fs *flag.FlagSet) {
	c := inv.cmd
	fmt.Fprintf(w, "%s\n\n%s.\n", strings.TrimSpace("usage: kvcli "+c.name+" [flags] "+c.args), c.summary)
	if h := commandHelp[c.name]; h != "" {
		fmt.Fprintf(w, "\n%s\n", h)
	}
	// A flag set built by newFlagSet carries the global flags, which
	// kvcli help lists; others (serve's) list everything they take.
	hasGlobals := fs.Lookup("connstr") != nil
	var own []*flag.Flag
	fs.VisitAll(func(f *flag.Flag) {
		if !hasGlobals || !globalFlagNames[f.Name] {
			own = append(own, f)
		}
	})
	if len(own) > 0 {
		fmt.Fprintf(w, "\nflags:\n")
		printFlags(w, own)
	}
	if hasGlobals {
		fmt.Fprintf(w, "\nGlobal flags (-c, -u, -b, --collection, -t, --json, -v, ...): see kvcli help.\n")
	}
}

func printFlags(w io.Writer, fl []*flag.Flag) {
	sort.Slice(fl, func(i, j int) bool { return fl[i].Name < fl[j].Name })
	for _, f := range fl {
		name, usage := flag.UnquoteUsage(f)
		dash := "--"
		if len(f.Name) == 1 {
			dash = "-"
		}
		line := "  " + dash + f.Name
		if name != "" {
			line += " " + name
		}
		def := f.DefValue
		if def != "" && def != "false" && def != "0" && def != "0s" {
			usage += " (default " + def + ")"
		}
		fmt.Fprintf(w, "%-26s %s\n", line, usage)
	}
}

func printUsage(w io.Writer) {
	var b strings.Builder
	b.WriteString(`kvcli: a command-line client for Couchbase key-value and memcached, built on kvwire.

usage: kvcli [global flags] COMMAND [flags] [arguments]
       kvcli COMMAND -h        one command's help and its own flags (or: kvcli help COMMAND)

commands:
`)
	for _, c := range commands {
		fmt.Fprintf(&b, "  %-9s %-11s %s\n", c.name, c.args, c.summary)
	}
	b.WriteString(`
global flags (before or after the command):
  -c, --connstr URL       connection string (env KVCLI_CONNSTR; default couchbase://127.0.0.1/default)
                          couchbase://h1,h2:11210/bucket, couchbases://h1/bucket, memcached://h1:11211,h2,
                          memcacheds://h1 (memcached over TLS); couchbase://name/bucket looks up the DNS SRV
                          record _couchbase._tcp.name; h1:8091=http reads the config over HTTP
  -u, --user NAME         user name (env KVCLI_USER)
  -p, --password PW       password: shows in the process list; prefer env KVCLI_PASSWORD
  -b, --bucket NAME       bucket, instead of the connection string's path (default "default")
  --collection S.C        scope.collection, or a collection of _default (default _default._default)
  --cacert FILE           CA certificates (PEM) to trust for couchbases:// and memcacheds:// (env
                          KVCLI_CACERT, which other schemes ignore; only those two use TLS)
  --allow-plain-auth      memcached:// with a user, to a memcached with SASL: allow SASL PLAIN,
                          which sends the password in clear (memcacheds:// sends it over TLS
                          and needs no opt-in; a memcached without SASL ignores the user)
  -t, --timeout D         timeout of each operation, retries included (default 2.5s, or the
                          connection string's kv_timeout, or 20s with ?profile=wan_development)
  --connect-timeout D     timeout of connecting (default 10s, or the connection string's
                          connect_timeout, or 20s with ?profile=wan_development)
  --json                  print one JSON document per command on stdout
  -v                      trace every attempt and log the client's debug events on stderr

values (set, add, replace, append, prepend):
  VALUE     the argument itself
  -         read the value from stdin
  @FILE     read the value from FILE
  --raw     take VALUE literally, even when it is - or starts with @

output:
  stdout carries the result (a value, a counter, true/false, "stored ..."), stderr everything
  else (get's metadata, errors, warnings, -v traces). With --json stdout carries one JSON
  document per command (several keys' results, or a scan's items, in one array of it); values
  are UTF-8 strings ("encoding":"utf8") or base64 ("encoding":"base64"), CAS values are hex
  strings ("0x...").

exit status:
  0    success (exists: the document exists)
  1    the operation failed: could not connect, wrong credentials, timeout, server error
  2    usage: bad flags or arguments
  3    document not found (exists: it does not exist; lookup, mutate: or a path)
  4    conflict: CAS mismatch, document already exists (add), document not locked (unlock),
       path exists (mutate)
  130  interrupted (Ctrl-C) before the operation finished

The password is never printed or logged by kvcli (serve prints the mock's own test credentials).
`)
	io.WriteString(w, b.String())
}

// isTerminal reports whether w is a terminal (a character device), without
// dependencies.
func isTerminal(w any) bool {
	if o, ok := w.(*outWriter); ok {
		w = o.w
	}
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
