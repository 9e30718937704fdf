package mockcluster

import (
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kvwire/kvwire/memdx"
)

// statGroup sends STAT group and returns its stats in order, and the
// status that ended it.
func statGroup(t *testing.T, cl *rawClient, group string) ([][2]string, memdx.Status) {
	t.Helper()
	op := cl.send(memdx.NewStat([]byte(group)))
	var out [][2]string
	for {
		p := cl.recv(op)
		if p.Status != memdx.StatusSuccess {
			return out, p.Status
		}
		if len(p.Key) == 0 {
			return out, p.Status
		}
		out = append(out, [2]string{string(p.Key), string(p.Value)})
	}
}

// STAT "key <key> <vbucket> [<collection>]" (and "key-byid ... <cid>")
// answers a document's metadata, as kv_engine's
// EventuallyPersistentEngine::doKeyStats (engines/ep/src/ep_engine.cc,
// parseStatKeyArg for the arguments, VBucket::getKeyStats for the values)
// does: key_is_dirty, key_exptime, key_datatype, key_flags (the flags as
// stored, in network byte order, printed as a number), key_cas,
// key_vb_state and key_is_resident; KEY_ENOENT for a missing document,
// NOT_MY_VBUCKET for a vbucket the node does not hold, EINVAL for bad
// arguments. The mock answered KEY_ENOENT ("Unknown stat group") to every
// such group, an existing document's included.
func TestStatKey(t *testing.T) {
	var clock atomic.Int64
	clock.Store(time.Unix(1_700_000_000, 0).Unix())
	now := time.Unix(clock.Load(), 0)
	c := newCluster(t, Options{Nodes: 3, Clock: func() time.Time { return time.Unix(clock.Load(), 0) },
		Buckets: []BucketOptions{{Name: DefaultBucket, NumVbuckets: 8, NumReplicas: 1}}})
	b := c.Bucket(DefaultBucket)
	if _, err := b.AddScope("inv"); err != nil {
		t.Fatal(err)
	}
	if _, err := b.AddCollection("inv", "items"); err != nil {
		t.Fatal(err)
	}
	cas, err := b.Set("", "", "doc", []byte(`{"a":1}`), 0x02000000, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	vb := b.VbucketForKey([]byte("doc"))
	active, replica := b.VbucketMap()[vb][0], b.VbucketMap()[vb][1]
	cl := bootstrap(t, c.Node(active).Addr(), DefaultBucket, nil)
	group := "key doc " + strconv.Itoa(int(vb))
	got, st := statGroup(t, cl, group)
	want := [][2]string{
		{"key_is_dirty", "false"},
		{"key_exptime", strconv.FormatInt(now.Add(time.Hour).Unix(), 10)},
		{"key_datatype", "json"},
		{"key_flags", "2"}, // 0x02000000 as stored (network order) read on a little-endian host
		{"key_cas", strconv.FormatUint(cas, 10)},
		{"key_vb_state", "active"},
		{"key_is_resident", "true"},
	}
	if st != memdx.StatusSuccess || !equalStats(got, want) {
		t.Fatalf("STAT %q: %s %v, want %v", group, st, got, want)
	}
	// vkey adds the comparison with the document on disk.
	if got, st := statGroup(t, cl, "v"+group); st != memdx.StatusSuccess || len(got) != 8 || got[7] != [2]string{"key_valid", "valid"} {
		t.Fatalf("STAT %q: %s %v", "v"+group, st, got)
	}
	// The replica holds it too.
	rcl := bootstrap(t, c.Node(replica).Addr(), DefaultBucket, nil)
	got, st = statGroup(t, rcl, group)
	if st != memdx.StatusSuccess || len(got) != 7 || got[5] != [2]string{"key_vb_state", "replica"} {
		t.Fatalf("STAT %q on the replica: %s %v", group, st, got)
	}

	cid := coll(b, t, "inv", "items")
	if _, err := b.Set("inv", "items", "item", []byte("raw"), 0x12345678, 0); err != nil {
		t.Fatal(err)
	}
	ivb := strconv.Itoa(int(b.VbucketForKey([]byte("item"))))
	icl := bootstrap(t, c.Node(b.VbucketMap()[b.VbucketForKey([]byte("item"))][0]).Addr(), DefaultBucket, nil)
	for _, g := range []string{"key item " + ivb + " inv.items", "key-byid item " + ivb + " 0x" + strconv.FormatUint(uint64(cid), 16)} {
		got, st := statGroup(t, icl, g)
		if st != memdx.StatusSuccess || len(got) != 7 || got[2] != [2]string{"key_datatype", "raw"} ||
			got[3] != [2]string{"key_flags", strconv.FormatUint(0x78563412, 10)} || got[1] != [2]string{"key_exptime", "0"} {
			t.Errorf("STAT %q: %s %v", g, st, got)
		}
	}

	for _, tc := range []struct {
		group string
		want  memdx.Status
	}{
		{"key nodoc " + ivb, memdx.StatusKeyNotFound},
		{"key item " + ivb, memdx.StatusKeyNotFound}, // the default collection has no "item"
		{"key doc", memdx.StatusInvalidArgs},
		{"key doc x", memdx.StatusInvalidArgs},
		{"key doc 70000", memdx.StatusInvalidArgs},
		{"key doc 1 2 3 4", memdx.StatusInvalidArgs},
		{"key item " + ivb + " inv.nothing", memdx.StatusUnknownCollection},
		{"key-byid item " + ivb + " 0x99", memdx.StatusUnknownCollection},
	} {
		if _, st := statGroup(t, icl, tc.group); st != tc.want {
			t.Errorf("STAT %q: %s, want %s", tc.group, st, tc.want)
		}
	}
	// A vbucket the node does not hold at all.
	for v := range uint16(8) {
		chain := b.VbucketMap()[v]
		if chain[0] != active && chain[1] != active {
			if _, st := statGroup(t, cl, "key doc "+strconv.Itoa(int(v))); st != memdx.StatusNotMyVbucket {
				t.Errorf("STAT key on vbucket %d, not on the node: %s", v, st)
			}
			break
		}
	}
	// An expired document is gone.
	clock.Add(int64(2 * time.Hour / time.Second))
	if _, st := statGroup(t, cl, group); st != memdx.StatusKeyNotFound {
		t.Errorf("STAT %q after the expiry: %s", group, st)
	}
}

func equalStats(a, b [][2]string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
