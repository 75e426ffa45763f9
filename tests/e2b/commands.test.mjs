// sandbox.commands of the official E2B SDK (e2b, pinned by
// package-lock.json) against `jupyter-agent e2b`: envd's process.Process
// service on the box's command machinery (sandbox/sb_cmds.h). Run by
// tests/integration/e2b_commands.sh (E2B_TEST_FILE=commands.test.mjs
// through e2b_sdk.sh); every guarantee is one top-level test.
import { test, before, after } from 'node:test'
import assert from 'node:assert/strict'
import crypto from 'node:crypto'
import fs from 'node:fs'
import { Sandbox } from '@e2b/code-interpreter'
import { CommandExitError } from 'e2b'
import { startServer, stopServer, until } from './lib.mjs'

const KEY = 'e2b_' + crypto.randomBytes(20).toString('hex')
let server, sbx

// Host processes whose command line is exactly `sleep ARG`.
const sleepers = (arg) =>
  fs.readdirSync('/proc').filter((pid) => {
    try {
      return /^\d+$/.test(pid) && fs.readFileSync(`/proc/${pid}/cmdline`, 'latin1') === `sleep\0${arg}\0`
    } catch {
      return false
    }
  })

before(async () => {
  fs.writeFileSync(process.env.E2B_TEST_DIR + '/key', KEY + '\n', { mode: 0o600 })
  server = await startServer([
    '--api-key-file', process.env.E2B_TEST_DIR + '/key',
    '--pool', '1', '--max-sandboxes', '4', '--timeout', '60',
  ])
  process.env.E2B_API_URL = server.url
  process.env.E2B_SANDBOX_URL = server.url
  process.env.E2B_API_KEY = KEY
  delete process.env.E2B_DEBUG
  sbx = await Sandbox.create({ envs: { FROM_CREATE: 'create-env' } })
})

after(async () => {
  if (sbx) await sbx.kill().catch(() => {})
  await stopServer(server)
})

test('commands.run answers stdout, stderr and exit code 0, as the box user in /home/user', async () => {
  const r = await sbx.commands.run('echo hello; echo oops >&2; id -u; pwd')
  assert.equal(r.exitCode, 0)
  assert.equal(r.stdout, 'hello\n1000\n/home/user\n')
  assert.equal(r.stderr, 'oops\n')
})

test('a command sees the files the kernel wrote, and the kernel sees its files', async () => {
  await sbx.runCode("open('/home/user/from_kernel.txt', 'w').write('kernel data\\n')")
  let r = await sbx.commands.run('cat from_kernel.txt; echo shell data > /tmp/from_cmd.txt')
  assert.equal(r.stdout, 'kernel data\n')
  const k = await sbx.runCode("print(open('/tmp/from_cmd.txt').read(), end='')")
  assert.equal(k.logs.stdout.join(''), 'shell data\n')
  r = await sbx.commands.run('echo "$FROM_CREATE $MINE"', { envs: { MINE: 'cmd-env' }, cwd: '/tmp' })
  assert.equal(r.stdout, 'create-env cmd-env\n')
})

test('a non-zero exit raises CommandExitError with the code and the output', async () => {
  await assert.rejects(sbx.commands.run('echo partial; exit 3'), (e) => {
    assert.ok(e instanceof CommandExitError, String(e))
    assert.equal(e.exitCode, 3)
    assert.equal(e.stdout, 'partial\n')
    return true
  })
})

test('onStdout and onStderr stream the output as it comes', async () => {
  const seen = []
  await sbx.commands.run('for i in 1 2 3; do echo out $i; echo err $i >&2; sleep 0.1; done', {
    onStdout: (d) => seen.push('o:' + d.trim()),
    onStderr: (d) => seen.push('e:' + d.trim()),
  })
  assert.deepEqual(seen, ['o:out 1', 'e:err 1', 'o:out 2', 'e:err 2', 'o:out 3', 'e:err 3'])
})

