package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"strings"

	"github.com/kvwire/kvwire/mockcluster"
)

// serveInfo is what serve prints with --json (one object, then it runs).
type serveInfo struct {
	ConnStr  string   `json:"connstr"`
	User     string   `json:"user"`
	Password string   `json:"password"`
	Bucket   string   `json:"bucket"`
	Nodes    []string `json:"nodes"`
	// HTTP are the nodes' cluster manager (REST) addresses, one per node,
	// and HTTPS their HTTPS ones with --tls.
	HTTP  []string `json:"http"`
	HTTPS []string `json:"https,omitempty"`
	// HTTPConnStr bootstraps over HTTP only (RFC 0011's host:port=http).
	HTTPConnStr string `json:"http_connstr"`
	// MemcachedBucket is --memcached-bucket's bucket; MemcachedConnStr
	// reaches it over HTTP, as memcached buckets are bootstrapped.
	MemcachedBucket  string `json:"memcached_bucket,omitempty"`
	MemcachedConnStr string `json:"memcached_connstr,omitempty"`
	CACert           string `json:"cacert,omitempty"`
}

// serveFlags are serve's settings.
type serveFlags struct {
	nodes, vbuckets, replicas int
	kvPort                    int
	tls                       bool
	caOut                     string
	user, password, bucket    string
	memcachedBucket           string
}

// cmdServe runs a mock cluster until interrupted. It is long because it
// is one sequence read top to bottom, each part used once: the mock's
// flags and their checks, the cluster started, its details printed as
// shell exports or JSON, the wait for Ctrl-C.
func cmdServe(ctx context.Context, inv *invocation, args []string) int {
	sf, code, ok := parseServeFlags(inv, args)
	if !ok {
		return code
	}
	// A failure is a line on stderr and, with --json, one document on
	// stdout, as every command's --json has it.
	fail := func(line string) int {
		fmt.Fprintf(inv.env.stderr, "kvcli: %s\n", line)
		if inv.g.json {
			inv.printJSON(&jsonResult{Op: "serve", Error: &jsonError{Kind: kindOther, Message: line, Exit: exitError}})
		}
		return exitError
	}
	mc, err := mockcluster.New(sf.options(inv))
	if err != nil {
		return fail(fmt.Sprintf("starting the mock cluster: %v", err))
	}
	defer mc.Close()

	info := sf.info(mc)
	if sf.tls {
		path, cleanup, err := writeCACert(mc, sf.caOut)
		if err != nil {
			return fail(fmt.Sprintf("writing the CA certificate: %v", err))
		}
		defer cleanup()
		info.CACert = path
	}
	if inv.g.json {
		inv.printJSON(info)
	} else {
		printServeInfo(inv.env.stdout, sf, info)
	}
	<-ctx.Done()
	mc.Close()
	fmt.Fprintf(inv.env.stderr, "kvcli serve: stopped\n")
	return exitOK
}

// parseServeFlags reads serve's flags; ok is false when serve must exit
// with code (usage printed, or a usage error).
func parseServeFlags(inv *invocation, args []string) (sf serveFlags, code int, ok bool) {
	// serve connects to nothing: it has its own --user, --password and
	// --bucket (the mock's), so it does not take the global flags.
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	nodes := &intFlag{v: mockcluster.DefaultNodes}
	fs.Var(nodes, "nodes", "number `N` of nodes (decimal or hex)")
	vbuckets := &intFlag{v: mockcluster.DefaultNumVbuckets}
	fs.Var(vbuckets, "vbuckets", "`N` vbuckets of the bucket (decimal or hex)")
	replicas := &intFlag{v: mockcluster.DefaultNumReplicas}
	fs.Var(replicas, "replicas", "`N` replicas of the bucket (0 for none, at most 3)")
	kvPort := &intFlag{}
	fs.Var(kvPort, "kv-port", "the first node's KV `PORT`, the next one's the port after, and so on (default: ports the system chooses); 11210 lets couchbase://host name the nodes without ports. With --tls it is the plain KV port: the TLS ports, which the printed couchbases:// string names, are the system's choice")
	fs.BoolVar(&sf.tls, "tls", false, "listen with TLS (couchbases://, and HTTPS for the REST endpoints) with a CA generated at start")
	fs.StringVar(&sf.caOut, "cacert-out", "", "with --tls: write the CA certificate here (default: a temporary file removed at exit)")
	fs.StringVar(&sf.user, "user", mockcluster.DefaultUser, "the mock's user")
	fs.StringVar(&sf.password, "password", mockcluster.DefaultPassword, "the mock's password")
	fs.StringVar(&sf.bucket, "bucket", mockcluster.DefaultBucket, "the mock's bucket")
	fs.StringVar(&sf.memcachedBucket, "memcached-bucket", "", "also create a memcached bucket of this name (clients bootstrap it over HTTP)")
	fs.BoolVar(&inv.g.json, "json", inv.g.json, "print the connection details, the nodes' HTTP ports among them, as one JSON object")
	fs.BoolVar(&inv.g.verbose, "v", inv.g.verbose, "log the mock's connection errors on stderr")
	if _, code, ok := inv.parse(fs, args, 0, 0); !ok {
		return sf, code, false
	}
	sf.nodes, sf.vbuckets, sf.replicas, sf.kvPort = intOf(nodes.v), intOf(vbuckets.v), intOf(replicas.v), intOf(kvPort.v)
	switch {
	case sf.nodes < 1 || sf.nodes > 64:
		inv.usageError("--nodes %d: want 1 to 64", sf.nodes)
	case sf.vbuckets < 1 || sf.vbuckets > 1024:
		inv.usageError("--vbuckets %d: want 1 to 1024", sf.vbuckets)
	case sf.replicas < 0 || sf.replicas > 3:
		inv.usageError("--replicas %d: want 0 to 3", sf.replicas)
	case sf.kvPort < 0 || sf.kvPort > 65536-sf.nodes: // nodes is at most 64: no overflow
		inv.usageError("--kv-port %d: want 1 to %d for %d node(s), or 0 for ports the system chooses", sf.kvPort, 65536-sf.nodes, sf.nodes)
	case sf.user == "" || sf.bucket == "":
		inv.usageError("--user and --bucket must not be empty")
	case sf.caOut != "" && !sf.tls:
		inv.usageError("--cacert-out needs --tls")
	case sf.memcachedBucket == sf.bucket:
		inv.usageError("--memcached-bucket %q: the couchbase bucket has that name", sf.memcachedBucket)
	default:
		return sf, exitOK, true
	}
	return sf, exitUsage, false
}

