package mockcluster

import (
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kvwire/kvwire/memdx"
)

// RANGE_SCAN_CONTINUE and RANGE_SCAN_CANCEL have no privilege chain of
// their own in kv_engine (McbpPrivilegeChains sets them empty: "continue/
// cancel need to re-inspect the existing RangeScan object. So setup as empty
// and ep-engine does the checks"): EPVBucket::continueRangeScan finds the
// scan (KEY_ENOENT when there is none) and its collection
// (UNKNOWN_COLLECTION), then checks the RangeScan privilege on that
// collection (RangeScanOwner::checkPrivileges, RangeScan::hasPrivilege);
// cancelRangeScan finds the scan, then checks the same privilege. The mock
// checked Read before looking at the scan, as for a document command: an
// impersonated user granted Read could continue and cancel a scan, one
// granted RangeScan could not, and an unknown id was EACCESS, not KEY_ENOENT.
func TestRangeScanContinueAndCancelCheckTheRangeScanPrivilege(t *testing.T) {
	e := newScanEnv(t, Options{Nodes: 1, Users: privilegeUsers(), Buckets: []BucketOptions{{Name: DefaultBucket, NumVbuckets: 1}}})
	e.seed("", "", "a", "b", "c")
	const vb = 0
	id := e.mustCreate(vb, &memdx.RangeScanCreate{KeyOnly: true})
	as := func(r memdx.Request, privs ...string) memdx.Request {
		r.Vbucket = vb
		return asElsewhere(t, r, privs...)
	}
	cont := func(id memdx.RangeScanID) memdx.Request {
		return memdx.NewRangeScanContinue(memdx.RangeScanContinue{ID: id, ItemLimit: 1})
	}
	cl := e.cl(vb)
	var unknown memdx.RangeScanID
	unknown[0] = 0xff

	const contCtx = "Authorization failure: can't execute RANGE_SCAN_CONTINUE operation without the RangeScan privilege"
	expectAnswer(t, "continue granted nothing", cl.do(as(cont(id))), memdx.StatusNoAccess, contCtx)
	expectAnswer(t, "continue granted Read", cl.do(as(cont(id), "Read")), memdx.StatusNoAccess, contCtx)
	expectAnswer(t, "continue of an unknown scan", cl.do(as(cont(unknown))), memdx.StatusKeyNotFound, "")
	if b := e.cont(cl, vb, memdx.RangeScanContinue{ID: id, ItemLimit: 1}); b.status != memdx.StatusRangeScanMore {
		t.Fatalf("the refusals left the scan as it was: %s", b.status)
	}
	r := as(cont(id), "RangeScan")
	op := cl.send(r)
	for {
		p := cl.recv(op)
		if p.Status == memdx.StatusSuccess {
			continue
		}
		if p.Status != memdx.StatusRangeScanMore {
			t.Fatalf("continue granted RangeScan: %s %q", p.Status, p.Value)
		}
		break
	}

	const cancelCtx = "Authorization failure: can't execute RANGE_SCAN_CANCEL operation without the RangeScan privilege"
	expectAnswer(t, "cancel granted nothing", cl.do(as(memdx.NewRangeScanCancel(id))), memdx.StatusNoAccess, cancelCtx)
	expectAnswer(t, "cancel granted Read", cl.do(as(memdx.NewRangeScanCancel(id), "Read")), memdx.StatusNoAccess, cancelCtx)
	expectAnswer(t, "cancel of an unknown scan", cl.do(as(memdx.NewRangeScanCancel(unknown))), memdx.StatusKeyNotFound, "")
	if n := e.c.OpenRangeScans(); n != 1 {
		t.Fatalf("a refused cancel cancelled the scan: %d open", n)
	}
	expectAnswer(t, "cancel granted RangeScan", cl.do(as(memdx.NewRangeScanCancel(id), "RangeScan")), memdx.StatusSuccess, "")
	if n := e.c.OpenRangeScans(); n != 0 {
		t.Fatalf("%d scans open after the cancel", n)
	}
}

