// Shared by the playground's browser tests: a real `runbox serve` with a
// token and a private state directory, headless Chromium driven by
// playwright-core (from web/node_modules), and the cleanup that leaves no
// process, session or mount behind.
import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { cleanStateDir, sleep, waitFor } from '../lib/nodetest.mjs';

export { sleep, waitFor };

const here = path.dirname(fileURLToPath(import.meta.url));
const root = path.resolve(here, '../..');
export const RUNBOX = path.resolve(root, process.env.RUNBOX_BIN || 'build/runbox');
export const SCREENSHOTS = path.resolve(root, process.env.RBX_SCREENSHOTS || 'build/screenshots');
export const CHROMIUM = process.env.RBX_CHROMIUM || '/usr/bin/chromium';
export const TOKEN = `tok-${process.pid}-${Math.random().toString(36).slice(2, 10)}`;

// playwright-core is a devDependency of web/ (npm ci --prefix web).
const require = createRequire(path.join(root, 'web', 'package.json'));
const { chromium } = require('playwright-core');

// Starts `runbox serve` on a free loopback port (port 0: the server names
// the one it got in its first log line), with globalArgs before `serve`.
export async function startServer({ globalArgs = [] } = {}) {
  const stateDir = mkdtempSync(path.join(tmpdir(), 'rbx-web-'));
  const args = [...globalArgs, '--state-dir', stateDir, 'serve', '--listen', '127.0.0.1:0', '--grace', '2'];
  const child = spawn(RUNBOX, args, {
    // RUNBOX_IMAGES: the image store the run's servers use (make test: the system's, whose
    // default image users get); --images in globalArgs names another.
    env: { PATH: process.env.PATH, HOME: process.env.HOME || '/root', RUNBOX_TOKEN: TOKEN,
      ...(process.env.RUNBOX_IMAGES ? { RUNBOX_IMAGES: process.env.RUNBOX_IMAGES } : {}) },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  const exited = new Promise((resolve) => child.on('exit', (code, signal) => resolve({ code, signal })));
  let log = '';
  const url = await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`runbox serve did not start:\n${log}`)), 15000);
    child.stderr.setEncoding('utf8');
    child.stderr.on('data', (chunk) => {
      log += chunk;
      const listening = /"event":"listening","listen":"([^"]+)"/.exec(log);
      if (listening) {
        clearTimeout(timer);
        resolve(`http://${listening[1]}`);
      }
    });
    child.on('exit', () => reject(new Error(`runbox serve exited:\n${log}`)));
  });
  return { url, stateDir, child, exited, log: () => log };
}

// SIGTERM, wait for the exit, then remove the sessions (each a mounted
// disk as root) and the state directory. Returns the mounts that stayed.
export async function stopServer(server) {
  if (!server) return [];
  if (server.child.exitCode === null && server.child.signalCode === null) {
    server.child.kill('SIGTERM');
    const timer = setTimeout(() => server.child.kill('SIGKILL'), 10000);
    await server.exited;
    clearTimeout(timer);
  }
  // A clean stop, and (under ASan and UBSan) no report of either.
  const { code, signal } = await server.exited;
  const sanitizer = /ERROR: (Address|Leak)Sanitizer|runtime error:/.test(server.log());
  const unclean = code !== 0 || signal !== null || sanitizer
    ? `runbox serve stopped with code ${code}, signal ${signal}${sanitizer ? ', a sanitizer report' : ''}:\n${server.log().slice(-4000)}`
    : null;
  const { mounts } = cleanStateDir(RUNBOX, server.stateDir);
  if (unclean) throw new Error(unclean);
  return mounts;
}

// The API from the test's side, with the right token.
export async function apiJSON(server, route, options = {}) {
  const response = await fetch(`${server.url}${route}`, {
    ...options,
    headers: { Authorization: `Bearer ${TOKEN}`, ...(options.headers || {}) },
  });
  const body = await response.json();
  return { status: response.status, body };
}

export async function launch() {
  return chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox'] });
}

// A fresh tab (its own sessionStorage) on the playground. Errors of the
// page's own code are collected: a test fails on any. beforeGoto(page) runs
// before the page loads (to route its requests).
export async function openPage(browser, server, { beforeGoto } = {}) {
  const context = await browser.newContext({ viewport: { width: 1200, height: 800 }, acceptDownloads: true });
  const page = await context.newPage();
  const errors = [];
  page.on('pageerror', (error) => errors.push(String(error)));
  page.on('console', (message) => {
    if (message.type() === 'error' && /Content.Security.Policy|Refused to/i.test(message.text())) errors.push(message.text());
  });
  if (beforeGoto) await beforeGoto(page);
  await page.goto(`${server.url}/`);
  return { page, context, errors };
}

// Answers the token form the page shows on the API's first 401.
export async function giveToken(page, token = TOKEN) {
  await page.locator('#token-input').waitFor({ state: 'visible', timeout: 10000 });
  await page.locator('#token-input').fill(token);
  await page.locator('#token-input').press('Enter');
}

export async function signIn(page) {
  await giveToken(page);
  await page.locator('#token-dialog').waitFor({ state: 'hidden', timeout: 10000 });
}

// Replaces the editor's text (as a paste would: no auto-indent or closing
// brackets in between).
export async function setCode(page, code) {
  await page.locator('.cm-content').click();
  await page.keyboard.press('Control+A');
  await page.keyboard.press('Delete');
  await page.keyboard.insertText(code);
}

// Creates a session through the page's form; the page then uses it.
export async function createSession(page, id) {
  await page.locator('#session-new-id').fill(id);
  await page.locator('#session-create button[type="submit"]').click();
  await page.locator('#session').locator(`option[value="${id}"]`).waitFor({ state: 'attached', timeout: 10000 });
  await waitFor(async () => (await page.locator('#session').inputValue()) === id, 5000, `session ${id} chosen`);
}

export async function screenshot(page, name) {
  mkdirSync(SCREENSHOTS, { recursive: true });
  await page.screenshot({ path: path.join(SCREENSHOTS, `${name}.png`) });
}
