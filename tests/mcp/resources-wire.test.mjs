// Resources over the raw wire: what SDKs never send. Each case is one line
// of intent; every answer is the protocol's error, never a crash, a hang or
// a byte from outside the session. Links planted by code point at a canary
// directory made for this test (never / or /etc).
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { WireServer, assertCleanStderr, cleanStateDir, newStateDir, uniqueSessionId } from './helpers.mjs';

const stateDir = newStateDir();
const canary = mkdtempSync(path.join(tmpdir(), 'rbx-canary-'));
const SECRET = `canary-${process.pid}-${Math.random().toString(36).slice(2)}`;
writeFileSync(path.join(canary, 'secret.txt'), SECRET);
const servers = [];
const id = uniqueSessionId('wire-res');
const uri = (p) => `runbox://sessions/${id}/files/${p}`;
const TEMPLATE = 'runbox://sessions/{session_id}/files/{+path}';
let server;
let nextId = 1;

const request = (method, params) => server.request(nextId++, method, params);
const bash = (command) => request('tools/call', { name: 'execute_bash', arguments: { command, session_id: id } });
const errorOf = async (method, params) => (await request(method, params)).error;
const noCanary = (reply) => assert.ok(!JSON.stringify(reply).includes(SECRET), 'nothing of the canary comes back');

before(async () => {
  server = new WireServer(stateDir);
  servers.push(server);
  await server.initialize();
  // Links to the canary, absolute and relative, to a file and a directory;
  // a 5 MiB file (sparse: the cap is checked before reading); a FIFO.
  const made = await bash([
    'echo ok > plain.txt',
    `ln -s ${canary}/secret.txt abs-link`,
    `ln -s ${canary} dir-link`,
    `ln -s ../../../../../../../../..${canary}/secret.txt rel-link`,
    'mkdir -p sub && ln -s .. sub/up',
    'truncate -s 5M big.bin',
    'mkfifo pipe',
  ].join('; '));
  assert.equal(made.result.isError, false, JSON.stringify(made));
});

after(async () => {
  await request('tools/call', { name: 'close_session', arguments: { session_id: id } });
  for (const s of servers) if (s.child.exitCode === null) await s.close();
  const left = cleanStateDir(stateDir);
  rmSync(canary, { recursive: true, force: true });
  for (const s of servers) {
    assertCleanStderr(assert, s.stderr.text);
    assert.deepEqual(s.messages.filter((m) => m.invalidLine), []);
  }
  assert.deepEqual(left, { sessions: [], mounts: [] });
});

describe('resources/read refuses what is not a session file', () => {
  it('says -32002 for another scheme, an unknown session, and a missing file', async () => {
    for (const unknown of ['file:///etc/passwd', 'test://static-text', 'https://example.com/x',
      'runbox://sessions/no-such-session/files/a.txt', uri('missing.txt')]) {
      const error = await errorOf('resources/read', { uri: unknown });
      assert.equal(error?.code, -32002, unknown);
      assert.equal(error.data.uri, unknown);
    }
  });

  it('refuses "..", encoded slashes and dots, NUL, queries and bad escapes as invalid params', async () => {
    for (const bad of [uri('../../../etc/passwd'), uri('sub/../plain.txt'), uri('%2e%2e/x'), uri('sub%2Fup'),
      uri('sub%2fup/plain.txt'), uri('a%00b'), uri('a%zz'), uri('a%4'), uri('plain.txt?x=1'), uri('plain.txt#f'),
      uri(''), uri('a//b'), uri('./plain.txt'), 'runbox://sessions/../files/x', 'runbox://sessions/a b/files/x',
      `runbox://sessions/${id}/plain.txt`, `runbox://sessions/${id}`]) {
      const error = await errorOf('resources/read', { uri: bad });
      assert.equal(error?.code, -32602, bad);
    }
  });

  it('never follows a link planted by code, to a file or a directory, absolute or relative', async () => {
    for (const link of ['abs-link', 'rel-link', 'dir-link/secret.txt', 'sub/up/plain.txt', 'dir-link']) {
      const reply = await request('resources/read', { uri: uri(link) });
      assert.ok(reply.error, `${link} is refused`);
      noCanary(reply);
    }
    // And the listing shows neither the links nor what they point to.
    const listed = await request('resources/list', {});
    noCanary(listed);
    const names = listed.result.resources.filter((r) => r.uri.startsWith(uri(''))).map((r) => r.name).sort();
    assert.deepEqual(names, ['big.bin', 'plain.txt']);
  });

  it('refuses a file past the cap, naming the cap, and a FIFO without waiting for a writer', async () => {
    const big = await errorOf('resources/read', { uri: uri('big.bin') });
    assert.equal(big.code, -32602);
    assert.match(big.message, /5242880 bytes, more than the limit of 4194304/);
    assert.equal(big.data.maxBytes, 4194304);
    const fifo = await errorOf('resources/read', { uri: uri('pipe') });
    assert.equal(fifo.code, -32602);
    assert.match(fifo.message, /not a regular file/);
  });

  it('refuses a uri that is missing, not a string, too long or holds a NUL', async () => {
    for (const params of [{}, { uri: 5 }, { uri: null }, { uri: ['x'] }, { uri: uri('a'.repeat(3000)) },
      { uri: `${uri('plain.txt')}\u0000.png` }]) {
      assert.equal((await errorOf('resources/read', params))?.code, -32602, JSON.stringify(params).slice(0, 80));
    }
  });

  it('reads the plain file after all that', async () => {
    const reply = await request('resources/read', { uri: uri('plain.txt') });
    assert.deepEqual(reply.result.contents, [{ uri: uri('plain.txt'), mimeType: 'text/plain', text: 'ok\n' }]);
  });
});

