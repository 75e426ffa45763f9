// Memory pause and resume (docs/e2b.md, "Pause and resume") through the
// official E2B SDK against `jupyter-agent e2b --engine gvisor`: what the
// kernel held (a variable, a module, an open file handle, an array's
// bytes, a file in /home/user) is there after Sandbox.connect(); nothing
// runs while paused; autoResume brings a sandbox back on its next
// request, with its own token only; an edited image is refused. Run by
// tests/integration/gvisor_e2b_pause.sh (root and runsc, else skipped).
import { test, before, after } from 'node:test'
import assert from 'node:assert/strict'
import crypto from 'node:crypto'
import fs from 'node:fs'
import { Sandbox } from '@e2b/code-interpreter'
import { serveForSdk, stopServer, until } from './lib.mjs'
const KEY = 'e2b_' + crypto.randomBytes(20).toString('hex')
const STATE = process.env.E2B_TEST_DIR + '/state'
let server

before(async () => {
  server = await serveForSdk(KEY,
    ['--max-sandboxes', '4', '--timeout', '60', '--engine', 'gvisor', '--warm', 'cold',
      '--pause-disk', '28M'], // one small kernel's image (~19 MiB), not two
    { JUPYTER_AGENT_LOG: 'info', JUPYTER_AGENT_STATE_DIR: STATE })
})

after(async () => {
  for (const s of [A, B]) if (s) await Sandbox.kill(s.sandboxId).catch(() => {})
  await stopServer(server)
  const figures = server.log().split('\n').filter((l) => /paused with its memory|resumed in/.test(l))
  for (const l of figures) console.log('# ' + l.replace(/^.*e2b: /, ''))
})

const api = (path, body, headers = {}) => fetch(server.url + path, {
  method: 'POST',
  headers: { 'X-API-KEY': KEY, 'Content-Type': 'application/json', ...headers },
  body: JSON.stringify(body ?? {}),
})

// The box's processes (runsc, its gofer and Sentry name the box's run dir).
async function boxDir(sbx) {
  const r = await sbx.runCode('from ipykernel.connect import get_connection_file as g; g()')
  return r.text.replace(/\/sock\/[^/]*$/, '')
}
function procsNaming(top) {
  const left = []
  for (const pid of fs.readdirSync('/proc').filter((d) => /^\d+$/.test(d))) {
    try {
      if (fs.readFileSync(`/proc/${pid}/cmdline`, 'latin1').includes(top)) left.push(pid)
    } catch {}
  }
  return left
}
const imageOf = (id) => {
  const top = `${STATE}/paused-e2b/${id}`
  const img = fs.readdirSync(top).find((n) => n.startsWith('image-'))
  return img ? `${top}/${img}` : null
}

const SETUP = 'import hashlib, fractions, numpy as np\n' +
  'x = 41\n' +
  'fh = open("/home/user/handle.txt", "w+"); fh.write("hello"); fh.flush()\n' +
  'a = np.arange(100000, dtype=np.int64) * 7\n' +
  'open("/home/user/kept.txt", "w").write("kept")\n' +
  'hashlib.sha256(a.tobytes()).hexdigest()'
const CHECK = 'import sys\nfh.seek(0)\n' +
  '" ".join(map(str, [x + 1, "fractions" in sys.modules, fh.read(), ' +
  'hashlib.sha256(a.tobytes()).hexdigest(), open("/home/user/kept.txt").read()]))'

// Two sandboxes for the whole file (a gVisor start is slow): A is paused
// and resumed by hand; B (autoResume) then pauses at its timeout.
let A, B

