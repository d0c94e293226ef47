// The page itself: served without a token (it holds no data) under a
// strict Content-Security-Policy; asks for the token on the API's 401,
// refuses a wrong one visibly, keeps the right one in this tab only; every
// control labelled and reachable with Tab.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import {
  TOKEN, apiJSON, giveToken, launch, openPage, screenshot, signIn, startServer, stopServer, waitFor,
} from './helpers.mjs';

let server;
let browser;

before(async () => {
  server = await startServer();
  browser = await launch();
  // Something the page could show, once it may.
  assert.equal((await apiJSON(server, '/v1/sessions', {
    method: 'POST', headers: { 'Content-Type': 'application/json' }, body: '{"session_id":"kept"}',
  })).status, 201);
});

after(async () => {
  await browser?.close();
  const mounts = await stopServer(server);
  assert.deepEqual(mounts, [], 'the server left mounts behind');
});

test('a request answered 401 after the token was given is sent again with it, not asked again', async () => {
  // The page's first requests all go without a token; one of them (the first
  // /metrics) is held back so that its 401 comes after the token was given,
  // as a slow server's does.
  let held = false;
  const { page, context, errors } = await openPage(browser, server, {
    beforeGoto: (p) => p.route('**/metrics', async (route) => {
      if (!held) {
        held = true;
        await new Promise((resolve) => setTimeout(resolve, 1500));
      }
      await route.continue();
    }),
  });
  await giveToken(page, TOKEN);
  await page.locator('#token-dialog').waitFor({ state: 'hidden', timeout: 5000 });
  await page.locator('[data-metric="runbox_executions_running"]').waitFor({ timeout: 10000 });
  assert.equal(held, true, 'the first /metrics was not held back');
  assert.equal(await page.locator('#token-dialog').isVisible(), false, 'the page asked for the token again');
  await context.close();
  assert.deepEqual(errors, []);
});

test('the page and its two files are served without a token, with a CSP', async () => {
  const page = await fetch(`${server.url}/`);
  assert.equal(page.status, 200);
  assert.match(page.headers.get('content-type'), /^text\/html/);
  assert.match(page.headers.get('content-security-policy') || '', /script-src 'self'/);
  const html = await page.text();
  assert.match(html, /src="\/playground\/app\.js"/);
  assert.doesNotMatch(html, /<script>|\son[a-z]+=/i, 'inline script or handler');
  for (const [route, type] of [['/playground/app.js', /javascript/], ['/playground/app.css', /^text\/css/]]) {
    const response = await fetch(`${server.url}${route}`);
    assert.equal(response.status, 200, route);
    assert.match(response.headers.get('content-type'), type, route);
  }
  assert.equal((await fetch(`${server.url}/v1/sessions`)).status, 401, 'the API itself still wants the token');
});

test('a wrong token is refused and shows nothing; the right one works and stays in sessionStorage', async () => {
  const { page, context, errors } = await openPage(browser, server);
  await page.locator('#token-dialog').waitFor({ state: 'visible', timeout: 10000 });
  assert.match(await page.locator('#token-message').textContent(), /401/);
  await screenshot(page, 'token-prompt');

  await giveToken(page, 'not-the-token');
  await waitFor(async () => /Token refused/.test(await page.locator('#token-message').textContent()), 5000, 'the refusal');
  assert.equal(await page.locator('#token-dialog').isVisible(), true, 'the form should ask again');
  assert.equal(await page.locator('#sessions tbody tr').count(), 0, 'sessions shown without a valid token');
  assert.equal(await page.evaluate(() => sessionStorage.getItem('runbox.token')), null, 'a refused token was kept');
  assert.equal(await page.locator('#token-input').evaluate((input) => input === document.activeElement), true);
  await screenshot(page, 'token-refused');

  await giveToken(page, TOKEN);
  await page.locator('#token-dialog').waitFor({ state: 'hidden', timeout: 5000 });
  await page.locator('#sessions tbody tr[data-session="kept"]').waitFor({ timeout: 10000 });
  assert.equal(await page.evaluate(() => sessionStorage.getItem('runbox.token')), TOKEN);
  assert.equal(await page.evaluate(() => localStorage.length), 0, 'something went to localStorage');
  await page.locator('[data-metric="runbox_executions_running"]').waitFor({ timeout: 10000 });

  // The tab keeps it across a reload; another tab asks again.
  await page.reload();
  await page.locator('#sessions tbody tr[data-session="kept"]').waitFor({ timeout: 10000 });
  assert.equal(await page.locator('#token-dialog').isVisible(), false);
  const other = await openPage(browser, server);
  await other.page.locator('#token-dialog').waitFor({ state: 'visible', timeout: 10000 });
  await other.context.close();
  await context.close();
  assert.deepEqual(errors, []);
});

test('every control has a label, and Tab reaches the editor, the run bar and the panels', async () => {
  const { page, context, errors } = await openPage(browser, server);
  await signIn(page);
  await page.locator('#sessions tbody tr[data-session="kept"]').waitFor({ timeout: 10000 });
  const unlabelled = await page.locator('button, select, input, [contenteditable="true"]').evaluateAll((nodes) =>
    nodes.filter((node) => {
      const named = node.getAttribute('aria-label') || node.getAttribute('aria-labelledby')
        || (node.labels && node.labels.length > 0) || (node.tagName === 'BUTTON' && node.textContent.trim());
      return !named;
    }).map((node) => node.outerHTML.slice(0, 80)));
  assert.deepEqual(unlabelled, []);

  await page.locator('body').click({ position: { x: 5, y: 5 } });
  const reached = new Set();
  for (let i = 0; i < 40; i++) {
    await page.keyboard.press('Tab');
    reached.add(await page.evaluate(() => {
      const active = document.activeElement;
      return active.id || (active.classList.contains('cm-content') ? 'editor' : active.getAttribute('aria-label') || active.tagName);
    }));
  }
  for (const id of ['language', 'session', 'stateful', 'timeout', 'run', 'editor', 'sessions-refresh',
    'session-new-id', 'Use session kept', 'Remove session kept']) {
    assert.ok(reached.has(id), `Tab never reached ${id}: ${[...reached].join(', ')}`);
  }

  // Ctrl+Enter runs from outside the editor as well.
  await page.locator('#language').focus();
  await page.keyboard.press('Control+Enter');
  await page.locator('#result .status-ok').waitFor({ timeout: 15000 });
  assert.match(await page.locator('#stdout').textContent(), /line 2/);
  await context.close();
  assert.deepEqual(errors, []);
});