describe('resources/list cursors', () => {
  it('refuses cursors it never handed out', async () => {
    const hex = (text) => `r1.${Buffer.from(text).toString('hex')}`;
    for (const cursor of ['', 'garbage', 'r1.zz', 'r1.4', hex('../x'), hex('a'), hex(`${id}/`), hex('a\u0000/b'),
      'r1.4142', `r1.${'41'.repeat(5000)}`, 5, null, {}, hex(`bad id!/x`)]) {
      const error = await errorOf('resources/list', { cursor });
      assert.equal(error?.code, -32602, JSON.stringify(cursor).slice(0, 60));
      assert.match(error.message, /cursor/);
    }
    assert.equal((await errorOf('resources/templates/list', { cursor: 'x' }))?.code, -32602);
  });

  it('resumes after a cursor whose file has gone', async () => {
    const cursor = `r1.${Buffer.from(`${id}/a-file-that-never-was`).toString('hex')}`;
    const page = (await request('resources/list', { cursor })).result;
    assert.deepEqual(page.resources.filter((r) => r.uri.startsWith(uri(''))).map((r) => r.name), ['big.bin', 'plain.txt']);
  });
});

describe('subscriptions', () => {
  it('accepts a subscription to a file not made yet, and refuses URIs that can name nothing', async () => {
    assert.deepEqual((await request('resources/subscribe', { uri: uri('later.txt') })).result, {});
    for (const bad of [uri('../x'), uri('a%2Fb'), 'x'.repeat(3000)]) {
      assert.equal((await errorOf('resources/subscribe', { uri: bad }))?.code, -32602, bad.slice(0, 60));
    }
    assert.equal((await errorOf('resources/subscribe', {}))?.code, -32602);
    // Unsubscribing from what was never subscribed is fine.
    assert.deepEqual((await request('resources/unsubscribe', { uri: uri('never.txt') })).result, {});
  });

  it('holds at most 256 subscriptions per client', async () => {
    const replies = [];
    for (let i = 0; i < 260; i++) replies.push(request('resources/subscribe', { uri: uri(`many/${i}`) }));
    const errors = (await Promise.all(replies)).filter((r) => r.error);
    assert.ok(errors.length >= 4, `${errors.length} refused`);
    assert.match(errors[0].error.message, /256/);
    for (let i = 0; i < 260; i++) await request('resources/unsubscribe', { uri: uri(`many/${i}`) });
  });

  it('serves subscriptions/listen (2026-07-28): acknowledged first, notifications stamped, ended by cancel', async () => {
    const listenId = `listen-${nextId++}`;
    server.send({
      jsonrpc: '2.0', id: listenId, method: 'subscriptions/listen',
      params: { notifications: { resourceSubscriptions: [uri('watched.txt')], resourcesListChanged: true, toolsListChanged: true } },
    });
    const ack = await server.next((m) => m.method === 'notifications/subscriptions/acknowledged');
    assert.deepEqual(ack.params.notifications, { resourceSubscriptions: [uri('watched.txt')], resourcesListChanged: true },
      'tools never change: not honored');
    assert.equal(ack.params._meta['io.modelcontextprotocol/subscriptionId'], listenId);
    await bash('echo 1 > watched.txt');
    const stamped = (m) => m.params?._meta?.['io.modelcontextprotocol/subscriptionId'] === listenId;
    const update = await server.next((m) => m.method === 'notifications/resources/updated' && stamped(m));
    assert.equal(update.params.uri, uri('watched.txt'));
    await server.next((m) => m.method === 'notifications/resources/list_changed' && stamped(m));
    // A second stream with the same id is refused; a bad filter too.
    assert.equal((await server.request(listenId, 'subscriptions/listen', { notifications: {} })).error.code, -32600);
    assert.equal((await errorOf('subscriptions/listen', { notifications: { resourceSubscriptions: 'x' } }))?.code, -32602);
    assert.equal((await errorOf('subscriptions/listen', {}))?.code, -32602);
    // Cancelled: nothing more on it, and no response.
    server.send({ jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: listenId } });
    const before = server.messages.length;
    await bash('echo 2 > watched.txt; rm watched.txt');
    assert.equal(server.messages.slice(before).filter((m) => stamped(m) || m.id === listenId).length, 0);
  });

  it('ends open listen streams with their result when the server stops', async () => {
    const other = new WireServer(stateDir);
    servers.push(other);
    await other.initialize();
    const ids = [];
    for (let i = 0; i < 17; i++) {
      ids.push(`s${i}`);
      other.send({ jsonrpc: '2.0', id: `s${i}`, method: 'subscriptions/listen', params: { notifications: { resourcesListChanged: true } } });
    }
    const refused = await other.reply('s16');
    assert.match(refused.error.message, /16 listen streams/);
    await other.close();
    for (const listen of ids.slice(0, 16)) {
      const end = other.messages.find((m) => m.id === listen && m.result);
      assert.equal(end?.result._meta['io.modelcontextprotocol/subscriptionId'], listen);
    }
  });
});

