package reftest

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kvwire/kvwire/mockcluster"
)

// libcouchbase's tests: cbc, cbc-subdoc and cbc-pillowfight, the tools of
// the C library behind the older Node.js, Python and PHP SDKs, against the
// mock cluster as subprocesses. The tools are built from the C source in
// the npm registry's couchbase 3.2.7 package (libcouchbase 3.3.4) by
// scripts/libcouchbase.sh, which scripts/test.sh runs, into a cache outside
// the repository. Each test compares what the tools print with what the
// mock holds (mockcluster.Bucket.Get, its counters) or what kvwire routes
// and reads, not only their exit status: cbc exits 0 when a key's
// operation fails, printing the error on that key's line.

// lcbTools is the directory holding cbc, cbc-subdoc and cbc-pillowfight.
type lcbTools string

// findLcbTools returns the tools' directory: $KVWIRE_LCB_BIN, or the one
// scripts/libcouchbase.sh --dir names when it has built them. It skips the
// test when neither has them, unless KVWIRE_REQUIRE_LCB=1 or CI=true, which
// fail it instead.
func findLcbTools(t *testing.T) lcbTools {
	t.Helper()
	dir := os.Getenv("KVWIRE_LCB_BIN")
	var missing string
	if dir == "" {
		out, err := exec.Command("bash", filepath.Join("..", "scripts", "libcouchbase.sh"), "--dir").Output()
		if err == nil {
			dir = strings.TrimSpace(string(out))
		} else {
			missing = "libcouchbase's tools are not built"
		}
	}
	if missing == "" {
		for _, tool := range []string{"cbc", "cbc-subdoc", "cbc-pillowfight"} {
			if _, err := os.Stat(filepath.Join(dir, tool)); err != nil {
				missing = fmt.Sprintf("%s is not in %s", tool, dir)
				break
			}
		}
	}
	if missing != "" {
		msg := missing + "; run scripts/libcouchbase.sh (make test runs it), or set KVWIRE_LCB_BIN to a directory holding cbc, cbc-subdoc and cbc-pillowfight"
		if os.Getenv("KVWIRE_REQUIRE_LCB") == "1" || os.Getenv("CI") == "true" {
			t.Fatal(msg + " [CI or KVWIRE_REQUIRE_LCB=1: this test must run, never skip]")
		}
		t.Skip(msg)
	}
	return lcbTools(dir)
}

// lcbRunLimit bounds one run of a tool. A cbc command takes milliseconds
// and pillowfight runs 10 s; the limit only ends a tool stuck on something
// the mock never answers, and says so.
const lcbRunLimit = 2 * time.Minute

// lcbOut is what a tool printed.
type lcbOut struct {
	stdout, stderr string
}

// lcbTarget is a mock cluster as libcouchbase's tools are pointed at it.
type lcbTarget struct {
	c    *mockcluster.Cluster
	b    *mockcluster.Bucket
	args []string // -U connstr -u user -P password
	home string   // the tools' $HOME: no ~/.cbcrc, no history files of the user's
}

// lcbOptions are the connection string options every run uses: bootstrap
// from the first host given (so a test knows which node's connection is
// the bootstrap one) and an operation timeout long enough that a busy
// machine running the race-enabled mock does not time operations out.
const lcbOptions = "randomize_nodes=false&operation_timeout=30&config_total_timeout=30"

// newLcbTarget points the tools at c (plain couchbase://, or couchbases://
// with the mock's CA as the trust store).
func newLcbTarget(t *testing.T, c *mockcluster.Cluster, tls bool) lcbTarget {
	t.Helper()
	scheme, addrs := "couchbase://", c.Addrs()
	opts := lcbOptions
	if tls {
		scheme, addrs = "couchbases://", c.TLSAddrs()
		ca := filepath.Join(t.TempDir(), "ca.pem")
		if err := os.WriteFile(ca, c.CACertPEM(), 0o600); err != nil {
			t.Fatal(err)
		}
		opts += "&truststorepath=" + ca
	}
	connstr := scheme + strings.Join(addrs, ",") + "/" + mockcluster.DefaultBucket + "?" + opts
	return lcbTarget{c: c, b: c.Bucket(mockcluster.DefaultBucket), home: t.TempDir(),
		args: []string{"-U", connstr, "-u", mockcluster.DefaultUser, "-P", mockcluster.DefaultPassword}}
}

