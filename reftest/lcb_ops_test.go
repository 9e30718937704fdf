package reftest

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kvwire/kvwire/client"
	"github.com/kvwire/kvwire/memdx"
	"github.com/kvwire/kvwire/mockcluster"
)

// lcbCluster starts the mock the libcouchbase tests use (the Node tests'
// one: 3 nodes with TLS, 1 replica, the collection app.items; o may set
// more) and a kvwire client of its default collection, over plain TCP.
func lcbCluster(t *testing.T, o mockcluster.Options) (*mockcluster.Cluster, *client.Client) {
	t.Helper()
	o.TLS = true
	c := nodeCluster(t, o)
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	cl, err := client.Connect(ctx, "couchbase://"+strings.Join(c.Addrs(), ","), &client.Options{Username: mockcluster.DefaultUser,
		Password: mockcluster.DefaultPassword, Bucket: mockcluster.DefaultBucket})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cl.Close() })
	return c, cl
}

// mockDoc is the document the mock holds for key in the default
// collection, failing the test when it holds none.
func mockDoc(t *testing.T, b *mockcluster.Bucket, key string) mockcluster.Document {
	t.Helper()
	d, ok := b.Get("", "", key)
	if !ok {
		t.Fatalf("the mock holds no document %q", key)
	}
	return d
}

// requireNoMockDoc fails the test when the mock holds a document for key.
func requireNoMockDoc(t *testing.T, b *mockcluster.Bucket, key string) {
	t.Helper()
	if d, ok := b.Get("", "", key); ok {
		t.Fatalf("the mock holds %q = %q, want no document", key, d.Value)
	}
}

// lcbTransports runs f over plain TCP and over TLS, each on a cluster of
// its own (lcbCluster with o), in parallel.
func lcbTransports(t *testing.T, o mockcluster.Options, f func(t *testing.T, lcb lcbTools, tg lcbTarget, cl *client.Client)) {
	lcb := findLcbTools(t)
	for _, tls := range []bool{false, true} {
		name := "plain"
		if tls {
			name = "tls"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			c, cl := lcbCluster(t, o)
			f(t, lcb, newLcbTarget(t, c, tls), cl)
		})
	}
}

var syncTokenRE = regexp.MustCompile(`SYNCTOKEN=(\d+),(\d+),(\d+)`)

// syncToken is the mutation token cbc printed for key: vbucket, vbucket
// UUID and sequence number.
func (o lcbOut) syncToken(t *testing.T, key string) (vb uint16, uuid, seqno uint64) {
	t.Helper()
	m := syncTokenRE.FindStringSubmatch(o.keyLine(key))
	if m == nil {
		t.Fatalf("cbc printed no SYNCTOKEN for %q\nstderr:\n%s", key, o.stderr)
	}
	v, _ := strconv.ParseUint(m[1], 10, 16)
	uuid, _ = strconv.ParseUint(m[2], 10, 64)
	seqno, _ = strconv.ParseUint(m[3], 10, 64)
	return uint16(v), uuid, seqno
}

