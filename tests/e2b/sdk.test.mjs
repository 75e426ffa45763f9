// `jupyter-agent e2b` driven by the official E2B SDKs, unchanged: e2b and
// @e2b/code-interpreter (pinned by package-lock.json). Run by
// tests/integration/e2b_sdk.sh with node's test runner (TAP); every
// guarantee is one top-level test. The server runs with a pool of its own
// (--pool), as an operator would.
import { test, before, after } from 'node:test'
import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import crypto from 'node:crypto'
import fs from 'node:fs'
import { Sandbox } from '@e2b/code-interpreter'
import { serveForSdk, startServer, stopServer, sha, boxOf, boxLeft, until } from './lib.mjs'
const KEY = 'e2b_' + crypto.randomBytes(20).toString('hex')
let server, url

before(async () => {
  server = await serveForSdk(KEY, ['--pool', '2', '--max-sandboxes', '8', '--timeout', '60'],
    { JUPYTER_AGENT_LOG: 'info' })
  url = server.url
})

after(async () => {
  await stopServer(server)
})

let sbx // shared by the tests that only need a running sandbox

test('Sandbox.create() answers a running sandbox that Sandbox.list() and getInfo() show', async () => {
  sbx = await Sandbox.create({ metadata: { purpose: 'sdk-test' } })
  assert.match(sbx.sandboxId, /^[0-9a-f]{32}$/)
  const info = await sbx.getInfo()
  assert.equal(info.templateId, 'code-interpreter-v1')
  assert.equal(info.state, 'running')
  assert.deepEqual(info.metadata, { purpose: 'sdk-test' })
  assert.ok(info.endAt > info.startedAt)
  const items = await Sandbox.list().nextItems()
  assert.ok(items.some((s) => s.sandboxId === sbx.sandboxId))
  assert.equal(await sbx.isRunning(), true)
})

test('runCode keeps state between calls and answers the last expression as text', async () => {
  await sbx.runCode('x = 41')
  const r = await sbx.runCode('x + 1')
  assert.equal(r.text, '42')
  assert.equal(r.error, undefined)
  assert.ok(r.executionCount >= 2)
})

test('the kernel works in /home/user, the same directory as /mnt/data', async () => {
  const r = await sbx.runCode(
    'import os\nopen("/home/user/x.csv","w").write("a,b\\n1,2\\n")\n' +
      '(os.getcwd(), open("/mnt/data/x.csv").read())')
  assert.equal(r.text, "('/home/user', 'a,b\\n1,2\\n')")
})

test('onStdout and onStderr see every line, in order', async () => {
  const seen = []
  const r = await sbx.runCode(
    'import sys\nfor i in range(3):\n    print("out", i, flush=True)\n' +
      '    print("err", i, file=sys.stderr, flush=True)',
    {
      onStdout: (m) => seen.push(m.line.trim()),
      onStderr: (m) => seen.push(m.line.trim()),
    })
  assert.deepEqual(seen, ['out 0', 'err 0', 'out 1', 'err 1', 'out 2', 'err 2'])
  assert.deepEqual(r.logs.stdout.map((s) => s.trim()), ['out 0', 'out 1', 'out 2'])
})

test('a matplotlib figure comes back as a PNG result', async () => {
  const r = await sbx.runCode(
    'import matplotlib.pyplot as plt\nplt.plot([1, 2, 3], [3, 1, 2])\nplt.show()')
  assert.equal(r.error, undefined)
  const png = r.results.find((x) => x.png)
  assert.ok(png, 'a result with png: ' + JSON.stringify(r.results.map((x) => x.formats())))
  const bytes = Buffer.from(png.png, 'base64')
  assert.equal(bytes.subarray(0, 8).toString('hex'), '89504e470d0a1a0a')
})

test('a DataFrame comes back with its HTML table and its text', async () => {
  const r = await sbx.runCode('import pandas as pd\npd.DataFrame({"a": [1, 2], "b": ["x", "y"]})')
  const main = r.results.find((x) => x.isMainResult)
  assert.match(main.html, /<table/)
  assert.match(main.text, /a\s+b/)
})

