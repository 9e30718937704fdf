package main

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvwire/kvwire/mockcluster"
)

// TestRedactLine: the sink's backstop masks the password wherever it is,
// except a whole word of prose when the password is a plain word (which
// cannot be told from kvcli's own text).
func TestRedactLine(t *testing.T) {
	for _, tc := range []struct{ password, in, want string }{
		{"password", "check the user name and password (KVCLI_PASSWORD)", "check the user name and password (KVCLI_PASSWORD)"},
		{"password", "password: shows in the process list", "password: shows in the process list"},
		{"password", `bad "password".`, `bad "password".`},
		{"password", "couchbase://user:password@h/b", "couchbase://user:****@h/b"},
		{"password", "mypassword1", "my****1"},
		{"password", "x=password&y", "x=****&y"},
		{"s3cr3t-Pa55word", "echoed s3cr3t-Pa55word here", "echoed **** here"},
		{"s3cr3t-Pa55word", "s3cr3t-Pa55word", "****"},
		{"Pässwörd", "a Pässwörd b", "a Pässwörd b"},
		{"Pässwörd", "xPässwörd", "x****"},
		{"pw", "pw is too short to mask", "pw is too short to mask"},
		{"", "nothing to mask", "nothing to mask"},
	} {
		inv := &invocation{}
		inv.g.password = tc.password
		assert.Equal(t, tc.want, inv.redactLine(tc.in), "password %q", tc.password)
	}

	// redact, for values, masks every occurrence, words included.
	inv := &invocation{}
	inv.g.password = "password"
	assert.Equal(t, "wrong ****", inv.redact("wrong password"))
	args := inv.redactArgs([]any{"a password", errors.New("the password"), 7})
	assert.Equal(t, []any{"a ****", "the ****", 7}, args)
}

// TestPasswordNeverPrinted runs commands whose diagnostics would carry the
// password if some layer echoed it, with a password that is a plain word
// and one that is not, and checks that kvcli's own text stays readable.
func TestPasswordNeverPrinted(t *testing.T) {
	_, env := newMock(t, mockcluster.Options{})

	t.Run("the mock's password is the word password", func(t *testing.T) {
		require.Equal(t, mockcluster.DefaultPassword, "password", "this test is about a password that is a word of kvcli's text")
		r := runKV(t, with(env, envUser, "nobody"), "", "get", "k", "--json")
		assert.Equal(t, exitError, r.code, r)
		want := `authentication failed for user "nobody" (from KVCLI_USER): check the user name and password (KVCLI_PASSWORD)`
		assert.Equal(t, "kvcli: "+want+"\n", r.stderr, "kvcli's own words are not masked")
		var jr jsonResult
		require.NoError(t, json.Unmarshal([]byte(r.stdout), &jr), r.stdout)
		require.NotNil(t, jr.Error)
		assert.Equal(t, want, jr.Error.Message)

		r = runKV(t, env, "", "get", "missing", "-v")
		assert.Equal(t, exitNotFound, r.code, r)
		assert.NotContains(t, r.stderr, "****", "nothing to mask in a normal -v run: %s", r.stderr)

		r = runKV(t, with(env, envPassword, ""), "", "get", "k", "-p", "password")
		assert.Contains(t, r.stderr, "kvcli: warning: -p shows the password in the process list; set KVCLI_PASSWORD instead\n")
	})

	for _, secret := range []string{"sekrit", "s3cr3t-Pa55word"} {
		t.Run(secret, func(t *testing.T) {
			e := with(env, envPassword, secret)
			// The connection string's error quotes the option: a value,
			// so it is masked even when the secret is a plain word.
			for _, args := range [][]string{
				{"get", "k", "-c", "couchbase://127.0.0.1:1/default?" + secret + "=1"},
				{"get", "k", "-c", "couchbase://127.0.0.1:1/default?" + secret + "=1", "--json"},
				{"get", "k", "--collection", secret + ".x.y"},
				{"get", secret, "-v"},
				{"set", "k", "v", "-v", "--json"},
				{"get", "k", "-b", secret, "-v"},
			} {
				r := runKV(t, e, "", args...)
				assert.NotEqual(t, exitOK, r.code, "%v: %s", args, r)
				assert.NotContains(t, r.stderr+r.stdout, secret, "%v: the password is never printed", args)
			}
			r := runKV(t, e, "", "get", "k", "-c", "couchbase://127.0.0.1:1/default?"+secret+"=1")
			assert.Equal(t, exitUsage, r.code, r)
			assert.Contains(t, r.stderr, `unknown option "****"`)
		})
	}
}
