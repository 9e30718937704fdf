// Package chaos holds kvwire's chaos test. It has no API: everything is in
// its _test.go files.
//
// TestChaos runs concurrent mixed key-value operations through the client
// against the in-process mock cluster while faults fire at random from a
// fixed seed, then checks, from the mock's own per-key mutation counters and
// documents, that nothing the client acknowledged was lost and nothing was
// applied twice.
//
//	go test -race ./chaos                                           # short: ~40 s
//	go test ./chaos -run 'TestChaos$' -v -timeout 0 -chaos.duration=10m  # long
//	go test ./chaos -run 'TestChaos$' -v -chaos.seed=7 -chaos.v          # another schedule, every fault logged
//
// Flags: -chaos.seed (default 42), -chaos.duration (in all, split evenly
// over the configurations; 0 is the short run, 2.5 s per configuration),
// -chaos.configs (default, besteffort, memcached, http; also pool), -chaos.faults (all, none, or a list of kinds, to
// narrow a failure down), -chaos.workers (16 short, 32 long), -chaos.keys
// (per worker), -chaos.batches (percentage of the workers' steps that are
// batch calls, default 15), -chaos.cancels (percentage of the steps whose
// context is cancelled, default 8), -chaos.heapslack (MiB),
// -chaos.heapperop (bytes), -chaos.v.
// Each configuration logs
// one summary line (go test shows it with -v, or on failure):
//
//	chaos: config=default seed=42 duration=5m0s ops=... faults=... (close-before=..., ...)
//	  injected={...} retries={KV_NOT_MY_VBUCKET:..., ...} ambiguous=... (mutations applied ...,
//	  not applied ...; ...) failed={...} lost=0 duplicated=0 resent=0 ... late=0 (...) heap-max=...
//
// Faults, each drawn from the seed, active for a while and then removed:
// connections closed before or after a request is applied, a node stopped
// and restarted, a node added or removed by a rebalance stepped with a
// forward map, NOT_MY_VBUCKET storms, LOCKED answers (and real locks taken
// with GetAndLock by the workers), TMPFAIL answers, statuses only the error
// map explains (retryable or not), slow answers (some held until their
// operation has returned: past its deadline, or its cancel) and dropped
// connections. Up to three run at once (one topology
// change at a time). In the short run a per-request fault stays past its
// drawn duration until it has acted (the close kinds: until a write was cut
// off after, or before, it was applied; slow: until an answer was held
// until its operation returned and, on the mock, a write's attempt ended at
// its deadline, written and unanswered), however few requests a busy
// machine sends meanwhile, and the run goes on past its length until every
// kind has acted (it gives up after at least a minute and 50000 more
// operations, or a minute in which no operation ended: a bound in
// operations, which a busy machine makes fewer of a second). It fails unless retries for
// NOT_MY_VBUCKET, LOCKED, TMPFAIL and the error map happened, ambiguous
// writes both applied and not applied were seen and (with slow answers) an
// answer was held until its operation returned and (on the mock) a write
// expired in flight: it cannot pass by not testing.
//
// # What is checked, and how
//
// Every key has one owner goroutine, so the operations on a key are
// sequential and its expected state is well defined. Every mutation writes a
// unique value (counters a unique delta), so the mock can tell which
// operation a request belongs to.
//
// One mockcluster.Control hook sees every request before the node runs it.
// It injects the faults that act on single requests and, for each mutation of
// a chaos key, records the request (which operation it belongs to, which node,
// what the fault did) together with the key's Bucket.MutationCount at that
// moment. The hook's calls are totally ordered, and the node applies a
// request before the hook sees the next request for the same document
// (mockcluster.Cluster.Control), whichever connection it comes on; the count
// read at the key's next request (or at the end) therefore says exactly
// whether each request was applied. (Values and deltas name their
// operation exactly; DELETE, TOUCH, GET_LOCKED and UNLOCK carry nothing
// unique and are given to the key's running operation of that kind, or its
// last one: exact as long as no request reaches a node after its operation
// ended, which the mock, reading promptly, makes so.) From that:
//
//   - a mutation the client reported successful was applied exactly once;
//   - one reported failed and not ambiguous (the server said no, or it
//     never reached a server, or it timed out while retrying after answers
//     that say "not applied") was not applied;
//   - one reported ambiguous was applied at most once (the summary says how
//     many were and were not);
//   - no request was sent again after an attempt that got no definite
//     answer (from the hook's side: after a close before or after apply;
//     from the client's Observer: after an attempt that ended written but
//     unanswered), and no attempt the client said was not written reached
//     a node;
//   - an operation with an attempt written and never answered is reported
//     ambiguous (or, for a read, retried);
//   - the applied requests, replayed in the hook's order, give the stored
//     document (a check on the attribution itself).
//
// Without the hook, each key's MutationCount must end between the number of
// mutations the client reported successful and that plus the ambiguous ones.
//
// Independently of the hook, each owner keeps a model of its keys: the set
// of states the document may be in given what the client reported (one
// state, unless ambiguous operations left more; the owner reads the key after
// each one, as an application would). Every read must match a
// state of the model and every success must be possible from one; at the end
// the stored document (Bucket.Get: value and CAS) must be one of the states,
// which, when no ambiguous operation followed the last success, means
// exactly that success's value and CAS. A mismatch is a lost write.
//
// Batches: about one worker step in seven (-chaos.batches) is a batch call (GetMany,
// UpsertMany or RemoveMany) on one to four of the worker's keys in one
// collection (GetMany sometimes names a key twice). Each key of a batch is
// an operation of its own kind (Get, Upsert, Remove), registered and
// checked exactly as a single one: its outcome goes through the key's
// model (a success must be possible, a non-ambiguous error leaves the
// document alone, an ambiguous write leaves either state and is read back,
// in one GetMany), the hook attributes its requests, and the checks above
// apply to it. The keys of a batch share its retry plan and deadline, so
// the deadline rule below covers every retry of every key. The summary
// counts batch calls and keys by kind, their keys' outcomes, retries and
// ambiguous writes, and the problems found on them; a short run also fails
// unless every kind of batch ran and some batch key was retried and some
// ended ambiguous. The Observer's AttemptEnd must end an attempt its
// AttemptStart began (single operations and batches alike).
//
// Cancellation: about one worker step in twelve (-chaos.cancels, single
// operations and batch calls alike) runs under a context the harness
// cancels, at a moment drawn from the seed: before the call, after a drawn
// delay (from microseconds, while the request is queued or being written,
// to the timeout), or from the hook when a request of the operation reaches
// a node (written, about to be applied). A cancelled read did nothing; a
// cancelled mutation reported ambiguous is checked as any ambiguous one
// (applied at most once, read back); one reported cancelled and not
// ambiguous must not have been applied (the hook's count), and must not
// have had an attempt written without an answer (the Observer). An
// ErrRequestCanceled nobody caused is a failure. The summary counts the
// cancels drawn and hit by mode and their outcomes; a short run also fails
// unless cancelled operations ended both not written and ambiguous.
// TestChaosDetectsHiddenCancel runs against a client that reports a
// cancelled, written mutation as not written, and requires both checks to
// catch it, in single operations and batches.
//
// memcached: the configuration of that name runs the workers and the
// checks against two private memcached servers (internal/memcachedtest)
// behind fault proxies (internal/faultnode), through memcached://, with
// GetMany read by groups: text multi-gets on the client's text connections
// (relayed byte for byte) and, while a server has no idle text connection,
// binary groups (GETQ... and a NOOP), which the proxies attribute and
// settle as the hook does; both must occur (a short run goes on until
// they have). Its faults are those a memcached
// server can suffer: close-before, close-after, slow, drop, restart (the
// server refuses connections) and blackhole. memcached_test.go says what
// is checked there and what cannot be (no Observer: the retries and the
// attempt-based checks are the mock's). It is skipped without a memcached
// binary. TestChaosDetectsOnMemcached shows the lying client caught there
// too (re-sent and duplicated writes, in single operations and batches).
//
// http: the configuration of that name runs the mock's workload and
// checks with bootstrap_on=http: the client fetches its first config and
// streams the rest through a fault proxy in front of each node's REST port
// (the configs name the proxies: mockcluster.Node.AdvertiseMgmtPort), with
// two fault kinds more on those proxies, stream-end (their connections
// reset: the open stream ends) and blackhole (nothing passes for a while,
// then the connections are reset). Once the faults have ended the client
// must come to hold the bucket's latest config within 30 s (the stream is
// then its only way: the model cannot see a client left on an old map);
// TestChaosDetectsStaleConfig shows that check fail. http_test.go says
// more.
//
// Every retry's plan is checked against the operation's deadline: no retry
// may follow a wait planned to end at or after it (the client's Logger sees
// the orchestrator's Debug record of each retry, with its delay, on the
// operation's goroutine; timing_test.go gives the rule and why it is on the
// plan rather than on the wall clock). An operation that sleeps a retry
// backoff past its deadline is caught, and a busy machine, which only delays
// what was planned, is never mistaken for one. How far operations overshot
// their timeout in wall-clock time is reported, not checked: an operation
// that returns late without such a retry is not caught by a bound, which
// would have to allow for how late a loaded machine runs the client's
// deadline timer. One case is caught without one: the answers a slow fault
// holds (on the mock, and through memcached's proxies) are released only
// once their operation has returned, so a client
// that waits for an answer past its deadline (rather than ending the
// operation there) never returns, and the run hangs until the test
// binary's -timeout (30 s after the workers were told to stop, the
// operations still waiting for a held answer are printed to stderr).
//
// The heap in use after a GC is sampled every 0.5 s (5 s in a long run),
// with the number of operations done so far. From the first sample after
// warm-up (a quarter of the run, at most 30 s) to the last, taken once the
// workers have stopped, it may grow by 2 MiB plus 2 KiB per operation done
// in between (-chaos.heapperop). The harness keeps each operation's record
// until it settles, 5 s after the operation, so a short run grows by a few
// hundred bytes per operation with no leak; a client retaining 16 KiB per
// operation fails even a short run (TestChaosDetectsLeak). In a long run
// that allowance grows large, and the bound that matters is the other one:
// no sample may exceed the first by more than -chaos.heapslack (64 MiB).
// Leaked goroutines fail the binary (internal/leakcheck).
//
// TestChaosDetects runs the same harness against a client that lies (it
// sends an ambiguous write again, acknowledges a write the server refused
// and retries after a backoff planned past its deadline, in single
// operations and in batches) and requires lost, duplicated, re-sent and
// late operations to be reported, among single operations and keys of
// batches alike: the checks can fail. TestChaosDetectsLeak does
// the same for the memory check, with a client that retains 16 KiB per
// operation.
//
// The fault schedule (which fault, when, where, for how long, with what
// probability) is a function of the seed; the interleaving of goroutines is
// not, so a failing seed reproduces the schedule, not the exact run. Every
// failure message names the seed and the command that reruns it.
package chaos
