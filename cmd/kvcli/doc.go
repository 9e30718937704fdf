// Command kvcli is a command-line client for the key-value service of
// Couchbase Server and for plain memcached, built on kvwire's client
// package. It reads and writes documents, shows where a key is routed,
// generates load, and runs kvwire's in-process mock cluster.
//
//	kvcli [global flags] COMMAND [flags] [arguments]
//	kvcli help              this manual, in short
//	kvcli COMMAND -h        one command's flags
//
// # Trying it
//
// Start a mock cluster in one shell; it prints its connection string and
// credentials (the mock's own test credentials, printed on purpose) as
// shell exports:
//
//	$ kvcli serve
//	# kvcli serve: mock Couchbase cluster, 3 node(s), bucket "default" (1024 vbuckets, 1 replica)
//	# These are the mock's own test credentials, printed on purpose.
//	export KVCLI_CONNSTR='couchbase://127.0.0.1:35811,127.0.0.1:46067,127.0.0.1:40649/default'
//	export KVCLI_USER='Administrator'
//	export KVCLI_PASSWORD='password'
//	# REST (cluster manager) ports: 127.0.0.1:36609 127.0.0.1:33327 127.0.0.1:34567
//	# HTTP bootstrap: couchbase://127.0.0.1:36609=http,127.0.0.1:33327=http,127.0.0.1:34567=http/default
//	# Paste the lines above into another shell, then: kvcli set hello world; kvcli get hello
//	# Ctrl-C stops the cluster.
//
// Paste the exports into another shell and:
//
//	$ kvcli set hello world
//	stored "hello" cas=0x18ea407c62300000
//	$ kvcli get hello
//	"hello" cas=0x18ea407c62300000 flags=0x03000000 datatype=raw size=5     (stderr)
//	world                                                                   (stdout)
//
// Or run `kvcli demo` (what `make demo` runs): it starts a mock cluster and
// shows the client retrying through a rebalance, a held lock and injected
// temporary failures, and proves that no operation failed and no write was
// lost or applied twice.
//
// # Commands
//
// Key-value commands take a KEY (a document key of 1 to 250 bytes) and work
// on the collection given by --collection:
//
//	get KEY                read a document: value on stdout, metadata on stderr
//	    --touch D          also set its expiry (get-and-touch)
//	get KEY KEY...         read several in one batch: a line KEY<TAB>VALUE per key
//	                       found (key and value Go-quoted when not one line of
//	                       UTF-8, or when holding a tab or starting with ");
//	                       --json: one object whose "results" hold one per key;
//	                       failures on stderr, a line each that names its key;
//	                       exit 3 when the only failures are missing documents
//	set KEY VALUE          write a document, creating or replacing it (upsert)
//	add KEY VALUE          create a document; exit 4 if it exists (insert)
//	replace KEY VALUE      replace an existing document; exit 3 if missing
//	    --expiry D         time to live (set, add, replace; 0: never expires)
//	    --flags N          the document's 32-bit flags, decimal or hex (0x...)
//	                       (default: Couchbase common flags, binary or JSON; 0 on
//	                       memcached://)
//	    --json-doc         mark the value as JSON (JSON datatype and flags)
//	    --cas CAS          write only if the document's CAS is still CAS (not add)
//	append KEY VALUE       append bytes to an existing document (--cas)
//	prepend KEY VALUE      prepend bytes to an existing document (--cas)
//	delete KEY             delete a document (--cas); exit 3 if missing
//	touch KEY EXPIRY       set the expiry: a duration (90s, 10m, 24h); 0 removes it
//	lock KEY               read and lock a document (GET_LOCKED) for --lock-time
//	                       (default 15s, 1s to 30s); stderr shows the CAS that unlocks it.
//	                       The server (kv_engine) gives a lock time of 0 or over its
//	                       maximum (30s by default) its default of 15s, not the
//	                       maximum: on a bucket configured with a lower maximum, a
//	                       longer --lock-time locks for 15s
//	unlock KEY CAS         release the lock; CAS in hex (0x...) or decimal
//	incr KEY, decr KEY     change a counter by --delta (decimal or hex; default 1; 0 reads it) and print
//	                       its new value; --initial N creates a missing one with N
//	                       (without the delta), --expiry D (with --initial) its
//	                       expiry; decr stops at 0
//	exists KEY             print true or false; exit 0 if it exists, 3 if not
//	lookup KEY PATH...     read paths of a JSON document (sub-document), a line per path:
//	                       the path and its JSON value, or its error. "" is the whole
//	                       document; up to 16 paths
//	    --xattr PATH       also read an extended attribute (repeatable; read first);
//	                       $document.CAS, $document.exptime, ... are the metadata
//	    --exists           check that each path exists instead (exit 3 if one does not)
//	    --count            count each path's array elements or object keys
//	    --access-deleted   read a deleted document's (a tombstone's) xattrs
//	mutate KEY OP PATH [VALUE]...
//	                       change paths atomically (all or nothing); OP is insert,
//	                       upsert, replace, remove, append, prepend, array-insert,
//	                       add-unique, incr, decr (VALUE: a delta); OP-xattr works on an
//	                       extended attribute (those come first); VALUE is JSON text, and
//	                       an xattr VALUE ${Mutation.CAS}, ${Mutation.seqno} or
//	                       ${Mutation.value_crc32c} is expanded by the server;
//	                       replace "" VALUE sets the whole document, remove "" deletes it
//	    --upsert-doc       create the document when missing (--insert-doc: only then)
//	    --xattr            every OP works on an extended attribute
//	    --create-path      create missing parent objects
//	    --cas, --expiry, --preserve-expiry, --access-deleted, --create-as-deleted, --revive
//
// Examples:
//
//	kvcli set user:1 '{"name":"Ada"}' --expiry 24h
//	kvcli set blob @photo.jpg
//	curl -s https://example.com/x.json | kvcli set x -
//	kvcli get user:1 > user1.json
//	kvcli get user:1 user:2 user:3 --json
//	kvcli --collection app.users get u:1
//	kvcli replace user:1 '{"name":"Ada L."}' --cas 0x18ea407c62300000
//	kvcli incr visits --initial 1
//	kvcli lock order:7 --lock-time 10s     # then: kvcli unlock order:7 0x...
//	kvcli touch session:9 30m
//	kvcli exists user:1 && echo present
//	kvcli mutate user:1 upsert-xattr meta.by '"kvcli"' upsert name '"Ada"' incr logins 1
//	kvcli lookup user:1 name logins --xattr meta.by --xattr '$document.CAS'
//
// Cluster commands:
//
//	ping                   NOOP to every node; prints each node's latency; exit 1 if
//	                       any did not answer (--report-id ID: the id of --json's
//	                       RFC 0034 report)
//	diag                   send nothing: each node's connections as the client sees
//	                       them (SDK RFC 0034: id, state, local socket and local id,
//	                       time since the last request, why one is down) and the
//	                       cluster's state (online, degraded, offline); exit 1 if
//	                       not online
//	    --wait D           first wait up to D for every connection to be up
//	    --degraded         with --wait: one connection per service is enough
//	route KEY              send nothing; print the key's vbucket and its nodes by the
//	                       current map and, during a rebalance, by the forward map
//	                       (vBucketMapForward); for memcached://, the ketama server
//
//	$ kvcli route hello
//	key       "hello"
//	vbucket   528 (config rev 7)
//	active    127.0.0.1:35811
//	replicas  127.0.0.1:46067
//	forward   active 127.0.0.1:41591, replicas 127.0.0.1:35811 (a rebalance is moving the vbucket)
//
//	scan                   the collection's documents (Couchbase Server 7.2+ range
//	                       scans): KEY<TAB>VALUE per document (key and value Go-quoted
//	                       when not one line of UTF-8, or when holding a tab or
//	                       starting with "); --json: one document whose
//	                       "items" hold one object per document (see Output)
//	    --prefix P         keys starting with P
//	    --from K, --to K   a key range, both ends included (--from-exclusive,
//	                       --to-exclusive leave them out); neither: the whole collection
//	    --sample N         a random sample of about N documents (at most N); --seed S
//	    --keys-only        keys only: the server sends no values
//	    --concurrency N    vbuckets scanned at once (default 1)
//	                       when stdout is a file or a pipe and stderr a terminal, a
//	                       progress line there says how many so far (not with --json)
//	stats [GROUP]          NODE NAME VALUE per statistic of every node (--node ADDR:
//	                       one); memcached's groups: settings, items, slabs, sizes;
//	                       a key group ("key DOC VB", key-byid, vkey) asks only the
//	                       node holding vbucket VB; exit 1 if any node failed
//	flush --yes            memcached:// only: drop every item of every server (--node
//	                       ADDR: one), after --delay D if given; without --yes nothing
//	                       is sent and kvcli exits 2
//
//	$ kvcli scan --prefix user: --keys-only
//	user:1
//	user:2
//
// Tools:
//
//	bench                  a load generator (like cbc-pillowfight), see below
//	serve                  run a mock cluster in the foreground (see Trying it)
//	    --nodes N          nodes (default 3)         --vbuckets N  vbuckets (default 1024)
//	    --replicas N       replicas, 0 to 3 (default 1)
//	    --user, --password, --bucket   the mock's credentials and bucket
//	                       (default Administrator, password, default)
//	    --tls              listen with TLS (couchbases://) with a CA generated at start,
//	                       written to --cacert-out FILE (default a temporary file removed
//	                       at exit) and exported as KVCLI_CACERT
//	    --kv-port N        the first node's KV port, the next node's N+1, ... (default:
//	                       ports the system chooses); 11210 lets couchbase://host omit them.
//	                       With --tls it is the plain KV port: the TLS ports, which the
//	                       printed couchbases:// string names, are the system's choice
//	    --memcached-bucket NAME  also create a memcached bucket (bootstrapped over HTTP)
//	    --json             print the connection details, the REST ports among them,
//	                       as one JSON object
//	    -v                 log the mock's connection errors on stderr
//	                       serve runs until SIGINT or SIGTERM, then stops the cluster
//	                       and exits 0
//	demo                   the demo (`make demo`); --json prints its summary as JSON,
//	                       -v traces every attempt that failed or was a retry
//
// # bench
//
//	kvcli bench --concurrency 32 --ratio 0.8 --value-size 256 --duration 30s
//	kvcli bench --rate 20000 --key-dist zipfian --value-size 64-4096 --durability majority
//
// Each of --concurrency workers (default 16) runs one operation after another:
// a get with probability --ratio (default 0.5), else a set, on one of --keys
// keys (default 10000, at most 10,000,000, fewer with a --key-prefix
// longer than the default: bench holds every key's name in memory, at most
// about 360 MB; named --key-prefix (default "kvcli-bench:") plus a number). It
// runs for --duration (default 10s), or exactly --ops operations when
// given. Counts are decimal or hex (0x...). --preload (default true) sets
// every key once first, so gets find documents; with --preload=false gets
// of missing keys count as misses, not errors. --seed (default 1) makes each worker's choices of keys,
// operations and value sizes repeatable (with --concurrency 1, the whole
// run's).
//
// The shape of the load:
//
//	--rate N           target N operations per second over all workers (0, the
//	                   default: as fast as they go). Operation i is scheduled at
//	                   i/N seconds from the start and a worker waits on a timer
//	                   for its operation's time. The schedule is fixed: after a
//	                   stall, operations whose time has passed start at once until
//	                   the run is back on schedule, so the offered rate stays N.
//	                   The summary gives the achieved rate, how many operations
//	                   started over 1ms late and how late the last one started;
//	                   when that is more than 1% of the run's time (plus 1ms),
//	                   it says the client could not keep up: each worker runs
//	                   one operation at a time, so N needs at least N x latency
//	                   workers
//	--value-size S     bytes per value set: N (default 32), or MIN-MAX for sizes
//	                   drawn uniformly from MIN to MAX (both included); at most
//	                   20 MiB. The preload draws its sizes the same way
//	--key-dist D       uniform (default): every key equally likely; zipfian: key
//	                   number k (0 to --keys - 1) with probability proportional to
//	                   (1+k)^-s, so key 0 is the hottest (math/rand/v2's Zipf)
//	--zipf-s s         zipfian's exponent, more than 1 (default 1.01, near YCSB's
//	                   0.99: over 10000 keys the hottest 1% take about half the
//	                   operations); larger is more skewed
//	--durability L     the run's sets are synchronous writes at level L: none
//	                   (default), majority, majorityAndPersistActive,
//	                   persistToMajority (case ignored). The preload's sets are
//	                   ordinary writes. memcached has no durability: with
//	                   memcached:// it is a usage error (exit 2) before
//	                   connecting. A cluster without enough replicas fails the
//	                   sets (DURABILITY_IMPOSSIBLE), and bench exits 1
//	--batch N          keys per call (default 1, at most 10000): with N > 1 a
//	                   worker's gets go as one GetMany of N keys and its sets as
//	                   one UpsertMany of N documents; each key is still an
//	                   operation with its own outcome, counted as a miss or an
//	                   error on its own. Latencies are then per batch. With
//	                   --rate a batch takes N of the schedule's operations and
//	                   starts at the first one's time
//
// Only operations that succeeded count as throughput and latency (a get's
// miss is a success: the server answered); an operation that failed is an
// error of its kind, and its call's latency goes on a line of its own, so
// that a server that died mid-run, whose refusals come back in
// microseconds, does not read as a fast one.
//
// Every second a progress line goes to stderr, rewritten in place when
// stderr is a terminal: during the preload the keys set so far (and keys/s),
// then the run's successful ops/s over the last second, operations, errors
// (and errors/s), retries, and with --rate the operations started late.
// With --json there is none. At the end a summary goes to stdout: the
// operations that succeeded and their ops/s, gets (and misses) and sets,
// with --rate the target and how well it was kept, errors by kind with the
// first error's message, retries by reason (KV_NOT_MY_VBUCKET, KV_LOCKED,
// ...), and latency: min, p50, p90, p99, p99.9, max and mean, from
// per-worker log-linear histograms (128 buckets per power of two: within
// 0.4% of the exact percentile), counted from each operation's start, of
// the calls that succeeded; a "failed" line gives the same for the calls
// that failed. With --rate a
// second line, "scheduled", counts them from each operation's scheduled
// time: an operation that started late waited for a worker, and a
// latency from its start alone would hide that wait (coordinated
// omission). A run on a busy machine, where the rate held but operations
// queued behind stalls:
//
//	$ kvcli bench --rate 3000 --duration 3s --concurrency 4 --key-dist zipfian --value-size 10-1000
//	kvcli bench: couchbase://127.0.0.1:41499,127.0.0.1:45509,127.0.0.1:34867/default: 4 workers, 50% gets, 10-1000-byte values, 10000 keys (zipfian s=1.01), --rate 3000 ops/s
//	time       3.00s (ran for --duration)
//	ops        8971 (2989 ops/s): 4487 gets (0 misses), 4484 sets
//	rate       target 3000 ops/s, achieved 2989 ops/s; 2777 operations started over 1ms late (at most 93.32ms), the last 5.04ms late
//	errors     0
//	retries    0
//	latency    min 23µs  p50 119µs  p90 255µs  p99 3.24ms  p99.9 25.76ms  max 28.46ms  (mean 293µs)
//	scheduled  min 35µs  p50 834µs  p90 16.68ms  p99 73.14ms  p99.9 92.54ms  max 94.94ms  (mean 5.45ms, from each operation's scheduled time)
//	slow ops   none: no operations over the threshold (the slowest of each interval)
//	orphans    none: no answers that came after their operation had given up
//
// The last two lines are the client's slow-operation and orphan reports
// (RFC 0067) logged during the run, each as its JSON on a line of its own:
// operations over 500 ms (tracing_threshold_kv in the connection string
// sets the threshold), and answers that came after their operation timed
// out.
//
// --json prints the summary as one object: "config" (the flags as read:
// "rate", "value_size_min", "value_size_max", "key_dist", "zipf_s" with
// zipfian, "durability", "batch", ...), "ops" and "ops_per_sec" (the
// operations that succeeded), "gets", "misses", "sets", "set_bytes" (value
// bytes the sets wrote), "calls" (the calls made: one per operation, or
// per batch with --batch), "errors" (the operations that failed),
// "errors_by_kind" (the kinds of --json's "error.kind"), "retries",
// "retries_by_reason", "latency_us" (microseconds, of the calls that
// succeeded), "error_latency_us" when some failed, and with --rate
// "latency_from_schedule_us" and "rate": {"target_ops_per_sec", "late_ops",
// "max_late_us", "final_lag_us", "kept_up"}, and "threshold_reports" and
// "orphan_reports" (the reports' JSON, empty lists when there were none).
// Ctrl-C stops the run early: operations in flight finish (workers waiting
// for their scheduled time stop waiting; the progress line says it is
// finishing them), and the summary is printed as usual. Ctrl-C during the preload stops it the same way; the summary then
// says how many keys were set and that no operations ran
// ("stopped":"interrupted_preloading" and "preloaded" with --json). bench
// exits 1 when any operation (or a preload set) failed, else 0; 2 for a bad
// flag (a range with MIN over MAX, an unknown distribution or durability
// level, --zipf-s without --key-dist zipfian, ...), before connecting.
//
// # Global flags and environment
//
// Global flags may come before or after the command name, and between its
// arguments; a flag given after the command wins over the same flag before
// it. "--" ends the flags, for keys and values that start with "-":
// kvcli set -- -key -value.
//
//	-c, --connstr URL      connection string; env KVCLI_CONNSTR; default
//	                       couchbase://127.0.0.1/default
//	-u, --user NAME        user name; env KVCLI_USER
//	-p, --password PW      password; env KVCLI_PASSWORD (preferred: -p is visible in
//	                       the process list, and kvcli warns when it is used)
//	-b, --bucket NAME      bucket; replaces the connection string's path; default
//	                       "default" when neither names one
//	--collection S.C       scope.collection, or a collection of _default
//	                       (default _default._default)
//	--cacert FILE          PEM CA certificates to trust for couchbases:// and
//	                       memcacheds://; env KVCLI_CACERT (without it the system
//	                       roots apply, and for couchbases:// Couchbase Capella's
//	                       root CA too). Only those two use TLS: other schemes
//	                       ignore KVCLI_CACERT, and --cacert with them is a usage
//	                       error
//	--allow-plain-auth     memcached:// with a user, to a memcached with SASL: log in
//	                       with SASL PLAIN, which sends the password in clear;
//	                       without it kvcli refuses before sending the password
//	                       (memcacheds:// needs no opt-in; a memcached without SASL
//	                       is used without logging in, whatever the user)
//	-t, --timeout D        timeout of each operation, retries included (default 2.5s;
//	                       when -t is not given the connection string's kv_timeout
//	                       applies, else its profile's: 20s for wan_development)
//	--connect-timeout D    timeout of connecting (default 10s; when --connect-timeout
//	                       is not given the connection string's connect_timeout
//	                       applies, else its profile's: 20s for wan_development)
//	--json                 one JSON document per command on stdout (see Output)
//	-v                     on stderr: one line per attempt of every operation, and the
//	                       client's log/slog debug events
//
// Connection strings are those of kvwire's client package:
// couchbase://h1,h2:11210/bucket?kv_timeout=5s (TCP, default port 11210),
// couchbase://cluster.example.com/bucket (one name without a port: the
// nodes of its DNS SRV record _couchbase._tcp.cluster.example.com, or the
// name itself when it has none; ?enable_dns_srv=false skips the lookup),
// couchbase://h1:8091=http/bucket (a node's REST port: the config is read
// over HTTP, as a memcached bucket's must be; ?bootstrap_on=cccp|http|both),
// couchbases://h1/bucket (TLS, 11207; Couchbase Capella's root CA is
// trusted besides the system roots unless --cacert is given, and
// ?profile=wan_development sets 20 s timeouts for a cluster far away),
// memcached://h1:11211,h2 (plain memcached servers, keys spread with
// ketama; with a user and password
// kvcli logs in with SASL PLAIN to a server that has SASL, which needs
// --allow-plain-auth as it sends the password in clear, and a server
// without SASL is used without logging in, so a KVCLI_USER exported for
// another server does not get in the way) and memcacheds://h1 (memcached
// over TLS, started with -Z; PLAIN goes over TLS). A memcached server that refuses
// connections fails its keys at once; ?remove_failed_servers=true takes it
// out of the ring while it stays down. memcached has no buckets,
// collections or locks: -b and --collection are usage errors there, and
// lock and unlock fail at once. Without a scheme, h1 and RFC 0011's legacy
// h1:8091 are couchbase://h1:11210 (no DNS SRV lookup); h1:PORT at another
// port is refused as ambiguous: write couchbase://h1:PORT for a KV port or
// http://h1:PORT for the cluster manager's.
//
// The password is never printed, logged or put in an error message: the
// client never logs it, and should some layer ever echo it, every value
// kvcli puts into a diagnostic (an error's text, a key, a host, a log
// attribute) has a password of 3 or more characters replaced with ****
// before it goes in, and every line on stderr passes a second filter that
// does the same. kvcli's own words are left alone: with the password
// "password", "check the user name and password" is printed as it is.
// Values printed as results on stdout are never filtered. (serve prints the
// mock's own test credentials, on purpose.)
//
// # Values
//
// VALUE (set, add, replace, append, prepend) is:
//
//	text      the argument itself
//	-         everything read from stdin
//	@FILE     the contents of FILE
//
// With --raw the argument is always taken literally (to store "-" or a text
// that starts with "@").
//
// # Output
//
// stdout carries the command's result, stderr everything else:
//
//	get, lock      the value on stdout exactly as stored (a newline is added only
//	               when stdout is a terminal); on stderr a metadata line:
//	               "KEY" cas=0x... flags=0x... datatype=... size=N
//	               (lock adds the lock time and the unlock command)
//	set, add, replace   stored "KEY" cas=0x...
//	append, prepend     appended to "KEY" cas=0x... / prepended to "KEY" cas=0x...
//	touch          touched "KEY" cas=0x...
//	delete         deleted "KEY"
//	unlock         unlocked "KEY"
//	incr, decr     the new value
//	exists         true or false
//	lookup         a line per path: PATH<TAB>VALUE, or PATH<TAB>error: ...
//	mutate         mutated "KEY" cas=0x..., then PATH<TAB>VALUE per counter
//	ping, route    a line per node / per map
//	diag           a line per connection, then the cluster's state
//	errors         one line on stderr: kvcli: ...
//
// With --json stdout carries exactly one JSON document per command, which
// python3 -m json.tool and jq read as it is; for a single key it is one
// object on one line:
//
//	{"op":"get","key":"k","ok":true,"value":"world","encoding":"utf8",
//	 "cas":"0x18ea407c62300000","flags":50331648,"datatype":"raw","retries":0}
//
// Commands with many results keep them in one document too, rather than
// printing JSON Lines, so that --json means the same everywhere: get of
// several keys prints {"op":"get","ok":...,"results":[...]}, one object per
// key as above; scan prints {"op":"scan","items":[...],"count":N,"ok":true},
// written as the scan goes (an item per line, so a large scan is not held
// in memory; jq -c '.items[]' gives one per line), and a scan that fails
// midway still closes it, with "ok":false and "error". stats and flush print
// one object with "nodes", bench and demo their summary, serve its
// connection details. help prints text. A usage error (exit 2) prints
// nothing on stdout.
//
// "value" is the value as a string when it is valid UTF-8 ("encoding":"utf8")
// and base64 otherwise ("encoding":"base64"). CAS values are hex strings
// ("0x" and 16 digits), because JSON numbers lose precision above 2^53 in
// most decoders; unlock and --cas accept them as printed. Mutations add
// "mutation_token" ({"bucket","vbucket","vbuuid","seqno"}) when the server
// sent one; incr/decr add "counter", exists "exists", lock "lock_time_s",
// route "route", ping "ping" (one {"node","ok","state","latency_us","local",
// "remote","local_id","error"} per node, state being RFC 0034's ok, timeout
// or error, latency_us whole microseconds, absent when the node failed) and "report" (the SDKs' ping report, RFC 0061's: "version":2,
// "id", "config_rev", "sdk", "services":{"kv":[{"id","latency_us","remote",
// "local","state","namespace","error"}]}), diag "diagnostics" (RFC 0061's report: "version":2, "state",
// "services":{"kv":[{"id","state","remote","local","last_activity_us",
// "namespace","details"}]}); lookup and mutate add "paths" (one
// {"path","xattr","value","exists","error"} per path, a value that is not
// JSON as "raw" and "encoding"; mutate: per counter)
// and "deleted" when the document is a tombstone. "retries" is how many times the operation was
// retried and "retry_reasons" why. "ok" is false exactly when the exit
// status is not 0, but for exists and lookup --exists, whose exit 3 is the
// answer false ("ok":true, "exists":false). A failure prints "ok":false and
// "error": {"kind","message","exit","status","server_context","server_ref",
// "ambiguous"} ("status" is the server's last answer, "server_context" and
// "server_ref" its extended error information when it sent any; lookup: the
// failure of the path that gave the exit status; get of several keys:
// each key's in "results"), where kind is one of
// not_found, conflict, authentication, bucket, unreachable, tls, timeout,
// interrupted, invalid_argument, collection, access, unsupported,
// ambiguous (sent, no answer: it may have been applied), path (a
// sub-document path failed), error;
// "ambiguous":true, whatever the kind (ambiguous, timeout, interrupted),
// means the write may have been applied: read the key to see.
// The human line still goes to stderr.
//
// # Errors
//
// Errors are one line that says what to do:
//
//	kvcli: authentication failed for user "app": check the user name and password (KVCLI_PASSWORD)
//	kvcli: bucket "travel" does not exist or user "app" may not access it
//	kvcli: nothing is listening at 127.0.0.1:11210 (is the cluster running? check -c)
//	kvcli: timed out after 2.5s; retried 7 times for KV_LOCKED: the document stayed locked
//	kvcli: TLS handshake failed: x509: certificate signed by unknown authority (for a cluster with its own CA pass --cacert FILE or set KVCLI_CACERT)
//	kvcli: document "k" not found
//
// A timeout's line says how often the operation was retried and why, the
// status the node answered last when that answer's retry was not made
// (its wait ran into the deadline), what the server said with that answer
// when it sent extended error information (XERROR: `; the server said
// "CONTEXT" (ref REF)`, the ref being the id the server's log names the
// failure by), and whether a write may have been applied. With -v the
// client's full error follows on a "kvcli: detail:" line.
//
// # Tracing (-v)
//
// Every attempt of every operation is printed when it ends: the attempt
// number, why it was a retry, the node, the vbucket, whether it was routed
// by the current or the forward map and with which config revision, the
// status answered and how long it took:
//
//	kvcli: Upsert "k" attempt 1 -> 127.0.0.1:35811 vb 528 by current map (rev 2): LOCKED in 166µs
//	kvcli: Upsert "k" attempt 2 (retry: KV_LOCKED) -> 127.0.0.1:35811 vb 528 by current map (rev 2): LOCKED in 98µs
//	kvcli: Get "k" attempt 1 -> 127.0.0.1:46289 vb 68 by current map (rev 2): NOT_MY_VBUCKET in 156µs
//	kvcli: Get "k" attempt 2 (retry: KV_NOT_MY_VBUCKET) -> 127.0.0.1:42169 vb 68 by forward map (rev 13): SUCCESS in 85µs
//
// The client's own events (connections, configs, retry decisions) follow
// as log/slog text at debug level.
//
// # Exit status
//
//	0    success (exists: the document exists)
//	1    the operation failed: could not connect, wrong credentials, unknown bucket,
//	     timeout, server error, or its result could not be written to stdout (a
//	     full disk); bench: some operation failed; demo: it did not
//	     show what it should, or an operation failed
//	2    usage: bad flags or arguments (found before anything connects)
//	3    document not found (get, replace, delete, touch, lock, append, prepend,
//	     incr/decr without --initial); exists: the document does not exist;
//	     lookup, mutate: the document or a path is missing
//	4    conflict: CAS mismatch (--cas, or unlock with a CAS that is not the lock's),
//	     the document already exists (add), the document is not locked (unlock),
//	     the path exists (mutate insert, add-unique)
//	130  interrupted (Ctrl-C) before the operation finished; when a write was
//	     already sent, the message says it may have been applied
//
// serve and bench treat Ctrl-C as the normal way to stop (bench in its
// preload too): serve exits 0, bench prints its summary and exits 0 unless
// an operation failed. bench first lets its operations in flight finish,
// which against a server that stopped answering takes until their
// timeout; a second Ctrl-C (or SIGTERM) ends kvcli at once with 130,
// saying that a write in flight may have been applied.
package main
