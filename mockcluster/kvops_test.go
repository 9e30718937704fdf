package mockcluster

import (
	"encoding/binary"
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kvwire/kvwire/memdx"
)

// kvEnv is a cluster with a fake clock and a client on the node owning
// each key it is asked about.
type kvEnv struct {
	t     *testing.T
	c     *Cluster
	b     *Bucket
	now   time.Time
	feats []memdx.HelloFeature
	conns map[int]*rawClient
}

func newKVEnv(t *testing.T, o Options, feats []memdx.HelloFeature) *kvEnv {
	e := &kvEnv{t: t, now: time.Unix(1_700_000_000, 0), feats: feats, conns: map[int]*rawClient{}}
	if o.Clock == nil {
		o.Clock = func() time.Time { return e.now }
	}
	e.c = newCluster(t, o)
	e.b = e.c.Bucket(DefaultBucket)
	return e
}

// cl returns a client connected to the active node of key.
func (e *kvEnv) cl(key string) *rawClient {
	id := ownerOf(e.b, key)
	if e.conns[id] == nil {
		e.conns[id] = bootstrap(e.t, e.c.Node(id).Addr(), DefaultBucket, e.feats)
	}
	return e.conns[id]
}

func (e *kvEnv) do(r memdx.Request) memdx.Packet {
	e.t.Helper()
	cl := e.cl(string(r.Key))
	return cl.do(keyReq(cl, e.b, r))
}

func (e *kvEnv) expect(what string, p memdx.Packet, st memdx.Status) memdx.Packet {
	e.t.Helper()
	if p.Status != st {
		e.t.Fatalf("%s: status %s, want %s (value %q)", what, p.Status, st, p.Value)
	}
	return p
}

func set(key, value string) memdx.Request {
	return memdx.NewStore(memdx.OpSet, []byte(key), []byte(value), 0, 0)
}

func withCas(r memdx.Request, cas uint64) memdx.Request { r.Cas = cas; return r }

func TestStoreSemantics(t *testing.T) {
	e := newKVEnv(t, Options{}, nil)
	k := "store"
	e.expect("replace missing", e.do(memdx.NewStore(memdx.OpReplace, []byte(k), []byte("x"), 0, 0)), memdx.StatusKeyNotFound)
	e.expect("set with cas on missing", e.do(withCas(set(k, "x"), 123)), memdx.StatusKeyNotFound)
	add := e.expect("add", e.do(memdx.NewStore(memdx.OpAdd, []byte(k), []byte("a"), 1, 0)), memdx.StatusSuccess)
	e.expect("add existing", e.do(memdx.NewStore(memdx.OpAdd, []byte(k), []byte("b"), 0, 0)), memdx.StatusKeyExists)
	e.expect("add with cas", e.do(withCas(memdx.NewStore(memdx.OpAdd, []byte(k+"2"), []byte("b"), 0, 0), 5)), memdx.StatusInvalidArgs)
	e.expect("replace bad cas", e.do(withCas(memdx.NewStore(memdx.OpReplace, []byte(k), []byte("c"), 0, 0), add.Cas+1)), memdx.StatusKeyExists)
	rep := e.expect("replace good cas", e.do(withCas(memdx.NewStore(memdx.OpReplace, []byte(k), []byte("c"), 2, 0), add.Cas)), memdx.StatusSuccess)
	if rep.Cas == add.Cas {
		t.Fatal("replace kept the CAS")
	}
	e.expect("set bad cas", e.do(withCas(set(k, "d"), add.Cas)), memdx.StatusKeyExists)
	e.expect("delete bad cas", e.do(withCas(memdx.NewDelete([]byte(k)), add.Cas)), memdx.StatusKeyExists)
	e.expect("delete good cas", e.do(withCas(memdx.NewDelete([]byte(k)), rep.Cas)), memdx.StatusSuccess)
	if n := e.b.MutationCount("_default", "_default", k); n != 3 {
		t.Fatalf("mutations %d, want 3 (add, replace, delete)", n)
	}
	bad := memdx.Request{OpCode: memdx.OpSet, Key: []byte(k), Extras: []byte{1, 2, 3}}
	e.expect("short extras", e.do(bad), memdx.StatusInvalidArgs)
	long := make([]byte, 251)
	for i := range long {
		long[i] = 'k'
	}
	e.expect("key too long", e.do(set(string(long), "v")), memdx.StatusInvalidArgs)
}

func TestAppendPrepend(t *testing.T) {
	e := newKVEnv(t, Options{}, nil)
	k := "cat"
	e.expect("append missing", e.do(memdx.NewConcat(memdx.OpAppend, []byte(k), []byte("x"))), memdx.StatusNotStored)
	s := e.expect("set", e.do(memdx.NewStore(memdx.OpSet, []byte(k), []byte("mid"), 42, 0)), memdx.StatusSuccess)
	e.expect("append bad cas", e.do(withCas(memdx.NewConcat(memdx.OpAppend, []byte(k), []byte("!")), s.Cas+1)), memdx.StatusKeyExists)
	e.expect("append", e.do(memdx.NewConcat(memdx.OpAppend, []byte(k), []byte("-end"))), memdx.StatusSuccess)
	e.expect("prepend", e.do(memdx.NewConcat(memdx.OpPrepend, []byte(k), []byte("start-"))), memdx.StatusSuccess)
	g := e.expect("get", e.do(memdx.NewGet([]byte(k))), memdx.StatusSuccess)
	if string(g.Value) != "start-mid-end" || u32(g.Extras) != 42 {
		t.Fatalf("value %q flags %d", g.Value, u32(g.Extras))
	}
}

