package client

import (
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"math/bits"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvwire/kvwire/memdx"
	"github.com/kvwire/kvwire/mockcluster"
)

// subdocDoc is the document the spec tables run against (a fresh copy per
// case).
const subdocDoc = `{"a":1,"s":"str","arr":[1,2,3],"objs":[{"o":1}],"obj":{"x":"y"},` +
	`"big":99999999999999999999,"max":9223372036854775807,"dot.key":"d"}`

// subdocEnv is a mock with a client on it.
type subdocEnv struct {
	mc  *mockcluster.Cluster
	c   *Client
	col *Collection
	rec *recorder
}

func newSubdocEnv(t *testing.T) *subdocEnv {
	mc := newMock(t, mockcluster.Options{})
	rec := &recorder{}
	c := connect(t, mc, &Options{Observer: rec})
	return &subdocEnv{mc: mc, c: c, col: c.DefaultCollection(), rec: rec}
}

// seed writes value as a JSON document under key.
func (e *subdocEnv) seed(t *testing.T, key, value string) MutationResult {
	t.Helper()
	r, err := e.col.Upsert(context.Background(), key, []byte(value), &UpsertOptions{JSON: true})
	require.NoError(t, err)
	return r
}

// body returns the stored body of key.
func (e *subdocEnv) body(t *testing.T, key string) string {
	t.Helper()
	d, ok := e.mc.Bucket(mockcluster.DefaultBucket).Get("_default", "_default", key)
	require.True(t, ok, "document %q", key)
	return string(d.Value)
}

func (e *subdocEnv) xattrs(t *testing.T, key string) (string, bool) {
	t.Helper()
	x, deleted, ok := e.mc.Bucket(mockcluster.DefaultBucket).Xattrs("_default", "_default", key)
	require.True(t, ok, "document or tombstone %q", key)
	return string(x), deleted
}

func xa() *GetSpecOptions { return &GetSpecOptions{IsXattr: true} }

// Each lookup spec kind against the per-path statuses kv_engine's
// docs/SubDocument.md gives for it: path errors fail only their own result,
// with the sentinel of that status.
func TestLookupInSpecStatuses(t *testing.T) {
	e := newSubdocEnv(t)
	ctx := context.Background()
	deep := strings.Repeat(`{"d":`, 40) + "1" + strings.Repeat("}", 40)
	e.seed(t, "doc", subdocDoc)
	e.seed(t, "deep", deep)
	_, err := e.col.Upsert(ctx, "binary", []byte("not json"), nil)
	require.NoError(t, err)
	_, err = e.col.MutateIn(ctx, "doc", []MutateInSpec{UpsertSpec("meta", []byte(`{"v":[1,2]}`), &UpsertSpecOptions{IsXattr: true})}, nil)
	require.NoError(t, err)

	cases := []struct {
		name string
		key  string
		spec LookupInSpec
		want string // the value, when err is nil
		err  error
	}{
		{"get", "doc", GetSpec("a", nil), `1`, nil},
		{"get nested", "doc", GetSpec("obj.x", nil), `"y"`, nil},
		{"get index", "doc", GetSpec("arr[1]", nil), `2`, nil},
		{"get last index", "doc", GetSpec("arr[-1]", nil), `3`, nil},
		{"get escaped key", "doc", GetSpec("`dot.key`", nil), `"d"`, nil},
		{"get whole document", "doc", GetSpec("", nil), subdocDoc, nil},
		{"get missing: PATH_ENOENT", "doc", GetSpec("nope", nil), "", ErrPathNotFound},
		{"get index past the end: PATH_ENOENT", "doc", GetSpec("arr[5]", nil), "", ErrPathNotFound},
		{"get member of a number: PATH_MISMATCH", "doc", GetSpec("a.b", nil), "", ErrPathMismatch},
		{"get key of an array: PATH_MISMATCH", "doc", GetSpec("arr.x", nil), "", ErrPathMismatch},
		{"get unparsable path: PATH_EINVAL", "doc", GetSpec("arr[", nil), "", ErrPathInvalid},
		{"get 33 components: PATH_E2BIG", "doc", GetSpec(strings.Repeat("a.", 32)+"a", nil), "", ErrPathTooBig},
		{"get in a document nested too deep: PATH_E2DEEP", "deep", GetSpec("d", nil), "", ErrPathTooDeep},
		{"get in a binary document: DOC_NOTJSON", "binary", GetSpec("a", nil), "", ErrDocumentNotJSON},
		{"exists", "doc", ExistsSpec("obj.x", nil), ``, nil},
		{"exists missing: PATH_ENOENT", "doc", ExistsSpec("obj.z", nil), "", ErrPathNotFound},
		{"exists member of a string: PATH_MISMATCH", "doc", ExistsSpec("s.x", nil), "", ErrPathMismatch},
		{"count array", "doc", CountSpec("arr", nil), `3`, nil},
		{"count object", "doc", CountSpec("obj", nil), `1`, nil},
		{"count a number: PATH_MISMATCH", "doc", CountSpec("a", nil), "", ErrPathMismatch},
		{"count missing: PATH_ENOENT", "doc", CountSpec("nope", nil), "", ErrPathNotFound},
		{"xattr get", "doc", GetSpec("meta.v[0]", xa()), `1`, nil},
		{"xattr count", "doc", CountSpec("meta.v", &CountSpecOptions{IsXattr: true}), `2`, nil},
		{"xattr exists", "doc", ExistsSpec("meta", &ExistsSpecOptions{IsXattr: true}), ``, nil},
		{"xattr missing: PATH_ENOENT", "doc", GetSpec("other", xa()), "", ErrPathNotFound},
		{"virtual xattr", "doc", GetSpec("$document.deleted", xa()), `false`, nil},
		{"unknown virtual xattr: XATTR_UNKNOWN_VATTR", "doc", GetSpec("$nope", xa()), "", ErrXattrUnknownVirtualAttribute},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r, err := e.col.LookupIn(ctx, tc.key, []LookupInSpec{tc.spec}, nil)
			require.NoError(t, err, "a path's failure is not the operation's")
			require.Equal(t, 1, r.Len())
			v, err := r.ValueAt(0)
			if tc.err == nil {
				require.NoError(t, err)
				assert.Equal(t, tc.want, string(v))
				ok, err := r.Exists(0)
				require.NoError(t, err)
				assert.True(t, ok)
				return
			}
			require.ErrorIs(t, err, tc.err)
			var se *SubdocError
			require.ErrorAs(t, err, &se)
			assert.Equal(t, 0, se.Index)
			assert.Equal(t, tc.spec.s.Path(), se.Path)
			assert.NotZero(t, se.Status, "the path's status")
			ok, existsErr := r.Exists(0)
			assert.False(t, ok)
			if errors.Is(tc.err, ErrPathNotFound) {
				assert.NoError(t, existsErr, "a missing path is not an error")
			} else {
				assert.ErrorIs(t, existsErr, tc.err, "a failure that says nothing of the path's existence")
			}
			assert.Error(t, r.ContentAt(0, new(any)))
		})
	}
}

