package reftest

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kvwire/kvwire/memdx"
	"github.com/kvwire/kvwire/mockcluster"
)

// libcouchbase's HTTP config provider (src/bucketconfig/bc_http.cc)
// against the mock's REST endpoints: bootstrap_on=http, and a memcached
// bucket, whose config the KV service does not serve.

// newLcbHTTPTarget points the tools at bucket through the nodes' REST ports
// only (host:port=http, the HTTPS ports with tls), bootstrapping over HTTP.
func newLcbHTTPTarget(t *testing.T, c *mockcluster.Cluster, tls bool, bucket, password string) lcbTarget {
	t.Helper()
	scheme, addrs, typ := "couchbase://", c.MgmtAddrs(), "=http"
	opts := lcbOptions + "&bootstrap_on=http"
	if tls {
		scheme, addrs, typ = "couchbases://", c.MgmtTLSAddrs(), "=https"
		ca := filepath.Join(t.TempDir(), "ca.pem")
		if err := os.WriteFile(ca, c.CACertPEM(), 0o600); err != nil {
			t.Fatal(err)
		}
		opts += "&truststorepath=" + ca
	}
	for i := range addrs {
		addrs[i] += typ
	}
	connstr := scheme + strings.Join(addrs, ",") + "/" + bucket + "?" + opts
	return lcbTarget{c: c, b: c.Bucket(bucket), home: t.TempDir(),
		args: []string{"-U", connstr, "-u", mockcluster.DefaultUser, "-P", password}}
}

// cbc with bootstrap_on=http and only the REST ports: it reads the
// bucket's config from the stream /pools/default/bs/default with the
// credentials (the mock counts the request), never asks the KV service
// for one (GET_CLUSTER_CONFIG), and its writes and reads are the mock's.
// A wrong password is LCB_ERR_AUTHENTICATION_FAILURE.
func TestLcbBootstrapOverHTTP(t *testing.T) {
	lcb := findLcbTools(t)
	for _, tls := range []bool{false, true} {
		name := "http"
		if tls {
			name = "https"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			c, _ := lcbCluster(t, mockcluster.Options{})
			tg := newLcbHTTPTarget(t, c, tls, mockcluster.DefaultBucket, mockcluster.DefaultPassword)
			cccp := c.RequestCount(memdx.OpGetClusterConfig)
			streams := c.RESTRequestCount("/pools/default/bs/default")

			lcb.cbc(t, tg, "create", "-V", "over http", "http-doc").requireKeyOK(t, "http-doc")
			if d := mockDoc(t, tg.b, "http-doc"); string(d.Value) != "over http" {
				t.Fatalf("the mock holds %q", d.Value)
			}
			out := lcb.cbc(t, tg, "cat", "http-doc")
			out.requireKeyOK(t, "http-doc")
			if out.stdout != "over http" {
				t.Fatalf("cbc cat printed %q", out.stdout)
			}
			if n := c.RequestCount(memdx.OpGetClusterConfig) - cccp; n != 0 {
				t.Errorf("the KV service was asked for the config %d times; bootstrap_on=http asks the cluster manager only", n)
			}
			if n := c.RESTRequestCount("/pools/default/bs/default") - streams; n < 2 {
				t.Errorf("the mock served /pools/default/bs/default with accepted credentials %d times for two cbc runs", n)
			}

			bad := newLcbHTTPTarget(t, c, tls, mockcluster.DefaultBucket, "wrong")
			ctx, cancel := context.WithTimeout(context.Background(), lcbRunLimit)
			defer cancel()
			b, _ := lcb.command(ctx, bad, "cbc", "cat", "http-doc").CombinedOutput()
			if !strings.Contains(string(b), "LCB_ERR_AUTHENTICATION_FAILURE") {
				t.Fatalf("cbc with a wrong password printed:\n%s", b)
			}
		})
	}
}

// mcBucket is the memcached bucket of the memcached-bucket tests.
const mcBucket = "cache"

