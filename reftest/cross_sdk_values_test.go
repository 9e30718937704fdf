package reftest

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/couchbase/gocb/v2"
	"github.com/couchbase/gocbcore/v10"
	"github.com/kvwire/kvwire/client"
	"github.com/kvwire/kvwire/mockcluster"
)

// Documents kvwire writes are read by the official SDKs' default
// transcoders, and documents they write are read by kvwire. The SDKs
// agree on Couchbase's "common flags": the top byte of a document's flags
// says whether its value is JSON (0x02), binary (0x03) or a string (0x04);
// flags 0 are "legacy" and every SDK reads them as JSON. gocb's
// transcoders (JSONTranscoder, its default, and RawBinaryTranscoder,
// RawStringTranscoder, LegacyTranscoder) decode by gocbcore's
// DecodeCommonFlags; the Node.js SDK's DefaultTranscoder also knows the
// legacy formats in the low byte and writes both (0x03000002 for a Buffer,
// 0x04000004 for a string).
//
// Each test checks the flags kvwire wrote as well as what the SDK decoded:
// a JSON document written with flags 0 decodes the same (legacy JSON), so
// only its flags tell that it carries no format.

// profile is the JSON document of these tests.
type profile struct {
	Name  string            `json:"name"`
	Count int               `json:"count"`
	Tags  []string          `json:"tags"`
	Attrs map[string]string `json:"attrs"`
}

var sampleProfile = profile{Name: "Zoë", Count: 42, Tags: []string{"x", "y"}, Attrs: map[string]string{"k": "v"}}

// sampleMap is a JSON document written from a map, as read back by
// encoding/json into a map (numbers are float64).
var sampleMap = map[string]any{"ok": true, "list": []any{1.5, "two", nil}, "nested": map[string]any{"n": 3.0}}

// quotedBinary is not UTF-8 (0xff, 0xfe and a lone 0xc3 never occur in
// UTF-8 text) and is quoted: read as legacy JSON (flags 0), the Node.js
// SDK's default transcoder would turn it into a string of replacement
// characters rather than a Buffer.
var quotedBinary = []byte{'"', 0xff, 0xfe, 0x80, 'k', 'v', 0xc3, '"'}

// allBytes holds every byte value once, 0x00 to 0xff.
var allBytes = func() []byte {
	b := make([]byte, 256)
	for i := range b {
		b[i] = byte(i)
	}
	return b
}()

// The strings: text with non-ASCII characters, and a string that is also
// valid JSON, which a reader taking it for JSON would turn into an object.
const (
	sampleText     = "héllo wörld ✓"
	jsonLookingStr = `{"name":"a string, not an object"}`
)

const (
	formatJSON   = 0x02
	formatBinary = 0x03
	formatString = 0x04
)

// valuesCluster is a mock cluster with the collection app.items, where the
// documents of these tests live.
func valuesCluster(t *testing.T) *mockcluster.Cluster { return nodeCluster(t, mockcluster.Options{}) }

// kvwireCollection connects a kvwire client to c and returns app.items.
func kvwireCollection(t *testing.T, c *mockcluster.Cluster) *client.Collection {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	cl, err := client.Connect(ctx, c.ConnString(), &client.Options{Username: mockcluster.DefaultUser,
		Password: mockcluster.DefaultPassword, Bucket: mockcluster.DefaultBucket})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cl.Close() })
	return cl.Scope("app").Collection("items")
}

// writeKvwireValues stores the documents kvwire writes: JSON from a struct,
// a map and raw bytes marked JSON, binary values and strings.
func writeKvwireValues(t *testing.T, col *client.Collection) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	writes := []struct {
		what string
		do   func() (client.MutationResult, error)
	}{
		{"UpsertJSON of a struct", func() (client.MutationResult, error) {
			return client.UpsertJSON(ctx, col, "kv-json-struct", sampleProfile, nil)
		}},
		{"UpsertJSON of a map", func() (client.MutationResult, error) {
			return client.UpsertJSON(ctx, col, "kv-json-map", sampleMap, nil)
		}},
		{"Upsert with JSON", func() (client.MutationResult, error) {
			return col.Upsert(ctx, "kv-json-raw", []byte(`[1,"two",{"three":3}]`), &client.UpsertOptions{JSON: true})
		}},
		{"Upsert of bytes", func() (client.MutationResult, error) {
			return col.Upsert(ctx, "kv-binary-quoted", quotedBinary, nil)
		}},
		{"Upsert of bytes", func() (client.MutationResult, error) { return col.Upsert(ctx, "kv-binary-all", allBytes, nil) }},
		{"UpsertString", func() (client.MutationResult, error) {
			return client.UpsertString(ctx, col, "kv-string", sampleText, nil)
		}},
		{"UpsertString", func() (client.MutationResult, error) {
			return client.UpsertString(ctx, col, "kv-string-jsonlike", jsonLookingStr, nil)
		}},
	}
	for _, w := range writes {
		if _, err := w.do(); err != nil {
			t.Fatalf("kvwire %s: %v", w.what, err)
		}
	}
}

