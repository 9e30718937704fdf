package mockcluster

import (
	"testing"

	"github.com/kvwire/kvwire/memdx"
)

// A mutation with the Mkdoc doc flag and a CAS creates a missing document:
// kv_engine checks the request's CAS only against a document it found
// (SubdocExecutionContext::get_document_for_searching); a missing one takes
// the Set semantics' path in SubdocCommandContext::fetch_input_document,
// which starts from an empty root whatever the CAS, and is stored with Add
// semantics. An existing document still needs its CAS. (The mock answered
// KEY_ENOENT.)
func TestSubdocMkdocWithCasCreates(t *testing.T) {
	e := newSubdocEnv(t)
	p, _ := e.mutateIn("new", memdx.SubdocDocMkdoc, 0x1234, mu(memdx.OpSubdocDictUpsert, "a", `1`, 0))
	e.expect("mkdoc with a CAS, missing document", p, memdx.StatusSuccess)
	if b, st := e.body("new"); st != memdx.StatusSuccess || b != `{"a":1}` {
		t.Fatalf("created %s %q", st, b)
	}
	sp := e.do(memdx.NewSubdocMutation(memdx.OpSubdocDictUpsert, []byte("new1"), []byte("a"), []byte(`1`), 0, memdx.SubdocDocMkdoc, 0))
	e.expect("single-path mkdoc, missing document, no CAS", sp, memdx.StatusSuccess)
	r := memdx.NewSubdocMutation(memdx.OpSubdocDictUpsert, []byte("new2"), []byte("a"), []byte(`1`), 0, memdx.SubdocDocMkdoc, 0)
	r.Cas = 0x1234
	e.expect("single-path mkdoc with a CAS, missing document", e.do(r), memdx.StatusSuccess)

	// The CAS still guards a document that exists.
	p, _ = e.mutateIn("new", memdx.SubdocDocMkdoc, 0x1234, mu(memdx.OpSubdocDictUpsert, "a", `2`, 0))
	e.expect("mkdoc with a wrong CAS, existing document", p, memdx.StatusKeyExists)
	// Without Mkdoc a CAS on a missing document is KEY_ENOENT.
	p, _ = e.mutateIn("nope", 0, 0x1234, mu(memdx.OpSubdocDictUpsert, "a", `1`, 0))
	e.expect("replace semantics with a CAS, missing document", p, memdx.StatusKeyNotFound)
}
