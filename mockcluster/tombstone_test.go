package mockcluster

import (
	"strconv"
	"testing"
	"time"

	"github.com/kvwire/kvwire/memdx"
)

// getMeta sends GET_META (version 2) for key and decodes a success.
func (e *kvEnv) getMeta(key string) (memdx.Packet, memdx.GetMeta) {
	e.t.Helper()
	p := e.do(memdx.NewGetMeta([]byte(key)))
	var m memdx.GetMeta
	if p.Status == memdx.StatusSuccess {
		var err error
		if m, err = memdx.DecodeGetMeta(&p); err != nil {
			e.t.Fatalf("decode GET_META: %v", err)
		}
	}
	return p, m
}

// TestDeleteLeavesTombstone: every DELETE of a couchbase bucket's document
// leaves a tombstone, as kv_engine's does (VBucket::deleteItem soft-deletes
// the stored value, which keeps its key, flags and the delete's CAS, and
// persists it until the metadata purge interval). GET_META answers it with
// the deleted flag (VBucket::getMetaData), a sub-document lookup with
// AccessDeleted reads it (its virtual xattrs, and no body), GET and a
// lookup without AccessDeleted answer KEY_ENOENT, ADD writes over it.
func TestDeleteLeavesTombstone(t *testing.T) {
	e := newSubdocEnv(t)
	k := "plain"
	e.expect("set", e.do(memdx.NewStore(memdx.OpSet, []byte(k), []byte(`{"a":1}`), 7, 0)), memdx.StatusSuccess)
	del := e.expect("delete", e.do(memdx.NewDelete([]byte(k))), memdx.StatusSuccess)

	p, m := e.getMeta(k)
	if p.Status != memdx.StatusSuccess || !m.Deleted || p.Cas != del.Cas || m.Flags != 7 ||
		m.Expiry != uint32(e.now.Unix()) || m.Datatype != 0 {
		t.Fatalf("GET_META of a deleted document: %s %+v cas %x (delete's cas %x)", p.Status, m, p.Cas, del.Cas)
	}
	if _, st := e.body(k); st != memdx.StatusKeyNotFound {
		t.Fatalf("GET of a tombstone: %s", st)
	}
	if st, _ := e.xattrLookups(k, 0, "$document.deleted"); st != memdx.StatusKeyNotFound {
		t.Fatalf("lookup of a tombstone without AccessDeleted: %s", st)
	}
	st, rs := e.xattrLookups(k, memdx.SubdocDocAccessDeleted, "$document.deleted", "$document.CAS", "_sys")
	if st != memdx.StatusSubdocMultiPathFailureDeleted || string(rs[0].Value) != "true" ||
		string(rs[1].Value) != `"`+hex64(del.Cas)+`"` || rs[2].Status != memdx.StatusSubdocPathNotFound {
		t.Fatalf("AccessDeleted lookup of a tombstone: %s %+v", st, rs)
	}
	e.expect("delete of a tombstone", e.do(memdx.NewDelete([]byte(k))), memdx.StatusKeyNotFound)
	e.expect("replace of a tombstone", e.do(memdx.NewStore(memdx.OpReplace, []byte(k), []byte(`1`), 0, 0)), memdx.StatusKeyNotFound)

	// A document with user xattrs only leaves a tombstone without them.
	e.seed("user", `{}`)
	p, _ = e.mutateIn("user", 0, 0, mu(memdx.OpSubdocDictUpsert, "u", `1`, memdx.SubdocPathXattr))
	e.expect("user xattr", p, memdx.StatusSuccess)
	e.expect("delete user", e.do(memdx.NewDelete([]byte("user"))), memdx.StatusSuccess)
	if st, rs := e.xattrLookups("user", memdx.SubdocDocAccessDeleted, "u"); st != memdx.StatusSubdocMultiPathFailureDeleted ||
		rs[0].Status != memdx.StatusSubdocPathNotFound {
		t.Fatalf("user xattr of a tombstone: %s %+v", st, rs)
	}
	if p, m := e.getMeta("user"); p.Status != memdx.StatusSuccess || !m.Deleted || m.Datatype != 0 {
		t.Fatalf("GET_META of a tombstone without xattrs: %s %+v", p.Status, m)
	}

	// ADD creates the document again over the tombstone.
	add := e.expect("add over a tombstone", e.do(memdx.NewStore(memdx.OpAdd, []byte(k), []byte(`2`), 0, 0)), memdx.StatusSuccess)
	if p, m := e.getMeta(k); p.Status != memdx.StatusSuccess || m.Deleted || p.Cas != add.Cas {
		t.Fatalf("GET_META after ADD: %s %+v", p.Status, m)
	}
}

