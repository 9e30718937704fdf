// Package retry decides whether and when a failed key-value operation is sent
// again: the retry reasons, strategies and orchestrator of Couchbase's SDK
// RFC 0049 (revision 16, with FastFailOnTerminalErrorRetryStrategy), the
// NOT_MY_VBUCKET waits of RFC 0005 and the error-map retries of RFC 0013.
//
// The package is pure logic plus a clock: it does no I/O and starts no
// goroutines. The client dispatches; this package decides.
//
// # Using it
//
// The client keeps a State per operation, calls Init before the first
// attempt, and after every failed attempt classifies the failure as a Reason
// and hands it to Orchestrator.Wait:
//
//	st.Init(ctx, memdx.OpSet, strategy, deadline)
//	for {
//		err := send()                          // one attempt
//		reason, ok := classify(err)            // the client's status policy, ...
//		if !ok {
//			return err                         // not retryable: fail as is
//		}
//		if err := orch.Wait(&st, reason, err); err != nil {
//			return err                         // refused, timed out or canceled
//		}
//	}
//
// The client also tells the State what only it knows: MarkInDoubt when an
// attempt was written and no definite answer came, MarkRouteChanged when a
// NOT_MY_VBUCKET carried a config that moves the vbucket, MarkAwaitWake
// when it carried a newer config not yet installed, SetErrorMapEntry
// before an error-map retry. State.TimeoutError builds the error when the
// deadline passes while an attempt is in flight.
//
// Orchestrator.WaitOrWake is Wait with a channel that ends the wait early
// when it is closed: the client passes one that closes when it installs a
// newer cluster config, for waits after NOT_MY_VBUCKET or an unavailable
// node, so that the retry goes by the new config at once. A wait that was
// to end at the deadline becomes a retry when woken before it.
//
// # The decision procedure
//
// For each failed attempt the orchestrator (Orchestrator.Wait) does this:
//
//  1. If the reason is SOCKET_CLOSED_WHILE_IN_FLIGHT, the operation is in
//     doubt: the request was written and may have been applied. A
//     non-idempotent operation in doubt is refused now, ambiguously, for
//     this and any later reason, whatever its strategy would say: it is
//     never sent twice. UNKNOWN is refused too (RFC 0049: never retried).
//  2. If the reason is always retried (NOT_MY_VBUCKET, COLLECTION_OUTDATED,
//     VIEWS_NO_ACTIVE_PARTITION) the strategy is not asked: the retry waits
//     the controlled backoff indexed by the number of retries so far (1, 10,
//     50, 100, 500 ms, then 1000 ms for every further one), or for
//     NOT_MY_VBUCKET the fixed Orchestrator.NMVInterval when it is set, or
//     nothing when the client marked the route changed.
//  3. Otherwise the operation's strategy answers with an Action: retry after
//     a duration, or do not retry (optionally with an error). A refusal
//     fails the operation at once with a *NotRetriedError carrying the
//     reason, the strategy's error and the attempt's error.
//  4. Every wait is capped by the deadline. If the wait would end at or
//     after the deadline, the operation waits only until the deadline and
//     then fails with a *TimeoutError; it is not sent again (RFC 0049: "the
//     operation should be immediately cancelled after the duration and not
//     sent back"). So with a 2.5 s timeout, 2 s elapsed and a 1 s wait
//     asked, the operation waits 500 ms and times out. A wait that ends
//     before the deadline, even by 1 ns, is a retry: the request is sent and
//     that attempt ends by its own deadline.
//  5. Otherwise the retry is made: the attempt count goes up by one, the
//     reason joins the request's reasons, and after the wait the request is
//     sent again.
//
// Every retry, refusal and deadline-capped wait is logged through log/slog at
// Debug with the operation, the reason and the attempt count, behind an
// Enabled check (a retry allocates nothing when Debug is off). The logger is
// Orchestrator.Logger, slog.Default() when nil.
//
// A context canceled during a wait ends it with a *CanceledError; a context
// whose deadline passes gives a *TimeoutError (Init takes the earlier of the
// given deadline and the context's).
//
// # Reasons
//
// RFC 0049's table, row by row. "Non-idempotent" says whether an operation
// that is not idempotent may be retried for the reason; "always" says whether
// the reason is retried whatever the strategy.
//
//	Reason                               Non-idempotent  Always
//	UNKNOWN                              false           false
//	SOCKET_NOT_AVAILABLE                 true            false
//	SERVICE_NOT_AVAILABLE                true            false
//	NODE_NOT_AVAILABLE                   true            false
//	KV_NOT_MY_VBUCKET                    true            true
//	KV_COLLECTION_OUTDATED               true            true
//	KV_ERROR_MAP_RETRY_INDICATED         true            false
//	KV_LOCKED                            true            false
//	KV_TEMPORARY_FAILURE                 true            false
//	KV_SYNC_WRITE_IN_PROGRESS            true            false
//	KV_SYNC_WRITE_RE_COMMIT_IN_PROGRESS  true            false
//	SERVICE_RESPONSE_CODE_INDICATED      true            false
//	SOCKET_CLOSED_WHILE_IN_FLIGHT        false           false
//	CIRCUIT_BREAKER_OPEN                 true            false
//	QUERY_PREPARED_STATEMENT_FAILURE     true            false
//	QUERY_INDEX_NOT_FOUND                true            false
//	ANALYTICS_TEMPORARY_FAILURE          true            false
//	SEARCH_TOO_MANY_REQUESTS             true            false
//	VIEWS_TEMPORARY_FAILURE              true            false
//	VIEWS_NO_ACTIVE_PARTITION            true            true
//	AUTHENTICATION_ERROR                 true (chosen)   false (chosen)
//	TLS_ERROR                            true (chosen)   false (chosen)
//	BUCKET_ACCESS_ERROR                  true (chosen)   false (chosen)
//	SCOPE_NOT_FOUND                      true (chosen)   false (chosen)
//	COLLECTION_NOT_FOUND                 true (chosen)   false (chosen)
//
// The RFC leaves the last five "todo". They are conditions the client finds
// before it sends anything (a refused login or TLS handshake on the
// connections, a refused SELECT_BUCKET, a scope or collection missing from a
// manifest already fetched), so a retry cannot apply a request twice:
// non-idempotent retry is allowed. They are not always retried, so that the
// strategy decides: FailFastOnTerminalErrors (the default) fails at once with
// ErrAuthenticationFailure, ErrTLS, ErrBucketNotFound, ErrScopeNotFound or
// ErrCollectionNotFound (the module's sentinels, package internal/kverr,
// which package client re-exports), and BestEffort keeps waiting, until the
// deadline, for the condition to clear (credentials fixed, bucket or collection
// created), the timeout then listing the reason. The client gives
// AUTHENTICATION_ERROR for the server's AUTH_ERROR (0x20) to SASL, and also
// for refusals it makes itself that no retry can heal (no SASL mechanism
// both sides allow, PLAIN not allowed, a NUL in the credentials): a wider
// use than the RFC's "explicit 0x20", chosen so that a misconfiguration
// fails fast instead of timing out.
//
// Which reason a response status gives (RFC 0049's response-code list with
// its exceptions, and the node's error map for statuses the client has no
// outcome of its own for) is the client's status policy, decided in one
// table in package client together with the error each status ends with.
// IsIdempotent is RFC 0049's idempotent operation list, by opcode.
//
// # Strategies
//
// FailFastOnTerminalErrors is the default (DefaultStrategy), as RFC 0049
// revision 16 asks of new SDKs: the five terminal reasons fail at once, every
// other reason is handled as BestEffort does. BestEffort retries whatever it
// safely can (idempotent operations, or reasons that allow non-idempotent
// retry) with an exponential backoff of 1 ms doubling to 500 ms (1, 2, 4, ...,
// 256, then 500 ms), without jitter; BestEffort and FailFastOnTerminalErrors
// take another Backoff. FollowErrorMap is an
// opt-in strategy that times error-map retries by the map's retry spec
// (after, interval, ceil, max-duration, the count restarting when another
// status comes back, NOT_MY_VBUCKET aside), which RFC 0049 forbids by default.
//
// # Waiting after NOT_MY_VBUCKET
//
// RFC 0005 waits a fixed 100 ms between NOT_MY_VBUCKET retries; RFC 0049
// always retries the reason with the controlled backoff. The default is RFC
// 0049's; Orchestrator.NMVInterval = 100 * time.Millisecond restores RFC
// 0005's.
// In both, when the NOT_MY_VBUCKET response carried a newer config that
// changes the route (or the client switches to the forward map, RFC 0005's
// step 3), the client calls State.MarkRouteChanged and the next attempt goes
// at once; it still counts as a retry, is logged and is bounded by the
// deadline. A config that arrives during the wait ends it (WaitOrWake).
// When the newer config is still on its way (parsed off the operation's
// goroutine), the client calls State.MarkAwaitWake instead: the wait is
// for its install (up to MaxAwaitWake), not the backoff's first 1 ms, which
// would send the retry by the old map into another NOT_MY_VBUCKET.
//
// # Was it applied?
//
// Every error this package returns says whether the request may have been
// applied, in its Ambiguous field and through errors.Is(err, kverr.ErrAmbiguous).
// The rule: an operation is ambiguous when it is not idempotent, may change
// data, and at least one of its attempts was written without a definite
// answer (its connection closed in flight, or the deadline or a
// cancellation ended the wait for the response); otherwise it is
// unambiguous. The mark is sticky: a later
// attempt that was answered does not clear the doubt about an earlier one.
// An idempotent operation is never ambiguous: applying it again changes
// nothing. Nor is a read that is not on the idempotent list (GET_META,
// STAT; memdx.OpCode.IsReadOnly): it is not sent again, and its error says
// it changed no data, as nothing it could do changes data.
//
// So a SET written whose connection then dies is handed over as
// SOCKET_CLOSED_WHILE_IN_FLIGHT, which does not allow a non-idempotent retry;
// the default strategy refuses, and the SET fails at once with a
// *NotRetriedError that is Ambiguous (not with a timeout). A SET that times
// out waiting for its response fails with a *TimeoutError matching
// kverr.ErrAmbiguousTimeout; a SET that times out while being retried after
// TMPFAIL responses fails with one matching kverr.ErrUnambiguousTimeout.
package retry
