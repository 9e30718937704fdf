package conn

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvwire/kvwire/internal/memcachedtest"
	"github.com/kvwire/kvwire/memdx"
)

// memcached 1.6 takes a multi-get line of any length (over its 2048-byte
// line limit, and over 1 MB): every key is answered, in order.
func TestTextConnMultiGetOfAMegabyteLine(t *testing.T) {
	addr := memcachedtest.Start(t)
	ctx := testCtx(t)
	c, err := Dial(ctx, addr, Options{Memcached: true})
	require.NoError(t, err)
	defer c.Close()
	const n = 6000
	keys := make([][]byte, n)
	for i := range keys {
		keys[i] = []byte(fmt.Sprintf("%0240d", i))
	}
	for i := 0; i < n; i += 7 {
		wantStatus(t, op(t, c, memdx.NewStore(memdx.OpSet, keys[i], []byte(fmt.Sprint(i)), 0, 60)), memdx.StatusSuccess)
	}
	tc, err := DialText(ctx, addr, Options{})
	require.NoError(t, err)
	defer tc.Close()
	for range 2 {
		require.NoError(t, tc.SendGets(time.Now().Add(testTimeout), keys))
		got := 0
		err = tc.ReadGets(ctx, time.Now().Add(testTimeout), keys, func(i int, v *memdx.TextValue) {
			require.Equal(t, fmt.Sprint(i), string(v.Value))
			require.Zero(t, i%7)
			got++
		})
		require.NoError(t, err)
		require.Equal(t, (n+6)/7, got)
	}
}