// TestTombstonePurge: tombstones go after kv_engine's default metadata
// purge interval (3 days), and a vbucket keeps a bounded number of them
// (the oldest go first), so that a test deleting many keys does not grow
// the mock without bound.
func TestTombstonePurge(t *testing.T) {
	e := newSubdocEnv(t)
	e.seed("old", `1`)
	e.expect("delete", e.do(memdx.NewDelete([]byte("old"))), memdx.StatusSuccess)
	e.now = e.now.Add(tombstonePurgeAge - time.Second)
	if p, m := e.getMeta("old"); p.Status != memdx.StatusSuccess || !m.Deleted {
		t.Fatalf("GET_META before the purge age: %s %+v", p.Status, m)
	}
	e.now = e.now.Add(time.Second)
	if p, _ := e.getMeta("old"); p.Status != memdx.StatusKeyNotFound {
		t.Fatalf("GET_META after the purge age: %s", p.Status)
	}
	if st, _ := e.xattrLookups("old", memdx.SubdocDocAccessDeleted, "$document.deleted"); st != memdx.StatusKeyNotFound {
		t.Fatalf("AccessDeleted lookup after the purge age: %s", st)
	}

	// More tombstones than a vbucket keeps: the first one goes.
	vb := e.b.VbucketForKey([]byte("k0"))
	limit := e.b.vbs[vb].maxTombstones()
	var keys []string
	for i := 0; len(keys) <= limit; i++ {
		k := "k" + strconv.Itoa(i)
		if e.b.VbucketForKey([]byte(k)) == vb {
			keys = append(keys, k)
		}
	}
	for _, k := range keys {
		e.seed(k, `1`)
		e.expect("delete "+k, e.do(memdx.NewDelete([]byte(k))), memdx.StatusSuccess)
	}
	if p, _ := e.getMeta(keys[0]); p.Status != memdx.StatusKeyNotFound {
		t.Fatalf("GET_META of the oldest of %d tombstones: %s", len(keys), p.Status)
	}
	if p, m := e.getMeta(keys[1]); p.Status != memdx.StatusSuccess || !m.Deleted {
		t.Fatalf("GET_META of the second oldest: %s %+v", p.Status, m)
	}
	v := e.b.vbs[vb]
	v.mu.Lock()
	n, q := len(v.tombs), len(v.tombQ)
	v.mu.Unlock()
	if n != limit || q > 2*limit+64 {
		t.Fatalf("vbucket holds %d tombstones (queue %d), limit %d", n, q, limit)
	}
}

// TestExpiredDocumentIsDeleted: an expired document is a deleted one, as
// kv_engine has it: GET_META answers it with the deleted flag
// (VBucket::getMetaData checks isExpired), and once an access processes
// the expiry (VBucket::processExpiredItem, the pre-expiry hook keeping the
// system xattrs only) it is a tombstone that AccessDeleted lookups read.
// The expiry is not a client's mutation: MutationCount does not count it.
func TestExpiredDocumentIsDeleted(t *testing.T) {
	e := newSubdocEnv(t)
	x := memdx.SubdocPathXattr
	p, _ := e.mutateIn("exp", memdx.SubdocDocMkdoc, 0, mu(memdx.OpSubdocDictUpsert, "_sys", `1`, x), mu(memdx.OpSubdocDictUpsert, "u", `2`, x))
	e.expect("xattrs", p, memdx.StatusSuccess)
	// A SET keeps the xattrs.
	live := e.expect("set", e.do(memdx.NewStore(memdx.OpSet, []byte("exp"), []byte(`{"a":1}`), 5, 10)), memdx.StatusSuccess)
	count := e.b.MutationCount("", "", "exp")
	e.now = e.now.Add(11 * time.Second)

	p, m := e.getMeta("exp")
	if p.Status != memdx.StatusSuccess || !m.Deleted || p.Cas != live.Cas || m.Flags != 5 {
		t.Fatalf("GET_META of an expired document: %s %+v cas %x (was %x)", p.Status, m, p.Cas, live.Cas)
	}
	if _, st := e.body("exp"); st != memdx.StatusKeyNotFound {
		t.Fatalf("GET of an expired document: %s", st)
	}
	st, rs := e.xattrLookups("exp", memdx.SubdocDocAccessDeleted, "_sys", "u", "$document.deleted")
	if st != memdx.StatusSubdocMultiPathFailureDeleted || string(rs[0].Value) != "1" ||
		rs[1].Status != memdx.StatusSubdocPathNotFound || string(rs[2].Value) != "true" {
		t.Fatalf("AccessDeleted lookup of an expired document: %s %+v", st, rs)
	}
	if p, m := e.getMeta("exp"); p.Status != memdx.StatusSuccess || !m.Deleted || p.Cas == live.Cas ||
		m.Expiry != uint32(e.now.Unix()) {
		t.Fatalf("GET_META of the expired document's tombstone: %s %+v cas %x", p.Status, m, p.Cas)
	}
	if n := e.b.MutationCount("", "", "exp"); n != count {
		t.Fatalf("MutationCount %d after the expiry, was %d", n, count)
	}
	e.expect("add over it", e.do(memdx.NewStore(memdx.OpAdd, []byte("exp"), []byte(`1`), 0, 0)), memdx.StatusSuccess)
}

// A MULTI_MUTATION with AccessDeleted whose spec fails on a tombstone
// answers MULTI_PATH_FAILURE: kv_engine maps a failure to
// MULTI_PATH_FAILURE_DELETED for lookups only
// (SubdocCommandContext::send_multi_lookup_response);
// send_multi_mutation_response sends the overall status as it is. The mock
// answered a mutation MULTI_PATH_FAILURE_DELETED.
func TestMultiMutationFailureOnTombstone(t *testing.T) {
	e := newSubdocEnv(t)
	x := memdx.SubdocPathXattr
	p, _ := e.mutateIn("doc", memdx.SubdocDocMkdoc, 0, mu(memdx.OpSubdocDictUpsert, "_sync", `{"rev":1}`, x))
	e.expect("add a system xattr", p, memdx.StatusSuccess)
	e.expect("delete", e.do(memdx.NewDelete([]byte("doc"))), memdx.StatusSuccess)
	p, rs := e.mutateIn("doc", memdx.SubdocDocAccessDeleted, 0, mu(memdx.OpSubdocDictAdd, "_sync.rev", `2`, x))
	if p.Status != memdx.StatusSubdocMultiPathFailure || len(rs) != 1 || rs[0].Index != 0 ||
		rs[0].Status != memdx.StatusSubdocPathExists {
		t.Fatalf("failed mutation of a tombstone: %s %+v, want MULTI_PATH_FAILURE, index 0 PATH_EEXISTS", p.Status, rs)
	}
}