// cbc create, cat and rm: what cbc stores the mock holds and kvwire reads
// (value, flags, datatype, expiry, CAS, mutation token), what kvwire stores
// cbc reads, replica reads return the document, and the store modes'
// failures are the server's statuses.
func TestLcbCreateCatRemove(t *testing.T) {
	lcbTransports(t, mockcluster.Options{}, func(t *testing.T, lcb lcbTools, tg lcbTarget, cl *client.Client) {
		ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
		defer cancel()
		col := cl.DefaultCollection()
		b := tg.b

		const jsonFlags = 0x02000006 // Couchbase common flags: JSON
		before := time.Now()
		out := lcb.cbc(t, tg, "create", "-V", `{"a":1}`, "-J", "-f", strconv.Itoa(jsonFlags), "-e", "3600", "lcb-doc")
		after := time.Now()
		out.requireKeyOK(t, "lcb-doc")
		d := mockDoc(t, b, "lcb-doc")
		if string(d.Value) != `{"a":1}` || d.Flags != jsonFlags || d.Datatype&memdx.DatatypeJSON == 0 {
			t.Fatalf("the mock holds %q flags %#x datatype %s", d.Value, d.Flags, d.Datatype)
		}
		if cas := out.keyCas(t, "lcb-doc"); cas != d.Cas {
			t.Fatalf("cbc printed CAS %#x, the mock holds %#x", cas, d.Cas)
		}
		if lo, hi := before.Add(3599*time.Second), after.Add(3601*time.Second); d.Expiry.Before(lo) || d.Expiry.After(hi) {
			t.Fatalf("expiry %v, want an hour after the create (%v..%v)", d.Expiry, lo, hi)
		}
		vb, uuid, seqno := out.syncToken(t, "lcb-doc")
		if vb != d.Vbucket || uuid != b.VbucketUUID(vb) || seqno != d.Seqno {
			t.Fatalf("SYNCTOKEN %d,%d,%d; the mock: vbucket %d, uuid %d, seqno %d", vb, uuid, seqno, d.Vbucket, b.VbucketUUID(d.Vbucket), d.Seqno)
		}
		g, err := col.Get(ctx, "lcb-doc", nil)
		if err != nil {
			t.Fatal(err)
		}
		if string(g.Value) != `{"a":1}` || g.Flags != jsonFlags || g.Cas != d.Cas {
			t.Fatalf("kvwire reads %q flags %#x CAS %#x", g.Value, g.Flags, g.Cas)
		}

		// What kvwire writes, cbc reads: value on stdout, flags and CAS on
		// its key's line.
		w, err := client.UpsertString(ctx, col, "kvwire-doc", "written by kvwire", nil)
		if err != nil {
			t.Fatal(err)
		}
		out = lcb.cbc(t, tg, "cat", "kvwire-doc")
		if out.stdout != "written by kvwire" {
			t.Fatalf("cbc cat printed %q", out.stdout)
		}
		kd := mockDoc(t, b, "kvwire-doc")
		if cas := out.keyCas(t, "kvwire-doc"); cas != w.Cas {
			t.Fatalf("cbc cat: CAS %#x, kvwire wrote %#x", cas, w.Cas)
		}
		if want := fmt.Sprintf("Flags=%#x,", kd.Flags); !strings.Contains(out.keyLine("kvwire-doc"), want) {
			t.Fatalf("cbc cat printed %q, want %s", out.keyLine("kvwire-doc"), want)
		}

		// Store modes.
		lcb.cbc(t, tg, "create", "-M", "insert", "-V", "x", "lcb-doc").requireKeyErr(t, "lcb-doc", "LCB_ERR_DOCUMENT_EXISTS")
		lcb.cbc(t, tg, "create", "-M", "replace", "-V", "x", "lcb-missing").requireKeyErr(t, "lcb-missing", "LCB_ERR_DOCUMENT_NOT_FOUND")
		requireNoMockDoc(t, b, "lcb-missing")
		lcb.cbc(t, tg, "create", "-M", "replace", "-V", `{"a":2}`, "lcb-doc").requireKeyOK(t, "lcb-doc")
		if d := mockDoc(t, b, "lcb-doc"); string(d.Value) != `{"a":2}` || !d.Expiry.IsZero() {
			t.Fatalf("after the replace the mock holds %q, expiry %v", d.Value, d.Expiry)
		}

		// Replica reads: -r 0 reads the replica, -r all the active copy
		// and every replica.
		replicaReads := tg.c.RequestCount(memdx.OpGetReplica)
		out = lcb.cbc(t, tg, "cat", "-r", "0", "lcb-doc")
		if out.stdout != `{"a":2}` || tg.c.RequestCount(memdx.OpGetReplica) != replicaReads+1 {
			t.Fatalf("cbc cat -r 0 printed %q after %d GET_REPLICA", out.stdout, tg.c.RequestCount(memdx.OpGetReplica)-replicaReads)
		}
		out = lcb.cbc(t, tg, "cat", "-r", "all", "lcb-doc")
		if out.stdout != `{"a":2}{"a":2}` || strings.Count(out.stderr, fmt.Sprintf("CAS=%#x", mockDoc(t, b, "lcb-doc").Cas)) != 2 {
			t.Fatalf("cbc cat -r all printed %q\n%s", out.stdout, out.stderr)
		}
		lcb.cbc(t, tg, "cat", "-r", "0", "lcb-missing").requireKeyErr(t, "lcb-missing", "LCB_ERR_DOCUMENT_NOT_FOUND")

		// A named collection.
		lcb.cbc(t, tg, "create", "--scope", "app", "--collection", "items", "-V", "in app.items", "coll-doc").requireKeyOK(t, "coll-doc")
		if d, ok := b.Get("app", "items", "coll-doc"); !ok || string(d.Value) != "in app.items" {
			t.Fatalf("app.items holds %q (found %v)", d.Value, ok)
		}
		requireNoMockDoc(t, b, "coll-doc")
		out = lcb.cbc(t, tg, "cat", "--scope", "app", "--collection", "items", "coll-doc")
		if out.stdout != "in app.items" {
			t.Fatalf("cbc cat of app.items printed %q", out.stdout)
		}

		// Remove.
		out = lcb.cbc(t, tg, "rm", "lcb-doc")
		if !strings.Contains(out.keyLine("lcb-doc"), "Deleted") {
			t.Fatalf("cbc rm printed %q", out.keyLine("lcb-doc"))
		}
		requireNoMockDoc(t, b, "lcb-doc")
		if _, err := col.Get(ctx, "lcb-doc", nil); !errors.Is(err, client.ErrDocumentNotFound) {
			t.Fatalf("kvwire Get after cbc rm: %v", err)
		}
		lcb.cbc(t, tg, "rm", "lcb-doc").requireKeyErr(t, "lcb-doc", "LCB_ERR_DOCUMENT_NOT_FOUND")
		lcb.cbc(t, tg, "cat", "lcb-doc").requireKeyErr(t, "lcb-doc", "LCB_ERR_DOCUMENT_NOT_FOUND")
	})
}

