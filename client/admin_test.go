package client

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvwire/kvwire/internal/faultnode"
	"github.com/kvwire/kvwire/internal/memcachedtest"
	"github.com/kvwire/kvwire/memdx"
	"github.com/kvwire/kvwire/mockcluster"
)

// Stats and Version against Debian's memcached (the shared instance:
// reading statistics changes nothing).
func TestMemcachedStatsAndVersion(t *testing.T) {
	addr := memcachedAddr(t, false)
	ctx := context.Background()
	c, err := Connect(ctx, "memcached://"+addr, testOptions(nil))
	require.NoError(t, err)
	defer c.Close()
	_, err = c.DefaultCollection().Upsert(ctx, fmt.Sprintf("kvwire-stats-%d", time.Now().UnixNano()), []byte("x"),
		&UpsertOptions{Expiry: time.Minute})
	require.NoError(t, err)

	v, err := c.Version(ctx, nil)
	require.NoError(t, err)
	require.Len(t, v, 1)
	assert.Equal(t, addr, v[0].Node)
	assert.Regexp(t, `^1\.\d+\.\d+`, v[0].Version)

	s, err := c.Stats(ctx, "", nil)
	require.NoError(t, err)
	require.Len(t, s, 1)
	assert.Equal(t, v[0].Version, s[0].Stats["version"], "the default group")
	assert.NotEmpty(t, s[0].Stats["curr_items"])
	for group, stat := range map[string]string{"settings": "maxbytes", "items": "items:1:number", "slabs": "active_slabs"} {
		s, err = c.Stats(ctx, group, &StatsOptions{Node: addr})
		require.NoError(t, err, group)
		assert.Contains(t, s[0].Stats, stat, group)
	}
	s, err = c.Stats(ctx, "no-such-group", nil)
	require.ErrorIs(t, err, ErrInvalidArgument)
	require.ErrorIs(t, s[0].Err, ErrInvalidArgument)
	assert.Nil(t, s[0].Stats)

	_, err = c.Stats(ctx, "", &StatsOptions{Node: "127.0.0.1:1"})
	assert.ErrorIs(t, err, ErrInvalidArgument, "a node not in the topology")
}

// Flush on a memcached of the test's own: a delayed flush leaves the items
// for now, a flush without delay drops them at once.
func TestMemcachedFlush(t *testing.T) {
	addr := memcachedtest.Start(t)
	ctx := context.Background()
	c, err := Connect(ctx, "memcached://"+addr, testOptions(nil))
	require.NoError(t, err)
	defer c.Close()
	col := c.DefaultCollection()
	for i := range 10 {
		_, err := col.Upsert(ctx, fmt.Sprintf("k%d", i), []byte("v"), nil)
		require.NoError(t, err)
	}

	r, err := c.Flush(ctx, &FlushOptions{Delay: time.Hour})
	require.NoError(t, err)
	require.Equal(t, []NodeResult{{Node: addr}}, r)
	_, err = col.Get(ctx, "k3", nil)
	require.NoError(t, err, "a flush in an hour leaves the items for now")

	_, err = c.Flush(ctx, nil)
	require.NoError(t, err)
	for i := range 10 {
		_, err := col.Get(ctx, fmt.Sprintf("k%d", i), nil)
		require.ErrorIs(t, err, ErrDocumentNotFound)
	}
	s, err := c.Stats(ctx, "", nil)
	require.NoError(t, err)
	assert.Equal(t, "2", s[0].Stats["cmd_flush"])

	_, err = c.Flush(ctx, &FlushOptions{Delay: -time.Second})
	assert.ErrorIs(t, err, ErrInvalidArgument)
}

// memcached started with -F (flush_all disabled) answers FLUSH with
// AUTH_ERROR, its only refusal (proto_bin.c, process_bin_flush) on a
// connection that is allowed everything else: Flush's error says the
// server does not allow it, not that the credentials were refused (there
// are none here).
func TestMemcachedFlushDisabled(t *testing.T) {
	addr := memcachedtest.StartArgs(t, "-F")
	ctx := context.Background()
	c, err := Connect(ctx, "memcached://"+addr, testOptions(nil))
	require.NoError(t, err)
	defer c.Close()
	_, err = c.DefaultCollection().Upsert(ctx, "k", []byte("v"), nil)
	require.NoError(t, err)

	r, err := c.Flush(ctx, nil)
	require.Error(t, err)
	require.Len(t, r, 1)
	assert.ErrorIs(t, r[0].Err, ErrFeatureNotAvailable)
	assert.NotErrorIs(t, r[0].Err, ErrAuthenticationFailure)
	assert.Contains(t, r[0].Err.Error(), "disabled")
	_, err = c.DefaultCollection().Get(ctx, "k", nil)
	assert.NoError(t, err, "the connection still serves")
}

