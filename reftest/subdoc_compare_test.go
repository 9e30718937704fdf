package reftest

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"testing"

	"github.com/couchbase/gocbcore/v10"
	"github.com/couchbase/gocbcore/v10/memd"
	"github.com/kvwire/kvwire/client"
	"github.com/kvwire/kvwire/mockcluster"
)

// The same sub-document spec lists run through kvwire's client and through
// gocbcore, each on its own copy of a document on one mock cluster, give the
// same outcome at every step: the operation's error (its kind and the
// failing spec's index), every path's value or status, whether the CAS
// changed, whether the document is deleted, and the body and xattrs stored
// afterwards. Values that hold a CAS or a seqno (macros, $document) differ
// between the copies by nature and are compared with their hex digits
// masked.

// sdOp is one spec, in terms both clients can express.
type sdOp struct {
	op     string // get exists count getdoc | insert upsert replace remove setdoc deletedoc append prepend arrinsert addunique counter
	path   string
	value  string
	xattr  bool
	mkdir  bool
	macros bool
}

// sdStep is one LookupIn or MutateIn.
type sdStep struct {
	lookup []sdOp
	mutate []sdOp
	// store: "" (replace), "upsert" or "insert".
	store                           string
	accessDeleted, createAsDeleted  bool
	revive                          bool
	casFromPrev, casWrong, wantFail bool
}

// sdOutcome is what a step gave, in client-neutral terms.
type sdOutcome struct {
	err        string // "" or the sentinel's name
	failIndex  int    // the failing spec of a MutateIn, -1 when none
	paths      []string
	casChanged bool
	deleted    bool
	body       string
	xattrs     string
	hasDoc     bool
}

var hexRE = regexp.MustCompile(`0x[0-9a-f]{8,16}`)

func mask(s string) string { return hexRE.ReplaceAllString(s, "0x#") }

// errName names err by the sentinel it matches, in either client's
// vocabulary.
func errName(err error) string {
	if err == nil {
		return ""
	}
	pairs := []struct {
		name    string
		kw, gcb error
	}{
		{"path_not_found", client.ErrPathNotFound, gocbcore.ErrPathNotFound},
		{"path_mismatch", client.ErrPathMismatch, gocbcore.ErrPathMismatch},
		{"path_invalid", client.ErrPathInvalid, gocbcore.ErrPathInvalid},
		{"path_too_big", client.ErrPathTooBig, gocbcore.ErrPathTooBig},
		{"path_too_deep", client.ErrPathTooDeep, gocbcore.ErrPathTooDeep},
		{"path_exists", client.ErrPathExists, gocbcore.ErrPathExists},
		{"value_invalid", client.ErrValueInvalid, gocbcore.ErrValueInvalid},
		{"value_too_deep", client.ErrValueTooDeep, gocbcore.ErrValueTooDeep},
		{"not_json", client.ErrDocumentNotJSON, gocbcore.ErrDocumentNotJSON},
		{"number_too_big", client.ErrNumberTooBig, gocbcore.ErrNumberTooBig},
		{"delta_invalid", client.ErrDeltaInvalid, gocbcore.ErrDeltaInvalid},
		{"unknown_macro", client.ErrXattrUnknownMacro, gocbcore.ErrXattrUnknownMacro},
		// gocbcore 10.8.1 leaves SUBDOC_XATTR_UNKNOWN_MACRO of a whole
		// command untranslated (errmapcomponent.go compares it with its
		// public sentinel, not the status error).
		{"unknown_macro", client.ErrXattrUnknownMacro, gocbcore.ErrMemdSubDocXattrUnknownMacro},
		{"unknown_vattr", client.ErrXattrUnknownVirtualAttribute, gocbcore.ErrXattrUnknownVirtualAttribute},
		{"cant_modify_vattr", client.ErrXattrCannotModifyVirtualAttribute, gocbcore.ErrXattrCannotModifyVirtualAttribute},
		{"not_found", client.ErrDocumentNotFound, gocbcore.ErrDocumentNotFound},
		{"exists", client.ErrDocumentExists, gocbcore.ErrDocumentExists},
		{"cas_mismatch", client.ErrCasMismatch, gocbcore.ErrCasMismatch},
		{"already_alive", client.ErrDocumentAlreadyAlive, gocbcore.ErrDocumentAlreadyAlive},
	}
	for _, p := range pairs {
		if errors.Is(err, p.kw) || errors.Is(err, p.gcb) {
			return p.name
		}
	}
	return "other: " + err.Error()
}

