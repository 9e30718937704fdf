package mockcluster

import (
	"testing"

	"github.com/kvwire/kvwire/memdx"
)

// kv_engine looks a document command's collection up in the packet
// validator (McbpValidator::verify_header calls setCurrentCollectionInfo
// for is_collection_command opcodes, daemon/mcbp_validators.cc), before
// the opcode's own checks after verify_header and before the command
// runs. So a command in an unknown collection answers UNKNOWN_COLLECTION
// even when it would fail later: a durable TOUCH, which the engine
// refuses NOT_SUPPORTED when it runs (EventuallyPersistentEngine::
// get_and_touch), and a sub-document command whose specs the
// sub-document validator refuses after verify_header
// (subdocument_validators.cc). The mock answered those first.
func TestUnknownCollectionBeforeCommandChecks(t *testing.T) {
	c := newCluster(t, Options{Nodes: 1})
	cl := bootstrap(t, c.Node(0).Addr(), DefaultBucket, nil)
	b := c.Bucket(DefaultBucket)
	inUnknown := func(r memdx.Request) memdx.Request {
		r = keyReq(cl, b, r)
		r.CollectionID = 0x77
		return r
	}

	touch := inUnknown(memdx.NewTouch([]byte("k"), 10))
	touch.Durability = memdx.DurabilityMajority
	expectAnswer(t, "durable TOUCH", cl.do(touch), memdx.StatusUnknownCollection, "")

	// A SUBDOC_GET with a value (the validator's "Request must not
	// include value").
	sd := inUnknown(memdx.NewSubdocLookup(memdx.OpSubdocGet, []byte("k"), []byte("a"), 0, 0))
	sd.Value = append(sd.Value, 'x')
	expectAnswer(t, "SUBDOC_GET with a value", cl.do(sd), memdx.StatusUnknownCollection, "")

	// A multi lookup without specs.
	ml := inUnknown(memdx.NewSubdocMultiLookup([]byte("k"), 0, nil))
	expectAnswer(t, "multi lookup without specs", cl.do(ml), memdx.StatusUnknownCollection, "")

	// In the default collection the same requests get their own answers.
	touch.CollectionID = 0
	expectAnswer(t, "durable TOUCH, default collection", cl.do(touch), memdx.StatusNotSupported, "")
	sd.CollectionID = 0
	expectAnswer(t, "SUBDOC_GET with a value, default collection", cl.do(sd), memdx.StatusInvalidArgs, "")
}