// cbc lock, unlock and touch. A lock holds writes off until the lock CAS
// unlocks it; a wrong CAS is LOCKED. UNLOCK of a document that is not
// locked answers NOT_LOCKED (0x0e), as kv_engine 7.6 does
// (engines/ep/src/kv_bucket.cc, KVBucket::unlockKey): libcouchbase 3.3
// predates that status and reports it as LCB_ERR_KVENGINE_UNKNOWN_ERROR,
// naming it from the mock's error map in its log. The mock's clock stands
// still, so the lock lasts whatever the machine's load.
func TestLcbLockUnlockTouch(t *testing.T) {
	now := time.Unix(1_900_000_000, 0)
	frozen := mockcluster.Options{Clock: func() time.Time { return now }}
	lcbTransports(t, frozen, func(t *testing.T, lcb lcbTools, tg lcbTarget, cl *client.Client) {
		b := tg.b
		lcb.cbc(t, tg, "create", "-V", "v1", "locked-doc").requireKeyOK(t, "locked-doc")
		stored := mockDoc(t, b, "locked-doc").Cas

		// cbc lock takes the lock only with -e (without it, it is a GET).
		out := lcb.cbc(t, tg, "lock", "-e", "20", "locked-doc")
		lockCas := out.keyCas(t, "locked-doc")
		d := mockDoc(t, b, "locked-doc")
		if !d.Locked || d.Cas != lockCas || lockCas == stored || out.stdout != "v1" {
			t.Fatalf("after cbc lock: locked %v, mock CAS %#x, lock CAS %#x (stored %#x), value %q", d.Locked, d.Cas, lockCas, stored, out.stdout)
		}
		// libcouchbase retries what the lock refuses (KV_LOCKED), an
		// unlock with another CAS too, until its timeout (here 1 s), and
		// then reports the lock.
		for _, args := range [][]string{{"create", "-V", "v2", "locked-doc"}, {"rm", "locked-doc"},
			{"unlock", "locked-doc", fmt.Sprintf("%#x", stored)}} {
			locked := mockErrorCount(tg.c, memdx.StatusLocked)
			out := lcb.cbc(t, tg, append(args, "-D", "operation_timeout=1")...)
			if err := out.keyErr("locked-doc"); !strings.HasPrefix(err, "LCB_ERR_DOCUMENT_LOCKED") && !strings.HasPrefix(err, "LCB_ERR_TIMEOUT") {
				t.Fatalf("cbc %s on the locked document printed %q", args[0], out.keyLine("locked-doc"))
			}
			if mockErrorCount(tg.c, memdx.StatusLocked) == locked {
				t.Fatalf("cbc %s on the locked document: the mock never answered LOCKED", args[0])
			}
		}
		if d := mockDoc(t, b, "locked-doc"); !d.Locked || string(d.Value) != "v1" || d.Cas != lockCas {
			t.Fatalf("a refused write or unlock changed the document: locked %v, value %q, CAS %#x", d.Locked, d.Value, d.Cas)
		}
		out = lcb.cbc(t, tg, "unlock", "locked-doc", fmt.Sprintf("%#x", lockCas))
		if !strings.Contains(out.keyLine("locked-doc"), "Unlocked") {
			t.Fatalf("cbc unlock with the lock CAS printed %q", out.keyLine("locked-doc"))
		}
		if d := mockDoc(t, b, "locked-doc"); d.Locked {
			t.Fatal("the document is still locked after cbc unlock")
		}
		lcb.cbc(t, tg, "create", "-V", "v2", "locked-doc").requireKeyOK(t, "locked-doc")

		// Unlocking a document that is not locked: the mock answers
		// NOT_LOCKED, which libcouchbase 3.3 does not map.
		notLocked := mockErrorCount(tg.c, memdx.StatusNotLocked)
		out = lcb.cbc(t, tg, "unlock", "-v", "locked-doc", fmt.Sprintf("%#x", mockDoc(t, b, "locked-doc").Cas))
		out.requireKeyErr(t, "locked-doc", "LCB_ERR_KVENGINE_UNKNOWN_ERROR")
		if !strings.Contains(out.stderr, "NOT_LOCKED (0xe)") {
			t.Fatalf("libcouchbase's log does not name the NOT_LOCKED it received:\n%s", out.stderr)
		}
		if n := mockErrorCount(tg.c, memdx.StatusNotLocked) - notLocked; n != 1 {
			t.Fatalf("the mock answered NOT_LOCKED %d times, want 1", n)
		}
		lcb.cbc(t, tg, "unlock", "nothing-here", "0x1").requireKeyErr(t, "nothing-here", "LCB_ERR_DOCUMENT_NOT_FOUND")

		// Touch sets the expiry, and fails on a missing document.
		lcb.cbc(t, tg, "touch", "-e", "100", "locked-doc").requireKeyOK(t, "locked-doc")
		if d := mockDoc(t, b, "locked-doc"); !d.Expiry.Equal(now.Add(100 * time.Second)) {
			t.Fatalf("after cbc touch -e 100 the expiry is %v, want %v", d.Expiry, now.Add(100*time.Second))
		}
		lcb.cbc(t, tg, "touch", "-e", "100", "nothing-here").requireKeyErr(t, "nothing-here", "LCB_ERR_DOCUMENT_NOT_FOUND")
	})
}