func TestCounters(t *testing.T) {
	e := newKVEnv(t, Options{}, nil)
	k := "counter"
	e.expect("incr nocreate", e.do(memdx.NewCounter(memdx.OpIncrement, []byte(k), 1, 10, memdx.NoCreate)), memdx.StatusKeyNotFound)
	p := e.expect("incr create", e.do(memdx.NewCounter(memdx.OpIncrement, []byte(k), 1, 10, 0)), memdx.StatusSuccess)
	if v, _ := memdx.DecodeCounterValue(&p); v != 10 {
		t.Fatalf("created with %d, want the initial 10", v)
	}
	p = e.expect("incr", e.do(memdx.NewCounter(memdx.OpIncrement, []byte(k), 5, 0, 0)), memdx.StatusSuccess)
	if v, _ := memdx.DecodeCounterValue(&p); v != 15 {
		t.Fatalf("incr gave %d", v)
	}
	p = e.expect("decr floor", e.do(memdx.NewCounter(memdx.OpDecrement, []byte(k), 100, 0, 0)), memdx.StatusSuccess)
	if v, _ := memdx.DecodeCounterValue(&p); v != 0 {
		t.Fatalf("decr below 0 gave %d", v)
	}
	g := e.expect("get", e.do(memdx.NewGet([]byte(k))), memdx.StatusSuccess)
	if string(g.Value) != "0" || g.Datatype != memdx.DatatypeJSON {
		t.Fatalf("stored %q %s", g.Value, g.Datatype)
	}
	e.expect("set max", e.do(set(k, strconv.FormatUint(^uint64(0), 10))), memdx.StatusSuccess)
	p = e.expect("wrap", e.do(memdx.NewCounter(memdx.OpIncrement, []byte(k), 2, 0, 0)), memdx.StatusSuccess)
	if v, _ := memdx.DecodeCounterValue(&p); v != 1 {
		t.Fatalf("wrap gave %d", v)
	}
	e.expect("set text", e.do(set(k, "abc")), memdx.StatusSuccess)
	e.expect("incr text", e.do(memdx.NewCounter(memdx.OpIncrement, []byte(k), 1, 0, 0)), memdx.StatusBadDelta)

	// A created counter gets the expiry from the extras.
	e.expect("create with expiry", e.do(memdx.NewCounter(memdx.OpIncrement, []byte(k+"x"), 1, 7, 10)), memdx.StatusSuccess)
	e.now = e.now.Add(11 * time.Second)
	e.expect("expired counter", e.do(memdx.NewGet([]byte(k+"x"))), memdx.StatusKeyNotFound)
}

// INCREMENT/DECREMENT with a CAS are EINVAL, existing document or not:
// kv_engine's validator for them requires CAS 0. (A missing document used
// to be created whatever the CAS.)
func TestCounterWithCas(t *testing.T) {
	for _, op := range []memdx.OpCode{memdx.OpIncrement, memdx.OpDecrement} {
		e := newKVEnv(t, Options{}, nil)
		k := "ctr"
		e.expect(op.String()+" with a CAS, missing document",
			e.do(withCas(memdx.NewCounter(op, []byte(k), 1, 42, 0), 0x1234)), memdx.StatusInvalidArgs)
		if d, ok := e.b.Get("", "", k); ok {
			t.Fatalf("%s with a CAS created the document: %q", op, d.Value)
		}
		s := e.expect("set", e.do(set(k, "7")), memdx.StatusSuccess)
		e.expect(op.String()+" with the current CAS",
			e.do(withCas(memdx.NewCounter(op, []byte(k), 1, 0, 0), s.Cas)), memdx.StatusInvalidArgs)
		if d, _ := e.b.Get("", "", k); string(d.Value) != "7" {
			t.Fatalf("%s with a CAS changed the document to %q", op, d.Value)
		}
	}
}