// commonFormat checks that flags carry the common-flags format want, as
// gocbcore decodes them, and no compression.
func commonFormat(flags uint32, want byte) error {
	if flags>>24 == 0 {
		return fmt.Errorf("flags %#08x carry no common-flags format (legacy flags: every SDK reads them as JSON)", flags)
	}
	typ, comp := gocbcore.DecodeCommonFlags(flags)
	wantType := map[byte]gocbcore.DataType{formatJSON: gocbcore.JSONType, formatBinary: gocbcore.BinaryType,
		formatString: gocbcore.StringType}[want]
	if typ != wantType || comp != gocbcore.NoCompression {
		return fmt.Errorf("flags %#08x: gocbcore.DecodeCommonFlags gives data type %d compression %d, want %d (format %#02x) uncompressed",
			flags, typ, comp, wantType, want)
	}
	return nil
}

func gocbcoreGet(t *testing.T, agent *gocbcore.Agent, key string) *gocbcore.GetResult {
	t.Helper()
	r, err := call(t, func(cb func(*gocbcore.GetResult, error)) (gocbcore.PendingOp, error) {
		return agent.Get(gocbcore.GetOptions{Key: []byte(key), ScopeName: "app", CollectionName: "items", Deadline: deadline()}, cb)
	})
	if err != nil {
		t.Fatalf("gocbcore Get %s: %v", key, err)
	}
	return r
}

func gocbcoreSet(t *testing.T, agent *gocbcore.Agent, key string, value []byte, flags uint32) {
	t.Helper()
	if _, err := call(t, func(cb func(*gocbcore.StoreResult, error)) (gocbcore.PendingOp, error) {
		return agent.Set(gocbcore.SetOptions{Key: []byte(key), ScopeName: "app", CollectionName: "items",
			Value: value, Flags: flags, Deadline: deadline()}, cb)
	}); err != nil {
		t.Fatalf("gocbcore Set %s: %v", key, err)
	}
}

