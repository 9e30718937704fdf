package memdx

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// fuzzSeeds are the hand-made seeds of every fuzz target. They live in the
// committed corpus testdata/fuzz/<FuzzName>/seed-* (so that `go test` runs
// them without the conformance data); regenerate that corpus after changing
// them with
//
//	MEMDX_WRITE_FUZZ_CORPUS=1 go test -run TestWriteFuzzCorpus ./memdx
//
// Inputs the fuzzer found failing are committed beside them under the names
// `go test -fuzz` gave them.
func fuzzSeeds(tb testing.TB) map[string][][]any {
	packets := append(goldenSeeds(tb), responseSeeds()...)
	one := func(bs ...[]byte) [][]any {
		var out [][]any
		for _, b := range bs {
			out = append(out, []any{b})
		}
		return out
	}
	var subdocReqs [][]any
	for _, b := range goldenSeeds(tb) {
		if p, _, err := DecodePacket(b, 0); err == nil && p.OpCode >= OpSubdocGet && p.OpCode <= OpSubdocReplaceBodyWithXattr {
			subdocReqs = append(subdocReqs, []any{byte(p.OpCode), p.Extras, p.Value})
		}
	}
	subdocReqs = append(subdocReqs, []any{byte(OpSubdocMultiMutation), []byte{0, 0, 0, 0}, []byte{}})
	var leb [][]any
	for _, g := range leb128Golden {
		leb = append(leb, []any{unhex(g.hex), g.v})
	}
	leb = append(leb, []any{[]byte{0x80, 0x00}, uint32(0)}, []any{[]byte{0xff, 0xff, 0xff, 0xff, 0x1f}, uint32(1)})
	lookup := AppendSubdocLookupResult(nil, StatusSuccess, []byte(`"mnunberg"`))
	lookup = AppendSubdocLookupResult(lookup, StatusSubdocPathNotFound, nil)
	m := map[string][][]any{
		"FuzzDecodeHeader":     one(packets...),
		"FuzzDecodePacket":     one(packets...),
		"FuzzResponseDecoders": one(packets...),
		"FuzzFrameInfos": one([]byte{}, unhex("1101"), unhex("13031388"+"50"+"43626f62"), unhex("020009"),
			unhex("f201aabb"), append(unhex("ff050e"), make([]byte, 29)...), append(unhex("3fff"), make([]byte, 270)...)),
		"FuzzULEB128": leb,
		"FuzzHello": {
			{[]byte{0, 7, 0, 0x12}, []byte(`{"a":"kvwire","i":"0123456789abcdef/0000000000000001"}`), "agent", "id"},
			{[]byte{0}, []byte("mchello v1.0"), "\xff\xfe", ""},
		},
		"FuzzScramClientMessages": {
			{[]byte("r=fyko+d2lbbFgONRv9qkxdawL3rfcNHYJY1ZVvWVs7j,s=QSXCR+Q6sek8bf92,i=4096"), []byte("v=rmF9pqV8S7suAoZWja4dJRkFsKQ=")},
			{[]byte("r=fyko+d2lbbFgONRv9qkxdawLX,s=c2FsdA==,i=1,x=ext"), []byte("e=invalid-proof")},
			{[]byte("m=x,r=fyko+d2lbbFgONRv9qkxdawLX,s=c2FsdA==,i=1"), []byte("v=,x")},
		},
		"FuzzScramServerMessages": {
			{[]byte("n,,n=user,r=abc"), []byte("c=biws,r=abcSRV,p=AAAA")},
			{[]byte("y,,n=us=2Cer,r=abc,x=1"), []byte("c=eSws,r=abcSRV,x=1,p=")},
			{[]byte("n,,m=1,n=user,r=abc"), []byte("")},
		},
		"FuzzDecodePlain": one([]byte("\x00user\x00pencil"), []byte("admin\x00user\x00"), []byte("\x00\x00")),
		"FuzzDecompressSnappy": one(CompressSnappy(nil, []byte(`{"a":"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"}`)),
			[]byte{0xff, 0xff, 0xff, 0xff, 0x0f}, []byte{0x0a, 0x00}),
		"FuzzSubdocResponses": one(lookup,
			AppendSubdocMutateResult(AppendSubdocMutateResult(nil, 1, StatusSuccess, []byte("42")), 3, StatusSuccess, nil),
			AppendSubdocMutateResult(nil, 1, StatusSubdocPathMismatch, nil)),
		"FuzzSubdocRequest": subdocReqs,
		"FuzzRequestEncode": {
			{byte(OpSet), []byte("key"), []byte("value"), []byte{}, uint32(8), true, byte(1), uint16(0), true, []byte{}},
			{byte(OpGet), make([]byte, 300), []byte{}, []byte{1}, uint32(0), false, byte(0), uint16(0), false, []byte{0x43, 'b', 'o', 'b'}},
			{byte(OpHello), []byte("agent"), []byte{0, 7}, []byte{}, uint32(0x80), true, byte(4), uint16(0xffff), false, []byte{}},
		},
	}
	for k, v := range rangeScanFuzzSeeds() {
		m[k] = v
	}
	for k, v := range textFuzzSeeds() {
		m[k] = v
	}
	return m
}