func TestExpiryTouchGAT(t *testing.T) {
	e := newKVEnv(t, Options{}, nil)
	e.expect("touch missing", e.do(memdx.NewTouch([]byte("nope"), 10)), memdx.StatusKeyNotFound)
	e.expect("gat missing", e.do(memdx.NewGAT([]byte("nope"), 10)), memdx.StatusKeyNotFound)

	e.expect("set relative", e.do(memdx.NewStore(memdx.OpSet, []byte("rel"), []byte("v"), 0, 100)), memdx.StatusSuccess)
	abs := uint32(e.now.Unix() + 3600)
	e.expect("set absolute", e.do(memdx.NewStore(memdx.OpSet, []byte("abs"), []byte("v"), 0, abs)), memdx.StatusSuccess)
	e.expect("set absolute past", e.do(memdx.NewStore(memdx.OpSet, []byte("past"), []byte("v"), 0, uint32(e.now.Unix()-10))), memdx.StatusSuccess)
	e.expect("get past", e.do(memdx.NewGet([]byte("past"))), memdx.StatusKeyNotFound)
	if d, ok := e.b.Get("", "", "abs"); !ok || d.Expiry.Unix() != int64(abs) {
		t.Fatalf("absolute expiry stored as %v", d.Expiry)
	}
	e.now = e.now.Add(99 * time.Second)
	e.expect("get before expiry", e.do(memdx.NewGet([]byte("rel"))), memdx.StatusSuccess)
	tp := e.expect("touch", e.do(memdx.NewTouch([]byte("rel"), 100)), memdx.StatusSuccess)
	if len(tp.Value) != 0 || tp.Cas == 0 {
		t.Fatalf("touch answered %q cas %d", tp.Value, tp.Cas)
	}
	e.now = e.now.Add(50 * time.Second)
	g := e.expect("gat", e.do(memdx.NewGAT([]byte("rel"), 0)), memdx.StatusSuccess)
	if string(g.Value) != "v" || len(g.Extras) != 4 {
		t.Fatalf("gat %q", g.Value)
	}
	e.now = e.now.Add(1000 * time.Hour)
	e.expect("no expiry after gat 0", e.do(memdx.NewGet([]byte("rel"))), memdx.StatusSuccess)
	e.expect("absolute expired", e.do(memdx.NewGet([]byte("abs"))), memdx.StatusKeyNotFound)
	if n := e.b.MutationCount("", "", "rel"); n != 1 {
		t.Fatalf("touch counted as mutation: %d", n)
	}

	// Cluster.Clock().Advance moves the same clock.
	e.expect("set", e.do(memdx.NewStore(memdx.OpSet, []byte("adv"), []byte("v"), 0, 5)), memdx.StatusSuccess)
	e.c.Clock().Advance(6 * time.Second)
	e.expect("expired by Advance", e.do(memdx.NewGet([]byte("adv"))), memdx.StatusKeyNotFound)

	// PreserveTTL keeps the expiry on SET.
	e.expect("set ttl", e.do(memdx.NewStore(memdx.OpSet, []byte("keep"), []byte("v"), 0, 10)), memdx.StatusSuccess)
	keep := memdx.NewStore(memdx.OpSet, []byte("keep"), []byte("v2"), 0, 0)
	keep.PreserveTTL = true
	e.expect("set preserve", e.do(keep), memdx.StatusSuccess)
	e.now = e.now.Add(11 * time.Second)
	e.expect("preserved expiry", e.do(memdx.NewGet([]byte("keep"))), memdx.StatusKeyNotFound)
}

func TestLocking(t *testing.T) {
	for _, xerror := range []bool{true, false} {
		t.Run("xerror="+strconv.FormatBool(xerror), func(t *testing.T) {
			feats := []memdx.HelloFeature{memdx.FeatureCollections}
			// Without XERROR kv_engine answers its locked (mutations,
			// TOUCH) as KEY_EEXISTS and its locked_tmpfail (GET_LOCKED,
			// UNLOCK_KEY) as TMPFAIL.
			locked, lockedTmp, notLocked := memdx.StatusKeyExists, memdx.StatusTmpFail, memdx.StatusTmpFail
			if xerror {
				feats = append(feats, memdx.FeatureXerror)
				locked, lockedTmp, notLocked = memdx.StatusLocked, memdx.StatusLocked, memdx.StatusNotLocked
			}
			e := newKVEnv(t, Options{}, feats)
			k := "lockme"
			e.expect("getl missing", e.do(memdx.NewGetLocked([]byte(k), 5)), memdx.StatusKeyNotFound)
			e.expect("unlock missing", e.do(memdx.NewUnlock([]byte(k), 1)), memdx.StatusKeyNotFound)
			s := e.expect("set", e.do(set(k, "v")), memdx.StatusSuccess)
			e.expect("unlock unlocked", e.do(memdx.NewUnlock([]byte(k), s.Cas)), notLocked)

			l := e.expect("getl", e.do(memdx.NewGetLocked([]byte(k), 0)), memdx.StatusSuccess)
			if l.Cas == s.Cas || l.Cas == lockedCas || string(l.Value) != "v" {
				t.Fatalf("lock cas %x (set %x) value %q", l.Cas, s.Cas, l.Value)
			}
			g := e.expect("get locked", e.do(memdx.NewGet([]byte(k))), memdx.StatusSuccess)
			if g.Cas != lockedCas {
				t.Fatalf("GET of a locked doc returned CAS %x", g.Cas)
			}
			e.expect("second lock", e.do(memdx.NewGetLocked([]byte(k), 5)), lockedTmp)
			e.expect("set locked", e.do(set(k, "x")), locked)
			e.expect("set locked old cas", e.do(withCas(set(k, "x"), s.Cas)), locked)
			e.expect("delete locked", e.do(memdx.NewDelete([]byte(k))), locked)
			e.expect("touch locked", e.do(memdx.NewTouch([]byte(k), 5)), locked)
			e.expect("unlock wrong cas", e.do(memdx.NewUnlock([]byte(k), s.Cas)), lockedTmp)
			if d, _ := e.b.Get("", "", k); !d.Locked {
				t.Fatal("Bucket.Get does not report the lock")
			}
			e.expect("unlock", e.do(memdx.NewUnlock([]byte(k), l.Cas)), memdx.StatusSuccess)
			g = e.expect("get unlocked", e.do(memdx.NewGet([]byte(k))), memdx.StatusSuccess)
			if g.Cas != l.Cas {
				t.Fatalf("CAS after unlock %x, want the lock CAS %x", g.Cas, l.Cas)
			}

			// Mutating with the lock CAS succeeds and unlocks.
			l = e.expect("getl 2", e.do(memdx.NewGetLocked([]byte(k), 10)), memdx.StatusSuccess)
			e.expect("set with lock cas", e.do(withCas(set(k, "new"), l.Cas)), memdx.StatusSuccess)
			e.expect("set after", e.do(set(k, "newer")), memdx.StatusSuccess)

			// Lock times: 0 and >30 mean 15 s; 10 means 10 s, held through
			// the 10th second as kv_engine holds it (e.now is a whole
			// second).
			for _, tc := range []struct{ req, holds uint32 }{{0, 15}, {31, 15}, {10, 10}, {30, 30}} {
				e.expect("getl", e.do(memdx.NewGetLocked([]byte(k), tc.req)), memdx.StatusSuccess)
				e.now = e.now.Add(time.Duration(tc.holds+1)*time.Second - time.Millisecond)
				e.expect("still locked", e.do(set(k, "x")), locked)
				e.now = e.now.Add(time.Millisecond)
				e.expect("lock expired", e.do(set(k, "x")), memdx.StatusSuccess)
			}
		})
	}
}

