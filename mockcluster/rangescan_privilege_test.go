package mockcluster

import (
	"testing"

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
	e := newScanEnv(t, Options{Nodes: 1, Users: []User{
		{Name: DefaultUser, Password: DefaultPassword, Buckets: []string{"*"}},
		{Name: "elsewhere", Password: "secret", Buckets: []string{"other"}},
	}, Buckets: []BucketOptions{{Name: DefaultBucket, NumVbuckets: 1}}})
	e.seed("", "", "a", "b", "c")
	const vb = 0
	id := e.mustCreate(vb, &memdx.RangeScanCreate{KeyOnly: true})
	as := func(r memdx.Request, privs ...string) memdx.Request {
		r.Vbucket = vb
		fe, err := memdx.AppendFrameInfo(nil, uint16(memdx.FrameImpersonateUser), []byte("elsewhere"))
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range privs {
			if fe, err = memdx.AppendFrameInfo(fe, uint16(memdx.FrameImpersonateUserExtraPrivilege), []byte(p)); err != nil {
				t.Fatal(err)
			}
		}
		r.FramingExtras = fe
		return r
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
