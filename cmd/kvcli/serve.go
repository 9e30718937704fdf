package main

import (
	"context"
	"flag"
	"fmt"
	"io"
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
	CACert   string   `json:"cacert,omitempty"`
}

// cmdServe runs a mock cluster until interrupted. It is long because it
// is one sequence read top to bottom, each part used once: the mock's
// flags and their checks, the cluster started, its details printed as
// shell exports or JSON, the wait for Ctrl-C.
func cmdServe(ctx context.Context, inv *invocation, args []string) int {
	// serve connects to nothing: it has its own --user, --password and
	// --bucket (the mock's), so it does not take the global flags.
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	nodes := fs.Int("nodes", mockcluster.DefaultNodes, "number of nodes")
	vbuckets := fs.Int("vbuckets", mockcluster.DefaultNumVbuckets, "vbuckets of the bucket")
	replicas := fs.Int("replicas", mockcluster.DefaultNumReplicas, "replicas of the bucket (0 for none, at most 3)")
	useTLS := fs.Bool("tls", false, "listen with TLS (couchbases://) with a CA generated at start")
	caOut := fs.String("cacert-out", "", "with --tls: write the CA certificate here (default: a temporary file removed at exit)")
	user := fs.String("user", mockcluster.DefaultUser, "the mock's user")
	password := fs.String("password", mockcluster.DefaultPassword, "the mock's password")
	bucket := fs.String("bucket", mockcluster.DefaultBucket, "the mock's bucket")
	fs.BoolVar(&inv.g.json, "json", inv.g.json, "print the connection details as one JSON object")
	fs.BoolVar(&inv.g.verbose, "v", inv.g.verbose, "log the mock's connection errors on stderr")
	if _, code, ok := inv.parse(fs, args, 0, 0); !ok {
		return code
	}
	switch {
	case *nodes < 1 || *nodes > 64:
		inv.usageError("--nodes %d: want 1 to 64", *nodes)
		return exitUsage
	case *vbuckets < 1 || *vbuckets > 1024:
		inv.usageError("--vbuckets %d: want 1 to 1024", *vbuckets)
		return exitUsage
	case *replicas < 0 || *replicas > 3:
		inv.usageError("--replicas %d: want 0 to 3", *replicas)
		return exitUsage
	case *user == "" || *bucket == "":
		inv.usageError("--user and --bucket must not be empty")
		return exitUsage
	case *caOut != "" && !*useTLS:
		inv.usageError("--cacert-out needs --tls")
		return exitUsage
	}
	nr := *replicas
	if nr == 0 {
		nr = mockcluster.NoReplicas
	}
	opts := mockcluster.Options{
		Nodes:   *nodes,
		Buckets: []mockcluster.BucketOptions{{Name: *bucket, NumVbuckets: *vbuckets, NumReplicas: nr}},
		Users:   []mockcluster.User{{Name: *user, Password: *password, Buckets: []string{"*"}}},
		TLS:     *useTLS,
	}
	if inv.g.verbose {
		opts.Logf = func(format string, args ...any) {
			fmt.Fprintf(inv.env.stderr, "mockcluster: "+format+"\n", args...)
		}
	}
	mc, err := mockcluster.New(opts)
	if err != nil {
		fmt.Fprintf(inv.env.stderr, "kvcli: starting the mock cluster: %v\n", err)
		return exitError
	}
	defer mc.Close()

	info := serveInfo{
		ConnStr:  mc.ConnString() + "/" + *bucket,
		User:     *user,
		Password: *password,
		Bucket:   *bucket,
		Nodes:    mc.Addrs(),
	}
	if *useTLS {
		info.Nodes = mc.TLSAddrs()
		path := *caOut
		if path == "" {
			f, err := os.CreateTemp("", "kvcli-serve-ca-*.pem")
			if err != nil {
				fmt.Fprintf(inv.env.stderr, "kvcli: writing the CA certificate: %v\n", err)
				return exitError
			}
			path = f.Name()
			_ = f.Close()
			defer os.Remove(path)
		}
		if err := os.WriteFile(path, mc.CACertPEM(), 0o644); err != nil {
			fmt.Fprintf(inv.env.stderr, "kvcli: writing the CA certificate: %v\n", err)
			return exitError
		}
		info.CACert = path
	}

	if inv.g.json {
		inv.printJSON(info)
	} else {
		w := inv.env.stdout
		rep := fmt.Sprintf("%d replica", *replicas)
		if *replicas != 1 {
			rep += "s"
		}
		fmt.Fprintf(w, "# kvcli serve: mock Couchbase cluster, %d node(s), bucket %q (%d vbuckets, %s)\n", *nodes, *bucket, *vbuckets, rep)
		fmt.Fprintf(w, "# These are the mock's own test credentials, printed on purpose.\n")
		fmt.Fprintf(w, "export %s=%s\n", envConnStr, shellQuote(info.ConnStr))
		fmt.Fprintf(w, "export %s=%s\n", envUser, shellQuote(info.User))
		fmt.Fprintf(w, "export %s=%s\n", envPassword, shellQuote(info.Password))
		if info.CACert != "" {
			fmt.Fprintf(w, "export %s=%s\n", envCACert, shellQuote(info.CACert))
		}
		fmt.Fprintf(w, "# Paste the lines above into another shell, then: kvcli set hello world; kvcli get hello\n")
		fmt.Fprintf(w, "# Ctrl-C stops the cluster.\n")
	}
	<-ctx.Done()
	mc.Close()
	fmt.Fprintf(inv.env.stderr, "kvcli serve: stopped\n")
	return exitOK
}

// shellQuote quotes s for a POSIX shell.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