func TestGetReplica(t *testing.T) {
	e := newKVEnv(t, Options{}, nil)
	k := "replicated"
	s := e.expect("set", e.do(set(k, "r")), memdx.StatusSuccess)
	vb := e.b.VbucketForKey([]byte(k))
	chain := e.b.VbucketMap()[vb]
	rep := bootstrap(t, e.c.Node(chain[1]).Addr(), DefaultBucket, nil)
	p := rep.do(keyReq(rep, e.b, memdx.NewGetReplica([]byte(k))))
	if p.Status != memdx.StatusSuccess || string(p.Value) != "r" || p.Cas != s.Cas {
		t.Fatalf("replica read: %s %q", p.Status, p.Value)
	}
	// The lock and its CAS stay on the active: the replica keeps the CAS
	// from before the lock, until the next mutation replicates, while the
	// active keeps the lock's CAS after an unlock.
	l := e.expect("getl", e.do(memdx.NewGetLocked([]byte(k), 5)), memdx.StatusSuccess)
	if p := rep.do(keyReq(rep, e.b, memdx.NewGetReplica([]byte(k)))); p.Cas != s.Cas || p.Status != memdx.StatusSuccess {
		t.Fatalf("replica read of a locked doc: %s cas %x, want the pre-lock %x", p.Status, p.Cas, s.Cas)
	}
	e.expect("unlock", e.do(memdx.NewUnlock([]byte(k), l.Cas)), memdx.StatusSuccess)
	if p := rep.do(keyReq(rep, e.b, memdx.NewGetReplica([]byte(k)))); p.Cas != s.Cas {
		t.Fatalf("replica read after an unlock: cas %x, want the pre-lock %x", p.Cas, s.Cas)
	}
	if g := e.expect("get after an unlock", e.do(memdx.NewGet([]byte(k))), memdx.StatusSuccess); g.Cas != l.Cas {
		t.Fatalf("active read after an unlock: cas %x, want the lock's %x", g.Cas, l.Cas)
	}
	// A touch that changes the expiry is a mutation (one to the expiry
	// the document has is none, and replicates nothing).
	tc := e.expect("touch", e.do(memdx.NewTouch([]byte(k), 100)), memdx.StatusSuccess)
	if p := rep.do(keyReq(rep, e.b, memdx.NewGetReplica([]byte(k)))); p.Cas != tc.Cas {
		t.Fatalf("replica read after a touch: cas %x, want the touch's %x", p.Cas, tc.Cas)
	}
	e.expect("replica read from the active", e.do(memdx.NewGetReplica([]byte(k))), memdx.StatusNotMyVbucket)
	if p := rep.do(keyReq(rep, e.b, memdx.NewGetReplica([]byte("missing-"+k)))); p.Status != memdx.StatusKeyNotFound && p.Status != memdx.StatusNotMyVbucket {
		t.Fatalf("missing replica read: %s", p.Status)
	}
}

func TestNotMyVbucket(t *testing.T) {
	c := newCluster(t, Options{})
	b := c.Bucket(DefaultBucket)
	k := "nmv"
	wrong := (ownerOf(b, k) + 1) % 3
	for _, dedupe := range []bool{false, true} {
		fs := []memdx.HelloFeature{memdx.FeatureJSON}
		if dedupe {
			fs = append(fs, memdx.FeatureDedupeNotMyVbucketClustermap)
		}
		cl := bootstrap(t, c.Node(wrong).Addr(), DefaultBucket, fs)
		for i := 0; i < 2; i++ {
			p := cl.do(keyReq(cl, b, memdx.NewGet([]byte(k))))
			if p.Status != memdx.StatusNotMyVbucket {
				t.Fatalf("status %s", p.Status)
			}
			if dedupe && i == 1 {
				if len(p.Value) != 0 {
					t.Fatalf("deduplicated NMV carries %d bytes", len(p.Value))
				}
				continue
			}
			cfg := parseConfig(t, p.Value)
			if cfg.Rev != b.Rev() || p.Datatype != memdx.DatatypeJSON {
				t.Fatalf("NMV config rev %d, want %d (%s)", cfg.Rev, b.Rev(), p.Datatype)
			}
			if !cfg.NodesExt[wrong].ThisNode {
				t.Fatal("NMV config is not the serving node's")
			}
		}
		// A newer config is sent again even with dedupe.
		if _, err := b.AddScope("s" + strconv.FormatBool(dedupe)); err != nil {
			t.Fatal(err)
		}
		p := cl.do(keyReq(cl, b, memdx.NewGet([]byte(k))))
		if p.Status != memdx.StatusNotMyVbucket || parseConfig(t, p.Value).Rev != b.Rev() {
			t.Fatalf("NMV after a config change: %s %d bytes", p.Status, len(p.Value))
		}
	}
	cl := bootstrap(t, c.Node(0).Addr(), DefaultBucket, nil)
	r := memdx.NewGet([]byte(k))
	r.Vbucket = 5000
	r.Collections = true
	if p := cl.do(r); p.Status != memdx.StatusNotMyVbucket {
		t.Fatalf("vbucket out of range: %s", p.Status)
	}
}

