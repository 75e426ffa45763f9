// `jupyter-agent mcp` driven by the official MCP TypeScript SDK client
// (@modelcontextprotocol/sdk, pinned in package-lock.json) over stdio and
// Streamable HTTP, against real sandboxed ipykernels. Run by
// tests/integration/mcp_sdk.sh with `node --test --test-reporter=tap`.
//
// Environment: JUPYTER_AGENT_BIN (the binary), JUPYTER_AGENT_PYTHON (the
// Python with nbformat), MCP_TEST_DIR (a private directory; the servers'
// XDG_RUNTIME_DIR and HOME live under it, so every sandbox run dir and
// kernel this file starts can be found and must be gone at the end).
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, execFileSync } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import Ajv2020 from 'ajv/dist/2020.js';

const BIN = process.env.JUPYTER_AGENT_BIN;
const PY = process.env.JUPYTER_AGENT_PYTHON || '/usr/bin/python3';
const DIR = process.env.MCP_TEST_DIR;
assert.ok(BIN && DIR, 'JUPYTER_AGENT_BIN and MCP_TEST_DIR must be set');
const RUN = path.join(DIR, 'run');
const NBDIR = path.join(DIR, 'notebooks');
fs.mkdirSync(RUN, { recursive: true, mode: 0o755 });
fs.mkdirSync(NBDIR, { recursive: true });
const ENV = { ...process.env, XDG_RUNTIME_DIR: RUN, HOME: path.join(DIR, 'home') };
fs.mkdirSync(ENV.HOME, { recursive: true });
const LONG = { timeout: 180000 }; // a cold sandbox start under load is slow

const sha256 = (buf) => createHash('sha256').update(buf).digest('hex');
const text = (r) => r.content.filter((c) => c.type === 'text').map((c) => c.text).join('\n');

// Processes whose command line mentions our private directory: the
// sandboxed kernels (their connection files live under RUN) and servers.
function ourProcesses() {
  const found = [];
  for (const pid of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(pid) || Number(pid) === process.pid) continue;
    try {
      const cmd = fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8');
      if (cmd.includes(DIR)) found.push(`${pid}: ${cmd.replace(/\0/g, ' ')}`);
    } catch { /* gone */ }
  }
  return found;
}
const sandboxDirs = () => fs.readdirSync(RUN).filter((n) => n.startsWith('ja-sb-'));
async function eventually(fn, ms = 20000) {
  const end = Date.now() + ms;
  for (;;) {
    const v = fn();
    if (v.length === 0 || Date.now() > end) return v;
    await new Promise((r) => setTimeout(r, 200));
  }
}

// ---- stdio ------------------------------------------------------------------

const stdioTransport = new StdioClientTransport({
  command: BIN,
  args: ['mcp', '--timeout', '60', '--notebook', path.join(NBDIR, 'stdio.ipynb')],
  env: ENV,
  stderr: 'pipe',
});
let stderrText = '';
stdioTransport.stderr?.on('data', (d) => { stderrText += d; });
const client = new Client({ name: 'jupyter-agent-test', version: '1.0.0' });

test('the SDK client initializes over stdio and gets revision 2025-11-25 with tools and logging', async () => {
  await client.connect(stdioTransport);
  const caps = client.getServerCapabilities();
  assert.ok(caps.tools, 'tools capability');
  assert.ok(caps.logging, 'logging capability');
  assert.equal(client.getServerVersion().name, 'jupyter-agent');
  const instr = client.getInstructions();
  assert.match(instr, /no network/i);
  assert.match(instr, /\/mnt\/data/);
});

test('tools/list offers the sandbox tools with valid JSON Schemas', async () => {
  const { tools } = await client.listTools();
  const names = tools.map((t) => t.name).sort();
  assert.deepEqual(names, ['export_notebook', 'list_files', 'python', 'read_file', 'reset', 'shell', 'write_file']);
  const ajv = new Ajv2020({ strict: false });
  for (const t of tools) {
    assert.equal(t.inputSchema.type, 'object', t.name);
    assert.ok(ajv.compile(t.inputSchema), `${t.name} inputSchema compiles`);
    if (t.outputSchema) assert.ok(ajv.compile(t.outputSchema), `${t.name} outputSchema compiles`);
  }
  const py = tools.find((t) => t.name === 'python');
  assert.deepEqual(py.inputSchema.required, ['code']);
  assert.ok(py.inputSchema.properties.timeout);
  assert.ok(py.outputSchema, 'python declares its structuredContent');
});

