// Hostile clients against `jupyter-agent e2b` (run by
// tests/security/e2b_hostile.sh): each refusal is one top-level test, and
// after each the server still serves a normal client.
import { test, before, after } from 'node:test'
import assert from 'node:assert/strict'
import crypto from 'node:crypto'
import net from 'node:net'
import { Sandbox } from '@e2b/code-interpreter'
import { serveForSdk, stopServer, boxOf, boxLeft, until } from './lib.mjs'

const KEY = 'e2b_' + crypto.randomBytes(20).toString('hex')
const MAX = 4
let server, url, host, port

before(async () => {
  server = await serveForSdk(KEY, ['--max-sandboxes', String(MAX), '--disk', '4M', '--pool', '1'])
  url = server.url
  ;[host, port] = url.replace('http://', '').split(':')
})

after(async () => {
  await stopServer(server)
})

const api = (path, opts = {}) =>
  fetch(url + path, {
    ...opts,
    headers: { 'X-API-KEY': KEY, 'Content-Type': 'application/json', ...(opts.headers || {}) },
  })

const envd = (sbx, path, opts = {}, token = sbx.envdAccessToken) =>
  fetch(url + path, {
    ...opts,
    headers: {
      'E2b-Sandbox-Id': sbx.sandboxId, 'E2b-Sandbox-Port': '49983',
      ...(token ? { 'X-Access-Token': token } : {}),
      ...(opts.headers || {}),
    },
  })

// One raw HTTP/1.1 exchange: the status line's code, or 'closed'.
function raw(text, { timeout = 15000 } = {}) {
  return new Promise((resolve) => {
    const s = net.connect(Number(port), host)
    let got = ''
    s.setTimeout(timeout, () => { s.destroy(); resolve('timeout') })
    s.on('data', (d) => { got += d })
    s.on('error', () => {})
    s.on('close', () => {
      const m = /^HTTP\/1\.[01] (\d{3})/.exec(got)
      resolve(m ? Number(m[1]) : 'closed')
    })
    s.write(text, () => {})
  })
}

async function stillServes() {
  const r = await api('/sandboxes')
  assert.equal(r.status, 200, 'the server still answers a normal client')
}

test('a wrong, missing or malformed API key is 401 and reveals nothing', async () => {
  for (const key of ['e2b_' + '0'.repeat(40), null, 'not-a-key', KEY + '0']) {
    const res = await fetch(url + '/sandboxes', {
      method: 'POST', body: '{"templateID":"base"}',
      headers: { 'Content-Type': 'application/json', ...(key ? { 'X-API-KEY': key } : {}) },
    })
    assert.equal(res.status, 401, String(key))
    const body = await res.json()
    assert.ok(!JSON.stringify(body).includes(KEY), 'the key is never echoed')
  }
  await assert.rejects(Sandbox.create({ apiKey: 'e2b_' + 'f'.repeat(40) }), /API key/i)
  await stillServes()
})

test('an unknown or killed sandbox is 404 on the control plane, and no sandbox traffic reaches it', async () => {
  assert.equal((await api('/sandboxes/' + '0'.repeat(32))).status, 404)
  assert.equal((await api('/sandboxes/../../etc/passwd')).status, 404)
  const s = await Sandbox.create()
  const token = s.envdAccessToken
  await s.kill()
  assert.equal((await api('/sandboxes/' + s.sandboxId)).status, 404)
  assert.equal((await api('/sandboxes/' + s.sandboxId, { method: 'DELETE' })).status, 404)
  assert.equal((await api(`/sandboxes/${s.sandboxId}/timeout`, {
    method: 'POST', body: '{"timeout": 60}' })).status, 404)
  // Sandbox traffic: 502 as E2B's proxy answers (the SDKs read "not running").
  const res = await envd(s, '/files?path=x', {}, token)
  assert.equal(res.status, 502)
  assert.equal(await Sandbox.kill(s.sandboxId), false)
})

