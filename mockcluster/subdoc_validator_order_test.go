package mockcluster

import (
	"testing"

	"github.com/kvwire/kvwire/memdx"
)

// kv_engine's sub-document validators (daemon/subdocument_validators.cc)
// judge a request in this order, and the first failure is the answer:
//
//   - subdoc_multi_validator: the doc flags' combinations (add with a CAS,
//     add with mkdoc, revive, replica read with access deleted), then each
//     spec in turn (is_valid_multipath_spec: its opcode, mutator or not,
//     its path flags, the doc flags the opcode takes, path length and so
//     on), a spec after a whole-document delete refused before it is
//     looked at, and the "at least one" / "at most 16 paths" counts last,
//     after the first 16 specs were judged;
//   - subdoc_validator (single path): path length, the value, the path
//     flags, then the doc flags, the xattr section and the empty path.
//
// The mock judged the doc flags before anything else and counted the specs
// before looking at them.
func TestSubdocValidatorOrder(t *testing.T) {
	e := newKVEnv(t, Options{}, append(stdFeatures, memdx.FeatureXattr))
	k := "order"
	e.seed(k, `{"a":1}`)

	// A lookup with a mutation doc flag and a mutation spec: the spec's
	// opcode is judged before the doc flags the opcode takes.
	p, _ := e.lookupIn(k, memdx.SubdocDocMkdoc, memdx.SubdocLookupOp{Op: memdx.OpSubdocDictUpsert, Path: []byte("a")})
	expectAnswer(t, "lookup with mkdoc and a mutation spec", p, memdx.StatusSubdocInvalidCombo,
		"Mutation opcodes only permitted for mutation commands")

	// A spec after a whole-document delete is refused before its own
	// flags are judged.
	p, _ = e.mutateIn(k, 0, 0, mu(memdx.OpDelete, "", "", 0), mu(memdx.OpSubdocDictUpsert, "b", "1", 0x40))
	expectAnswer(t, "spec with bad flags after a whole-document delete", p, memdx.StatusSubdocInvalidCombo,
		"Request contains an invalid combination of commands")

	// 17 specs, the first with bad flags: the flags are judged first.
	ops := make([]memdx.SubdocLookupOp, 17)
	for i := range ops {
		ops[i] = lk(memdx.OpSubdocGet, "a", 0)
	}
	ops[0].Flags = 0x40
	p, _ = e.lookupIn(k, 0, ops...)
	expectAnswer(t, "17 specs, the first with bad flags", p, memdx.StatusInvalidArgs, "Request flags invalid")
	ops[0].Flags = 0
	p, _ = e.lookupIn(k, 0, ops...)
	expectAnswer(t, "17 good specs", p, memdx.StatusSubdocInvalidCombo, "Request must contain at most 16 paths")

	// Single path: the value is judged before the doc flags.
	sd := memdx.NewSubdocLookup(memdx.OpSubdocGet, []byte(k), []byte("a"), 0, memdx.SubdocDocMkdoc)
	sd.Value = []byte("x")
	expectAnswer(t, "SUBDOC_GET with mkdoc and a value", e.do(sd), memdx.StatusInvalidArgs, "Request must not include value")
	// ... and the path flags before the doc flags.
	sd = memdx.NewSubdocLookup(memdx.OpSubdocGet, []byte(k), []byte("a"), memdx.SubdocPathMkdirP, memdx.SubdocDocMkdoc)
	expectAnswer(t, "SUBDOC_GET with mkdir_p and mkdoc", e.do(sd), memdx.StatusInvalidArgs, "Request flags invalid")
}
