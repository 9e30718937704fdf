package nodereq

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvwire/kvwire/memdx"
)

type node string

func (n node) Addr() string { return string(n) }

// A call goes to every node, or to the one its options name; a name that
// is no node's is refused.
func TestSelect(t *testing.T) {
	nodes := []node{"a:1", "b:2", "c:3"}
	got, ok := Select(nodes, "")
	assert.True(t, ok)
	assert.Equal(t, nodes, got)
	got, ok = Select(nodes, "b:2")
	assert.True(t, ok)
	assert.Equal(t, []node{"b:2"}, got)
	_, ok = Select(nodes, "d:4")
	assert.False(t, ok)
}

// STAT's answers are kept by name until the one without a key; VERSION's
// answer is its value; a failed answer is left to the engine.
func TestHandle(t *testing.T) {
	s := Stats{}
	for _, p := range []*memdx.Packet{
		{Status: memdx.StatusSuccess, Key: []byte("pid"), Value: []byte("42")},
		{Status: memdx.StatusSuccess, Key: []byte("uptime"), Value: []byte("7")},
		{Status: memdx.StatusSuccess},
	} {
		done, err := s.Handle(p)
		require.NoError(t, err)
		assert.True(t, done)
	}
	assert.Equal(t, Stats{"pid": "42", "uptime": "7"}, s)
	done, err := s.Handle(&memdx.Packet{Status: memdx.StatusKeyNotFound})
	assert.False(t, done)
	assert.NoError(t, err)

	var v Version
	done, err = v.Handle(&memdx.Packet{Status: memdx.StatusKeyNotFound, Value: []byte("x")})
	assert.False(t, done)
	assert.NoError(t, err)
	assert.Empty(t, v.Version)
	done, err = v.Handle(&memdx.Packet{Status: memdx.StatusSuccess, Value: []byte("1.6.18")})
	assert.True(t, done)
	assert.NoError(t, err)
	assert.Equal(t, "1.6.18", v.Version)
}

// FLUSH goes at once without extras, or delayed with the expiry as its
// 4-byte extras.
func TestFlush(t *testing.T) {
	assert.Nil(t, Flush(nil).Extras)
	req := Flush(FlushExtras(30))
	assert.Equal(t, memdx.OpFlush, req.OpCode)
	assert.Equal(t, []byte{0, 0, 0, 30}, req.Extras)
}
