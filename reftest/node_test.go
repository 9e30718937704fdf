package reftest

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kvwire/kvwire/memdx"
	"github.com/kvwire/kvwire/mockcluster"
)

// The Couchbase Node.js SDK's tests: its C++ core (shared by the Node.js,
// Python, Ruby, PHP and C++ SDKs) against the mock cluster. The SDK is
// pinned in node/package.json and package-lock.json and installed by
// scripts/node-sdk.sh (npm ci), which scripts/test.sh runs.

// nodeScript returns the path of a script in node/ and skips the test when
// node or the installed SDK is missing, unless KVWIRE_REQUIRE_NODE=1 or
// CI=true, which fail it instead.
func nodeScript(t *testing.T, name string) string {
	t.Helper()
	dir, err := filepath.Abs("node")
	if err != nil {
		t.Fatal(err)
	}
	missing := ""
	if _, err := exec.LookPath("node"); err != nil {
		missing = "node is not on PATH"
	} else if _, err := os.Stat(filepath.Join(dir, "node_modules", "couchbase", "package.json")); err != nil {
		missing = "the Couchbase Node.js SDK is not installed in reftest/node/node_modules"
	}
	if missing != "" {
		msg := missing + "; install Node.js 18+ and npm, then run scripts/node-sdk.sh (make test runs it)"
		if os.Getenv("KVWIRE_REQUIRE_NODE") == "1" || os.Getenv("CI") == "true" {
			t.Fatal(msg + " [CI or KVWIRE_REQUIRE_NODE=1: this test must run, never skip]")
		}
		t.Skip(msg)
	}
	return filepath.Join(dir, name)
}

// nodeConfig is what the scripts take as their argument.
type nodeConfig struct {
	ConnStr        string `json:"connStr"`
	User           string `json:"user"`
	Password       string `json:"password"`
	Bucket         string `json:"bucket"`
	Scope          string `json:"scope"`
	Collection     string `json:"collection"`
	TrustStorePath string `json:"trustStorePath,omitempty"`
	Mode           string `json:"mode,omitempty"`
	// Workload settings.
	Writers  int `json:"writers,omitempty"`
	MaxKeys  int `json:"maxKeys,omitempty"`
	Progress int `json:"progress,omitempty"`
	// values.js: the documents it reads, and those it writes.
	ReadKeys []string    `json:"readKeys,omitempty"`
	Write    []nodeValue `json:"write,omitempty"`
}

// nodeValue is a document values.js writes with the SDK's default
// transcoder: Type "json" (JSON holds the value), "string" (String) or
// "Buffer" (Base64 holds the bytes).
type nodeValue struct {
	Key    string `json:"key"`
	Type   string `json:"type"`
	JSON   string `json:"json,omitempty"`
	String string `json:"string,omitempty"`
	Base64 string `json:"base64,omitempty"`
}

// nodeRunLimit bounds a Node.js script's run. The scripts' slowest cases
// (values of 20 MiB, over TLS too) have a minute each, which a healthy run
// on a busy machine does not come near; the limit only ends a script stuck
// on something the mock never answers, and says so.
const nodeRunLimit = 4 * time.Minute

// Bounds on what a script prints: the one JSON line a script reports with
// (its largest, the values report, is a few KiB), and the end of its
// stderr kept for a failure message.
const (
	maxNodeLine   = 16 << 20
	maxNodeStderr = 1 << 20
)