test('a memory pause keeps the kernel: variable, module, open file, array bytes and files are back after connect', async () => {
  ;[A, B] = await Promise.all([Sandbox.create(),
    Sandbox.create({ lifecycle: { onTimeout: 'pause', autoResume: true } })])
  await B.runCode('y = 7')
  const digest = (await A.runCode(SETUP)).text.replace(/'/g, '')
  assert.equal(digest.length, 64)
  const top = await boxDir(A)
  const t0 = Date.now()
  const res = await api(`/sandboxes/${A.sandboxId}/pause`, {})
  assert.equal(res.status, 204, await res.text())
  const tPause = Date.now() - t0
  assert.equal(res.headers.get('x-jupyter-agent-memory-kept'), 'true')
  assert.equal((await Sandbox.getInfo(A.sandboxId)).state, 'paused')
  assert.deepEqual(procsNaming(top), [], 'no process of the box is left while paused')
  const img = imageOf(A.sandboxId)
  assert.ok(img, 'the image is under the state directory')
  assert.equal(fs.statSync(img).mode & 0o777, 0o700)
  assert.equal(fs.statSync(`${STATE}/paused-e2b/${A.sandboxId}`).mode & 0o777, 0o700)
  let bytes = 0
  for (const n of fs.readdirSync(img)) bytes += fs.statSync(`${img}/${n}`).size
  await assert.rejects(A.runCode('1', { timeoutMs: 3000, requestTimeoutMs: 3000 }),
    'a paused sandbox without autoResume answers no code')

  const t1 = Date.now()
  const c = await api(`/v2/sandboxes/${A.sandboxId}/connect`, { timeout: 60 })
  assert.equal(c.status, 201)
  assert.equal(c.headers.get('x-jupyter-agent-memory-kept'), 'true')
  assert.equal((await c.json()).memoryKept, true)
  A = await Sandbox.connect(A.sandboxId)
  const r = await A.runCode(CHECK)
  const tResume = Date.now() - t1
  assert.equal(r.text, `42 True hello ${digest} kept`)
  assert.equal(fs.existsSync(`${STATE}/paused-e2b/${A.sandboxId}`), false, 'the image is removed once restored')
  await B.setTimeout(1000) // B pauses at its timeout (A's image is gone)
  console.log(`# pause ${tPause} ms, image ${(bytes / 1048576).toFixed(1)} MiB, resume to first result ${tResume} ms`)
})

test('autoResume: the next request resumes a sandbox paused at its timeout, with its own token only; an edited image is refused; --pause-disk holds', async () => {
  assert.ok(await until(async () =>
    (await Sandbox.getInfo(B.sandboxId)).state === 'paused', 30000), 'paused at its timeout')

  // Another sandbox's token does not wake it.
  const h = { 'E2b-Sandbox-Id': B.sandboxId, 'E2b-Sandbox-Port': '49983',
    'X-Access-Token': A.envdAccessToken ?? A.connectionConfig?.accessToken }
  const stranger = await fetch(server.url + '/health', { headers: h })
  assert.equal(stranger.status, 401)
  assert.equal((await Sandbox.getInfo(B.sandboxId)).state, 'paused', 'still paused')

  // B's image is held: A's would cross --pause-disk, so A is restored at
  // once and runs on with its state.
  const over = await api(`/sandboxes/${A.sandboxId}/pause`, {})
  assert.equal(over.status, 400)
  assert.match((await over.json()).message, /--pause-disk of 28 MiB/)
  assert.equal((await A.runCode('x')).text, '41', 'A runs on, its memory intact')

  // An edited image is refused, and the sandbox stays paused.
  const ck = `${imageOf(B.sandboxId)}/checkpoint.img`
  const fd = fs.openSync(ck, 'r+')
  const b = Buffer.alloc(1)
  fs.readSync(fd, b, 0, 1, 100)
  b[0] ^= 1
  fs.writeSync(fd, b, 0, 1, 100)
  const bad = await api(`/v2/sandboxes/${B.sandboxId}/connect`, { timeout: 60 })
  assert.equal(bad.status, 500)
  assert.match((await bad.json()).message, /does not match its seal/)
  assert.equal((await Sandbox.getInfo(B.sandboxId)).state, 'paused', 'still paused after the refusal')
  b[0] ^= 1
  fs.writeSync(fd, b, 0, 1, 100)
  fs.closeSync(fd)

  // Its own client, tokens unchanged: the request resumes it.
  const r = await B.runCode('y * 6')
  assert.equal(r.text, '42', 'resumed by the request, the variable kept')
  assert.equal((await Sandbox.getInfo(B.sandboxId)).state, 'running')
})

test('a sandbox killed while memory-paused leaves no image, process or run dir', async () => {
  const top = await boxDir(A)
  assert.equal(await A.pause(), true)
  await Sandbox.kill(A.sandboxId)
  assert.ok(await until(() => !fs.existsSync(`${STATE}/paused-e2b/${A.sandboxId}`), 15000),
    'the image is removed')
  assert.ok(await until(() => procsNaming(top).length === 0 && !fs.existsSync(top), 15000),
    'and the box')
  await B.kill()
})