test('another sandbox\'s id with a valid key but the wrong or no access token is refused', async () => {
  const a = await Sandbox.create()
  const b = await Sandbox.create()
  try {
    await a.files.write('secret.txt', 'mine')
    for (const tok of [b.envdAccessToken, null, 'x', a.envdAccessToken.slice(0, 63)]) {
      const r1 = await envd(a, '/files?path=secret.txt', {}, tok)
      assert.equal(r1.status, 401, 'envd with ' + tok)
      const r2 = await fetch(url + '/execute', {
        method: 'POST', body: '{"code":"1"}',
        headers: {
          'E2b-Sandbox-Id': a.sandboxId, 'E2b-Sandbox-Port': '49999',
          'Content-Type': 'application/json', 'X-API-KEY': KEY,
          ...(tok ? { 'X-Access-Token': tok } : {}),
        },
      })
      assert.equal(r2.status, 401, 'the interpreter with ' + tok)
    }
    // The traffic token works for the interpreter (the SDK sends it on
    // /contexts), and only its own sandbox's.
    const c = await fetch(url + '/contexts', {
      headers: {
        'E2b-Sandbox-Id': a.sandboxId, 'E2b-Sandbox-Port': '49999',
        'E2B-Traffic-Access-Token': b.trafficAccessToken,
      },
    })
    assert.equal(c.status, 401)
  } finally {
    await a.kill()
    await b.kill()
  }
})

test('oversized bodies and headers are refused before they are read; the server goes on', async () => {
  // Content-Length over the cap: 413 at once, nothing read.
  const big = await raw('POST /sandboxes HTTP/1.1\r\nHost: x\r\nX-API-KEY: ' + KEY +
    '\r\nContent-Type: application/json\r\nContent-Length: 999999999\r\n\r\n{')
  assert.equal(big, 413)
  // A chunked body past the cap (no length to refuse it by), sent for real.
  const chunks = async function* () {
    yield Buffer.from('{"templateID":"base","metadata":{"a":"')
    for (let i = 0; i < 17; i++) yield Buffer.alloc(1 << 20, 'x')
    yield Buffer.from('"}}')
  }
  const res = await api('/sandboxes', { method: 'POST', body: chunks(), duplex: 'half' })
  assert.equal(res.status, 413)
  // 100 KiB of headers.
  const hdr = await raw('GET /sandboxes HTTP/1.1\r\nHost: x\r\nX-Big: ' + 'y'.repeat(100 << 10) +
    '\r\n\r\n')
  assert.ok(hdr === 431 || hdr === 413 || hdr === 'closed', String(hdr))
  // Garbage.
  assert.ok([400, 'closed'].includes(await raw('\x00\x01\x02 / HTTP/9\r\n\r\n')))
  await stillServes()
})

test('an upload past the disk cap fails cleanly, leaves no partial file, and the box still works', async () => {
  const s = await Sandbox.create()
  try {
    // Declared too big: 413 before any byte is read.
    const r1 = await raw(`POST /files?path=big.bin HTTP/1.1\r\nHost: x\r\n` +
      `E2b-Sandbox-Id: ${s.sandboxId}\r\nE2b-Sandbox-Port: 49983\r\n` +
      `X-Access-Token: ${s.envdAccessToken}\r\n` +
      `Content-Type: application/octet-stream\r\nContent-Length: ${6 << 20}\r\n\r\nxx`)
    assert.equal(r1, 413)
    // Streamed (chunked, no length): the tmpfs fills and the upload stops.
    const chunks = async function* () {
      for (let i = 0; i < 12; i++) yield Buffer.alloc(512 << 10, i)
    }
    const r2 = await envd(s, '/files?path=big.bin', {
      method: 'POST', body: chunks(), duplex: 'half',
      headers: { 'Content-Type': 'application/octet-stream' },
    })
    assert.ok([507, 413].includes(r2.status), String(r2.status))
    const names = (await s.files.list('/home/user')).map((e) => e.name)
    assert.ok(!names.includes('big.bin'), names.join(','))
    assert.ok(!names.some((n) => n.startsWith('.ja-upload')), names.join(','))
    // And it still works: a small file goes in and the kernel sees it.
    await s.files.write('small.txt', 'ok')
    assert.equal((await s.runCode('open("small.txt").read()')).text, 'ok')
  } finally {
    await s.kill()
  }
})

