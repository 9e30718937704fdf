package mockcluster

import (
	"testing"
	"time"

	"github.com/kvwire/kvwire/memdx"
)

// kv_engine counts expiry and lock time in whole seconds and keeps a
// document through the second its expiry names (StoredValue::isExpired:
// exptime < now) and a lock through the second it ends in
// (StoredValue::isLocked: locked unless now > lock expiry). So a TTL or a
// lock of n seconds taken at second s lasts until s+n+1. The mock used to
// end both at s+n.
func TestExpiryAndLockLastThroughTheirLastSecond(t *testing.T) {
	e := newKVEnv(t, Options{}, []memdx.HelloFeature{memdx.FeatureXerror})
	start := e.now // a whole second
	e.expect("set ttl 10", e.do(memdx.NewStore(memdx.OpSet, []byte("ttl"), []byte("v"), 0, 10)), memdx.StatusSuccess)
	e.now = start.Add(10 * time.Second)
	e.expect("get at +10s", e.do(memdx.NewGet([]byte("ttl"))), memdx.StatusSuccess)
	e.now = start.Add(11*time.Second - time.Millisecond)
	e.expect("get at +10.999s", e.do(memdx.NewGet([]byte("ttl"))), memdx.StatusSuccess)
	e.now = start.Add(11 * time.Second)
	e.expect("get at +11s", e.do(memdx.NewGet([]byte("ttl"))), memdx.StatusKeyNotFound)

	// An absolute expiry of the current second is not yet past; one before
	// it is.
	e.now = start
	now := uint32(start.Unix())
	e.expect("set abs now", e.do(memdx.NewStore(memdx.OpSet, []byte("abs"), []byte("v"), 0, now)), memdx.StatusSuccess)
	e.expect("get abs now", e.do(memdx.NewGet([]byte("abs"))), memdx.StatusSuccess)
	e.expect("set abs past", e.do(memdx.NewStore(memdx.OpSet, []byte("past"), []byte("v"), 0, now-1)), memdx.StatusSuccess)
	e.expect("get abs past", e.do(memdx.NewGet([]byte("past"))), memdx.StatusKeyNotFound)
	e.now = start.Add(time.Second)
	e.expect("get abs now a second later", e.do(memdx.NewGet([]byte("abs"))), memdx.StatusKeyNotFound)

	e.now = start
	e.expect("set lk", e.do(set("lk", "v")), memdx.StatusSuccess)
	e.expect("getl 10", e.do(memdx.NewGetLocked([]byte("lk"), 10)), memdx.StatusSuccess)
	e.now = start.Add(11*time.Second - time.Millisecond)
	e.expect("set at +10.999s", e.do(set("lk", "x")), memdx.StatusLocked)
	e.now = start.Add(11 * time.Second)
	e.expect("set at +11s", e.do(set("lk", "x")), memdx.StatusSuccess)
}