// One LookupIn reads every spec from the same document version; results
// keep the caller's order, failures stay in their own slot.
func TestLookupInResultsInSpecOrder(t *testing.T) {
	e := newSubdocEnv(t)
	ctx := context.Background()
	up := e.seed(t, "doc", subdocDoc)
	r, err := e.col.LookupIn(ctx, "doc", []LookupInSpec{
		GetSpec("$document.CAS", xa()),
		GetSpec("obj", nil),
		ExistsSpec("nope", nil),
		CountSpec("arr", nil),
	}, nil)
	require.NoError(t, err)
	assert.Equal(t, up.Cas, r.Cas)
	assert.False(t, r.IsDeleted)
	var cas string
	require.NoError(t, r.ContentAt(0, &cas))
	assert.Equal(t, fmt.Sprintf("0x%016x", up.Cas), cas)
	var obj map[string]string
	require.NoError(t, r.ContentAt(1, &obj))
	assert.Equal(t, map[string]string{"x": "y"}, obj)
	ok, err := r.Exists(2)
	require.NoError(t, err)
	assert.False(t, ok)
	var n int
	require.NoError(t, r.ContentAt(3, &n))
	assert.Equal(t, 3, n)
	_, err = r.ValueAt(4)
	assert.ErrorIs(t, err, ErrInvalidArgument)
}

