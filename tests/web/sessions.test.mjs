// Sessions and their files from the page: upload through the file input,
// list, download the same bytes, delete; the sessions view with state and
// disk used; removing a session; the live figures of /metrics.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { after, before, test } from 'node:test';
import {
  apiJSON, createSession, launch, openPage, screenshot, setCode, signIn, startServer, stopServer, waitFor,
} from './helpers.mjs';

let server;
let browser;
let page;
let errors;

before(async () => {
  server = await startServer();
  browser = await launch();
  ({ page, errors } = await openPage(browser, server));
  await signIn(page);
});

after(async () => {
  await browser?.close();
  const mounts = await stopServer(server);
  assert.deepEqual(mounts, [], 'the server left mounts behind');
});

const fileRow = (path) => page.locator(`#files tbody tr[data-path="${path}"]`);
const sessionRow = (id) => page.locator(`#sessions tbody tr[data-session="${id}"]`);

async function download(path) {
  const [file] = await Promise.all([
    page.waitForEvent('download', { timeout: 10000 }),
    fileRow(path).getByRole('button', { name: `Download ${path}` }).click(),
  ]);
  return { name: file.suggestedFilename(), bytes: readFileSync(await file.path()) };
}

test('a session\'s files: uploaded through the page, listed, downloaded byte for byte, deleted', async () => {
  await createSession(page, 'files');
  const bytes = Buffer.concat([Buffer.from(Array.from({ length: 256 }, (_, i) => i)), Buffer.from('é\n\0end')]);
  await page.locator('#upload').setInputFiles([
    { name: 'data.bin', mimeType: 'application/octet-stream', buffer: bytes },
    { name: 'notes.txt', mimeType: 'text/plain', buffer: Buffer.from('hello from the browser\n') },
  ]);
  await fileRow('data.bin').waitFor({ timeout: 10000 });
  await fileRow('notes.txt').waitFor({ timeout: 10000 });
  assert.equal(await fileRow('data.bin').locator('.file-size').textContent(), `${bytes.length} B`);

  // The server has them, with these sizes, and code in the session reads them.
  const listed = (await apiJSON(server, '/v1/sessions/files/files')).body.files;
  assert.deepEqual(listed.filter((f) => f.type === 'file').map((f) => [f.path, f.size]).sort(),
    [['data.bin', bytes.length], ['notes.txt', 23]]);
  await setCode(page, "print(open('notes.txt').read(), end='')\nopen('made.txt', 'w').write('made by code\\n')\n");
  await page.locator('#run').click();
  await page.locator('#result .status-ok').waitFor({ timeout: 15000 });
  assert.equal(await page.locator('#stdout').textContent(), 'hello from the browser\n');
  await fileRow('made.txt').waitFor({ timeout: 10000 });

  const downloaded = await download('data.bin');
  assert.equal(downloaded.name, 'data.bin');
  assert.ok(downloaded.bytes.equals(bytes), 'the downloaded bytes differ from the uploaded ones');
  const made = await download('made.txt');
  assert.equal(made.bytes.toString(), 'made by code\n');
  await screenshot(page, 'sessions-files');

  await fileRow('data.bin').getByRole('button', { name: 'Delete data.bin' }).click();
  await fileRow('data.bin').waitFor({ state: 'detached', timeout: 10000 });
  const left = (await apiJSON(server, '/v1/sessions/files/files')).body.files.map((f) => f.path);
  assert.ok(!left.includes('data.bin') && left.includes('notes.txt'), `left: ${left}`);
  assert.equal((await apiJSON(server, '/v1/sessions/files/files/data.bin')).status, 404);
});

test('the sessions view shows a session\'s state, kernels and disk used, and the live figures', async () => {
  await createSession(page, 'busy');
  await page.locator('#upload').setInputFiles({ name: 'big.bin', mimeType: 'application/octet-stream', buffer: Buffer.alloc(300 * 1024, 7) });
  await fileRow('big.bin').waitFor({ timeout: 10000 });
  await page.locator('#stateful').check();
  await setCode(page, "import time\nprint('working', flush=True)\ntime.sleep(6)\n");
  await page.locator('#run').click();
  await waitFor(async () => (await page.locator('#stdout').textContent()).includes('working'), 20000, '"working"');

  // While it runs: the session says so, and so do the figures.
  await page.locator('#sessions-refresh').click();
  await sessionRow('busy').locator('.badge-running').waitFor({ timeout: 5000 });
  assert.match(await sessionRow('busy').locator('.session-state').textContent(), /python kernel busy/);
  await waitFor(async () => (await page.locator('[data-metric="runbox_executions_running"] .figure-value').textContent()) === '1',
    6000, 'the figure of executions running to say 1');
  assert.equal(await page.locator('[data-metric="runbox_executions_queued"] .figure-value').textContent(), '0');
  assert.match(await page.locator('[data-metric="runbox_kernels"] .figure-value').textContent(), /^[1-9]\d*$/);
  await screenshot(page, 'sessions-running');

  await page.locator('#result .status-ok').waitFor({ timeout: 15000 });
  await page.locator('#sessions-refresh').click();
  await waitFor(async () => (await sessionRow('busy').locator('.badge').textContent()) === 'idle', 5000, 'idle');
  assert.match(await sessionRow('busy').locator('.session-state').textContent(), /python kernel idle, idle \d+ s, [\d.]+ MiB/);
  // Disk used: at least the 300 KiB file, in the unit the page chose.
  const disk = await sessionRow('busy').locator('.session-disk').textContent();
  const match = /^([\d.]+) (KiB|MiB)$/.exec(disk);
  assert.ok(match, `disk used: ${disk}`);
  assert.ok(Number(match[1]) * (match[2] === 'MiB' ? 1024 : 1) >= 300, `disk used: ${disk}`);
  const executed = await page.locator('[data-metric="runbox_executions_total"] .figure-value').textContent();
  assert.match(executed, /^[1-9]\d*$/);
  await page.locator('#stateful').uncheck();
});

test('removing a session takes two presses and removes it on the server', async () => {
  await sessionRow('busy').getByRole('button', { name: 'Remove session busy' }).click();
  assert.equal(await sessionRow('busy').getByRole('button', { name: 'Remove session busy' }).textContent(), 'Really remove?');
  assert.equal((await apiJSON(server, '/v1/sessions/busy')).status, 200, 'one press removed it');
  await sessionRow('busy').getByRole('button', { name: 'Remove session busy' }).click();
  await sessionRow('busy').waitFor({ state: 'detached', timeout: 10000 });
  assert.equal((await apiJSON(server, '/v1/sessions/busy')).status, 404);
  assert.match(await page.locator('#sessions-message').textContent(), /session busy removed/);
  // The picker no longer offers it.
  assert.equal(await page.locator('#session option[value="busy"]').count(), 0);
});

test('the page itself broke no rule (no script error, no CSP refusal)', () => {
  assert.deepEqual(errors, []);
});
