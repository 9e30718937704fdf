package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvwire/kvwire/client"
	"github.com/kvwire/kvwire/memdx"
	"github.com/kvwire/kvwire/mockcluster"
)

// runBin runs the built kvcli binary with exactly env (plus PATH) and
// returns its outcome.
func runBin(t *testing.T, env map[string]string, stdin string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, kvcliBinary(t), args...)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else {
		require.NoError(t, err)
	}
	return result{code: code, stdout: out.String(), stderr: errb.String()}
}

var exportRE = regexp.MustCompile(`^export (KVCLI_[A-Z]+)='([^']*)'$`)

// TestServeEndToEnd starts `kvcli serve` as a process, runs the binary
// against it, and stops it with SIGINT.
func TestServeEndToEnd(t *testing.T) {
	bin := kvcliBinary(t)
	serve := exec.Command(bin, "serve", "--nodes", "2", "--vbuckets", "64")
	serve.Env = []string{"PATH=" + os.Getenv("PATH")}
	stdout, err := serve.StdoutPipe()
	require.NoError(t, err)
	var serveErr strings.Builder
	serve.Stderr = &serveErr
	require.NoError(t, serve.Start())
	exited := false
	defer func() {
		if !exited {
			_ = serve.Process.Kill()
			_ = serve.Wait()
		}
	}()

	// The first lines: a comment, then the exports, then "# Ctrl-C ...".
	env := map[string]string{}
	sc := bufio.NewScanner(stdout)
	var header []string
	for sc.Scan() {
		line := sc.Text()
		header = append(header, line)
		if m := exportRE.FindStringSubmatch(line); m != nil {
			env[m[1]] = m[2]
		}
		if strings.HasPrefix(line, "# Ctrl-C") {
			break
		}
	}
	require.NoError(t, sc.Err())
	go func() { _, _ = io.Copy(io.Discard, stdout) }()
	require.Contains(t, header[0], `2 node(s), bucket "default" (64 vbuckets, 1 replica)`)
	require.Regexp(t, `^couchbase://127\.0\.0\.1:\d+,127\.0\.0\.1:\d+/default$`, env[envConnStr], header)
	require.Equal(t, "Administrator", env[envUser])
	require.Equal(t, "password", env[envPassword])

	r := runBin(t, env, "", "set", "greeting", "hello")
	require.Equal(t, exitOK, r.code, r)
	assert.Regexp(t, `^stored "greeting" cas=0x[0-9a-f]{16}\n$`, r.stdout)

	r = runBin(t, env, "", "get", "greeting")
	require.Equal(t, exitOK, r.code, r)
	assert.Equal(t, "hello", r.stdout)

	r = runBin(t, env, "", "lock", "greeting", "--json")
	require.Equal(t, exitOK, r.code, r)
	var lock jsonResult
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &lock))
	require.NotEmpty(t, lock.Cas)

	r = runBin(t, env, "", "set", "greeting", "blocked", "-t", "200ms")
	assert.Equal(t, exitError, r.code, r)
	assert.Contains(t, r.stderr, "the document stayed locked")

	r = runBin(t, env, "", "unlock", "greeting", "0x1")
	assert.Equal(t, exitConflict, r.code, r)
	r = runBin(t, env, "", "unlock", "greeting", lock.Cas)
	require.Equal(t, exitOK, r.code, r)
	r = runBin(t, env, "", "set", "greeting", "unblocked")
	require.Equal(t, exitOK, r.code, r)

	r = runBin(t, env, "", "delete", "greeting")
	require.Equal(t, exitOK, r.code, r)
	r = runBin(t, env, "", "get", "greeting")
	assert.Equal(t, exitNotFound, r.code, r)
	r = runBin(t, env, "", "delete", "greeting")
	assert.Equal(t, exitNotFound, r.code, r)
	r = runBin(t, env, "", "exists", "greeting")
	assert.Equal(t, exitNotFound, r.code, r)

	// Wrong password through the real binary: the right exit status, a
	// line a person can act on, and the password nowhere.
	const secret = "hunter2-but-longer"
	r = runBin(t, with(env, envPassword, secret), "", "get", "greeting", "-v")
	assert.Equal(t, exitError, r.code, r)
	assert.Contains(t, r.stderr, "authentication failed for user \"Administrator\"")
	assert.NotContains(t, r.stdout+r.stderr, secret)

	r = runBin(t, nil, "", "help")
	assert.Equal(t, exitOK, r.code, r)
	r = runBin(t, nil, "", "nonsense")
	assert.Equal(t, exitUsage, r.code, r)

	// SIGINT stops serve cleanly.
	require.NoError(t, serve.Process.Signal(syscall.SIGINT))
	waited := make(chan error, 1)
	go func() { waited <- serve.Wait() }()
	select {
	case err := <-waited:
		exited = true
		assert.NoError(t, err, "serve exits 0 on SIGINT; stderr: %s", serveErr.String())
	case <-time.After(20 * time.Second):
		t.Fatal("serve did not stop on SIGINT")
	}
	assert.Contains(t, serveErr.String(), "kvcli serve: stopped")

	// And the cluster is gone.
	r = runBin(t, env, "", "get", "greeting")
	assert.Equal(t, exitError, r.code, r)
	assert.Contains(t, r.stderr, "nothing is listening at ")
}