// RANGE_SCAN_CREATE has no privilege chain either (McbpPrivilegeChains:
// "The RangeScan collection is embedded in a JSON payload (for create) ...
// So setup as empty and ep-engine does the checks"): RangeScan::createScan
// (engines/ep/src/range_scans/range_scan.cc) checks hasPrivilege, the
// RangeScan privilege on the scan's collection, once EPBucket::
// createRangeScan found the collection (UNKNOWN_COLLECTION first) and
// EPVBucket::createRangeScan reserved room for it (EBUSY first), and
// before it looks for a key in the range (KEY_ENOENT after). The mock
// checked Read before anything, as for a document command: a user granted
// RangeScan alone could not create a scan, one granted Read alone could.
func TestRangeScanCreateChecksTheRangeScanPrivilege(t *testing.T) {
	e := newScanEnv(t, Options{Nodes: 1, MaxRangeScans: 1, Users: privilegeUsers(), Buckets: []BucketOptions{{Name: DefaultBucket, NumVbuckets: 1}}})
	e.seed("", "", "a", "b", "c")
	const vb = 0
	create := func(cfg *memdx.RangeScanCreate, privs ...string) memdx.Request {
		r, err := memdx.NewRangeScanCreate(cfg)
		if err != nil {
			t.Fatal(err)
		}
		r.Vbucket = vb
		return asElsewhere(t, r, privs...)
	}
	cl := e.cl(vb)
	all := &memdx.RangeScanCreate{KeyOnly: true}
	const ctx = "Authorization failure: can't execute RANGE_SCAN_CREATE operation without the RangeScan privilege"

	expectAnswer(t, "create granted nothing", cl.do(create(all)), memdx.StatusNoAccess, ctx)
	expectAnswer(t, "create granted Read", cl.do(create(all, "Read")), memdx.StatusNoAccess, ctx)
	expectAnswer(t, "create of an unknown collection", cl.do(create(&memdx.RangeScanCreate{CollectionID: 0x77, KeyOnly: true})),
		memdx.StatusUnknownCollection, "")
	expectAnswer(t, "create of an empty range", cl.do(create(&memdx.RangeScanCreate{KeyOnly: true,
		Range: &memdx.RangeScanRange{Start: []byte("x"), End: []byte("z")}})), memdx.StatusNoAccess, ctx)
	if n := e.c.OpenRangeScans(); n != 0 {
		t.Fatalf("a refused create opened a scan: %d open", n)
	}
	expectAnswer(t, "create granted RangeScan", cl.do(create(all, "RangeScan")), memdx.StatusSuccess, "")
	// The node's one scan is taken: EBUSY comes before the privilege.
	expectAnswer(t, "create with no room", cl.do(create(all)), memdx.StatusBusy, "")
}

// A create that waits for its snapshot's seqno (timeout_ms) checks the
// RangeScan privilege once the seqno is reached, as RangeScan::createScan
// does after EPBucket::createRangeScan's wait, and the privileges it checks
// are still its own request's. On an unordered connection the mock reads
// on meanwhile, and each request it handles sets the connection's
// impersonated user (conn.euid) anew: the create's late check read the
// user of whatever request came last, so an impersonated user without
// the RangeScan privilege got a scan once a plain GET had followed its
// create.
func TestRangeScanCreateAfterItsSeqnoChecksItsOwnPrivileges(t *testing.T) {
	e := newScanEnv(t, Options{Nodes: 1, Users: privilegeUsers(), Buckets: []BucketOptions{{Name: DefaultBucket, NumVbuckets: 1}}})
	e.seed("", "", "a")
	writer := e.cl(0)
	waiter := bootstrap(t, e.c.Node(0).Addr(), DefaultBucket,
		append(slices.Clone(stdFeatures), memdx.FeatureUnorderedExecution))
	doc, _ := e.b.Get("", "", "a")
	r, err := memdx.NewRangeScanCreate(&memdx.RangeScanCreate{KeyOnly: true,
		Snapshot: &memdx.RangeScanSnapshot{VbUUID: e.b.VbucketUUID(0), Seqno: doc.Seqno + 1, TimeoutMs: 60_000}})
	if err != nil {
		t.Fatal(err)
	}
	create := waiter.send(asElsewhere(t, r))
	// Another request, the connection's own user's, handled while the
	// create waits: its answer comes first.
	if p := waiter.do(keyReq(waiter, e.b, memdx.NewGet([]byte("a")))); p.Status != memdx.StatusSuccess {
		t.Fatalf("get while the create waits: %s", p.Status)
	}
	if p := writer.do(keyReq(writer, e.b, set("b", "1"))); p.Status != memdx.StatusSuccess {
		t.Fatalf("set: %s", p.Status)
	}
	expectAnswer(t, "create once its seqno is reached", waiter.recv(create), memdx.StatusNoAccess,
		"Authorization failure: can't execute RANGE_SCAN_CREATE operation without the RangeScan privilege")
	if n := e.c.OpenRangeScans(); n != 0 {
		t.Fatalf("a refused create opened a scan: %d open", n)
	}

	// And the other way: a create granted RangeScan keeps it, though the
	// request handled meanwhile impersonates the user granting nothing.
	doc, _ = e.b.Get("", "", "b")
	r, err = memdx.NewRangeScanCreate(&memdx.RangeScanCreate{KeyOnly: true,
		Snapshot: &memdx.RangeScanSnapshot{VbUUID: e.b.VbucketUUID(0), Seqno: doc.Seqno + 1, TimeoutMs: 60_000}})
	if err != nil {
		t.Fatal(err)
	}
	create = waiter.send(asElsewhere(t, r, "RangeScan"))
	expectAnswer(t, "get granted nothing while the create waits", waiter.do(asElsewhere(t, keyReq(waiter, e.b, memdx.NewGet([]byte("a"))))),
		memdx.StatusNoAccess, "Authorization failure: can't execute GET operation without the Read privilege")
	if p := writer.do(keyReq(writer, e.b, set("c", "1"))); p.Status != memdx.StatusSuccess {
		t.Fatalf("set: %s", p.Status)
	}
	expectAnswer(t, "create granted RangeScan once its seqno is reached", waiter.recv(create), memdx.StatusSuccess, "")
}