test('slowloris: connections trickling headers do not stop a normal client, and are cut at the header deadline', async () => {
  const socks = []
  for (let i = 0; i < 150; i++) {
    const c = net.connect(Number(port), host)
    c.on('error', () => {})
    c.write('GET /sandboxes HTTP/1.1\r\nHost: x\r\n') // never finished
    socks.push(c)
  }
  // A header line every 2 s: never idle, so only the header deadline
  // (10 s from connect) can end them, not the 30 s idle timeout.
  const drip = setInterval(() => socks.forEach((c) => c.write('X-Drip: 1\r\n', () => {})), 2000)
  const closed = socks.map((c) => new Promise((r) => c.on('close', r)))
  const opened = Date.now()
  await new Promise((r) => setTimeout(r, 300))
  const s = await Sandbox.create()
  assert.equal((await s.runCode('6 * 7')).text, '42')
  await s.kill()
  const cut = await Promise.race([
    Promise.all(closed).then(() => true),
    new Promise((r) => setTimeout(() => r(false), Math.max(0, 25000 - (Date.now() - opened)))),
  ])
  clearInterval(drip)
  socks.forEach((c) => c.destroy())
  assert.ok(cut, 'every trickling connection was closed by the server within 25 s')
})

test(`200 concurrent creates over --max-sandboxes ${MAX}: clean refusals, nothing leaked`, async () => {
  const res = await Promise.all(Array.from({ length: 200 }, () =>
    api('/sandboxes', { method: 'POST', body: '{"templateID":"base","timeout":120}' })
      .then(async (r) => ({ status: r.status, body: await r.json() }))
      .catch((e) => ({ status: 'error ' + e.message }))))
  const ok = res.filter((r) => r.status === 201)
  const refused = res.filter((r) => r.status === 429)
  assert.equal(ok.length + refused.length, 200, JSON.stringify(res.filter((r) =>
    r.status !== 201 && r.status !== 429).slice(0, 3)))
  assert.ok(ok.length >= 1 && ok.length <= MAX, `${ok.length} created`)
  assert.match(refused[0].body.message, /max-sandboxes/)
  const list = await (await api('/sandboxes')).json()
  assert.equal(list.length, ok.length)
  // Each created one is a real box; killed, it leaves nothing.
  const boxes = []
  for (const r of ok) {
    const s = await Sandbox.connect(r.body.sandboxID)
    boxes.push(await boxOf(s))
    await s.kill()
  }
  for (const b of boxes)
    assert.ok(await until(() => boxLeft(b).length === 0, 20000), boxLeft(b).join(', '))
  assert.equal((await (await api('/sandboxes')).json()).length, 0)
  // And the table is free again.
  const s = await Sandbox.create()
  await s.kill()
})

test('a client that disconnects mid-execute interrupts the kernel; the sandbox stays usable', async () => {
  const s = await Sandbox.create()
  try {
    await s.runCode('import time\nkept = "state"')
    const ac = new AbortController()
    const p = fetch(url + '/execute', {
      method: 'POST', signal: ac.signal,
      body: JSON.stringify({ code: 't0 = time.time()\ntime.sleep(60)\nfinished = True' }),
      headers: {
        'E2b-Sandbox-Id': s.sandboxId, 'E2b-Sandbox-Port': '49999',
        'Content-Type': 'application/json', 'X-Access-Token': s.envdAccessToken,
      },
    }).then((r) => r.body.getReader().read())
    await new Promise((r) => setTimeout(r, 1500))
    ac.abort()
    await p.catch(() => {})
    const t0 = Date.now()
    const r = await s.runCode('(kept, "finished" in dir(), round(time.time() - t0) < 30)')
    assert.equal(r.text, "('state', False, True)")
    assert.ok(Date.now() - t0 < 30000, 'the next cell did not wait for the sleep')
  } finally {
    await s.kill()
  }
})
