'use strict'
// The operations matrix of the Couchbase Node.js SDK (its C++ core) against
// kvwire's mock cluster. reftest/node_test.go runs it and checks the
// report: one JSON object on stdout, {"cases":[{"name","got","detail"}],
// "keys":{...}}, where got is "ok" or the class name of the error the
// operation failed with ("check" when it succeeded with a wrong result).
//
// usage: node matrix.js '<json config>'
//   {"connStr","user","password","bucket","scope","collection","trustStorePath","mode"}
// mode "matrix" runs every case; "durability-timeout" runs only the durable
// write the test makes the mock hold past its durability timeout.
const couchbase = require('couchbase')

const cfg = JSON.parse(process.argv[2])
const cases = []
const keys = {}

class CheckError extends Error {}
function check(cond, what) {
  if (!cond) throw new CheckError(what)
}

async function run(name, fn) {
  try {
    await fn()
    cases.push({ name, got: 'ok' })
  } catch (e) {
    const got = e instanceof CheckError ? 'check' : e.constructor.name
    cases.push({ name, got, detail: String(e && e.message ? e.message : e) })
  }
}

async function matrix(bucket) {
  const coll = bucket.scope(cfg.scope).collection(cfg.collection)
  const bin = coll.binary()
  const def = bucket.defaultCollection()
  const short = { timeout: 1500 }

  let cas
  await run('upsert', async () => {
    const r = await coll.upsert('doc', { a: 1 })
    check(r.cas && r.cas.toString() !== '0', 'no CAS')
    check(r.token, 'no mutation token')
    cas = r.cas
  })
  await run('get', async () => {
    const r = await coll.get('doc')
    check(r.content.a === 1, 'content ' + JSON.stringify(r.content))
    check(r.cas.toString() === cas.toString(), 'CAS differs from the upsert')
  })
  await run('get missing', () => coll.get('missing'))
  await run('exists', async () => {
    const r = await coll.exists('doc')
    check(r.exists === true, 'exists false for a stored document')
  })
  await run('exists missing', async () => {
    const r = await coll.exists('missing')
    check(r.exists === false, 'exists true for a missing document')
  })
  await run('insert', () => coll.insert('new', { n: 1 }))
  await run('insert existing', () => coll.insert('doc', { a: 2 }))
  await run('replace', async () => {
    const r = await coll.replace('doc', { a: 3 }, { cas })
    cas = r.cas
  })
  await run('replace cas mismatch', () => coll.replace('doc', { a: 4 }, { cas: '12345' }))
  await run('replace missing', () => coll.replace('missing', { a: 1 }))
  await run('remove cas mismatch', () => coll.remove('new', { cas: '12345' }))
  await run('remove', async () => {
    await coll.remove('new')
    const r = await coll.exists('new')
    check(!r.exists, 'removed document still exists')
  })
  await run('remove missing', () => coll.remove('missing'))
  await run('touch', () => coll.touch('doc', 3600))
  await run('touch missing', () => coll.touch('missing', 10))
  await run('getAndTouch', async () => {
    const r = await coll.getAndTouch('doc', 3600)
    check(r.content.a === 3, 'content ' + JSON.stringify(r.content))
  })
  await run('getAndTouch missing', () => coll.getAndTouch('missing', 10))

  // Locks.
  let lockCas
  await run('getAndLock', async () => {
    await coll.upsert('locked', { l: 1 })
    const r = await coll.getAndLock('locked', 10)
    lockCas = r.cas
    check(r.content.l === 1, 'content ' + JSON.stringify(r.content))
  })
  await run('upsert locked', () => coll.upsert('locked', { l: 2 }, short))
  await run('getAndLock locked', () => coll.getAndLock('locked', 10, short))
  await run('unlock wrong cas', () => coll.unlock('locked', '12345', short))
  await run('unlock', () => coll.unlock('locked', lockCas))
  await run('unlock not locked', () => coll.unlock('locked', lockCas, short))
  await run('replace with the lock cas', async () => {
    const r = await coll.getAndLock('locked', 10)
    await coll.replace('locked', { l: 3 }, { cas: r.cas })
    const g = await coll.get('locked')
    check(g.content.l === 3, 'content ' + JSON.stringify(g.content))
  })

  // Replicas.
  await run('getAnyReplica', async () => {
    const r = await coll.getAnyReplica('doc')
    check(r.content.a === 3, 'content ' + JSON.stringify(r.content))
  })
  await run('getAllReplicas', async () => {
    const rs = await coll.getAllReplicas('doc')
    check(rs.length === 2, rs.length + ' results, want active and 1 replica')
    check(rs.some((r) => r.isReplica) && rs.some((r) => !r.isReplica), 'want one active and one replica result')
    check(rs.every((r) => r.content.a === 3), 'content differs')
  })
  await run('getAnyReplica missing', () => coll.getAnyReplica('missing'))

  // Expiry (the Go test reads the stored expiry of these keys).
  await run('upsert with expiry', () => coll.upsert('expiring', { e: 1 }, { expiry: 3600 }))
  await run('upsert preserveExpiry', () => coll.upsert('expiring', { e: 2 }, { preserveExpiry: true }))
  await run('upsert without preserveExpiry', async () => {
    await coll.upsert('expiry-reset', { e: 1 }, { expiry: 3600 })
    await coll.upsert('expiry-reset', { e: 2 })
  })
  keys.preserved = 'expiring'
  keys.reset = 'expiry-reset'

  // Durability.
  await run('durable upsert majority', () =>
    coll.upsert('durable', { d: 1 }, { durabilityLevel: couchbase.DurabilityLevel.Majority }))
  await run('durable remove majority', () =>
    coll.remove('durable', { durabilityLevel: couchbase.DurabilityLevel.Majority }))
  await run('legacy durability persistTo replicateTo', () =>
    coll.upsert('observed', { o: 1 }, { durabilityPersistTo: 2, durabilityReplicateTo: 1 }))
  await run('legacy durability remove', () =>
    coll.remove('observed', { durabilityPersistTo: 1, durabilityReplicateTo: 1 }))
  await run('legacy durability replicateTo more than the replicas', () =>
    coll.upsert('observed', { o: 2 }, { durabilityReplicateTo: 2, timeout: 1500 }))

  // Values. A value of 20 MiB crosses the mock (and, for the TLS run,
  // the encryption) twice while the machine runs other tests: these cases
  // get a minute instead of the 5 s kvTimeout, which a busy machine can
  // exceed without anything being wrong.
  const big = { timeout: 60000 }
  await run('value 20 MiB', async () => {
    const v = Buffer.alloc(20 * 1024 * 1024 - 1024, 'x')
    await coll.upsert('big', v, big)
    const r = await coll.get('big', big)
    check(Buffer.isBuffer(r.content) ? r.content.equals(v) : r.content === v.toString(), 'value differs')
  })
  await run('value too large', () => coll.upsert('too-big', Buffer.alloc(21 * 1024 * 1024, 'y'), big))
  await run('value incompressible 1 MiB', async () => {
    const v = require('crypto').randomBytes(1 << 20)
    await coll.upsert('random', v, big)
    const r = await coll.get('random', big)
    check(Buffer.from(r.content).equals(v), 'value differs')
  })

  // Binary operations.
  await run('increment initial', async () => {
    const r = await bin.increment('counter', 1, { initial: 10 })
    check(Number(r.value) === 10, 'value ' + r.value)
  })
  await run('increment', async () => {
    const r = await bin.increment('counter', 5)
    check(Number(r.value) === 15, 'value ' + r.value)
  })
  await run('decrement', async () => {
    const r = await bin.decrement('counter', 20)
    check(Number(r.value) === 0, 'value ' + r.value + ' (decrements stop at 0)')
  })
  await run('increment missing', () => bin.increment('no-counter', 1))
  await run('increment not a number', async () => {
    await coll.upsert('text', 'abc')
    await bin.increment('text', 1)
  })
  await run('append', async () => {
    await coll.upsert('raw', Buffer.from('mid'))
    await bin.append('raw', 'end')
    await bin.prepend('raw', 'start-')
    const r = await coll.get('raw')
    check(Buffer.from(r.content).toString() === 'start-midend', 'content ' + Buffer.from(r.content).toString())
  })
  await run('append missing', () => bin.append('missing', 'x'))
  await run('prepend missing', () => bin.prepend('missing', 'x'))

  // Collections.
  await run('default collection', async () => {
    await def.upsert('in-default', { c: 'default' })
    const r = await def.get('in-default')
    check(r.content.c === 'default', 'content')
  })
  await run('missing collection', () => bucket.scope(cfg.scope).collection('no-such-collection').get('doc', short))
}