// gocb reads what kvwire writes: gocbcore's Get returns the value and flags
// kvwire stored, DecodeCommonFlags names their format, and gocb's
// transcoders decode them: JSONTranscoder (gocb's default) the JSON
// documents, RawBinaryTranscoder the binary ones, RawStringTranscoder the
// strings, and LegacyTranscoder, which picks by the flags, each into the
// Go type of its format.
func TestGocbReadsKvwireValues(t *testing.T) {
	c := valuesCluster(t)
	writeKvwireValues(t, kvwireCollection(t, c))
	agent := newAgent(t, c, nil)

	jsonDoc := func(key string, into func() any, want any) {
		t.Run(key, func(t *testing.T) {
			r := gocbcoreGet(t, agent, key)
			if err := commonFormat(r.Flags, formatJSON); err != nil {
				t.Error(err)
			}
			out := into()
			if err := gocb.NewJSONTranscoder().Decode(r.Value, r.Flags, out); err != nil {
				t.Fatalf("gocb JSONTranscoder: %v", err)
			}
			if got := reflect.ValueOf(out).Elem().Interface(); !reflect.DeepEqual(got, want) {
				t.Errorf("gocb JSONTranscoder decoded %#v, want %#v", got, want)
			}
			var legacy any
			if err := gocb.NewLegacyTranscoder().Decode(r.Value, r.Flags, &legacy); err != nil {
				t.Fatalf("gocb LegacyTranscoder: %v", err)
			}
			if k := reflect.ValueOf(legacy).Kind(); k != reflect.Map && k != reflect.Slice {
				t.Errorf("gocb LegacyTranscoder decoded %T, want a JSON object or array", legacy)
			}
		})
	}
	jsonDoc("kv-json-struct", func() any { return new(profile) }, sampleProfile)
	jsonDoc("kv-json-map", func() any { return new(map[string]any) }, sampleMap)
	jsonDoc("kv-json-raw", func() any { return new(any) }, []any{1.0, "two", map[string]any{"three": 3.0}})

	for key, want := range map[string][]byte{"kv-binary-quoted": quotedBinary, "kv-binary-all": allBytes} {
		t.Run(key, func(t *testing.T) {
			r := gocbcoreGet(t, agent, key)
			if err := commonFormat(r.Flags, formatBinary); err != nil {
				t.Error(err)
			}
			var b []byte
			if err := gocb.NewRawBinaryTranscoder().Decode(r.Value, r.Flags, &b); err != nil {
				t.Errorf("gocb RawBinaryTranscoder: %v", err)
			} else if !bytes.Equal(b, want) {
				t.Errorf("gocb RawBinaryTranscoder decoded %x, want %x", b, want)
			}
			var legacy any
			if err := gocb.NewLegacyTranscoder().Decode(r.Value, r.Flags, &legacy); err != nil {
				t.Errorf("gocb LegacyTranscoder: %v", err)
			} else if lb, ok := legacy.([]byte); !ok || !bytes.Equal(lb, want) {
				t.Errorf("gocb LegacyTranscoder decoded %T %v, want the bytes %x", legacy, legacy, want)
			}
		})
	}

	for key, want := range map[string]string{"kv-string": sampleText, "kv-string-jsonlike": jsonLookingStr} {
		t.Run(key, func(t *testing.T) {
			r := gocbcoreGet(t, agent, key)
			if err := commonFormat(r.Flags, formatString); err != nil {
				t.Error(err)
			}
			var s string
			if err := gocb.NewRawStringTranscoder().Decode(r.Value, r.Flags, &s); err != nil {
				t.Errorf("gocb RawStringTranscoder: %v", err)
			} else if s != want {
				t.Errorf("gocb RawStringTranscoder decoded %q, want %q", s, want)
			}
			var legacy any
			if err := gocb.NewLegacyTranscoder().Decode(r.Value, r.Flags, &legacy); err != nil {
				t.Errorf("gocb LegacyTranscoder: %v", err)
			} else if ls, ok := legacy.(string); !ok || ls != want {
				t.Errorf("gocb LegacyTranscoder decoded %T %v, want the string %q", legacy, legacy, want)
			}
		})
	}
}

// kvwire reads what gocb writes: each of gocb's transcoders encodes a value
// (its value and flags are what gocb's Collection.Upsert sends), gocbcore
// stores it, and kvwire's GetJSON and GetResult.ContentAs decode it by its
// flags; a document with legacy flags 0 is JSON; a binary document asked
// for as a struct is an error that says so.
func TestKvwireReadsGocbValues(t *testing.T) {
	c := valuesCluster(t)
	col := kvwireCollection(t, c)
	agent := newAgent(t, c, nil)
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()

	encode := func(tc gocb.Transcoder, v any) ([]byte, uint32) {
		t.Helper()
		b, flags, err := tc.Encode(v)
		if err != nil {
			t.Fatalf("gocb %T.Encode(%T): %v", tc, v, err)
		}
		return b, flags
	}
	set := func(key string, value []byte, flags uint32) { gocbcoreSet(t, agent, key, value, flags) }

	b, f := encode(gocb.NewJSONTranscoder(), sampleProfile)
	set("gocb-json", b, f)
	legacy, err := json.Marshal(sampleProfile)
	if err != nil {
		t.Fatal(err)
	}
	set("gocb-json-legacy", legacy, 0)
	b, f = encode(gocb.NewRawBinaryTranscoder(), quotedBinary)
	set("gocb-binary-quoted", b, f)
	b, f = encode(gocb.NewLegacyTranscoder(), allBytes)
	set("gocb-binary-all", b, f)
	b, f = encode(gocb.NewRawStringTranscoder(), sampleText)
	set("gocb-string", b, f)
	b, f = encode(gocb.NewLegacyTranscoder(), jsonLookingStr)
	set("gocb-string-jsonlike", b, f)

	for _, key := range []string{"gocb-json", "gocb-json-legacy"} {
		p, res, err := client.GetJSON[profile](ctx, col, key, nil)
		if err != nil {
			t.Errorf("GetJSON %s: %v", key, err)
		} else if !reflect.DeepEqual(p, sampleProfile) {
			t.Errorf("GetJSON %s: %#v, want %#v", key, p, sampleProfile)
		}
		var m map[string]any
		if err := res.ContentAs(&m); err != nil || m["name"] != sampleProfile.Name {
			t.Errorf("%s: ContentAs a map: %v %v", key, m, err)
		}
	}

	for key, want := range map[string][]byte{"gocb-binary-quoted": quotedBinary, "gocb-binary-all": allBytes} {
		kvwireReadsBinary(t, ctx, col, key, want)
	}
	for key, want := range map[string]string{"gocb-string": sampleText, "gocb-string-jsonlike": jsonLookingStr} {
		kvwireReadsString(t, ctx, col, key, want)
	}
}

