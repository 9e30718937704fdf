package errmap

import (
	"slices"
	"strconv"
	"testing"
)

// The 19 attributes of kv_engine docs/ErrorMap.md (as the conformance README
// lists them) plus RFC 0013's auto-retry, in constant order.
var wantAttrNames = []string{
	"item-deleted", "item-locked", "item-only", "invalid-input", "fetch-config",
	"conn-state-invalidated", "auth", "special-handling", "support", "temp",
	"internal", "retry-now", "retry-later", "no-retry", "subdoc", "dcp",
	"rate-limit", "system-constraint", "success", "auto-retry",
}

func TestKnownAttrs(t *testing.T) {
	known := KnownAttrs()
	var names []string
	for _, a := range known {
		names = append(names, a.String())
	}
	if !slices.Equal(names, wantAttrNames) {
		t.Fatalf("KnownAttrs names:\n got %q\nwant %q", names, wantAttrNames)
	}
	for _, a := range known {
		if !a.Valid() {
			t.Errorf("%v not Valid", a)
		}
		got, ok := ParseAttr(a.String())
		if !ok || got != a {
			t.Errorf("ParseAttr(%q) = %v, %v; want %v, true", a.String(), got, ok, a)
		}
	}
}

func TestParseAttrUnknown(t *testing.T) {
	for _, name := range []string{"", "Temp", "TEMP", "retry", "temp ", "brand-new-attribute", "Attr(3)"} {
		if a, ok := ParseAttr(name); ok {
			t.Errorf("ParseAttr(%q) = %v, true; want false", name, a)
		}
	}
}

func TestAttrInvalid(t *testing.T) {
	for _, a := range []Attr{0, attrEnd, 200} {
		if a.Valid() {
			t.Errorf("Attr(%d).Valid() = true", a)
		}
		if got, want := a.String(), "Attr("+strconv.Itoa(int(a))+")"; got != want {
			t.Errorf("String = %q, want %q", got, want)
		}
	}
}

func TestAttrs(t *testing.T) {
	s := NewAttrs(AttrTemp, AttrRetryNow, AttrItemOnly, AttrTemp, 0, attrEnd, 255)
	if got := s.Len(); got != 3 {
		t.Errorf("Len = %d, want 3", got)
	}
	for _, a := range KnownAttrs() {
		want := a == AttrTemp || a == AttrRetryNow || a == AttrItemOnly
		if s.Has(a) != want {
			t.Errorf("Has(%v) = %v, want %v", a, s.Has(a), want)
		}
	}
	for _, a := range []Attr{0, attrEnd, 31, 255} {
		if s.Has(a) || Attrs(^uint32(0)).Has(a) {
			t.Errorf("Has(Attr(%d)) = true for an invalid attribute", a)
		}
	}
	if got, want := slices.Collect(s.All()), []Attr{AttrItemOnly, AttrTemp, AttrRetryNow}; !slices.Equal(got, want) {
		t.Errorf("All = %v, want %v", got, want)
	}
	if got, want := s.String(), "item-only,temp,retry-now"; got != want {
		t.Errorf("String = %q, want %q", got, want)
	}
	var empty Attrs
	if empty.Len() != 0 || empty.String() != "" || len(slices.Collect(empty.All())) != 0 {
		t.Errorf("empty set: Len %d String %q", empty.Len(), empty.String())
	}
	// All stops when the consumer does.
	n := 0
	for range s.All() {
		n++
		break
	}
	if n != 1 {
		t.Errorf("All yielded %d after break", n)
	}
}