// memcached 1.6 answers the binary STAT "sizes_enable" and "sizes_disable"
// with one statistic and never the keyless packet that ends a STAT answer
// (it does switch the tracking): Stats would wait for its timeout and then
// say the request was not applied. They are refused before anything is
// sent.
func TestMemcachedStatsSizesSwitchRefused(t *testing.T) {
	addr := memcachedtest.Start(t)
	ctx := context.Background()
	c, err := Connect(ctx, "memcached://"+addr, testOptions(nil))
	require.NoError(t, err)
	defer c.Close()
	for _, g := range []string{"sizes_enable", "sizes_disable"} {
		_, err := c.Stats(ctx, g, &StatsOptions{Timeout: 300 * time.Millisecond})
		require.ErrorIs(t, err, ErrFeatureNotAvailable, g)
		assert.NotErrorIs(t, err, ErrTimeout, g)
		assert.Contains(t, err.Error(), "text protocol", g)
	}
	s, err := c.Stats(ctx, "sizes", nil)
	require.NoError(t, err)
	assert.Equal(t, "disabled", s[0].Stats["sizes_status"], "nothing was sent")
}

// Several servers: each is asked and answers on its own; Node picks one.
func TestMemcachedAdminPerServer(t *testing.T) {
	a, b := memcachedtest.Start(t), memcachedtest.Start(t)
	ctx := context.Background()
	c, err := Connect(ctx, "memcached://"+a+","+b, testOptions(nil))
	require.NoError(t, err)
	defer c.Close()
	v, err := c.Version(ctx, nil)
	require.NoError(t, err)
	require.Len(t, v, 2)
	assert.ElementsMatch(t, []string{a, b}, []string{v[0].Node, v[1].Node})

	// Flush one server only.
	col := c.DefaultCollection()
	for i := range 20 { // both servers get some (ketama)
		_, err := col.Upsert(ctx, fmt.Sprintf("k%d", i), []byte("v"), nil)
		require.NoError(t, err)
	}
	_, err = c.Flush(ctx, &FlushOptions{Node: a})
	require.NoError(t, err)
	sa, err := c.Stats(ctx, "", &StatsOptions{Node: a})
	require.NoError(t, err)
	sb, err := c.Stats(ctx, "", &StatsOptions{Node: b})
	require.NoError(t, err)
	assert.Equal(t, "1", sa[0].Stats["cmd_flush"])
	assert.Equal(t, "0", sb[0].Stats["cmd_flush"])
	assert.NotEqual(t, "0", sb[0].Stats["curr_items"], "b kept its items")
}

// On Couchbase (the mock): Stats and Version per node; Flush is refused
// without sending anything.
func TestCouchbaseAdmin(t *testing.T) {
	mc := newMock(t, mockcluster.Options{})
	c := connect(t, mc, nil)
	ctx := context.Background()
	v, err := c.Version(ctx, nil)
	require.NoError(t, err)
	require.Len(t, v, 3)
	for _, nv := range v {
		assert.Equal(t, mockcluster.DefaultVersion, nv.Version)
	}
	s, err := c.Stats(ctx, "", nil)
	require.NoError(t, err)
	require.Len(t, s, 3)
	for _, ns := range s {
		assert.Equal(t, mockcluster.DefaultVersion, ns.Stats["version"], ns.Node)
		assert.Contains(t, ns.Stats, "curr_items")
	}
	s, err = c.Stats(ctx, "settings", nil)
	assert.ErrorIs(t, err, ErrInvalidArgument, "the mock knows only the default group")
	assert.Len(t, s, 3)

	_, err = c.Flush(ctx, nil)
	require.ErrorIs(t, err, ErrFeatureNotAvailable)
	for _, n := range mc.Nodes() {
		assert.Zero(t, n.RequestCount(memdx.OpFlush))
	}

	// A node that does not answer in time has its own error.
	mc.AddFault(mockcluster.Fault{Match: mockcluster.Match{Nodes: []int{1}, OpCodes: []memdx.OpCode{memdx.OpVersion}},
		Action: mockcluster.Action{Status: memdx.StatusNoAccess}, Times: 1})
	v, err = c.Version(ctx, nil)
	require.ErrorIs(t, err, ErrNoAccess)
	failed := 0
	for _, nv := range v {
		if nv.Err != nil {
			failed++
			assert.ErrorIs(t, nv.Err, ErrNoAccess)
			assert.Empty(t, nv.Version)
		} else {
			assert.Equal(t, mockcluster.DefaultVersion, nv.Version)
		}
	}
	assert.Equal(t, 1, failed)
}