// Each mutation spec kind against the per-path statuses of
// docs/SubDocument.md: a failing spec fails the whole MutateIn with its
// sentinel and index, and leaves the document as it was.
func TestMutateInSpecStatuses(t *testing.T) {
	e := newSubdocEnv(t)
	ctx := context.Background()
	// 31 levels under obj (2): 33, one more than the server allows.
	deepValue := []byte(strings.Repeat("[", 31) + strings.Repeat("]", 31))
	cases := []struct {
		name   string
		spec   MutateInSpec
		path   string // what a GetSpec of path reads afterwards
		want   string
		result string // the spec's own result (counters)
		err    error
	}{
		{"insert", InsertSpec("n", []byte(`"new"`), nil), "n", `"new"`, "", nil},
		{"insert existing: PATH_EEXISTS", InsertSpec("a", []byte(`2`), nil), "", "", "", ErrPathExists},
		{"insert without parent: PATH_ENOENT", InsertSpec("x.y", []byte(`2`), nil), "", "", "", ErrPathNotFound},
		{"insert creating parents", InsertSpec("x.y", []byte(`2`), &InsertSpecOptions{CreatePath: true}), "x", `{"y":2}`, "", nil},
		{"insert at an array index: PATH_EINVAL", InsertSpec("arr[0]", []byte(`0`), nil), "", "", "", ErrPathInvalid},
		{"insert invalid JSON: VALUE_CANTINSERT", InsertSpec("n", []byte(`{`), nil), "", "", "", ErrValueInvalid},
		{"insert too deep a value: VALUE_ETOODEEP", InsertSpec("obj.n", deepValue, nil), "", "", "", ErrValueTooDeep},
		{"upsert existing", UpsertSpec("a", []byte(`5`), nil), "a", `5`, "", nil},
		{"upsert new", UpsertSpec("n", []byte(`5`), nil), "n", `5`, "", nil},
		{"upsert member of a string: PATH_MISMATCH", UpsertSpec("s.x", []byte(`5`), nil), "", "", "", ErrPathMismatch},
		{"replace", ReplaceSpec("obj.x", []byte(`"z"`), nil), "obj", `{"x":"z"}`, "", nil},
		{"replace missing: PATH_ENOENT", ReplaceSpec("nope", []byte(`1`), nil), "", "", "", ErrPathNotFound},
		{"replace whole document", ReplaceSpec("", []byte(`{"new":true}`), nil), "", `{"new":true}`, "", nil},
		{"remove", RemoveSpec("obj.x", nil), "obj", `{}`, "", nil},
		{"remove array element", RemoveSpec("arr[0]", nil), "arr", `[2,3]`, "", nil},
		{"remove missing: PATH_ENOENT", RemoveSpec("nope", nil), "", "", "", ErrPathNotFound},
		{"array append", ArrayAppendSpec("arr", []byte(`4,5`), nil), "arr", `[1,2,3,4,5]`, "", nil},
		{"array append to an object: PATH_MISMATCH", ArrayAppendSpec("obj", []byte(`4`), nil), "", "", "", ErrPathMismatch},
		{"array append to a missing array: PATH_ENOENT", ArrayAppendSpec("list", []byte(`4`), nil), "", "", "", ErrPathNotFound},
		{"array append creating it", ArrayAppendSpec("list", []byte(`4`), &ArrayAppendSpecOptions{CreatePath: true}), "list", `[4]`, "", nil},
		{"array prepend", ArrayPrependSpec("arr", []byte(`0`), nil), "arr", `[0,1,2,3]`, "", nil},
		{"array prepend to a string: PATH_MISMATCH", ArrayPrependSpec("s", []byte(`0`), nil), "", "", "", ErrPathMismatch},
		{"array insert", ArrayInsertSpec("arr[1]", []byte(`9`), nil), "arr", `[1,9,2,3]`, "", nil},
		{"array insert at the end", ArrayInsertSpec("arr[3]", []byte(`9`), nil), "arr", `[1,2,3,9]`, "", nil},
		{"array insert past the end: PATH_ENOENT", ArrayInsertSpec("arr[10]", []byte(`9`), nil), "", "", "", ErrPathNotFound},
		{"array insert at -1: PATH_EINVAL", ArrayInsertSpec("arr[-1]", []byte(`9`), nil), "", "", "", ErrPathInvalid},
		{"array insert without an index: PATH_EINVAL", ArrayInsertSpec("arr", []byte(`9`), nil), "", "", "", ErrPathInvalid},
		{"array add unique", ArrayAddUniqueSpec("arr", []byte(`4`), nil), "arr", `[1,2,3,4]`, "", nil},
		{"array add unique present: PATH_EEXISTS", ArrayAddUniqueSpec("arr", []byte(`1`), nil), "", "", "", ErrPathExists},
		{"array add unique non-primitive: VALUE_CANTINSERT", ArrayAddUniqueSpec("arr", []byte(`{"o":1}`), nil), "", "", "", ErrValueInvalid},
		{"array add unique to objects: PATH_MISMATCH", ArrayAddUniqueSpec("objs", []byte(`1`), nil), "", "", "", ErrPathMismatch},
		{"increment", IncrementSpec("a", 4, nil), "a", `5`, `5`, nil},
		{"increment missing starts at 0", IncrementSpec("c", 4, nil), "c", `4`, `4`, nil},
		{"decrement", DecrementSpec("a", 3, nil), "a", `-2`, `-2`, nil},
		{"increment a string: PATH_MISMATCH", IncrementSpec("s", 1, nil), "", "", "", ErrPathMismatch},
		{"increment by 0: DELTA_EINVAL", IncrementSpec("a", 0, nil), "", "", "", ErrDeltaInvalid},
		{"increment beyond int64: NUM_ERANGE", IncrementSpec("big", 1, nil), "", "", "", ErrNumberTooBig},
		{"increment past int64's maximum: VALUE_CANTINSERT", IncrementSpec("max", 1, nil), "", "", "", ErrValueInvalid},
		{"remove whole document", RemoveSpec("", nil), "", "", "", nil},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			key := fmt.Sprintf("doc%d", i)
			before := e.seed(t, key, subdocDoc)
			r, err := e.col.MutateIn(ctx, key, []MutateInSpec{UpsertSpec("first", []byte(`true`), &UpsertSpecOptions{IsXattr: true}), tc.spec}, nil)
			if tc.err != nil {
				require.ErrorIs(t, err, tc.err)
				var se *SubdocError
				require.ErrorAs(t, err, &se)
				assert.Equal(t, 1, se.Index, "the failing spec's index in the caller's list")
				assert.Equal(t, tc.spec.s.Path(), se.Path)
				var kv *KeyValueError
				require.ErrorAs(t, err, &kv)
				assert.Equal(t, tc.err, kv.Err)
				assert.False(t, kv.Ambiguous, "a path failure is a definite refusal")
				assert.Equal(t, subdocDoc, e.body(t, key), "a failed MutateIn changes nothing")
				x, _ := e.xattrs(t, key)
				assert.NotContains(t, x, "first", "a failed MutateIn changes nothing")
				return
			}
			require.NoError(t, err)
			assert.NotEqual(t, before.Cas, r.Cas)
			assert.NotZero(t, r.Token.Seqno)
			if tc.spec.s.Op() == memdx.OpDelete {
				_, err := e.col.Get(ctx, key, nil)
				assert.ErrorIs(t, err, ErrDocumentNotFound)
				return
			}
			v, err := r.ValueAt(1)
			require.NoError(t, err)
			assert.Equal(t, tc.result, string(v))
			if tc.result != "" {
				var n int64
				require.NoError(t, r.ContentAt(1, &n))
			} else {
				assert.Error(t, r.ContentAt(1, new(any)), "a spec without a result")
			}
			l, err := e.col.LookupIn(ctx, key, []LookupInSpec{GetSpec(tc.path, nil)}, nil)
			require.NoError(t, err)
			got, err := l.ValueAt(0)
			require.NoError(t, err)
			if tc.path == "" {
				assert.Equal(t, tc.want, string(got))
			} else {
				assert.JSONEq(t, tc.want, string(got))
			}
			assert.Equal(t, r.Cas, l.Cas)
		})
	}
}

