package client

import (
	"context"
	"fmt"
	"net"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvwire/kvwire/internal/memcachedtest"
)

// textValues is a multi-get's answer giving each key "v-"+key (what
// batchKeys stored), then END.
func textValues(keys []string) string {
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "VALUE %s 0 %d 1\r\nv-%s\r\n", k, len("v-"+k), k)
	}
	b.WriteString("END\r\n")
	return b.String()
}

// A memcached answers "gets k0 .. k9" with k0..k2 and END; later, while
// that text connection sits idle in the client's pool, it sends k3..k9
// (their values as of that request) and END. The caller then writes
// k3..k9 anew (acknowledged) and reads all ten again: bytes that arrived
// on an idle text connection are a protocol violation, so the connection
// is closed when a batch takes it, before anything is sent on it, and the
// batch reads its keys another way: every key has its new value, none the
// old one the late answer carried.
func TestGetManyMemcachedTextLateAnswerOnIdleConnectionIsNotRead(t *testing.T) {
	f := newTextFront(t, memcachedtest.Start(t))
	c := textClient(t, f.addr(), nil)
	col := c.DefaultCollection()
	ctx := context.Background()
	keys := batchKeys(t, col, "late", 10, 10)
	warmText(t, c, keys[0])
	release := make(chan struct{})
	late := make(chan net.Conn, 1)
	f.setOnGets(func(ks []string) textAction {
		return textAction{reply: textValues(ks[:3]), hold: release, later: textValues(ks[3:]), late: late}
	})
	res := col.GetMany(ctx, keys, nil)
	for _, r := range res[:3] {
		require.NoError(t, r.Err, r.Key)
	}
	f.setOnGets(nil)
	close(release)
	front := <-late
	waitFor(t, "the late answer at the client", func() bool { return unacked(t, front) == 0 })
	for _, k := range keys[3:] {
		_, err := col.Upsert(ctx, k, []byte("new-"+k), nil)
		require.NoError(t, err)
	}
	for i, r := range col.GetMany(ctx, keys, nil) {
		require.NoError(t, r.Err, r.Key)
		want := "v-" + r.Key
		if i >= 3 {
			want = "new-" + r.Key
		}
		assert.Equal(t, want, string(r.Value), r.Key)
	}
}

// An answer that ends malformed (here: bytes after its END) gives no hit,
// not even for the items before the fault, which may be as stale as what
// follows them: the server's keys are read again by binary gets, with
// their values, not the ones the malformed answer carried.
func TestGetManyMemcachedTextMalformedAnswerGivesNoHit(t *testing.T) {
	f := newTextFront(t, memcachedtest.Start(t))
	c := textClient(t, f.addr(), nil)
	col := c.DefaultCollection()
	keys := batchKeys(t, col, "malformed", 6, 6)
	warmText(t, c, keys[0])
	f.setOnGets(func(ks []string) textAction {
		return textAction{reply: fmt.Sprintf("VALUE %s 0 5\r\nstale\r\nEND\r\nEND\r\n", ks[0])}
	})
	requireStored(t, col.GetMany(context.Background(), keys, nil), 6)
	assert.Equal(t, int32(1), f.multigets.Load())
}

// A memcached sends, just as a multi-get arrives and before it answers it,
// bytes that look like that multi-get's answer (here: every key with the
// value "old", as a late answer to an earlier multi-get of the same keys
// would carry), and holds the real answer back. They arrived after the
// text connection was taken from the pool, so no idle check saw them: a
// multi-get's answer must begin with the answer to the sentinel sent just
// before it, so they are a foreign answer, the text connection is closed,
// and the batch reads its keys again as binary gets. Every key has its
// value, none "old".
func TestGetManyMemcachedTextStrayAnswerAtTheMultiGetIsNotRead(t *testing.T) {
	f := newTextFront(t, memcachedtest.Start(t))
	c := textClient(t, f.addr(), nil)
	col := c.DefaultCollection()
	keys := batchKeys(t, col, "stray", 10, 10)
	warmText(t, c, keys[0])
	release := make(chan struct{})
	f.setOnGets(func(ks []string) textAction {
		var b strings.Builder
		for _, k := range ks {
			fmt.Fprintf(&b, "VALUE %s 0 3 1\r\nold\r\n", k)
		}
		b.WriteString("END\r\n")
		return textAction{stray: b.String(), strayHold: release}
	})
	res := col.GetMany(context.Background(), keys, nil)
	f.setOnGets(nil)
	close(release)
	require.Equal(t, int32(1), f.multigets.Load(), "the keys were asked as a text multi-get")
	for _, r := range res {
		require.NoError(t, r.Err, r.Key)
		assert.Equal(t, "v-"+r.Key, string(r.Value), "%s: a value the server sent before it read the multi-get", r.Key)
	}
}