// mockErrorCount sums the responses with status st the cluster's nodes
// sent.
func mockErrorCount(c *mockcluster.Cluster, st memdx.Status) uint64 {
	var n uint64
	for _, nd := range c.Nodes() {
		n += nd.ErrorCount(st)
	}
	return n
}

var counterRE = regexp.MustCompile(`Current value is (\d+)\.`)

// cbc incr and decr: the values cbc prints are those the mock holds and
// kvwire reads; decrement stops at 0; a value that is not a number and a
// missing counter without an initial value fail.
func TestLcbCounters(t *testing.T) {
	lcbTransports(t, mockcluster.Options{}, func(t *testing.T, lcb lcbTools, tg lcbTarget, cl *client.Client) {
		ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
		defer cancel()
		for _, step := range []struct {
			args []string
			want uint64
		}{
			{[]string{"incr", "--initial", "10", "--delta", "5"}, 10},
			{[]string{"incr", "--delta", "5"}, 15},
			{[]string{"decr", "--delta", "3"}, 12},
			{[]string{"decr", "--delta", "100"}, 0},
			{[]string{"incr", "--delta", "7"}, 7},
		} {
			out := lcb.cbc(t, tg, append(step.args, "counter")...)
			m := counterRE.FindStringSubmatch(out.keyLine("counter"))
			if m == nil || m[1] != strconv.FormatUint(step.want, 10) {
				t.Fatalf("cbc %v printed %q, want the value %d", step.args, out.keyLine("counter"), step.want)
			}
			if d := mockDoc(t, tg.b, "counter"); string(d.Value) != m[1] {
				t.Fatalf("after cbc %v the mock holds %q", step.args, d.Value)
			}
		}
		g, err := cl.DefaultCollection().Get(ctx, "counter", nil)
		if err != nil || string(g.Value) != "7" {
			t.Fatalf("kvwire reads the counter as %q (%v)", g.Value, err)
		}
		lcb.cbc(t, tg, "incr", "missing-counter").requireKeyErr(t, "missing-counter", "LCB_ERR_DOCUMENT_NOT_FOUND")
		requireNoMockDoc(t, tg.b, "missing-counter")
		lcb.cbc(t, tg, "create", "-V", "not a number", "word").requireKeyOK(t, "word")
		lcb.cbc(t, tg, "incr", "word").requireKeyErr(t, "word", "LCB_ERR_INVALID_DELTA")
	})
}