test('a background command is listed, takes stdin, can be reconnected to, and is killed', async () => {
  const h = await sbx.commands.run('cat; sleep 7001', { background: true, stdin: true })
  assert.ok(h.pid > 1)
  const list = await sbx.commands.list()
  const mine = list.find((p) => p.pid === h.pid)
  assert.ok(mine, JSON.stringify(list))
  assert.equal(mine.cmd, '/bin/bash')
  assert.deepEqual(mine.args, ['-l', '-c', 'cat; sleep 7001'])
  const got = []
  const again = await sbx.commands.connect(h.pid, { onStdout: (d) => got.push(d) })
  await sbx.commands.sendStdin(h.pid, 'typed in\n')
  await sbx.commands.closeStdin(h.pid)
  assert.ok(await until(() => got.join('') === 'typed in\n', 10000), JSON.stringify(got))
  assert.ok(await until(() => sleepers('7001').length === 1, 10000), 'it runs')
  assert.equal(await sbx.commands.kill(h.pid), true)
  await assert.rejects(again.wait(), (e) => e instanceof CommandExitError && e.exitCode === 137)
  assert.ok(await until(() => sleepers('7001').length === 0, 10000), 'it is gone')
  assert.ok(!(await sbx.commands.list()).some((p) => p.pid === h.pid), 'no longer listed')
  assert.equal(await sbx.commands.kill(h.pid), false, 'killing it again finds nothing')
})

test('a command is bounded: its timeout kills it, and so does an output flood', async () => {
  const t0 = Date.now()
  await assert.rejects(sbx.commands.run('sleep 7002', { timeoutMs: 1000 }))
  assert.ok(Date.now() - t0 < 30000)
  assert.ok(await until(() => sleepers('7002').length === 0, 10000), 'the timed-out command is gone')
  await assert.rejects(sbx.commands.run('cat /dev/zero | head -c 100000000'), (e) => {
    assert.ok(e instanceof CommandExitError, String(e))
    assert.match(e.error, /output limit/)
    assert.ok(e.stdout.length <= 16 << 20, 'the output was cut')
    return true
  })
})

test('a command cannot leave the box: no host files, no network, no ptrace of the kernel', async () => {
  const r = await sbx.commands.run(
    'cat /etc/shadow 2>&1; ls /root 2>&1; python3 -c "import socket; socket.create_connection((\'1.1.1.1\', 53), 2)" 2>&1 | tail -1; ' +
      'python3 -c "import ctypes, os; l = ctypes.CDLL(None, use_errno=True); ' +
      "k = [p for p in os.listdir('/proc') if p.isdigit() and b'ipykernel' in open('/proc/%s/cmdline' % p, 'rb').read()]; " +
      "print('kernels', len(k), 'ptrace', [l.ptrace(16, int(p), 0, 0) for p in k], ctypes.get_errno())\"; true",
  )
  assert.doesNotMatch(r.stdout, /root:/)
  assert.match(r.stdout, /Error/)
  assert.match(r.stdout, /kernels [1-9] ptrace \[-1.*\] 1$/m, r.stdout)
})

test('pty.create gives a terminal: its size, typed input, resize, and kill', async () => {
  let out = ''
  const dec = new TextDecoder()
  const term = await sbx.pty.create({ cols: 91, rows: 17, onData: (d) => { out += dec.decode(d) } })
  await sbx.pty.sendInput(term.pid, new TextEncoder().encode(
    'stty size; tty; [ -t 0 ] && echo TTY-YES; id -u; echo "MARK-$((6*7))"\n'))
  assert.ok(await until(() => out.includes('MARK-42'), 15000), 'the shell answered: ' + JSON.stringify(out))
  assert.match(out, /17 91/, 'the size the client asked for')
  assert.match(out, /TTY-YES/, 'stdin is a terminal')
  assert.match(out, /\n1000\r?\n/, 'as the box user')
  await sbx.pty.resize(term.pid, { cols: 120, rows: 40 })
  await sbx.pty.sendInput(term.pid, new TextEncoder().encode('stty size; echo "MARK-$((7*8))"\n'))
  assert.ok(await until(() => out.includes('MARK-56'), 15000), 'answered after resize: ' + JSON.stringify(out))
  assert.match(out, /40 120/, 'the new size')
  assert.equal(await sbx.pty.kill(term.pid), true)
  const r = await term.wait().catch((e) => e)
  assert.ok(r.exitCode !== 0 || r.error, 'killed: ' + JSON.stringify(r))
  await assert.rejects(sbx.pty.resize(term.pid, { cols: 80, rows: 24 }), /not a running terminal|not found|ended/)
})

test('commands die with their sandbox', async () => {
  const s = await Sandbox.create()
  await s.commands.run('sleep 7003', { background: true, timeoutMs: 0 })
  assert.ok(await until(() => sleepers('7003').length === 1, 10000), 'it runs')
  await s.kill()
  assert.ok(await until(() => sleepers('7003').length === 0, 15000), 'it died with the sandbox')
})

