package client

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvwire/kvwire/mockcluster"
)

// Get with Project returns the paths as one object shaped like the
// document, whether it reads them as specs (16 or fewer) or picks them out
// of the whole body (more).
func TestGetWithProjection(t *testing.T) {
	e := newSubdocEnv(t)
	ctx := context.Background()
	up := e.seed(t, "p", `{"name":"Ada","address":{"city":"Paris","zip":"75001"},"tags":["a","b","c"],"n":1.50,"x.y":true}`)
	want := `{"name":"Ada","address":{"city":"Paris"},"tags":["b"],"x.y":true}`
	paths := []string{"name", "address.city", "tags[1]", "missing", "address.nope", "`x.y`"}

	r, err := e.col.Get(ctx, "p", &GetOptions{Project: paths})
	require.NoError(t, err)
	assert.JSONEq(t, want, string(r.Value))
	assert.Equal(t, `{"name":"Ada","address":{"city":"Paris"},"tags":["b"],"x.y":true}`, string(r.Value), "in the order asked")
	assert.Equal(t, up.Cas, r.Cas)
	assert.Equal(t, uint32(0x02000000), r.Flags)

	many := append([]string{}, paths...)
	for i := len(many); i <= MaxSubdocSpecs; i++ {
		many = append(many, fmt.Sprintf("absent%d", i))
	}
	require.Greater(t, len(many), MaxSubdocSpecs)
	sent := len(e.rec.attempts())
	r, err = e.col.Get(ctx, "p", &GetOptions{Project: many})
	require.NoError(t, err)
	assert.Equal(t, want, string(r.Value), "more paths than a LookupIn holds: the same object")
	assert.Equal(t, sent+1, len(e.rec.attempts()), "one request")

	r, err = e.col.Get(ctx, "p", &GetOptions{Project: append(many, "n")})
	require.NoError(t, err)
	assert.Contains(t, string(r.Value), `"n":1.50`, "numbers as written")

	_, err = e.col.Get(ctx, "p", &GetOptions{Project: []string{"name.first"}})
	assert.ErrorIs(t, err, ErrPathMismatch)
	_, err = e.col.Get(ctx, "p", &GetOptions{Project: append(many, "name.first")})
	assert.ErrorIs(t, err, ErrPathMismatch)
	_, err = e.col.Get(ctx, "missing", &GetOptions{Project: paths})
	assert.ErrorIs(t, err, ErrDocumentNotFound)
	_, err = e.col.Get(ctx, "p", &GetOptions{Project: []string{"a["}})
	assert.ErrorIs(t, err, ErrInvalidArgument)
	var kv *KeyValueError
	assert.ErrorAs(t, err, &kv)
}

// countingTranscoder is JSONTranscoder counting its Decode calls.
type countingTranscoder struct {
	JSONTranscoder
	decodes *atomic.Int32
}

func (c countingTranscoder) Decode(value []byte, flags uint32, out any) error {
	c.decodes.Add(1)
	return c.JSONTranscoder.Decode(value, flags, out)
}

// A projected Get's ContentAs decodes with the client's Transcoder, as a
// plain Get's does, whether the paths were read as specs or picked out of
// the whole body.
func TestProjectionContentAsUsesTheClientTranscoder(t *testing.T) {
	var decodes atomic.Int32
	mc := newMock(t, mockcluster.Options{})
	col := connect(t, mc, &Options{Transcoder: countingTranscoder{decodes: &decodes}}).DefaultCollection()
	ctx := context.Background()
	_, err := col.Upsert(ctx, "p", []byte(`{"name":"n","address":{"city":"Paris"}}`), &UpsertOptions{JSON: true})
	require.NoError(t, err)
	many := []string{"name", "address.city"}
	for i := range MaxSubdocSpecs {
		many = append(many, fmt.Sprintf("missing%d", i))
	}
	for i, project := range [][]string{{"name", "address.city"}, many} {
		r, err := col.Get(ctx, "p", &GetOptions{Project: project})
		require.NoError(t, err)
		assert.Equal(t, CommonFlagsJSON, r.Flags)
		var got struct {
			Name    string
			Address struct{ City string }
		}
		require.NoError(t, r.ContentAs(&got))
		assert.Equal(t, "n", got.Name)
		assert.Equal(t, "Paris", got.Address.City)
		assert.Equal(t, int32(i+1), decodes.Load(), "ContentAs used the client's Transcoder")
	}
}