func TestCollections(t *testing.T) {
	e := newKVEnv(t, Options{}, nil)
	sid, err := e.b.AddScope("app")
	if err != nil {
		t.Fatal(err)
	}
	cid, err := e.b.AddCollection("app", "users")
	if err != nil || cid < 8 || sid < 8 {
		t.Fatalf("ids %d %d: %v", sid, cid, err)
	}
	if _, err := e.b.AddCollection("app", "users"); err == nil {
		t.Fatal("duplicate collection accepted")
	}
	if _, err := e.b.AddCollection("nope", "x"); err == nil {
		t.Fatal("collection in missing scope accepted")
	}
	if _, err := e.b.AddScope("_bad"); err == nil {
		t.Fatal("scope name with leading _ accepted")
	}
	cl := e.cl("k")
	getID := func(path string) memdx.Packet {
		return cl.do(memdx.Request{OpCode: memdx.OpCollectionsGetID, Value: []byte(path)})
	}
	p := getID("app.users")
	uid, got, err := memdx.DecodeCollectionsGetID(&p)
	if p.Status != memdx.StatusSuccess || err != nil || got != cid || uid != e.b.ManifestUID() {
		t.Fatalf("GET_ID app.users: %s %d %d %v", p.Status, uid, got, err)
	}
	for _, path := range []string{".", "_default._default", "._default", "_default."} {
		p := getID(path)
		if _, got, err := memdx.DecodeCollectionsGetID(&p); err != nil || got != 0 {
			t.Fatalf("GET_ID %q: %s %d", path, p.Status, got)
		}
	}
	manifestUID := func(p memdx.Packet) string {
		var body struct {
			UID string `json:"manifest_uid"`
		}
		if err := json.Unmarshal(p.Value, &body); err != nil {
			t.Fatalf("error body %q: %v", p.Value, err)
		}
		return body.UID
	}
	p = getID("nope.users")
	if p.Status != memdx.StatusUnknownScope || manifestUID(p) != strconv.FormatUint(e.b.ManifestUID(), 16) {
		t.Fatalf("unknown scope: %s %q", p.Status, p.Value)
	}
	p = getID("app.nope")
	if p.Status != memdx.StatusUnknownCollection || manifestUID(p) != strconv.FormatUint(e.b.ManifestUID(), 16) {
		t.Fatalf("unknown collection: %s %q", p.Status, p.Value)
	}
	if p := getID("nodot"); p.Status != memdx.StatusInvalidArgs {
		t.Fatalf("path without dot: %s", p.Status)
	}
	// kv_engine takes the path in the key too (collections_get_id_validator).
	if p := cl.do(memdx.Request{OpCode: memdx.OpCollectionsGetID, Key: []byte("app.users")}); p.Status != memdx.StatusSuccess {
		t.Fatalf("path in key: %s", p.Status)
	}
	sp := cl.do(memdx.Request{OpCode: memdx.OpCollectionsGetScopeID, Value: []byte("app")})
	if sp.Status != memdx.StatusSuccess || binary.BigEndian.Uint32(sp.Extras[8:]) != sid {
		t.Fatalf("GET_SCOPE_ID: %s", sp.Status)
	}
	mp := cl.do(memdx.NewCollectionsGetManifest())
	var m struct {
		UID    string `json:"uid"`
		Scopes []struct {
			Name        string `json:"name"`
			Collections []struct {
				Name string `json:"name"`
				UID  string `json:"uid"`
			} `json:"collections"`
		} `json:"scopes"`
	}
	// _default, 7.6's _system, app.
	if err := json.Unmarshal(mp.Value, &m); err != nil || m.UID != strconv.FormatUint(e.b.ManifestUID(), 16) ||
		len(m.Scopes) != 3 || m.Scopes[2].Name != "app" || m.Scopes[2].Collections[0].UID != strconv.FormatUint(uint64(cid), 16) {
		t.Fatalf("manifest %s: %v", mp.Value, err)
	}

	// Documents live per collection.
	k := "doc"
	r := memdx.NewStore(memdx.OpSet, []byte(k), []byte("in users"), 0, 0)
	r.CollectionID = cid
	c := e.cl(k)
	if p := c.do(keyReq(c, e.b, r)); p.Status != memdx.StatusSuccess {
		t.Fatalf("set in collection: %s", p.Status)
	}
	e.expect("same key in _default", e.do(memdx.NewGet([]byte(k))), memdx.StatusKeyNotFound)
	if d, ok := e.b.Get("app", "users", k); !ok || string(d.Value) != "in users" {
		t.Fatal("Bucket.Get does not see the collection's document")
	}
	g := memdx.NewGet([]byte(k))
	g.CollectionID = 0x99
	p = c.do(keyReq(c, e.b, g))
	if p.Status != memdx.StatusUnknownCollection || manifestUID(p) != strconv.FormatUint(e.b.ManifestUID(), 16) {
		t.Fatalf("unknown collection id: %s %q", p.Status, p.Value)
	}
	if err := e.b.DropCollection("app", "users"); err != nil {
		t.Fatal(err)
	}
	g.CollectionID = cid
	if p := c.do(keyReq(c, e.b, g)); p.Status != memdx.StatusUnknownCollection || manifestUID(p) != strconv.FormatUint(e.b.ManifestUID(), 16) {
		t.Fatalf("dropped collection: %s %q", p.Status, p.Value)
	}
	// A non-canonical LEB128 prefix is invalid.
	raw := memdx.Request{OpCode: memdx.OpGet, Key: []byte{0x80, 0x00, 'k'}, Vbucket: e.b.VbucketForKey([]byte("k"))}
	if p := e.cl("k").do(raw); p.Status != memdx.StatusInvalidArgs {
		t.Fatalf("non-canonical prefix: %s", p.Status)
	}
}