// kvwireReadsBinary checks that kvwire reads the binary document key as
// want: its flags say binary, ContentAs gives the bytes into a []byte and,
// into an any, a []byte (not what JSON would decode), and GetJSON into a
// struct fails (binaryIntoStruct).
func kvwireReadsBinary(t *testing.T, ctx context.Context, col *client.Collection, key string, want []byte) {
	t.Helper()
	res, err := col.Get(ctx, key, nil)
	if err != nil {
		t.Fatalf("Get %s: %v", key, err)
	}
	if err := commonFormat(res.Flags, formatBinary); err != nil {
		t.Errorf("%s as the SDK stored it: %v", key, err)
	}
	var got []byte
	if err := res.ContentAs(&got); err != nil {
		t.Errorf("%s (flags %#08x): ContentAs []byte: %v", key, res.Flags, err)
	} else if !bytes.Equal(got, want) {
		t.Errorf("%s: ContentAs []byte gave %x, want %x", key, got, want)
	}
	var v any
	if err := res.ContentAs(&v); err != nil {
		t.Errorf("%s (flags %#08x): ContentAs any: %v", key, res.Flags, err)
	} else if b, ok := v.([]byte); !ok || !bytes.Equal(b, want) {
		t.Errorf("%s: ContentAs any gave %T %v, want the bytes %x", key, v, v, want)
	}
	binaryIntoStruct(t, ctx, col, key)
}

// kvwireReadsString checks that kvwire reads the string document key as
// want: its flags say string, and ContentAs gives it into a string and,
// into an any, a string (not what JSON would decode).
func kvwireReadsString(t *testing.T, ctx context.Context, col *client.Collection, key, want string) {
	t.Helper()
	res, err := col.Get(ctx, key, nil)
	if err != nil {
		t.Fatalf("Get %s: %v", key, err)
	}
	if err := commonFormat(res.Flags, formatString); err != nil {
		t.Errorf("%s as the SDK stored it: %v", key, err)
	}
	var got string
	if err := res.ContentAs(&got); err != nil {
		t.Errorf("%s (flags %#08x): ContentAs string: %v", key, res.Flags, err)
	} else if got != want {
		t.Errorf("%s: ContentAs string gave %q, want %q", key, got, want)
	}
	var v any
	if err := res.ContentAs(&v); err != nil {
		t.Errorf("%s (flags %#08x): ContentAs any: %v", key, res.Flags, err)
	} else if s, ok := v.(string); !ok || s != want {
		t.Errorf("%s: ContentAs any gave %T %v, want the string %q", key, v, v, want)
	}
}

// binaryIntoStruct checks that GetJSON of the binary document key into a
// struct fails with ErrDecodingFailure and an error that says the value is
// binary.
func binaryIntoStruct(t *testing.T, ctx context.Context, col *client.Collection, key string) {
	t.Helper()
	p, _, err := client.GetJSON[profile](ctx, col, key, nil)
	switch {
	case err == nil:
		t.Errorf("GetJSON[profile] of the binary document %s gave %#v, no error", key, p)
	case !errors.Is(err, client.ErrDecodingFailure):
		t.Errorf("GetJSON[profile] of the binary document %s: %v, want ErrDecodingFailure", key, err)
	case !strings.Contains(strings.ReplaceAll(err.Error(), key, ""), "binary"):
		t.Errorf("GetJSON[profile] of the binary document %s: %q does not say the document is binary", key, err)
	}
}

// nodeValuesReport is what values.js prints.
type nodeValuesReport struct {
	Read map[string]struct {
		Type   string `json:"type"`
		JSON   string `json:"json"`
		String string `json:"string"`
		Base64 string `json:"base64"`
		Flags  uint32 `json:"flags"`
	} `json:"read"`
	Wrote []string `json:"wrote"`
}

