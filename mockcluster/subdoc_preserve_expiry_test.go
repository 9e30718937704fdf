package mockcluster

import (
	"testing"
	"time"

	"github.com/kvwire/kvwire/memdx"
)

// A sub-document mutation with PreserveTtl keeps the expiry of the
// document it found even when it also carries an expiry:
// SubdocCommandContext::allocate_document takes the fetched item's expiry
// whenever preserveTtl is set, the request's only for a document it creates.
// (The mock let the request's expiry win.)
func TestSubdocPreserveTTLWinsOverExpiry(t *testing.T) {
	e := newSubdocEnv(t)
	up := []memdx.SubdocMutateOp{mu(memdx.OpSubdocDictUpsert, "a", "1", 0)}
	e.expect("with expiry", e.do(memdx.NewSubdocMultiMutation([]byte("doc"), memdx.SubdocDocMkdoc, 100, up)), memdx.StatusSuccess)
	r := memdx.NewSubdocMultiMutation([]byte("doc"), 0, 500, up)
	r.PreserveTTL = true
	e.expect("preserve with an expiry", e.do(r), memdx.StatusSuccess)
	if d, _ := e.b.Get("", "", "doc"); !d.Expiry.Equal(e.now.Add(100 * time.Second)) {
		t.Fatalf("expiry %v, want the preserved %v", d.Expiry, e.now.Add(100*time.Second))
	}
	// A document the mutation creates takes the request's expiry.
	r = memdx.NewSubdocMultiMutation([]byte("new"), memdx.SubdocDocMkdoc, 500, up)
	r.PreserveTTL = true
	e.expect("create with preserve and an expiry", e.do(r), memdx.StatusSuccess)
	if d, _ := e.b.Get("", "", "new"); !d.Expiry.Equal(e.now.Add(500 * time.Second)) {
		t.Fatalf("created with expiry %v, want %v", d.Expiry, e.now.Add(500*time.Second))
	}
}