func TestSnappyAndDatatypes(t *testing.T) {
	c := newCluster(t, Options{})
	b := c.Bucket(DefaultBucket)
	k := "snappy"
	addr := c.Node(ownerOf(b, k)).Addr()
	sn := bootstrap(t, addr, DefaultBucket, []memdx.HelloFeature{memdx.FeatureSnappy, memdx.FeatureJSON, memdx.FeatureXerror})
	plain := bootstrap(t, addr, DefaultBucket, []memdx.HelloFeature{memdx.FeatureXerror})
	doc := []byte(`{"text":"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"}`)
	comp := memdx.CompressSnappy(nil, doc)
	r := memdx.NewStore(memdx.OpSet, []byte(k), comp, 0, 0)
	r.Datatype = memdx.DatatypeSnappy
	if p := sn.do(keyReq(sn, b, r)); p.Status != memdx.StatusSuccess {
		t.Fatalf("snappy set: %s", p.Status)
	}
	p := sn.do(keyReq(sn, b, memdx.NewGet([]byte(k))))
	if p.Datatype != memdx.DatatypeSnappy|memdx.DatatypeJSON {
		t.Fatalf("snappy client datatype %s", p.Datatype)
	}
	if v, err := memdx.DecompressSnappy(nil, p.Value, 0); err != nil || string(v) != string(doc) {
		t.Fatalf("inflated %q: %v", v, err)
	}
	p = plain.do(keyReq(plain, b, memdx.NewGet([]byte(k))))
	if p.Datatype != 0 || string(p.Value) != string(doc) {
		t.Fatalf("plain client got %s %q", p.Datatype, p.Value)
	}
	if d, _ := b.Get("", "", k); string(d.Value) != string(doc) || d.Datatype != memdx.DatatypeJSON {
		t.Fatalf("stored %q %s", d.Value, d.Datatype)
	}
	if p := plain.do(keyReq(plain, b, r)); p.Status != memdx.StatusInvalidArgs {
		t.Fatalf("snappy without HELLO: %s", p.Status)
	}
	jr := set(k, `{}`)
	jr.Datatype = memdx.DatatypeJSON
	if p := plain.do(keyReq(plain, b, jr)); p.Status != memdx.StatusInvalidArgs {
		t.Fatalf("JSON without HELLO: %s", p.Status)
	}
	bad := memdx.NewStore(memdx.OpSet, []byte(k), []byte{0xff, 0xff, 0xff, 0xff, 0x0f, 1}, 0, 0)
	bad.Datatype = memdx.DatatypeSnappy
	if p := sn.do(keyReq(sn, b, bad)); p.Status != memdx.StatusInvalidArgs {
		t.Fatalf("bad snappy: %s", p.Status)
	}
	xr := set(k, "x")
	xr.Datatype = memdx.DatatypeXattr
	if p := sn.do(keyReq(sn, b, xr)); p.Status != memdx.StatusInvalidArgs {
		t.Fatalf("xattr datatype: %s", p.Status)
	}
}

// A snappy value is judged by its inflated size, as kv_engine does: one that
// inflates to more than 20 MiB answers E2BIG, however small on the wire,
// like the same value sent plain; only data that does not inflate (corrupt,
// or beyond the server's 30 MiB inflate limit) is EINVAL.
func TestSnappyTooBig(t *testing.T) {
	e := newKVEnv(t, Options{}, []memdx.HelloFeature{memdx.FeatureSnappy, memdx.FeatureXerror})
	k := "big"
	if v, err := memdx.DecompressSnappy(nil, snappyRun(1000), 0); err != nil || len(v) != 1000 || strings.Trim(string(v), "a") != "" {
		t.Fatalf("snappyRun(1000) inflates to %d bytes %q...: %v", len(v), v[:min(len(v), 8)], err)
	}
	for _, tc := range []struct {
		n    int
		want memdx.Status
	}{
		{maxValue + 1, memdx.StatusTooBig},
		{maxSnappyInflated, memdx.StatusTooBig},
		{maxSnappyInflated + 1, memdx.StatusInvalidArgs},
	} {
		r := set(k, "")
		r.Value = snappyRun(tc.n)
		r.Datatype = memdx.DatatypeSnappy
		p := e.do(r)
		if p.Status != tc.want {
			t.Errorf("%d bytes inflated (%d compressed): %s %s, want %s", tc.n, len(r.Value), p.Status, p.Value, tc.want)
		}
	}
	if _, ok := e.b.Get("", "", k); ok {
		t.Error("a value that was too big was stored")
	}
}

