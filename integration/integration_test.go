package integration

import (
	"context"
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvwire/kvwire/client"
)

func connect(t *testing.T) *client.Client {
	t.Helper()
	cs := os.Getenv("KVWIRE_CONNSTR")
	if cs == "" {
		t.Skip("KVWIRE_CONNSTR is not set: run `make integration` (Couchbase Server in Docker)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := client.Connect(ctx, cs, &client.Options{
		Username: os.Getenv("KVWIRE_USERNAME"),
		Password: os.Getenv("KVWIRE_PASSWORD"),
	})
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func key(t *testing.T) string { return fmt.Sprintf("kvwire-it-%s-%d", t.Name(), time.Now().UnixNano()) }

func TestCRUD(t *testing.T) {
	c := connect(t)
	col := c.DefaultCollection()
	ctx := context.Background()
	k := key(t)
	m, err := col.Insert(ctx, k, []byte(`{"n":1}`), &client.InsertOptions{JSON: true, Expiry: time.Hour})
	require.NoError(t, err)
	assert.NotZero(t, m.Token.Seqno)
	_, err = col.Insert(ctx, k, []byte(`{}`), nil)
	assert.ErrorIs(t, err, client.ErrDocumentExists)
	g, err := col.Get(ctx, k, nil)
	require.NoError(t, err)
	assert.JSONEq(t, `{"n":1}`, string(g.Value))
	assert.Equal(t, m.Cas, g.Cas)
	_, err = col.Replace(ctx, k, []byte(`{"n":2}`), &client.ReplaceOptions{Cas: g.Cas + 1, JSON: true})
	assert.ErrorIs(t, err, client.ErrCasMismatch)
	_, err = col.Replace(ctx, k, []byte(`{"n":2}`), &client.ReplaceOptions{Cas: g.Cas, JSON: true})
	require.NoError(t, err)
	ex, err := col.Exists(ctx, k, nil)
	require.NoError(t, err)
	assert.True(t, ex.Exists)
	_, err = col.Remove(ctx, k, nil)
	require.NoError(t, err)
	_, err = col.Get(ctx, k, nil)
	assert.ErrorIs(t, err, client.ErrDocumentNotFound)
}

func TestLockAndCounters(t *testing.T) {
	c := connect(t)
	col := c.DefaultCollection()
	ctx := context.Background()
	k := key(t)
	_, err := col.Upsert(ctx, k, []byte("v"), nil)
	require.NoError(t, err)
	l, err := col.GetAndLock(ctx, k, 5*time.Second, nil)
	require.NoError(t, err)
	_, err = col.Upsert(ctx, k, []byte("w"), &client.UpsertOptions{Timeout: 300 * time.Millisecond})
	assert.ErrorIs(t, err, client.ErrTimeout, "a locked document refuses other writers until the timeout")
	assert.ErrorIs(t, col.Unlock(ctx, k, l.Cas+1, nil), client.ErrCasMismatch)
	require.NoError(t, col.Unlock(ctx, k, l.Cas, nil))
	_, err = col.Upsert(ctx, k, []byte("w"), nil)
	require.NoError(t, err)

	zero := uint64(0)
	r, err := col.Increment(ctx, k+"-n", &client.IncrementOptions{Initial: &zero})
	require.NoError(t, err)
	r, err = col.Increment(ctx, k+"-n", &client.IncrementOptions{Delta: 41})
	require.NoError(t, err)
	assert.Equal(t, uint64(41), r.Value)
}

func TestCollection(t *testing.T) {
	c := connect(t)
	users := c.Scope("app").Collection("users")
	ctx := context.Background()
	k := key(t)
	_, err := users.Upsert(ctx, k, []byte("in a collection"), nil)
	require.NoError(t, err)
	g, err := users.Get(ctx, k, nil)
	require.NoError(t, err)
	assert.Equal(t, "in a collection", string(g.Value))
	_, err = c.DefaultCollection().Get(ctx, k, nil)
	assert.ErrorIs(t, err, client.ErrDocumentNotFound)
	_, err = c.Scope("app").Collection("nope").Get(ctx, k, nil)
	assert.ErrorIs(t, err, client.ErrCollectionNotFound)
}

func TestDurableWrite(t *testing.T) {
	c := connect(t)
	ctx := context.Background()
	_, err := c.DefaultCollection().Upsert(ctx, key(t), []byte("durable"),
		&client.UpsertOptions{Durability: client.DurabilityMajority})
	if errors.Is(err, client.ErrDurabilityImpossible) {
		t.Skip("the cluster cannot satisfy majority durability (too few data nodes)")
	}
	require.NoError(t, err)
}

func TestWrongPasswordFailsAtOnce(t *testing.T) {
	cs := os.Getenv("KVWIRE_CONNSTR")
	if cs == "" {
		t.Skip("KVWIRE_CONNSTR is not set: run `make integration` (Couchbase Server in Docker)")
	}
	start := time.Now()
	_, err := client.Connect(context.Background(), cs, &client.Options{
		Username: os.Getenv("KVWIRE_USERNAME"), Password: "definitely-wrong", ConnectTimeout: 30 * time.Second})
	assert.ErrorIs(t, err, client.ErrAuthenticationFailure)
	assert.Less(t, time.Since(start), 10*time.Second)
}

func TestPing(t *testing.T) {
	c := connect(t)
	for _, r := range c.Ping(context.Background()) {
		assert.NoError(t, r.Err, r.Node)
	}
}