// lcbMemcachedTarget points the tools at a memcached bucket of c as the
// follow-up notes say to: every node's KV port (=mcd) and REST port
// (=http), with the default bootstrap_on, so that libcouchbase tries CCCP
// first, meets KEY_ENOENT (the KV service holds no config for a memcached
// bucket) and falls back to HTTP.
func lcbMemcachedTarget(t *testing.T, c *mockcluster.Cluster) lcbTarget {
	var hosts []string
	for _, a := range c.Addrs() {
		hosts = append(hosts, a+"=mcd")
	}
	for _, a := range c.MgmtAddrs() {
		hosts = append(hosts, a+"=http")
	}
	return lcbTarget{c: c, b: c.Bucket(mcBucket), home: t.TempDir(),
		args: []string{"-U", "couchbase://" + strings.Join(hosts, ",") + "/" + mcBucket + "?" + lcbOptions,
			"-u", mockcluster.DefaultUser, "-P", mockcluster.DefaultPassword}}
}

var mcHashRE = regexp.MustCompile(`^(\S+): \[vBucket=(\d+), Index=(\d+)\] Server: (\S+)$`)

// cbc on a memcached bucket: create, cat and rm are what the mock holds;
// cbc hash places 1000 keys on the node the bucket's ketama ring gives
// each (vbucket 0, no replica); cbc-subdoc is served (kv_engine's daemon
// runs sub-document commands on any bucket: daemon/subdocument.cc has no
// bucket-type check), a durable write is refused by libcouchbase itself
// before it is sent (the bucket's config lists no durableWrite
// capability), and a short cbc-pillowfight meets no error status.
func TestLcbMemcachedBucket(t *testing.T) {
	lcb := findLcbTools(t)
	c, _ := lcbCluster(t, mockcluster.Options{Buckets: []mockcluster.BucketOptions{
		{Name: mockcluster.DefaultBucket}, {Name: mcBucket, Type: mockcluster.MemcachedBucket}}})
	tg := lcbMemcachedTarget(t, c)
	b := tg.b
	cccpRefused := c.RequestCount(memdx.OpGetClusterConfig)

	out := lcb.cbc(t, tg, "create", "-V", "in a memcached bucket", "mc-doc")
	out.requireKeyOK(t, "mc-doc")
	d := mockDoc(t, b, "mc-doc")
	if string(d.Value) != "in a memcached bucket" || out.keyCas(t, "mc-doc") != d.Cas {
		t.Fatalf("the mock holds %q CAS %#x; cbc printed %q", d.Value, d.Cas, out.keyLine("mc-doc"))
	}
	if c.RequestCount(memdx.OpGetClusterConfig) == cccpRefused {
		t.Errorf("libcouchbase did not try CCCP first (no GET_CLUSTER_CONFIG)")
	}
	if c.RESTRequestCount("/pools/default/bs/"+mcBucket) == 0 {
		t.Errorf("libcouchbase did not fall back to the HTTP stream")
	}
	out = lcb.cbc(t, tg, "cat", "mc-doc")
	if out.stdout != "in a memcached bucket" {
		t.Fatalf("cbc cat printed %q", out.stdout)
	}
	lcb.cbc(t, tg, "rm", "mc-doc").requireKeyOK(t, "mc-doc")
	requireNoMockDoc(t, b, "mc-doc")
	lcb.cbc(t, tg, "cat", "mc-doc").requireKeyErr(t, "mc-doc", "LCB_ERR_DOCUMENT_NOT_FOUND")

	// cbc hash: the node of the bucket's ring, vbucket 0, no replica.
	keys := make([]string, 1000)
	for i := range keys {
		keys[i] = fmt.Sprintf("mc-hash-%d-%x", i, i*7919)
	}
	out = lcb.cbc(t, tg, append([]string{"hash"}, keys...)...)
	if strings.Contains(out.stderr, "Replica #") {
		t.Fatalf("cbc hash printed a replica for a memcached bucket:\n%s", out.stderr)
	}
	got := map[string]string{}
	for _, line := range strings.Split(out.stderr, "\n") {
		if m := mcHashRE.FindStringSubmatch(line); m != nil {
			if m[2] != "0" {
				t.Fatalf("cbc hash: %q", line)
			}
			got[m[1]] = m[4]
		}
	}
	if len(got) != len(keys) {
		t.Fatalf("cbc hash printed %d keys' servers, want %d", len(got), len(keys))
	}
	nodes := map[string]bool{}
	for _, k := range keys {
		if want := c.Node(b.NodeForKey([]byte(k))).Addr(); got[k] != want {
			t.Fatalf("%q: cbc hash says %s, the bucket's ring %s", k, got[k], want)
		}
		nodes[got[k]] = true
	}
	if len(nodes) != len(c.Nodes()) {
		t.Fatalf("the keys landed on %d nodes of %d", len(nodes), len(c.Nodes()))
	}

	// What the server serves on a memcached bucket and what it refuses.
	lcb.cbc(t, tg, "create", "-V", `{"x":1}`, "mc-json").requireKeyOK(t, "mc-json")
	sd := lcb.run(t, tg, "get mc-json -p x\n", "cbc-subdoc")
	if !strings.Contains(sd.stdout, "0. Size=1, RC=LCB_SUCCESS (0)\n1\n") {
		t.Fatalf("cbc-subdoc on a memcached bucket printed:\n%s%s", sd.stdout, sd.stderr)
	}
	sets := c.RequestCount(memdx.OpSet)
	ctx, cancel := context.WithTimeout(context.Background(), lcbRunLimit)
	defer cancel()
	dur, _ := lcb.command(ctx, tg, "cbc", "create", "-d", "majority", "-V", "v", "mc-durable").CombinedOutput()
	if !strings.Contains(string(dur), "LCB_ERR_UNSUPPORTED_OPERATION") || c.RequestCount(memdx.OpSet) != sets {
		t.Fatalf("cbc create -d majority printed (after %d SETs):\n%s", c.RequestCount(memdx.OpSet)-sets, dur)
	}
	requireNoMockDoc(t, b, "mc-durable")

	lcbMemcachedPillowfight(t, lcb, tg)
}