// A continue of a scan another continue is running is refused EBUSY only
// once the request passed the privilege check: EPVBucket::continueRangeScan
// (engines/ep/src/ep_vb.cc) finds the scan and its collection
// (setupCookieForRangeScan) and checks the RangeScan privilege
// (RangeScanOwner::checkPrivileges) before RangeScanOwner::continueScan
// answers too_busy for a scan that is not idle. The mock answered EBUSY
// first: a user without the privilege learned the scan was being read.
func TestRangeScanContinueOfABusyScanChecksThePrivilegeFirst(t *testing.T) {
	// The clock holds the first continue in the middle of its stream
	// (the second reading after armed: the continue's start, then its
	// time limit's check after the first key), the scan busy, until
	// released.
	var armed atomic.Int32
	blocked, release := make(chan struct{}), make(chan struct{})
	var releaseOnce sync.Once
	free := func() { releaseOnce.Do(func() { close(release) }) }
	t.Cleanup(free)
	c := newCluster(t, Options{Nodes: 1, Users: privilegeUsers(), Buckets: []BucketOptions{{Name: DefaultBucket, NumVbuckets: 1}},
		Clock: func() time.Time {
			if n := armed.Load(); n > 0 && armed.CompareAndSwap(n, n-1) && n == 1 {
				close(blocked)
				<-release
			}
			return time.Unix(1_700_000_000, 0)
		}})
	e := &scanEnv{t: t, c: c, b: c.Bucket(DefaultBucket), conns: map[int]*rawClient{}}
	e.seed("", "", "a", "b", "c")
	const vb = 0
	id := e.mustCreate(vb, &memdx.RangeScanCreate{KeyOnly: true})
	cont := func(privs ...string) memdx.Request {
		r := memdx.NewRangeScanContinue(memdx.RangeScanContinue{ID: id, ItemLimit: 1})
		r.Vbucket = vb
		return asElsewhere(t, r, privs...)
	}

	first := e.cl(vb)
	armed.Store(2)
	r := memdx.NewRangeScanContinue(memdx.RangeScanContinue{ID: id, TimeLimitMs: 60_000})
	r.Vbucket = vb
	op := first.send(r)
	select {
	case <-blocked:
	case <-time.After(10 * time.Second):
		t.Fatal("the first continue never read the clock twice")
	}
	other := bootstrap(t, c.Node(0).Addr(), DefaultBucket, nil)
	expectAnswer(t, "continue of a busy scan, granted nothing", other.do(cont()), memdx.StatusNoAccess,
		"Authorization failure: can't execute RANGE_SCAN_CONTINUE operation without the RangeScan privilege")
	expectAnswer(t, "continue of a busy scan, granted RangeScan", other.do(cont("RangeScan")), memdx.StatusBusy, "")

	free()
	for {
		p := first.recv(op)
		if p.Status == memdx.StatusSuccess {
			continue
		}
		if p.Status != memdx.StatusRangeScanComplete {
			t.Fatalf("the first continue: %s %q", p.Status, p.Value)
		}
		break
	}
}