// corpusFile renders one input in the `go test fuzz v1` corpus format.
func corpusFile(args []any) string {
	var b strings.Builder
	b.WriteString("go test fuzz v1\n")
	for _, a := range args {
		switch v := a.(type) {
		case []byte:
			fmt.Fprintf(&b, "[]byte(%q)\n", v)
		case string:
			fmt.Fprintf(&b, "string(%q)\n", v)
		case byte:
			fmt.Fprintf(&b, "byte(%q)\n", v)
		case uint16:
			fmt.Fprintf(&b, "uint16(%d)\n", v)
		case uint32:
			fmt.Fprintf(&b, "uint32(%d)\n", v)
		case bool:
			fmt.Fprintf(&b, "bool(%v)\n", v)
		default:
			panic(fmt.Sprintf("corpusFile: %T", a))
		}
	}
	return b.String()
}

func TestWriteFuzzCorpus(t *testing.T) {
	if os.Getenv("MEMDX_WRITE_FUZZ_CORPUS") != "1" {
		t.Skip("set MEMDX_WRITE_FUZZ_CORPUS=1 to rewrite testdata/fuzz/*/seed-*")
	}
	for name, inputs := range fuzzSeeds(t) {
		dir := filepath.Join("testdata", "fuzz", name)
		old, _ := filepath.Glob(filepath.Join(dir, "seed-*"))
		for _, o := range old {
			os.Remove(o)
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for i, in := range inputs {
			p := filepath.Join(dir, fmt.Sprintf("seed-%02d", i))
			if err := os.WriteFile(p, []byte(corpusFile(in)), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// TestFuzzCorpusCommitted checks that every Fuzz target in this package has
// its committed seeds, each up to date with fuzzSeeds.
func TestFuzzCorpusCommitted(t *testing.T) {
	fset := token.NewFileSet()
	files, err := filepath.Glob("*_test.go")
	if err != nil {
		t.Fatal(err)
	}
	var targets []string
	for _, f := range files {
		af, err := parser.ParseFile(fset, f, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range af.Decls {
			if fd, ok := d.(*ast.FuncDecl); ok && strings.HasPrefix(fd.Name.Name, "Fuzz") {
				targets = append(targets, fd.Name.Name)
			}
		}
	}
	sort.Strings(targets)
	seeds := fuzzSeeds(t)
	if len(targets) != len(seeds) {
		t.Errorf("%d fuzz targets %v, seeds for %d", len(targets), targets, len(seeds))
	}
	for _, name := range targets {
		inputs, ok := seeds[name]
		if !ok || len(inputs) == 0 {
			t.Errorf("%s has no seeds in fuzzSeeds", name)
			continue
		}
		for i, in := range inputs {
			p := filepath.Join("testdata", "fuzz", name, fmt.Sprintf("seed-%02d", i))
			b, err := os.ReadFile(p)
			if err != nil || string(b) != corpusFile(in) {
				t.Errorf("%s is missing or stale (%v): run MEMDX_WRITE_FUZZ_CORPUS=1 go test -run TestWriteFuzzCorpus ./memdx", p, err)
			}
		}
	}
}
