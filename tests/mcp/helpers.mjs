// Shared by the MCP tests: where runbox is, a private state directory per
// test file, the server's stderr (checked for sanitizer reports), the
// processes of /proc, and the cleanup that leaves no session mounted.
import { spawn } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { cleanStateDir as cleanWith, sleep, waitFor } from '../lib/nodetest.mjs';

export { sleep, waitFor };

const here = path.dirname(fileURLToPath(import.meta.url));
export const RUNBOX = process.env.RUNBOX_BIN || path.resolve(here, '../../build/runbox');

// What a sanitizer build prints when it finds a bug: always a failure.
const SANITIZER_REPORT = /ERROR: AddressSanitizer|ERROR: LeakSanitizer|runtime error:/;

export function newStateDir() {
  return mkdtempSync(path.join(tmpdir(), 'rbx-mcp-'));
}

// The environment the server gets: a private state directory, and the
// sanitizer options of the caller when there are any, and the image store it names.
export function serverEnv(stateDir) {
  const env = { PATH: process.env.PATH, HOME: process.env.HOME || '/root', RUNBOX_STATE_DIR: stateDir };
  for (const name of ['ASAN_OPTIONS', 'UBSAN_OPTIONS', 'LSAN_OPTIONS', 'RUNBOX_IMAGES']) {
    if (process.env[name]) env[name] = process.env[name];
  }
  return env;
}

// Collects a stream's text (the server's stderr) for later checks.
export function collect(stream) {
  const log = { text: '' };
  stream.setEncoding('utf8');
  stream.on('data', (chunk) => { log.text += chunk; });
  return log;
}

export function assertCleanStderr(assert, text) {
  const report = text.match(SANITIZER_REPORT);
  assert.equal(report, null, `the server's stderr has a sanitizer report:\n${text}`);
}

// Pids of the processes whose command line contains every part, in order.
export function processesRunning(...parts) {
  const wanted = parts.join('\0');
  const pids = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      if (readFileSync(`/proc/${entry}/cmdline`, 'latin1').includes(wanted)) pids.push(Number(entry));
    } catch {
      // the process ended while we looked
    }
  }
  return pids;
}


export function uniqueSessionId(prefix) {
  return `${prefix}-${process.pid}-${Math.random().toString(36).slice(2, 10)}`;
}

// Removes what a test left in its state directory (tests/lib/nodetest.mjs).
export const cleanStateDir = (stateDir) => cleanWith(RUNBOX, stateDir);

// A server spoken to over the raw wire: one JSON object per line each way.
// Every line it writes must be valid UTF-8 and valid JSON.
export class WireServer {
  constructor(stateDir) {
    this.child = spawn(RUNBOX, ['mcp'], { env: serverEnv(stateDir), stdio: ['pipe', 'pipe', 'pipe'] });
    this.stderr = collect(this.child.stderr);
    this.messages = [];
    this.waiters = [];
    this.pending = Buffer.alloc(0);
    this.decoder = new TextDecoder('utf-8', { fatal: true });
    this.exited = new Promise((resolve) => this.child.on('exit', (code, signal) => resolve({ code, signal })));
    this.child.stdout.on('data', (chunk) => this.take(chunk));
  }

  take(chunk) {
    this.pending = Buffer.concat([this.pending, chunk]);
    let newline;
    while ((newline = this.pending.indexOf(0x0a)) >= 0) {
      const line = this.pending.subarray(0, newline);
      this.pending = this.pending.subarray(newline + 1);
      let message;
      try {
        message = JSON.parse(this.decoder.decode(line));
      } catch (error) {
        message = { invalidLine: String(error), raw: line.toString('latin1') };
      }
      message.receivedAt = Date.now();
      this.messages.push(message);
      this.waiters = this.waiters.filter((waiter) => !waiter(message));
    }
  }

  send(message) {
    this.child.stdin.write(typeof message === 'string' ? message : `${JSON.stringify(message)}\n`);
  }

  // The first message (already received or still to come) that matches.
  next(match, timeoutMs = 10000) {
    const seen = this.messages.find(match);
    if (seen) return Promise.resolve(seen);
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`no matching message within ${timeoutMs} ms`)), timeoutMs);
      this.waiters.push((message) => {
        if (!match(message)) return false;
        clearTimeout(timer);
        resolve(message);
        return true;
      });
    });
  }

  reply(id, timeoutMs) {
    return this.next((m) => 'id' in m && m.id === id && !('method' in m), timeoutMs);
  }

  request(id, method, params) {
    this.send({ jsonrpc: '2.0', id, method, ...(params === undefined ? {} : { params }) });
    return this.reply(id);
  }

  async initialize(protocolVersion = '2025-11-25') {
    const reply = await this.request('init', 'initialize', {
      protocolVersion,
      capabilities: {},
      clientInfo: { name: 'runbox-wire-test', version: '1' },
    });
    this.send({ jsonrpc: '2.0', method: 'notifications/initialized' });
    return reply;
  }

  async close() {
    this.child.stdin.end();
    return this.exited;
  }
}

// `runbox serve` for the HTTP transport's tests (/mcp): a free loopback
// port (port 0: the server names it in its first log line), a private
// state directory, the token when one is given, and extra serve options.
export async function startServe({ token, args = [] } = {}) {
  const stateDir = newStateDir();
  const env = serverEnv(stateDir);
  if (token) env.RUNBOX_TOKEN = token;
  const child = spawn(RUNBOX, ['serve', '--listen', '127.0.0.1:0', '--grace', '2', ...args],
    { env, stdio: ['ignore', 'ignore', 'pipe'] });
  const exited = new Promise((resolve) => child.on('exit', (code, signal) => resolve({ code, signal })));
  const stderr = collect(child.stderr);
  const base = await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`runbox serve did not start:\n${stderr.text}`)), 15000);
    const look = () => {
      const listening = /"event":"listening","listen":"([^"]+)"/.exec(stderr.text);
      if (!listening) return;
      clearTimeout(timer);
      resolve(`http://${listening[1]}`);
    };
    child.stderr.on('data', look);
    child.on('exit', () => reject(new Error(`runbox serve exited:\n${stderr.text}`)));
  });
  return { base, url: `${base}/mcp`, stateDir, child, exited, stderr, token };
}

// SIGTERM, a clean exit (no sanitizer report), then the state directory.
export async function stopServe(assert, server) {
  if (server.child.exitCode === null && server.child.signalCode === null) {
    server.child.kill('SIGTERM');
    const timer = setTimeout(() => server.child.kill('SIGKILL'), 15000);
    await server.exited;
    clearTimeout(timer);
  }
  const { code, signal } = await server.exited;
  assertCleanStderr(assert, server.stderr.text);
  assert.deepEqual({ code, signal }, { code: 0, signal: null }, `runbox serve stopped cleanly:\n${server.stderr.text.slice(-3000)}`);
  return cleanStateDir(server.stateDir);
}

// The server's RSS in KiB, from /proc.
export function rssKiB(pid) {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  return Number(/VmRSS:\s+(\d+)/.exec(status)[1]);
}

// One value of the server's /metrics.
export async function metric(server, name) {
  const headers = server.token ? { Authorization: `Bearer ${server.token}` } : {};
  const text = await (await fetch(`${server.base}/metrics`, { headers })).text();
  const line = text.split('\n').find((l) => l.startsWith(`${name} `));
  return line === undefined ? undefined : Number(line.split(' ')[1]);
}
