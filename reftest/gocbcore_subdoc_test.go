package reftest

import (
	"errors"
	"fmt"
	"math/bits"
	"testing"

	"github.com/couchbase/gocbcore/v10"
	"github.com/couchbase/gocbcore/v10/memd"
	"github.com/kvwire/kvwire/mockcluster"
)

// TestGocbcoreSubdoc runs gocbcore's LookupIn and MutateIn against the
// mock: gocbcore encodes the requests and decodes the responses, so the
// mock's sub-document wire format, per-path statuses, xattrs, macros and
// tombstones are checked against a real SDK.
func TestGocbcoreSubdoc(t *testing.T) {
	c, err := mockcluster.New(mockcluster.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	agent := newAgent(t, c, nil)
	key := []byte("subdoc")
	x := memd.SubdocFlagXattrPath

	mutateIn := func(flags memd.SubdocDocFlag, cas gocbcore.Cas, ops ...gocbcore.SubDocOp) (*gocbcore.MutateInResult, error) {
		return call(t, func(cb func(*gocbcore.MutateInResult, error)) (gocbcore.PendingOp, error) {
			return agent.MutateIn(gocbcore.MutateInOptions{Key: key, Flags: flags, Cas: cas, Ops: ops, Deadline: deadline()}, cb)
		})
	}
	lookupIn := func(flags memd.SubdocDocFlag, ops ...gocbcore.SubDocOp) (*gocbcore.LookupInResult, error) {
		return call(t, func(cb func(*gocbcore.LookupInResult, error)) (gocbcore.PendingOp, error) {
			return agent.LookupIn(gocbcore.LookupInOptions{Key: key, Flags: flags, Ops: ops, Deadline: deadline()}, cb)
		})
	}

	mr, err := mutateIn(memd.SubdocDocFlagMkDoc, 0,
		gocbcore.SubDocOp{Op: memd.SubDocOpDictSet, Flags: x | memd.SubdocFlagMkDirP, Path: "txn.id", Value: []byte(`"t1"`)},
		gocbcore.SubDocOp{Op: memd.SubDocOpDictSet, Flags: x | memd.SubdocFlagExpandMacros, Path: "cas", Value: []byte(`"${Mutation.CAS}"`)},
		gocbcore.SubDocOp{Op: memd.SubDocOpCounter, Path: "n", Value: []byte(`5`)},
		gocbcore.SubDocOp{Op: memd.SubDocOpArrayPushLast, Flags: memd.SubdocFlagMkDirP, Path: "arr", Value: []byte(`1,2`)})
	if err != nil || mr.Cas == 0 || len(mr.Ops) != 4 || string(mr.Ops[2].Value) != "5" {
		t.Fatalf("MutateIn: %+v %v", mr, err)
	}

	lr, err := lookupIn(0,
		gocbcore.SubDocOp{Op: memd.SubDocOpGet, Flags: x, Path: "txn"},
		gocbcore.SubDocOp{Op: memd.SubDocOpGet, Flags: x, Path: "cas"},
		gocbcore.SubDocOp{Op: memd.SubDocOpGet, Flags: x, Path: "$document.CAS"},
		gocbcore.SubDocOp{Op: memd.SubDocOpGetCount, Path: "arr"},
		gocbcore.SubDocOp{Op: memd.SubDocOpExists, Path: "nope"},
		gocbcore.SubDocOp{Op: memd.SubDocOpGet, Path: "n.x"},
		gocbcore.SubDocOp{Op: memd.SubDocOpGetDoc, Path: ""})
	if err != nil {
		t.Fatalf("LookupIn: %v", err)
	}
	want := []string{`{"id":"t1"}`, fmt.Sprintf(`"0x%016x"`, bits.ReverseBytes64(uint64(mr.Cas))),
		fmt.Sprintf(`"0x%016x"`, uint64(mr.Cas)), `2`, ``, ``, `{"n":5,"arr":[1,2]}`}
	wantErr := []error{nil, nil, nil, nil, gocbcore.ErrPathNotFound, gocbcore.ErrPathMismatch, nil}
	if lr.Cas != mr.Cas || len(lr.Ops) != len(want) {
		t.Fatalf("LookupIn: %+v", lr)
	}
	for i, op := range lr.Ops {
		if string(op.Value) != want[i] || !errors.Is(op.Err, wantErr[i]) || (wantErr[i] == nil) != (op.Err == nil) {
			t.Errorf("LookupIn spec %d: %q %v, want %q %v", i, op.Value, op.Err, want[i], wantErr[i])
		}
	}

	// A failing spec fails the whole mutation, naming its index.
	_, err = mutateIn(0, 0,
		gocbcore.SubDocOp{Op: memd.SubDocOpDictSet, Path: "a", Value: []byte(`1`)},
		gocbcore.SubDocOp{Op: memd.SubDocOpDictAdd, Path: "n", Value: []byte(`1`)})
	var sde gocbcore.SubDocumentError
	if !errors.Is(err, gocbcore.ErrPathExists) || !errors.As(err, &sde) || sde.Index != 1 {
		t.Fatalf("failing MutateIn: %v", err)
	}

	// Delete the document with a system xattr: the tombstone keeps it and
	// access-deleted reaches it; revive brings the document back.
	if _, err := mutateIn(0, 0, gocbcore.SubDocOp{Op: memd.SubDocOpDictSet, Flags: x, Path: "_sys", Value: []byte(`{"v":1}`)}); err != nil {
		t.Fatal(err)
	}
	if _, err := mutateIn(0, 0, gocbcore.SubDocOp{Op: memd.SubDocOpDeleteDoc}); err != nil {
		t.Fatalf("MutateIn delete: %v", err)
	}
	if _, err := lookupIn(0, gocbcore.SubDocOp{Op: memd.SubDocOpGet, Flags: x, Path: "_sys"}); !errors.Is(err, gocbcore.ErrDocumentNotFound) {
		t.Fatalf("LookupIn of a tombstone without access-deleted: %v", err)
	}
	lr, err = lookupIn(memd.SubdocDocFlagAccessDeleted,
		gocbcore.SubDocOp{Op: memd.SubDocOpGet, Flags: x, Path: "_sys.v"},
		gocbcore.SubDocOp{Op: memd.SubDocOpGet, Flags: x, Path: "txn"})
	if err != nil || !lr.Internal.IsDeleted || string(lr.Ops[0].Value) != "1" || !errors.Is(lr.Ops[1].Err, gocbcore.ErrPathNotFound) {
		t.Fatalf("LookupIn of the tombstone: %+v %v", lr, err)
	}
	mr, err = mutateIn(memd.SubdocDocFlagAccessDeleted|memd.SubdocDocFlagReviveDocument, lr.Cas,
		gocbcore.SubDocOp{Op: memd.SubDocOpDictSet, Flags: x, Path: "_sys.v", Value: []byte(`2`)},
		gocbcore.SubDocOp{Op: memd.SubDocOpSetDoc, Value: []byte(`{"back":true}`)})
	if err != nil {
		t.Fatalf("revive: %v", err)
	}
	got, err := call(t, func(cb func(*gocbcore.GetResult, error)) (gocbcore.PendingOp, error) {
		return agent.Get(gocbcore.GetOptions{Key: key, Deadline: deadline()}, cb)
	})
	if err != nil || string(got.Value) != `{"back":true}` || got.Cas != mr.Cas {
		t.Fatalf("Get after revive: %+v %v", got, err)
	}
}
