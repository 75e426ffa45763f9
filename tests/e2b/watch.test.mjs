// envd's polling watchers (CreateWatcher, GetWatcherEvents,
// RemoveWatcher) against `jupyter-agent e2b`, run by
// tests/security/e2b_watch.sh. The JS SDK 2.51 only calls the streamed
// WatchDir, so these are Connect-protocol requests (JSON, unary) exactly
// as its generated client would send them, with a sandbox the SDK made.
import { test, before, after } from 'node:test'
import assert from 'node:assert/strict'
import crypto from 'node:crypto'
import fs from 'node:fs'
import { Sandbox } from '@e2b/code-interpreter'
import { serveForSdk, stopServer, until } from './lib.mjs'

const KEY = 'e2b_' + crypto.randomBytes(20).toString('hex')
const MAX_WATCHES = 8 // E2B_WATCHERS_MAX
const MAX_EVENTS = 4096 + 2048 // E2B_WATCHER_MAX_EVENTS + what one read adds
let server, url, sbx

before(async () => {
  server = await serveForSdk(KEY, ['--pool', '1', '--max-sandboxes', '4'])
  url = server.url
  sbx = await Sandbox.create()
})

after(async () => {
  await sbx?.kill().catch(() => {})
  await stopServer(server)
})

// One unary Connect call to envd's filesystem service: {status, body}.
async function rpc(s, method, msg, token = s.envdAccessToken) {
  const r = await fetch(`${url}/filesystem.Filesystem/${method}`, {
    method: 'POST',
    headers: {
      'Content-Type': 'application/json', 'Connect-Protocol-Version': '1',
      'E2b-Sandbox-Id': s.sandboxId, 'E2b-Sandbox-Port': '49983',
      'X-Access-Token': token,
    },
    body: JSON.stringify(msg),
  })
  const text = await r.text()
  return { status: r.status, body: text ? JSON.parse(text) : null }
}

const events = async (s, id) => {
  const r = await rpc(s, 'GetWatcherEvents', { watcherId: id })
  assert.equal(r.status, 200, JSON.stringify(r.body))
  return r.body.events ?? []
}

test('a polling watcher sees what the SDK and the kernel change, drains on each call, and goes when removed', async () => {
  await sbx.files.makeDir('/home/user/pw')
  const c = await rpc(sbx, 'CreateWatcher', { path: '/home/user/pw', recursive: true, includeEntry: true })
  assert.equal(c.status, 200, JSON.stringify(c.body))
  const id = c.body.watcherId
  assert.match(id, /^[0-9a-f]{32}$/)
  assert.deepEqual(await events(sbx, id), [], 'nothing happened yet')
  await sbx.files.write('/home/user/pw/a.txt', 'hello')
  await sbx.runCode('import os, time\nos.makedirs("/home/user/pw/sub")\ntime.sleep(0.3)\n' +
    'open("/home/user/pw/sub/b.txt", "w").write("x")\nos.remove("/home/user/pw/a.txt")')
  const seen = []
  // sub/b.txt was written before any call could add sub's watch: it is
  // reported as created when the watch is added (its write is not seen).
  const want = ['EVENT_TYPE_CREATE a.txt', 'EVENT_TYPE_CREATE sub', 'EVENT_TYPE_CREATE sub/b.txt',
    'EVENT_TYPE_REMOVE a.txt']
  let entry = null
  assert.ok(await until(async () => {
    for (const e of await events(sbx, id)) {
      seen.push(`${e.type} ${e.name}`)
      if (e.name === 'sub' && e.entry) entry = e.entry
    }
    return want.every((w) => seen.includes(w))
  }, 10000), 'every change seen: ' + JSON.stringify(seen))
  assert.equal(entry?.type, 'FILE_TYPE_DIRECTORY', 'includeEntry gives the entry')
  assert.deepEqual(await events(sbx, id), [], 'a call answers only what came since the last')
  assert.equal((await rpc(sbx, 'RemoveWatcher', { watcherId: id })).status, 200)
  const gone = await rpc(sbx, 'GetWatcherEvents', { watcherId: id })
  assert.equal(gone.status, 404)
  assert.equal(gone.body.code, 'not_found')
})