// Whole-document outcomes are the operation's error, with the sentinels of
// the ordinary operations.
func TestSubdocDocumentErrors(t *testing.T) {
	e := newSubdocEnv(t)
	ctx := context.Background()
	up := e.seed(t, "doc", `{"a":1}`)
	set := []MutateInSpec{UpsertSpec("a", []byte(`2`), nil)}

	_, err := e.col.LookupIn(ctx, "missing", []LookupInSpec{GetSpec("a", nil)}, nil)
	assert.ErrorIs(t, err, ErrDocumentNotFound)
	_, err = e.col.MutateIn(ctx, "missing", set, nil)
	assert.ErrorIs(t, err, ErrDocumentNotFound, "replace semantics by default")
	_, err = e.col.MutateIn(ctx, "doc", set, &MutateInOptions{StoreSemantic: StoreSemanticsInsert})
	assert.ErrorIs(t, err, ErrDocumentExists)
	_, err = e.col.MutateIn(ctx, "doc", set, &MutateInOptions{Cas: up.Cas + 1})
	assert.ErrorIs(t, err, ErrCasMismatch)
	r, err := e.col.MutateIn(ctx, "doc", set, &MutateInOptions{Cas: up.Cas})
	require.NoError(t, err)
	assert.NotEqual(t, up.Cas, r.Cas)

	r, err = e.col.MutateIn(ctx, "new", set, &MutateInOptions{StoreSemantic: StoreSemanticsUpsert})
	require.NoError(t, err)
	assert.Equal(t, `{"a":2}`, e.body(t, "new"))
	_, err = e.col.MutateIn(ctx, "new2", set, &MutateInOptions{StoreSemantic: StoreSemanticsInsert})
	require.NoError(t, err)
	_, err = e.col.MutateIn(ctx, "new2", set, &MutateInOptions{StoreSemantic: StoreSemanticsInsert})
	assert.ErrorIs(t, err, ErrDocumentExists)
	_ = r
}