// The Node.js SDK and kvwire read each other's documents, both ways in one
// run of values.js: it reads kvwire's documents with its default
// transcoder (JSON as an object, a string as a string, binary as a Buffer
// of the same bytes) and writes an object, strings and Buffers with it,
// which kvwire then reads.
func TestNodeSDKAndKvwireReadEachOthersValues(t *testing.T) {
	script := nodeScript(t, "values.js")
	c := valuesCluster(t)
	col := kvwireCollection(t, c)
	writeKvwireValues(t, col)

	cfg := baseConfig(t, c, false)
	cfg.Mode = "values"
	cfg.ReadKeys = []string{"kv-json-struct", "kv-json-map", "kv-json-raw", "kv-binary-quoted", "kv-binary-all",
		"kv-string", "kv-string-jsonlike"}
	profileJSON, err := json.Marshal(sampleProfile)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Write = []nodeValue{
		{Key: "node-json", Type: "json", JSON: string(profileJSON)},
		{Key: "node-string", Type: "string", String: sampleText},
		{Key: "node-string-jsonlike", Type: "string", String: jsonLookingStr},
		{Key: "node-binary-quoted", Type: "Buffer", Base64: base64.StdEncoding.EncodeToString(quotedBinary)},
		{Key: "node-binary-all", Type: "Buffer", Base64: base64.StdEncoding.EncodeToString(allBytes)},
	}
	var rep nodeValuesReport
	runNode(t, script, cfg, &rep)

	t.Run("node reads kvwire", func(t *testing.T) {
		jsonDoc := func(key string, into any, want any) {
			got, ok := rep.Read[key]
			if !ok {
				t.Errorf("%s: not read", key)
				return
			}
			if err := commonFormat(got.Flags, formatJSON); err != nil {
				t.Errorf("%s: %v", key, err)
			}
			if got.Type != "object" {
				t.Errorf("%s: the SDK decoded a %s, want an object", key, got.Type)
				return
			}
			if err := json.Unmarshal([]byte(got.JSON), into); err != nil {
				t.Errorf("%s: the SDK's object %s: %v", key, got.JSON, err)
			} else if v := reflect.ValueOf(into).Elem().Interface(); !reflect.DeepEqual(v, want) {
				t.Errorf("%s: the SDK decoded %s, want %#v", key, got.JSON, want)
			}
		}
		jsonDoc("kv-json-struct", new(profile), sampleProfile)
		jsonDoc("kv-json-map", new(map[string]any), sampleMap)
		jsonDoc("kv-json-raw", new(any), []any{1.0, "two", map[string]any{"three": 3.0}})

		for key, want := range map[string][]byte{"kv-binary-quoted": quotedBinary, "kv-binary-all": allBytes} {
			got := rep.Read[key]
			if err := commonFormat(got.Flags, formatBinary); err != nil {
				t.Errorf("%s: %v", key, err)
			}
			b, err := base64.StdEncoding.DecodeString(got.Base64)
			if got.Type != "Buffer" || err != nil || !bytes.Equal(b, want) {
				t.Errorf("%s: the SDK decoded a %s (%q %q %q), want a Buffer of %x", key, got.Type, got.Base64, got.String, got.JSON, want)
			}
		}
		for key, want := range map[string]string{"kv-string": sampleText, "kv-string-jsonlike": jsonLookingStr} {
			got := rep.Read[key]
			if err := commonFormat(got.Flags, formatString); err != nil {
				t.Errorf("%s: %v", key, err)
			}
			if got.Type != "string" || got.String != want {
				t.Errorf("%s: the SDK decoded a %s (%q %q %q), want the string %q", key, got.Type, got.String, got.JSON, got.Base64, want)
			}
		}
	})

	t.Run("kvwire reads node", func(t *testing.T) {
		if len(rep.Wrote) != len(cfg.Write) {
			t.Fatalf("values.js wrote %v, want %d documents", rep.Wrote, len(cfg.Write))
		}
		ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
		defer cancel()
		p, res, err := client.GetJSON[profile](ctx, col, "node-json", nil)
		if err != nil {
			t.Errorf("GetJSON node-json: %v", err)
		} else if !reflect.DeepEqual(p, sampleProfile) {
			t.Errorf("GetJSON node-json: %#v, want %#v", p, sampleProfile)
		}
		if err := commonFormat(res.Flags, formatJSON); err != nil {
			t.Errorf("node-json as the SDK stored it: %v", err)
		}

		for key, want := range map[string]string{"node-string": sampleText, "node-string-jsonlike": jsonLookingStr} {
			kvwireReadsString(t, ctx, col, key, want)
		}
		for key, want := range map[string][]byte{"node-binary-quoted": quotedBinary, "node-binary-all": allBytes} {
			kvwireReadsBinary(t, ctx, col, key, want)
		}
	})
}