// startNode starts a script with its config and returns the command, its
// stdout lines and its stdin. stderr goes to the test log when it fails.
func startNode(t *testing.T, ctx context.Context, script string, cfg nodeConfig) (*exec.Cmd, *bufio.Scanner, *os.File, *tailBuffer) {
	t.Helper()
	arg, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(ctx, "node", script, string(arg))
	cmd.Dir = filepath.Dir(script)
	// The SDK's own logging stays off; its telemetry and metrics reporting
	// are off in the connection string.
	cmd.Env = append(os.Environ(), "COUCHBASE_LOG_LEVEL=off")
	stderr := &tailBuffer{max: maxNodeStderr}
	cmd.Stderr = stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	inR, inW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdin = inR
	t.Cleanup(func() { inW.Close() })
	if err := cmd.Start(); err != nil {
		inR.Close()
		t.Fatal(err)
	}
	inR.Close()
	// A test that fails before it waits for the script still ends it and
	// waits: no node process and no os/exec goroutine outlives the test.
	t.Cleanup(func() { exited(cmd) })
	sc := bufio.NewScanner(out)
	sc.Buffer(make([]byte, 64<<10), maxNodeLine)
	return cmd, sc, inW, stderr
}

// tailBuffer keeps the last max bytes written to it (os/exec writes a
// command's stderr to it from one goroutine; it is read after Wait).
type tailBuffer struct {
	max     int
	b       []byte
	dropped int
}

func (w *tailBuffer) Write(p []byte) (int, error) {
	w.b = append(w.b, p...)
	if over := len(w.b) - w.max; over > 0 {
		w.dropped += over
		w.b = append(w.b[:0], w.b[over:]...)
	}
	return len(p), nil
}

func (w *tailBuffer) String() string {
	if w.dropped > 0 {
		return fmt.Sprintf("[%d bytes before these dropped]\n%s", w.dropped, w.b)
	}
	return string(w.b)
}

// exited kills cmd's process unless it has been waited for, and waits for
// it: after it, nothing writes cmd's stderr buffer any more.
func exited(cmd *exec.Cmd) {
	if cmd.ProcessState == nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	}
}

// lastLine reads sc to its end and returns its last line.
func lastLine(sc *bufio.Scanner) ([]byte, error) {
	var line []byte
	for sc.Scan() {
		line = append(line[:0], sc.Bytes()...)
	}
	return line, sc.Err()
}

// nodeEnded fails the test, with a message saying why, when a script that
// was read to its end (readErr: the error reading its stdout) did not run
// to a clean exit within ctx.
func nodeEnded(t *testing.T, ctx context.Context, name string, cmd *exec.Cmd, readErr error, stderr *tailBuffer) {
	t.Helper()
	if errors.Is(readErr, bufio.ErrTooLong) {
		exited(cmd)
		t.Fatalf("node %s printed a line over %d MiB (a report is a few KiB): it printed something it should not\nstderr:\n%s",
			name, maxNodeLine>>20, stderr)
	}
	err := cmd.Wait()
	if ctx.Err() != nil {
		t.Fatalf("node %s did not finish within %v and was killed: a case waits for something the mock never answers\nstderr:\n%s",
			name, nodeRunLimit, stderr)
	}
	if err != nil {
		t.Fatalf("node %s: %v\nstderr:\n%s", name, err, stderr)
	}
}

// runNode runs a script to its end and decodes the one JSON line it prints.
func runNode(t *testing.T, script string, cfg nodeConfig, out any) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), nodeRunLimit)
	defer cancel()
	start := time.Now()
	cmd, sc, stdin, stderr := startNode(t, ctx, script, cfg)
	stdin.Close()
	line, err := lastLine(sc)
	nodeEnded(t, ctx, filepath.Base(script), cmd, err, stderr)
	if err := json.Unmarshal(line, out); err != nil {
		t.Fatalf("node %s printed %q: %v\nstderr:\n%s", filepath.Base(script), line, err, stderr)
	}
	t.Logf("node %s (%s) ran in %v", filepath.Base(script), cfg.Mode, time.Since(start).Round(time.Millisecond))
}