func (o sdOp) kvLookup() client.LookupInSpec {
	switch o.op {
	case "getdoc":
		return client.GetSpec("", nil)
	case "exists":
		return client.ExistsSpec(o.path, &client.ExistsSpecOptions{IsXattr: o.xattr})
	case "count":
		return client.CountSpec(o.path, &client.CountSpecOptions{IsXattr: o.xattr})
	}
	return client.GetSpec(o.path, &client.GetSpecOptions{IsXattr: o.xattr})
}

func (o sdOp) kvMutate(t *testing.T) client.MutateInSpec {
	v := []byte(o.value)
	x, m, e := o.xattr, o.mkdir, o.macros
	switch o.op {
	case "insert":
		return client.InsertSpec(o.path, v, &client.InsertSpecOptions{IsXattr: x, CreatePath: m, ExpandMacros: e})
	case "upsert":
		return client.UpsertSpec(o.path, v, &client.UpsertSpecOptions{IsXattr: x, CreatePath: m, ExpandMacros: e})
	case "replace":
		return client.ReplaceSpec(o.path, v, &client.ReplaceSpecOptions{IsXattr: x, ExpandMacros: e})
	case "setdoc":
		return client.ReplaceSpec("", v, nil)
	case "remove":
		return client.RemoveSpec(o.path, &client.RemoveSpecOptions{IsXattr: x})
	case "deletedoc":
		return client.RemoveSpec("", nil)
	case "append":
		return client.ArrayAppendSpec(o.path, v, &client.ArrayAppendSpecOptions{IsXattr: x, CreatePath: m, ExpandMacros: e})
	case "prepend":
		return client.ArrayPrependSpec(o.path, v, &client.ArrayPrependSpecOptions{IsXattr: x, CreatePath: m, ExpandMacros: e})
	case "arrinsert":
		return client.ArrayInsertSpec(o.path, v, &client.ArrayInsertSpecOptions{IsXattr: x, ExpandMacros: e})
	case "addunique":
		return client.ArrayAddUniqueSpec(o.path, v, &client.ArrayAddUniqueSpecOptions{IsXattr: x, CreatePath: m})
	case "counter":
		d, err := strconv.ParseInt(o.value, 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		return client.IncrementSpec(o.path, d, &client.CounterSpecOptions{IsXattr: x, CreatePath: m})
	}
	t.Fatalf("unknown op %q", o.op)
	return client.MutateInSpec{}
}

func (o sdOp) gocbcore() gocbcore.SubDocOp {
	ops := map[string]memd.SubDocOpType{
		"get": memd.SubDocOpGet, "exists": memd.SubDocOpExists, "count": memd.SubDocOpGetCount, "getdoc": memd.SubDocOpGetDoc,
		"insert": memd.SubDocOpDictAdd, "upsert": memd.SubDocOpDictSet, "replace": memd.SubDocOpReplace,
		"remove": memd.SubDocOpDelete, "setdoc": memd.SubDocOpSetDoc, "deletedoc": memd.SubDocOpDeleteDoc,
		"append": memd.SubDocOpArrayPushLast, "prepend": memd.SubDocOpArrayPushFirst,
		"arrinsert": memd.SubDocOpArrayInsert, "addunique": memd.SubDocOpArrayAddUnique, "counter": memd.SubDocOpCounter,
	}
	var f memd.SubdocFlag
	if o.xattr {
		f |= memd.SubdocFlagXattrPath
	}
	if o.mkdir {
		f |= memd.SubdocFlagMkDirP
	}
	if o.macros {
		f |= memd.SubdocFlagExpandMacros
	}
	op := gocbcore.SubDocOp{Op: ops[o.op], Flags: f, Path: o.path}
	if o.value != "" {
		op.Value = []byte(o.value)
	}
	return op
}

// sdRunner runs steps through one client on one key.
type sdRunner interface {
	lookup(st sdStep) (sdOutcome, uint64)
	mutate(t *testing.T, st sdStep, cas uint64) (sdOutcome, uint64)
}

type kvRunner struct {
	col *client.Collection
	key string
}

func (r kvRunner) lookup(st sdStep) (sdOutcome, uint64) {
	specs := make([]client.LookupInSpec, len(st.lookup))
	for i, o := range st.lookup {
		specs[i] = o.kvLookup()
	}
	res, err := r.col.LookupIn(context.Background(), r.key, specs, &client.LookupInOptions{AccessDeleted: st.accessDeleted})
	out := sdOutcome{err: errName(err), failIndex: -1, deleted: res.IsDeleted}
	if err != nil {
		return out, 0
	}
	for i := range specs {
		v, err := res.ValueAt(i)
		out.paths = append(out.paths, errName(err)+"|"+mask(string(v)))
	}
	return out, res.Cas
}

func (r kvRunner) mutate(t *testing.T, st sdStep, cas uint64) (sdOutcome, uint64) {
	specs := make([]client.MutateInSpec, len(st.mutate))
	for i, o := range st.mutate {
		specs[i] = o.kvMutate(t)
	}
	mo := &client.MutateInOptions{Cas: cas, AccessDeleted: st.accessDeleted, CreateAsDeleted: st.createAsDeleted, ReviveDocument: st.revive}
	switch st.store {
	case "upsert":
		mo.StoreSemantic = client.StoreSemanticsUpsert
	case "insert":
		mo.StoreSemantic = client.StoreSemanticsInsert
	}
	res, err := r.col.MutateIn(context.Background(), r.key, specs, mo)
	out := sdOutcome{err: errName(err), failIndex: -1, deleted: res.IsDeleted}
	var se *client.SubdocError
	if errors.As(err, &se) {
		out.failIndex = se.Index
	}
	if err != nil {
		return out, 0
	}
	for i := range specs {
		v, _ := res.ValueAt(i)
		out.paths = append(out.paths, string(v))
	}
	return out, res.Cas
}

type gcbRunner struct {
	t     *testing.T
	agent *gocbcore.Agent
	key   string
}

func (r gcbRunner) flags(st sdStep) memd.SubdocDocFlag {
	var f memd.SubdocDocFlag
	switch st.store {
	case "upsert":
		f |= memd.SubdocDocFlagMkDoc
	case "insert":
		f |= memd.SubdocDocFlagAddDoc
	}
	if st.accessDeleted || st.revive {
		f |= memd.SubdocDocFlagAccessDeleted
	}
	if st.createAsDeleted {
		f |= memd.SubdocDocFlagCreateAsDeleted
	}
	if st.revive {
		f |= memd.SubdocDocFlagReviveDocument
	}
	return f
}

func (r gcbRunner) lookup(st sdStep) (sdOutcome, uint64) {
	ops := make([]gocbcore.SubDocOp, len(st.lookup))
	for i, o := range st.lookup {
		ops[i] = o.gocbcore()
	}
	res, err := call(r.t, func(cb func(*gocbcore.LookupInResult, error)) (gocbcore.PendingOp, error) {
		return r.agent.LookupIn(gocbcore.LookupInOptions{Key: []byte(r.key), Flags: r.flags(st), Ops: ops, Deadline: deadline()}, cb)
	})
	out := sdOutcome{err: errName(err), failIndex: -1}
	if err != nil {
		return out, 0
	}
	out.deleted = res.Internal.IsDeleted
	for _, op := range res.Ops {
		v := op.Value
		if op.Err != nil {
			v = nil
		}
		out.paths = append(out.paths, errName(op.Err)+"|"+mask(string(v)))
	}
	return out, uint64(res.Cas)
}

func (r gcbRunner) mutate(t *testing.T, st sdStep, cas uint64) (sdOutcome, uint64) {
	ops := make([]gocbcore.SubDocOp, len(st.mutate))
	for i, o := range st.mutate {
		ops[i] = o.gocbcore()
	}
	res, err := call(r.t, func(cb func(*gocbcore.MutateInResult, error)) (gocbcore.PendingOp, error) {
		return r.agent.MutateIn(gocbcore.MutateInOptions{Key: []byte(r.key), Flags: r.flags(st), Cas: gocbcore.Cas(cas),
			Ops: ops, Deadline: deadline()}, cb)
	})
	out := sdOutcome{err: errName(err), failIndex: -1}
	var se gocbcore.SubDocumentError
	if errors.As(err, &se) {
		out.failIndex = se.Index
	}
	if err != nil {
		return out, 0
	}
	// gocbcore's result says nothing of a tombstone: the stored state,
	// compared below, does.
	out.deleted = false
	for _, op := range res.Ops {
		out.paths = append(out.paths, string(op.Value))
	}
	return out, uint64(res.Cas)
}

// subdocScenarios are the spec lists both clients run.
var subdocScenarios = []struct {
	name  string
	seed  string // "" : no document
	steps []sdStep
}{
	{"create with xattrs, macros, counters and arrays", "", []sdStep{
		{store: "upsert", mutate: []sdOp{
			{op: "upsert", path: "txn.id", value: `"t1"`, xattr: true, mkdir: true},
			{op: "upsert", path: "txn.cas", value: `"${Mutation.CAS}"`, xattr: true, macros: true},
			{op: "upsert", path: "txn.crc", value: `"${Mutation.value_crc32c}"`, xattr: true, macros: true},
			{op: "counter", path: "n", value: "5"},
			{op: "append", path: "arr", value: "1,2", mkdir: true},
		}},
		{lookup: []sdOp{
			{op: "get", path: "txn", xattr: true}, {op: "get", path: "$document.CAS", xattr: true},
			{op: "get", path: "$document.value_bytes", xattr: true}, {op: "count", path: "arr"},
			{op: "exists", path: "nope"}, {op: "get", path: "n.x"}, {op: "getdoc"},
		}},
		{mutate: []sdOp{{op: "counter", path: "n", value: "-7"}, {op: "prepend", path: "arr", value: "0"},
			{op: "arrinsert", path: "arr[1]", value: `"x"`}, {op: "addunique", path: "arr", value: "9"}}},
	}},
	{"path failures", `{"a":1,"s":"str","arr":[1,2,3],"objs":[{"o":1}],"obj":{"x":"y"},"big":99999999999999999999}`, []sdStep{
		{lookup: []sdOp{
			{op: "get", path: "a"}, {op: "get", path: "a.b"}, {op: "get", path: "arr["}, {op: "get", path: "arr[-1]"},
			{op: "exists", path: "obj.x"}, {op: "count", path: "s"}, {op: "get", path: "nope"},
		}},
		{wantFail: true, mutate: []sdOp{{op: "upsert", path: "z", value: "1"}, {op: "insert", path: "a", value: "2"}}},
		{wantFail: true, mutate: []sdOp{{op: "replace", path: "nope", value: "1"}}},
		{wantFail: true, mutate: []sdOp{{op: "arrinsert", path: "arr[9]", value: "1"}}},
		{wantFail: true, mutate: []sdOp{{op: "addunique", path: "arr", value: "1"}}},
		{wantFail: true, mutate: []sdOp{{op: "addunique", path: "objs", value: "1"}}},
		{wantFail: true, mutate: []sdOp{{op: "counter", path: "a", value: "0"}}},
		{wantFail: true, mutate: []sdOp{{op: "counter", path: "big", value: "1"}}},
		{wantFail: true, mutate: []sdOp{{op: "insert", path: "q", value: "{"}}},
		{wantFail: true, mutate: []sdOp{{op: "upsert", path: "s.x", value: "1"}}},
		{wantFail: true, mutate: []sdOp{{op: "upsert", path: "$document.x", value: "1", xattr: true}}},
		{wantFail: true, mutate: []sdOp{{op: "upsert", path: "m", value: `"${Mutation.nope}"`, xattr: true, macros: true}}},
		{mutate: []sdOp{{op: "remove", path: "obj.x"}, {op: "replace", path: "s", value: `"t"`}, {op: "insert", path: "new.deep", value: "true", mkdir: true}}},
	}},
	{"document errors and CAS", `{"a":1}`, []sdStep{
		{wantFail: true, store: "insert", mutate: []sdOp{{op: "upsert", path: "a", value: "2"}}},
		{wantFail: true, casWrong: true, mutate: []sdOp{{op: "upsert", path: "a", value: "2"}}},
		{lookup: []sdOp{{op: "get", path: "a"}}},
		{casFromPrev: true, mutate: []sdOp{{op: "upsert", path: "a", value: "3"}}},
		{mutate: []sdOp{{op: "setdoc", value: `{"whole":true}`}}},
	}},
	{"tombstones", `{"a":1}`, []sdStep{
		{mutate: []sdOp{{op: "upsert", path: "_sys", value: `{"v":1}`, xattr: true}, {op: "upsert", path: "user", value: "1", xattr: true}}},
		{mutate: []sdOp{{op: "deletedoc"}}},
		{wantFail: true, lookup: []sdOp{{op: "get", path: "_sys", xattr: true}}},
		{accessDeleted: true, lookup: []sdOp{{op: "get", path: "_sys.v", xattr: true}, {op: "get", path: "user", xattr: true},
			{op: "get", path: "$document.deleted", xattr: true}}},
		{accessDeleted: true, casFromPrev: true, mutate: []sdOp{{op: "upsert", path: "_sys.v", value: "2", xattr: true}}},
		{revive: true, mutate: []sdOp{{op: "upsert", path: "_sys.v", value: "3", xattr: true}, {op: "setdoc", value: `{"back":1}`}}},
		{wantFail: true, revive: true, mutate: []sdOp{{op: "upsert", path: "_sys.v", value: "4", xattr: true}}},
	}},
	{"created as a tombstone", "", []sdStep{
		{store: "insert", createAsDeleted: true, mutate: []sdOp{{op: "upsert", path: "_txn", value: `{"staged":true}`, xattr: true}}},
		{accessDeleted: true, lookup: []sdOp{{op: "get", path: "_txn", xattr: true}, {op: "getdoc"}}},
		// A tombstone is no document to insert semantics: this creates it.
		{store: "insert", mutate: []sdOp{{op: "upsert", path: "_txn", value: `1`, xattr: true}}},
	}},
}

func TestSubdocSameAsGocbcore(t *testing.T) {
	mc, err := mockcluster.New(mockcluster.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(mc.Close)
	agent := newAgent(t, mc, nil)
	cl, err := client.Connect(context.Background(), mc.ConnString()+"/default",
		&client.Options{Username: mockcluster.DefaultUser, Password: mockcluster.DefaultPassword})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cl.Close() })
	col := cl.DefaultCollection()
	bucket := mc.Bucket(mockcluster.DefaultBucket)
	stored := func(key string) (string, string, bool) {
		d, live := bucket.Get("_default", "_default", key)
		x, deleted, ok := bucket.Xattrs("_default", "_default", key)
		if !ok {
			return "", "", false
		}
		return string(d.Value) + fmt.Sprintf("|live=%t|deleted=%t", live, deleted), mask(string(x)), true
	}

	for si, sc := range subdocScenarios {
		t.Run(sc.name, func(t *testing.T) {
			kvKey, gcKey := fmt.Sprintf("kw-%d", si), fmt.Sprintf("gc-%d", si)
			runners := []struct {
				key string
				r   sdRunner
			}{{kvKey, kvRunner{col, kvKey}}, {gcKey, gcbRunner{t, agent, gcKey}}}
			prevCas := []uint64{0, 0}
			if sc.seed != "" {
				for i, r := range runners {
					res, err := col.Upsert(context.Background(), r.key, []byte(sc.seed), &client.UpsertOptions{JSON: true})
					if err != nil {
						t.Fatal(err)
					}
					prevCas[i] = res.Cas
				}
			}
			for stepN, st := range sc.steps {
				var outs [2]sdOutcome
				for i, r := range runners {
					var cas uint64
					switch {
					case st.casFromPrev:
						cas = prevCas[i]
					case st.casWrong:
						cas = prevCas[i] + 1
					}
					var out sdOutcome
					var newCas uint64
					if st.lookup != nil {
						out, newCas = r.r.lookup(st)
					} else {
						out, newCas = r.r.mutate(t, st, cas)
						out.casChanged = newCas != 0 && newCas != prevCas[i]
					}
					if i == 1 && st.mutate != nil {
						// gocbcore's MutateIn result does not say
						// whether the document is deleted; the stored
						// state compared below does.
						out.deleted = outs[0].deleted
					}
					if newCas != 0 {
						prevCas[i] = newCas
					}
					out.body, out.xattrs, out.hasDoc = stored(r.key)
					outs[i] = out
				}
				if (outs[0].err != "") != st.wantFail {
					t.Errorf("step %d: kvwire error %q, want failure %t", stepN, outs[0].err, st.wantFail)
				}
				if fmt.Sprint(outs[0]) != fmt.Sprint(outs[1]) {
					t.Errorf("step %d differs:\nkvwire   %+v\ngocbcore %+v", stepN, outs[0], outs[1])
				} else {
					t.Logf("step %d: %+v", stepN, outs[0])
				}
			}
		})
	}
}
