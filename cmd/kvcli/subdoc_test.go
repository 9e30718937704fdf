package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvwire/kvwire/client"
	"github.com/kvwire/kvwire/mockcluster"
)

func xattrsOf(t *testing.T, mc *mockcluster.Cluster, key string) (string, bool) {
	t.Helper()
	x, deleted, ok := mc.Bucket(mockcluster.DefaultBucket).Xattrs(client.DefaultScope, client.DefaultCollection, key)
	require.True(t, ok, "document %q", key)
	return string(x), deleted
}

// mutate changes paths and extended attributes in one atomic write and
// lookup reads them back, a line per path.
func TestMutateAndLookup(t *testing.T) {
	mc, env := newMock(t, mockcluster.Options{})

	r := runKV(t, env, "", "mutate", "u", "--upsert-doc",
		"upsert-xattr", "txn.id", `"t1"`, "upsert-xattr", "txn.cas", "${Mutation.CAS}",
		"upsert", "name", `"Ada"`, "incr", "visits", "2", "append", "tags", `"a","b"`, "--create-path")
	require.Equal(t, exitOK, r.code, r)
	d, ok := doc(t, mc, "u")
	require.True(t, ok)
	assert.Equal(t, "mutated \"u\" cas="+fmtCas(d.Cas)+"\nvisits\t2\n", r.stdout)
	assert.JSONEq(t, `{"name":"Ada","visits":2,"tags":["a","b"]}`, string(d.Value))
	x, _ := xattrsOf(t, mc, "u")
	assert.Contains(t, x, `"id":"t1"`)
	assert.NotContains(t, x, "Mutation.CAS", "the macro was expanded")

	r = runKV(t, env, "", "lookup", "u", "name", "tags[1]", "--xattr", "txn.id", "")
	require.Equal(t, exitOK, r.code, r)
	assert.Equal(t, "xattr txn.id\t\"t1\"\nname\t\"Ada\"\ntags[1]\t\"b\"\n\"\"\t"+string(d.Value)+"\n", r.stdout,
		"xattrs first, as they were read")

	r = runKV(t, env, "", "lookup", "u", "name", "nope", "visits.x")
	assert.Equal(t, exitError, r.code, "a path that failed otherwise than missing: %s", r)
	assert.Equal(t, "name\t\"Ada\"\nnope\terror: path \"nope\" of \"u\" not found\n"+
		"visits.x\terror: path \"visits.x\" of \"u\": sub-document path mismatch (sub-document spec 2 (path \"visits.x\"): SUBDOC_PATH_MISMATCH)\n", r.stdout)
	r = runKV(t, env, "", "lookup", "u", "name", "nope")
	assert.Equal(t, exitNotFound, r.code, "a missing path: %s", r)

	r = runKV(t, env, "", "lookup", "u", "--exists", "name", "nope")
	assert.Equal(t, exitNotFound, r.code, r)
	assert.Equal(t, "name\ttrue\nnope\tfalse\n", r.stdout)
	r = runKV(t, env, "", "lookup", "u", "--count", "tags")
	require.Equal(t, exitOK, r.code, r)
	assert.Equal(t, "tags\t2\n", r.stdout)

	r = runKV(t, env, "", "lookup", "missing", "name")
	assert.Equal(t, exitNotFound, r.code, r)
	assert.Equal(t, "kvcli: document \"missing\" not found\n", r.stderr)

	// A failing operation changes nothing and says which path failed.
	r = runKV(t, env, "", "mutate", "u", "upsert", "a", "1", "insert", "name", `"Bob"`)
	assert.Equal(t, exitConflict, r.code, r)
	assert.Equal(t, "kvcli: path \"name\" of \"u\" already exists\n", r.stderr)
	r = runKV(t, env, "", "mutate", "u", "replace", "nope", "1")
	assert.Equal(t, exitNotFound, r.code, r)
	assert.Equal(t, "kvcli: path \"nope\" of \"u\" not found\n", r.stderr)
	r = runKV(t, env, "", "mutate", "u", "upsert", "a", "1", "--cas", "0x1")
	assert.Equal(t, exitConflict, r.code, r)
	r = runKV(t, env, "", "mutate", "u", "--insert-doc", "upsert", "a", "1")
	assert.Equal(t, exitConflict, r.code, r)
	r = runKV(t, env, "", "mutate", "new", "upsert", "a", "1")
	assert.Equal(t, exitNotFound, r.code, "replace semantics without --upsert-doc: %s", r)
	d2, _ := doc(t, mc, "u")
	assert.Equal(t, d.Cas, d2.Cas, "the failed mutations changed nothing")

	r = runKV(t, env, "", "mutate", "u", "remove", "")
	require.Equal(t, exitOK, r.code, r)
	_, ok = doc(t, mc, "u")
	assert.False(t, ok, `remove "" deletes the document`)
}