// A FLUSH the server applied but whose answer never came back is reported
// as possibly applied (ErrAmbiguous; at the deadline ErrAmbiguousTimeout),
// never as a request that was not applied, and is sent once: the proxy
// drops memcached's answer, then either the timeout passes or the
// connection is reset.
func TestMemcachedFlushWithoutAnswerIsAmbiguous(t *testing.T) {
	t.Parallel()
	for _, end := range []string{"timeout", "connection reset"} {
		t.Run(end, func(t *testing.T) {
			addr := memcachedtest.Start(t)
			p := startProxy(t, addr)
			answered := make(chan struct{}, 1)
			p.OnResponse(func(req, _ *memdx.Packet) faultnode.Action {
				if req.OpCode != memdx.OpFlush {
					return faultnode.Action{}
				}
				answered <- struct{}{}
				return faultnode.Action{Drop: true}
			})
			ctx := context.Background()
			c, err := Connect(ctx, "memcached://"+p.addr, testOptions(nil))
			require.NoError(t, err)
			defer c.Close()
			col := c.DefaultCollection()
			_, err = col.Upsert(ctx, "k", []byte("v"), nil)
			require.NoError(t, err)

			opts := &FlushOptions{}
			if end == "timeout" {
				// The answer is dropped: this deadline always passes.
				opts.Timeout = 200 * time.Millisecond
			} else {
				opts.Timeout = time.Minute
				go func() {
					<-answered
					p.Reset()
				}()
			}
			res, err := c.Flush(ctx, opts)
			require.Error(t, err)
			require.Len(t, res, 1)
			for _, e := range []error{err, res[0].Err} {
				assert.ErrorIs(t, e, ErrAmbiguous, "%v", e)
				var kv *KeyValueError
				require.ErrorAs(t, e, &kv)
				assert.True(t, kv.Ambiguous)
				assert.Equal(t, "Flush", kv.Op)
				if end == "timeout" {
					assert.ErrorIs(t, e, ErrAmbiguousTimeout)
					assert.NotErrorIs(t, e, ErrUnambiguousTimeout)
				} else {
					assert.NotErrorIs(t, e, ErrNoNodeAvailable, "the request reached a connection")
				}
			}
			assert.Equal(t, 1, p.Requests(memdx.OpFlush), "sent once")
			_, err = col.Get(ctx, "k", nil)
			assert.ErrorIs(t, err, ErrDocumentNotFound, "the flush was applied")
		})
	}
}

// A STAT group the server does not know fails with ErrInvalidArgument
// naming the group. Couchbase Server and memcached answer KEY_ENOENT with
// no error context: the error said "invalid argument (status 0x01
// KEY_ENOENT)", nothing of which argument.
func TestStatsUnknownGroupIsNamed(t *testing.T) {
	mc := newMock(t, mockcluster.Options{})
	c := connect(t, mc, nil)
	mc.AddFault(mockcluster.Fault{Match: mockcluster.Match{OpCodes: []memdx.OpCode{memdx.OpStat}},
		Action: mockcluster.Action{Status: memdx.StatusKeyNotFound, Value: []byte{}}})
	s, err := c.Stats(context.Background(), "no-such-group", nil)
	require.ErrorIs(t, err, ErrInvalidArgument)
	require.Len(t, s, 3)
	for _, ns := range s {
		require.ErrorIs(t, ns.Err, ErrInvalidArgument)
		var kv *KeyValueError
		require.ErrorAs(t, ns.Err, &kv)
		assert.Equal(t, StatusKeyNotFound, kv.Status)
		assert.Contains(t, ns.Err.Error(), `"no-such-group"`)
		var se *memdx.StatusError
		assert.ErrorAs(t, ns.Err, &se, "the status error is still the cause")
	}
}

// A STAT key with arguments answered KEY_ENOENT need not be an unknown
// group: kv_engine answers "key <doc> <vb>" (and "vkey") so for a document
// that does not exist. The error must not say the server has no such
// statistics group: it names what was asked and both readings.
func TestStatsKeyNotFoundWithArgumentsIsNotCalledAnUnknownGroup(t *testing.T) {
	mc := newMock(t, mockcluster.Options{})
	c := connect(t, mc, nil)
	mc.AddFault(mockcluster.Fault{Match: mockcluster.Match{OpCodes: []memdx.OpCode{memdx.OpStat}},
		Action: mockcluster.Action{Status: memdx.StatusKeyNotFound, Value: []byte{}}})
	_, err := c.Stats(context.Background(), "key no-such-doc 7", nil)
	require.ErrorIs(t, err, ErrInvalidArgument)
	assert.NotContains(t, err.Error(), `no statistics group "key no-such-doc 7"`, "the group exists: its argument names nothing")
	assert.Contains(t, err.Error(), `"key no-such-doc 7"`)
	assert.Contains(t, err.Error(), `group "key"`)
	var se *memdx.StatusError
	assert.ErrorAs(t, err, &se, "the status error is still the cause")
}
