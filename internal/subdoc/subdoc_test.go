package subdoc

import (
	"errors"
	"strings"
	"testing"

	"github.com/kvwire/kvwire/internal/kverr"
	"github.com/kvwire/kvwire/memdx"
)

func TestDocFlags(t *testing.T) {
	for _, c := range []struct {
		doc  Doc
		want memdx.SubdocDocFlag
		err  string
	}{
		{Doc{}, 0, ""},
		{Doc{Store: StoreUpsert}, memdx.SubdocDocMkdoc, ""},
		{Doc{Store: StoreInsert}, memdx.SubdocDocAdd, ""},
		{Doc{Store: StoreUpsert, CreateAsDeleted: true}, memdx.SubdocDocMkdoc | memdx.SubdocDocCreateAsDeleted, ""},
		{Doc{ReviveDocument: true}, memdx.SubdocDocAccessDeleted | memdx.SubdocDocReviveDocument, ""},
		{Doc{AccessDeleted: true}, memdx.SubdocDocAccessDeleted, ""},
		{Doc{CreateAsDeleted: true}, 0, "CreateAsDeleted needs"},
		{Doc{Store: StoreInsert, Cas: true}, 0, "takes no CAS"},
		{Doc{Store: StoreInsert, PreserveExpiry: true}, 0, "no expiry to preserve"},
		{Doc{Store: 3}, 0, "unknown StoreSemantic 3"},
		{Doc{PreserveExpiry: true, Expiry: true}, 0, "PreserveExpiry with an Expiry"},
		{Doc{Store: StoreUpsert, CreateAsDeleted: true, ReviveDocument: true}, 0, "CreateAsDeleted with ReviveDocument"},
	} {
		got, err := c.doc.Flags()
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%+v: error %v, want one saying %q", c.doc, err, c.err)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("%+v: %#x, %v; want %#x", c.doc, got, err, c.want)
		}
	}
}

// Specs are checked in order: xattr specs first, each made by a
// constructor that accepted its arguments, 1 to MaxSpecs of them.
func TestSpecLists(t *testing.T) {
	var s State
	if err := s.StartLookups(0); err == nil {
		t.Error("an empty list is refused")
	}
	if err := s.StartMutations(MaxSpecs + 1); err == nil {
		t.Error("a list longer than MaxSpecs is refused")
	}
	if err := s.StartLookups(3); err != nil {
		t.Fatal(err)
	}
	x, body := Get("x", true), Get("a", false)
	if err := s.AddLookup(0, &x); err != nil {
		t.Fatal(err)
	}
	if err := s.AddLookup(1, &body); err != nil {
		t.Fatal(err)
	}
	err := s.AddLookup(2, &x)
	if !errors.Is(err, kverr.ErrXattrInvalidOrder) || err.Error() != `spec 2 (xattr "x") follows body spec 1: `+kverr.ErrXattrInvalidOrder.Error() {
		t.Errorf("xattr after body: %v", err)
	}
	if err := s.AddLookup(2, &LookupSpec{}); err == nil || !strings.Contains(err.Error(), "was not made by") {
		t.Errorf("zero spec: %v", err)
	}
	if len(s.Lookups) != 2 || s.Lookups[0].Flags != memdx.SubdocPathXattr || s.Lookups[1].Op != memdx.OpSubdocGet {
		t.Errorf("lookups %+v", s.Lookups)
	}

	if err := s.StartMutations(1); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		spec MutateSpec
		err  string
	}{
		{MutateSpec{}, "was not made by"},
		{Mutate(memdx.OpSubdocDictUpsert, "a", nil, false, false, false), `spec 0 (path "a"): no value`},
		{Mutate(memdx.OpSubdocDictUpsert, "a", []byte("1"), false, false, true), "ExpandMacros needs IsXattr"},
		{AddPath("InsertSpec", memdx.OpSubdocDictAdd, "", []byte("1"), false, false, false), "InsertSpec needs a path"},
		{Decrement("a", -1<<63, false, false), "cannot be negated"},
	} {
		if err := s.AddMutation(0, &c.spec); err == nil || !strings.Contains(err.Error(), c.err) {
			t.Errorf("%+v: %v, want an error saying %q", c.spec, err, c.err)
		}
	}
	m := Mutate(memdx.OpSubdocDictUpsert, "x", []byte("1"), true, true, true)
	if err := s.AddMutation(0, &m); err != nil {
		t.Fatal(err)
	}
	if want := memdx.SubdocPathXattr | memdx.SubdocPathMkdirP | memdx.SubdocPathExpandMacros; s.Mutations[0].Flags != want {
		t.Errorf("path flags %#x, want %#x", s.Mutations[0].Flags, want)
	}

	// A pooled op keeps the buffers, emptied.
	k := s.Keep()
	if len(k.Lookups) != 0 || cap(k.Lookups) == 0 || k.Lookups[:1][0].Path != nil {
		t.Errorf("kept lookups %+v (cap %d)", k.Lookups, cap(k.Lookups))
	}
}

func TestWholeDocumentSpecs(t *testing.T) {
	if g := Get("", false); g.Op() != memdx.OpGet {
		t.Errorf("GetSpec(\"\") is %s", g.Op())
	}
	if g := Get("", true); g.Op() != memdx.OpSubdocGet {
		t.Errorf("an xattr GetSpec(\"\") is %s", g.Op())
	}
	if r := Replace("", []byte("{}"), false, false); r.Op() != memdx.OpSet {
		t.Errorf("ReplaceSpec(\"\") is %s", r.Op())
	}
	if r := Remove("", false); r.Op() != memdx.OpDelete {
		t.Errorf("RemoveSpec(\"\") is %s", r.Op())
	}
	if r := Remove("", true); r.Op() != memdx.OpSubdocDelete || r.flags != memdx.SubdocPathXattr {
		t.Errorf("an xattr RemoveSpec(\"\") is %s, flags %#x", r.Op(), r.flags)
	}
}