// nodeCluster starts the mock the Node tests use: 3 nodes with TLS, the
// default bucket with 1 replica and the collection app.items.
func nodeCluster(t *testing.T, o mockcluster.Options) *mockcluster.Cluster {
	t.Helper()
	c, err := mockcluster.New(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	b := c.Bucket(mockcluster.DefaultBucket)
	if _, err := b.AddScope("app"); err != nil {
		t.Fatal(err)
	}
	if _, err := b.AddCollection("app", "items"); err != nil {
		t.Fatal(err)
	}
	return c
}

// sdkConnStr is the connection string the SDK takes: the nodes' KV
// addresses (host:port is the KV port for couchbase:// and couchbases://)
// and options that keep the SDK from reporting to services the mock does
// not have.
func sdkConnStr(c *mockcluster.Cluster, tls bool) string {
	scheme, addrs := "couchbase://", c.Addrs()
	if tls {
		scheme, addrs = "couchbases://", c.TLSAddrs()
	}
	return scheme + strings.Join(addrs, ",") + "?enable_metrics=false&enable_tracing=false&enable_app_telemetry=false"
}

func baseConfig(t *testing.T, c *mockcluster.Cluster, tls bool) nodeConfig {
	cfg := nodeConfig{ConnStr: sdkConnStr(c, tls), User: mockcluster.DefaultUser, Password: mockcluster.DefaultPassword,
		Bucket: mockcluster.DefaultBucket, Scope: "app", Collection: "items"}
	if tls {
		p := filepath.Join(t.TempDir(), "ca.pem")
		if err := os.WriteFile(p, c.CACertPEM(), 0o600); err != nil {
			t.Fatal(err)
		}
		cfg.TrustStorePath = p
	}
	return cfg
}

type matrixReport struct {
	Cases []struct {
		Name   string `json:"name"`
		Got    string `json:"got"`
		Detail string `json:"detail"`
	} `json:"cases"`
	Keys map[string]string `json:"keys"`
}

// nodeMatrix is what each operation of the matrix must give: "ok", or the
// class of the SDK error it must fail with. The failures are the server's
// statuses as the C++ core maps them (KEY_ENOENT, KEY_EEXISTS with and
// without a CAS, LOCKED, NOT_LOCKED, E2BIG, DELTA_BADVAL, NOT_STORED);
// LOCKED on a mutation or a second GET_LOCKED is retried until the timeout,
// as RFC 0049 makes KV_LOCKED retriable, and so is an unknown collection.
var nodeMatrix = map[string]string{
	"upsert":                        "ok",
	"get":                           "ok",
	"get missing":                   "DocumentNotFoundError",
	"exists":                        "ok",
	"exists missing":                "ok",
	"insert":                        "ok",
	"insert existing":               "DocumentExistsError",
	"replace":                       "ok",
	"replace cas mismatch":          "CasMismatchError",
	"replace missing":               "DocumentNotFoundError",
	"remove cas mismatch":           "CasMismatchError",
	"remove":                        "ok",
	"remove missing":                "DocumentNotFoundError",
	"touch":                         "ok",
	"touch missing":                 "DocumentNotFoundError",
	"getAndTouch":                   "ok",
	"getAndTouch missing":           "DocumentNotFoundError",
	"getAndLock":                    "ok",
	"upsert locked":                 "AmbiguousTimeoutError",
	"getAndLock locked":             "AmbiguousTimeoutError",
	"unlock wrong cas":              "CasMismatchError",
	"unlock":                        "ok",
	"unlock not locked":             "DocumentNotLockedError",
	"replace with the lock cas":     "ok",
	"getAnyReplica":                 "ok",
	"getAllReplicas":                "ok",
	"getAnyReplica missing":         "DocumentUnretrievableError",
	"upsert with expiry":            "ok",
	"upsert preserveExpiry":         "ok",
	"upsert without preserveExpiry": "ok",
	"durable upsert majority":       "ok",
	"durable remove majority":       "ok",
	"legacy durability persistTo replicateTo":              "ok",
	"legacy durability remove":                             "ok",
	"legacy durability replicateTo more than the replicas": "DurabilityImpossibleError",
	"value 20 MiB":               "ok",
	"value too large":            "ValueTooLargeError",
	"value incompressible 1 MiB": "ok",
	"increment initial":          "ok",
	"increment":                  "ok",
	"decrement":                  "ok",
	"increment missing":          "DocumentNotFoundError",
	"increment not a number":     "DeltaInvalidError",
	"append":                     "ok",
	"append missing":             "DocumentNotFoundError",
	"prepend missing":            "DocumentNotFoundError",
	"default collection":         "ok",
	"missing collection":         "UnambiguousTimeoutError",
}

// checkMatrix compares a report with want: every case ran and gave what
// it must.
func checkMatrix(t *testing.T, rep matrixReport, want map[string]string) {
	t.Helper()
	seen := map[string]bool{}
	for _, cs := range rep.Cases {
		seen[cs.Name] = true
		w, ok := want[cs.Name]
		if !ok {
			t.Errorf("case %q is not in the expected matrix", cs.Name)
			continue
		}
		if cs.Got != w {
			t.Errorf("%s: got %s (%s), want %s", cs.Name, cs.Got, cs.Detail, w)
		}
	}
	for name := range want {
		if !seen[name] {
			t.Errorf("case %q did not run", name)
		}
	}
}

// Every Collection and BinaryCollection operation of the Node.js SDK but
// the sub-document ones (lookupIn, mutateIn, projections: not in this
// matrix yet; gocbcore's tests cover the mock's subdoc) and range scans,
// over plain TCP and over TLS, with SCRAM login,
// collections, snappy, durability (synchronous and the legacy
// PersistTo/ReplicateTo on OBSERVE_SEQNO) and replica reads.
func TestNodeSDKOperations(t *testing.T) {
	script := nodeScript(t, "matrix.js")
	for _, tls := range []bool{false, true} {
		name := "plain"
		if tls {
			name = "tls"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			c := nodeCluster(t, mockcluster.Options{TLS: true})
			b := c.Bucket(mockcluster.DefaultBucket)
			cfg := baseConfig(t, c, tls)
			cfg.Mode = "matrix"
			var rep matrixReport
			runNode(t, script, cfg, &rep)
			checkMatrix(t, rep, nodeMatrix)

			if d, ok := b.Get("app", "items", rep.Keys["preserved"]); !ok || d.Expiry.IsZero() {
				t.Errorf("upsert with preserveExpiry: document %v, expiry %v: the expiry was not kept", ok, d.Expiry)
			}
			if d, ok := b.Get("app", "items", rep.Keys["reset"]); !ok || !d.Expiry.IsZero() {
				t.Errorf("upsert without preserveExpiry: document %v, expiry %v: want the expiry cleared", ok, d.Expiry)
			}
			if _, ok := b.Get("app", "items", "too-big"); ok {
				t.Error("the value over 20 MiB was stored")
			}
			if n := c.RequestCount(memdx.OpObserveSeqno); n == 0 {
				t.Error("the legacy durability never sent OBSERVE_SEQNO")
			}
			if n := c.RequestCount(memdx.OpGetReplica); n == 0 {
				t.Error("the replica reads never sent GET_REPLICA")
			}
		})
	}
}