// process.Process/StreamInput, a Connect client stream (the JS SDK never
// calls it; its generated client sends exactly this): envelopes of
// {start}, {data}, {keepalive} in one chunked POST body.
const envelope = (msg, flags = 0) => {
  const j = Buffer.from(JSON.stringify(msg))
  const h = Buffer.alloc(5)
  h[0] = flags
  h.writeUInt32BE(j.length, 1)
  return Buffer.concat([h, j])
}
async function streamInput(chunks, pause = 0) {
  const body = new ReadableStream({
    async pull(c) {
      if (!chunks.length) return c.close()
      c.enqueue(chunks.shift())
      if (pause) await new Promise((r) => setTimeout(r, pause))
    },
  })
  const r = await fetch(`${server.url}/process.Process/StreamInput`, {
    method: 'POST', body, duplex: 'half',
    headers: {
      'Content-Type': 'application/connect+json', 'Connect-Protocol-Version': '1',
      'E2b-Sandbox-Id': sbx.sandboxId, 'E2b-Sandbox-Port': '49983',
      'X-Access-Token': sbx.envdAccessToken,
    },
  })
  const b = Buffer.from(await r.arrayBuffer())
  const msgs = []
  for (let i = 0; i + 5 <= b.length; i += 5 + b.readUInt32BE(i + 1))
    msgs.push({ flags: b[i], msg: JSON.parse(b.subarray(i + 5, i + 5 + b.readUInt32BE(i + 1))) })
  return { status: r.status, msgs, end: msgs.at(-1)?.msg }
}
const b64 = (s) => Buffer.from(s).toString('base64')

test('StreamInput streams stdin to a running command, message by message, across any chunking', async () => {
  const h = await sbx.commands.run('cat; sleep 7002', { background: true, stdin: true })
  const got = []
  const again = await sbx.commands.connect(h.pid, { onStdout: (d) => got.push(d) })
  const whole = Buffer.concat([
    envelope({ start: { process: { pid: h.pid } } }),
    envelope({ data: { input: { stdin: b64('first\n') } } }),
    envelope({ keepalive: {} }),
    envelope({ data: { input: { stdin: b64('second\n') } } }),
  ])
  // Cut into 3-byte pieces, so every header and message is split.
  const pieces = []
  for (let i = 0; i < whole.length; i += 3) pieces.push(whole.subarray(i, i + 3))
  const r = await streamInput(pieces)
  assert.equal(r.status, 200)
  assert.deepEqual(r.msgs.map((m) => m.flags), [0, 2], 'one response message and the end')
  assert.deepEqual(r.end, {}, 'the stream ended without error')
  assert.ok(await until(() => got.join('') === 'first\nsecond\n', 10000), JSON.stringify(got))
  await sbx.commands.kill(h.pid)
  await again.wait().catch(() => {})
})

test('StreamInput refuses a huge declared message before reading it, data before start, an unknown process, compression and a cut stream', async () => {
  const h = await sbx.commands.run('cat >/dev/null; sleep 7003', { background: true, stdin: true })
  const start = envelope({ start: { process: { pid: h.pid } } })
  const huge = Buffer.alloc(5)
  huge.writeUInt32BE(0xfffffff0, 1) // 4 GiB declared, 5 bytes sent
  const cases = [
    [[start, huge], 'invalid_argument', /over the limit/],
    [[envelope({ data: { input: { stdin: b64('x') } } })], 'invalid_argument', /first message must be start/],
    [[envelope({ start: { process: { pid: 999999 } } })], 'not_found', /not found/],
    [[start, envelope({ data: { input: { stdin: b64('x') } } }, 1)], 'invalid_argument', /compressed/],
    [[start, envelope({ data: { input: { stdin: b64('x') } } }).subarray(0, 9)], 'invalid_argument', /ended inside/],
    [[start, Buffer.from([0, 0, 0, 0, 2]), Buffer.from('[]')], 'invalid_argument', /not a JSON object/],
    [[start, envelope({ data: { input: { stdin: '!!!' } } })], 'invalid_argument', /base64/],
  ]
  for (const [chunks, code, re] of cases) {
    const r = await streamInput(chunks)
    assert.equal(r.status, 200, 'Connect streams answer errors in the end message')
    assert.equal(r.end?.error?.code, code, JSON.stringify(r.end))
    assert.match(r.end.error.message, re)
  }
  const unary = await fetch(`${server.url}/process.Process/StreamInput`, {
    method: 'POST', body: '{}',
    headers: { 'Content-Type': 'application/json', 'E2b-Sandbox-Id': sbx.sandboxId,
      'E2b-Sandbox-Port': '49983', 'X-Access-Token': sbx.envdAccessToken },
  })
  assert.equal(unary.status, 400, 'a unary call to the client stream is refused')
  assert.equal((await sbx.commands.run('echo still')).stdout, 'still\n', 'the sandbox still works')
  await sbx.commands.kill(h.pid)
})