// Lists the server would refuse, and arguments no request can carry, are
// refused before anything is sent, with an error naming the spec.
func TestSubdocRefusedBeforeSending(t *testing.T) {
	e := newSubdocEnv(t)
	ctx := context.Background()
	e.seed(t, "doc", `{"a":1}`)
	sent := len(e.rec.attempts())

	many := make([]LookupInSpec, MaxSubdocSpecs+1)
	for i := range many {
		many[i] = GetSpec("a", nil)
	}
	manyM := make([]MutateInSpec, MaxSubdocSpecs+1)
	for i := range manyM {
		manyM[i] = UpsertSpec("a", []byte("1"), nil)
	}
	up := UpsertSpec("a", []byte(`1`), nil)
	xup := UpsertSpec("x", []byte(`1`), &UpsertSpecOptions{IsXattr: true})
	lookups := []struct {
		name  string
		specs []LookupInSpec
		opts  *LookupInOptions
		is    error
		text  string
	}{
		{"no specs", nil, nil, ErrInvalidArgument, "no specs"},
		{"17 specs", many, nil, ErrInvalidArgument, "17 specs; at most 16"},
		{"xattr after body", []LookupInSpec{GetSpec("a", nil), GetSpec("x", xa())}, nil, ErrXattrInvalidOrder, `spec 1 (xattr "x") follows body spec 0`},
		{"zero spec", []LookupInSpec{{}}, nil, ErrInvalidArgument, "spec 0 was not made by"},
	}
	for _, tc := range lookups {
		_, err := e.col.LookupIn(ctx, "doc", tc.specs, tc.opts)
		assert.ErrorIs(t, err, tc.is, tc.name)
		assert.ErrorIs(t, err, ErrInvalidArgument, tc.name)
		assert.ErrorContains(t, err, tc.text, tc.name)
		var kv *KeyValueError
		assert.ErrorAs(t, err, &kv, tc.name)
	}
	mutations := []struct {
		name  string
		specs []MutateInSpec
		opts  *MutateInOptions
		is    error
		text  string
	}{
		{"no specs", nil, nil, ErrInvalidArgument, "no specs"},
		{"17 specs", manyM, nil, ErrInvalidArgument, "17 specs; at most 16"},
		{"xattr after body", []MutateInSpec{up, xup}, nil, ErrXattrInvalidOrder, `spec 1 (xattr "x") follows body spec 0`},
		{"zero spec", []MutateInSpec{{}}, nil, ErrInvalidArgument, "spec 0 was not made by"},
		{"no value", []MutateInSpec{UpsertSpec("a", nil, nil)}, nil, ErrInvalidArgument, `spec 0 (path "a"): no value`},
		{"whole body of no value", []MutateInSpec{ReplaceSpec("", []byte{}, nil)}, nil, ErrInvalidArgument, `spec 0 (path ""): no value`},
		{"upsert of no path", []MutateInSpec{UpsertSpec("", []byte("1"), nil)}, nil, ErrInvalidArgument, "UpsertSpec needs a path"},
		{"insert of no path", []MutateInSpec{InsertSpec("", []byte("1"), nil)}, nil, ErrInvalidArgument, "InsertSpec needs a path"},
		{"macros on a body path", []MutateInSpec{UpsertSpec("a", MutationMacroCAS.Bytes(), &UpsertSpecOptions{ExpandMacros: true})}, nil, ErrInvalidArgument, "ExpandMacros needs IsXattr"},
		{"decrement of MinInt64", []MutateInSpec{DecrementSpec("a", -1<<63, nil)}, nil, ErrInvalidArgument, "cannot be negated"},
		{"insert with a CAS", []MutateInSpec{up}, &MutateInOptions{StoreSemantic: StoreSemanticsInsert, Cas: 1}, ErrInvalidArgument, "takes no CAS"},
		{"insert preserving expiry", []MutateInSpec{up}, &MutateInOptions{StoreSemantic: StoreSemanticsInsert, PreserveExpiry: true}, ErrInvalidArgument, "no expiry to preserve"},
		{"expiry and preserve expiry", []MutateInSpec{up}, &MutateInOptions{Expiry: 10e9, PreserveExpiry: true}, ErrInvalidArgument, "PreserveExpiry with an Expiry"},
		{"create as deleted replacing", []MutateInSpec{xup}, &MutateInOptions{CreateAsDeleted: true}, ErrInvalidArgument, "CreateAsDeleted needs"},
		{"create as deleted and revive", []MutateInSpec{xup}, &MutateInOptions{StoreSemantic: StoreSemanticsUpsert, CreateAsDeleted: true, ReviveDocument: true}, ErrInvalidArgument, "CreateAsDeleted with ReviveDocument"},
		{"unknown store semantic", []MutateInSpec{up}, &MutateInOptions{StoreSemantic: 9}, ErrInvalidArgument, "unknown StoreSemantic"},
	}
	for _, tc := range mutations {
		_, err := e.col.MutateIn(ctx, "doc", tc.specs, tc.opts)
		assert.ErrorIs(t, err, tc.is, tc.name)
		assert.ErrorIs(t, err, ErrInvalidArgument, tc.name)
		assert.ErrorContains(t, err, tc.text, tc.name)
		var kv *KeyValueError
		assert.ErrorAs(t, err, &kv, tc.name)
	}
	assert.Equal(t, sent, len(e.rec.attempts()), "nothing was sent")
}

// A MutateIn of extended attributes alone creates a document whose body is
// the empty object and whose xattrs hold the values.
func TestMutateInCreatesDocumentWithXattrsOnly(t *testing.T) {
	e := newSubdocEnv(t)
	ctx := context.Background()
	r, err := e.col.MutateIn(ctx, "x", []MutateInSpec{
		UpsertSpec("meta.owner", []byte(`"me"`), &UpsertSpecOptions{IsXattr: true, CreatePath: true}),
		UpsertSpec("_sys", []byte(`{"v":1}`), &UpsertSpecOptions{IsXattr: true}),
	}, &MutateInOptions{StoreSemantic: StoreSemanticsInsert})
	require.NoError(t, err)
	assert.False(t, r.IsDeleted)
	assert.Equal(t, `{}`, e.body(t, "x"))
	x, deleted := e.xattrs(t, "x")
	assert.False(t, deleted)
	assert.JSONEq(t, `{"meta":{"owner":"me"},"_sys":{"v":1}}`, x)
	l, err := e.col.LookupIn(ctx, "x", []LookupInSpec{GetSpec("meta.owner", xa()), GetSpec("", nil)}, nil)
	require.NoError(t, err)
	v, err := l.ValueAt(0)
	require.NoError(t, err)
	assert.Equal(t, `"me"`, string(v))
	v, err = l.ValueAt(1)
	require.NoError(t, err)
	assert.Equal(t, `{}`, string(v))
	assert.Equal(t, r.Cas, l.Cas)
}