// snappyRun builds the snappy encoding of n bytes "a" (n >= 60) directly:
// a 60-byte literal, then copies of the 60 bytes before. (Building tens of
// MiB and compressing them is slow under -race.)
func snappyRun(n int) []byte {
	b := binary.AppendUvarint(nil, uint64(n))
	b = append(b, 59<<2) // literal of length 60
	b = append(b, strings.Repeat("a", 60)...)
	for rest := n - 60; rest > 0; {
		l := min(rest, 60)
		b = append(b, byte(l-1)<<2|0x02, 60, 0) // copy of l bytes at offset 60
		rest -= l
	}
	return b
}

func TestDurability(t *testing.T) {
	c := newCluster(t, Options{})
	b := c.Bucket(DefaultBucket)
	k := "durable"
	addr := c.Node(ownerOf(b, k)).Addr()
	feats := append([]memdx.HelloFeature{memdx.FeatureUnorderedExecution}, stdFeatures...)
	a := bootstrap(t, addr, DefaultBucket, feats)
	other := bootstrap(t, addr, DefaultBucket, nil)

	dur := func(r memdx.Request) memdx.Request { r.Durability = memdx.DurabilityMajority; return r }
	if p := a.do(keyReq(a, b, dur(set(k, "v1")))); p.Status != memdx.StatusSuccess {
		t.Fatalf("durable set without delay: %s", p.Status)
	}
	// An invalid level and a reserved timeout.
	bad := keyReq(a, b, set(k, "x"))
	bad.FramingExtras = []byte{0x11, 0x07}
	if p := a.do(bad); p.Status != memdx.StatusDurabilityInvalidLevel {
		t.Fatalf("level 7: %s", p.Status)
	}
	// kv_engine's cb::durability::Timeout refuses 0 (the bucket default)
	// and 0xffff (infinite) from a client; parseFrameExtras answers a
	// 3-byte frame that fails to decode DURABILITY_INVALID_LEVEL.
	bad.FramingExtras = []byte{0x13, 0x01, 0x00, 0x00}
	if p := a.do(bad); p.Status != memdx.StatusDurabilityInvalidLevel {
		t.Fatalf("timeout 0: %s", p.Status)
	}
	bad.FramingExtras = []byte{0x13, 0x01, 0xff, 0xff}
	if p := a.do(bad); p.Status != memdx.StatusDurabilityInvalidLevel {
		t.Fatalf("timeout 0xffff: %s", p.Status)
	}
	bad.FramingExtras = []byte{0x12, 0x01, 0x00}
	if p := a.do(bad); p.Status != memdx.StatusInvalidArgs {
		t.Fatalf("2-byte durability frame: %s", p.Status)
	}
	g := keyReq(a, b, memdx.NewGet([]byte(k)))
	g.FramingExtras = []byte{0x11, 0x01}
	if p := a.do(g); p.Status != memdx.StatusInvalidArgs {
		t.Fatalf("durability on GET: %s", p.Status)
	}
	unk := keyReq(a, b, memdx.NewGet([]byte(k)))
	unk.FramingExtras = []byte{0xe0}
	if p := a.do(unk); p.Status != memdx.StatusUnknownFrameInfo {
		t.Fatalf("unknown frame info: %s", p.Status)
	}

	// A pending synchronous write blocks other writers of the key.
	c.SetSyncWriteDelay(time.Hour)
	op := a.send(keyReq(a, b, dur(set(k, "v2"))))
	// With unordered execution the connection keeps serving meanwhile: the
	// answer of a GET sent after it also proves the node has the sync write.
	a.passed(b)
	if p := other.do(keyReq(other, b, set(k, "other"))); p.Status != memdx.StatusSyncWriteInProgress {
		t.Fatalf("write during a sync write: %s", p.Status)
	}
	if p := other.do(keyReq(other, b, memdx.NewGet([]byte(k)))); string(p.Value) != "v1" {
		t.Fatalf("read during a sync write: %q", p.Value)
	}
	c.CommitSyncWrites()
	if p := a.recv(op); p.Status != memdx.StatusSuccess {
		t.Fatalf("sync write: %s", p.Status)
	}
	if p := other.do(keyReq(other, b, memdx.NewGet([]byte(k)))); string(p.Value) != "v2" {
		t.Fatalf("read after commit: %q", p.Value)
	}
	// Without XERROR the in-progress status is TMPFAIL.
	noX := bootstrap(t, addr, DefaultBucket, []memdx.HelloFeature{memdx.FeatureCollections, memdx.FeatureAltRequests})
	op = a.send(keyReq(a, b, dur(set(k, "v3"))))
	a.passed(b)
	if p := noX.do(keyReq(noX, b, set(k, "x"))); p.Status != memdx.StatusTmpFail {
		t.Fatalf("without XERROR: %s", p.Status)
	}
	c.CommitSyncWrites()
	a.recv(op)

	// Without unordered execution the connection waits for the sync write:
	// the NOOP sent behind it is answered after it.
	ord := bootstrap(t, addr, DefaultBucket, nil)
	w := keyReq(ord, b, dur(set(k, "v4")))
	buf, _ := w.AppendTo(nil, 501)
	nr := memdx.NewNoop()
	buf, _ = nr.AppendTo(buf, 502)
	ord.write(buf)
	waitFor(t, "the sync write to be pending", func() bool { return c.PendingSyncWrites() == 1 })
	if p := other.do(keyReq(other, b, set(k, "x"))); p.Status != memdx.StatusSyncWriteInProgress {
		t.Fatalf("write during an ordered sync write: %s", p.Status)
	}
	c.CommitSyncWrites()
	if p := ord.recv(501); p.Status != memdx.StatusSuccess {
		t.Fatalf("ordered sync write: %s", p.Status)
	}
	ord.recv(502)
	c.SetSyncWriteDelay(0)

	// A vbucket whose chain lacks a replica cannot satisfy majority.
	one := newCluster(t, Options{Nodes: 1})
	ob := one.Bucket(DefaultBucket)
	oc := bootstrap(t, one.Node(0).Addr(), DefaultBucket, nil)
	if p := oc.do(keyReq(oc, ob, dur(set(k, "v")))); p.Status != memdx.StatusDurabilityImpossible {
		t.Fatalf("1 node, 1 replica: %s", p.Status)
	}
}

