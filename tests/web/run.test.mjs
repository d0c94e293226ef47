// Running code from the page: output streams as it is produced, Stop (and
// Escape) kills the run on the server, and nothing from the output is ever
// run as markup or script.
import assert from 'node:assert/strict';
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

test('output streams line by line before the run ends (Ctrl+Enter from the editor)', async () => {
  await page.locator('.cm-content').click();
  await page.keyboard.press('Control+A');
  await page.keyboard.press('Delete');
  // Typed key by key, as a person would.
  await page.keyboard.type("import time\nprint('first', flush=True)\ntime.sleep(2)\nprint('second')\n");
  await page.keyboard.press('Control+Enter');

  const stdout = page.locator('#stdout');
  await waitFor(async () => (await stdout.textContent()).includes('first'), 10000, '"first" in stdout');
  const firstSeen = Date.now();
  assert.ok(!(await stdout.textContent()).includes('second'), '"second" shown before the program printed it');
  assert.equal(await page.locator('#stop').isEnabled(), true, 'the run is not going on any more');
  assert.match(await page.locator('#result').textContent(), /running/);
  await screenshot(page, 'editor-streaming');

  await waitFor(async () => (await stdout.textContent()).includes('second'), 10000, '"second" in stdout');
  await page.locator('#result .status-ok').waitFor({ timeout: 10000 });
  assert.ok(Date.now() - firstSeen > 1200, '"first" came no earlier than the whole output');
  assert.equal(await stdout.textContent(), 'first\nsecond\n');
  assert.equal(await page.locator('#result .field-exit_code').textContent(), '0');
  assert.equal(await page.locator('#result .field-success').textContent(), 'true');
  assert.match(await page.locator('#result .field-duration_ms').textContent(), /^\d+$/);
  assert.equal(await page.locator('#stop').isEnabled(), false);
  await screenshot(page, 'editor-result');
});

test('stderr is shown apart from stdout, and an error is classified', async () => {
  await setCode(page, "import sys\nprint('to out')\nprint('to err', file=sys.stderr)\n1/0\n");
  await page.locator('#run').click();
  await page.locator('#result .status-failed').waitFor({ timeout: 15000 });
  assert.equal(await page.locator('#stdout').textContent(), 'to out\n');
  assert.match(await page.locator('#stderr').textContent(), /to err\n[\s\S]*ZeroDivisionError/);
  assert.equal(await page.locator('#result .error-type').textContent(), 'RuntimeError');
  assert.match(await page.locator('#result .exception').textContent(), /ZeroDivisionError/);

  await setCode(page, 'print("unclosed"\n');
  await page.locator('#run').click();
  await page.locator('#result .status-failed').waitFor({ timeout: 15000 });
  assert.equal(await page.locator('#result .error-type').textContent(), 'SyntaxError');

  await setCode(page, 'import no_such_module_here\n');
  await page.locator('#run').click();
  await page.locator('#result .status-failed').waitFor({ timeout: 15000 });
  assert.equal(await page.locator('#result .error-type').textContent(), 'ImportError');
});

test('Stop kills a running execution: the page says stopped and the session runs nothing', async () => {
  await createSession(page, 'stop-me');
  await setCode(page, "import time\nprint('started', flush=True)\ntime.sleep(120)\n");
  await page.locator('#run').click();
  await waitFor(async () => (await page.locator('#stdout').textContent()).includes('started'), 15000, '"started"');
  assert.equal((await apiJSON(server, '/v1/sessions/stop-me')).body.running, true, 'the session should be running');

  const pressed = Date.now();
  await page.locator('#stop').click();
  await page.locator('#result .status-stopped').waitFor({ timeout: 2000 });
  assert.ok(Date.now() - pressed < 2000);
  assert.match(await page.locator('#result').textContent(), /stopped/);
  await waitFor(async () => (await apiJSON(server, '/v1/sessions/stop-me')).body.running === false,
    5000, 'the session to stop running');

  // Escape stops too, from inside the editor.
  await page.locator('#run').click();
  await waitFor(async () => (await page.locator('#stdout').textContent()).includes('started'), 15000, '"started" again');
  await page.locator('.cm-content').press('Escape');
  await page.locator('#result .status-stopped').waitFor({ timeout: 2000 });
  await waitFor(async () => (await apiJSON(server, '/v1/sessions/stop-me')).body.running === false,
    5000, 'the session to stop running after Escape');
});

test('output that looks like HTML is shown as text, never run', async () => {
  await page.locator('#session').selectOption('');
  await setCode(page, [
    "import sys",
    "print('<script>window.__pwned=1</script>')",
    "print('<img src=x onerror=\"window.__pwned=2\">')",
    "print('<b>bold</b>')",
    "print('<img src=x onerror=\"window.__pwned=3\">', file=sys.stderr)",
    '',
  ].join('\n'));
  await page.locator('#run').click();
  await page.locator('#result .status-ok').waitFor({ timeout: 15000 });
  assert.equal(await page.locator('#stdout').textContent(),
    '<script>window.__pwned=1</script>\n<img src=x onerror="window.__pwned=2">\n<b>bold</b>\n');
  // What is seen, not only what the DOM holds: the characters themselves.
  assert.match(await page.locator('#stdout').innerText(), /^<script>window.__pwned=1<\/script>\n<img src=x/);
  assert.equal(await page.locator('#stderr').textContent(), '<img src=x onerror="window.__pwned=3">\n');
  assert.equal(await page.locator('#stdout *, #stderr *, #result b').count(), 0, 'output became elements');
  await page.waitForTimeout(300); // an image that fails to load would fire its onerror by now
  assert.equal(await page.evaluate(() => window.__pwned), undefined);
});

