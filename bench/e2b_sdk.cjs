// The E2B JS SDK's side of bench/e2b.py: create + first runCode('1+1')
// with the pool warm, then runCode('pass') round trips on one sandbox.
// Prints one JSON line. Uses the SDK tests/e2b installs (npm ci).
const path = require('node:path')
const { createRequire } = require('node:module')
const req = createRequire(path.join(__dirname, '..', 'tests', 'e2b', 'x.js'))
const { Sandbox } = req('@e2b/code-interpreter')

const N_CREATE = Number(process.env.N_CREATE || 50)
const N_PASS = Number(process.env.N_PASS || 300)
const PAUSE_MS = Number(process.env.PAUSE_MS || 1500) // the pool refills
const sleep = (ms) => new Promise((r) => setTimeout(r, ms))
const ms = (t0) => Number(process.hrtime.bigint() - t0) / 1e6

async function main() {
  // Warm: the pool's kernels are up once a create is fast.
  for (let i = 0; i < 3; i++) {
    const s = await Sandbox.create()
    await s.runCode('1+1')
    await s.kill()
    await sleep(PAUSE_MS)
  }
  const create = []
  const cycle = [] // create -> runCode('1+1') -> kill() answered
  for (let i = 0; i < N_CREATE; i++) {
    const t0 = process.hrtime.bigint()
    const s = await Sandbox.create()
    const r = await s.runCode('1+1')
    create.push(ms(t0))
    if (r.text !== '2') throw new Error('1+1 gave ' + r.text)
    await s.kill()
    cycle.push(ms(t0))
    await sleep(PAUSE_MS)
  }
  const s = await Sandbox.create()
  for (let i = 0; i < 30; i++) await s.runCode('pass')
  const pass = []
  for (let i = 0; i < N_PASS; i++) {
    const t0 = process.hrtime.bigint()
    await s.runCode('pass')
    pass.push(ms(t0))
  }
  await s.kill()
  console.log(JSON.stringify({ create, cycle, pass }))
}
main().catch((e) => { console.error(e); process.exit(1) })