test('state persists across python calls and results come in nbformat shape', async () => {
  let r = await client.callTool({ name: 'python', arguments: { code: 'x = 41\nprint("set")' } }, undefined, LONG);
  assert.equal(r.isError, false, text(r));
  r = await client.callTool({ name: 'python', arguments: { code: 'x + 1' } }, undefined, LONG);
  assert.equal(r.isError, false);
  assert.match(text(r), /42/);
  const sc = r.structuredContent;
  assert.equal(sc.status, 'ok');
  assert.equal(typeof sc.execution_count, 'number');
  assert.equal(sc.outputs[0].output_type, 'execute_result');
  assert.equal(sc.outputs[0].data['text/plain'], '42');
});

test('a matplotlib plot comes back as an image content item', async () => {
  const code = 'import matplotlib.pyplot as plt\nplt.plot([1, 3, 2])\nplt.show()';
  const r = await client.callTool({ name: 'python', arguments: { code } }, undefined, LONG);
  assert.equal(r.isError, false, text(r));
  const img = r.content.find((c) => c.type === 'image');
  assert.ok(img, 'an image item');
  assert.equal(img.mimeType, 'image/png');
  const png = Buffer.from(img.data, 'base64');
  assert.equal(png.subarray(1, 4).toString(), 'PNG');
});

test('a figure\'s chart data comes in structuredContent.charts and a DataFrame\'s in .tables; a big figure\'s image item stays under --max-image-bytes (default 256 KiB)', async () => {
  const code = "import matplotlib.pyplot as plt, pandas as pd\n" +
    "fig, ax = plt.subplots(figsize=(40, 30), dpi=100)\n" +
    "ax.bar(['north', 'south', 'east'], [17, 42, 23]); ax.set_title('Revenue by region')\n" +
    "plt.show()\nimport numpy as np\nplt.figure(figsize=(10, 10))\n" +
    "plt.imshow(np.random.default_rng(1).random((1000, 1000)))\nplt.show()\n" +
    "pd.DataFrame({'a': [1, 2, 3]})";
  const r = await client.callTool({ name: 'python', arguments: { code } }, undefined, LONG);
  assert.equal(r.isError, false, text(r));
  const c = r.structuredContent.charts[0].charts[0];
  assert.equal(c.type, 'bar');
  assert.equal(c.title, 'Revenue by region');
  assert.deepEqual(c.elements.map((e) => [e.label, e.value]), [['north', 17], ['south', 42], ['east', 23]]);
  assert.deepEqual(r.structuredContent.tables[0].shape, [3, 1]);
  assert.match(text(r), /bar chart 'Revenue by region'; north 17, south 42, east 23/);
  const img = r.content.find((i) => i.type === 'image');
  assert.ok(img, 'an image item');
  assert.ok(img.data.length <= 256 * 1024, `image item ${img.data.length} bytes`);
  assert.match(text(r), /scaled down to \d+x\d+/);
  // structuredContent's outputs are fitted too, and say from what
  const outs = r.structuredContent.outputs.filter((o) => o.data && o.data['image/png']);
  assert.equal(outs.length, 2);
  for (const o of outs) assert.ok(o.data['image/png'].length <= 256 * 1024, `output image ${o.data['image/png'].length} bytes`);
  const noise = outs[1];
  assert.ok(noise.metadata.jupyter_agent.scaled_from[0] >= 700, JSON.stringify(noise.metadata));
  const items = r.content.filter((i) => i.type === 'image');
  assert.equal(items.length, 2);
  for (const i of items) assert.ok(i.data.length <= 256 * 1024, `image item ${i.data.length} bytes`);
  // the session's notebook keeps the full image
  const nb = await client.callTool({ name: 'export_notebook', arguments: {} }, undefined, LONG);
  const cells = JSON.parse(nb.content.find((c) => c.type === 'resource').resource.text).cells;
  const pngs = cells.flatMap((c) => c.outputs || []).map((o) => (o.data || {})['image/png']).filter(Boolean)
    .map((p) => (Array.isArray(p) ? p.join('') : p));
  assert.ok(Math.max(...pngs.map((p) => p.length)) > 256 * 1024, 'the notebook keeps the full image');
});