test('a matplotlib plot of a stateful run appears as an image', async () => {
  await createSession(page, 'plot');
  await page.locator('#stateful').check();
  await setCode(page, 'import matplotlib.pyplot as plt\nplt.plot([1, 4, 9])\n');
  await page.keyboard.press('Control+Enter');
  await page.locator('#result .status-ok').waitFor({ timeout: 30000 });
  const image = page.locator('#rich img');
  assert.equal(await image.count(), 1);
  assert.match(await image.getAttribute('src'), /^data:image\/png;base64,iVBORw0KGgo/);
  await waitFor(() => image.evaluate((img) => img.complete), 5000, 'the image to load');
  const size = await image.evaluate((img) => [img.naturalWidth, img.naturalHeight]);
  assert.ok(size[0] > 100 && size[1] > 100, `the PNG did not decode: ${size}`);
  // The last expression's value is there too, as text.
  assert.match(await page.locator('#rich').textContent(), /Line2D/);
  assert.equal(await page.locator('#result .field-stateful').textContent(), 'true');
  await image.scrollIntoViewIfNeeded();
  await screenshot(page, 'plot');
  await page.locator('#stateful').uncheck();
});

test('a matplotlib plot of a one-off run appears as an image too', async () => {
  assert.equal(await page.locator('#stateful').isChecked(), false);
  await setCode(page, "import matplotlib.pyplot as plt\nplt.plot([9, 4, 1])\nplt.show()\nprint('shown')\n");
  await page.keyboard.press('Control+Enter');
  await page.locator('#result .status-ok').waitFor({ timeout: 30000 });
  assert.equal(await page.locator('#result .field-stateful').textContent(), 'false');
  assert.equal(await page.locator('#stdout').textContent(), 'shown\n');
  const image = page.locator('#rich img');
  assert.equal(await image.count(), 1);
  assert.match(await image.getAttribute('src'), /^data:image\/png;base64,iVBORw0KGgo/);
  await waitFor(() => image.evaluate((img) => img.complete), 5000, 'the image to load');
  const size = await image.evaluate((img) => [img.naturalWidth, img.naturalHeight]);
  assert.ok(size[0] > 100 && size[1] > 100, `the PNG did not decode: ${size}`);
});

test('HTML rich output renders in a sandboxed iframe that runs no script', async () => {
  await createSession(page, 'html');
  await page.locator('#stateful').check();
  await setCode(page, [
    'class Page:',
    '    def _repr_html_(self):',
    "        return ('<b id=\"inner\">rich</b>'",
    "                '<script>document.body.append(\"SCRIPT RAN\"); parent.__pwned = 4</script>'",
    "                '<img src=x onerror=\"document.body.append(\\'HANDLER RAN\\')\">')",
    'display(Page())',
    '',
  ].join('\n'));
  await page.locator('#run').click();
  await page.locator('#result .status-ok').waitFor({ timeout: 30000 });
  const frame = page.locator('#rich iframe');
  assert.equal(await frame.count(), 1);
  assert.equal(await frame.getAttribute('sandbox'), '', 'the iframe may do nothing (no allow-scripts)');
  const inside = page.frameLocator('#rich iframe');
  assert.equal(await inside.locator('#inner').textContent(), 'rich');
  await page.waitForTimeout(300);
  // innerText: what is rendered (a script element's source is not).
  const text = await inside.locator('body').innerText();
  assert.ok(!text.includes('SCRIPT RAN') && !text.includes('HANDLER RAN'), `a script ran in the iframe: ${text}`);
  assert.equal(await page.evaluate(() => window.__pwned), undefined);
  await page.locator('#stateful').uncheck();
});

test('a stateful one-off run keeps its session, so the next run finds its variables', async () => {
  await page.locator('#session').selectOption('');
  await page.locator('#stateful').check();
  await setCode(page, 'answer = 41\n');
  await page.locator('#run').click();
  await page.locator('#result .status-ok').waitFor({ timeout: 30000 });
  const made = await page.locator('#result .field-session_id').textContent();
  assert.match(made, /^rbx-/);
  await waitFor(async () => (await page.locator('#session').inputValue()) === made, 10000,
    `the page to take up session ${made}`);
  await setCode(page, 'answer + 1\n');
  await page.locator('#run').click();
  await page.locator('#result .status-ok').waitFor({ timeout: 30000 });
  assert.equal(await page.locator('#result .field-session_id').textContent(), made);
  assert.equal(await page.locator('#rich .rich-text').last().textContent(), '42');
  await page.locator('#stateful').uncheck();
  await page.locator('#session').selectOption('');
});

test('the page itself broke no rule (no script error, no CSP refusal)', () => {
  assert.deepEqual(errors, []);
});

test('TypeScript runs from the page: its types stripped, an enum refused before it runs', async () => {
  await page.locator('#language').selectOption('typescript');
  await setCode(page, 'const n: number = 41;\nconsole.log(n + 1);\n');
  await page.locator('#run').click();
  await page.locator('#result .status-ok').waitFor({ timeout: 15000 });
  assert.equal(await page.locator('#stdout').textContent(), '42\n');
  await setCode(page, 'enum Color { Red }\nconsole.log("ran");\n');
  await page.locator('#run').click();
  await page.locator('#result .status-failed').waitFor({ timeout: 15000 });
  assert.equal(await page.locator('#result .error-type').textContent(), 'SyntaxError');
  assert.equal(await page.locator('#stdout').textContent(), '');
  await page.locator('#language').selectOption('python');
});
