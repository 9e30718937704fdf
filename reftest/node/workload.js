'use strict'
// A write workload of the Couchbase Node.js SDK (its C++ core) for
// reftest/node_test.go, which changes the mock cluster under it (rebalance,
// failover, node stop and restart, injected statuses) and then checks that
// no acknowledged write was lost and none was applied twice.
//
// usage: node workload.js '<json config>' (see matrix.js; plus writers,
// maxKeys, progress). Writers upsert keys w<writer>-<n> in turn, each with
// its own value. Every `progress` acknowledged writes it prints
// {"progress":n}; on a line "stop" on stdin (or after maxKeys writes) the
// writers finish their current write and it prints
// {"ok":[keys],"failed":[{"key","got","detail"}]}.
const couchbase = require('couchbase')
const readline = require('readline')

const cfg = JSON.parse(process.argv[2])
let stopping = false
readline.createInterface({ input: process.stdin }).on('line', (l) => {
  if (l.trim() === 'stop') stopping = true
})

const ok = []
const failed = []
let acked = 0

async function writer(coll, w) {
  for (let n = 0; !stopping && acked + failed.length < cfg.maxKeys; n++) {
    const key = `w${w}-${n}`
    try {
      await coll.upsert(key, { writer: w, n })
      ok.push(key)
      acked++
      if (acked % cfg.progress === 0) process.stdout.write(JSON.stringify({ progress: acked }) + '\n')
    } catch (e) {
      failed.push({ key, got: e.constructor.name, detail: String(e.message) })
    }
  }
}

async function main() {
  const opts = {
    username: cfg.user,
    password: cfg.password,
    timeouts: { kvTimeout: 10000, connectTimeout: 10000 },
  }
  if (cfg.trustStorePath) opts.security = { trustStorePath: cfg.trustStorePath }
  const cluster = await couchbase.connect(cfg.connStr, opts)
  try {
    const coll = cluster.bucket(cfg.bucket).scope(cfg.scope).collection(cfg.collection)
    const ws = []
    for (let w = 0; w < cfg.writers; w++) ws.push(writer(coll, w))
    await Promise.all(ws)
  } finally {
    await cluster.close()
  }
  process.stdout.write(JSON.stringify({ ok, failed }) + '\n')
  process.exit(0)
}

main().catch((e) => {
  process.stderr.write('workload.js: ' + (e && e.stack ? e.stack : e) + '\n')
  process.exit(1)
})
