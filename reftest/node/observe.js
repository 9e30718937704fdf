'use strict'
// The Couchbase Node.js SDK (its C++ core underneath) reports the server
// durations kvwire's mock cluster sends (HELLO Tracing). Its
// threshold-logging tracer (JS, fed with the dispatch spans' server
// durations by the C++ core) logs each slow operation's
// last_server_duration_us through the SDK's logger: this script hands it a
// logger that prints each report as a line {"threshold": <report>} on
// stdout. The C++ core's orphan reporter logs "Orphan responses observed:
// {json}" to stderr (CBPPLOGLEVEL, set by reftest/server_duration_test.go).
//
// usage: node observe.js '<json config>'
//   {"connStr","user","password","bucket","scope","collection","trustStorePath",
//    "readKeys":[slow key],"thresholdMs","emitMs","shortTimeoutMs"}
// It gets the slow key twice: once with the default timeout (the mock
// delays it past the threshold), once with shortTimeoutMs (it times out
// before the mock answers). It prints {"result":{"slowGetMicros",
// "timedOut","timeoutError"}}, then keeps the cluster open until its stdin
// closes, so that the periodic reports can be emitted.
const couchbase = require('couchbase')

const cfg = JSON.parse(process.argv[2])

async function main() {
  const report = (line) => {
    try {
      const rep = JSON.parse(line)
      process.stdout.write(JSON.stringify({ threshold: rep }) + '\n')
    } catch (e) {
      // not a report
    }
  }
  const opts = {
    logger: { info: report, warn: report },
    username: cfg.user,
    password: cfg.password,
    timeouts: { kvTimeout: 10000, connectTimeout: 10000 },
    tracingConfig: { enableTracing: true, kvThreshold: cfg.thresholdMs, emitInterval: cfg.emitMs, sampleSize: 10 },
    orphanReporterConfig: { enableOrphanReporting: true, emitInterval: cfg.emitMs, sampleSize: 10 },
  }
  if (cfg.trustStorePath) opts.security = { trustStorePath: cfg.trustStorePath }
  const cluster = await couchbase.connect(cfg.connStr, opts)
  const stdinClosed = new Promise((resolve) => {
    process.stdin.on('end', resolve)
    process.stdin.on('close', resolve)
    process.stdin.resume()
  })
  const out = {}
  try {
    const coll = cluster.bucket(cfg.bucket).scope(cfg.scope).collection(cfg.collection)
    const key = cfg.readKeys[0]
    let t = process.hrtime.bigint()
    await coll.get(key)
    out.slowGetMicros = Number((process.hrtime.bigint() - t) / 1000n)
    try {
      await coll.get(key, { timeout: cfg.shortTimeoutMs })
      out.timedOut = false
    } catch (e) {
      out.timedOut = true
      out.timeoutError = e.constructor.name
    }
    process.stdout.write(JSON.stringify({ result: out }) + '\n')
    await stdinClosed
  } finally {
    await cluster.close()
  }
}

main().catch((e) => {
  process.stderr.write('observe.js: ' + (e && e.stack ? e.stack : e) + '\n')
  process.exit(1)
})
