// The image picker: it offers what GET /v1/images lists, a run on the
// chosen image says so in its result, and an image without the chosen
// language's interpreter cannot be picked for it.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, before, test } from 'node:test';
import {
  launch, openPage, RUNBOX, screenshot, setCode, signIn, startServer, stopServer, waitFor,
} from './helpers.mjs';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const asRoot = process.getuid() === 0;

let work;
let server;
let browser;
let page;
let errors;

// A store with "mini": the host's bash and cat with their libraries, and
// nothing else (no Python, no Node.js).
function makeStore() {
  work = mkdtempSync(path.join(tmpdir(), 'rbx-web-images-'));
  const tree = path.join(work, 'tree');
  execFileSync('/usr/bin/python3', [path.join(root, 'tests/lib/host_tree.py'), tree, '/bin/bash', '/usr/bin/cat']);
  execFileSync('tar', ['-C', tree, '-cf', path.join(work, 'mini.tar'), '.']);
  const state = path.join(work, 'import-state');
  const store = path.join(work, 'store');
  execFileSync(RUNBOX, ['--state-dir', state, '--images', store, 'images', 'import', 'mini', path.join(work, 'mini.tar')]);
  execFileSync(RUNBOX, ['--state-dir', state, 'storage', 'unmount']);
  return store;
}

before(async () => {
  if (!asRoot) return;
  server = await startServer({ globalArgs: ['--images', makeStore()] });
  browser = await launch();
  ({ page, errors } = await openPage(browser, server));
  await signIn(page);
});

after(async () => {
  await browser?.close();
  const mounts = await stopServer(server);
  if (work) rmSync(work, { recursive: true, force: true });
  assert.deepEqual(mounts, [], 'the server left mounts behind');
});

async function options() {
  return page.locator('#image option').evaluateAll((all) => all.map((o) => ({ value: o.value, text: o.textContent, disabled: o.disabled })));
}

async function runAndWait() {
  await page.locator('#run').click();
  await page.locator('#result .field-image').waitFor({ timeout: 20000 });
  return {
    image: await page.locator('#result .field-image').textContent(),
    stdout: await page.locator('#stdout').textContent(),
  };
}

test('the picker offers the images the server lists, each only for the languages it has', { skip: !asRoot && 'importing an image needs root' }, async () => {
  await waitFor(async () => (await options()).length === 3, 10000, 'the images listed in the picker');
  assert.deepEqual((await options()).map((o) => o.value), ['', 'mini', 'host']);
  assert.equal((await options())[0].text, 'server default (host)');
  // Python is chosen: mini has no python3, so it cannot be picked.
  assert.equal(await page.locator('#language').inputValue(), 'python');
  assert.equal((await options()).find((o) => o.value === 'mini').disabled, true);

  await page.locator('#language').selectOption('bash');
  assert.equal((await options()).find((o) => o.value === 'mini').disabled, false);
  await page.locator('#image').selectOption('mini');
  await setCode(page, 'for f in /usr/bin/*; do echo "${f##*/}"; done');
  const onMini = await runAndWait();
  assert.equal(onMini.image, 'mini');
  assert.deepEqual(onMini.stdout.trim().split('\n').sort(), ['bash', 'cat']);
  assert.deepEqual(errors, []);
  await screenshot(page, 'image-picker');

  // Back to Python: the picker leaves mini for the server's default.
  await page.locator('#language').selectOption('python');
  assert.equal(await page.locator('#image').inputValue(), '');
  await setCode(page, 'import sys\nprint(sys.executable)\n');
  const onDefault = await runAndWait();
  assert.equal(onDefault.image, 'host');
  assert.equal(onDefault.stdout, '/usr/bin/python3\n');
});