// TestServeTLS runs serve in-process with --tls and --json and connects
// over couchbases:// with the CA it wrote.
func TestServeTLS(t *testing.T) {
	info, stop := startServe(t, "--tls", "--json", "--nodes", "1", "--user", "app", "--password", "pw-123", "--bucket", "travel")
	stopped := false
	defer func() {
		if !stopped {
			stop()
		}
	}()
	assert.Regexp(t, `^couchbases://127\.0\.0\.1:\d+/travel$`, info.ConnStr)
	assert.Equal(t, "app", info.User)
	assert.Equal(t, "pw-123", info.Password, "serve prints the mock's own credentials on purpose")
	require.FileExists(t, info.CACert)

	env := map[string]string{envConnStr: info.ConnStr, envUser: info.User, envPassword: info.Password}
	r := runKV(t, with(env, envCACert, info.CACert), "", "set", "k", "over tls")
	require.Equal(t, exitOK, r.code, r)
	r = runKV(t, env, "", "get", "k", "--cacert", info.CACert)
	require.Equal(t, exitOK, r.code, r)
	assert.Equal(t, "over tls", r.stdout)

	// Without the CA the certificate is not trusted.
	r = runKV(t, env, "", "get", "k")
	assert.Equal(t, exitError, r.code, r)
	assert.Contains(t, r.stderr, "TLS handshake failed")
	assert.Contains(t, r.stderr, "--cacert FILE")

	stop()
	stopped = true
	assert.NoFileExists(t, info.CACert, "the temporary CA file is removed at exit")
}

