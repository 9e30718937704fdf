package projection

import (
	"encoding/json"
	"testing"

	"github.com/kvwire/kvwire/internal/kverr"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParse(t *testing.T) {
	k := func(s string) Component { return Component{key: s} }
	ix := func(i int) Component { return Component{index: i, isIdx: true} }
	good := []struct {
		in   string
		want Path
	}{
		{"a", Path{k("a")}},
		{"a.b.c", Path{k("a"), k("b"), k("c")}},
		{"a[1]", Path{k("a"), ix(1)}},
		{"a[1][-1].b", Path{k("a"), ix(1), ix(-1), k("b")}},
		{"`a.b[c]`.d", Path{k("a.b[c]"), k("d")}},
		{"`x``y`", Path{k("x`y")}},
		{"[0].a", Path{ix(0), k("a")}},
	}
	for _, g := range good {
		got, err := Parse(g.in)
		require.NoError(t, err, g.in)
		assert.Equal(t, g.want, got, g.in)
	}
	for _, bad := range []string{"", "a.", ".a", "a..b", "a[", "a[x]", "a[-2]", "a]b", "`a", "a`b`", "a[1]b"} {
		_, err := Parse(bad)
		assert.Error(t, err, "%q", bad)
	}
}

// A plan reads one spec per path up to the limit, and the whole document
// past it; picking paths from the document fails with the sentinel the
// server would have given.
func TestPlan(t *testing.T) {
	_, err := NewPlan([]string{"a", "b["}, 2)
	require.Error(t, err, "a path that does not parse")

	p, err := NewPlan([]string{"a", "b.c"}, 2)
	require.NoError(t, err)
	assert.False(t, p.Whole())
	assert.Equal(t, []string{"a", "b.c"}, p.Specs())
	out, err := p.Build([]json.RawMessage{json.RawMessage(`1`), nil})
	require.NoError(t, err)
	assert.JSONEq(t, `{"a":1}`, string(out))

	p, err = NewPlan([]string{"a", "b.c", "d"}, 2)
	require.NoError(t, err)
	assert.True(t, p.Whole())
	assert.Equal(t, []string{""}, p.Specs())
	values, sentinel, err := p.FromDocument([]byte(`{"a":1,"b":{"c":[2]}}`))
	require.NoError(t, err)
	assert.Nil(t, sentinel)
	out, err = p.Build(values)
	require.NoError(t, err)
	assert.JSONEq(t, `{"a":1,"b":{"c":[2]}}`, string(out))

	_, sentinel, err = p.FromDocument([]byte(`not json`))
	require.Error(t, err)
	assert.Equal(t, kverr.ErrDocumentNotJSON, sentinel)
	_, sentinel, err = p.FromDocument([]byte(`{"b":"text"}`))
	require.Error(t, err)
	assert.Equal(t, kverr.ErrPathMismatch, sentinel)
}