// A document deleted while it has system xattrs stays as a tombstone:
// AccessDeleted reads and changes it (it stays deleted), CreateAsDeleted
// makes one, and ReviveDocument brings it back with a new body.
func TestSubdocTombstoneRevivedWithAccessDeleted(t *testing.T) {
	e := newSubdocEnv(t)
	ctx := context.Background()
	e.seed(t, "t", `{"a":1}`)
	_, err := e.col.MutateIn(ctx, "t", []MutateInSpec{
		UpsertSpec("_txn", []byte(`{"id":1}`), &UpsertSpecOptions{IsXattr: true}),
		UpsertSpec("user", []byte(`1`), &UpsertSpecOptions{IsXattr: true}),
	}, nil)
	require.NoError(t, err)
	_, err = e.col.MutateIn(ctx, "t", []MutateInSpec{RemoveSpec("", nil)}, nil)
	require.NoError(t, err)
	_, err = e.col.Get(ctx, "t", nil)
	require.ErrorIs(t, err, ErrDocumentNotFound)
	_, err = e.col.LookupIn(ctx, "t", []LookupInSpec{GetSpec("_txn", xa())}, nil)
	require.ErrorIs(t, err, ErrDocumentNotFound, "a tombstone is not found without AccessDeleted")

	l, err := e.col.LookupIn(ctx, "t", []LookupInSpec{GetSpec("_txn.id", xa()), GetSpec("user", xa())},
		&LookupInOptions{AccessDeleted: true})
	require.NoError(t, err)
	assert.True(t, l.IsDeleted)
	v, err := l.ValueAt(0)
	require.NoError(t, err)
	assert.Equal(t, `1`, string(v))
	_, err = l.ValueAt(1)
	assert.ErrorIs(t, err, ErrPathNotFound, "user xattrs go with the body")

	m, err := e.col.MutateIn(ctx, "t", []MutateInSpec{UpsertSpec("_txn.id", []byte(`2`), &UpsertSpecOptions{IsXattr: true})},
		&MutateInOptions{AccessDeleted: true, Cas: l.Cas})
	require.NoError(t, err)
	assert.True(t, m.IsDeleted, "AccessDeleted alone keeps the tombstone")
	_, err = e.col.Get(ctx, "t", nil)
	require.ErrorIs(t, err, ErrDocumentNotFound)

	m, err = e.col.MutateIn(ctx, "t", []MutateInSpec{
		UpsertSpec("_txn.id", []byte(`3`), &UpsertSpecOptions{IsXattr: true}),
		ReplaceSpec("", []byte(`{"back":true}`), nil),
	}, &MutateInOptions{ReviveDocument: true, Cas: m.Cas})
	require.NoError(t, err)
	assert.False(t, m.IsDeleted)
	g, err := e.col.Get(ctx, "t", nil)
	require.NoError(t, err)
	assert.Equal(t, `{"back":true}`, string(g.Value))
	assert.Equal(t, m.Cas, g.Cas)
	x, _ := e.xattrs(t, "t")
	assert.JSONEq(t, `{"_txn":{"id":3}}`, x)

	_, err = e.col.MutateIn(ctx, "t", []MutateInSpec{UpsertSpec("_txn.id", []byte(`4`), &UpsertSpecOptions{IsXattr: true})},
		&MutateInOptions{ReviveDocument: true})
	assert.ErrorIs(t, err, ErrDocumentAlreadyAlive)

	c, err := e.col.MutateIn(ctx, "staged", []MutateInSpec{UpsertSpec("_txn", []byte(`{"staged":true}`), &UpsertSpecOptions{IsXattr: true})},
		&MutateInOptions{StoreSemantic: StoreSemanticsInsert, CreateAsDeleted: true})
	require.NoError(t, err)
	assert.True(t, c.IsDeleted)
	_, err = e.col.Get(ctx, "staged", nil)
	require.ErrorIs(t, err, ErrDocumentNotFound)
	_, deleted := e.xattrs(t, "staged")
	assert.True(t, deleted)
}

// ExpandMacros writes the mutation's own CAS, seqno and body CRC32-C into
// xattrs, as kv_engine formats them.
func TestMutateInExpandsMacros(t *testing.T) {
	e := newSubdocEnv(t)
	ctx := context.Background()
	m := func(path string, macro MutationMacro) MutateInSpec {
		return UpsertSpec(path, macro.Bytes(), &UpsertSpecOptions{IsXattr: true, ExpandMacros: true, CreatePath: true})
	}
	r, err := e.col.MutateIn(ctx, "m", []MutateInSpec{
		m("mac.cas", MutationMacroCAS),
		m("mac.seq", MutationMacroSeqNo),
		m("mac.crc", MutationMacroValueCRC32c),
		UpsertSpec("v", []byte(`1`), nil),
	}, &MutateInOptions{StoreSemantic: StoreSemanticsUpsert})
	require.NoError(t, err)
	body := e.body(t, "m")
	l, err := e.col.LookupIn(ctx, "m", []LookupInSpec{
		GetSpec("mac.cas", xa()), GetSpec("mac.seq", xa()), GetSpec("mac.crc", xa()), GetSpec("$document.CAS", xa()),
	}, nil)
	require.NoError(t, err)
	want := []string{
		// ${Mutation.CAS} is the CAS's bytes in little-endian order.
		fmt.Sprintf("0x%016x", bits.ReverseBytes64(r.Cas)),
		fmt.Sprintf("0x%016x", r.Token.Seqno),
		fmt.Sprintf("0x%08x", crc32.Checksum([]byte(body), crc32.MakeTable(crc32.Castagnoli))),
		fmt.Sprintf("0x%016x", r.Cas),
	}
	for i, w := range want {
		var got string
		require.NoError(t, l.ContentAt(i, &got), "spec %d", i)
		assert.Equal(t, w, got, "spec %d", i)
	}

	_, err = e.col.MutateIn(ctx, "m", []MutateInSpec{
		UpsertSpec("bad", []byte(`"${Mutation.nope}"`), &UpsertSpecOptions{IsXattr: true, ExpandMacros: true}),
	}, nil)
	assert.ErrorIs(t, err, ErrXattrUnknownMacro)
	_, err = e.col.MutateIn(ctx, "m", []MutateInSpec{
		UpsertSpec("$document.x", []byte(`1`), &UpsertSpecOptions{IsXattr: true}),
	}, nil)
	assert.ErrorIs(t, err, ErrXattrCannotModifyVirtualAttribute)
}