// A durable write the mock holds past the durability timeout the SDK
// sends fails with DurabilityAmbiguousError and is not applied.
func TestNodeSDKDurabilityTimeout(t *testing.T) {
	script := nodeScript(t, "matrix.js")
	c := nodeCluster(t, mockcluster.Options{})
	b := c.Bucket(mockcluster.DefaultBucket)
	c.SetSyncWriteDelay(time.Hour)
	cfg := baseConfig(t, c, false)
	cfg.Mode = "durability-timeout"
	var rep matrixReport
	runNode(t, script, cfg, &rep)
	checkMatrix(t, rep, map[string]string{"durable upsert past its durability timeout": "DurabilityAmbiguousError"})
	if n := b.MutationCount("app", "items", rep.Keys["held"]); n != 0 {
		t.Errorf("the write aborted by its durability timeout was applied %d times", n)
	}
	if n := c.PendingSyncWrites(); n != 0 {
		t.Errorf("PendingSyncWrites = %d after the abort", n)
	}
}

// workload drives workload.js: progress waits until the SDK acknowledged
// more writes, stop ends it and returns its report.
type workload struct {
	t      *testing.T
	ctx    context.Context // bounds the script's run
	cmd    *exec.Cmd
	sc     *bufio.Scanner
	stdin  *os.File
	stderr *tailBuffer
	acked  int
}