// TestServeHTTPPortsAndMemcachedBucket runs serve with --json and
// --memcached-bucket: the JSON names each node's REST port and a
// connection string for HTTP bootstrap, and those ports serve both
// buckets' configs (the memcached bucket's a ketama one) and the
// streaming endpoint.
func TestServeHTTPPortsAndMemcachedBucket(t *testing.T) {
	info, stop := startServe(t, "--json", "--nodes", "2", "--vbuckets", "16", "--memcached-bucket", "cache")
	defer stop()
	require.Len(t, info.HTTP, 2)
	assert.Empty(t, info.HTTPS)
	assert.Equal(t, "couchbase://"+info.HTTP[0]+"=http,"+info.HTTP[1]+"=http/default", info.HTTPConnStr)
	assert.Equal(t, "cache", info.MemcachedBucket)
	assert.Equal(t, "couchbase://"+info.HTTP[0]+"=http,"+info.HTTP[1]+"=http/cache", info.MemcachedConnStr)

	get := func(addr, path string) (*http.Response, []byte) {
		req, err := http.NewRequest("GET", "http://"+addr+path, nil)
		require.NoError(t, err)
		req.SetBasicAuth(info.User, info.Password)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		if strings.Contains(path, "/bs/") {
			return resp, nil // a stream: the caller reads it
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp, body
	}
	for _, addr := range info.HTTP {
		resp, body := get(addr, "/pools/default/b/cache")
		require.Equal(t, 200, resp.StatusCode, string(body))
		assert.Contains(t, string(body), `"nodeLocator":"ketama"`)
		resp, body = get(addr, "/pools/default/b/default")
		require.Equal(t, 200, resp.StatusCode, string(body))
		assert.Contains(t, string(body), `"nodeLocator":"vbucket"`)
	}
	resp, _ := get(info.HTTP[1], "/pools/default/bs/default")
	require.Equal(t, 200, resp.StatusCode)
	first, err := bufio.NewReader(resp.Body).ReadString('}')
	require.NoError(t, err)
	assert.True(t, strings.HasPrefix(first, `{"rev":`), first)
	resp.Body.Close()
	http.DefaultClient.CloseIdleConnections()
}

// TestServeMemcachedBucketOverCouchbase: the memcached bucket of `kvcli
// serve` serves kvcli's set, get (one key and a batch) and stats over
// couchbase:// (its connection string names the REST ports: a memcached
// bucket's config comes over HTTP), and refuses a sub-document lookup at
// once, naming the bucket type.
func TestServeMemcachedBucketOverCouchbase(t *testing.T) {
	info, stop := startServe(t, "--json", "--nodes", "3", "--vbuckets", "16", "--memcached-bucket", "cache")
	defer stop()
	env := map[string]string{"KVCLI_CONNSTR": info.MemcachedConnStr, "KVCLI_USER": info.User, "KVCLI_PASSWORD": info.Password}
	for _, k := range []string{"m1", "m2", "m3"} {
		r := runBin(t, env, "", "set", k, "v-"+k)
		require.Equal(t, 0, r.code, r.String())
	}
	r := runBin(t, env, "", "get", "m2")
	require.Equal(t, 0, r.code, r.String())
	assert.Equal(t, "v-m2", r.stdout)
	r = runBin(t, env, "", "get", "m1", "m2", "m3")
	require.Equal(t, 0, r.code, r.String())
	assert.Equal(t, "m1\tv-m1\nm2\tv-m2\nm3\tv-m3\n", r.stdout)
	r = runBin(t, env, "", "stats")
	require.Equal(t, 0, r.code, r.String())
	for _, n := range info.Nodes {
		assert.Contains(t, r.stdout, n+" curr_items ")
	}
	r = runBin(t, env, "", "lookup", "m1", "a")
	assert.NotEqual(t, 0, r.code, r.String())
	assert.Contains(t, r.stderr, "does not support this operation")
	assert.Contains(t, r.stderr, `bucket "cache" is a memcached bucket, which has no sub-document operations`)
}

// TestServeTLSPrintsHTTPSPorts: with --tls the JSON also names each node's
// HTTPS port, and the HTTP bootstrap string uses them.
func TestServeTLSPrintsHTTPSPorts(t *testing.T) {
	info, stop := startServe(t, "--tls", "--json", "--nodes", "2", "--vbuckets", "16")
	defer stop()
	require.Len(t, info.HTTPS, 2)
	assert.Equal(t, "couchbases://"+info.HTTPS[0]+"=http,"+info.HTTPS[1]+"=http/default", info.HTTPConnStr)
	assert.Empty(t, info.MemcachedBucket)
}

// TestServeKVPort: --kv-port puts the nodes' KV listeners on the ports
// asked for.
func TestServeKVPort(t *testing.T) {
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	require.NoError(t, err)
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	info, stop := startServe(t, "--json", "--nodes", "1", "--vbuckets", "16", "--kv-port", strconv.Itoa(port))
	defer stop()
	assert.Equal(t, []string{"127.0.0.1:" + strconv.Itoa(port)}, info.Nodes)
	assert.Equal(t, "couchbase://127.0.0.1:"+strconv.Itoa(port)+"/default", info.ConnStr)

	var stdout, stderr syncBuffer
	code := run(context.Background(), []string{"serve", "--nodes", "2", "--kv-port", "65535"},
		&env_{stdin: strings.NewReader(""), stdout: &stdout, stderr: &stderr, getenv: func(string) string { return "" }})
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, stderr.String(), "--kv-port 65535")
}

func TestServeMemcachedBucketNameClash(t *testing.T) {
	var stdout, stderr syncBuffer
	code := run(context.Background(), []string{"serve", "--memcached-bucket", "default"},
		&env_{stdin: strings.NewReader(""), stdout: &stdout, stderr: &stderr, getenv: func(string) string { return "" }})
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, stderr.String(), "--memcached-bucket")
}

// startServe runs serve in-process with args (--json among them) and
// returns what it printed; stop cancels it and checks it exits 0.
func startServe(t *testing.T, args ...string) (info serveInfo, stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var stdout, stderr syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, append([]string{"serve"}, args...),
			&env_{stdin: strings.NewReader(""), stdout: &stdout, stderr: &stderr, getenv: func(string) string { return "" }})
	}()
	stop = func() {
		cancel()
		select {
		case code := <-done:
			assert.Equal(t, exitOK, code, stderr.String())
		case <-time.After(20 * time.Second):
			t.Fatal("serve did not stop")
		}
	}
	waitFor(t, 20*time.Second, "serve's JSON line", func() bool { return strings.Contains(stdout.String(), "\n") })
	if err := json.Unmarshal([]byte(stdout.String()), &info); err != nil {
		stop()
		t.Fatalf("serve's JSON: %v: %s", err, stdout.String())
	}
	return info, stop
}

// serve's whole-number flags read decimal or 0x hex, as kvcli's other
// number flags do ("010" is ten nodes, not eight), and a --kv-port too
// large for a port is refused, not wrapped past the check into a port
// number the listener cannot use.
func TestServeNumbersAreDecimalOrHex(t *testing.T) {
	info, stop := startServe(t, "--json", "--nodes", "010", "--vbuckets", "0x10", "--replicas", "02")
	stop()
	assert.Len(t, info.Nodes, 10, "--nodes 010")

	for _, bad := range [][]string{{"--nodes", "0o2"}, {"--vbuckets", "1_024"}, {"--replicas", "0b1"},
		{"--kv-port", "0o11210"}, {"--kv-port", "9223372036854775807"}, {"--kv-port", "65536"}} {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		var stdout, stderr syncBuffer
		code := run(ctx, append([]string{"serve"}, bad...),
			&env_{stdin: strings.NewReader(""), stdout: &stdout, stderr: &stderr, getenv: func(string) string { return "" }})
		cancel()
		assert.Equal(t, exitUsage, code, "%v: %s", bad, stderr.String())
		assert.Contains(t, stderr.String(), bad[0]+" ", "%v", bad)
	}
}

