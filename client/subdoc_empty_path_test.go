package client

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A lookup spec with an empty path where kv_engine requires one (its
// subdoc traits: SUBDOC_GET and SUBDOC_EXISTS do not allow an empty path,
// "Request must include path"; an xattr path must be a valid xattr key,
// "Request XATTR key invalid") is refused before sending, naming the spec,
// rather than failing the whole LookupIn with the server's EINVAL. The
// empty paths kv_engine takes are still sent: GetSpec("") (the whole body,
// a GET) and CountSpec("") (the root's elements, SUBDOC_GET_COUNT allows
// an empty path).
func TestLookupInSpecWithAnEmptyPathTheServerRefusesIsRefusedFirst(t *testing.T) {
	e := newSubdocEnv(t)
	ctx := context.Background()
	e.seed(t, "doc", `{"a":1,"b":[1,2]}`)
	sent := len(e.rec.attempts())
	for name, tc := range map[string]struct {
		spec LookupInSpec
		text string
	}{
		"ExistsSpec":       {ExistsSpec("", nil), `spec 1 (path ""): ExistsSpec needs a path`},
		"xattr ExistsSpec": {ExistsSpec("", &ExistsSpecOptions{IsXattr: true}), `spec 1 (path ""): ExistsSpec needs a path`},
		"xattr GetSpec":    {GetSpec("", xa()), `spec 1 (path ""): GetSpec needs a path`},
		"xattr CountSpec":  {CountSpec("", &CountSpecOptions{IsXattr: true}), `spec 1 (path ""): CountSpec needs a path`},
	} {
		specs := []LookupInSpec{GetSpec("_x", xa()), tc.spec}
		_, err := e.col.LookupIn(ctx, "doc", specs, nil)
		require.Error(t, err, name)
		assert.ErrorIs(t, err, ErrInvalidArgument, name)
		assert.ErrorContains(t, err, tc.text, name)
		var kv *KeyValueError
		assert.ErrorAs(t, err, &kv, name)
	}
	assert.Equal(t, sent, len(e.rec.attempts()), "nothing was sent")

	r, err := e.col.LookupIn(ctx, "doc", []LookupInSpec{CountSpec("", nil), GetSpec("", nil)}, nil)
	require.NoError(t, err)
	v, err := r.ValueAt(0)
	require.NoError(t, err)
	assert.Equal(t, "2", string(v), "the root's keys")
	v, err = r.ValueAt(1)
	require.NoError(t, err)
	assert.JSONEq(t, `{"a":1,"b":[1,2]}`, string(v))
}
