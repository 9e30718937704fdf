package projection

import (
	"testing"

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
