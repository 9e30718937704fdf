package client_test

import (
	"context"
	"fmt"
	"time"

	"github.com/kvwire/kvwire/client"
)

// A strategy with an exception: a locked document fails at once instead of
// waiting for the lock; every other reason is decided by the default.
func ExampleRetryStrategyFunc() {
	base := client.DefaultRetryStrategy()
	noLockWait := client.RetryStrategyFunc(func(req client.RetryRequest, r client.RetryReason) client.RetryAction {
		if r == client.RetryReasonKVLocked {
			return client.NoRetry()
		}
		return base.RetryAfter(req, r)
	})
	opts := &client.Options{RetryStrategy: noLockWait}
	_ = opts // client.Connect(ctx, connStr, opts)

	// How it decides, for a request built here (the client passes its own).
	req := exampleRequest{operation: "Upsert", attempts: 2}
	for _, r := range []client.RetryReason{client.RetryReasonKVLocked, client.RetryReasonKVTemporaryFailure,
		client.RetryReasonSocketClosedWhileInFlight, client.RetryReasonAuthenticationError} {
		act := noLockWait.RetryAfter(req, r)
		if d, ok := act.Duration(); ok {
			fmt.Printf("%s: retry after %v\n", r, d)
		} else {
			fmt.Printf("%s: fail (%v)\n", r, act.Err() != nil)
		}
	}
	// Output:
	// KV_LOCKED: fail (false)
	// KV_TEMPORARY_FAILURE: retry after 4ms
	// SOCKET_CLOSED_WHILE_IN_FLIGHT: fail (false)
	// AUTHENTICATION_ERROR: fail (true)
}

// Why an operation was retried is in its result (GetResult.RetryReasons,
// ...) and its error (KeyValueError.RetryReasons, next to the Status the
// server answered last).
func ExampleRetryReasons() {
	reasons := client.RetryReasons(0).With(client.RetryReasonKVTemporaryFailure).With(client.RetryReasonKVNotMyVbucket)
	fmt.Println(reasons, reasons.Len(), reasons.Has(client.RetryReasonKVLocked))
	for r := range reasons.All() {
		fmt.Println(r, r.AllowsNonIdempotentRetry(), r.AlwaysRetry())
	}
	fmt.Println(client.StatusTmpFail)
	// Output:
	// [KV_NOT_MY_VBUCKET KV_TEMPORARY_FAILURE] 2 false
	// KV_NOT_MY_VBUCKET true true
	// KV_TEMPORARY_FAILURE true false
	// ETMPFAIL
}

type exampleRequest struct {
	operation string
	attempts  int
}

func (e exampleRequest) Operation() string            { return e.operation }
func (e exampleRequest) Idempotent() bool             { return false }
func (e exampleRequest) Attempts() int                { return e.attempts }
func (e exampleRequest) Reasons() client.RetryReasons { return 0 }
func (e exampleRequest) InDoubt() bool                { return false }
func (e exampleRequest) Deadline() time.Time          { return time.Time{} }
func (e exampleRequest) Context() context.Context     { return context.Background() }
func (e exampleRequest) ErrorMapRetry() (client.ErrorMapRetry, bool) {
	return client.ErrorMapRetry{}, false
}