type workloadReport struct {
	OK     []string `json:"ok"`
	Failed []struct {
		Key    string `json:"key"`
		Got    string `json:"got"`
		Detail string `json:"detail"`
	} `json:"failed"`
}

// progress waits until at least n more writes were acknowledged (the
// script reports every cfg.Progress).
func (w *workload) progress(what string, n int) {
	w.t.Helper()
	target := w.acked + n
	for w.acked < target {
		if !w.sc.Scan() {
			err := w.sc.Err()
			exited(w.cmd) // the stderr buffer is read once nothing writes it
			w.t.Fatalf("%s: the workload ended after %d acknowledged writes: %v\nstderr:\n%s", what, w.acked, err, w.stderr)
		}
		var p struct {
			Progress *int `json:"progress"`
		}
		if err := json.Unmarshal(w.sc.Bytes(), &p); err != nil || p.Progress == nil {
			line := string(w.sc.Bytes())
			exited(w.cmd)
			w.t.Fatalf("%s: the workload printed %q before it was stopped\nstderr:\n%s", what, line, w.stderr)
		}
		w.acked = *p.Progress
	}
}

func (w *workload) stop() workloadReport {
	w.t.Helper()
	if _, err := w.stdin.WriteString("stop\n"); err != nil {
		w.t.Fatal(err)
	}
	w.stdin.Close()
	last, err := lastLine(w.sc)
	nodeEnded(w.t, w.ctx, "workload.js", w.cmd, err, w.stderr)
	var rep workloadReport
	if err := json.Unmarshal(last, &rep); err != nil {
		w.t.Fatalf("workload.js printed %q: %v", last, err)
	}
	return rep
}

