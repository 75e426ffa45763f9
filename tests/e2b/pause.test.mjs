// Files-only pause and resume (docs/e2b.md, "Pause and resume") through
// the official E2B SDK against `jupyter-agent e2b` on the namespaces
// engine: /home/user survives sandbox.pause({keepMemory: false}) and
// Sandbox.connect(), the kernel is new (and the client is told), nothing
// runs while paused, the kept files are out of every box's reach, a memory
// pause is refused with its reason, and onTimeout pause (keepMemory false)
// pauses at the timeout instead of killing. Run by tests/integration/e2b_pause.sh.
import { test, before, after } from 'node:test'
import assert from 'node:assert/strict'
import crypto from 'node:crypto'
import fs from 'node:fs'
import { Sandbox } from '@e2b/code-interpreter'
import { serveForSdk, stopServer, boxOf, boxLeft, until } from './lib.mjs'
const KEY = 'e2b_' + crypto.randomBytes(20).toString('hex')
const STATE = process.env.E2B_TEST_DIR + '/state'
let server

before(async () => {
  server = await serveForSdk(KEY, ['--max-sandboxes', '4', '--timeout', '60', '--pause-disk', '8M'],
    { JUPYTER_AGENT_LOG: 'info', JUPYTER_AGENT_STATE_DIR: STATE })
})

after(async () => {
  const t0 = Date.now(); await stopServer(server); if (process.env.E2B_PAUSE_DEBUG) console.error("STOP", Date.now() - t0, server.log().split("\n").slice(-15).join("\n"))
})

const api = (path, body) => fetch(server.url + path, {
  method: 'POST',
  headers: { 'X-API-KEY': KEY, 'Content-Type': 'application/json' },
  body: JSON.stringify(body ?? {}),
})

test('pause keeps /home/user, stops everything, and connect brings back the files with a fresh kernel', async () => {
  const sbx = await Sandbox.create()
  const other = await Sandbox.create()
  try {
    await sbx.files.write('/home/user/keep.txt', 'kept across a pause\n')
    await sbx.runCode('x = 42\nopen("/home/user/sub.txt", "w").write("by the kernel")\n' +
      'import os\nos.symlink("/etc/shadow", "/home/user/planted")')
    const box = await boxOf(sbx)
    const oldToken = sbx.envdAccessToken ?? sbx.connectionConfig?.accessToken

    await sbx.pause({ keepMemory: false })
    const info = await Sandbox.getInfo(sbx.sandboxId)
    assert.equal(info.state, 'paused')
    const paused = await Sandbox.list({ query: { state: ['paused'] } }).nextItems()
    assert.ok(paused.some((s) => s.sandboxId === sbx.sandboxId), 'listed as paused')
    const running = await Sandbox.list({ query: { state: ['running'] } }).nextItems()
    assert.ok(!running.some((s) => s.sandboxId === sbx.sandboxId), 'not listed as running')
    assert.deepEqual(boxLeft(box), [], 'no process, cgroup or run dir while paused')
    await assert.rejects(sbx.runCode('1', { timeoutMs: 3000, requestTimeoutMs: 3000 }),
      'a paused sandbox answers no code')

    // Kept under the state directory, 0700, out of every box's reach.
    const kept = fs.readdirSync(`${STATE}/paused-e2b`)
    assert.deepEqual(kept, [sbx.sandboxId])
    const top = `${STATE}/paused-e2b/${sbx.sandboxId}`
    assert.equal(fs.statSync(top).mode & 0o777, 0o700)
    assert.equal(fs.statSync(`${STATE}/paused-e2b`).mode & 0o777, 0o700)
    assert.ok(fs.readFileSync(`${top}/files/keep.txt`, 'utf8').startsWith('kept'))
    const names = fs.readdirSync(`${top}/files`)
    assert.ok(names.includes('sub.txt') && !names.includes('planted'),
      'a symlink planted in /home/user is neither followed nor kept: ' + names)
    const peek = await other.runCode(
      'import os, subprocess\n' +
      `p = ${JSON.stringify(top + '/files/keep.txt')}\n` +
      'r = []\n' +
      'try:\n    open(p).read(); r.append("read")\nexcept OSError as e:\n    r.append(type(e).__name__)\n' +
      'hits = subprocess.run(["find", "/", "-xdev", "-name", "keep.txt"], capture_output=True, text=True).stdout\n' +
      'r.append(hits.strip())\nr')
    assert.equal(peek.text, "['FileNotFoundError', '']", 'another sandbox cannot reach the paused files')

    // Resume through the raw API first: the client is told what was kept.
    const res = await api(`/v2/sandboxes/${sbx.sandboxId}/connect`, { timeout: 60 })
    assert.equal(res.status, 201)
    assert.equal(res.headers.get('x-jupyter-agent-memory-kept'), 'false')
    const body = await res.json()
    assert.equal(body.memoryKept, false)
    assert.match(body.resumeNote, /kernel is new/)
    assert.equal(body.state, 'running')
    assert.notEqual(body.envdAccessToken, oldToken, 'a new envd token')
    assert.equal(fs.existsSync(top), false, 'the kept copy is removed once back in the box')

    // And the SDK's resume path, Sandbox.connect(): the files, no variable.
    const back = await Sandbox.connect(sbx.sandboxId)
    assert.equal(await back.files.read('/home/user/keep.txt'), 'kept across a pause\n')
    const r = await back.runCode('open("/home/user/sub.txt").read()')
    assert.equal(r.text, 'by the kernel')
    const v = await back.runCode('x')
    assert.equal(v.error?.name, 'NameError', 'the kernel is fresh: x is gone')
    const cmd = await back.commands.run('cat /home/user/keep.txt')
    assert.equal(cmd.stdout, 'kept across a pause\n')
    assert.equal(await back.pause({ keepMemory: false }), true)
    assert.equal(await back.pause({ keepMemory: false }), false, 'already paused: 409')
    await Sandbox.kill(sbx.sandboxId)
    assert.ok(await until(() => !fs.existsSync(`${STATE}/paused-e2b/${sbx.sandboxId}`), 10000),
      'killing a paused sandbox removes its files')
  } finally {
    await Sandbox.kill(sbx.sandboxId).catch(() => {})
    await other.kill().catch(() => {})
  }
})