// MutateIn's expiry, and PreserveExpiry, reach the document.
func TestMutateInExpiry(t *testing.T) {
	e := newSubdocEnv(t)
	ctx := context.Background()
	e.seed(t, "e", `{}`)
	set := []MutateInSpec{UpsertSpec("a", []byte(`1`), nil)}
	_, err := e.col.MutateIn(ctx, "e", set, &MutateInOptions{Expiry: 3600e9})
	require.NoError(t, err)
	d, _ := e.mc.Bucket(mockcluster.DefaultBucket).Get("_default", "_default", "e")
	require.False(t, d.Expiry.IsZero())
	_, err = e.col.MutateIn(ctx, "e", set, &MutateInOptions{PreserveExpiry: true})
	require.NoError(t, err)
	d2, _ := e.mc.Bucket(mockcluster.DefaultBucket).Get("_default", "_default", "e")
	assert.Equal(t, d.Expiry, d2.Expiry, "PreserveExpiry keeps it")
	_, err = e.col.MutateIn(ctx, "e", set, nil)
	require.NoError(t, err)
	d3, _ := e.mc.Bucket(mockcluster.DefaultBucket).Get("_default", "_default", "e")
	assert.True(t, d3.Expiry.IsZero(), "a mutation without either clears it")
}

// errors.Is sees both the path sentinel and the SubdocError of a lookup
// path, and a MutateIn's error keeps the whole command's status.
func TestSubdocErrorShape(t *testing.T) {
	e := newSubdocEnv(t)
	ctx := context.Background()
	e.seed(t, "doc", `{"a":1}`)
	_, err := e.col.MutateIn(ctx, "doc", []MutateInSpec{
		UpsertSpec("x", []byte(`1`), &UpsertSpecOptions{IsXattr: true}),
		InsertSpec("a", []byte(`2`), nil),
	}, nil)
	var kv *KeyValueError
	require.ErrorAs(t, err, &kv)
	assert.Equal(t, "MutateIn", kv.Op)
	assert.Contains(t, err.Error(), `sub-document spec 1 (path "a"): SUBDOC_PATH_EEXISTS`)
	assert.True(t, errors.Is(err, ErrPathExists))
}

// A lookup whose connection dies after the server ran it is sent again (it
// is idempotent); a MutateIn in the same spot is not, and its error says
// it may have been applied, which it was.
func TestSubdocRetriesAsReadsAndWrites(t *testing.T) {
	e := newSubdocEnv(t)
	ctx := context.Background()
	e.seed(t, "r", `{"n":1}`)
	lf := e.mc.AddFault(mockcluster.Fault{
		Match:  mockcluster.Match{Key: "r", OpCodes: []memdx.OpCode{memdx.OpSubdocMultiLookup}},
		Action: mockcluster.Action{Close: mockcluster.CloseAfterApply},
		Times:  1,
	})
	l, err := e.col.LookupIn(ctx, "r", []LookupInSpec{GetSpec("n", nil)}, nil)
	require.NoError(t, err)
	assert.Equal(t, 1, lf.Hits())
	assert.True(t, l.RetryReasons.Has(retrySocketClosedWhileInFlight), "sent again after the connection closed in flight: %v", l.RetryReasons)
	v, _ := l.ValueAt(0)
	assert.Equal(t, "1", string(v))

	mf := e.mc.AddFault(mockcluster.Fault{
		Match:  mockcluster.Match{Key: "r", OpCodes: []memdx.OpCode{memdx.OpSubdocMultiMutation}},
		Action: mockcluster.Action{Close: mockcluster.CloseAfterApply},
		Times:  1,
	})
	_, err = e.col.MutateIn(ctx, "r", []MutateInSpec{IncrementSpec("n", 1, nil)}, nil)
	require.ErrorIs(t, err, ErrAmbiguous)
	assert.Equal(t, 1, mf.Hits())
	assert.JSONEq(t, `{"n":2}`, e.body(t, "r"), "applied once, not resent")

	tf := e.mc.AddFault(mockcluster.Fault{
		Match:  mockcluster.Match{Key: "r", OpCodes: []memdx.OpCode{memdx.OpSubdocMultiMutation}},
		Action: mockcluster.Action{Status: memdx.StatusTmpFail},
		Times:  1,
	})
	m, err := e.col.MutateIn(ctx, "r", []MutateInSpec{IncrementSpec("n", 1, nil)}, nil)
	require.NoError(t, err, "a refusal that applied nothing is retried")
	assert.Equal(t, 1, tf.Hits())
	assert.True(t, m.RetryReasons.Has(retryKVTemporaryFailure), "%v", m.RetryReasons)
	assert.JSONEq(t, `{"n":3}`, e.body(t, "r"))
}