test('a traceback is a tool error (isError) with ANSI codes stripped, not a protocol error', async () => {
  const r = await client.callTool({ name: 'python', arguments: { code: 'def f():\n    return 1/0\nf()' } });
  assert.equal(r.isError, true);
  assert.match(text(r), /ZeroDivisionError/);
  assert.doesNotMatch(text(r), /\x1b\[/);
  assert.equal(r.structuredContent.status, 'error');
  assert.equal(r.structuredContent.outputs.at(-1).output_type, 'error');
});

test('a cell over its timeout is interrupted and the result says what happened to the state', async () => {
  const r = await client.callTool(
    { name: 'python', arguments: { code: 'import time\ntime.sleep(60)', timeout: 1.5 } }, undefined, LONG);
  assert.equal(r.isError, true);
  assert.equal(r.structuredContent.status, 'timeout');
  assert.match(text(r), /timed out after 1.5 s/);
  assert.match(text(r), /state (kept|was lost)/);
  const again = await client.callTool({ name: 'python', arguments: { code: 'x' } });
  assert.match(text(again), /41/, 'interrupted, not restarted: x survives');
});

test('cancelling a running call interrupts the kernel, streams progress first, and keeps state', async () => {
  const ac = new AbortController();
  const progress = [];
  const code = 'import time\nfor i in range(600):\n    print("line", i, flush=True)\n    time.sleep(0.1)';
  const call = client.callTool({ name: 'python', arguments: { code } }, undefined, {
    ...LONG,
    signal: ac.signal,
    onprogress: (p) => {
      progress.push(p);
      if (progress.length === 3) ac.abort('enough');
    },
  });
  await assert.rejects(call);
  assert.ok(progress.length >= 3, 'progress notifications arrived');
  assert.match(progress[0].message, /^line 0$/);
  assert.ok(progress[1].progress > progress[0].progress, 'progress increases');
  const r = await client.callTool({ name: 'python', arguments: { code: 'print(x, i < 599)' } }, undefined, LONG);
  assert.equal(r.isError, false, text(r));
  assert.match(text(r), /41 True/, 'same kernel, stopped early');
});

const sleepers = (arg) => fs.readdirSync('/proc').filter((pid) => {
  try { return /^\d+$/.test(pid) && fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8') === `sleep\0${arg}\0`; } catch { return false; }
});

test('shell runs in the kernel\'s own box: each sees the files the other wrote, as the same user', async () => {
  let r = await client.callTool({ name: 'python', arguments: { code: "open('/mnt/data/from_kernel.txt', 'w').write('kernel wrote this\\n'); import os; os.getuid()" } }, undefined, LONG);
  assert.equal(r.isError, false, text(r));
  assert.match(text(r), /1000/);
  r = await client.callTool({ name: 'shell', arguments: { command: 'cat from_kernel.txt; id -u; pwd; echo "shell wrote this" > /tmp/from_shell.txt' } }, undefined, LONG);
  assert.equal(r.isError, false, text(r));
  assert.equal(r.structuredContent.stdout, 'kernel wrote this\n1000\n/mnt/data\n');
  assert.equal(r.structuredContent.exit_code, 0);
  r = await client.callTool({ name: 'python', arguments: { code: "print(open('/tmp/from_shell.txt').read())" } }, undefined, LONG);
  assert.match(text(r), /shell wrote this/);
});

test('shell streams output lines as progress and a non-zero exit is a tool error with the code', async () => {
  const progress = [];
  // Paced: the SDK drops a progress notification that arrives in the same
  // read as the call's result (its notification handlers run a tick later).
  const r = await client.callTool({ name: 'shell', arguments: { command: 'for i in 1 2 3; do echo "step $i"; sleep 0.2; done; echo bad >&2; sleep 0.5; exit 7' } },
    undefined, { ...LONG, onprogress: (p) => progress.push(p.message) });
  assert.deepEqual(progress, ['step 1', 'step 2', 'step 3', 'bad']);
  assert.equal(r.isError, true);
  assert.equal(r.structuredContent.exit_code, 7);
  assert.equal(r.structuredContent.stderr, 'bad\n');
  assert.match(text(r), /exited with status 7/);
});

test('shell is bounded: a timeout and an output flood kill the command, and nothing it started outlives the call', async () => {
  let r = await client.callTool({ name: 'shell', arguments: { command: 'sleep 6061 & sleep 100', timeout: 1 } }, undefined, LONG);
  assert.equal(r.isError, true);
  assert.equal(r.structuredContent.timed_out, true);
  assert.match(text(r), /timed out/);
  assert.deepEqual(await eventually(() => sleepers('6061')), [], 'the background sleep is gone too');
  r = await client.callTool({ name: 'shell', arguments: { command: 'yes' } }, undefined, LONG);
  assert.equal(r.isError, true);
  assert.equal(r.structuredContent.output_capped, true);
  assert.ok(r.structuredContent.stdout.length <= 70 * 1024, 'the text is cut');
  r = await client.callTool({ name: 'shell', arguments: { command: 'cat /etc/shadow; ls /root' } }, undefined, LONG);
  assert.equal(r.isError, true, 'the host\'s files are not there');
  r = await client.callTool({ name: 'shell', arguments: { command: 'true', timeout: 99999 } }, undefined, LONG);
  assert.equal(r.isError, true, 'a timeout past the bound is refused');
  assert.match(text(r), /at most 3600/);
});

test('cancelling a shell call kills the command', async () => {
  const ac = new AbortController();
  const progress = [];
  const call = client.callTool({ name: 'shell', arguments: { command: 'i=0; while :; do echo tick $i; i=$((i+1)); sleep 0.1; done' } }, undefined, {
    ...LONG, signal: ac.signal, onprogress: (p) => { progress.push(p); if (progress.length === 2) ac.abort('enough'); },
  });
  await assert.rejects(call);
  assert.equal(progress[0].message, 'tick 0');
  const r = await client.callTool({ name: 'shell', arguments: { command: 'ps -e -o args | grep -c "^sh -c i=0" || true' } }, undefined, LONG);
  assert.equal(r.structuredContent.stdout.trim(), '0', 'the loop is gone');
});

test('a kernel that dies is reported and a fresh one takes over', async () => {
  const r = await client.callTool(
    { name: 'python', arguments: { code: 'import os, signal\nos.kill(os.getpid(), signal.SIGKILL)' } }, undefined, LONG);
  assert.equal(r.isError, true);
  assert.equal(r.structuredContent.status, 'died');
  assert.match(text(r), /fresh kernel/);
  const after = await client.callTool({ name: 'python', arguments: { code: "'x' in dir(), 6 * 7" } }, undefined, LONG);
  assert.equal(after.isError, false, text(after));
  assert.match(text(after), /\(False, 42\)/);
});

test('write_file and read_file round-trip text and binary with matching hashes', async () => {
  const bin = randomBytes(200000);
  let r = await client.callTool({ name: 'write_file', arguments: { path: 'in/blob.bin', base64: bin.toString('base64') } }, undefined, LONG);
  assert.equal(r.isError, false, text(r));
  assert.match(text(r), new RegExp(sha256(bin)));
  r = await client.callTool({ name: 'python', arguments: { code: "import hashlib\nhashlib.sha256(open('/mnt/data/in/blob.bin','rb').read()).hexdigest()" } });
  assert.match(text(r), new RegExp(sha256(bin)), 'the kernel sees the same bytes');
  r = await client.callTool({ name: 'read_file', arguments: { path: '/mnt/data/in/blob.bin' } });
  const res = r.content.find((c) => c.type === 'resource').resource;
  assert.equal(sha256(Buffer.from(res.blob, 'base64')), sha256(bin));
  const t = 'naïve café ✓\nline 2\n';
  await client.callTool({ name: 'write_file', arguments: { path: 'notes.txt', content: t } });
  r = await client.callTool({ name: 'read_file', arguments: { path: 'notes.txt' } });
  assert.equal(r.content[0].type, 'text');
  assert.equal(r.content[0].text, t);
  r = await client.callTool({ name: 'list_files', arguments: {} });
  assert.match(text(r), /in\/blob\.bin/);
  assert.match(text(r), /notes\.txt/);
});

test('read_file refuses paths outside /mnt/data and symlinks made in the box', async () => {
  let r = await client.callTool({ name: 'read_file', arguments: { path: '/etc/passwd' } });
  assert.equal(r.isError, true);
  r = await client.callTool({ name: 'read_file', arguments: { path: '../../etc/passwd' } });
  assert.equal(r.isError, true);
  await client.callTool({ name: 'python', arguments: { code: "import os\nos.symlink('/etc/passwd', '/mnt/data/link')" } });
  r = await client.callTool({ name: 'read_file', arguments: { path: 'link' } });
  assert.equal(r.isError, true);
  assert.doesNotMatch(text(r), /root:/);
});

test('export_notebook returns an nbformat 4.5 notebook that nbformat validates, and writes only under --notebook', async () => {
  let r = await client.callTool({ name: 'export_notebook', arguments: {} });
  assert.equal(r.isError, false, text(r));
  const res = r.content.find((c) => c.type === 'resource').resource;
  assert.equal(res.mimeType, 'application/x-ipynb+json');
  const file = path.join(DIR, 'returned.ipynb');
  fs.writeFileSync(file, res.text);
  const check = (f) => execFileSync(PY, ['-c',
    'import nbformat, sys\nnb = nbformat.read(sys.argv[1], as_version=4)\nnbformat.validate(nb)\n' +
    'print(nb.nbformat, nb.nbformat_minor, sum(c.cell_type == "code" for c in nb.cells))', f]).toString().trim();
  const [major, minor, ncode] = check(file).split(' ').map(Number);
  assert.equal(major, 4);
  assert.equal(minor, 5);
  assert.ok(ncode >= 5, `code cells recorded: ${ncode}`);
  assert.match(res.text, /x = 41/);
  r = await client.callTool({ name: 'export_notebook', arguments: { path: 'exported.ipynb' } });
  assert.equal(r.isError, false, text(r));
  check(path.join(NBDIR, 'exported.ipynb'));
  for (const bad of ['../escape.ipynb', '/tmp/escape.ipynb', 'x.txt']) {
    r = await client.callTool({ name: 'export_notebook', arguments: { path: bad } });
    assert.equal(r.isError, true, bad);
  }
  assert.ok(!fs.existsSync(path.join(DIR, 'escape.ipynb')));
});

test('reset starts a fresh kernel: variables are gone, files stay, chart data still comes', async () => {
  let r = await client.callTool({ name: 'reset', arguments: {} }, undefined, LONG);
  assert.equal(r.isError, false, text(r));
  r = await client.callTool({ name: 'python', arguments: { code: "'x' in dir(), open('/mnt/data/notes.txt').read()[:5]" } }, undefined, LONG);
  assert.match(text(r), /\(False, 'naïve'\)/);
  // the fresh kernel got the chart formatter again (kb_kernel on_restart)
  r = await client.callTool({ name: 'python', arguments: { code: "import matplotlib.pyplot as plt\nplt.bar(['a'], [5])\nplt.show()" } }, undefined, LONG);
  assert.equal(r.structuredContent.charts[0].charts[0].elements[0].value, 5);
});

test('an unknown tool is a protocol error (-32602)', async () => {
  await assert.rejects(client.callTool({ name: 'no_such_tool', arguments: {} }), /-32602|Unknown tool/);
});

test('closing the stdio client ends the server and leaves no sandbox or process behind', async () => {
  assert.ok(sandboxDirs().length >= 1, 'a sandbox existed while the session ran');
  await client.close();
  assert.deepEqual(await eventually(sandboxDirs), [], 'sandbox run dirs removed');
  assert.deepEqual(await eventually(ourProcesses), [], 'no kernel or server left');
  // --notebook: the session was written at the end.
  assert.ok(fs.existsSync(path.join(NBDIR, 'stdio.ipynb')), stderrText.slice(-2000));
});

// ---- raw stdio: version negotiation and batches -------------------------------

function rawSession(lines) {
  return new Promise((resolve, reject) => {
    const p = spawn(BIN, ['mcp'], { env: ENV, stdio: ['pipe', 'pipe', 'ignore'] });
    let out = '';
    p.stdout.on('data', (d) => { out += d; });
    p.on('error', reject);
    p.on('close', (code) => resolve({ code, replies: out.split('\n').filter(Boolean).map((l) => JSON.parse(l)) }));
    p.stdin.end(lines.map((l) => (typeof l === 'string' ? l : JSON.stringify(l))).join('\n') + '\n');
  });
}
const init = (v, id = 1) => ({ jsonrpc: '2.0', id, method: 'initialize', params: { protocolVersion: v, capabilities: {}, clientInfo: { name: 'raw', version: '0' } } });

test('older revisions are negotiated down to 2025-06-18 and 2025-03-26; unknown ones get the newest', async () => {
  for (const [asked, got] of [['2025-06-18', '2025-06-18'], ['2025-03-26', '2025-03-26'], ['2024-11-05', '2025-11-25'], ['1999-01-01', '2025-11-25']]) {
    const { replies } = await rawSession([init(asked)]);
    assert.equal(replies[0].result.protocolVersion, got, asked);
  }
});

test('batches are answered in 2025-03-26 and refused (-32600) in 2025-06-18', async () => {
  const batch = [{ jsonrpc: '2.0', id: 2, method: 'ping' }, { jsonrpc: '2.0', method: 'notifications/initialized' }, { jsonrpc: '2.0', id: 3, method: 'tools/list' }];
  let { replies } = await rawSession([init('2025-03-26'), batch]);
  assert.ok(Array.isArray(replies[1]));
  assert.deepEqual(replies[1].map((r) => r.id).sort(), [2, 3]);
  ({ replies } = await rawSession([init('2025-06-18'), batch]));
  assert.equal(replies[1].error.code, -32600);
});

// ---- Streamable HTTP ------------------------------------------------------------

let httpServer;
let httpUrl;
async function startHttp() {
  httpServer = spawn(BIN, ['mcp', '--http', '127.0.0.1:0', '--max-sessions', '4'], { env: ENV, stdio: ['ignore', 'ignore', 'pipe'] });
  let err = '';
  httpUrl = await new Promise((resolve, reject) => {
    httpServer.stderr.on('data', (d) => {
      err += d;
      const m = err.match(/listening on (http:\/\/\S+)/);
      if (m) resolve(new URL(m[1]));
    });
    httpServer.on('exit', (c) => reject(new Error(`server exited ${c}: ${err}`)));
  });
}

test('two HTTP sessions cannot see each other\'s variables or files', async () => {
  await startHttp();
  const a = new Client({ name: 'a', version: '1' });
  const b = new Client({ name: 'b', version: '1' });
  const ta = new StreamableHTTPClientTransport(httpUrl);
  const tb = new StreamableHTTPClientTransport(httpUrl);
  await a.connect(ta);
  await b.connect(tb);
  assert.ok(ta.sessionId && tb.sessionId && ta.sessionId !== tb.sessionId, 'distinct MCP-Session-Ids');
  assert.equal(ta.protocolVersion, '2025-11-25');
  let r = await a.callTool({ name: 'python', arguments: { code: "secret = 'alpha'\nopen('/mnt/data/a.txt','w').write('only a')" } }, undefined, LONG);
  assert.equal(r.isError, false, text(r));
  r = await b.callTool({ name: 'python', arguments: { code: "import os\nprint('secret' in dir(), os.path.exists('/mnt/data/a.txt'))" } }, undefined, LONG);
  assert.match(text(r), /False False/);
  r = await b.callTool({ name: 'read_file', arguments: { path: 'a.txt' } });
  assert.equal(r.isError, true);
  r = await a.callTool({ name: 'python', arguments: { code: 'secret' } });
  assert.match(text(r), /alpha/);
  // Progress over HTTP comes on an SSE stream before the response.
  const progress = [];
  r = await a.callTool({ name: 'python', arguments: { code: 'for i in range(3): print("p", i)' } }, undefined, { ...LONG, onprogress: (p) => progress.push(p.message) });
  assert.deepEqual(progress, ['p 0', 'p 1', 'p 2']);
  assert.equal(sandboxDirs().length, 2, 'one sandbox per session');
  const endedId = ta.sessionId;
  await ta.terminateSession();
  assert.deepEqual(await eventually(() => (sandboxDirs().length === 1 ? [] : sandboxDirs())), [], 'DELETE destroyed one sandbox');
  // The ended session's id is now 404.
  const res = await fetch(httpUrl, { method: 'POST', headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'mcp-session-id': endedId, 'mcp-protocol-version': '2025-11-25' }, body: JSON.stringify({ jsonrpc: '2.0', id: 9, method: 'ping' }) });
  assert.equal(res.status, 404);
  await a.close();
  await b.close();
});

test('stopping the HTTP server ends every session and leaves no sandbox or process behind', async () => {
  httpServer.kill('SIGTERM');
  const code = await new Promise((r) => httpServer.on('exit', r));
  assert.equal(code, 0);
  assert.deepEqual(await eventually(sandboxDirs), []);
  assert.deepEqual(await eventually(ourProcesses), []);
});

after(() => {
  if (httpServer && httpServer.exitCode === null) httpServer.kill('SIGKILL');
});
