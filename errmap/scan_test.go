package errmap

import (
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"
)

// Strings decode exactly as encoding/json decodes them.
func TestStringDecodingMatchesEncodingJSON(t *testing.T) {
	for _, lit := range []string{
		`""`,
		`"KEY_ENOENT"`,
		`"a\"b\\c\/d\be\ff\ng\rh\ti"`,
		`"caf\u00e9 \u00E9"`,
		`"é, 日本, 😀 raw"`,
		`"\ud83d\ude00 pair"`,
		`"\ud83d lone high"`,
		`"\ude00 lone low"`,
		`"\ud83d\u0041 high then not low"`,
		`"\ud83d\ud83d two highs"`,
		`"\u0000 nul escaped"`,
		"\"bad utf8 \xff\xfe end\"",
		"\"truncated utf8 \xe6\x97\"",
		"\"\x7f del is allowed\"",
	} {
		var want string
		if err := json.Unmarshal([]byte(lit), &want); err != nil {
			t.Fatalf("encoding/json rejects %q: %v", lit, err)
		}
		m, err := Parse([]byte(`{"version":1,"revision":1,"errors":{"1":{"name":` + lit + `,"desc":` + lit + `,"attrs":[]}}}`))
		if err != nil {
			t.Errorf("%q: %v", lit, err)
			continue
		}
		if e, _ := m.Lookup(1); e.Name != want || e.Desc != want {
			t.Errorf("%q decoded to %q / %q, encoding/json gives %q", lit, e.Name, e.Desc, want)
		}
	}
}

// What RFC 8259 forbids, Parse rejects, wherever it appears; encoding/json
// agrees on every case.
func TestSyntaxRejected(t *testing.T) {
	for _, v := range []string{
		"\"ctl \x01 char\"", "\"tab \t raw\"", `"bad \x escape"`, `"bad \u12g4"`, `"short \u12"`,
		`01`, `-`, `-a`, `1.`, `1.e5`, `1e`, `1e+`, `.5`, `+1`, `0x10`, `NaN`, `Infinity`,
		`tru`, `nul`, `falsey`, `True`, `[1,]`, `[,1]`, `{"a":1,}`, `{"a" 1}`, `{a:1}`, `{"a":1 "b":2}`,
		`'x'`, `[1 2]`, `{"a":[}`,
	} {
		doc := `{"version":1,"revision":1,"x":` + v + `,"errors":{}}`
		if json.Valid([]byte(doc)) {
			t.Fatalf("test case %q is valid JSON", v)
		}
		_, err := Parse([]byte(doc))
		var pe *ParseError
		if !errors.As(err, &pe) || !strings.HasPrefix(pe.Reason, "invalid JSON") {
			t.Errorf("%q: error %v, want invalid JSON", v, err)
		}
	}
}

// Valid JSON of every kind is skipped in unknown fields.
func TestSkipValidJSON(t *testing.T) {
	for _, v := range []string{
		`0`, `-0`, `-0.0e-0`, `1.5E+10`, `123456789012345678901234567890`, `true`, `false`, `null`,
		`""`, `"\u00e9\ud83d\ude00"`, `[]`, `{}`, `[[[],[{}]]]`, `{"a":{"b":[1,"2",{"c":null}]}}`,
		" \t\r\n[ 1 , 2 ] \n",
	} {
		doc := `{"version":1,"revision":1,"x":` + v + `,"errors":{"1":{"name":"N","attrs":[],"y":` + v + `}}}`
		if !json.Valid([]byte(doc)) {
			t.Fatalf("test case %q is not valid JSON", v)
		}
		if _, err := Parse([]byte(doc)); err != nil {
			t.Errorf("%q: %v", v, err)
		}
	}
}

func TestWhitespaceAnywhere(t *testing.T) {
	doc := " \n{ \"version\" :\t1 ,\r\n\"revision\" : 2 , \"errors\" : { \"1\" : { \"name\" : \"N\" , \"attrs\" : [ \"temp\" , \"dcp\" ] } } } \n\t"
	m := mustParse(t, []byte(doc))
	if e, ok := m.Lookup(1); !ok || e.Attrs != NewAttrs(AttrTemp, AttrDCP) || m.Revision != 2 {
		t.Errorf("entry %+v, revision %d", e, m.Revision)
	}
}

// Input cut at every byte is rejected as truncated (or, before the object
// opens, as empty), never accepted and never a panic.
func TestTruncatedEverywhere(t *testing.T) {
	full := []byte(smallV2)
	for n := 0; n < len(full); n++ {
		_, err := Parse(full[:n])
		if err == nil {
			t.Fatalf("Parse accepted the first %d bytes", n)
		}
		if !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Fatalf("first %d bytes: %v, want unexpected end of input", n, err)
		}
	}
}

func TestNestingLimit(t *testing.T) {
	ok := `{"version":1,"revision":1,"x":` + strings.Repeat("[", maxDepth-1) + strings.Repeat("]", maxDepth-1) + `,"errors":{}}`
	if _, err := Parse([]byte(ok)); err != nil {
		t.Errorf("nesting %d deep: %v", maxDepth, err)
	}
	bad := `{"version":1,"revision":1,"x":` + strings.Repeat("[", maxDepth) + strings.Repeat("]", maxDepth) + `,"errors":{}}`
	if _, err := Parse([]byte(bad)); err == nil || !strings.Contains(err.Error(), "nested more than") {
		t.Errorf("nesting %d deep: %v", maxDepth+1, err)
	}
}