// The Node.js SDK writes through a rebalance with a forward map, a
// failover, a node stop and restart and injected TMPFAIL, LOCKED and
// NOT_MY_VBUCKET answers: every write it acknowledged is stored exactly
// once with its value, and every write it failed was applied at most once
// and failed as ambiguous (the request may have been applied: the node was
// stopped with it in flight), never as a definite failure.
func TestNodeSDKWorkloadThroughTopologyChanges(t *testing.T) {
	script := nodeScript(t, "workload.js")
	c := nodeCluster(t, mockcluster.Options{Buckets: []mockcluster.BucketOptions{{Name: mockcluster.DefaultBucket, NumVbuckets: 64}}})
	b := c.Bucket(mockcluster.DefaultBucket)
	cfg := baseConfig(t, c, false)
	cfg.Writers, cfg.MaxKeys, cfg.Progress = 8, 1_000_000, 25
	ctx, cancel := context.WithTimeout(context.Background(), nodeRunLimit)
	defer cancel()
	start := time.Now()
	cmd, sc, stdin, stderr := startNode(t, ctx, script, cfg)
	w := &workload{t: t, ctx: ctx, cmd: cmd, sc: sc, stdin: stdin, stderr: stderr}
	w.progress("start", 100)

	// A rebalance onto a new node, with a forward map, one step at a time.
	n3, err := c.AddNode()
	if err != nil {
		t.Fatal(err)
	}
	r, err := c.StartRebalance(mockcluster.RebalanceOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(b.ForwardMap()) == 0 {
		t.Fatal("the rebalance published no forward map")
	}
	for step := 0; r.Remaining() > 0; step++ {
		if _, err := r.Step(8); err != nil {
			t.Fatal(err)
		}
		w.progress("rebalance step", 50)
	}
	if err := r.Finish(); err != nil {
		t.Fatal(err)
	}
	w.progress("after the rebalance", 100)
	if n3.RequestCount(memdx.OpSet) == 0 {
		t.Fatal("the SDK never wrote to the node the rebalance added")
	}

	// A failover of node 1: its vbuckets' replicas are promoted.
	if err := c.Failover(1); err != nil {
		t.Fatal(err)
	}
	w.progress("after the failover", 100)

	// Node 2 crashes and comes back (still in the map throughout).
	c.Node(2).Stop()
	if err := c.Node(2).Restart(); err != nil {
		t.Fatal(err)
	}
	before := c.Node(2).RequestCount(memdx.OpSet)
	w.progress("after the restart", 100)
	if c.Node(2).RequestCount(memdx.OpSet) == before {
		t.Fatal("the SDK wrote nothing to the restarted node")
	}

	// Injected statuses the SDK must retry: the write is not applied.
	for _, st := range []memdx.Status{memdx.StatusTmpFail, memdx.StatusLocked, memdx.StatusNotMyVbucket} {
		f := c.AddFault(mockcluster.Fault{Match: mockcluster.Match{OpCodes: []memdx.OpCode{memdx.OpSet}},
			Action: mockcluster.Action{Status: st}, Times: 20})
		select {
		case <-f.Done():
		case <-ctx.Done():
			t.Fatalf("%s: the fault applied to %d writes before the deadline", st, f.Hits())
		}
		w.progress("after injected "+st.String(), 50)
	}
	rep := w.stop()
	elapsed := time.Since(start)

	bad := 0
	for _, k := range rep.OK {
		n := b.MutationCount("app", "items", k)
		d, found := b.Get("app", "items", k)
		if n != 1 || !found {
			bad++
			if bad <= 10 {
				t.Errorf("acknowledged write %s: stored %v, applied %d times", k, found, n)
			}
			continue
		}
		var v struct {
			Writer int `json:"writer"`
			N      int `json:"n"`
		}
		if err := json.Unmarshal(d.Value, &v); err != nil || k != "w"+itoa(v.Writer)+"-"+itoa(v.N) {
			bad++
			t.Errorf("acknowledged write %s holds %q", k, d.Value)
		}
	}
	for _, f := range rep.Failed {
		n := b.MutationCount("app", "items", f.Key)
		switch f.Got {
		case "AmbiguousTimeoutError", "RequestCanceledError":
			if n > 1 {
				t.Errorf("failed write %s (%s) was applied %d times", f.Key, f.Got, n)
			}
		default:
			t.Errorf("write %s failed with %s (%s): a definite failure the SDK should have retried", f.Key, f.Got, f.Detail)
		}
	}
	if len(rep.OK) < 600 {
		t.Errorf("only %d writes acknowledged", len(rep.OK))
	}
	t.Logf("%d writes acknowledged, %d failed ambiguously, in %v", len(rep.OK), len(rep.Failed), elapsed.Round(time.Millisecond))
}

func itoa(n int) string { return strconv.Itoa(n) }

// tailBuffer keeps a script's last stderr bytes, and says how many it
// dropped before them.
func TestTailBufferKeepsTheEnd(t *testing.T) {
	w := &tailBuffer{max: 8}
	for _, s := range []string{"abc", "defgh", "ijklmn"} {
		if n, err := w.Write([]byte(s)); n != len(s) || err != nil {
			t.Fatalf("Write(%q) = %d, %v", s, n, err)
		}
	}
	if got, want := w.String(), "[6 bytes before these dropped]\nghijklmn"; got != want {
		t.Fatalf("String() = %q, want %q", got, want)
	}
}