// run runs tool with args (cmd's subcommand first) against the target,
// stdin as its standard input, and fails the test when it does not exit 0
// within lcbRunLimit.
func (l lcbTools) run(t *testing.T, tg lcbTarget, stdin string, tool string, args ...string) lcbOut {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), lcbRunLimit)
	defer cancel()
	cmd := l.command(ctx, tg, tool, args...)
	cmd.Stdin = strings.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	out := lcbOut{stdout: stdout.String(), stderr: stderr.String()}
	if ctx.Err() != nil {
		t.Fatalf("%s %s did not finish within %v and was killed\nstderr:\n%s", tool, strings.Join(args, " "), lcbRunLimit, out.stderr)
	}
	if err != nil {
		t.Fatalf("%s %s: %v\nstdout:\n%s\nstderr:\n%s", tool, strings.Join(args, " "), err, out.stdout, out.stderr)
	}
	return out
}

// command builds the command running tool against the target. The
// subcommand (args[0], for cbc) goes before the connection arguments.
func (l lcbTools) command(ctx context.Context, tg lcbTarget, tool string, args ...string) *exec.Cmd {
	var full []string
	if tool == "cbc" && len(args) > 0 {
		full = append(full, args[0])
		args = args[1:]
	}
	full = append(append(full, tg.args...), args...)
	cmd := exec.CommandContext(ctx, filepath.Join(string(l), tool), full...)
	cmd.Env = append(os.Environ(), "HOME="+tg.home)
	cmd.Dir = tg.home
	return cmd
}

// cbc runs `cbc SUBCOMMAND ARGS...` against the target.
func (l lcbTools) cbc(t *testing.T, tg lcbTarget, args ...string) lcbOut {
	t.Helper()
	return l.run(t, tg, "", "cbc", args...)
}

// keyLine is what cbc printed on stderr for a key: the line starting with
// the key (cbc pads keys to 20 columns) and the lines indented under it.
func (o lcbOut) keyLine(key string) string {
	var b strings.Builder
	in := false
	for _, line := range strings.Split(o.stderr, "\n") {
		switch {
		case strings.HasPrefix(line, key+" "):
			in = true
			b.WriteString(strings.TrimSpace(strings.TrimPrefix(line, key)))
		case in && strings.HasPrefix(line, "    "):
			b.WriteString(" " + strings.TrimSpace(line))
		default:
			in = false
		}
	}
	return b.String()
}

// lcbErrRE matches the error cbc prints for a key: LCB_ERR_NAME (code).
var lcbErrRE = regexp.MustCompile(`LCB_ERR_[A-Z0-9_]+ \(\d+\)`)

// keyErr is the LCB_ERR_... error cbc printed for key, or "".
func (o lcbOut) keyErr(key string) string { return lcbErrRE.FindString(o.keyLine(key)) }

var casRE = regexp.MustCompile(`CAS=0x([0-9a-f]+)`)

// keyCas is the CAS cbc printed for key, failing the test when it printed
// none.
func (o lcbOut) keyCas(t *testing.T, key string) uint64 {
	t.Helper()
	line := o.keyLine(key)
	m := casRE.FindStringSubmatch(line)
	if m == nil {
		t.Fatalf("cbc printed no CAS for %q: %q\nstderr:\n%s", key, line, o.stderr)
	}
	cas, err := strconv.ParseUint(m[1], 16, 64)
	if err != nil {
		t.Fatal(err)
	}
	return cas
}

// requireKeyErr fails the test unless cbc printed the error named want
// (LCB_ERR_...) for key.
func (o lcbOut) requireKeyErr(t *testing.T, key, want string) {
	t.Helper()
	if got := o.keyErr(key); !strings.HasPrefix(got, want+" (") {
		t.Fatalf("cbc printed %q for %q, want %s\nstderr:\n%s", o.keyLine(key), key, want, o.stderr)
	}
}

// requireKeyOK fails the test when cbc printed an error for key, or
// nothing at all.
func (o lcbOut) requireKeyOK(t *testing.T, key string) {
	t.Helper()
	line := o.keyLine(key)
	if line == "" || o.keyErr(key) != "" {
		t.Fatalf("cbc printed %q for %q\nstdout:\n%s\nstderr:\n%s", line, key, o.stdout, o.stderr)
	}
}
