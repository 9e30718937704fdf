'use strict'
// Documents the Couchbase Node.js SDK and kvwire write for each other, read
// and written with the SDK's default transcoder (couchbase.DefaultTranscoder:
// common flags for JSON, strings and Buffers). reftest/cross_sdk_values_test.go runs
// it and checks the report: one JSON object on stdout,
//   {"read": {key: {"type", "json"|"string"|"base64", "flags"}}, "wrote": [key, ...]}
// where type is "Buffer", "string" or the JS typeof of what get() returned
// and flags are the document's flags (read a second time by a transcoder
// that decodes nothing).
//
// usage: node values.js '<json config>'
//   {"connStr","user","password","bucket","scope","collection","trustStorePath",
//    "readKeys": [key, ...],
//    "write": [{"key", "type": "json"|"string"|"Buffer", "json"|"string"|"base64"}, ...]}
const couchbase = require('couchbase')

const cfg = JSON.parse(process.argv[2])

// describe reports what the default transcoder gave, in a form JSON carries.
function describe(v) {
  if (Buffer.isBuffer(v)) return { type: 'Buffer', base64: v.toString('base64') }
  if (typeof v === 'string') return { type: 'string', string: v }
  return { type: typeof v, json: JSON.stringify(v) }
}

// flagsOnly returns the flags a document is stored with, not its content.
const flagsOnly = {
  encode() {
    throw new Error('flagsOnly encodes nothing')
  },
  decode(_bytes, flags) {
    return flags
  },
}

// value is what the SDK is given to write: a plain object (or array,
// number, ...), a string or a Buffer, which the default transcoder stores
// with the JSON, string and binary common flags.
function value(w) {
  switch (w.type) {
    case 'json':
      return JSON.parse(w.json)
    case 'string':
      return w.string
    case 'Buffer':
      return Buffer.from(w.base64, 'base64')
  }
  throw new Error('unknown value type ' + w.type)
}

async function main() {
  const opts = {
    username: cfg.user,
    password: cfg.password,
    timeouts: { kvTimeout: 5000, connectTimeout: 10000 },
  }
  if (cfg.trustStorePath) opts.security = { trustStorePath: cfg.trustStorePath }
  const cluster = await couchbase.connect(cfg.connStr, opts)
  const read = {}
  const wrote = []
  try {
    const coll = cluster.bucket(cfg.bucket).scope(cfg.scope).collection(cfg.collection)
    for (const key of cfg.readKeys || []) {
      const r = await coll.get(key)
      const f = await coll.get(key, { transcoder: flagsOnly })
      read[key] = Object.assign(describe(r.content), { flags: f.content })
    }
    for (const w of cfg.write || []) {
      await coll.upsert(w.key, value(w))
      wrote.push(w.key)
    }
  } finally {
    await cluster.close()
  }
  process.stdout.write(JSON.stringify({ read, wrote }) + '\n')
}

main().catch((e) => {
  process.stderr.write('values.js: ' + (e && e.stack ? e.stack : e) + '\n')
  process.exit(1)
})