async function durabilityTimeout(bucket) {
  const coll = bucket.scope(cfg.scope).collection(cfg.collection)
  // The SDK sends the server a durability timeout somewhat shorter than the
  // operation's own; a 4 s operation leaves the server's answer hundreds of
  // milliseconds to arrive before the SDK would give up on its own.
  await run('durable upsert past its durability timeout', () =>
    coll.upsert('held', { h: 1 }, { durabilityLevel: couchbase.DurabilityLevel.Majority, timeout: 4000 }))
  keys.held = 'held'
}

async function main() {
  const opts = {
    username: cfg.user,
    password: cfg.password,
    timeouts: { kvTimeout: 5000, kvDurableTimeout: 5000, connectTimeout: 10000 },
  }
  if (cfg.trustStorePath) opts.security = { trustStorePath: cfg.trustStorePath }
  const cluster = await couchbase.connect(cfg.connStr, opts)
  try {
    const bucket = cluster.bucket(cfg.bucket)
    await bucket.defaultCollection().exists('warm-up').catch(() => {})
    if (cfg.mode === 'durability-timeout') {
      await durabilityTimeout(bucket)
    } else {
      await matrix(bucket)
    }
  } finally {
    await cluster.close()
  }
  process.stdout.write(JSON.stringify({ cases, keys }) + '\n')
}

main().catch((e) => {
  process.stderr.write('matrix.js: ' + (e && e.stack ? e.stack : e) + '\n')
  process.exit(1)
})
