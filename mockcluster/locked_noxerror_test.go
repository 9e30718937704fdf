package mockcluster

import (
	"strconv"
	"testing"

	"github.com/kvwire/kvwire/memdx"
)

// What a client sees for a locked document depends on which of its two
// "locked" codes kv_engine answers, and on XERROR. With XERROR both are
// LOCKED. Without it Connection::remapErrorCode makes locked KEY_EEXISTS
// and locked_tmpfail TMPFAIL; locked is what mutations get (VBucket::set,
// the append/prepend and remove contexts without a CAS) and TOUCH/GAT
// (getAndTouchInner), locked_tmpfail what GET_LOCKED, UNLOCK_KEY with a
// wrong CAS, DELETE with a wrong CAS (VBucket::deleteItem) and a
// sub-document command without a CAS (get_document_for_searching) get. The
// mock answered TMPFAIL for all of them.
func TestLockedStatusesWithoutXerror(t *testing.T) {
	for _, xerror := range []bool{false, true} {
		t.Run("xerror="+strconv.FormatBool(xerror), func(t *testing.T) {
			feats := []memdx.HelloFeature{memdx.FeatureJSON}
			if xerror {
				feats = append(feats, memdx.FeatureXerror)
			}
			e := newKVEnv(t, Options{}, feats)
			k := "lk"
			s := e.expect("set", e.do(set(k, `{"a":1}`)), memdx.StatusSuccess)
			e.expect("getl", e.do(memdx.NewGetLocked([]byte(k), 10)), memdx.StatusSuccess)
			wrong := s.Cas
			locked, lockedTmp := memdx.StatusKeyExists, memdx.StatusTmpFail
			if xerror {
				locked, lockedTmp = memdx.StatusLocked, memdx.StatusLocked
			}
			sdUpsert := func(cas uint64) memdx.Request {
				r := memdx.NewSubdocMutation(memdx.OpSubdocDictUpsert, []byte(k), []byte("b"), []byte("2"), 0, 0, 0)
				r.Cas = cas
				return r
			}
			for _, c := range []struct {
				what string
				r    memdx.Request
				want memdx.Status
			}{
				{"set", set(k, "x"), locked},
				{"set wrong cas", withCas(set(k, "x"), wrong), locked},
				{"replace", memdx.NewStore(memdx.OpReplace, []byte(k), []byte("x"), 0, 0), locked},
				{"append", memdx.NewConcat(memdx.OpAppend, []byte(k), []byte("x")), locked},
				{"append wrong cas", withCas(memdx.NewConcat(memdx.OpAppend, []byte(k), []byte("x")), wrong), locked},
				{"incr", memdx.NewCounter(memdx.OpIncrement, []byte(k), 1, 0, 0), locked},
				{"delete", memdx.NewDelete([]byte(k)), locked},
				{"delete wrong cas", withCas(memdx.NewDelete([]byte(k)), wrong), lockedTmp},
				{"touch", memdx.NewTouch([]byte(k), 5), locked},
				{"gat", memdx.NewGAT([]byte(k), 5), locked},
				{"getl", memdx.NewGetLocked([]byte(k), 5), lockedTmp},
				{"unlock wrong cas", memdx.NewUnlock([]byte(k), wrong), lockedTmp},
				{"subdoc mutation", sdUpsert(0), lockedTmp},
				{"subdoc mutation wrong cas", sdUpsert(wrong), locked},
				// The CAS a GET of the locked document showed: kv_engine's
				// get_document_for_searching takes it for no CAS.
				{"subdoc mutation hidden lock cas", sdUpsert(lockedCas), lockedTmp},
				{"subdoc lookup", memdx.NewSubdocLookup(memdx.OpSubdocGet, []byte(k), []byte("a"), 0, 0), lockedTmp},
			} {
				// kv_engine sets no error context for a lock (none of
				// the paths above does; GetLockedCommandContext only
				// turns locked into locked_tmpfail): the answer has no
				// body. The mock's GET_LOCKED said "The document is
				// already locked".
				if p := e.expect(c.what, e.do(c.r), c.want); len(p.Value) != 0 {
					t.Errorf("%s: body %q, want none", c.what, p.Value)
				}
			}
			if d, _ := e.b.Get("", "", k); !d.Locked || string(d.Value) != `{"a":1}` {
				t.Fatalf("document after the refused requests: locked %v, %q", d.Locked, d.Value)
			}
		})
	}
}