// lcbMemcachedPillowfight runs cbc-pillowfight on the memcached bucket for
// a few seconds: no operation fails and the mock answers no request with
// an error status.
func lcbMemcachedPillowfight(t *testing.T, lcb lcbTools, tg lcbTarget) {
	t.Helper()
	errs := func() map[memdx.Status]uint64 {
		m := map[memdx.Status]uint64{}
		for _, nd := range tg.c.Nodes() {
			for st := memdx.Status(1); st != 0; st++ {
				m[st] += nd.ErrorCount(st)
			}
		}
		return m
	}
	errsBefore, cccpBefore := errs(), tg.c.RequestCount(memdx.OpGetClusterConfig)
	ctx, cancel := context.WithTimeout(context.Background(), lcbRunLimit)
	defer cancel()
	cmd := lcb.command(ctx, tg, "cbc-pillowfight", "-t", "1", "-I", "200", "-p", "mcpf-", "-m", "16", "-M", "256", "-r", "50", "-c", "-1", "-T")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	timer := time.NewTimer(3 * time.Second)
	defer timer.Stop()
	select {
	case err := <-done:
		t.Fatalf("cbc-pillowfight ended before it was stopped: %v\nstderr:\n%s", err, &stderr)
	case <-timer.C:
	}
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("cbc-pillowfight: %v\nstderr:\n%s", err, &stderr)
	}
	log := stderr.String()
	totals := pfTotalRE.FindAllStringSubmatch(log, -1)
	if len(totals) != 1 {
		t.Fatalf("cbc-pillowfight printed %d thread totals, want 1:\n%s", len(totals), log)
	}
	if n, _ := strconv.ParseUint(totals[0][1], 10, 64); n == 0 || totals[0][2] != "0" || totals[0][3] != "0" || totals[0][4] != "0" {
		t.Errorf("cbc-pillowfight on the memcached bucket: %s", totals[0][0])
	}
	// The only error status allowed is the KEY_ENOENT of each
	// GET_CLUSTER_CONFIG that libcouchbase's CCCP provider tries first:
	// pillowfight populates its keys before it reads them.
	cccp := tg.c.RequestCount(memdx.OpGetClusterConfig) - cccpBefore
	for st, n := range errs() {
		n -= errsBefore[st]
		if st == memdx.StatusKeyNotFound {
			n -= min(n, cccp)
		}
		if n != 0 {
			t.Errorf("the mock answered %s %d times during cbc-pillowfight", st, n)
		}
	}
	t.Logf("cbc-pillowfight on a memcached bucket: %s", totals[0][0])
}