describe('logging and completion', () => {
  it('refuses an unknown level', async () => {
    for (const params of [{}, { level: 'verbose' }, { level: 3 }, { level: 'WARNING' }]) {
      assert.equal((await errorOf('logging/setLevel', params))?.code, -32602, JSON.stringify(params));
    }
  });

  it('sends the messages about one call when its _meta asks for them (MCP 2026-07-28), without setLevel', async () => {
    const other = new WireServer(stateDir);
    servers.push(other);
    await other.initialize();
    const refuse = (rid, meta) => other.request(rid, 'tools/call', {
      name: 'execute_bash', arguments: { command: 'true', image: 'no-such-image' }, ...(meta ? { _meta: meta } : {}),
    });
    await refuse('quiet');
    await refuse('too-high', { 'io.modelcontextprotocol/logLevel': 'error' });
    await refuse('unknown', { 'io.modelcontextprotocol/logLevel': 'loud' });
    assert.equal(other.messages.filter((m) => m.method === 'notifications/message').length, 0);
    await refuse('asked', { 'io.modelcontextprotocol/logLevel': 'warning' });
    const message = await other.next((m) => m.method === 'notifications/message');
    assert.deepEqual([message.params.level, message.params.data.event], ['warning', 'execution_refused']);
    await other.close();
  });

  it('refuses malformed completion requests and completes nothing for unknown refs', async () => {
    for (const params of [{}, { ref: { type: 'ref/resource', uri: TEMPLATE } }, { argument: { name: 'x', value: '' } },
      { ref: { type: 'ref/tool', name: 'execute_python' }, argument: { name: 'language', value: '' } },
      { ref: { type: 'ref/resource', uri: TEMPLATE }, argument: { name: 'session_id', value: 5 } },
      { ref: { type: 'ref/resource', uri: TEMPLATE }, argument: { name: 'path', value: '' }, context: 'x' }]) {
      assert.equal((await errorOf('completion/complete', params))?.code, -32602, JSON.stringify(params));
    }
    const other = await request('completion/complete', {
      ref: { type: 'ref/resource', uri: 'test://template/{id}/data' }, argument: { name: 'id', value: '' },
    });
    assert.deepEqual(other.result.completion.values, []);
    const path = await request('completion/complete', {
      ref: { type: 'ref/resource', uri: TEMPLATE }, argument: { name: 'path', value: '' },
      context: { arguments: { session_id: '../../etc' } },
    });
    assert.deepEqual(path.result.completion.values, []);
  });

  it('answers none of these before initialize', async () => {
    const early = new WireServer(stateDir);
    servers.push(early);
    for (const method of ['resources/list', 'resources/read', 'resources/subscribe', 'subscriptions/listen',
      'logging/setLevel', 'completion/complete', 'resources/templates/list']) {
      assert.equal((await early.request(method, method, {})).error.code, -32600, method);
    }
    await early.close();
  });
});
