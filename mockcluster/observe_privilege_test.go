package mockcluster

import (
	"testing"

	"github.com/kvwire/kvwire/memdx"
)

// kv_engine runs no privilege check of its own for OBSERVE
// (McbpPrivilegeChains sets it empty, daemon/mcbp_privileges.cc): the
// command parses its whole key list first (ObserveCommandContext::
// initialize, daemon/protocol/mcbp/observe_context.cc: EINVAL for a
// malformed one), then observes each key in turn, and the engine checks
// Read on that key's collection (EventuallyPersistentEngine::handleObserve,
// checkCollectionAccess in engines/ep/src/ep_engine.cc): for a collection
// other than the default one, the vbucket (NOT_MY_VBUCKET) and the
// collection (UNKNOWN_COLLECTION) first, SystemCollectionLookup before Read
// for a system collection; for the default collection, Read before the
// vbucket. The mock checked Read before anything, as the chain of a
// document command: an impersonated user without access to the bucket got
// EACCESS for a malformed list, an unknown collection and a vbucket the
// node does not hold.
func TestObserveChecksReadOnEachKeysCollection(t *testing.T) {
	c := newCluster(t, Options{Nodes: 1, Users: privilegeUsers(), Buckets: []BucketOptions{{Name: DefaultBucket, NumVbuckets: 1}}})
	b := c.Bucket(DefaultBucket)
	users, err := b.AddCollection("_default", "users")
	if err != nil {
		t.Fatal(err)
	}
	query, ok := b.snap.Load().manifest.lookup(systemScope, "_query")
	if !ok {
		t.Fatal("no _system._query")
	}
	cl := bootstrap(t, c.Node(0).Addr(), DefaultBucket, nil)
	key := func(cid uint32) []byte { return append(memdx.AppendULEB128(nil, cid), 'k') }
	observe := func(keys []memdx.ObserveKey, privs ...string) memdx.Request {
		r := memdx.NewObserve(keys)
		return asElsewhere(t, r, privs...)
	}
	one := func(vb uint16, cid uint32) []memdx.ObserveKey {
		return []memdx.ObserveKey{{Vbucket: vb, Key: key(cid)}}
	}
	const noRead = "Authorization failure: can't execute OBSERVE operation without the Read privilege"

	truncated := observe(one(0, 0))
	truncated.Value = truncated.Value[:len(truncated.Value)-1]
	expectAnswer(t, "a malformed list, granted nothing", cl.do(truncated), memdx.StatusInvalidArgs, "Incorrect keylen")
	// The list is read whole before any key is observed.
	badSecond := observe(append(one(99, 0), one(0, 0)...), "Read")
	badSecond.Value = badSecond.Value[:len(badSecond.Value)-1]
	expectAnswer(t, "a key of a vbucket not here, then a malformed one, granted Read", cl.do(badSecond),
		memdx.StatusInvalidArgs, "Incorrect keylen")

	expectAnswer(t, "the default collection, granted nothing", cl.do(observe(one(0, 0))), memdx.StatusNoAccess, noRead)
	expectAnswer(t, "the default collection, granted Read", cl.do(observe(one(0, 0), "Read")), memdx.StatusSuccess, "")
	expectAnswer(t, "the default collection of a vbucket not here, granted nothing", cl.do(observe(one(99, 0))),
		memdx.StatusNoAccess, noRead)
	expectAnswer(t, "the default collection of a vbucket not here, granted Read", cl.do(observe(one(99, 0), "Read")),
		memdx.StatusNotMyVbucket, "")

	expectAnswer(t, "an unknown collection, granted nothing", cl.do(observe(one(0, 0x99))), memdx.StatusUnknownCollection, "")
	expectAnswer(t, "a collection of a vbucket not here, granted nothing", cl.do(observe(one(99, users))),
		memdx.StatusNotMyVbucket, "")
	expectAnswer(t, "a collection, granted nothing", cl.do(observe(one(0, users))), memdx.StatusNoAccess, noRead)
	expectAnswer(t, "a collection, granted Read", cl.do(observe(one(0, users), "Read")), memdx.StatusSuccess, "")
	// Each key is checked: a second key the user may not read fails the
	// command.
	expectAnswer(t, "a readable key, then a system collection's, granted Read",
		cl.do(observe(append(one(0, users), one(0, query)...), "Read")), memdx.StatusNoAccess,
		"Authorization failure: can't execute OBSERVE operation without the SystemCollectionLookup privilege")
	expectAnswer(t, "a system collection, granted SystemCollectionLookup and Read",
		cl.do(observe(one(0, query), "SystemCollectionLookup", "Read")), memdx.StatusSuccess, "")
}