var obseqnoRE = regexp.MustCompile(`(?m)^\[(\d+)\] UUID=0x([0-9a-f]+), Cache=(\d+), Disk=(\d+)$`)

// cbc observe-seqno of the vbucket and UUID of a mutation's token reports,
// from the active and the replica, the mock's vbucket UUID and the
// mutation's sequence number; cbc observe finds the key on both.
func TestLcbObserveSeqno(t *testing.T) {
	lcbTransports(t, mockcluster.Options{}, func(t *testing.T, lcb lcbTools, tg lcbTarget, cl *client.Client) {
		b := tg.b
		out := lcb.cbc(t, tg, "create", "-V", "observed", "observed")
		vb, uuid, seqno := out.syncToken(t, "observed")
		if d := mockDoc(t, b, "observed"); d.Seqno != seqno || d.Vbucket != vb {
			t.Fatalf("the mock holds seqno %d in vbucket %d; cbc's token says %d in %d", d.Seqno, d.Vbucket, seqno, vb)
		}
		out = lcb.cbc(t, tg, "observe-seqno", fmt.Sprintf("%d,%d", vb, uuid))
		ms := obseqnoRE.FindAllStringSubmatch(out.stderr, -1)
		if len(ms) != 1+b.NumReplicas() {
			t.Fatalf("cbc observe-seqno printed %d answers, want one per copy (%d):\n%s", len(ms), 1+b.NumReplicas(), out.stderr)
		}
		for _, m := range ms {
			if m[2] != strconv.FormatUint(b.VbucketUUID(vb), 16) || m[3] != strconv.FormatUint(seqno, 10) || m[4] != m[3] {
				t.Fatalf("server %s answered UUID %s, seqno %s (disk %s); want %x and %d",
					m[1], m[2], m[3], m[4], b.VbucketUUID(vb), seqno)
			}
		}
		// An unknown UUID is not in the vbucket's failover log.
		out = lcb.cbc(t, tg, "observe-seqno", fmt.Sprintf("%d,%d", vb, uuid+1))
		if n := strings.Count(out.stderr, "LCB_ERR_DOCUMENT_NOT_FOUND"); n != 1+b.NumReplicas() {
			t.Fatalf("observe-seqno of an unknown UUID:\n%s", out.stderr)
		}

		out = lcb.cbc(t, tg, "observe", "observed")
		line := out.keyLine("observed")
		cas := fmt.Sprintf("CAS=%#x", mockDoc(t, b, "observed").Cas)
		if !strings.Contains(line, "[Master] Status=0x1, "+cas) || !strings.Contains(line, "[Replica] Status=0x1, "+cas) {
			t.Fatalf("cbc observe printed %q, want the key persisted on the master and the replica with %s", line, cas)
		}
	})
}