func TestQuietOpsAndPipelining(t *testing.T) {
	e := newKVEnv(t, Options{}, nil)
	k := "quiet"
	cl := e.cl(k)
	var buf []byte
	var err error
	reqs := []memdx.Request{
		{OpCode: memdx.OpGetQ, Key: []byte(k)},
		memdx.NewStore(memdx.OpSetQ, []byte(k), []byte("q"), 0, 0),
		{OpCode: memdx.OpGetKQ, Key: []byte(k)},
		memdx.NewStore(memdx.OpAddQ, []byte(k), []byte("dup"), 0, 0),
		memdx.NewNoop(),
	}
	for i, r := range reqs {
		if r.OpCode != memdx.OpNoop {
			r = keyReq(cl, e.b, r)
		}
		if buf, err = r.AppendTo(buf, uint32(100+i)); err != nil {
			t.Fatal(err)
		}
	}
	cl.write(buf)
	var got []memdx.Packet
	for {
		p, err := cl.read(5 * time.Second)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, p)
		if p.OpCode == memdx.OpNoop {
			break
		}
	}
	// GETQ miss: nothing; SETQ success: nothing; GETKQ hit: value with key;
	// ADDQ failure: KEY_EEXISTS; NOOP.
	if len(got) != 3 || got[0].Opaque != 102 || string(got[0].Value) != "q" || len(got[0].Key) == 0 ||
		got[1].Opaque != 103 || got[1].Status != memdx.StatusKeyExists {
		for _, p := range got {
			t.Logf("%s %s opaque %d", p.OpCode, p.Status, p.Opaque)
		}
		t.Fatal("unexpected quiet responses")
	}
}

func TestStatVersionQuit(t *testing.T) {
	e := newKVEnv(t, Options{}, nil)
	cl := e.cl("x")
	if p := cl.do(memdx.NewVersion()); string(p.Value) != DefaultVersion {
		t.Fatalf("VERSION %q", p.Value)
	}
	op := cl.send(memdx.NewStat(nil))
	stats := map[string]string{}
	for {
		p := cl.recv(op)
		k, v, done := memdx.DecodeStat(&p)
		if done {
			if len(v) != 0 || p.Status != memdx.StatusSuccess {
				t.Fatalf("terminator %s %q", p.Status, v)
			}
			break
		}
		stats[string(k)] = string(v)
	}
	for _, k := range []string{"pid", "uptime", "time", "version", "curr_connections", "curr_items"} {
		if stats[k] == "" {
			t.Errorf("stat %q missing", k)
		}
	}
	if p := cl.do(memdx.NewStat([]byte("nonsense"))); p.Status != memdx.StatusKeyNotFound {
		t.Fatalf("unknown stat group: %s", p.Status)
	}
	if p := cl.do(memdx.NewQuit()); p.Status != memdx.StatusSuccess {
		t.Fatalf("QUIT %s", p.Status)
	}
	cl.expectClosed()
}

func TestMalformedInput(t *testing.T) {
	c := newCluster(t, Options{Nodes: 1})
	addr := c.Node(0).Addr()
	t.Run("bad magic closes", func(t *testing.T) {
		cl := dialRaw(t, addr)
		hdr := make([]byte, 24)
		hdr[0] = 0x42
		cl.write(hdr)
		cl.expectClosed()
	})
	t.Run("response magic closes", func(t *testing.T) {
		cl := dialRaw(t, addr)
		b, _ := memdx.AppendPacket(nil, &memdx.Packet{Magic: memdx.MagicRes, OpCode: memdx.OpNoop})
		cl.write(b)
		cl.expectClosed()
	})
	t.Run("huge body closes", func(t *testing.T) {
		cl := dialRaw(t, addr)
		hdr := make([]byte, 24)
		hdr[0] = 0x80
		binary.BigEndian.PutUint32(hdr[8:12], 0x7fffffff)
		cl.write(hdr)
		cl.expectClosed()
	})
	t.Run("answers after earlier requests", func(t *testing.T) {
		cl := bootstrap(t, addr, "", nil)
		nr := memdx.NewNoop()
		noop, _ := nr.AppendTo(nil, 9)
		bad := make([]byte, 24)
		bad[0] = 0x55
		cl.write(append(noop, bad...))
		got := cl.expectClosed()
		if len(got) != 1 || got[0].Opaque != 9 {
			t.Fatalf("got %d packets before the close", len(got))
		}
	})
	// The node still serves (SASL_LIST_MECHS: kv_engine refuses NOOP
	// before authentication).
	cl := dialRaw(t, addr)
	if p := cl.do(memdx.NewSASLListMechs()); p.Status != memdx.StatusSuccess {
		t.Fatal(p.Status)
	}
}
