package client

import (
	"context"
	"time"

	"github.com/kvwire/kvwire/memdx"
)

// GetMany, UpsertMany and RemoveMany: many operations in one call, run by
// a batch (batch.go).

// GetManyOptions are the options of GetMany. The timeout is the whole
// batch's: every key has the same deadline, as one Get would.
type GetManyOptions struct {
	Timeout       time.Duration
	RetryStrategy RetryStrategy
	ParentSpan    RequestSpan
}

// GetManyResult is one key's outcome of GetMany: Err is that key's own
// error (ErrDocumentNotFound for a miss), a *KeyValueError as Get's; the
// GetResult is set when Err is nil.
type GetManyResult struct {
	Key string
	GetResult
	Err error
}

// UpsertManyItem is one document of UpsertMany: its key, its value, and
// what UpsertOptions' fields of the same names mean for it.
type UpsertManyItem struct {
	Key    string
	Value  []byte
	Flags  uint32
	JSON   bool
	Expiry time.Duration
	// PreserveExpiry keeps the expiry of a document that already exists
	// (the server needs PreserveTtl, else this item alone fails with
	// ErrFeatureNotAvailable; Expiry then applies only to a document the
	// write creates).
	PreserveExpiry bool
	// Cas, when not 0, makes this item's write conditional on the
	// document's current CAS; a mismatch is this item's ErrCasMismatch.
	Cas uint64
}

// UpsertManyOptions are the options of UpsertMany, for every item. The
// fields mean what UpsertOptions' do; the timeout is the whole batch's.
type UpsertManyOptions struct {
	Timeout           time.Duration
	RetryStrategy     RetryStrategy
	ParentSpan        RequestSpan
	Durability        DurabilityLevel
	DurabilityTimeout time.Duration
}

// RemoveManyOptions are the options of RemoveMany, for every key. The
// fields mean what RemoveOptions' do; the timeout is the whole batch's.
type RemoveManyOptions struct {
	Timeout           time.Duration
	RetryStrategy     RetryStrategy
	ParentSpan        RequestSpan
	Durability        DurabilityLevel
	DurabilityTimeout time.Duration
}

// MutateManyResult is one key's outcome of UpsertMany or RemoveMany: Err
// is that key's own error, a *KeyValueError as Upsert's or Remove's (with
// Ambiguous set when the write may have been applied); the
// MutationResult is set when Err is nil.
type MutateManyResult struct {
	Key string
	MutationResult
	Err error
}

// GetMany reads many documents in one call. Results are in the order of
// keys, one per key (a key given twice is read twice). Each key is an
// operation of its own, with Get's routing, retries, deadline and errors:
// a key that fails, is missing or waits to be retried does not hold back
// or fail the others. The requests are grouped per connection and written
// together, from the calling goroutine; no goroutine is started per key.
// On memcached:// the gets are quiet gets followed by a NOOP, so that a
// miss costs no response. With no Observer, on the default collection,
// each server's keys are read as one request per window of the batch's
// in-flight bound, until they need more than one attempt (a larger batch
// has two windows in flight: the next window's requests are sent while
// the last one's answers are read): one text
// multi-get ("gets k1 k2 ...", whose misses cost no response either) on a
// text connection the client keeps to that server, or, where that is not
// taken (TLS, SASL, MemcachedOptions.BinaryMultiGet, a key the text
// protocol cannot carry, a write to that server still unanswered, no idle
// text connection yet), its quiet gets and NOOP as one request on the
// server's connection, behind any write on it. Small values read
// together may share memory: each Value is a slice of its own length and
// capacity (appending to one copies it), but keeping one keeps its block
// of at most 4 KiB alive.
func (col *Collection) GetMany(ctx context.Context, keys []string, opts *GetManyOptions) []GetManyResult {
	var p opParams
	if opts != nil {
		p = opParams{timeout: opts.Timeout, strategy: opts.RetryStrategy, parent: opts.ParentSpan}
	}
	res := make([]GetManyResult, len(keys))
	b := col.c.newBatch(ctx, len(keys))
	b.quietGets = true
	for i, key := range keys {
		res[i].Key = key
	}
	if checkTimeout(p.timeout) == nil && b.groupGets(col) { // else each key's op refuses it
		b.getGroups(col, keys, p, res)
	} else {
		for i, key := range keys {
			o, err := col.newOp(ctx, "Get", kindGet, key, memdx.NewGet(nil), p)
			b.add(i, o, err)
		}
	}
	b.run(func(i int, o *op, err error) {
		if err != nil {
			res[i].Err = err
			return
		}
		res[i].GetResult = o.getResult()
	})
	return res
}

// UpsertMany writes many documents in one call, each as Upsert would
// (flags, JSON, expiry, PreserveExpiry and Cas from its item; durability
// for all). Results are
// in the order of items. Each item is an operation of its own: an
// ambiguous or failed write is that item's error alone, never retried
// once it may have been applied. Items with the same key are separate
// writes whose order on the server is not defined (a retry, or a node's
// several connections, can reorder them); give a key once for a defined
// result.
func (col *Collection) UpsertMany(ctx context.Context, items []UpsertManyItem, opts *UpsertManyOptions) []MutateManyResult {
	var p storeParams
	if opts != nil {
		p.mutParams = mutParams{opParams: opParams{timeout: opts.Timeout, strategy: opts.RetryStrategy, parent: opts.ParentSpan},
			durability: opts.Durability, durabilityTimeout: opts.DurabilityTimeout}
	}
	res := make([]MutateManyResult, len(items))
	b := col.c.newBatch(ctx, len(items))
	for i := range items {
		it := &items[i]
		res[i].Key = it.Key
		q := p
		q.flags, q.json, q.expiry, q.preserve, q.cas = it.Flags, it.JSON, it.Expiry, it.PreserveExpiry, it.Cas
		o, err := col.storeOp(ctx, "Upsert", memdx.OpSet, it.Key, it.Value, q)
		b.add(i, o, err)
	}
	b.run(mutateManyResult(res))
	return res
}

// RemoveMany deletes many documents in one call, each as Remove would.
// Results are in the order of keys.
func (col *Collection) RemoveMany(ctx context.Context, keys []string, opts *RemoveManyOptions) []MutateManyResult {
	var p mutParams
	if opts != nil {
		p = mutParams{opParams: opParams{timeout: opts.Timeout, strategy: opts.RetryStrategy, parent: opts.ParentSpan},
			durability: opts.Durability, durabilityTimeout: opts.DurabilityTimeout}
	}
	res := make([]MutateManyResult, len(keys))
	b := col.c.newBatch(ctx, len(keys))
	for i, key := range keys {
		res[i].Key = key
		o, err := col.mutation(ctx, "Remove", kindMutation, key, memdx.NewDelete(nil), p)
		b.add(i, o, err)
	}
	b.run(mutateManyResult(res))
	return res
}

func mutateManyResult(res []MutateManyResult) func(int, *op, error) {
	return func(i int, o *op, err error) {
		if err != nil {
			res[i].Err = err
			return
		}
		res[i].MutationResult = o.mutationResult()
	}
}