test('a memory pause and autoResume are refused on the namespaces engine, with the reason, and the sandbox keeps running', async () => {
  const sbx = await Sandbox.create()
  try {
    await sbx.runCode('y = 1')
    await assert.rejects(sbx.pause(), /memory pause needs --engine gvisor/)
    await assert.rejects(sbx.pause({ keepMemory: true }), /memory pause needs --engine gvisor/)
    assert.equal((await sbx.runCode('y')).text, '1', 'nothing was stopped')
    await assert.rejects(
      Sandbox.create({ lifecycle: { onTimeout: 'pause' } }),
      /autoPause: memory pause needs --engine gvisor/)
    await assert.rejects(
      Sandbox.create({ lifecycle: { onTimeout: 'pause', autoResume: true } }),
      /autoPause: memory pause needs --engine gvisor/)
    const r = await api('/sandboxes', { templateID: 'code-interpreter-v1', autoPause: true,
      autoPauseMemory: false, autoResume: { enabled: true } })
    assert.equal(r.status, 400)
    assert.match((await r.json()).message, /autoResume needs autoPause with the memory kept/)
  } finally {
    await sbx.kill()
  }
})

test('onTimeout pause with keepMemory false pauses at the timeout instead of killing', async () => {
  const sbx = await Sandbox.create({
    lifecycle: { onTimeout: { action: 'pause', keepMemory: false } },
  })
  try {
    await sbx.files.write('/home/user/auto.txt', 'auto')
    await sbx.setTimeout(1000) // the timeout comes in a second
    assert.ok(await until(async () =>
      (await Sandbox.getInfo(sbx.sandboxId)).state === 'paused', 30000), 'paused at its timeout')
    const back = await Sandbox.connect(sbx.sandboxId, { timeoutMs: 60000 })
    assert.equal(await back.files.read('/home/user/auto.txt'), 'auto')
  } finally {
    await Sandbox.kill(sbx.sandboxId).catch(() => {})
  }
})

test('pausing an unknown sandbox is 404', async () => {
  await assert.rejects(Sandbox.pause('0'.repeat(32), { keepMemory: false }), /not found/)
  const res = await api(`/sandboxes/${'0'.repeat(32)}/pause`, { memory: false })
  assert.equal(res.status, 404)
})

test('a pause past --pause-disk is refused with the reason, and the sandbox runs on', async () => {
  const sbx = await Sandbox.create()
  try {
    await sbx.runCode('z = 5\nopen("/home/user/big.bin", "wb").write(b"x" * (10 << 20))')
    await assert.rejects(sbx.pause({ keepMemory: false }), /over this server's --pause-disk of 8 MiB/)
    assert.equal((await Sandbox.getInfo(sbx.sandboxId)).state, 'running')
    assert.equal((await sbx.runCode('z')).text, '5', 'the kernel was not touched')
    await sbx.runCode('import os; os.remove("/home/user/big.bin")')
    assert.equal(await sbx.pause({ keepMemory: false }), true, 'within the cap it pauses')
  } finally {
    await Sandbox.kill(sbx.sandboxId).catch(() => {})
  }
})
