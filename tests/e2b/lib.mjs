// Helpers shared by the E2B suites (sdk.test.mjs, hostile.test.mjs).
import { spawn, spawnSync } from 'node:child_process'
import crypto from 'node:crypto'
import fs from 'node:fs'

export const BIN = process.env.JUPYTER_AGENT_BIN

// Start `jupyter-agent e2b` on a free port; resolve with its URL.
export function startServer(args, env = {}) {
  return new Promise((resolve, reject) => {
    const p = spawn(BIN, ['e2b', '--listen', '127.0.0.1:0', ...args], {
      stdio: ['ignore', 'ignore', 'pipe'],
      env: { ...process.env, ...env },
    })
    let err = ''
    const t = setTimeout(() => reject(new Error('no listening line: ' + err)), 60000)
    p.stderr.on('data', (d) => {
      err += d
      const m = /listening on (http:\/\/[0-9.:]+)/.exec(err)
      if (m) {
        clearTimeout(t)
        resolve({ p, url: m[1], log: () => err })
      }
    })
    p.on('exit', (code) => reject(new Error(`server exited ${code}: ${err}`)))
  })
}

export function stopServer(s) {
  return new Promise((resolve) => {
    if (!s || s.p.exitCode !== null) return resolve()
    s.p.on('exit', () => resolve())
    s.p.kill('SIGTERM')
  })
}

export const sha = (b) => crypto.createHash('sha256').update(b).digest('hex')

// Where a sandbox's box lives on the host: its connection file is in
// <top>/sock/ (top = /tmp/ja-sb-XXXXXX, the same path inside), its cgroup
// ends in -XXXXXX.
export async function boxOf(sbx) {
  const r = await sbx.runCode('from ipykernel.connect import get_connection_file as g; g()')
  const cf = r.text
  const top = cf.replace(/\/sock\/[^/]*$/, '')
  return { cf, top, suffix: top.replace(/^.*ja-sb-/, '') }
}

export function boxLeft(box) {
  const left = []
  if (fs.existsSync(box.top)) left.push('run dir ' + box.top)
  for (const pid of fs.readdirSync('/proc').filter((d) => /^\d+$/.test(d))) {
    try {
      if (fs.readFileSync(`/proc/${pid}/cmdline`, 'latin1').includes(box.cf))
        left.push('process ' + pid)
    } catch {}
  }
  const r = spawnSync('find', ['/sys/fs/cgroup', '-maxdepth', '4', '-name', '*-' + box.suffix])
  for (const l of r.stdout.toString().split('\n').filter(Boolean)) left.push('cgroup ' + l)
  return left
}

export async function until(fn, ms) {
  const end = Date.now() + ms
  for (;;) {
    if (await fn()) return true
    if (Date.now() > end) return false
    await new Promise((r) => setTimeout(r, 200))
  }
}


// A server with a fresh API key in E2B_TEST_DIR/key, and the SDKs' three
// variables pointing at it (what a program written for E2B sets).
export async function serveForSdk(key, args, env = {}) {
  fs.writeFileSync(process.env.E2B_TEST_DIR + '/key', key + '\n', { mode: 0o600 })
  const s = await startServer(['--api-key-file', process.env.E2B_TEST_DIR + '/key', ...args], env)
  process.env.E2B_API_URL = s.url
  process.env.E2B_SANDBOX_URL = s.url
  process.env.E2B_API_KEY = key
  delete process.env.E2B_DEBUG
  return s
}