// --json prints one object with a result per path.
func TestLookupMutateJSON(t *testing.T) {
	_, env := newMock(t, mockcluster.Options{})
	r := runKV(t, env, "", "--json", "mutate", "j", "--insert-doc", "upsert", "a", `{"b":[1,2]}`, "incr", "n", "5")
	require.Equal(t, exitOK, r.code, r)
	var m map[string]any
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &m), r.stdout)
	assert.Equal(t, "mutate", m["op"])
	assert.Equal(t, true, m["ok"])
	assert.NotEmpty(t, m["cas"])
	assert.NotNil(t, m["mutation_token"])
	assert.Equal(t, []any{map[string]any{"path": "n", "value": float64(5)}}, m["paths"])

	r = runKV(t, env, "", "--json", "lookup", "j", "a.b", "nope", "--xattr", "$document.exptime")
	assert.Equal(t, exitNotFound, r.code, r)
	var l struct {
		OK    bool       `json:"ok"`
		Cas   string     `json:"cas"`
		Error *jsonError `json:"error"`
		Paths []struct {
			Path  string          `json:"path"`
			Xattr bool            `json:"xattr"`
			Value json.RawMessage `json:"value"`
			Error *jsonError      `json:"error"`
		} `json:"paths"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &l), r.stdout)
	assert.False(t, l.OK, "exit 3 is a failure: ok must say so: %s", r.stdout)
	require.NotNil(t, l.Error, "a failure has an error: %s", r.stdout)
	assert.Equal(t, exitNotFound, l.Error.Exit, "the error's exit is the exit status")
	assert.Equal(t, kindNotFound, l.Error.Kind)
	require.Len(t, l.Paths, 3)
	assert.Equal(t, "$document.exptime", l.Paths[0].Path)
	assert.True(t, l.Paths[0].Xattr)
	assert.Equal(t, "0", string(l.Paths[0].Value))
	assert.Equal(t, "[1,2]", string(l.Paths[1].Value))
	require.NotNil(t, l.Paths[2].Error)
	assert.Equal(t, kindNotFound, l.Paths[2].Error.Kind)
	assert.Equal(t, exitNotFound, l.Paths[2].Error.Exit)

	// --exists answers: a missing path is false, exit 3, as exists
	// answers for a document, and the lookup did not fail.
	r = runKV(t, env, "", "--json", "lookup", "j", "--exists", "a.b", "nope")
	assert.Equal(t, exitNotFound, r.code, r)
	l.Error = nil
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &l), r.stdout)
	assert.True(t, l.OK, r.stdout)
	assert.Nil(t, l.Error, r.stdout)

	r = runKV(t, env, "", "--json", "mutate", "j", "insert", "a", "1")
	assert.Equal(t, exitConflict, r.code, r)
	var f jsonResult
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &f), r.stdout)
	require.NotNil(t, f.Error)
	assert.Equal(t, kindConflict, f.Error.Kind)
	assert.Equal(t, "SUBDOC_MULTI_PATH_FAILURE", f.Error.Status)
}

// A tombstone with system xattrs: lookup --access-deleted reads it, mutate
// --access-deleted changes it, --revive brings it back.
func TestSubdocTombstoneCommands(t *testing.T) {
	mc, env := newMock(t, mockcluster.Options{})
	r := runKV(t, env, "", "mutate", "t", "--insert-doc", "--create-as-deleted", "upsert-xattr", "_txn", `{"staged":1}`)
	require.Equal(t, exitOK, r.code, r)
	assert.Contains(t, r.stdout, "(deleted)")
	_, deleted := xattrsOf(t, mc, "t")
	assert.True(t, deleted)

	r = runKV(t, env, "", "lookup", "t", "--xattr", "_txn.staged")
	assert.Equal(t, exitNotFound, r.code, r)
	r = runKV(t, env, "", "lookup", "t", "--access-deleted", "--xattr", "_txn.staged")
	require.Equal(t, exitOK, r.code, r)
	assert.Equal(t, "xattr _txn.staged\t1\n", r.stdout)
	assert.Equal(t, "\"t\" is deleted (a tombstone)\n", r.stderr)

	r = runKV(t, env, "", "mutate", "t", "--revive", "upsert-xattr", "_txn.staged", "2", "replace", "", `{"live":true}`)
	require.Equal(t, exitOK, r.code, r)
	assert.Equal(t, `{"live":true}`, value(t, mc, "t"))
}

// Command lines mutate and lookup refuse before connecting.
func TestSubdocUsage(t *testing.T) {
	none := with(map[string]string{}, envConnStr, "couchbase://127.0.0.1:1/default")
	seventeen := []string{"lookup", "k"}
	for range client.MaxSubdocSpecs + 1 {
		seventeen = append(seventeen, "p")
	}
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"lookup"}, "lookup takes KEY PATH..., got 0 argument(s)"},
		{[]string{"lookup", "k"}, "no PATH"},
		{seventeen, "17 paths; at most 16"},
		{[]string{"lookup", "k", "a", "--exists", "--count"}, "exclude each other"},
		{[]string{"mutate", "k"}, "no operation"},
		{[]string{"mutate", "k", "frob", "a"}, `unknown operation "frob"`},
		{[]string{"mutate", "k", "upsert", "a"}, "upsert needs PATH and VALUE"},
		{[]string{"mutate", "k", "upsert", "a", "1", "upsert-xattr", "x", "1"}, "extended attributes come first"},
		{[]string{"mutate", "k", "incr", "a", "x"}, "want a decimal int64 delta"},
		{[]string{"mutate", "k", "upsert", "a", "1", "--upsert-doc", "--insert-doc"}, "exclude each other"},
		{[]string{"mutate", "k", "upsert", "a", "1", "--create-as-deleted"}, "needs --upsert-doc or --insert-doc"},
		{[]string{"mutate", "k", "upsert", "a", "1", "--insert-doc", "--cas", "1"}, "--insert-doc takes no --cas"},
	}
	for _, c := range cases {
		r := runKV(t, none, "", c.args...)
		assert.Equal(t, exitUsage, r.code, "%v: %s", c.args, r)
		assert.Contains(t, r.stderr, c.want, "%v", c.args)
		assert.False(t, strings.Contains(r.stderr, "nothing is listening"), "%v: refused before connecting", c.args)
	}
}

// lookup --json of a body that is not JSON (a binary document's whole
// body) prints it as get does, not an invalid object.
func TestLookupJSONOfBinaryBody(t *testing.T) {
	_, env := newMock(t, mockcluster.Options{})
	r := runKV(t, env, "", "set", "bin", "\xff\x00raw")
	require.Equal(t, exitOK, r.code, r)
	r = runKV(t, env, "", "--json", "lookup", "bin", "")
	require.Equal(t, exitOK, r.code, r)
	var out struct {
		Paths []jsonPath `json:"paths"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &out), r.stdout)
	require.Len(t, out.Paths, 1)
	require.NotNil(t, out.Paths[0].Raw)
	assert.Equal(t, "base64", out.Paths[0].Encoding)
	assert.Equal(t, "/wByYXc=", *out.Paths[0].Raw)
}