test('a figure carries its chart data and a DataFrame its data (docs/outputs.md)', async () => {
  const r = await sbx.runCode(
    'import matplotlib.pyplot as plt\nfig, ax = plt.subplots()\n' +
      'ax.bar(["north", "south", "east"], [17, 42, 23])\nax.set_title("Revenue by region")\nplt.show()'
  )
  const fig = r.results.find((x) => x.png)
  assert.ok(fig, 'the figure has its PNG')
  assert.ok(fig.chart, 'the figure has its chart')
  assert.equal(fig.chart.type, 'bar')
  assert.equal(fig.chart.title, 'Revenue by region')
  const values = JSON.stringify(fig.chart.elements)
  for (const v of ['north', 'south', 'east', '17', '42', '23']) assert.ok(values.includes(v), `${v} in ${values}`)
  assert.ok(!fig.extra || !Object.keys(fig.extra).some((k) => k.includes('jupyter-agent')), 'our mime types are not listed')
  const t = await sbx.runCode('import pandas as pd\npd.DataFrame({"a": [1, 2], "b": ["x", "y"]})')
  const main = t.results.find((x) => x.isMainResult)
  assert.deepEqual(main.data.a, [1, 2])
  assert.deepEqual(main.data.b, ['x', 'y'])
})

test('an error comes back with its name, value and traceback; the kernel still works', async () => {
  const errs = []
  const r = await sbx.runCode('def f():\n    return 1 / 0\nf()', { onError: (e) => errs.push(e) })
  assert.equal(r.error.name, 'ZeroDivisionError')
  assert.equal(r.error.value, 'division by zero')
  const plain = r.error.traceback.replace(/\x1b\[[0-9;]*m/g, '')
  assert.match(plain, /----> 3 f\(\)/)
  assert.match(plain, /ZeroDivisionError: division by zero/)
  assert.equal(errs.length, 1)
  const again = await sbx.runCode('x')
  assert.equal(again.text, '41')
})

test('contexts have their own variables and directory, are listed, restarted and removed', async () => {
  const ctx = await sbx.createCodeContext({ cwd: '/home/user' })
  assert.equal(ctx.language, 'python')
  const r1 = await sbx.runCode('x', { context: ctx })
  assert.equal(r1.error.name, 'NameError')
  await sbx.runCode('y = "in ctx"', { context: ctx })
  assert.equal((await sbx.runCode('y', { context: ctx })).text, 'in ctx')
  assert.equal((await sbx.runCode('x')).text, '41')
  assert.ok((await sbx.listCodeContexts()).some((c) => c.id === ctx.id))
  await sbx.restartCodeContext(ctx)
  assert.equal((await sbx.runCode('y', { context: ctx })).error.name, 'NameError')
  await sbx.removeCodeContext(ctx)
  assert.ok(!(await sbx.listCodeContexts()).some((c) => c.id === ctx.id))
  await assert.rejects(sbx.runCode('1', { context: ctx }))
  assert.equal((await sbx.runCode('x')).text, '41')
})

test('files: write, read, list, exists, rename and remove round trip by hash', async () => {
  const data = crypto.randomBytes(300000)
  const w = await sbx.files.write('/home/user/dir/blob.bin', data)
  assert.equal(w.path, '/home/user/dir/blob.bin')
  const back = Buffer.from(await sbx.files.read('dir/blob.bin', { format: 'bytes' }))
  assert.equal(sha(back), sha(data))
  const k = await sbx.runCode(
    'import hashlib\nhashlib.sha256(open("dir/blob.bin","rb").read()).hexdigest()')
  assert.equal(k.text, sha(data))
  const names = (await sbx.files.list('/home/user/dir')).map((e) => [e.name, e.type, e.size])
  assert.deepEqual(names, [['blob.bin', 'file', data.length]])
  assert.equal(await sbx.files.exists('dir/blob.bin'), true)
  assert.equal(await sbx.files.exists('dir/none'), false)
  await sbx.files.rename('dir/blob.bin', 'dir/moved.bin')
  assert.equal(await sbx.files.exists('/mnt/data/dir/moved.bin'), true)
  await sbx.files.write([{ path: 'dir/a.txt', data: 'A' }, { path: 'dir/empty', data: '' }])
  assert.equal(await sbx.files.read('dir/a.txt'), 'A')
  assert.equal(await sbx.files.read('dir/empty'), '')
  assert.equal(await sbx.files.makeDir('dir/sub'), true)
  assert.equal(await sbx.files.makeDir('dir/sub'), false)
  await sbx.files.remove('dir')
  assert.equal(await sbx.files.exists('dir'), false)
  assert.equal((await sbx.runCode('import os\nos.path.exists("dir")')).text, 'False')
})

test('files refuse paths outside /home/user and never follow a symlink', async () => {
  await assert.rejects(sbx.files.read('/etc/passwd'), /outside the sandbox's files/)
  await sbx.runCode('import os\nos.symlink("/etc/passwd", "pw")\nos.symlink("/", "root")')
  await assert.rejects(sbx.files.read('pw'), /symbolic link/)
  await assert.rejects(sbx.files.read('root/etc/passwd'), /symbolic link/)
  await assert.rejects(sbx.files.write('root/x', 'x'), /symbolic link/)
  const info = await sbx.files.getInfo('pw')
  assert.equal(info.type, 'symlink')
  assert.equal(info.symlinkTarget, '/etc/passwd')
  await sbx.files.remove('pw') // the link goes, not its target
  assert.equal(await sbx.files.exists('pw'), false)
})

test('files.watchDir sees what the SDK and the kernel change, recursively; a symlink is never watched', async () => {
  await sbx.files.makeDir('/home/user/w')
  const seen = []
  const h = await sbx.files.watchDir('/home/user/w', (e) => seen.push(`${e.type} ${e.name}`),
    { recursive: true })
  await sbx.files.write('/home/user/w/a.txt', 'hello')
  await sbx.runCode('import os, time\nos.makedirs("/home/user/w/sub")\ntime.sleep(0.5)\n' +
    'open("/home/user/w/sub/b.txt", "w").write("x")\nos.remove("/home/user/w/a.txt")')
  const want = ['create a.txt', 'create sub', 'create sub/b.txt', 'write sub/b.txt', 'remove a.txt']
  assert.ok(await until(() => want.every((w) => seen.includes(w)), 10000),
    'every change seen: ' + JSON.stringify(seen))
  await h.stop()
  const n = seen.length
  await sbx.files.write('/home/user/w/after.txt', 'x')
  await new Promise((r) => setTimeout(r, 500))
  assert.equal(seen.length, n, 'nothing after stop(): ' + JSON.stringify(seen.slice(n)))
  await sbx.runCode('import os\nos.symlink("/etc", "/home/user/w/lnk")')
  await assert.rejects(sbx.files.watchDir('/home/user/w/lnk', () => {}), /symbolic link/)
  await assert.rejects(sbx.files.watchDir('/etc', () => {}), /outside the sandbox's files/)
})

test('there is no network inside a sandbox, and asking for it is refused', async () => {
  const r = await sbx.runCode(
    'import socket\ns = socket.socket()\ns.settimeout(3)\ns.connect(("1.1.1.1", 80))')
  assert.ok(r.error, 'the connection must fail')
  assert.match(r.error.name, /Error|timeout/) // PermissionError, OSError ...
  await assert.rejects(Sandbox.create({ allowInternetAccess: true }), /egress/)
})

test('network rules: create with allowOut, updateNetwork replaces them', async () => {
  const all = { denyOut: ['0.0.0.0/0'] } // E2B's ALL_TRAFFIC: only allowOut leaves
  await assert.rejects(sbx.updateNetwork({ allowOut: ['data.example'], ...all }),
    /no egress proxy/)
  const n = await Sandbox.create({ network: { allowOut: ['data.example'], ...all } })
  try {
    const r = await n.runCode('import os\nprint(os.environ.get("HTTPS_PROXY"))')
    assert.match(r.logs.stdout.join(''), /127\.0\.0\.1:3128/)
    await n.updateNetwork({ allowOut: ['data.example', '*.example.org'], ...all })
    await assert.rejects(n.updateNetwork({ allowOut: ['not a rule'], ...all }),
      /is not a rule/)
    await assert.rejects(n.updateNetwork({ allowOut: ['data.example'] }),
      /0\.0\.0\.0\/0/)
  } finally {
    await n.kill()
  }
})

test('two sandboxes see neither each other\'s variables, files nor tokens', async () => {
  const a = await Sandbox.create()
  const b = await Sandbox.create()
  try {
    await a.runCode('secret = 7')
    await a.files.write('only-a.txt', 'a')
    assert.equal((await b.runCode('secret')).error.name, 'NameError')
    assert.equal(await b.files.exists('only-a.txt'), false)
    assert.notEqual(a.envdAccessToken, b.envdAccessToken)
    // b's token on a's sandbox: refused.
    const res = await fetch(url + '/files?path=only-a.txt', {
      headers: {
        'E2b-Sandbox-Id': a.sandboxId, 'E2b-Sandbox-Port': '49983',
        'X-Access-Token': b.envdAccessToken,
      },
    })
    assert.equal(res.status, 401)
    const ok = await fetch(url + '/files?path=only-a.txt', {
      headers: {
        'E2b-Sandbox-Id': a.sandboxId, 'E2b-Sandbox-Port': '49983',
        'X-Access-Token': a.envdAccessToken,
      },
    })
    assert.equal(await ok.text(), 'a')
  } finally {
    await a.kill()
    await b.kill()
  }
})

test('kill() ends a sandbox at once: 404 after, and no process, cgroup or run dir left', async () => {
  const s = await Sandbox.create()
  const box = await boxOf(s)
  assert.ok(fs.existsSync(box.top), 'the box exists while it runs: ' + box.top)
  await s.kill()
  assert.equal(await s.isRunning(), false)
  await assert.rejects(Sandbox.getInfo(s.sandboxId), /not found/)
  await assert.rejects(s.runCode('1'))
  assert.ok(await until(() => boxLeft(box).length === 0, 15000), boxLeft(box).join(', '))
})

test('setTimeout moves the end; at its timeout a sandbox is killed and leaves nothing', async () => {
  const s = await Sandbox.create({ timeoutMs: 600000 })
  const box = await boxOf(s)
  const before = (await s.getInfo()).endAt
  await s.setTimeout(2000)
  const info = await s.getInfo()
  assert.ok(info.endAt < before, 'the end moved closer')
  assert.ok(await until(async () => !(await s.isRunning()), 20000), 'it ended')
  await assert.rejects(Sandbox.getInfo(s.sandboxId), /not found/)
  assert.ok(await until(() => boxLeft(box).length === 0, 15000), boxLeft(box).join(', '))
})

test('what another issue brings answers 501 naming it, never a fake success', async () => {
  // (pause and connect: pause.test.mjs)
  const h = { 'X-API-KEY': KEY, 'Content-Type': 'application/json' }
  for (const [path, word] of [
    [`/sandboxes/${sbx.sandboxId}/snapshots`, /persistence/],
    [`/sandboxes/${sbx.sandboxId}/fork`, /persistence/],
  ]) {
    const res = await fetch(url + path, { method: 'POST', headers: h, body: '{}' })
    assert.equal(res.status, 501, path)
    assert.match((await res.json()).message, word)
  }
  await assert.rejects(Sandbox.create('my-custom-template'), /not found/)
})

test('with --pool, sandboxes start on warm kernels from the pool', async () => {
  // The pool (a private serve with the sandboxes' policy) is warm by now.
  const s = await Sandbox.create()
  assert.equal((await s.runCode('1 + 1')).text, '2')
  await s.kill()
  assert.match(server.log(), /running \(code-interpreter-v1, python3, a warm kernel/,
    'no sandbox got a warm kernel: ' + server.log().split('\n').filter((l) =>
      /warm|running/.test(l)).join(' | '))
})

test('E2B_DEBUG=true clients reach the debug ports (--debug-ports)', async (t) => {
  const busy = spawnSync('sh', ['-c', 'ss -ltn | grep -E ":(49999|49983) "'])
  if (busy.status === 0) return t.skip('ports 49999/49983 are taken on this machine')
  const dbg = await startServer(['--debug-ports', '--pool', '0'])
  try {
    const code = `
      import { Sandbox } from '@e2b/code-interpreter'
      const s = await Sandbox.create()
      const r = await s.runCode('21 * 2')
      await s.files.write('dbg.txt', 'debug')
      const k = await s.runCode('open("/home/user/dbg.txt").read()')
      console.log(JSON.stringify([s.sandboxId, r.text, k.text]))`
    const env = { ...process.env, E2B_DEBUG: 'true' }
    delete env.E2B_API_URL
    delete env.E2B_SANDBOX_URL
    delete env.E2B_API_KEY
    const r = spawnSync(process.execPath, ['--input-type=module', '-e', code], {
      env, encoding: 'utf8', timeout: 60000,
    })
    assert.equal(r.status, 0, r.stderr)
    assert.deepEqual(JSON.parse(r.stdout.trim()), ['debug_sandbox_id', '42', 'debug'])
  } finally {
    await stopServer(dbg)
  }
})
