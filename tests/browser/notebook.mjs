// Drives Debian's headless Chromium against a running classic Notebook
// server for tests/interop/test_browser.py. Never downloads a browser:
// playwright-core only talks CDP to the executable it is given.
//
//   node notebook.mjs '{"base": "http://127.0.0.1:PORT", "notebook": "x.ipynb",
//                       "chromium": "/usr/bin/chromium", "profile": DIR,
//                       "request": "...", "answer": "...",
//                       "python": "...", "python_expect": "...",
//                       "screenshots": [PNG, ...], "failshot": PNG}'
//
// It opens the notebook, waits for the kernel to be idle, types the request
// in the first cell and runs it with Shift+Enter, waits for the chart and the
// answer, then types a %%python cell into the second one and waits for its
// output. It prints one JSON object on stdout describing what the page shows
// (the test asserts on it) and exits 0; on a timeout it saves a screenshot
// to "failshot", prints {"error": ...} and exits 1. Requests that would leave
// 127.0.0.1 are aborted and listed in "blocked".
import { chromium } from 'playwright-core';

const cfg = JSON.parse(process.argv[2]);
const STEP_MS = cfg.step_ms || 90000;

const context = await chromium.launchPersistentContext(cfg.profile, {
    executablePath: cfg.chromium,
    headless: true,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic',
           '--no-first-run', '--disable-background-networking',
           '--disable-component-update', '--disable-sync'],
    viewport: { width: 1280, height: 900 },
    deviceScaleFactor: 1,
});
const blocked = [];
await context.route('**/*', (route) => {
    const url = new URL(route.request().url());
    if (url.hostname === '127.0.0.1' || url.protocol === 'data:' ||
        url.protocol === 'blob:')
        return route.continue();
    blocked.push(route.request().url());
    return route.abort();
});
const page = context.pages()[0] || await context.newPage();
const consoleErrors = [];
page.on('pageerror', (e) => consoleErrors.push(String(e)));

// What cell i shows: its input, its outputs' text, and its images.
async function cellView(i) {
    return page.evaluate((i) => {
        const cell = document.querySelectorAll('#notebook-container .cell')[i];
        if (!cell) return null;
        const outs = [...cell.querySelectorAll('.output_area')];
        return {
            input: Jupyter.notebook.get_cell(i).get_text(),
            prompt: (cell.querySelector('.input_prompt') || {}).innerText || '',
            outputs: outs.map((o) => ({
                text: (o.querySelector('.output_subarea') || o).innerText,
                classes: (o.querySelector('.output_subarea') || o).className,
                html: (o.querySelector('.output_subarea') || o).innerHTML.length,
            })),
            images: [...cell.querySelectorAll('.output_area img')].map((img) => ({
                src: img.src.slice(0, 22),
                width: img.naturalWidth,
                height: img.naturalHeight,
            })),
            markdown: [...cell.querySelectorAll('.output_area .rendered_html')]
                .map((m) => m.innerHTML),
        };
    }, i);
}

async function kernelIdle() {
    await page.waitForFunction(() => {
        const icon = document.querySelector('#kernel_indicator_icon');
        return window.Jupyter && Jupyter.notebook && Jupyter.notebook.kernel &&
            icon && icon.classList.contains('kernel_idle_icon');
    }, null, { timeout: STEP_MS, polling: 100 });
}

let step = 'open the notebook';
let result = null;
try {
    await page.goto(`${cfg.base}/notebooks/${encodeURIComponent(cfg.notebook)}`,
                    { timeout: STEP_MS });
    step = 'wait for the kernel to be idle';
    await kernelIdle();
    const kernelName = await page.evaluate(() => Jupyter.notebook.kernel.name);

    step = 'type the request in the first cell and run it';
    await page.click('#notebook-container .cell:nth-child(1) .CodeMirror');
    await page.keyboard.type(cfg.request);
    await page.keyboard.press('Shift+Enter');
    step = 'wait for the chart and the answer';
    await page.waitForFunction((answer) => {
        const cell = document.querySelectorAll('#notebook-container .cell')[0];
        const img = cell.querySelector('.output_area img');
        const md = [...cell.querySelectorAll('.output_area .rendered_html')];
        return img && img.complete && img.naturalWidth > 0 &&
            md.some((m) => m.innerText.includes(answer));
    }, cfg.answer, { timeout: STEP_MS, polling: 200 });
    await kernelIdle();

    step = 'type a %%python cell in the second cell and run it';
    // Shift+Enter left the second cell selected in edit mode.
    await page.click('#notebook-container .cell:nth-child(2) .CodeMirror');
    const lines = cfg.python.split('\n');
    for (let i = 0; i < lines.length; i++) {
        if (i) await page.keyboard.press('Enter');
        await page.keyboard.type(lines[i]);
    }
    await page.keyboard.press('Shift+Enter');
    step = 'wait for the %%python output';
    await page.waitForFunction((expect) => {
        const cell = document.querySelectorAll('#notebook-container .cell')[1];
        return [...cell.querySelectorAll('.output_area')]
            .some((o) => o.innerText.includes(expect));
    }, cfg.python_expect, { timeout: STEP_MS, polling: 200 });
    await kernelIdle();

    step = 'save the notebook';
    await page.evaluate(() => Jupyter.notebook.save_notebook());
    await page.waitForFunction(() => !Jupyter.notebook.dirty,
                               null, { timeout: STEP_MS });

    step = 'screenshot';
    // Leave edit mode and select nothing in particular, so the picture shows
    // the cells as a reader sees them.
    await page.keyboard.press('Escape');
    await page.evaluate(() => document.querySelector('#site').scrollTo(0, 0));
    await page.mouse.move(0, 0);
    for (const path of cfg.screenshots)
        await page.screenshot({ path });

    result = {
        kernel_name: kernelName,
        cells: [await cellView(0), await cellView(1)],
        blocked,
        page_errors: consoleErrors,
    };
} catch (e) {
    if (cfg.failshot)
        await page.screenshot({ path: cfg.failshot }).catch(() => {});
    result = { error: `${step}: ${e.message.split('\n')[0]}`, blocked,
               page_errors: consoleErrors,
               cells: [await cellView(0).catch(() => null),
                       await cellView(1).catch(() => null)] };
}
await context.close();
process.stdout.write(JSON.stringify(result) + '\n');
process.exit(result.error ? 1 : 0);