// A synchronous MutateIn reaches the server with its durability.
func TestMutateInDurability(t *testing.T) {
	e := newSubdocEnv(t)
	ctx := context.Background()
	e.seed(t, "d", `{}`)
	_, err := e.col.MutateIn(ctx, "d", []MutateInSpec{UpsertSpec("a", []byte(`1`), nil)},
		&MutateInOptions{Durability: DurabilityMajority})
	require.NoError(t, err)
	f := e.mc.AddFault(mockcluster.Fault{
		Match:  mockcluster.Match{Key: "d", OpCodes: []memdx.OpCode{memdx.OpSubdocMultiMutation}},
		Action: mockcluster.Action{Status: memdx.StatusSyncWriteAmbiguous},
		Times:  1,
	})
	_, err = e.col.MutateIn(ctx, "d", []MutateInSpec{UpsertSpec("a", []byte(`2`), nil)},
		&MutateInOptions{Durability: DurabilityMajority})
	assert.ErrorIs(t, err, ErrDurabilityAmbiguous)
	assert.ErrorIs(t, err, ErrAmbiguous)
	assert.Equal(t, 1, f.Hits())
}

// MutateInResult.ValueAt knows the spec count whether or not a spec
// returned a value.
func TestMutateInResultIndexes(t *testing.T) {
	e := newSubdocEnv(t)
	ctx := context.Background()
	e.seed(t, "i", `{}`)
	for _, specs := range [][]MutateInSpec{
		{UpsertSpec("a", []byte(`1`), nil)},
		{UpsertSpec("a", []byte(`1`), nil), IncrementSpec("n", 1, nil)},
	} {
		r, err := e.col.MutateIn(ctx, "i", specs, nil)
		require.NoError(t, err)
		_, err = r.ValueAt(0)
		assert.NoError(t, err)
		_, err = r.ValueAt(len(specs))
		assert.ErrorIs(t, err, ErrInvalidArgument, "%d specs", len(specs))
		_, err = r.ValueAt(-1)
		assert.ErrorIs(t, err, ErrInvalidArgument)
	}
}

// A spec's value that does not decode into the destination fails with
// ErrDecodingFailure, naming the spec, as GetResult.ContentAs does; a
// *[]byte gets the JSON text itself.
func TestSubdocContentAtDecodingFailure(t *testing.T) {
	e := newSubdocEnv(t)
	ctx := context.Background()
	e.seed(t, "d", subdocDoc)
	r, err := e.col.LookupIn(ctx, "d", []LookupInSpec{GetSpec("s", nil), GetSpec("obj", nil)}, nil)
	require.NoError(t, err)
	var n int
	err = r.ContentAt(0, &n)
	require.ErrorIs(t, err, ErrDecodingFailure)
	assert.Contains(t, err.Error(), `"s"`, "names the path")
	var raw []byte
	require.NoError(t, r.ContentAt(1, &raw))
	assert.JSONEq(t, `{"x":"y"}`, string(raw))

	m, err := e.col.MutateIn(ctx, "d", []MutateInSpec{IncrementSpec("a", 2, nil)}, nil)
	require.NoError(t, err)
	var s string
	require.ErrorIs(t, m.ContentAt(0, &s), ErrDecodingFailure)
	require.NoError(t, m.ContentAt(0, &n))
	assert.Equal(t, 3, n)
}

// Exists is false without an error only for a path the document does not
// have; any other failure of the spec is its error, and an index outside
// the list is ErrInvalidArgument. SubdocError.Status is the path's status.
func TestLookupInExistsReportsFailuresOtherThanAMissingPath(t *testing.T) {
	e := newSubdocEnv(t)
	ctx := context.Background()
	e.seed(t, "doc", subdocDoc)
	r, err := e.col.LookupIn(ctx, "doc", []LookupInSpec{
		ExistsSpec("a", nil), ExistsSpec("nope", nil), ExistsSpec("s.x", nil),
	}, nil)
	require.NoError(t, err)
	ok, err := r.Exists(0)
	require.NoError(t, err)
	assert.True(t, ok)
	ok, err = r.Exists(1)
	require.NoError(t, err)
	assert.False(t, ok)
	ok, err = r.Exists(2)
	assert.False(t, ok)
	require.ErrorIs(t, err, ErrPathMismatch)
	var se *SubdocError
	require.ErrorAs(t, err, &se)
	assert.Equal(t, StatusSubdocPathMismatch, se.Status)
	_, err = r.Exists(3)
	assert.ErrorIs(t, err, ErrInvalidArgument)
}
