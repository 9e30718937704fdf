package mockcluster

import (
	"testing"

	"github.com/kvwire/kvwire/memdx"
)

// A collection whose name starts with '_', but for the default collection,
// is a system collection (Collections::isSystemCollection,
// engines/ep/src/collections/collections_types.h): _system._mobile and
// _system._query. kv_engine's privilege chains of the document commands
// (daemon/mcbp_privileges.cc, requirePrivilegesOnCurrentDocument) check
// SystemCollectionLookup before Read and SystemCollectionMutation before
// Upsert, Delete or Insert when the command's collection is one, and a
// range scan checks SystemCollectionLookup before RangeScan
// (RangeScan::hasPrivilege, checkCollectionAccess). In the mock only an
// impersonated user without access to the bucket lacks privileges, holding
// those the request grants; the mock let it into the system collections
// with the user privileges alone.
func TestSystemCollectionPrivileges(t *testing.T) {
	c := newCluster(t, Options{Nodes: 1, Users: privilegeUsers(), Buckets: []BucketOptions{{Name: DefaultBucket, NumVbuckets: 1}}})
	b := c.Bucket(DefaultBucket)
	cl := bootstrap(t, c.Node(0).Addr(), DefaultBucket, nil)
	query, ok := b.snap.Load().manifest.lookup(systemScope, "_query")
	if !ok {
		t.Fatal("no _system._query")
	}
	in := func(cid uint32, r memdx.Request, privs ...string) memdx.Request {
		r = keyReq(cl, b, r)
		r.CollectionID = cid
		return asElsewhere(t, r, privs...)
	}
	refused := func(op memdx.OpCode, priv string) string {
		return "Authorization failure: can't execute " + op.String() + " operation without the " + priv + " privilege"
	}
	set := func(cid uint32, privs ...string) memdx.Request {
		return in(cid, memdx.NewStore(memdx.OpSet, []byte("k"), []byte(`1`), 0, 0), privs...)
	}
	get := func(cid uint32, privs ...string) memdx.Request { return in(cid, memdx.NewGet([]byte("k")), privs...) }

	// The connection's own user may use the bucket: it holds every
	// privilege in it, the system ones too.
	own := keyReq(cl, b, memdx.NewStore(memdx.OpSet, []byte("k"), []byte(`1`), 0, 0))
	own.CollectionID = query
	expectAnswer(t, "the bucket's user writes", cl.do(own), memdx.StatusSuccess, "")

	expectAnswer(t, "write granted Upsert", cl.do(set(query, "Upsert")), memdx.StatusNoAccess,
		refused(memdx.OpSet, "SystemCollectionMutation"))
	expectAnswer(t, "write granted the lookup", cl.do(set(query, "Upsert", "SystemCollectionLookup")), memdx.StatusNoAccess,
		refused(memdx.OpSet, "SystemCollectionMutation"))
	expectAnswer(t, "write granted SystemCollectionMutation alone", cl.do(set(query, "SystemCollectionMutation")), memdx.StatusNoAccess,
		refused(memdx.OpSet, "Upsert"))
	expectAnswer(t, "write granted both", cl.do(set(query, "SystemCollectionMutation", "Upsert")), memdx.StatusSuccess, "")
	expectAnswer(t, "delete granted Delete", cl.do(in(query, memdx.NewDelete([]byte("k")), "Delete")), memdx.StatusNoAccess,
		refused(memdx.OpDelete, "SystemCollectionMutation"))
	expectAnswer(t, "insert granted Insert", cl.do(in(query, memdx.NewStore(memdx.OpAdd, []byte("n"), []byte(`1`), 0, 0), "Insert")), memdx.StatusNoAccess,
		refused(memdx.OpAdd, "SystemCollectionMutation"))

	expectAnswer(t, "read granted Read", cl.do(get(query, "Read")), memdx.StatusNoAccess,
		refused(memdx.OpGet, "SystemCollectionLookup"))
	expectAnswer(t, "read granted the mutation", cl.do(get(query, "Read", "SystemCollectionMutation")), memdx.StatusNoAccess,
		refused(memdx.OpGet, "SystemCollectionLookup"))
	expectAnswer(t, "read granted both", cl.do(get(query, "SystemCollectionLookup", "Read")), memdx.StatusSuccess, "")
	// A counter reads and writes: both pairs, in the chain's order.
	incr := func(privs ...string) memdx.Request {
		return in(query, memdx.NewCounter(memdx.OpIncrement, []byte("k"), 1, 0, 0), privs...)
	}
	expectAnswer(t, "increment granted Read, Upsert", cl.do(incr("Read", "Upsert")), memdx.StatusNoAccess,
		refused(memdx.OpIncrement, "SystemCollectionLookup"))
	expectAnswer(t, "increment without the mutation", cl.do(incr("SystemCollectionLookup", "Read", "Upsert")), memdx.StatusNoAccess,
		refused(memdx.OpIncrement, "SystemCollectionMutation"))

	// The default collection and a user collection need nothing more.
	expectAnswer(t, "default collection read granted Read", cl.do(get(0, "Read")), memdx.StatusKeyNotFound, "")

	// A range scan of a system collection needs SystemCollectionLookup too.
	scan := func(privs ...string) memdx.Request {
		r, err := memdx.NewRangeScanCreate(&memdx.RangeScanCreate{CollectionID: query, KeyOnly: true})
		if err != nil {
			t.Fatal(err)
		}
		r.Vbucket = 0
		return asElsewhere(t, r, privs...)
	}
	expectAnswer(t, "scan granted RangeScan", cl.do(scan("RangeScan")), memdx.StatusNoAccess,
		refused(memdx.OpRangeScanCreate, "SystemCollectionLookup"))
	sp := cl.do(scan("SystemCollectionLookup", "RangeScan"))
	expectAnswer(t, "scan granted both", sp, memdx.StatusSuccess, "")
	id, err := memdx.DecodeRangeScanCreateResponse(&sp)
	if err != nil {
		t.Fatal(err)
	}
	cont := memdx.NewRangeScanContinue(memdx.RangeScanContinue{ID: id, ItemLimit: 1})
	cont.FramingExtras = scan("RangeScan").FramingExtras
	expectAnswer(t, "continue granted RangeScan", cl.do(cont), memdx.StatusNoAccess,
		refused(memdx.OpRangeScanContinue, "SystemCollectionLookup"))
	cancel := memdx.NewRangeScanCancel(id)
	cancel.FramingExtras = cont.FramingExtras
	expectAnswer(t, "cancel granted RangeScan", cl.do(cancel), memdx.StatusNoAccess,
		refused(memdx.OpRangeScanCancel, "SystemCollectionLookup"))
	cancel.FramingExtras = scan("SystemCollectionLookup", "RangeScan").FramingExtras
	expectAnswer(t, "cancel granted both", cl.do(cancel), memdx.StatusSuccess, "")
}