test('a watcher cannot be put on a path outside the sandbox, through a symlink, or on a missing directory', async () => {
  await sbx.runCode('import os\nos.makedirs("/home/user/pw2", exist_ok=True)\n' +
    'os.symlink("/etc", "/home/user/pw2/lnk")')
  for (const path of ['/etc', '/tmp', '/home/user/../../etc', '/proc/self', '/mnt/data/../../etc']) {
    const r = await rpc(sbx, 'CreateWatcher', { path })
    assert.equal(r.status, 403, `${path}: ${JSON.stringify(r.body)}`)
    assert.match(r.body.message, /outside the sandbox's files|'\.\.' is not allowed/)
  }
  for (const path of ['/home/user/pw2/lnk', '/home/user/pw2/lnk/ssl']) {
    const r = await rpc(sbx, 'CreateWatcher', { path })
    assert.notEqual(r.status, 200, `${path}: ${JSON.stringify(r.body)}`)
    assert.match(r.body.message, /symbolic link/)
  }
  const r = await rpc(sbx, 'CreateWatcher', { path: '/home/user/nothing-here' })
  assert.equal(r.body.code, 'not_found')
})

test('a watcher is its sandbox\'s: another sandbox, or a wrong token, cannot read or remove it', async () => {
  const other = await Sandbox.create()
  try {
    const c = await rpc(sbx, 'CreateWatcher', { path: '/home/user' })
    const id = c.body.watcherId
    for (const m of ['GetWatcherEvents', 'RemoveWatcher']) {
      const r = await rpc(other, m, { watcherId: id })
      assert.equal(r.status, 404, `${m} from another sandbox: ${JSON.stringify(r.body)}`)
      const t = await rpc(sbx, m, { watcherId: id }, other.envdAccessToken)
      assert.equal(t.status, 401, `${m} with another sandbox's token`)
    }
    assert.equal((await rpc(sbx, 'RemoveWatcher', { watcherId: id })).status, 200, 'still there')
  } finally {
    await other.kill()
  }
})

test(`at most ${MAX_WATCHES} watches per sandbox, streams and watchers together; removing one frees a place`, async () => {
  const ids = []
  for (let i = 0; i < MAX_WATCHES; i++) {
    const r = await rpc(sbx, 'CreateWatcher', { path: '/home/user' })
    assert.equal(r.status, 200, `watcher ${i + 1}: ${JSON.stringify(r.body)}`)
    ids.push(r.body.watcherId)
  }
  const over = await rpc(sbx, 'CreateWatcher', { path: '/home/user' })
  assert.equal(over.status, 429, JSON.stringify(over.body))
  assert.equal(over.body.code, 'resource_exhausted')
  await assert.rejects(sbx.files.watchDir('/home/user', () => {}), /watches open/,
    'a streamed WatchDir counts against the same cap')
  assert.equal((await rpc(sbx, 'RemoveWatcher', { watcherId: ids.pop() })).status, 200)
  const h = await sbx.files.watchDir('/home/user', () => {})
  const full = await rpc(sbx, 'CreateWatcher', { path: '/home/user' })
  assert.equal(full.status, 429, 'the stream took the freed place')
  await h.stop()
  assert.ok(await until(async () => {
    const r = await rpc(sbx, 'CreateWatcher', { path: '/home/user' })
    if (r.status === 200) ids.push(r.body.watcherId)
    return r.status === 200
  }, 5000), 'a stopped stream gives its place back')
  for (const id of ids) await rpc(sbx, 'RemoveWatcher', { watcherId: id })
})

test('an event flood is answered in bounded batches, then the loss is reported; the server goes on', async () => {
  await sbx.files.makeDir('/home/user/flood')
  const c = await rpc(sbx, 'CreateWatcher', { path: '/home/user/flood' })
  const id = c.body.watcherId
  // 40000 creates, more than inotify queues (fs.inotify.max_queued_events,
  // 16384 by default), with nobody reading meanwhile.
  await sbx.runCode('import os\nfor i in range(40000): open(f"/home/user/flood/{i}", "w").close()', { timeoutMs: 120000 })
  let total = 0, calls = 0, last
  for (;;) {
    last = await rpc(sbx, 'GetWatcherEvents', { watcherId: id })
    calls++
    if (last.status !== 200 || calls > 40) break
    const n = last.body.events?.length ?? 0
    assert.ok(n <= MAX_EVENTS, `one answer holds at most ${MAX_EVENTS} events (${n})`)
    total += n
    if (n === 0) break
  }
  assert.equal(last.status, 429, `the loss is reported (${calls} calls, ${total} events): ${JSON.stringify(last.body)}`)
  assert.match(last.body.message, /events were lost/)
  assert.ok(total > 0 && total < 40000, `some events, not all (${total})`)
  const again = await rpc(sbx, 'GetWatcherEvents', { watcherId: id })
  assert.equal(again.status, 429, 'a watcher that lost events keeps saying so')
  assert.equal((await rpc(sbx, 'RemoveWatcher', { watcherId: id })).status, 200)
  const r = await sbx.runCode('1+1')
  assert.equal(r.text, '2', 'the sandbox still works')
})

test('a flood inside a directory that appears under a recursive watcher is bounded too, and its loss reported', async () => {
  await sbx.files.makeDir('/home/user/flood2')
  const c = await rpc(sbx, 'CreateWatcher', { path: '/home/user/flood2', recursive: true })
  const id = c.body.watcherId
  // Each new directory holds more names than one read may report.
  await sbx.runCode('import os\nfor d in range(3):\n    os.makedirs(f"/home/user/flood2/n{d}")\n' +
    '    for i in range(1500): open(f"/home/user/flood2/n{d}/{i}", "w").close()', { timeoutMs: 120000 })
  let last, calls = 0
  for (;;) {
    last = await rpc(sbx, 'GetWatcherEvents', { watcherId: id })
    if (last.status !== 200 || ++calls > 40) break
    const n = last.body.events?.length ?? 0
    assert.ok(n <= MAX_EVENTS, `one answer holds at most ${MAX_EVENTS} events (${n})`)
    if (n === 0) break
  }
  assert.equal(last.status, 429, `the loss is reported: ${JSON.stringify(last.body)}`)
  assert.match(last.body.message, /events were lost/)
  assert.equal((await rpc(sbx, 'RemoveWatcher', { watcherId: id })).status, 200)
})

test('watchers go with their sandbox: no inotify instance of its own is left in the server', async () => {
  const inotify = () => fs.readdirSync(`/proc/${server.p.pid}/fd`).filter((f) => {
    try { return fs.readlinkSync(`/proc/${server.p.pid}/fd/${f}`) === 'anon_inode:inotify' } catch { return false }
  }).length
  const before = inotify()
  const s = await Sandbox.create()
  for (let i = 0; i < 3; i++) {
    const c = await rpc(s, 'CreateWatcher', { path: '/home/user', recursive: true })
    assert.equal(c.status, 200)
  }
  assert.equal(inotify(), before + 3, 'one inotify instance per watcher')
  const c = await rpc(s, 'CreateWatcher', { path: '/home/user' })
  await s.kill()
  const r = await rpc(s, 'GetWatcherEvents', { watcherId: c.body.watcherId })
  assert.equal(r.status, 502, 'the sandbox is gone, and its watchers with it')
  assert.ok(await until(() => inotify() === before, 5000), `inotify instances back to ${before} (${inotify()})`)
})
