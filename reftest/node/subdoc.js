'use strict'
// Sub-document spec lists through the Couchbase Node.js SDK (its C++ core)
// against kvwire's mock cluster. reftest/subdoc_node_test.go writes the
// scenarios on stdin as one JSON array and compares the report with what
// kvwire's client gave for the same lists: one JSON object on stdout,
// {"scenarios":[{"name","steps":[{"err","paths","cas"}]}]}, where err is ""
// or the class name of the error, paths holds per spec {"err","value"} for
// a lookup (value as JSON.stringify gives it) and the values of a mutation,
// and cas the document's CAS after the step ("" when it failed).
//
// usage: node subdoc.js '<json config>' < scenarios.json
//   {"connStr","user","password","bucket","scope","collection"}
const couchbase = require('couchbase')
const { LookupInSpec, MutateInSpec, MutateInMacro, StoreSemantics } = couchbase

const cfg = JSON.parse(process.argv[2])

function readStdin() {
  return new Promise((resolve) => {
    let data = ''
    process.stdin.setEncoding('utf8')
    process.stdin.on('data', (c) => { data += c })
    process.stdin.on('end', () => resolve(data))
  })
}

const macros = {
  '"${Mutation.CAS}"': MutateInMacro.Cas,
  '"${Mutation.seqno}"': MutateInMacro.SeqNo,
  '"${Mutation.value_crc32c}"': MutateInMacro.ValueCrc32c,
}

function lookupSpec(o) {
  const opts = { xattr: !!o.xattr }
  switch (o.op) {
    case 'getdoc': return LookupInSpec.get('')
    case 'exists': return LookupInSpec.exists(o.path, opts)
    case 'count': return LookupInSpec.count(o.path, opts)
  }
  return LookupInSpec.get(o.path, opts)
}

function mutateSpec(o) {
  const opts = { xattr: !!o.xattr, createPath: !!o.mkdir }
  const value = () => (o.macros ? macros[o.value] : JSON.parse(o.value))
  const multi = () => JSON.parse('[' + o.value + ']')
  switch (o.op) {
    case 'insert': return MutateInSpec.insert(o.path, value(), opts)
    case 'upsert': return MutateInSpec.upsert(o.path, value(), opts)
    case 'replace': return MutateInSpec.replace(o.path, value(), opts)
    case 'setdoc': return MutateInSpec.replace('', value())
    case 'remove': return MutateInSpec.remove(o.path, opts)
    case 'deletedoc': return MutateInSpec.remove('')
    case 'append': return MutateInSpec.arrayAppend(o.path, multi(), { ...opts, multi: true })
    case 'prepend': return MutateInSpec.arrayPrepend(o.path, multi(), { ...opts, multi: true })
    case 'arrinsert': return MutateInSpec.arrayInsert(o.path, multi(), { ...opts, multi: true })
    case 'addunique': return MutateInSpec.arrayAddUnique(o.path, value(), opts)
    case 'counter': return MutateInSpec.increment(o.path, value(), opts)
  }
  throw new Error('unknown op ' + o.op)
}

async function step(coll, key, st, prevCas) {
  const out = { err: '', paths: [], cas: '' }
  try {
    if (st.lookup) {
      const r = await coll.lookupIn(key, st.lookup.map(lookupSpec), { accessDeleted: !!st.accessDeleted })
      r.content.forEach((e, i) => {
        const err = e.error ? e.error.constructor.name : ''
        if (st.lookup[i].op === 'exists') {
          // The SDK answers exists with true or false, not an error.
          out.paths.push({ err, value: e.error ? '' : String(!!e.value) })
          return
        }
        out.paths.push({ err, value: e.error || e.value === undefined ? '' : JSON.stringify(e.value) })
      })
      out.cas = r.cas.toString()
      return out
    }
    const opts = {}
    if (st.store === 'upsert') opts.storeSemantics = StoreSemantics.Upsert
    if (st.store === 'insert') opts.storeSemantics = StoreSemantics.Insert
    if (st.casFromPrev) opts.cas = prevCas
    if (st.casWrong) opts.cas = '12345'
    const r = await coll.mutateIn(key, st.mutate.map(mutateSpec), opts)
    for (const e of r.content) {
      out.paths.push({ err: '', value: e.value === undefined || e.value === null ? '' : JSON.stringify(e.value) })
    }
    out.cas = r.cas.toString()
  } catch (e) {
    out.err = e.constructor.name
    out.detail = String(e && e.message ? e.message : e)
  }
  return out
}

async function main() {
  const scenarios = JSON.parse(await readStdin())
  const cluster = await couchbase.connect(cfg.connStr, { username: cfg.user, password: cfg.password })
  const bucket = cluster.bucket(cfg.bucket)
  const coll = bucket.scope(cfg.scope).collection(cfg.collection)
  const report = { scenarios: [] }
  for (const sc of scenarios) {
    const key = sc.key
    // The seed is stored as written (a number past 2^53 stays as it is).
    if (sc.seed) await coll.upsert(key, sc.seed, { transcoder: new couchbase.RawJsonTranscoder() })
    let prevCas = sc.seed ? (await coll.get(key)).cas : undefined
    const steps = []
    for (const st of sc.steps) {
      const out = await step(coll, key, st, prevCas)
      if (out.cas) prevCas = out.cas
      steps.push(out)
    }
    report.scenarios.push({ name: sc.name, steps })
  }
  await cluster.close()
  process.stdout.write(JSON.stringify(report) + '\n')
}

main().catch((e) => {
  process.stderr.write(String(e && e.stack ? e.stack : e) + '\n')
  process.exit(1)
})
