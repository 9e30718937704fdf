// Package reftest checks kvwire's mock cluster against Couchbase's own Go
// client, gocbcore v10: gocbcore bootstraps against mockcluster (SCRAM-SHA512,
// collections, mutation tokens, TLS) and runs its KV operations, including
// through a rebalance in which it learns the new vbucket owners from
// NOT_MY_VBUCKET bodies; it also bootstraps from the mock's REST ports alone
// (gocbcore_http_test.go), on a couchbase bucket and on a memcached bucket,
// whose rebalance it learns from the HTTP config stream. It checks the mock
// the same way against a second
// official client, the Couchbase Node.js SDK, whose native part is the C++
// SDK core that the Python, Ruby, PHP and C++ SDKs share (node_test.go,
// scripts in node/, the SDK pinned in node/package-lock.json and installed
// by scripts/node-sdk.sh), and against a third, libcouchbase, the C
// library of the older Node.js, Python and PHP SDKs, through its cbc,
// cbc-subdoc and cbc-pillowfight tools run as subprocesses (lcb_*_test.go;
// built by scripts/libcouchbase.sh from the source in the npm registry's
// couchbase 3.2.7 package, into a cache outside the repository). When a
// client and the mock disagree, or the clients expect different things of
// it, the mock is fixed to do what Couchbase Server (kv_engine's source and
// docs) does, never bent to a client's quirk.
//
// Values cross between the SDKs and kvwire both ways
// (cross_sdk_values_test.go): documents kvwire writes carry Couchbase's
// common flags and are decoded by gocb's transcoders (gocb is imported for
// them alone) and by the Node.js SDK's default transcoder; documents they
// write are decoded by kvwire's GetJSON and GetResult.ContentAs.
//
// Both negotiate HELLO Tracing and report the server durations the mock
// sends (server_duration_test.go): gocbcore on its dispatch spans and in its
// orphan report, the Node.js SDK in its threshold report (node/observe.js);
// the C++ core's orphan report is checked too, though it records an orphan
// when the timeout fires and so shows no server duration.
//
// It also holds the benchmarks `make bench` runs (scripts/bench.sh):
// cmd/benchcmp compares kvwire with gocbcore against the mock cluster and
// with gomemcache and a raw pipelined loop against memcached, in one
// interleaved run; cmd/mockserver runs the mock cluster in a process of its
// own, so that the harness's CPU time is its client's alone.
//
// It is a separate module so that the root module does not depend on
// gocbcore or gomemcache; `make test` runs its tests.
package reftest