// Durable writes: cbc create -d majority to keys on every node is stored.
// libcouchbase sends these in alternative framing on its bootstrap
// connection too, whose HELLO does not ask for AltRequestSupport; kv_engine
// serves them (the feature is informative there), and so does the mock.
// The other levels and the legacy --persist-to/--replicate-to (polled with
// OBSERVE_SEQNO) are stored as well; asking for more replicas than the
// bucket has is refused before anything is sent.
func TestLcbDurableWrites(t *testing.T) {
	lcbTransports(t, mockcluster.Options{}, func(t *testing.T, lcb lcbTools, tg lcbTarget, cl *client.Client) {
		// One key per node; the tools bootstrap from node 0 (the first
		// host, randomize_nodes=false), so node 0's key goes over the
		// bootstrap connection.
		keys := keysPerNode(tg.b, len(tg.c.Nodes()), 1, "durable-")
		for node, ks := range keys {
			k := ks[0]
			out := lcb.cbc(t, tg, "create", "-d", "majority", "-V", "durable on node "+strconv.Itoa(node), k)
			out.requireKeyOK(t, k)
			if d := mockDoc(t, tg.b, k); string(d.Value) != "durable on node "+strconv.Itoa(node) {
				t.Fatalf("node %d: the mock holds %q for %s", node, d.Value, k)
			}
		}
		for _, level := range []string{"majority_and_persist_to_active", "persist_to_majority"} {
			lcb.cbc(t, tg, "create", "-d", level, "-V", level, level).requireKeyOK(t, level)
			if d := mockDoc(t, tg.b, level); string(d.Value) != level {
				t.Fatalf("-d %s: the mock holds %q", level, d.Value)
			}
		}
		if n := mockErrorCount(tg.c, memdx.StatusInvalidArgs); n != 0 {
			t.Fatalf("the mock answered EINVAL %d times", n)
		}

		observes := tg.c.RequestCount(memdx.OpObserveSeqno)
		out := lcb.cbc(t, tg, "create", "--persist-to", "1", "--replicate-to", "1", "-V", "legacy", "legacy")
		if line := out.keyLine("legacy"); !strings.Contains(line, "Stored. Persisted(2). Replicated(1)") {
			t.Fatalf("cbc create --persist-to 1 --replicate-to 1 printed %q", line)
		}
		if string(mockDoc(t, tg.b, "legacy").Value) != "legacy" {
			t.Fatal("the legacy durable write is not in the mock")
		}
		if tg.c.RequestCount(memdx.OpObserveSeqno) == observes {
			t.Fatal("the legacy durability sent no OBSERVE_SEQNO")
		}
		ctx, cancel := context.WithTimeout(context.Background(), lcbRunLimit)
		defer cancel()
		b, _ := lcb.command(ctx, tg, "cbc", "create", "--replicate-to", "2", "-V", "v", "too-many").CombinedOutput()
		if !strings.Contains(string(b), "LCB_ERR_DURABILITY_TOO_MANY") {
			t.Fatalf("--replicate-to 2 with 1 replica printed:\n%s", b)
		}
		requireNoMockDoc(t, tg.b, "too-many")
	})
}

// keysPerNode returns n keys with prefix whose vbucket's active copy is on
// each of the nodes 0..nodes-1.
func keysPerNode(b *mockcluster.Bucket, nodes, n int, prefix string) [][]string {
	out := make([][]string, nodes)
	vbm := b.VbucketMap()
	for i, full := 0, 0; full < nodes; i++ {
		k := prefix + strconv.Itoa(i)
		node := vbm[b.VbucketForKey([]byte(k))][0]
		if len(out[node]) < n {
			out[node] = append(out[node], k)
			if len(out[node]) == n {
				full++
			}
		}
	}
	return out
}