// options are the mock cluster's options for these flags.
func (sf serveFlags) options(inv *invocation) mockcluster.Options {
	nr := sf.replicas
	if nr == 0 {
		nr = mockcluster.NoReplicas
	}
	opts := mockcluster.Options{
		Nodes:   sf.nodes,
		Buckets: []mockcluster.BucketOptions{{Name: sf.bucket, NumVbuckets: sf.vbuckets, NumReplicas: nr}},
		Users:   []mockcluster.User{{Name: sf.user, Password: sf.password, Buckets: []string{"*"}}},
		TLS:     sf.tls,
		KVPort:  sf.kvPort,
	}
	if sf.memcachedBucket != "" {
		opts.Buckets = append(opts.Buckets, mockcluster.BucketOptions{Name: sf.memcachedBucket, Type: mockcluster.MemcachedBucket})
	}
	if inv.g.verbose {
		opts.Logf = func(format string, args ...any) {
			fmt.Fprintf(inv.env.stderr, "mockcluster: "+format+"\n", args...)
		}
	}
	return opts
}

// info is what serve prints about the running cluster mc.
func (sf serveFlags) info(mc *mockcluster.Cluster) serveInfo {
	// A bucket name may hold '%', which a connection string's path
	// escapes (%25).
	bucket := url.PathEscape(sf.bucket)
	info := serveInfo{
		ConnStr:     mc.ConnString() + "/" + bucket,
		User:        sf.user,
		Password:    sf.password,
		Bucket:      sf.bucket,
		Nodes:       mc.Addrs(),
		HTTP:        mc.MgmtAddrs(),
		HTTPConnStr: mc.HTTPConnString() + "/" + bucket,
	}
	if sf.tls {
		info.Nodes = mc.TLSAddrs()
		info.HTTPS = mc.MgmtTLSAddrs()
	}
	if sf.memcachedBucket != "" {
		info.MemcachedBucket = sf.memcachedBucket
		info.MemcachedConnStr = mc.HTTPConnString() + "/" + url.PathEscape(sf.memcachedBucket)
	}
	return info
}

// writeCACert writes the cluster's CA certificate to path, or to a
// temporary file when path is "" (removed by cleanup).
func writeCACert(mc *mockcluster.Cluster, path string) (written string, cleanup func(), err error) {
	cleanup = func() {}
	if path == "" {
		f, err := os.CreateTemp("", "kvcli-serve-ca-*.pem")
		if err != nil {
			return "", cleanup, err
		}
		path = f.Name()
		_ = f.Close()
		cleanup = func() { os.Remove(path) }
	}
	if err := os.WriteFile(path, mc.CACertPEM(), 0o644); err != nil {
		cleanup()
		return "", func() {}, err
	}
	return path, cleanup, nil
}

// printServeInfo prints the connection details as shell exports, with
// comments for the rest.
func printServeInfo(w io.Writer, sf serveFlags, info serveInfo) {
	rep := fmt.Sprintf("%d replica", sf.replicas)
	if sf.replicas != 1 {
		rep += "s"
	}
	fmt.Fprintf(w, "# kvcli serve: mock Couchbase cluster, %d node(s), bucket %q (%d vbuckets, %s)\n", sf.nodes, sf.bucket, sf.vbuckets, rep)
	fmt.Fprintf(w, "# These are the mock's own test credentials, printed on purpose.\n")
	fmt.Fprintf(w, "export %s=%s\n", envConnStr, shellQuote(info.ConnStr))
	fmt.Fprintf(w, "export %s=%s\n", envUser, shellQuote(info.User))
	fmt.Fprintf(w, "export %s=%s\n", envPassword, shellQuote(info.Password))
	if info.CACert != "" {
		fmt.Fprintf(w, "export %s=%s\n", envCACert, shellQuote(info.CACert))
	}
	fmt.Fprintf(w, "# REST (cluster manager) ports: %s\n", strings.Join(info.HTTP, " "))
	if len(info.HTTPS) > 0 {
		fmt.Fprintf(w, "# REST over HTTPS: %s\n", strings.Join(info.HTTPS, " "))
	}
	fmt.Fprintf(w, "# HTTP bootstrap: %s\n", info.HTTPConnStr)
	if info.MemcachedBucket != "" {
		fmt.Fprintf(w, "# memcached bucket %q (bootstrapped over HTTP): %s\n", info.MemcachedBucket, info.MemcachedConnStr)
	}
	fmt.Fprintf(w, "# Paste the lines above into another shell, then: kvcli set hello world; kvcli get hello\n")
	fmt.Fprintf(w, "# Ctrl-C stops the cluster.\n")
}

// shellQuote quotes s for a POSIX shell.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
