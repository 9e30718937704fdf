package mockcluster

import (
	"testing"

	"github.com/kvwire/kvwire/memdx"
)

// UNLOCK of a document that exists but is not locked answers NOT_LOCKED to
// every connection that negotiated XERROR, whichever error map version it
// fetched (or none), as kv_engine 7.6 does; only a connection without
// XERROR sees TMPFAIL instead (TestLocking).
func TestUnlockNotLockedWhateverErrorMapVersion(t *testing.T) {
	c := newCluster(t, Options{})
	b := c.Bucket(DefaultBucket)
	k := "never-locked"
	cas, err := b.Set("", "", k, []byte("v"), 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	addr := c.Node(ownerOf(b, k)).Addr()
	for _, version := range []uint16{0, 1, 2} {
		cl := bootstrap(t, addr, DefaultBucket, []memdx.HelloFeature{memdx.FeatureXerror, memdx.FeatureSelectBucket})
		if version > 0 {
			if p := cl.do(memdx.NewGetErrorMap(version)); p.Status != memdx.StatusSuccess {
				t.Fatalf("GET_ERROR_MAP %d: %s", version, p.Status)
			}
		}
		if p := cl.do(keyReq(cl, b, memdx.NewUnlock([]byte(k), cas))); p.Status != memdx.StatusNotLocked {
			t.Errorf("error map version %d: UNLOCK of an unlocked document answered %s, want NOT_LOCKED", version, p.Status)
		}
	}
	if d, _ := b.Get("", "", k); d.Locked || d.Cas != cas {
		t.Fatalf("the document changed: locked %v, CAS %x (was %x)", d.Locked, d.Cas, cas)
	}
}

// UNLOCK_KEY without a CAS answers EINVAL, locked document or not, as
// kv_engine's unlock_validator (ExpectedCas::Set) does, and the lock stays.
func TestUnlockWithoutCasInvalid(t *testing.T) {
	c := newCluster(t, Options{})
	b := c.Bucket(DefaultBucket)
	for _, k := range []string{"plain", "held"} {
		if _, err := b.Set("", "", k, []byte("v"), 0, 0); err != nil {
			t.Fatal(err)
		}
		addr := c.Node(ownerOf(b, k)).Addr()
		cl := bootstrap(t, addr, DefaultBucket, []memdx.HelloFeature{memdx.FeatureXerror, memdx.FeatureSelectBucket})
		if k == "held" {
			if p := cl.do(keyReq(cl, b, memdx.NewGetLocked([]byte(k), 0))); p.Status != memdx.StatusSuccess {
				t.Fatalf("GET_LOCKED: %s", p.Status)
			}
		}
		if p := cl.do(keyReq(cl, b, memdx.NewUnlock([]byte(k), 0))); p.Status != memdx.StatusInvalidArgs {
			t.Errorf("%s: UNLOCK_KEY with CAS 0 answered %s, want EINVAL", k, p.Status)
		}
		if d, _ := b.Get("", "", k); d.Locked != (k == "held") {
			t.Errorf("%s: locked %v after the refused UNLOCK_KEY", k, d.Locked)
		}
	}
}

// Before 7.6 kv_engine had no NOT_LOCKED: KVBucket::unlockKey answered
// temporary_failure for a document that exists but is not locked, which
// reaches a client as TMPFAIL with XERROR or without. A mock whose Version
// is older than 7.6 answers so; a lock with another CAS is LOCKED
// (locked_tmpfail) and a missing document KEY_ENOENT on either version.
func TestUnlockNotLockedBefore76(t *testing.T) {
	for _, c := range []struct {
		version   string
		notLocked memdx.Status
	}{
		{"7.2.4-7070-enterprise", memdx.StatusTmpFail},
		{"6.6.0-7909-enterprise", memdx.StatusTmpFail},
		{"7.6.0-2176-enterprise", memdx.StatusNotLocked},
		{"8.0.0-1000-enterprise", memdx.StatusNotLocked},
		{"", memdx.StatusNotLocked}, // DefaultVersion
	} {
		t.Run(c.version, func(t *testing.T) {
			e := newKVEnv(t, Options{Version: c.version}, []memdx.HelloFeature{memdx.FeatureXerror})
			k := "lk"
			e.expect("unlock missing", e.do(memdx.NewUnlock([]byte(k), 1)), memdx.StatusKeyNotFound)
			s := e.expect("set", e.do(set(k, "v")), memdx.StatusSuccess)
			e.expect("unlock unlocked", e.do(memdx.NewUnlock([]byte(k), s.Cas)), c.notLocked)
			l := e.expect("getl", e.do(memdx.NewGetLocked([]byte(k), 10)), memdx.StatusSuccess)
			e.expect("unlock wrong cas", e.do(memdx.NewUnlock([]byte(k), s.Cas)), memdx.StatusLocked)
			e.expect("unlock", e.do(memdx.NewUnlock([]byte(k), l.Cas)), memdx.StatusSuccess)
			e.expect("unlock again", e.do(memdx.NewUnlock([]byte(k), l.Cas)), c.notLocked)
		})
	}
}
