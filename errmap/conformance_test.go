package errmap

import (
	"reflect"
	"testing"

	"github.com/kvwire/kvwire/memdx"
)

// The figures come from /work/shared/conformance/README.md (and were checked
// there by reading the files).
var conformanceMaps = []struct {
	file              string
	version, revision int
	codes             int
}{
	{"kv_engine_error_map_v1.json", 1, 4, 61},
	{"kv_engine_error_map_v2.json", 2, 9, 83},
	{"kv_engine_error_map_v1_derived_from_current_v2.json", 1, 13, 83},
	{"gocbcore_err_map70_v1.json", 1, 2, 58},
	{"gocbcore_err_map71_v2.json", 2, 1, 65},
	{"couchbasemock_errmap_v1_with_retry_specs.json", 1, 1, 49},
}

func TestConformanceMapsParse(t *testing.T) {
	for _, c := range conformanceMaps {
		t.Run(c.file, func(t *testing.T) {
			m := mustParse(t, readConformance(t, c.file))
			if m.Version != c.version || m.Revision != c.revision || m.Len() != c.codes {
				t.Errorf("version %d revision %d codes %d; want %d %d %d", m.Version, m.Revision, m.Len(), c.version, c.revision, c.codes)
			}
			es := m.Entries()
			for i, e := range es {
				if i > 0 && es[i-1].Status >= e.Status {
					t.Errorf("entries not strictly ascending at %d", i)
				}
				if e.Name == "" || e.Desc == "" {
					t.Errorf("%#x: empty name or desc: %+v", uint16(e.Status), e)
				}
				if e.Attrs == 0 {
					t.Errorf("%#x (%s): no attributes kept", uint16(e.Status), e.Name)
				}
				if got, ok := m.Lookup(e.Status); !ok || !reflect.DeepEqual(got, e) {
					t.Errorf("Lookup(%#x) = %+v, %v", uint16(e.Status), got, ok)
				}
			}
			// The test encoder writes back the same map.
			if again := mustParse(t, encode(m)); !reflect.DeepEqual(again, m) {
				t.Errorf("re-encoded map differs")
			}
		})
	}
}

func lookup(t *testing.T, m *Map, s memdx.Status) Entry {
	t.Helper()
	e, ok := m.Lookup(s)
	if !ok {
		t.Fatalf("no entry for %#x", uint16(s))
	}
	return e
}

func TestConformanceKVEngineV2(t *testing.T) {
	m := mustParse(t, readConformance(t, "kv_engine_error_map_v2.json"))
	tests := []struct {
		status         memdx.Status
		name, desc     string
		attrs          Attrs
		retryIndicated bool
	}{
		{0x00, "SUCCESS", "Success", NewAttrs(AttrSuccess), false},
		{0x09, "LOCKED", "Requested resource is locked", NewAttrs(AttrItemLocked, AttrItemOnly, AttrRetryNow), true},
		{0x0c, "EWOULD_THROTTLE", "", NewAttrs(AttrTemp, AttrRetryLater, AttrRateLimit), true},
		{0x28, "EXPIRY_OVERFLOW", "The requested expiry overflows the 32-bit time representation used on the wire", NewAttrs(AttrItemOnly, AttrSystemConstraint, AttrNoRetry), false},
		{0x32, "RATE_LIMITED_MAX_CONNECTIONS", "", NewAttrs(AttrConnStateInvalidated, AttrRateLimit), false},
		{0x86, "ETMPFAIL", "", NewAttrs(AttrTemp, AttrRetryNow), true},
		{0xa2, "SyncWriteInProgress", "", NewAttrs(AttrItemOnly, AttrRetryLater), true},
		{0xd8, "SUBDOC_FIELD_NOT_BINARY_VALUE", "Subdoc: The field is not a binary value", NewAttrs(AttrSubdoc, AttrItemOnly), false},
	}
	for _, tc := range tests {
		e := lookup(t, m, tc.status)
		if e.Name != tc.name || (tc.desc != "" && e.Desc != tc.desc) || e.Attrs != tc.attrs || e.Retry != nil {
			t.Errorf("%#x = %+v (attrs %q); want name %q desc %q attrs %q", uint16(tc.status), e, e.Attrs, tc.name, tc.desc, tc.attrs)
		}
		if e.RetryIndicated() != tc.retryIndicated {
			t.Errorf("%#x RetryIndicated = %v", uint16(tc.status), e.RetryIndicated())
		}
	}
	// memdx names every status of this map (its Status doc says so); the
	// client relies on that to consult the map only for the others.
	for _, e := range m.Entries() {
		if !e.Status.Known() {
			t.Errorf("memdx does not know %#x (%s) of kv_engine's v2 map", uint16(e.Status), e.Name)
		}
	}
}