// serve --json that cannot start the cluster prints one JSON document
// saying so, as every other command's --json does on failure, not an
// empty stdout.
func TestServeJSONFailureIsJSON(t *testing.T) {
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	port := strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
	r := runKV(t, map[string]string{}, "", "serve", "--json", "--nodes", "1", "--kv-port", port)
	assert.Equal(t, exitError, r.code, r)
	assert.Contains(t, r.stderr, "kvcli: starting the mock cluster: ")
	var jr jsonResult
	requireOneJSONDocument(t, r.stdout, &jr)
	assert.Equal(t, "serve", jr.Op)
	assert.False(t, jr.OK)
	require.NotNil(t, jr.Error)
	assert.Equal(t, exitError, jr.Error.Exit)
	assert.Contains(t, jr.Error.Message, "starting the mock cluster: ")

	// Without --json stdout stays empty.
	r = runKV(t, map[string]string{}, "", "serve", "--nodes", "1", "--kv-port", port)
	assert.Equal(t, exitError, r.code, r)
	assert.Empty(t, r.stdout)
}

// The first Ctrl-C lets bench's operations in flight finish (its summary
// follows); against a server that does not answer they finish only at
// their timeout. A second Ctrl-C must end kvcli then, saying so, rather
// than be swallowed.
func TestSecondInterruptEndsKvcli(t *testing.T) {
	mc, env := newMock(t, mockcluster.Options{Nodes: 1})
	release := make(chan struct{})
	defer close(release)
	hold := mc.AddFault(mockcluster.Fault{
		Match:  mockcluster.Match{OpCodes: []memdx.OpCode{memdx.OpGet, memdx.OpSet}},
		Action: mockcluster.Action{Hold: release},
	})
	defer hold.Remove()

	cmd := exec.Command(kvcliBinary(t), "bench", "--preload=false", "--concurrency", "1", "--ops", "100", "-t", "5m")
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	require.NoError(t, cmd.Start())
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	defer func() { _ = cmd.Process.Kill() }()
	waitFor(t, 30*time.Second, "an operation held by the server", func() bool { return hold.Hits() > 0 })

	// Two signals sent at once: SIGINT and SIGTERM, as two SIGINTs sent
	// back to back may reach the process as one (a signal pending is not
	// queued twice); a person's second Ctrl-C comes later and is not.
	require.NoError(t, cmd.Process.Signal(syscall.SIGINT))
	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	select {
	case err := <-done:
		var ee *exec.ExitError
		require.ErrorAs(t, err, &ee, "stderr: %s", stderr.String())
		assert.Equal(t, exitInterrupted, ee.ExitCode(), "stderr: %s", stderr.String())
		assert.Contains(t, stderr.String(), "kvcli: interrupted again: exiting without waiting for the operations in flight (a write among them may have been applied)\n")
		assert.NotContains(t, stderr.String(), "goroutine ")
	case <-time.After(30 * time.Second): // the held operation's timeout is 5m
		_ = cmd.Process.Kill()
		<-done
		t.Fatalf("a second signal did not end kvcli; stderr: %s", stderr.String())
	}
}

// A bucket name may hold '%' (Couchbase allows it): serve's connection
// strings escape it, so that the exports it prints work as printed.
func TestServeBucketWithPercentConnStrWorks(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	bg := startKvcli(ctx, []string{"serve", "--json", "--nodes", "1", "--bucket", "x%y", "--memcached-bucket", "m%c"}, nil)
	waitFor(t, 20*time.Second, "serve's JSON", func() bool { return strings.HasSuffix(bg.stdout.String(), "}\n") })
	var info serveInfo
	requireOneJSONDocument(t, bg.stdout.String(), &info)
	for cs, bucket := range map[string]string{info.ConnStr: "x%y", info.HTTPConnStr: "x%y", info.MemcachedConnStr: "m%c"} {
		p, err := client.ParseConnStr(cs)
		require.NoError(t, err, cs)
		assert.Equal(t, bucket, p.Bucket, cs)
	}
	env := map[string]string{envConnStr: info.ConnStr, envUser: info.User, envPassword: info.Password}
	r := runKV(t, env, "", "set", "k", "v")
	assert.Equal(t, exitOK, r.code, r)
	cancel()
	<-bg.done
}
