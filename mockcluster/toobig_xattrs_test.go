package mockcluster

import (
	"strings"
	"testing"

	"github.com/kvwire/kvwire/memdx"
)

// A SET or APPEND that keeps a document's xattrs is too big when the body
// and the user xattrs together exceed 20 MiB: kv_engine allocates the new
// item with the xattrs and its itemAllocate leaves only the system xattrs
// out of the size check. (The mock checked the body alone.)
func TestTooBigCountsUserXattrs(t *testing.T) {
	e := newSubdocEnv(t)
	for _, k := range []string{"user", "sys"} {
		e.seed(k, `{}`)
	}
	e.expect("user xattr", e.do(memdx.NewSubdocMutation(memdx.OpSubdocDictUpsert, []byte("user"), []byte("u"), []byte(`"`+strings.Repeat("x", 100)+`"`), memdx.SubdocPathXattr, 0, 0)), memdx.StatusSuccess)
	e.expect("system xattr", e.do(memdx.NewSubdocMutation(memdx.OpSubdocDictUpsert, []byte("sys"), []byte("_s"), []byte(`"`+strings.Repeat("x", 100)+`"`), memdx.SubdocPathXattr, 0, 0)), memdx.StatusSuccess)
	big := strings.Repeat("v", maxValue-50)
	e.expect("set beside a user xattr", e.do(set("user", big)), memdx.StatusTooBig)
	e.expect("set beside a system xattr", e.do(set("sys", big)), memdx.StatusSuccess)
	e.expect("set small", e.do(set("user", big[:maxValue-200])), memdx.StatusSuccess)
	e.expect("append past the limit with the user xattr", e.do(memdx.NewConcat(memdx.OpAppend, []byte("user"), []byte(strings.Repeat("a", 120)))), memdx.StatusTooBig)
	e.expect("append within the limit", e.do(memdx.NewConcat(memdx.OpAppend, []byte("sys"), []byte(strings.Repeat("a", 40)))), memdx.StatusSuccess)
}