// The server derives v1 from v2 by dropping the v2-only attributes and
// adding 4 to the revision, so the derived map has the higher revision.
func TestConformanceDerivedV1(t *testing.T) {
	v1 := mustParse(t, readConformance(t, "kv_engine_error_map_v1_derived_from_current_v2.json"))
	v2 := mustParse(t, readConformance(t, "kv_engine_error_map_v2.json"))
	if e := lookup(t, v1, 0x28); e.Attrs != NewAttrs(AttrItemOnly) {
		t.Errorf("derived v1 0x28 attrs %q, want item-only", e.Attrs)
	}
	if e := lookup(t, v1, 0x30); e.Attrs != NewAttrs(AttrTemp, AttrRetryLater) || !e.RetryIndicated() {
		t.Errorf("derived v1 0x30 attrs %q", e.Attrs)
	}
	if v1.Revision != 13 || v2.Revision != 9 {
		t.Errorf("revisions: derived v1 %d, v2 %d; want 13 and 9", v1.Revision, v2.Revision)
	}
	// Same codes, and each v1 entry's attributes are a subset of v2's.
	for _, e2 := range v2.Entries() {
		e1 := lookup(t, v1, e2.Status)
		if e1.Name != e2.Name || e1.Attrs&^e2.Attrs != 0 {
			t.Errorf("%#x: v1 %+v not derived from v2 %+v", uint16(e2.Status), e1, e2)
		}
	}
}

func TestConformanceKVEngineV1(t *testing.T) {
	m := mustParse(t, readConformance(t, "kv_engine_error_map_v1.json"))
	if e := lookup(t, m, 0x1f); e.Name != "AUTH_STALE" || e.Attrs != NewAttrs(AttrConnStateInvalidated, AttrAuth) {
		t.Errorf("0x1f = %+v", e)
	}
	if e := lookup(t, m, 0x86); e.Name != "ETMPFAIL" || e.Desc != "Temporary failure. Try again" || !e.RetryIndicated() {
		t.Errorf("0x86 = %+v", e)
	}
}

func TestConformanceGocbcore(t *testing.T) {
	v2 := mustParse(t, readConformance(t, "gocbcore_err_map71_v2.json"))
	if e := lookup(t, v2, 0x30); e.Name != "RATE_LIMITED_NETWORK_INGRESS" || e.Attrs != NewAttrs(AttrTemp, AttrRetryLater, AttrRateLimit) {
		t.Errorf("0x30 = %+v", e)
	}
	v1 := mustParse(t, readConformance(t, "gocbcore_err_map70_v1.json"))
	if _, ok := v1.Lookup(0x30); ok {
		t.Errorf("the 7.0 v1 map has no 0x30, but Lookup found one")
	}
	if v1.Version != 1 || v1.Revision != 2 || v2.Version != 2 || v2.Revision != 1 {
		t.Errorf("v1 map: version %d revision %d, want 1 and 2; v2 map: version %d revision %d, want 2 and 1",
			v1.Version, v1.Revision, v2.Version, v2.Revision)
	}
}

func TestConformanceMockRetrySpecs(t *testing.T) {
	m := mustParse(t, readConformance(t, "couchbasemock_errmap_v1_with_retry_specs.json"))
	for _, tc := range []struct {
		status memdx.Status
		name   string
		spec   RetrySpec
	}{
		{0x7ff0, "DUMMY_ERROR_RETRY_CONSTANT", mockConstant},
		{0x7ff1, "DUMMY_ERROR_RETRY_LINEAR", mockLinear},
		{0x7ff2, "DUMMY_ERROR_RETRY_EXPONENTIAL", mockExponential},
	} {
		e := lookup(t, m, tc.status)
		if e.Name != tc.name || e.Attrs != NewAttrs(AttrAutoRetry, AttrTemp) || e.Retry == nil || *e.Retry != tc.spec {
			t.Errorf("%#x = %+v retry %v; want %s with %v", uint16(tc.status), e, e.Retry, tc.name, tc.spec)
		}
		if !e.RetryIndicated() {
			t.Errorf("%#x: auto-retry did not indicate a retry", uint16(tc.status))
		}
	}
	withRetry := 0
	for _, e := range m.Entries() {
		if e.Retry != nil {
			withRetry++
		}
	}
	if withRetry != 3 {
		t.Errorf("%d entries with a retry spec, want 3", withRetry)
	}
}