// cbc-subdoc's commands, fed on its standard input: each path's result is
// what the mock then holds, and kvwire's LookupIn reads the same.
func TestLcbSubdoc(t *testing.T) {
	lcbTransports(t, mockcluster.Options{}, func(t *testing.T, lcb lcbTools, tg lcbTarget, cl *client.Client) {
		ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
		defer cancel()
		b := tg.b
		if _, err := b.Set("", "", "sd", []byte(`{"name":"x","tags":["a"],"n":1}`), 0, 0); err != nil {
			t.Fatal(err)
		}
		steps := []struct {
			cmd  string
			want string // "" or an LCB_ERR_ name the step must fail with
		}{
			{`dict-upsert sd -p 'name="y"'`, ""},
			{`dict-add sd -p 'name="dup"'`, "LCB_ERR_SUBDOC_PATH_EXISTS"},
			{`dict-add sd -p 'extra={"z":true}'`, ""},
			{`array-add-last sd -p 'tags="b"'`, ""},
			{`array-add-first sd -p 'tags="0"'`, ""},
			{`array-add-unique sd -p 'tags="a"'`, "LCB_ERR_SUBDOC_PATH_EXISTS"},
			{`counter sd -p n=5`, ""},
			{`replace sd -p 'missing=1'`, "LCB_ERR_SUBDOC_PATH_NOT_FOUND"},
			{`remove sd -p extra.z`, ""},
			{`dict-upsert sd -x 'meta.by="lcb"' -p 'deep.er=1' -i`, ""},
		}
		for _, s := range steps {
			out := lcb.run(t, tg, s.cmd+"\n", "cbc-subdoc")
			got := lcbErrRE.FindString(out.stdout)
			ok := got == "" && strings.Contains(out.stdout, "RC=LCB_SUCCESS")
			if s.want != "" {
				ok = strings.HasPrefix(got, s.want+" (")
			}
			if !ok {
				t.Fatalf("%s: printed\n%s%s\nwant %s", s.cmd, out.stdout, out.stderr, cmp.Or(s.want, "success"))
			}
		}
		want := map[string]any{"name": "y", "tags": []any{"0", "a", "b"}, "n": 6.0, "extra": map[string]any{}, "deep": map[string]any{"er": 1.0}}
		var got map[string]any
		if err := json.Unmarshal(mockDoc(t, b, "sd").Value, &got); err != nil || !reflect.DeepEqual(got, want) {
			t.Fatalf("the mock holds %s (%v), want %v", mockDoc(t, b, "sd").Value, err, want)
		}
		if x, _, _ := b.Xattrs("", "", "sd"); !strings.Contains(string(x), `"by":"lcb"`) {
			t.Fatalf("the mock's xattrs: %s", x)
		}

		// Lookups: each path's value in order, a missing path's status.
		out := lcb.run(t, tg, "get sd -p name -p tags -p missing\nsize sd -p tags\nexists sd -p deep.er\n", "cbc-subdoc")
		for _, w := range []string{
			"0. Size=3, RC=LCB_SUCCESS (0)\n\"y\"\n",
			"1. Size=13, RC=LCB_SUCCESS (0)\n[\"0\",\"a\",\"b\"]\n",
			"2. Size=0, RC=LCB_ERR_SUBDOC_PATH_NOT_FOUND",
			"0. Size=1, RC=LCB_SUCCESS (0)\n3\n",
		} {
			if !strings.Contains(out.stdout, w) {
				t.Fatalf("cbc-subdoc lookups printed\n%s\nwant it to contain %q", out.stdout, w)
			}
		}
		res, err := cl.DefaultCollection().LookupIn(ctx, "sd", []client.LookupInSpec{client.GetSpec("name", nil), client.GetSpec("tags", nil)}, nil)
		if err != nil {
			t.Fatal(err)
		}
		name, err0 := res.ValueAt(0)
		tags, err1 := res.ValueAt(1)
		if string(name) != `"y"` || string(tags) != `["0","a","b"]` || err0 != nil || err1 != nil {
			t.Fatalf("kvwire's LookupIn reads %q (%v) and %q (%v)", name, err0, tags, err1)
		}
		lcb.run(t, tg, "get nothing-here -p a\n", "cbc-subdoc").requireKeyErr(t, "nothing-here", "LCB_ERR_DOCUMENT_NOT_FOUND")
	})
}

// Over TLS the tools verify the mock's certificate against the trust store
// they are given: without it they refuse to connect.
func TestLcbTLSVerifiesTheMock(t *testing.T) {
	lcb := findLcbTools(t)
	c, _ := lcbCluster(t, mockcluster.Options{})
	tg := newLcbTarget(t, c, true)
	for i, a := range tg.args {
		if a == "-U" {
			tg.args[i+1] = regexp.MustCompile(`&truststorepath=[^&]*`).ReplaceAllString(tg.args[i+1], "")
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), lcbRunLimit)
	defer cancel()
	cmd := lcb.command(ctx, tg, "cbc", "create", "-V", "v", "untrusted")
	b, _ := cmd.CombinedOutput()
	if !strings.Contains(string(b), "LCB_ERR_SSL_CANTVERIFY") {
		t.Fatalf("cbc without the mock's CA printed:\n%s", b)
	}
	requireNoMockDoc(t, c.Bucket(mockcluster.DefaultBucket), "untrusted")
}
