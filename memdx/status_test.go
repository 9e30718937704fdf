package memdx

import (
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

// errmapName turns an error-map name into memdx's UPPER_SNAKE form: spaces
// and hyphens become '_', a capital after a lower-case letter starts a
// new word (not after a digit: E2BIG stays one word), and everything is upper-cased. Names already in
// UPPER_SNAKE (almost all of them) are unchanged.
func errmapName(name string) string {
	var b strings.Builder
	var prev rune
	for i, r := range name {
		switch {
		case r == ' ' || r == '-':
			b.WriteByte('_')
		case i > 0 && unicode.IsUpper(r) && unicode.IsLower(prev):
			b.WriteByte('_')
			b.WriteRune(r)
		default:
			b.WriteRune(unicode.ToUpper(r))
		}
		prev = r
	}
	return b.String()
}

func TestErrmapNameNormalisation(t *testing.T) {
	for in, want := range map[string]string{
		"DCP stream-ID invalid":       "DCP_STREAM_ID_INVALID",
		"DurabilityInvalidLevel":      "DURABILITY_INVALID_LEVEL",
		"SyncWriteReCommitInProgress": "SYNC_WRITE_RE_COMMIT_IN_PROGRESS",
		"VbUuidNotEqual":              "VB_UUID_NOT_EQUAL",
		"KEY_ENOENT":                  "KEY_ENOENT",
		"E2BIG":                       "E2BIG",
		"SUBDOC_PATH_E2DEEP":          "SUBDOC_PATH_E2DEEP",
	} {
		if got := errmapName(in); got != want {
			t.Errorf("errmapName(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestStatusNamesMatchErrorMaps checks that every code of kv_engine's error
// maps (the current v2 map, the shipped v1 map and the v1 map derived from
// v2) and of gocbcore's copies has a memdx constant whose String is the
// map's name in memdx's UPPER_SNAKE form. The mock server's test-only codes
// 0x7ff0-0x7ff2 are not server statuses and are skipped.
func TestStatusNamesMatchErrorMaps(t *testing.T) {
	files := []string{
		"kv_engine_error_map_v2.json",
		"kv_engine_error_map_v1.json",
		"kv_engine_error_map_v1_derived_from_current_v2.json",
		"gocbcore_err_map70_v1.json",
		"gocbcore_err_map71_v2.json",
		"couchbasemock_errmap_v1_with_retry_specs.json",
	}
	seen := map[Status]bool{}
	for _, f := range files {
		var m struct {
			Errors map[string]struct {
				Name string `json:"name"`
			} `json:"errors"`
		}
		if err := json.Unmarshal(readConformance(t, filepath.Join("errmap", f)), &m); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if len(m.Errors) == 0 {
			t.Fatalf("%s: no errors parsed", f)
		}
		for code, e := range m.Errors {
			v, err := strconv.ParseUint(code, 16, 16)
			if err != nil {
				t.Fatalf("%s: code %q: %v", f, code, err)
			}
			st := Status(v)
			if st >= 0x7f00 {
				continue // CouchbaseMock's DUMMY_ERROR_RETRY_* test codes
			}
			seen[st] = true
			if !st.Known() {
				t.Errorf("%s: status 0x%02x (%s) has no memdx constant", f, v, e.Name)
				continue
			}
			if got, want := st.String(), errmapName(e.Name); got != want {
				t.Errorf("%s: Status(0x%02x).String() = %q, want %q (map name %q)", f, v, got, want, e.Name)
			}
		}
	}
	// Every memdx status is one of some map's codes: no invented constants.
	for _, st := range KnownStatuses() {
		if !seen[st] {
			t.Errorf("memdx names status 0x%02x (%s) that no error map lists", uint16(st), st)
		}
	}
}

func TestKnownStatusesSortedAndComplete(t *testing.T) {
	all := KnownStatuses()
	if len(all) != len(statusNames) {
		t.Fatalf("KnownStatuses returned %d, want %d", len(all), len(statusNames))
	}
	for i := 1; i < len(all); i++ {
		if all[i-1] >= all[i] {
			t.Fatalf("not ascending at %d: %v, %v", i, all[i-1], all[i])
		}
	}
	if got := Status(0x7777).String(); got != "STATUS(0x7777)" {
		t.Errorf("unknown status String = %q", got)
	}
	if Status(0x7777).Known() {
		t.Error("0x7777 reported known")
	}
	// fmt prefers Error to String; both must give the name.
	if got := fmt.Sprintf("%v %s", StatusLocked, StatusTmpFail); got != "LOCKED ETMPFAIL" {
		t.Errorf("fmt of a Status = %q", got)
	}
}

func TestStatusErrorMatchesSentinels(t *testing.T) {
	p := &Packet{Magic: MagicRes, OpCode: OpSet, Status: StatusLocked, Opaque: 7,
		Datatype: DatatypeJSON, Value: []byte(`{"error":{"context":"locked by GET_LOCKED","ref":"abc-123"}}`)}
	err := fmt.Errorf("set foo: %w", NewStatusError(p))
	if !errors.Is(err, StatusLocked) {
		t.Fatalf("errors.Is(%v, StatusLocked) = false", err)
	}
	if errors.Is(err, StatusKeyNotFound) {
		t.Fatal("errors.Is matched a different status")
	}
	if errors.Is(err, ErrMalformed) {
		t.Fatal("a status error matched ErrMalformed")
	}
	var se *StatusError
	if !errors.As(err, &se) {
		t.Fatal("errors.As *StatusError failed")
	}
	if se.Status != StatusLocked || se.OpCode != OpSet || se.Opaque != 7 ||
		se.Context != "locked by GET_LOCKED" || se.Ref != "abc-123" {
		t.Fatalf("StatusError fields = %+v", se)
	}
	if want := "SET failed with status LOCKED (0x09): locked by GET_LOCKED (ref abc-123)"; se.Error() != want {
		t.Fatalf("Error() = %q, want %q", se.Error(), want)
	}
	// A snappy-compressed or non-JSON body is not read as an error context.
	p.Datatype = DatatypeJSON | DatatypeSnappy
	if e := NewStatusError(p).(*StatusError); e.Context != "" {
		t.Fatalf("context read from a snappy body: %q", e.Context)
	}
	p.Status = StatusSuccess
	if NewStatusError(p) != nil {
		t.Fatal("NewStatusError returned an error for SUCCESS")
	}
}

func TestDecodeErrorContext(t *testing.T) {
	for _, tc := range []struct {
		dt    Datatype
		value string
		ok    bool
		want  ErrorContext
	}{
		{DatatypeJSON, `{"error":{"context":"c","ref":"r"}}`, true, ErrorContext{"c", "r"}},
		{DatatypeRaw, `{"error":{"ref":"r"}}`, true, ErrorContext{Ref: "r"}},
		{DatatypeJSON, `{"error":"no"}`, false, ErrorContext{}},
		{DatatypeJSON, `{"other":1}`, false, ErrorContext{}},
		{DatatypeRaw, `Not found`, false, ErrorContext{}},
		{DatatypeRaw, ``, false, ErrorContext{}},
		{DatatypeSnappy, `{"error":{"context":"c"}}`, false, ErrorContext{}},
	} {
		got, ok := DecodeErrorContext(tc.dt, []byte(tc.value))
		if ok != tc.ok || got != tc.want {
			t.Errorf("DecodeErrorContext(%v, %q) = %+v, %v; want %+v, %v", tc.dt, tc.value, got, ok, tc.want, tc.ok)
		}
	}
}
